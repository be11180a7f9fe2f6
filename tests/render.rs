//! Generated dispatchers, verified for real: the C++ header is compiled with g++ (-std=c++17 -Wall -Wextra
//! -Werror, UB sanitizer) against the stand-in declarations rendered from templates/check/, the Rust
//! module with rustc (-D warnings, overflow checks on), and both are run on the same random shapes as the
//! rule interpreter; all three must pick the same (kernelId, splitK) everywhere. Plus exact-text checks
//! of the header, the instance CSV on a hand-built latency matrix, and the --check freshness mode.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use proptest::strategy::{Strategy, ValueTree};
use rand::{Rng, SeedableRng};
use synth_core::catalog::{Candidate, Catalog};
use synth_core::render::{self, cpp, Provenance, StaleFiles};
use synth_core::rule::{BinOp, CmpOp, Cond, Expr, Leaf, Node, Rule};
use synth_core::table::{Cell, LatencyMatrix, Shape};

// ---------------------------------------------------------------------------------------------------
// Rule construction helpers.

use synth_core::rule::ir::build::{k, lit, m, n};
fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::bin(op, a, b)
}
fn cmp(op: CmpOp, a: Expr, b: Expr) -> Cond {
    Cond::cmp(op, a, b)
}
fn leaf(id: i32, sk: u32) -> Node {
    Node::Leaf(Leaf::new(id, sk))
}
fn chain(branches: Vec<(Cond, Node)>, otherwise: Node) -> Node {
    Node::Chain { branches, otherwise: Box::new(otherwise) }
}

fn provenance() -> Provenance {
    Provenance {
        dataset: "tests (hand-written rule)".into(),
        training: "none".into(),
        figures: vec!["not measured".into()],
        command: "cargo test --test render".into(),
    }
}

/// Division by zero, cdiv with non-positive divisors, truncating division of negatives, wrapping
/// multiplication, i64::MIN / -1, min/max, negation and constant conditions. Expected picks at the
/// shapes of [`EDGE_EXPECTED`] are worked out by hand in the comments.
fn edge_rule() -> Rule {
    let zero_m = bin(BinOp::Mul, m(), lit(0)); // 0, but not a constant expression
    Rule::new(chain(
        vec![
            // cdiv(M, 0) = 0 and M / 0 = 0: never taken.
            (
                Cond::Or(vec![
                    cmp(CmpOp::Ne, bin(BinOp::CeilDiv, m(), lit(0)), lit(0)),
                    cmp(CmpOp::Ne, bin(BinOp::Div, m(), lit(0)), lit(0)),
                ]),
                leaf(18, 0),
            ),
            // cdiv(M, -5) = 0 (non-positive divisor): never taken.
            (cmp(CmpOp::Ne, bin(BinOp::CeilDiv, m(), lit(-5)), lit(0)), leaf(17, 0)),
            // (M - M - 7) / 2 = -3 (truncation toward zero, not -4): taken for M <= 3.
            (
                Cond::And(vec![
                    cmp(
                        CmpOp::Eq,
                        bin(BinOp::Div, bin(BinOp::Sub, bin(BinOp::Sub, m(), m()), lit(7)), lit(2)),
                        lit(-3),
                    ),
                    cmp(CmpOp::Le, m(), lit(3)),
                ]),
                leaf(1, 0),
            ),
            // 4 * 2^62 wraps to 0: taken for M = 4.
            (
                Cond::And(vec![
                    cmp(CmpOp::Eq, bin(BinOp::Mul, m(), lit(1 << 62)), lit(0)),
                    cmp(CmpOp::Eq, m(), lit(4)),
                ]),
                leaf(2, 1),
            ),
            // (0 + i64::MIN) / (0 - 1) wraps to i64::MIN: taken for M = 5.
            (
                Cond::And(vec![
                    cmp(
                        CmpOp::Eq,
                        bin(
                            BinOp::Div,
                            bin(BinOp::Add, zero_m.clone(), lit(i64::MIN)),
                            bin(BinOp::Sub, zero_m, lit(1)),
                        ),
                        lit(i64::MIN),
                    ),
                    cmp(CmpOp::Eq, m(), lit(5)),
                ]),
                leaf(3, 2),
            ),
            // Tiles: cdiv(M, 128) * cdiv(N, 128) <= 304 (one wave on 304 CUs), split by K / 1024.
            (
                cmp(
                    CmpOp::Le,
                    bin(BinOp::Mul, bin(BinOp::CeilDiv, m(), lit(128)), bin(BinOp::CeilDiv, n(), lit(128))),
                    lit(304),
                ),
                chain(vec![(cmp(CmpOp::Ge, bin(BinOp::Div, k(), lit(1024)), lit(8)), leaf(4, 3))], leaf(5, 0)),
            ),
            // !(max(M, K) > 16384) with a constant-true conjunct and a min() that never matters.
            (
                Cond::And(vec![
                    Cond::Not(Box::new(cmp(CmpOp::Gt, bin(BinOp::Max, m(), k()), lit(16384)))),
                    Cond::Const(true),
                    cmp(CmpOp::Ge, bin(BinOp::Min, n(), lit(-1)), lit(-1)),
                ]),
                leaf(6, 0),
            ),
        ],
        leaf(7, 0),
    ))
}

type Dims = (u32, u32, u32);

/// (M, N, K) → (kernelId, splitK) for [`edge_rule`], computed by hand.
const EDGE_EXPECTED: [(Dims, (i32, u32)); 8] = [
    ((1, 128, 128), (1, 0)),
    ((3, 32768, 32768), (1, 0)),
    ((4, 4096, 4096), (2, 1)),
    ((5, 128, 128), (3, 2)),
    ((200, 4096, 8192), (4, 3)),   // 2 * 32 = 64 tiles, 8192 / 1024 = 8
    ((200, 4096, 4096), (5, 0)),   // 64 tiles, 4
    ((4096, 32768, 4096), (6, 0)), // 32 * 256 tiles; max(4096, 4096) <= 16384
    ((65536, 32768, 32768), (7, 0)),
];

/// M bucket boundaries of [`deep_rule`]: bucket b holds M < BOUNDS[b] (and >= BOUNDS[b - 1]).
const BOUNDS: [i64; 16] = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536];

/// A balanced binary search over the M buckets (nested if/else five levels deep), each bucket ending in
/// an else-if chain on N: kernel = bucket mod 19, split-K = N class. [`deep_expected`] computes the same
/// in closed form.
fn deep_rule() -> Rule {
    fn node(lo: usize, hi: usize) -> Node {
        // Buckets lo..=hi; bucket b covers [BOUNDS[b - 1], BOUNDS[b]) (bucket 16: M >= 65536).
        if lo == hi {
            let id = (lo % 19) as i32;
            return chain(
                vec![
                    (cmp(CmpOp::Le, n(), lit(4096)), leaf(id, 0)),
                    (cmp(CmpOp::Lt, bin(BinOp::Div, n(), lit(128)), lit(128)), leaf(id, 1)),
                ],
                leaf(id, 2),
            );
        }
        let mid = (lo + hi) / 2;
        chain(vec![(cmp(CmpOp::Lt, m(), lit(BOUNDS[mid])), node(lo, mid))], node(mid + 1, hi))
    }
    Rule::new(node(0, BOUNDS.len()))
}

fn deep_expected(mm: u32, nn: u32) -> (i32, u32) {
    let bucket = BOUNDS.iter().take_while(|&&b| i64::from(mm) >= b).count();
    let sk = if nn <= 4096 {
        0
    } else if nn / 128 < 128 {
        1
    } else {
        2
    };
    ((bucket % 19) as i32, sk)
}

fn geak_rule(catalog: &Catalog) -> Rule {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/rules/geak_blog_rule.cpp");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    synth_core::rule::parse_cpp::parse_cpp(&text, catalog).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// Random rules (proptest strategies, driven by a fixed seed so the compiled programs are reproducible).

fn arb_expr() -> impl Strategy<Value = Expr> {
    use proptest::prelude::*;
    let atom = prop_oneof![
        3 => prop_oneof![Just(m()), Just(n()), Just(k())],
        2 => prop_oneof![(-4i64..=4), (1i64..=512), Just(128), Just(304), Just(4096)].prop_map(lit),
        1 => prop_oneof![any::<i64>(), Just(i64::MIN), Just(i64::MAX), Just(1i64 << 32)].prop_map(lit),
    ];
    atom.prop_recursive(3, 12, 2, |inner| {
        let op = prop_oneof![
            Just(BinOp::Add),
            Just(BinOp::Sub),
            Just(BinOp::Mul),
            Just(BinOp::Div),
            Just(BinOp::CeilDiv),
            Just(BinOp::Min),
            Just(BinOp::Max)
        ];
        (op, inner.clone(), inner).prop_map(|(op, a, b)| Expr::bin(op, a, b))
    })
}

fn arb_cmp_op() -> impl Strategy<Value = CmpOp> {
    use proptest::prelude::*;
    prop_oneof![Just(CmpOp::Lt), Just(CmpOp::Le), Just(CmpOp::Gt), Just(CmpOp::Ge), Just(CmpOp::Eq), Just(CmpOp::Ne)]
}

fn arb_cond() -> impl Strategy<Value = Cond> + Clone {
    use proptest::prelude::*;
    let op = arb_cmp_op();
    let cmp_s = (op, arb_expr(), arb_expr()).prop_map(|(op, a, b)| Cond::cmp(op, a, b));
    let atom = prop_oneof![8 => cmp_s, 1 => any::<bool>().prop_map(Cond::Const)];
    atom.prop_recursive(2, 6, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Cond::And),
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Cond::Or),
            inner.prop_map(|c| Cond::Not(Box::new(c))),
        ]
    })
}

/// Rules whose chains have `branches` branches, each condition drawn from `cond`.
fn arb_node(
    cond: impl Strategy<Value = Cond> + Clone + 'static,
    branches: std::ops::Range<usize>,
) -> impl Strategy<Value = Node> {
    use proptest::prelude::*;
    // Every split level a leaf may carry, the deepest (`catalog::MAX_SPLIT_K`) included.
    let leaf_s = (0i32..19, 0u32..=synth_core::catalog::MAX_SPLIT_K).prop_map(|(id, sk)| leaf(id, sk));
    leaf_s.prop_recursive(4, 24, 3, move |inner| {
        (proptest::collection::vec((cond.clone(), inner.clone()), branches.clone()), inner)
            .prop_map(|(branches, otherwise)| chain(branches, otherwise))
    })
}

/// `count` rules drawn from `node` with a fixed seed, so the compiled programs are reproducible.
fn sample_rules(node: impl Strategy<Value = Node>, seed: u8, count: usize) -> Vec<Rule> {
    let mut runner = proptest::test_runner::TestRunner::new_with_rng(
        proptest::test_runner::Config::default(),
        proptest::test_runner::TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &[seed; 32]),
    );
    (0..count).map(|_| Rule::new(node.new_tree(&mut runner).expect("strategy").current())).collect()
}

/// Expressions as the search writes them (tile counts, products, sums, min / max, divisions by positive
/// literals, non-negative literals): the ones `rule::lower` can simplify, at some domain.
fn arb_tile_expr() -> impl Strategy<Value = Expr> {
    use proptest::prelude::*;
    let atom = prop_oneof![
        3 => prop_oneof![Just(m()), Just(n()), Just(k())],
        2 => prop_oneof![(0i64..=8), (1i64..=512), Just(128), Just(304), Just(1i64 << 20)].prop_map(lit),
    ];
    atom.prop_recursive(3, 12, 2, |inner| {
        let op = prop_oneof![Just(BinOp::Add), Just(BinOp::Mul), Just(BinOp::Min), Just(BinOp::Max)];
        let div = prop_oneof![Just(BinOp::Div), Just(BinOp::CeilDiv)];
        let divisor = prop_oneof![(1i64..=16), Just(64), Just(128), Just(132), Just(256)].prop_map(lit);
        prop_oneof![
            (op, inner.clone(), inner.clone()).prop_map(|(op, a, b)| Expr::bin(op, a, b)),
            (div, inner, divisor).prop_map(|(op, a, b)| Expr::bin(op, a, b)),
        ]
    })
}

fn arb_tile_cond() -> impl Strategy<Value = Cond> + Clone {
    use proptest::prelude::*;
    let op = arb_cmp_op();
    let threshold = prop_oneof![3 => (-4i64..=5000).prop_map(lit), 1 => arb_tile_expr()];
    // Differences of two features, as the `contrast` features write them.
    let side = prop_oneof![
        3 => arb_tile_expr(),
        1 => (arb_tile_expr(), arb_tile_expr()).prop_map(|(a, b)| Expr::bin(BinOp::Sub, a, b)),
    ];
    let cmp_s = (op, side, threshold).prop_map(|(op, a, b)| Cond::cmp(op, a, b));
    cmp_s.prop_recursive(2, 6, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 2..3).prop_map(Cond::And),
            proptest::collection::vec(inner.clone(), 2..3).prop_map(Cond::Or),
            inner.prop_map(|c| Cond::Not(Box::new(c))),
        ]
    })
}

fn random_tile_rules(count: usize) -> Vec<Rule> {
    sample_rules(arb_node(arb_tile_cond(), 1..4), 9, count)
}

fn random_rules(count: usize) -> Vec<Rule> {
    sample_rules(arb_node(arb_cond(), 0..4), 42, count)
}

// ---------------------------------------------------------------------------------------------------
// Compiling and running the generated code.

/// Seeded random shapes (M in 1..=65536, N and K multiples of 128 up to 32768) plus the corners.
fn random_shapes(count: usize, seed: u64) -> Vec<(u32, u32, u32)> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut out = vec![(1, 128, 128), (65536, 32768, 32768), (1, 32768, 128), (65536, 128, 32768)];
    out.extend(EDGE_EXPECTED.iter().map(|(s, _)| *s));
    while out.len() < count {
        // Half the M values log-uniform, so small M (where rules branch most) is well covered.
        let mm =
            if rng.gen_bool(0.5) { rng.gen_range(1..=65536) } else { (2f64.powf(rng.gen_range(0.0..16.0))) as u32 };
        out.push((mm.clamp(1, 65536), 128 * rng.gen_range(1..=256), 128 * rng.gen_range(1..=256)));
    }
    out
}

/// Path of a compiler, or a failure that says what to install (never a silent pass).
fn require_tool(name: &str) -> PathBuf {
    let ok = Command::new(name).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    match ok {
        Ok(s) if s.success() => PathBuf::from(name),
        _ => panic!(
            "`{name}` is required to verify the generated code but was not found or does not run; \
             install it (e.g. `apt-get install g++`; rustc comes with the Rust toolchain) and rerun"
        ),
    }
}

fn run_checked(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes each rule's header into `dir`, compiles one driver including all of them (`namespaced`: each in
/// its own namespace; otherwise there must be one rule, included at global scope as AITER does).
fn build_cpp(dir: &Path, catalog: &Catalog, rules: &[Rule], namespaced: bool) -> PathBuf {
    assert!(namespaced || rules.len() == 1);
    let gxx = require_tool("g++");
    std::fs::write(dir.join(cpp::CHECK_STUB), cpp::render_check_stub(catalog).unwrap()).unwrap();
    let mut headers = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        let name = format!("rule_{i}.h");
        std::fs::write(dir.join(&name), render::render_cpp(rule, catalog, &provenance()).unwrap()).unwrap();
        headers.push(cpp::CheckHeader { header: name, ns: namespaced.then(|| format!("rule_{i}")) });
    }
    std::fs::write(dir.join("driver.cpp"), cpp::render_check_driver(catalog, &headers).unwrap()).unwrap();
    let exe = dir.join("driver_cpp");
    run_checked(
        Command::new(gxx)
            .current_dir(dir)
            .args(["-std=c++17", "-Wall", "-Wextra", "-Werror", "-O1"])
            .args(["-fsanitize=undefined", "-fno-sanitize-recover=all"])
            .arg("driver.cpp")
            .arg("-o")
            .arg(&exe),
        "g++ on the generated header",
    );
    exe
}

/// Writes each rule's module into `dir` and compiles a driver that prints `kernelId splitK name` per rule.
fn build_rust(dir: &Path, catalog: &Catalog, rules: &[Rule]) -> PathBuf {
    let rustc = require_tool("rustc");
    let mut main = String::new();
    for (i, rule) in rules.iter().enumerate() {
        std::fs::write(dir.join(format!("rule_{i}.rs")), render::render_rust(rule, catalog, &provenance()).unwrap())
            .unwrap();
        main.push_str(&format!("#[path = \"rule_{i}.rs\"]\nmod rule_{i};\n"));
    }
    main.push_str(
        "use std::io::{BufRead, Write};\nfn main() {\n    let mut out = std::io::BufWriter::new(std::io::stdout().lock());\n    \
         for line in std::io::stdin().lock().lines() {\n        let line = line.unwrap();\n        \
         let v: Vec<u32> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();\n        let mut parts = Vec::new();\n",
    );
    for i in 0..rules.len() {
        main.push_str(&format!(
            "        let s = rule_{i}::select(v[0], v[1], v[2]);\n        parts.push(format!(\"{{}} {{}} {{}}\", s.kernel_id, s.split_k, s.name));\n"
        ));
    }
    main.push_str("        writeln!(out, \"{}\", parts.join(\" \")).unwrap();\n    }\n}\n");
    std::fs::write(dir.join("main.rs"), main).unwrap();
    let exe = dir.join("driver_rs");
    run_checked(
        Command::new(rustc)
            .current_dir(dir)
            .args(["--edition", "2021", "-D", "warnings", "-C", "overflow-checks=on"])
            .arg("main.rs")
            .arg("-o")
            .arg(&exe),
        "rustc on the generated module",
    );
    exe
}

fn run_driver(exe: &Path, shapes: &[(u32, u32, u32)]) -> Vec<String> {
    let mut child =
        Command::new(exe).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let input: String = shapes.iter().map(|(a, b, c)| format!("{a} {b} {c}\n")).collect();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "{} failed: {}", exe.display(), String::from_utf8_lossy(&out.stderr));
    let lines: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect();
    assert_eq!(lines.len(), shapes.len(), "{} printed one line per shape", exe.display());
    lines
}

/// Runs the interpreter, the compiled C++ and the compiled Rust on `shapes` and asserts they agree for
/// every rule; returns the interpreter's picks. C++: one program per rule with the header at global scope,
/// or (`namespaced`) one program holding every rule's header in its own namespace.
fn differential(catalog: &Catalog, rules: &[Rule], namespaced: bool, shapes: &[(u32, u32, u32)]) -> Vec<Vec<Leaf>> {
    let dir = tempfile::tempdir().unwrap();
    let (cpp_exes, rust_exe) = std::thread::scope(|scope| {
        let rust = scope.spawn(|| {
            let d = dir.path().join("rust");
            std::fs::create_dir(&d).unwrap();
            build_rust(&d, catalog, rules)
        });
        let cpp: Vec<PathBuf> = if namespaced {
            let d = dir.path().join("cpp");
            std::fs::create_dir(&d).unwrap();
            vec![build_cpp(&d, catalog, rules, true)]
        } else {
            rules
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let d = dir.path().join(format!("cpp_{i}"));
                    std::fs::create_dir(&d).unwrap();
                    build_cpp(&d, catalog, std::slice::from_ref(r), false)
                })
                .collect()
        };
        (cpp, rust.join().unwrap())
    });

    let interp: Vec<Vec<Leaf>> =
        rules.iter().map(|r| shapes.iter().map(|&(a, b, c)| resolve(catalog, r.eval(a, b, c))).collect()).collect();

    // C++: per line, "id sk" for each rule of the program.
    let mut cpp_picks: Vec<Vec<Leaf>> = vec![Vec::new(); rules.len()];
    let mut first = 0;
    for exe in &cpp_exes {
        let lines = run_driver(exe, shapes);
        let per_exe = if namespaced { rules.len() } else { 1 };
        for line in &lines {
            let f: Vec<&str> = line.split(' ').collect();
            assert_eq!(f.len(), 2 * per_exe, "C++ driver line {line:?}");
            for j in 0..per_exe {
                let id =
                    f[2 * j].parse().unwrap_or_else(|_| panic!("C++ returned a kernel that is no instance: {line:?}"));
                cpp_picks[first + j].push(Leaf::new(id, f[2 * j + 1].parse().unwrap()));
            }
        }
        first += per_exe;
    }
    // Rust: per line, "id sk name" for each rule.
    let mut rust_picks: Vec<Vec<Leaf>> = vec![Vec::new(); rules.len()];
    for line in run_driver(&rust_exe, shapes) {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 3 * rules.len(), "Rust driver line {line:?}");
        for j in 0..rules.len() {
            let pick = Leaf::new(f[3 * j].parse().unwrap(), f[3 * j + 1].parse().unwrap());
            assert_eq!(f[3 * j + 2], catalog.legacy_by_id(pick.kernel_id).unwrap().name, "Rust name of {pick:?}");
            rust_picks[j].push(pick);
        }
    }

    for (r, rule_interp) in interp.iter().enumerate() {
        for (i, shape) in shapes.iter().enumerate() {
            assert_eq!(cpp_picks[r][i], rule_interp[i], "rule {r}: C++ differs from the interpreter at {shape:?}");
            assert_eq!(rust_picks[r][i], rule_interp[i], "rule {r}: Rust differs from the interpreter at {shape:?}");
        }
    }
    interp
}

/// A leaf with the default alias resolved to its instance id (what both dispatchers report).
fn resolve(catalog: &Catalog, leaf: Leaf) -> Leaf {
    Leaf::new(catalog.legacy_by_id(leaf.kernel_id).expect("rule leaf in the catalog").id, leaf.split_k)
}

// ---------------------------------------------------------------------------------------------------
// Tests.

#[test]
fn compiled_cpp_and_rust_match_the_interpreter_on_hand_written_rules() {
    let catalog = Catalog::embedded();
    let rules = vec![edge_rule(), deep_rule(), geak_rule(&catalog)];
    let shapes = random_shapes(10_000, 1);
    let picks = differential(&catalog, &rules, false, &shapes);

    // Independent expectations, not only agreement.
    for (shape, want) in EDGE_EXPECTED {
        let i = shapes.iter().position(|s| *s == shape).unwrap();
        assert_eq!(picks[0][i], Leaf::new(want.0, want.1), "edge rule at {shape:?}");
    }
    for (i, &(mm, nn, _)) in shapes.iter().enumerate() {
        let (id, sk) = deep_expected(mm, nn);
        assert_eq!(picks[1][i], Leaf::new(id, sk), "deep rule at {:?}", shapes[i]);
    }
    let used: std::collections::BTreeSet<Leaf> = picks[1].iter().copied().collect();
    assert!(used.len() >= 40, "the shapes reach most of the deep rule's leaves ({} reached)", used.len());
    // The GEAK rule: M <= 128 with N >= 4096 takes the 16x64 memory-bound tile (id 8 in the catalog).
    let i = shapes.iter().position(|s| *s == (1, 32768, 128)).unwrap();
    assert_eq!(catalog.legacy_by_id(picks[2][i].kernel_id).unwrap().tile(), (16, 64, 256));
}

#[test]
fn compiled_cpp_and_rust_match_the_interpreter_on_random_rules() {
    let catalog = Catalog::embedded();
    let rules = random_rules(24);
    let depth = rules.iter().map(Rule::depth).max().unwrap();
    assert!(depth >= 4, "random rules include nested chains (max depth {depth})");
    let shapes = random_shapes(10_000, 2);
    let picks = differential(&catalog, &rules, true, &shapes);
    let varied = picks.iter().filter(|p| p.iter().collect::<std::collections::BTreeSet<_>>().len() > 1).count();
    assert!(varied >= 3, "some random rules branch on the shapes ({varied} do)");
}

fn small_rule() -> Rule {
    Rule::new(chain(
        vec![
            (
                Cond::And(vec![cmp(CmpOp::Le, m(), lit(64)), cmp(CmpOp::Ge, n(), lit(4096))]),
                chain(vec![(cmp(CmpOp::Ge, k(), lit(8192)), leaf(8, 1))], leaf(8, 0)),
            ),
            (
                cmp(
                    CmpOp::Le,
                    bin(BinOp::Mul, bin(BinOp::CeilDiv, m(), lit(128)), bin(BinOp::CeilDiv, n(), lit(128))),
                    lit(304),
                ),
                leaf(2, 0),
            ),
        ],
        leaf(0, 0),
    ))
}

#[test]
fn header_has_the_aiter_interface_and_nothing_aiter_defines() {
    let catalog = Catalog::embedded();
    let text = render::render_cpp(&small_rule(), &catalog, &provenance()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "// gemm_a8w8_blockscale_heuristic.h - generated by gemm-synth; do not edit by hand.");
    assert!(lines.contains(&"// Regenerate with: cargo test --test render"));
    assert!(lines.contains(&"// Dataset: tests (hand-written rule)"));
    assert!(lines.contains(&"#pragma once"));
    assert!(text.contains("struct BlockscaleChoice\n{\n    BlockwiseKernel kernel;\n    int splitK;\n};\n"));
    assert!(text.contains(
        "template <typename DDataType, typename EDataType = DDataType>\n[[gnu::always_inline]] inline BlockscaleChoice a8w8_blockscale_heuristic_dispatch(int M, int N, int K)\n"
    ));
    assert!(!text.contains("using BlockwiseKernel"), "BlockwiseKernel is AITER's: the header must not define it");
    assert!(!text.contains("torch::Tensor"), "the header declares no instance");
    // Leaves name the current-grammar instance and carry split-K; nesting is indented.
    let k8 = &catalog.legacy_by_id(8).unwrap().name;
    assert!(text
        .contains(&format!("            return BlockscaleChoice{{&{k8}<DDataType, EDataType>, 1}}; // kernelId 8\n")));
    assert!(text.contains("    if(M <= 64 && N >= 4096) {\n        if(K >= 8192) {\n"));
    assert!(text.contains("    } else if(cdiv(M, 128) * cdiv(N, 128) <= 304) {\n"));
    // The simplified tree (the rule has one for every non-negative int) and the dispatcher's one test.
    assert!(
        text.contains("namespace fast {\n")
            && text.contains("[[gnu::always_inline]] inline BlockscaleChoice select(Nat M, Nat N, Nat K)\n")
    );
    assert!(text.contains(
        "    if((static_cast<uint32_t>(M | N | K) >> 31) == 0)\n        return gemm_synth_blockscale_rule::fast::select<DDataType, EDataType>("
    ));
    assert!(!lines.iter().any(|l| l.ends_with(' ')), "no trailing whitespace");
    insta::assert_snapshot!("small_rule_header", text);
}

#[test]
fn rust_module_is_formatted_and_self_contained() {
    let catalog = Catalog::embedded();
    let text = render::render_rust(&small_rule(), &catalog, &provenance()).unwrap();
    assert!(text.starts_with("//! dispatch.rs - generated by gemm-synth; do not edit by hand.\n"));
    assert!(text.contains("pub fn select(m: u32, n: u32, k: u32) -> Selection {"));
    assert!(text.contains("pub struct Selection {"));
    assert!(!text.contains("use "), "no imports: the module depends on nothing");
    // Unused operations get no helper; used ones do.
    assert!(text.contains("fn cdiv(a: i64, b: i64) -> i64") && !text.contains("fn div("));
    insta::assert_snapshot!("small_rule_rust", text);
}

#[test]
fn header_refuses_a_kernel_the_catalog_does_not_have() {
    let catalog = Catalog::embedded();
    let rule = Rule::new(chain(vec![(Cond::Const(true), leaf(42, 0))], leaf(0, 0)));
    let err = render::render_cpp(&rule, &catalog, &provenance()).unwrap_err().to_string();
    assert!(err.contains("kernelId 42"), "{err}");
    let err = render::render_rust(&rule, &catalog, &provenance()).unwrap_err().to_string();
    assert!(err.contains("kernelId 42"), "{err}");
}

/// Three shapes x four candidates, times chosen so each candidate's best relative shape is known.
fn small_matrix() -> LatencyMatrix {
    let shapes = vec![Shape::new(16, 5120, 5120), Shape::new(512, 5120, 5120), Shape::new(4096, 25600, 5120)];
    let cands = vec![Candidate::new(0, 0), Candidate::new(7, 0), Candidate::new(8, 0), Candidate::new(8, 1)];
    let mut mat = LatencyMatrix::new("gfx942", 304, None, shapes, cands);
    let us = [
        [40.0, 20.0, 10.0, 12.0],    // 16: #8 wins by 12/10 over #8/sk1; #0 is 4x the best
        [50.0, 60.0, 90.0, 45.0],    // 512: #8/sk1 wins, 45/50 = 0.9
        [300.0, 900.0, 1200.0, 0.0], // 4096: #0 wins alone (900/300)
    ];
    for (s, row) in us.iter().enumerate() {
        for (c, &t) in row.iter().enumerate() {
            mat.set(s, c, if t > 0.0 { Cell::Ok(t) } else { Cell::Invalid("errRatio 0.2 > 0.05".into()) });
        }
    }
    mat
}

#[test]
fn instance_csv_lists_each_leaf_at_its_best_relative_shape_plus_the_default() {
    let catalog = Catalog::embedded();
    let name = |id: i32| catalog.legacy_by_id(id).unwrap().name.clone();
    let rule = Rule::new(chain(
        vec![(cmp(CmpOp::Le, m(), lit(64)), leaf(8, 0)), (cmp(CmpOp::Le, m(), lit(1024)), leaf(8, 1))],
        leaf(0, 0),
    ));
    let csv = render::render_instances_csv(&rule, &catalog, &small_matrix()).unwrap();
    // Ratios to the best other candidate: #0 300/900 at M=4096; #8 10/12 at M=16; #8/sk1 45/50 at M=512;
    // the default #7 (not in the rule) 60/45 at M=512 (20/10 at M=16 and 900/300 at M=4096 are worse).
    // tflops = 2MNK/us/1e6, e.g. 2*16*5120*5120/10/1e6 = 83.89; bw = (MK + NK + 2MN)/us/1e3 = 26460160/10/1e3.
    let want = format!(
        "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio\n\
         gfx942,304,4096,25600,5120,ck,0,0,300,{},3579.14,1205.86,0\n\
         gfx942,304,16,5120,5120,ck,8,0,10,{},83.89,2646.02,0\n\
         gfx942,304,512,5120,5120,ck,8,1,45,{},596.52,757.3,0\n\
         gfx942,304,512,5120,5120,ck,7,0,60,{},447.39,567.98,0\n",
        name(0),
        name(8),
        name(8),
        name(7)
    );
    assert_eq!(csv, want);

    // A rule using the default kernel gets no extra row for it.
    let with_default = Rule::new(chain(vec![(cmp(CmpOp::Le, m(), lit(64)), leaf(7, 0))], leaf(0, 0)));
    let csv = render::render_instances_csv(&with_default, &catalog, &small_matrix()).unwrap();
    assert_eq!(csv.lines().count(), 3);
}

#[test]
fn instance_csv_refuses_an_unmeasured_leaf() {
    let catalog = Catalog::embedded();
    let rule = Rule::new(chain(vec![(cmp(CmpOp::Le, m(), lit(64)), leaf(2, 0))], leaf(0, 0)));
    let err = render::render_instances_csv(&rule, &catalog, &small_matrix()).unwrap_err().to_string();
    assert!(err.contains("#2") && err.contains("no valid measurement"), "{err}");
}

#[test]
fn write_generated_writes_three_files_and_check_reports_stale_ones() {
    let catalog = Catalog::embedded();
    let rule = Rule::new(chain(vec![(cmp(CmpOp::Le, m(), lit(64)), leaf(8, 0))], leaf(0, 0)));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("generated");
    let paths = render::write_generated(&rule, &catalog, &small_matrix(), &provenance(), &out, false).unwrap();
    let names: Vec<String> = paths.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, [render::CPP_HEADER, render::INSTANCES_CSV, render::RUST_MODULE]);
    render::write_generated(&rule, &catalog, &small_matrix(), &provenance(), &out, true).expect("fresh");

    // A different rule makes the header, the CSV and the module stale; check mode names them and writes nothing.
    let other = Rule::new(chain(vec![(cmp(CmpOp::Le, m(), lit(32)), leaf(8, 0))], leaf(0, 0)));
    let before = std::fs::read_to_string(out.join(render::CPP_HEADER)).unwrap();
    let err = render::write_generated(&other, &catalog, &small_matrix(), &provenance(), &out, true).unwrap_err();
    let stale = err.downcast_ref::<StaleFiles>().expect("StaleFiles");
    let stale_names: Vec<String> =
        stale.stale.iter().map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(stale_names, [render::CPP_HEADER, render::RUST_MODULE], "the instance list is unchanged");
    assert!(err.to_string().contains(render::CPP_HEADER), "{err}");
    assert_eq!(std::fs::read_to_string(out.join(render::CPP_HEADER)).unwrap(), before);
}

#[test]
fn default_alias_leaves_render_as_the_kernel_they_name() {
    let catalog = Catalog::embedded();
    let alias = catalog.default_instance().id;
    let rule = Rule::new(chain(
        vec![(cmp(CmpOp::Le, m(), lit(64)), leaf(-1, 0)), (cmp(CmpOp::Le, m(), lit(512)), leaf(alias, 0))],
        leaf(0, 0),
    ));
    let rust = render::render_rust(&rule, &catalog, &provenance()).unwrap();
    assert_eq!(rust.matches(&format!("const KERNEL_{alias}: Selection")).count(), 1, "{rust}");
    assert!(!rust.contains("kernel_id: -1"));
    let header = render::render_cpp(&rule, &catalog, &provenance()).unwrap();
    // Two leaves in each of the header's two trees (the exact one and the simplified one).
    assert_eq!(header.matches(&format!("// kernelId {alias}\n")).count(), 4);
    let csv = render::render_instances_csv(&rule, &catalog, &small_matrix()).unwrap();
    let ids: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').nth(6).unwrap()).collect();
    assert_eq!(ids, ["0", &alias.to_string()], "one row per kernel, no separate default row");
}

// ---------------------------------------------------------------------------------------------------
// Round trip: every form the tool writes reads back to the same rule.

/// The rule as a reader must return it from the renderers' output: conditions in canonical shape, every
/// leaf at its catalog id, and for the C++ header the constant subexpressions folded ([`cpp::for_cpp`]).
fn rendered_ir(catalog: &Catalog, rule: &Rule, cpp_header: bool) -> Rule {
    fn walk(node: &Node, catalog: &Catalog, cpp_header: bool) -> Node {
        match node {
            Node::Leaf(l) => Node::Leaf(resolve(catalog, *l)),
            Node::Chain { branches, otherwise } => Node::Chain {
                branches: branches
                    .iter()
                    .map(|(c, n)| (if cpp_header { cpp::for_cpp(c) } else { c.clone() }, walk(n, catalog, cpp_header)))
                    .collect(),
                otherwise: Box::new(walk(otherwise, catalog, cpp_header)),
            },
        }
    }
    let canonical = rule.canonical();
    Rule { root: walk(&canonical.root, catalog, cpp_header), note: canonical.note }
}

/// Writes `rule` in every form into `dir` under the names `synth run` and `synth check` use, reads each
/// file back with `rule::load` (form from the extension) and `rule::parse_any` (form from the content),
/// and compares with the expected IR.
fn assert_round_trip(catalog: &Catalog, rule: &Rule, dir: &Path, what: &str) {
    use synth_core::rule::{load, parse_any, text, to_json};
    let forms: Vec<(&str, String, Rule)> = vec![
        ("rule.json", to_json(rule), rule.clone()),
        (
            render::CPP_HEADER,
            render::render_cpp(rule, catalog, &provenance()).unwrap(),
            rendered_ir(catalog, rule, true),
        ),
        (
            render::RUST_MODULE,
            render::render_rust(rule, catalog, &provenance()).unwrap(),
            rendered_ir(catalog, rule, false),
        ),
        ("check.cpp", text::rule_to_cpp_text(rule, catalog), rendered_ir(catalog, rule, false)),
        ("check.rs", text::rule_to_rust_text(rule, catalog), rendered_ir(catalog, rule, false)),
    ];
    for (name, text, want) in forms {
        let path = dir.join(name);
        std::fs::write(&path, &text).unwrap();
        let by_ext = load(&path, catalog).unwrap_or_else(|e| panic!("{what}: {name} does not read back: {e}\n{text}"));
        assert_eq!(by_ext, want, "{what}: {name} read back differently");
        let by_content = parse_any(&text, catalog).unwrap_or_else(|e| panic!("{what}: {name} (detected): {e}"));
        assert_eq!(by_content, want, "{what}: {name} (form detected from the content) read back differently");
    }
}

#[test]
fn every_output_form_reads_back_to_the_same_rule() {
    let catalog = Catalog::embedded();
    let dir = tempfile::tempdir().unwrap();
    let mut with_note = deep_rule();
    with_note.note = Some("fitted on 40 shapes\nsplit-K leaves at small M".into());
    let mut rules = vec![
        ("small".to_string(), small_rule()),
        ("edge".to_string(), edge_rule()),
        ("deep with a note".to_string(), with_note),
        ("geak".to_string(), geak_rule(&catalog)),
    ];
    rules.extend(random_rules(24).into_iter().enumerate().map(|(i, r)| (format!("random {i}"), r)));
    let split_k = rules.iter().filter(|(_, r)| r.leaves().iter().any(|l| l.split_k > 0)).count();
    assert!(split_k >= 10, "the rules include split-K leaves ({split_k} do)");
    assert!(rules.iter().any(|(_, r)| r.depth() >= 5), "the rules include a deep tree");
    for (what, rule) in &rules {
        assert_round_trip(&catalog, rule, dir.path(), what);
    }
}

#[test]
fn the_committed_generated_files_read_back_to_rule_json() {
    let catalog = Catalog::embedded();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("generated");
    let json = synth_core::rule::load(&root.join("rule.json"), &catalog).unwrap();
    assert!(json.leaves().iter().any(|l| l.split_k > 0), "the committed rule has split-K leaves");
    for name in [render::CPP_HEADER, render::RUST_MODULE] {
        let back = synth_core::rule::load(&root.join(name), &catalog).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(back, rendered_ir(&catalog, &json, name == render::CPP_HEADER), "{name}");
    }
}

#[test]
fn an_edited_generated_module_is_refused_with_the_line() {
    let catalog = Catalog::embedded();
    let text = render::render_rust(&small_rule(), &catalog, &provenance()).unwrap();
    // kernel_id 8 written as 9 while the name stays kernel 8's.
    let edited = text.replacen("kernel_id: 8,", "kernel_id: 9,", 1);
    assert_ne!(edited, text);
    let e = synth_core::rule::parse_any(&edited, &catalog).unwrap_err().to_string();
    assert!(e.contains("does not match the name") && e.contains("regenerate"), "{e}");
    let line = edited.lines().position(|l| l.contains("kernel_id: 9,")).unwrap();
    assert!(e.contains(&format!("{}:", line + 3)), "the error names the line of the name after it: {e}");
}

// ---------------------------------------------------------------------------------------------------
// The branchless form (`cpp::render_branchless`): the tree's choice for every input.

/// Dimensions the C++ entry point (`int M, int N, int K`) can be handed: zero, negative, `INT_MIN`,
/// `INT_MAX` and random 32-bit values, mixed with ordinary GEMM shapes so rules take every branch.
fn hostile_shapes(count: usize, seed: u64) -> Vec<[i64; 3]> {
    // 2^29 and 2^30 - 1 / 2^30: the edge of the committed rule's simplified form (dimensions below 2^30).
    let corners = [
        0,
        1,
        -1,
        2,
        -2,
        127,
        128,
        -128,
        1 << 29,
        (1 << 30) - 1,
        1 << 30,
        i64::from(i32::MAX),
        i64::from(i32::MIN),
        i64::from(i32::MIN) + 1,
    ];
    let mut out = Vec::new();
    for &a in &corners {
        for &b in &corners {
            out.push([a, b, 4096]);
            out.push([a, 4096, b]);
            out.push([4096, a, b]);
        }
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    while out.len() < count {
        let dim = |rng: &mut rand_chacha::ChaCha8Rng| -> i64 {
            match rng.gen_range(0..4) {
                0 => i64::from(rng.gen::<i32>()),
                1 => corners[rng.gen_range(0..corners.len())],
                2 => rng.gen_range(-70000..=70000),
                _ => 128 * rng.gen_range(1..=256),
            }
        };
        out.push([dim(&mut rng), dim(&mut rng), dim(&mut rng)]);
    }
    out
}

/// The interpreter's choice at dimensions given as i64 (`Cond::eval_i64`, first branch that holds).
fn interp_i64(rule: &Rule, vars: [i64; 3]) -> Leaf {
    let mut node = &rule.root;
    loop {
        match node {
            Node::Leaf(l) => return *l,
            Node::Chain { branches, otherwise } => {
                node = branches.iter().find(|(c, _)| c.eval_i64(vars)).map(|(_, n)| n).unwrap_or(otherwise);
            }
        }
    }
}

/// The forms [`build_forms_driver`] prints per rule, in order.
const FORMS: [&str; 4] =
    ["select", "select_branchless", "a8w8_blockscale_heuristic_dispatch", "fast::select_branchless"];

/// Compiles one program holding each rule's header and branchless headers in its own namespace; per input
/// line it prints, for each rule, "id sk" of each of [`FORMS`]: the exact tree, its branchless form, the
/// dispatcher (the simplified tree inside its domain, the exact tree outside) and the simplified branchless
/// form inside its domain (the exact tree outside, or everywhere for a rule without a simplified form).
fn build_forms_driver(dir: &Path, catalog: &Catalog, rules: &[Rule], extra: &[&str]) -> PathBuf {
    let gxx = require_tool("g++");
    std::fs::write(dir.join(cpp::CHECK_STUB), cpp::render_check_stub(catalog).unwrap()).unwrap();
    let ns = cpp::DETAIL_NAMESPACE;
    let mut src = format!("#include <cstdio>\n#include <cstdint>\n#include \"{}\"\n", cpp::CHECK_STUB);
    for (i, rule) in rules.iter().enumerate() {
        std::fs::write(dir.join(format!("rule_{i}.h")), render::render_cpp(rule, catalog, &provenance()).unwrap())
            .unwrap();
        let (branchless, _) = cpp::render_branchless(rule, catalog).unwrap();
        std::fs::write(dir.join(format!("rule_{i}_branchless.h")), branchless).unwrap();
        let simplified = cpp::render_branchless_simplified(rule, catalog).unwrap();
        let (fast_include, fast_call) = match simplified {
            Some((text, _, bits)) => {
                std::fs::write(dir.join(format!("rule_{i}_simplified.h")), text).unwrap();
                (
                    format!("#include \"rule_{i}_simplified.h\"\n"),
                    format!(
                        "(static_cast<uint32_t>(m | n | k) >> {bits}) == 0 ? {ns}::fast::select_branchless<float, bf16stub>(\
                         static_cast<uint32_t>(m), static_cast<uint32_t>(n), static_cast<uint32_t>(k)) : "
                    ),
                )
            }
            None => (String::new(), String::new()),
        };
        src.push_str(&format!(
            "namespace rule_{i} {{\n#include \"rule_{i}.h\"\n#include \"rule_{i}_branchless.h\"\n{fast_include}\
             inline BlockscaleChoice simplified_or_exact(int m, int n, int k) {{\n    \
             return {fast_call}{ns}::select<float, bf16stub>(m, n, k);\n}}\n}}\n"
        ));
    }
    src.push_str("struct Known { BlockwiseKernel kernel; int id; };\nconst Known kKnown[] = {\n");
    for inst in catalog.legacy_candidates() {
        src.push_str(&format!("    {{&{}<float, bf16stub>, {}}},\n", inst.name, inst.id));
    }
    src.push_str(
        "};\ntemplate <typename C> void show(const C& c) {\n    int id = -1;\n    for(const Known& k : kKnown)\n        \
         if(k.kernel == c.kernel) id = k.id;\n    std::printf(\" %d %d\", id, c.splitK);\n}\n\
         int main() {\n    long long M, N, K;\n    while(std::scanf(\"%lld %lld %lld\", &M, &N, &K) == 3) {\n        \
         const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);\n",
    );
    for i in 0..rules.len() {
        src.push_str(&format!(
            "        show(rule_{i}::{ns}::select<float, bf16stub>(m, n, k));\n        \
             show(rule_{i}::{ns}::select_branchless<float, bf16stub>(m, n, k));\n        \
             show(rule_{i}::a8w8_blockscale_heuristic_dispatch<float, bf16stub>(m, n, k));\n        \
             show(rule_{i}::simplified_or_exact(m, n, k));\n"
        ));
    }
    src.push_str("        std::printf(\"\\n\");\n    }\n    return 0;\n}\n");
    std::fs::write(dir.join("forms.cpp"), src).unwrap();
    let exe = dir.join("forms");
    run_checked(
        Command::new(gxx)
            .current_dir(dir)
            .args(["-std=c++17", "-Wall", "-Wextra", "-Werror"])
            .args(extra)
            .arg("forms.cpp")
            .arg("-o")
            .arg(&exe),
        "g++ on the generated header and its branchless form",
    );
    exe
}

/// Runs the tree and the branchless form of every rule on `shapes` (compiled with each flag set) and
/// asserts both equal the interpreter everywhere.
fn assert_forms_match(catalog: &Catalog, rules: &[Rule], shapes: &[[i64; 3]]) {
    let flag_sets: [&[&str]; 2] = [&["-O1", "-fsanitize=undefined", "-fno-sanitize-recover=all"], &["-O2"]];
    let input: String = shapes.iter().map(|[a, b, c]| format!("{a} {b} {c}\n")).collect();
    for flags in flag_sets {
        let dir = tempfile::tempdir().unwrap();
        let exe = build_forms_driver(dir.path(), catalog, rules, flags);
        let mut child =
            Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let text = input.clone();
        let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()).unwrap());
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        assert!(out.status.success(), "{flags:?}: {}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect();
        assert_eq!(lines.len(), shapes.len(), "{flags:?}: one line per shape");
        for (line, shape) in lines.iter().zip(shapes) {
            let f: Vec<i64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
            assert_eq!(f.len(), 2 * FORMS.len() * rules.len(), "{line:?}");
            for (r, rule) in rules.iter().enumerate() {
                let want = resolve(catalog, interp_i64(rule, *shape));
                let want = [i64::from(want.kernel_id), i64::from(want.split_k)];
                for (j, form) in FORMS.iter().enumerate() {
                    let at = 2 * (FORMS.len() * r + j);
                    assert_eq!(
                        f[at..at + 2],
                        want,
                        "{flags:?} rule {r}: {form} differs from the interpreter at {shape:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn branchless_form_and_tree_match_the_interpreter_on_hostile_shapes() {
    let catalog = Catalog::embedded();
    let committed =
        synth_core::rule::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("generated/rule.json"), &catalog).unwrap();
    let mut rules = vec![edge_rule(), deep_rule(), geak_rule(&catalog), small_rule(), committed, Rule::new(leaf(3, 2))];
    rules.extend(random_rules(24));
    rules.extend(random_tile_rules(24));
    // Most of the rules have a simplified form, over domains of several sizes, so the dispatcher's
    // simplified path and its edge are exercised; rules with differences inside products or negative
    // factors keep the exact path only.
    let bits: Vec<Option<u32>> = rules.iter().map(|r| synth_core::rule::lower::for_dims(r).map(|s| s.bits)).collect();
    assert!(bits[4] == Some(30), "the committed rule is simplified below 2^30: {bits:?}");
    assert!(bits.iter().filter(|b| b.is_some()).count() >= 24, "{bits:?}");
    let distinct: std::collections::BTreeSet<u32> = bits.iter().flatten().copied().collect();
    assert!(distinct.len() >= 3 && distinct.contains(&31), "domains of several sizes: {distinct:?}");
    let mut shapes = hostile_shapes(6000, 3);
    shapes.extend(random_shapes(4000, 4).into_iter().map(|(a, b, c)| [a, b, c].map(i64::from)));
    // Every value of one dimension over the range where rules put thresholds, so each comparison is seen
    // on both sides of its exact edge (random shapes almost never land on it).
    for v in 0..=2600 {
        shapes.extend([[v, 64, 4096], [v, 4096, 1024], [16, v, 4096], [100, v, 300]]);
    }
    shapes.extend((0..=8200).map(|v| [16, 4096, v]));
    // The shapes reach negative and extreme values on every dimension.
    for d in 0..3 {
        assert!(shapes.iter().any(|s| s[d] == i64::from(i32::MIN)) && shapes.iter().any(|s| s[d] < -1));
    }
    assert_forms_match(&catalog, &rules, &shapes);
}

#[test]
fn branchless_form_evaluates_each_comparison_once_and_indexes_a_table() {
    let catalog = Catalog::embedded();
    // small_rule: M <= 64 && N >= 4096 -> (K >= 8192 -> 8/1 | 8/0), cdiv(M,128)*cdiv(N,128) <= 304 -> 2/0,
    // else 0/0. The comparison M <= 64 written a second time (in an Or) is evaluated once.
    let mut rule = small_rule();
    if let Node::Chain { branches, .. } = &mut rule.root {
        branches.push((
            Cond::Or(vec![cmp(CmpOp::Le, m(), lit(64)), Cond::Not(Box::new(cmp(CmpOp::Eq, k(), lit(7))))]),
            leaf(5, 0),
        ));
    }
    let (text, comparisons) = cpp::render_branchless(&rule, &catalog).unwrap();
    assert_eq!(comparisons, 5, "{text}");
    let body: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("BlockscaleChoice select_branchless(")).collect();
    assert_eq!(body[0], "BlockscaleChoice select_branchless(Int M, Int N, Int K)");
    let expected = [
        "    const bool c0 = M <= 64;",
        "    const bool c1 = N >= 4096;",
        "    const bool c2 = K >= 8192;",
        "    const bool c3 = cdiv(M, 128) * cdiv(N, 128) <= 304;",
        "    const bool c4 = K == 7;",
        "    const unsigned n0 = pick(c2, 0u, 1u);",
        "    const unsigned n1 = pick(c0 & c1, n0, pick(c3, 2u, pick(c0 | (!c4), 3u, 4u)));",
        "    static constexpr BlockscaleChoice kChoices[] = {",
    ];
    assert_eq!(body[2..2 + expected.len()], expected, "{text}");
    let names: Vec<String> = [8, 8, 2, 5, 0].iter().map(|&id| catalog.legacy_by_id(id).unwrap().name.clone()).collect();
    let table: Vec<String> = [0, 1, 2, 3, 4]
        .iter()
        .zip([1, 0, 0, 0, 0])
        .map(|(&i, sk)| {
            let id = [8, 8, 2, 5, 0][i];
            format!("        {{&{}<DDataType, EDataType>, {sk}}}, // {i}: kernelId {id}", names[i])
        })
        .collect();
    assert_eq!(body[2 + expected.len()..2 + expected.len() + 5], table[..], "{text}");
    assert!(text.contains("    return kChoices[n1];\n"), "{text}");
    // A rule without a branch has no comparison and returns its one choice.
    let (text, comparisons) = cpp::render_branchless(&Rule::new(leaf(3, 2)), &catalog).unwrap();
    assert_eq!(comparisons, 0);
    assert!(text.contains("select_branchless([[maybe_unused]] Int M, [[maybe_unused]] Int N, [[maybe_unused]] Int K)"));
    assert!(text.contains("    return kChoices[0u];\n"), "{text}");
}
