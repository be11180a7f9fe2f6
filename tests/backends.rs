//! Backends as candidates: mixed latency matrices, rules whose leaves name (backend, kernel, split) in
//! every form the tool reads and writes, the generated Python module against the interpreter (real
//! python3), the C++ header's "no CK pick" (real g++), the Rust module (real rustc), and the AITER patch's
//! Python side run with stubs.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use rand::{Rng, SeedableRng};
use synth_core::catalog::triton::{TritonConfig, VLLM_DEFAULT};
use synth_core::catalog::{Backends, Candidate, Catalog, Libtype};
use synth_core::render::{self, cpp, Provenance};
use synth_core::rule::ir::build::{cdiv, k, lit, m, n};
use synth_core::rule::{BinOp, CmpOp, Cond, Expr, Leaf, Node, Rule};
use synth_core::table::{parse_aiter_csv, LatencyMatrix};

mod common;

fn provenance() -> Provenance {
    Provenance {
        dataset: "hand-written".into(),
        training: "none".into(),
        figures: vec![],
        command: "cargo test --test backends".into(),
    }
}

fn triton(c: TritonConfig) -> Leaf {
    Leaf::of(Libtype::Triton, c.kernel_id(), 0)
}

fn vendor() -> Leaf {
    Leaf::of(Libtype::Vendor, 0, 0)
}

const SMALL_TRITON: TritonConfig =
    TritonConfig { block_m: 16, block_n: 64, block_k: 128, group_m: 1, num_warps: 4, num_stages: 3 };

/// CK split-K at small M, triton in the middle, vendor at large M (the shape of a mixed rule).
fn mixed_rule() -> Rule {
    Rule::new(Node::Chain {
        branches: vec![
            (Cond::cmp(CmpOp::Le, m(), lit(16)), Node::Leaf(Leaf::new(4, 2))),
            (Cond::cmp(CmpOp::Lt, m(), lit(256)), Node::Leaf(triton(SMALL_TRITON))),
            (
                Cond::cmp(CmpOp::Lt, Expr::bin(BinOp::Mul, cdiv(m(), lit(128)), cdiv(n(), lit(128))), lit(132)),
                Node::Leaf(triton(VLLM_DEFAULT)),
            ),
        ],
        otherwise: Box::new(Node::Leaf(vendor())),
    })
}

// ---------------------------------------------------------------------------------------------------
// Random rules with leaves of every backend (seeded), and hostile shapes.

fn random_expr(rng: &mut rand_chacha::ChaCha8Rng, depth: u32) -> Expr {
    if depth == 0 || rng.gen_bool(0.35) {
        return match rng.gen_range(0..6) {
            0 => m(),
            1 => n(),
            2 => k(),
            3 => lit(rng.gen_range(-4..=4)),
            4 => lit(*[i64::MIN, i64::MAX, 1 << 32, -(1 << 40), 128, 304].get(rng.gen_range(0..6)).unwrap()),
            _ => lit(rng.gen_range(1..=8192)),
        };
    }
    let op =
        [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::CeilDiv, BinOp::Min, BinOp::Max][rng.gen_range(0..7)];
    Expr::bin(op, random_expr(rng, depth - 1), random_expr(rng, depth - 1))
}

fn random_cond(rng: &mut rand_chacha::ChaCha8Rng, depth: u32) -> Cond {
    if depth == 0 || rng.gen_bool(0.6) {
        let op = [CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge, CmpOp::Eq, CmpOp::Ne][rng.gen_range(0..6)];
        return Cond::cmp(op, random_expr(rng, 3), random_expr(rng, 2));
    }
    match rng.gen_range(0..4) {
        0 => Cond::And((0..rng.gen_range(0..3)).map(|_| random_cond(rng, depth - 1)).collect()),
        1 => Cond::Or((0..rng.gen_range(0..3)).map(|_| random_cond(rng, depth - 1)).collect()),
        2 => Cond::Not(Box::new(random_cond(rng, depth - 1))),
        _ => Cond::Const(rng.gen_bool(0.5)),
    }
}

fn random_leaf(rng: &mut rand_chacha::ChaCha8Rng) -> Leaf {
    match rng.gen_range(0..4) {
        0 | 1 => Leaf::new(rng.gen_range(0..19), rng.gen_range(0..=synth_core::catalog::MAX_SPLIT_K)),
        2 => {
            let pow = |rng: &mut rand_chacha::ChaCha8Rng, lo: u32, hi: u32| 1u32 << rng.gen_range(lo..=hi);
            let c = TritonConfig {
                block_m: pow(rng, 4, 8),
                block_n: pow(rng, 5, 8),
                block_k: 128,
                group_m: [1, 16, 32, 64][rng.gen_range(0..4)],
                num_warps: [4, 8][rng.gen_range(0..2)],
                num_stages: rng.gen_range(2..=5),
            };
            triton(c)
        }
        _ => vendor(),
    }
}

fn random_node(rng: &mut rand_chacha::ChaCha8Rng, depth: u32) -> Node {
    if depth == 0 || rng.gen_bool(0.3) {
        return Node::Leaf(random_leaf(rng));
    }
    let branches = (0..rng.gen_range(1..4)).map(|_| (random_cond(rng, 2), random_node(rng, depth - 1))).collect();
    Node::Chain { branches, otherwise: Box::new(random_node(rng, depth - 1)) }
}

fn random_rules(count: usize, seed: u64) -> Vec<Rule> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..count).map(|_| Rule::new(random_node(&mut rng, 5))).collect()
}

/// Shapes for the differential runs: ordinary GEMM shapes, zero, negative and extreme 64-bit values.
fn hostile_shapes(count: usize, seed: u64) -> Vec<[i64; 3]> {
    let corners = [0, 1, -1, 16, 17, 255, 256, 4096, i64::from(i32::MAX), i64::MIN, i64::MAX, i64::MIN + 1];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let dim = |rng: &mut rand_chacha::ChaCha8Rng| -> i64 {
            match rng.gen_range(0..5) {
                0 => corners[rng.gen_range(0..corners.len())],
                1 => rng.gen::<i64>(),
                2 => rng.gen_range(1..=65536),
                _ => 128 * rng.gen_range(1..=256),
            }
        };
        out.push([dim(&mut rng), dim(&mut rng), dim(&mut rng)]);
    }
    out
}

/// The interpreter at i64 dimensions (first branch that holds).
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

/// Path of a tool, or a failure that says what to install (never a silent pass).
fn require_tool(name: &str) -> PathBuf {
    let ok = Command::new(name).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    match ok {
        Ok(s) if s.success() => PathBuf::from(name),
        _ => panic!("`{name}` is required by this test but does not run; install it and rerun"),
    }
}

/// Runs `cmd` with `input` on stdin; its stdout lines (the command must succeed).
fn run_with_input(cmd: &mut Command, input: String, what: &str) -> Vec<String> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "{what} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
}

fn leaf_words(l: &Leaf) -> String {
    format!("{} {} {}", l.backend, l.kernel_id, l.split_k)
}

// ---------------------------------------------------------------------------------------------------
// Tables.

const HEADER: &str = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio,status";
const CK7: &str =
    "a8w8_blockscale_1x128x128_256x16x128x256_16x16_16x16_1x2_16x16x1_16x16x1_1x16x1x16_8_1x2_intrawave_v1";

fn mixed_table() -> String {
    let t = VLLM_DEFAULT;
    format!(
        "{HEADER}\n\
         sm_90,132,16,512,512,ck,7,0,10.0,{CK7},1,1,0.0,ok\n\
         sm_90,132,16,512,512,vendor,0,0,20.0,vendor_scaled_mm,1,1,0.0,ok\n\
         sm_90,132,16,512,512,triton,{id},0,12.0,{name},1,1,0.0,ok\n\
         sm_90,132,1024,512,512,ck,7,0,100.0,{CK7},1,1,0.0,ok\n\
         sm_90,132,1024,512,512,vendor,0,0,40.0,vendor_scaled_mm,1,1,0.0,ok\n\
         sm_90,132,1024,512,512,triton,{id},0,50.0,{name},1,1,0.0,ok\n",
        id = t.kernel_id(),
        name = t.name()
    )
}

#[test]
fn a_mixed_table_holds_the_named_backends_and_refuses_the_others() {
    let rows = parse_aiter_csv(mixed_table().as_bytes(), "t.csv", &Catalog::embedded()).unwrap();
    let all = Backends::parse("ck,triton,vendor").unwrap();
    let mx = LatencyMatrix::from_rows_for(&rows, Some(&all)).unwrap();
    let tri = Candidate::of(Libtype::Triton, VLLM_DEFAULT.kernel_id(), 0);
    assert_eq!(mx.candidates, vec![Candidate::new(7, 0), Candidate::vendor(), tri], "ck < vendor < triton");
    assert_eq!(mx.best(0).map(|(c, t)| (mx.candidates[c], t)), Some((Candidate::new(7, 0), 10.0)));
    assert_eq!(mx.best(1).map(|(c, t)| (mx.candidates[c], t)), Some((Candidate::vendor(), 40.0)));
    assert_eq!(mx.best_of(1, Libtype::Triton).map(|(_, t)| t), Some(50.0));

    // Vendor rows stay a reference when vendor is not named; a triton row of an unnamed backend is an error.
    let ck_triton = Backends::parse("ck,triton").unwrap();
    let m2 = LatencyMatrix::from_rows_for(&rows, Some(&ck_triton)).unwrap();
    assert_eq!(m2.candidates, vec![Candidate::new(7, 0), tri]);
    let e = LatencyMatrix::from_rows_for(&rows, Some(&Backends::parse("ck,vendor").unwrap())).unwrap_err();
    assert_eq!(e.line, Some(4), "{e}");
    assert!(e.to_string().contains("triton is not among --backends ck,vendor; add it to --backends"), "{e}");
    // Without backends, one family per matrix, as before.
    let e = LatencyMatrix::from_rows(&rows).unwrap_err();
    assert!(e.to_string().contains("CK legacy candidates only, or triton configs only"), "{e}");
}

#[test]
fn backend_words_are_checked() {
    assert!(Backends::parse("ck,vendor").is_ok());
    let e = Backends::parse("ck,hipblaslt").unwrap_err();
    assert!(e.contains("\"hipblaslt\" is not a backend"), "{e}");
    assert!(Backends::parse("").is_err());
}

// ---------------------------------------------------------------------------------------------------
// Rule forms.

#[test]
fn a_mixed_rule_reads_back_from_every_form() {
    use synth_core::rule::{load, parse_any, text, to_json};
    let catalog = Catalog::embedded();
    let dir = tempfile::tempdir().unwrap();
    let mut rules = vec![mixed_rule()];
    rules.extend(random_rules(20, 11));
    for (i, rule) in rules.iter().enumerate() {
        let rule = rule.canonical();
        let forms = [
            ("rule.json", to_json(&rule)),
            (render::CPP_HEADER, render::render_cpp(&rule, &catalog, &provenance()).unwrap()),
            (render::RUST_MODULE, render::render_rust(&rule, &catalog, &provenance()).unwrap()),
            ("check.cpp", text::rule_to_cpp_text(&rule, &catalog)),
            ("check.rs", text::rule_to_rust_text(&rule, &catalog)),
        ];
        for (name, body) in forms {
            let path = dir.path().join(name);
            std::fs::write(&path, &body).unwrap();
            let back = load(&path, &catalog).unwrap_or_else(|e| panic!("rule {i}: {name}: {e}\n{body}"));
            let leaves = |r: &Rule| r.leaves();
            assert_eq!(leaves(&back), leaves(&rule), "rule {i}: {name} leaves");
            let by_content = parse_any(&body, &catalog).unwrap();
            assert_eq!(leaves(&by_content), leaves(&rule), "rule {i}: {name} (detected form)");
            if name == "rule.json" {
                assert_eq!(back, rule, "rule {i}: JSON is exact");
            }
        }
    }
    // The text forms name the backends as written.
    let cpp = text::rule_to_cpp_text(&mixed_rule(), &catalog);
    assert!(cpp.contains("return {triton_bm16_bn64_bk128_g1_w4_s3, 0};"), "{cpp}");
    assert!(cpp.contains("return {vendor(0), 0};"), "{cpp}");
    let json = to_json(&mixed_rule());
    assert!(json.contains("\"backend\": \"vendor\""), "{json}");
}

#[test]
fn a_ck_rule_writes_no_backend_anywhere() {
    let catalog = Catalog::embedded();
    let rule = Rule::new(Node::Chain {
        branches: vec![(Cond::cmp(CmpOp::Lt, m(), lit(64)), Node::Leaf(Leaf::new(4, 1)))],
        otherwise: Box::new(Node::Leaf(Leaf::new(2, 0))),
    });
    let json = synth_core::rule::to_json(&rule);
    assert!(!json.contains("backend"), "{json}");
    let header = render::render_cpp(&rule, &catalog, &provenance()).unwrap();
    assert!(!header.contains("nullptr") && !header.contains("no CK pick"), "{header}");
    let rust = render::render_rust(&rule, &catalog, &provenance()).unwrap();
    assert!(!rust.contains("backend:"), "{rust}");
    // A leaf with an explicit "ck" backend reads as the same rule.
    let explicit = json.replace("\"kernel_id\": 4", "\"backend\": \"ck\", \"kernel_id\": 4");
    assert_ne!(explicit, json);
    assert_eq!(synth_core::rule::parse_json(&explicit).unwrap(), rule);
}

#[test]
fn bad_leaves_of_other_backends_are_named() {
    use synth_core::rule::parse_any;
    let catalog = Catalog::embedded();
    let check = |text: &str| {
        let rule = parse_any(text, &catalog).unwrap();
        synth_core::rule::validate::validate(&rule, &catalog)
            .into_iter()
            .map(|i| i.message)
            .collect::<Vec<_>>()
            .join("; ")
    };
    assert!(check("return {triton(12), 0};").contains("is not the id of a triton config"));
    assert!(check("return {triton_bm64_bn128_bk128_g32_w4_s2, 1};").contains("a triton config has no split-K"));
    assert!(check("return {vendor(3), 0};").contains("the vendor GEMM is one kernel"));
    assert_eq!(check("return {vendor(0), 0};"), "");
    let e = parse_any("return {triton_bm64_bn128, 0};", &catalog).unwrap_err().to_string();
    assert!(e.contains("unknown triton config"), "{e}");
}

// ---------------------------------------------------------------------------------------------------
// Generated code against the interpreter.

#[test]
fn python_module_matches_the_interpreter_on_10000_shapes() {
    let python = require_tool("python3");
    let catalog = Catalog::embedded();
    let dir = tempfile::tempdir().unwrap();
    let mut rules = vec![mixed_rule()];
    rules.extend(random_rules(12, 5));
    let shapes = hostile_shapes(10_000, 3);
    let mut driver = String::from("import sys\n");
    for (i, rule) in rules.iter().enumerate() {
        let text = render::render_python(rule, &catalog, &provenance()).unwrap();
        std::fs::write(dir.path().join(format!("rule_{i}.py")), text).unwrap();
        driver.push_str(&format!("import rule_{i}\n"));
    }
    driver.push_str("out = []\nfor line in sys.stdin:\n    m, n, k = (int(x) for x in line.split())\n    picks = []\n");
    for i in 0..rules.len() {
        driver.push_str(&format!("    picks.append(' '.join(str(x) for x in rule_{i}.select(m, n, k)))\n"));
    }
    driver.push_str("    out.append(' | '.join(picks))\nsys.stdout.write('\\n'.join(out) + '\\n')\n");
    std::fs::write(dir.path().join("driver.py"), driver).unwrap();
    let input: String = shapes.iter().map(|[a, b, c]| format!("{a} {b} {c}\n")).collect();
    let lines = run_with_input(
        Command::new(&python).current_dir(dir.path()).arg("-B").arg("driver.py"),
        input,
        "python3 on the generated modules",
    );
    assert_eq!(lines.len(), shapes.len());
    let mut backends = std::collections::BTreeSet::new();
    for (line, shape) in lines.iter().zip(&shapes) {
        let got: Vec<&str> = line.split(" | ").collect();
        for (r, rule) in rules.iter().enumerate() {
            let want = interp_i64(rule, *shape);
            backends.insert(want.backend);
            assert_eq!(got[r], leaf_words(&want), "rule {r} at {shape:?}");
        }
    }
    assert_eq!(backends.len(), 3, "the shapes reach ck, triton and vendor leaves");

    // The module refuses what the rule is not defined on, with the argument's name.
    let probe = "import rule_0\nfor a in [(1.5, 2, 3), (True, 2, 3), (1, 2, 1 << 63)]:\n    try:\n        \
                 rule_0.select(*a)\n        print('accepted')\n    except (TypeError, ValueError) as e:\n        print(e)\n";
    std::fs::write(dir.path().join("probe.py"), probe).unwrap();
    let out = run_with_input(
        Command::new(&python).current_dir(dir.path()).arg("-B").arg("probe.py"),
        String::new(),
        "python3 probe",
    );
    assert_eq!(out.len(), 3, "{out:?}");
    assert!(out[0].contains("M must be an int, got float"), "{out:?}");
    assert!(out[1].contains("M must be an int, got bool"), "{out:?}");
    assert!(out[2].contains("K = 9223372036854775808 is outside the 64-bit range"), "{out:?}");
}

#[test]
fn header_returns_no_ck_pick_for_other_backends_and_rust_names_them() {
    let gxx = require_tool("g++");
    let rustc = require_tool("rustc");
    let catalog = Catalog::embedded();
    let dir = tempfile::tempdir().unwrap();
    let rules: Vec<Rule> = std::iter::once(mixed_rule()).chain(random_rules(6, 17)).collect();
    // g++: every rule's header in its own namespace, one driver.
    std::fs::write(dir.path().join(cpp::CHECK_STUB), cpp::render_check_stub(&catalog).unwrap()).unwrap();
    let mut headers = Vec::new();
    let mut main = String::new();
    for (i, rule) in rules.iter().enumerate() {
        let name = format!("rule_{i}.h");
        std::fs::write(dir.path().join(&name), render::render_cpp(rule, &catalog, &provenance()).unwrap()).unwrap();
        headers.push(cpp::CheckHeader { header: name, ns: Some(format!("rule_{i}")) });
        std::fs::write(
            dir.path().join(format!("rule_{i}.rs")),
            render::render_rust(rule, &catalog, &provenance()).unwrap(),
        )
        .unwrap();
        main.push_str(&format!("#[path = \"rule_{i}.rs\"]\nmod rule_{i};\n"));
    }
    std::fs::write(dir.path().join("driver.cpp"), cpp::render_check_driver(&catalog, &headers).unwrap()).unwrap();
    let status = Command::new(&gxx)
        .current_dir(dir.path())
        .args(["-std=c++17", "-Wall", "-Wextra", "-Werror", "-O1", "-fsanitize=undefined", "-fno-sanitize-recover=all"])
        .args(["driver.cpp", "-o", "driver_cpp"])
        .status()
        .unwrap();
    assert!(status.success(), "g++ on the mixed headers");
    main.push_str(
        "use std::io::BufRead;\nfn main() {\n    for line in std::io::stdin().lock().lines() {\n        let line = line.unwrap();\n        \
         let v: Vec<u32> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();\n        let mut parts: Vec<String> = Vec::new();\n",
    );
    for (i, rule) in rules.iter().enumerate() {
        let mixed = rule.leaves().iter().any(|l| !l.is_ck());
        let backend = if mixed { "s.backend" } else { "\"ck\"" };
        main.push_str(&format!(
            "        let s = rule_{i}::select(v[0], v[1], v[2]);\n        parts.push(format!(\"{{}} {{}} {{}} {{}}\", {backend}, s.kernel_id, s.split_k, s.name));\n"
        ));
    }
    main.push_str("        println!(\"{}\", parts.join(\" | \"));\n    }\n}\n");
    std::fs::write(dir.path().join("main.rs"), main).unwrap();
    let status = Command::new(&rustc)
        .current_dir(dir.path())
        .args(["--edition", "2021", "-D", "warnings", "-C", "overflow-checks=on", "main.rs", "-o", "driver_rs"])
        .status()
        .unwrap();
    assert!(status.success(), "rustc on the mixed modules");

    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    let mut shapes: Vec<(u32, u32, u32)> = vec![(1, 128, 128), (16, 5120, 5120), (17, 5120, 5120), (300, 512, 512)];
    while shapes.len() < 3000 {
        shapes.push((rng.gen_range(1..=65536), 128 * rng.gen_range(1..=256), 128 * rng.gen_range(1..=256)));
    }
    let input: String = shapes.iter().map(|(a, b, c)| format!("{a} {b} {c}\n")).collect();
    let cpp_lines = run_with_input(&mut Command::new(dir.path().join("driver_cpp")), input.clone(), "C++ driver");
    let rs_lines = run_with_input(&mut Command::new(dir.path().join("driver_rs")), input, "Rust driver");
    let mut no_pick = 0;
    for (i, &(a, b, c)) in shapes.iter().enumerate() {
        let cpp_words: Vec<&str> = cpp_lines[i].split(' ').collect();
        let rs: Vec<&str> = rs_lines[i].split(" | ").collect();
        for (r, rule) in rules.iter().enumerate() {
            let want = rule.eval(a, b, c);
            let (got_id, got_sk) = (cpp_words[2 * r], cpp_words[2 * r + 1]);
            if want.is_ck() {
                let id = catalog.legacy_by_id(want.kernel_id).unwrap().id;
                assert_eq!(
                    (got_id, got_sk),
                    (id.to_string().as_str(), want.split_k.to_string().as_str()),
                    "C++ rule {r}"
                );
            } else {
                assert_eq!(got_id, "no-ck-pick", "C++ rule {r} at {:?}: {want:?}", (a, b, c));
                no_pick += 1;
            }
            let name = if want.is_ck() {
                catalog.legacy_by_id(want.kernel_id).unwrap().name.clone()
            } else {
                synth_core::rule::text::other_backend_item(&want).unwrap()
            };
            let id = if want.is_ck() { catalog.legacy_by_id(want.kernel_id).unwrap().id } else { want.kernel_id };
            assert_eq!(rs[r], format!("{} {id} {} {name}", want.backend, want.split_k), "Rust rule {r}");
        }
    }
    assert!(no_pick > 100, "the shapes reach non-CK leaves ({no_pick})");
}

// ---------------------------------------------------------------------------------------------------
// The AITER patch of a mixed rule.

fn ck_triton_rule() -> Rule {
    Rule::new(Node::Chain {
        branches: vec![
            (Cond::cmp(CmpOp::Le, m(), lit(16)), Node::Leaf(Leaf::new(4, 2))),
            (Cond::cmp(CmpOp::Lt, m(), lit(384)), Node::Leaf(Leaf::new(2, 0))),
        ],
        otherwise: Box::new(Node::Leaf(triton(VLLM_DEFAULT))),
    })
}

#[test]
fn the_aiter_patch_routes_triton_leaves_in_python_and_refuses_vendor() {
    use synth_core::aiter::patch;
    let catalog = Catalog::embedded();
    let text = patch::render_patch(&ck_triton_rule(), &catalog, &provenance()).unwrap();
    let files = patch::parse_patch(&text).unwrap();
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            patch::HEADER_PATH,
            patch::KERNELS_PATH,
            patch::CU_PATH,
            patch::GEN_INSTANCES_PATH,
            patch::SELECT_PATH,
            patch::OPS_PATH
        ]
    );
    assert!(text.contains("+        if(choice.kernel != nullptr)\n"), "the C++ dispatch skips a missing CK pick");
    // The kernel list holds the CK leaves only.
    let kernels = patch::heuristic_kernels(&ck_triton_rule(), &catalog).unwrap();
    assert_eq!(kernels.iter().map(|k| k.id).collect::<Vec<_>>(), [2, 4]);
    // A CK-only rule's patch has neither the Python files nor the guard.
    let ck_only = Rule::new(Node::Leaf(Leaf::new(2, 0)));
    let plain = patch::render_patch(&ck_only, &catalog, &provenance()).unwrap();
    assert!(
        !plain.contains(&format!("diff --git a/{}", patch::OPS_PATH)) && !plain.contains("choice.kernel != nullptr")
    );
    // Vendor leaves and triton configs AITER's kernel cannot run get no patch.
    let e = patch::render_patch(&mixed_rule(), &catalog, &provenance()).unwrap_err().to_string();
    assert!(e.contains("vendor (vendor): AITER's untuned blockscale path has no vendor route"), "{e}");
    let bk64 = TritonConfig { block_k: 64, ..VLLM_DEFAULT };
    let e = patch::render_patch(&Rule::new(Node::Leaf(triton(bk64))), &catalog, &provenance()).unwrap_err();
    assert!(e.to_string().contains("has BLOCK_SIZE_K 64; AITER's Triton blockscale GEMM runs 128 only"), "{e}");
}

/// The added lines of the `gemm_op_a8w8.py` hunks that define the routing (everything between the
/// module-level switch and the blank lines before `gemm_a8w8_blockscale_fake`).
fn routing_source(text: &str) -> String {
    let files = synth_core::aiter::patch::parse_patch(text).unwrap();
    let ops = files.iter().find(|f| f.path == synth_core::aiter::patch::OPS_PATH).unwrap();
    let hunk =
        ops.hunks.iter().find(|h| h.lines.iter().any(|(_, l)| l.starts_with("def _gemm_synth_untuned"))).unwrap();
    hunk.lines.iter().filter(|(c, _)| *c == '+').map(|(_, l)| format!("{l}\n")).collect()
}

#[test]
fn the_aiter_python_side_runs_with_stubs() {
    let python = require_tool("python3");
    let catalog = Catalog::embedded();
    let rule = ck_triton_rule();
    let text = synth_core::aiter::patch::render_patch(&rule, &catalog, &provenance()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = synth_core::aiter::patch::parse_patch(&text).unwrap();
    let select = files.iter().find(|f| f.path == synth_core::aiter::patch::SELECT_PATH).unwrap();
    std::fs::write(dir.path().join("gemm_a8w8_blockscale_select.py"), select.hunks[0].new_text()).unwrap();
    std::fs::write(dir.path().join("routing.py"), routing_source(&text)).unwrap();
    // Stand-ins (FAKES, written from AITER's interfaces at e4048607a5, not AITER's code): torch's uint8
    // dtype, a tensor with .shape/.dtype/.view, dtypes.fp8, and AITER's Triton blockscale GEMM
    // `gemm_a8w8_blockscale(x, w, x_scale, w_scale, dtype=..., y=None, config=None, ...)` recording its call.
    let harness = r#"
import os, sys, types
calls = []
torch = types.SimpleNamespace(uint8="uint8")
dtypes = types.SimpleNamespace(fp8="fp8", bf16="bf16")
class FakeTensor:
    def __init__(self, *shape, dtype="fp8"):
        self.shape, self.dtype = shape, dtype
    def view(self, dtype):
        return FakeTensor(*self.shape, dtype=dtype)
def fake_triton(x, w, x_scale, w_scale, dtype=None, y=None, config=None, skip_reduce=False, kernel_type="bandwidth_bound", backend=None):
    calls.append((x.shape, w.shape, x.dtype, dtype, dict(config)))
    return "triton-result"
mod = types.ModuleType("aiter.ops.triton.gemm.basic.gemm_a8w8_blockscale")
mod.gemm_a8w8_blockscale = fake_triton
for name in ["aiter", "aiter.ops", "aiter.ops.triton", "aiter.ops.triton.gemm", "aiter.ops.triton.gemm.basic"]:
    sys.modules.setdefault(name, types.ModuleType(name))
sys.modules[mod.__name__] = mod
import gemm_a8w8_blockscale_select as _gemm_synth_select
ns = {"os": os, "torch": torch, "dtypes": dtypes, "_gemm_synth_select": _gemm_synth_select}
exec(open("routing.py").read(), ns)
for line in sys.stdin:
    m, n, k = (int(v) for v in line.split())
    calls.clear()
    try:
        got = ns["_gemm_synth_untuned"](FakeTensor(m, k, dtype="uint8"), FakeTensor(n, k), None, None, "bf16")
    except ValueError as e:
        print("error", e)
        continue
    if got is None:
        print("ck-path")
    else:
        (xs, ws, xdtype, dtype, config), = calls
        assert got == "triton-result" and xs == (m, k) and ws == (n, k) and xdtype == "fp8" and dtype == "bf16"
        print("triton", " ".join(f"{key}={config[key]}" for key in sorted(config)))
"#;
    std::fs::write(dir.path().join("harness.py"), harness).unwrap();
    let shapes: Vec<(u32, u32, u32)> =
        (0..2000u32).map(|i| (1 + (i * 37) % 4096, 128 * (1 + i % 40), 128 * (1 + (i * 7) % 60))).collect();
    let input: String = shapes.iter().map(|(a, b, c)| format!("{a} {b} {c}\n")).collect();
    let run = |env: Option<&str>, input: String| {
        let mut cmd = Command::new(&python);
        cmd.current_dir(dir.path()).arg("-B").arg("harness.py").env_remove("AITER_BLOCKSCALE_HEURISTIC");
        if let Some(v) = env {
            cmd.env("AITER_BLOCKSCALE_HEURISTIC", v);
        }
        run_with_input(&mut cmd, input, "python3 harness")
    };
    let want_triton = {
        let c = VLLM_DEFAULT;
        format!(
            "triton BLOCK_SIZE_K={} BLOCK_SIZE_M={} BLOCK_SIZE_N={} GROUP_SIZE_M={} NUM_KSPLIT=1 num_stages={} num_warps={}",
            c.block_k, c.block_m, c.block_n, c.group_m, c.num_stages, c.num_warps
        )
    };
    for env in [None, Some(""), Some("1")] {
        let lines = run(env, input.clone());
        let mut routed = 0;
        for (line, &(a, b, c)) in lines.iter().zip(&shapes) {
            let leaf = rule.eval(a, b, c);
            if leaf.is_ck() {
                assert_eq!(line, "ck-path", "{env:?} at {:?}", (a, b, c));
            } else {
                assert_eq!(line, &want_triton, "{env:?} at {:?}", (a, b, c));
                routed += 1;
            }
        }
        assert!(routed > 500, "{routed} shapes reached the triton leaf");
    }
    let off = run(Some("0"), input);
    assert!(off.iter().all(|l| l == "ck-path"), "the switch at 0 leaves every shape to AITER's default path");
    let bad = run(Some("yes"), "64 5120 5120\n".into());
    assert_eq!(bad, ["error AITER_BLOCKSCALE_HEURISTIC='yes' is not understood: set it to 0 (AITER's fixed default kernel) or 1 (gemm-synth heuristic, the default), or unset it"]);
}

// ---------------------------------------------------------------------------------------------------
// The commands on the committed Qwen3-32B TP=2 journals (CK family + cuBLAS vendor rows).

fn qwen_args(extra: &[&str]) -> Vec<String> {
    let mut v = common::strs(&[
        "--dataset",
        "measurements/h200/qwen3-32b-tp2.csv",
        "--dataset",
        "measurements/h200/qwen3-32b-tp2-offgrid.csv",
        "--dataset",
        "measurements/h200/vendor-qwen3-32b-tp2.csv",
        "--model",
        "qwen3-32b",
        "--tp",
        "2",
    ]);
    v.extend(common::strs(extra));
    v
}

#[test]
fn run_and_compare_score_each_backend_the_threshold_and_the_mixed_rule() {
    let out = tempfile::tempdir().unwrap();
    let mut args = common::strs(&["run"]);
    args.extend(qwen_args(&["--backends", "ck,vendor", "--out"]));
    args.push(out.path().display().to_string());
    let o = common::synth(&args, &[]);
    let text = common::text(&o);
    assert!(o.status.success(), "{text}");
    for policy in ["oracle[ck]", "oracle[vendor]", "rule[ck]", "rule[vendor]", "threshold", "synthesized", "oracle"] {
        assert!(text.lines().any(|l| l.starts_with(&format!("{policy} "))), "{policy} missing:\n{text}");
    }
    // cuBLAS, run on M padded to a multiple of 4, beats CK's default #7 at every training M of this model.
    assert!(text.contains("threshold: vendor for every M"), "{text}");
    assert!(text.contains("comparison on 360 held-out shapes"), "grid and off-grid M: {text}");
    assert!(out.path().join(render::PYTHON_MODULE).is_file());
    let note = std::fs::read_to_string(out.path().join("aiter/NO-PATCH.txt")).unwrap();
    assert!(note.contains("no vendor route"), "{note}");
    assert!(!out.path().join("aiter").join(synth_core::aiter::PATCH_FILE).exists());
    let rule: Rule =
        synth_core::rule::parse_json(&std::fs::read_to_string(out.path().join("rule.json")).unwrap()).unwrap();
    assert!(rule.leaves().iter().any(|l| l.backend == Libtype::Vendor), "the mixed rule uses the vendor GEMM");
    let module = std::fs::read_to_string(out.path().join(render::RUST_MODULE)).unwrap();
    let regen = module.lines().find(|l| l.starts_with("//! Regenerate with:")).unwrap();
    assert!(regen.ends_with("--backends ck,vendor"), "the regenerate line names the backends: {regen}");

    let mut args = common::strs(&["compare"]);
    args.extend(qwen_args(&["--backends", "ck,vendor", "--rule"]));
    args.push(out.path().join("rule.json").display().to_string());
    let o = common::synth(&args, &[]);
    let text = common::text(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("oracle[vendor]") && text.contains("threshold: "), "{text}");

    // Without --backends the vendor rows stay a reference: the same data scores CK candidates only.
    let mut args = common::strs(&["compare"]);
    args.extend(qwen_args(&[]));
    let text = common::text(&common::synth(&args, &[]));
    assert!(!text.contains("oracle[") && !text.contains("vendor:"), "{text}");
}

#[test]
fn backends_on_manifests_are_checked() {
    // `run`'s multi-model job reads --backends, and refuses the committed manifest for vendor: only
    // Qwen3-32B TP=2 has vendor rows there.
    let o = common::synth(&common::strs(&["run", "--backends", "ck,vendor"]), &[]);
    let text = common::text(&o);
    assert!(!o.status.success());
    assert!(text.contains("configuration \"qwen3-32b-tp1\" (qwen3-32b TP=1) has no usable vendor row"), "{text}");
    // The other commands read a manifest as CK configurations only.
    let o = common::synth(
        &common::strs(&["compare", "--dataset", "measurements/h200/datasets.toml", "--backends", "ck"]),
        &[],
    );
    let text = common::text(&o);
    assert!(!o.status.success());
    assert!(text.contains("--backends ck is read on a single dataset"), "{text}");
}

/// The H100 manifest reads its gzip-compressed CK journals and plain vendor journals as one device's data:
/// with `--backends ck,vendor` every configuration has usable rows of both backends on its layers (4 for
/// the dense models; 7, 8, 3 and 4 for the zoo's MiniCPM3-4B, DeepSeek-V2-Lite, Qwen3-30B-A3B and
/// Qwen2.5-0.5B) × the 30 sparse M values (and the 20 off-grid M where measured), and without `vendor` named
/// the vendor rows stay a reference (no vendor candidate). The pool puts MiniCPM3-4B among the three that
/// train (chosen by the folds).
#[test]
fn the_h100_manifest_opens_with_both_backends() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = root.join("measurements/h100/datasets.toml");
    let both = Backends::parse("ck,vendor").unwrap();
    let data = gemm_synth::app::manifest::open_for(&manifest, Some(&both)).unwrap();
    let names: Vec<&str> = data.configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "qwen3-32b-tp2",
            "llama-3.1-8b-tp1",
            "llama-3.2-3b-tp1",
            "qwen2.5-7b-tp1",
            "llama-3.1-70b-tp4",
            "minicpm3-4b-tp1",
            "deepseek-v2-lite-tp1",
            "qwen3-30b-a3b-tp1",
            "qwen2.5-0.5b-tp1"
        ]
    );
    let pool: Vec<&str> = data.pool.iter().map(|&i| data.configs[i].name.as_str()).collect();
    assert_eq!(pool[..3], ["qwen3-32b-tp2", "llama-3.1-8b-tp1", "minicpm3-4b-tp1"]);
    assert_eq!(data.train_configs, 3);
    let layers = [4, 4, 4, 4, 4, 7, 8, 3, 4];
    for (i, c) in data.configs.iter().enumerate() {
        // The first three configurations and MiniCPM3-4B have the 20 off-grid M too (cuBLAS's rows padded at
        // M not a multiple of 4, as a runtime pads them: every one usable).
        let off_grid = if i < 3 || c.name == "minicpm3-4b-tp1" { layers[i] * 20 } else { 0 };
        assert_eq!((c.grid.len(), c.off_grid.len()), (layers[i] * 30, off_grid), "{}", c.name);
        for &s in c.grid.iter().chain(&c.off_grid) {
            for b in [Libtype::Ck, Libtype::Vendor] {
                assert!(
                    data.matrix.best_of(s, b).is_some(),
                    "{}: no usable {b:?} row at {:?}",
                    c.name,
                    data.matrix.shapes[s]
                );
            }
        }
    }
    let vendor_candidates = |d: &synth_core::manifest::MultiData| {
        d.matrix.candidates.iter().filter(|c| c.backend == Libtype::Vendor).count()
    };
    assert_eq!(vendor_candidates(&data), 1);
    let ck_only = gemm_synth::app::manifest::open_for(&manifest, Some(&Backends::parse("ck").unwrap())).unwrap();
    assert_eq!(vendor_candidates(&ck_only), 0);
}

/// The H200 manifest with cuBLAS rows (`measurements/h200/backends.toml`): every configuration of the main
/// job's manifest with both backends and the main job's training pool; the only shapes without a usable row
/// of one backend are the ones its README names — the 7 gate_up shapes of Qwen3-32B TP 1 its CK journal
/// lacks (Qwen3-32B TP 2's cuBLAS rows, measured again padded, have M = 1 and 2 and the off-grid M).
#[test]
fn the_h200_backends_manifest_has_both_backends_where_its_readme_says() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let both = Backends::parse("ck,vendor").unwrap();
    let data = gemm_synth::app::manifest::open_for(&root.join("measurements/h200/backends.toml"), Some(&both)).unwrap();
    let main = gemm_synth::app::manifest::open(&root.join("measurements/h200/datasets.toml")).unwrap();
    let names = |d: &synth_core::manifest::MultiData| d.configs.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&data), names(&main));
    let pool: Vec<&str> = data.pool.iter().map(|&i| data.configs[i].name.as_str()).collect();
    let main_pool: Vec<&str> = main.pool.iter().map(|&i| main.configs[i].name.as_str()).collect();
    assert_eq!(pool, main_pool);
    assert_eq!(pool[0], "qwen3-32b-tp2");
    let m = &data.matrix;
    let mut missing = std::collections::BTreeMap::<(&str, Libtype), Vec<u32>>::new();
    for c in &data.configs {
        for s in c.grid.iter().chain(&c.off_grid) {
            for b in [Libtype::Ck, Libtype::Vendor] {
                if m.best_of(*s, b).is_none() {
                    missing.entry((c.name.as_str(), b)).or_default().push(m.shapes[*s].m);
                }
            }
        }
    }
    for v in missing.values_mut() {
        v.sort_unstable();
    }
    let expected = std::collections::BTreeMap::from([(
        ("qwen3-32b-tp1", Libtype::Ck),
        vec![7168, 9216, 10240, 11264, 13312, 14336, 15360],
    )]);
    assert_eq!(missing, expected);
    // 400 shapes a configuration (Qwen2.5-72B: its gate_up and Llama-3.1-70B's qkv and o layers, 3 x 100).
    for c in &data.configs {
        let want = match c.name.as_str() {
            "qwen2.5-72b-tp4" | "qwen2.5-72b-tp8" => (240, 60),
            _ => (320, 80),
        };
        assert_eq!((c.grid.len(), c.off_grid.len()), want, "{}", c.name);
    }
}

/// A table file `name` in `dir` of `rows` ("M,N,K,libtype,kernelId,splitK,us,kernelName", `CK7` standing
/// for CK kernel 7's name) on sm_90 with 132 CUs, every row ok; its path.
fn table_file(dir: &std::path::Path, name: &str, rows: &[&str]) -> String {
    let mut text = format!("{HEADER}\n");
    for row in rows {
        text.push_str(&format!("sm_90,132,{},1,1,0.0,ok\n", row.replace("CK7", CK7)));
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// `compare --common-shapes` scores only the shapes every named backend has a usable row of: here the
/// CK-only shape (M = 64) drops out, and the union oracle's "x default" is the hand-computed geomean over
/// the other two (ck 10 / vendor 20 at M = 16: 1.0; ck 100 / vendor 40 at M = 1024: 2.5).
#[test]
fn compare_common_shapes_keeps_the_shapes_of_every_backend() {
    let dir = tempfile::tempdir().unwrap();
    let t = table_file(
        dir.path(),
        "t.csv",
        &[
            "16,512,512,ck,7,0,10.0,CK7",
            "16,512,512,vendor,0,0,20.0,vendor_scaled_mm",
            "64,512,512,ck,7,0,30.0,CK7",
            "1024,512,512,ck,7,0,100.0,CK7",
            "1024,512,512,vendor,0,0,40.0,vendor_scaled_mm",
        ],
    );
    let oracle_geo = |text: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with("oracle ")).unwrap_or_else(|| panic!("{text}"));
        line.split_whitespace().nth(3).unwrap().parse().unwrap()
    };
    let o =
        common::synth(&common::strs(&["compare", "--dataset", &t, "--backends", "ck,vendor", "--common-shapes"]), &[]);
    let text = common::text(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("2 shapes scored (--common-shapes: 2 of 3 have a usable row of every backend)"), "{text}");
    assert!((oracle_geo(&text) - 2.5f64.sqrt()).abs() < 1e-3, "{text}");
    let o = common::synth(&common::strs(&["compare", "--dataset", &t, "--backends", "ck,vendor"]), &[]);
    let text = common::text(&o);
    assert!(text.contains("3 shapes scored"), "{text}");
    assert!((oracle_geo(&text) - 2.5f64.powf(1.0 / 3.0)).abs() < 1e-3, "{text}");
    // Backends measured on disjoint shapes share none: one error naming the backends.
    let apart = table_file(
        dir.path(),
        "apart.csv",
        &["16,512,512,ck,7,0,10.0,CK7", "1024,512,512,vendor,0,0,40.0,vendor_scaled_mm"],
    );
    let o = common::synth(
        &common::strs(&["compare", "--dataset", &apart, "--backends", "ck,vendor", "--common-shapes"]),
        &[],
    );
    let text = common::text(&o);
    assert!(!o.status.success(), "{text}");
    assert!(
        text.contains("none of the 2 selected shapes has a usable row of every backend of --backends ck,vendor"),
        "{text}"
    );
    // Without --backends there is no backend to share shapes with; on a manifest it is refused.
    let o = common::synth(&common::strs(&["compare", "--dataset", &t, "--common-shapes"]), &[]);
    assert!(!o.status.success());
    assert!(
        common::text(&o).contains("--common-shapes keeps the shapes every backend of --backends"),
        "{}",
        common::text(&o)
    );
    let o = common::synth(
        &common::strs(&["compare", "--dataset", "measurements/h200/datasets.toml", "--common-shapes"]),
        &[],
    );
    assert!(!o.status.success());
    assert!(
        common::text(&o).contains("leave out --model, --spec, --hf-config, --held-out and --common-shapes"),
        "{}",
        common::text(&o)
    );
}
