//! Rule language: parsers (C++, Rust, JSON), interpreter semantics, canonical printers (round trips),
//! error positions and validation, checked against the published GEAK rule, hand-written fixtures and
//! hand-computed expectations.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use synth_core::catalog::Catalog;
use synth_core::rule::ir::MAX_JSON_DEPTH;
use synth_core::rule::text::{cond_to_cpp, expr_to_cpp, rule_to_cpp_text, rule_to_rust_text};
use synth_core::rule::validate::{validate, validate_with_source, Severity};
use synth_core::rule::{
    detect_form, load, load_with_source, parse_any, parse_any_with_source, parse_cpp, parse_json, parse_rust, to_json,
    BinOp, CmpOp, Cond, Expr, Form, Leaf, Node, Rule, RuleError, Var,
};

/// The embedded catalog, built once for the whole test binary.
fn cat() -> &'static Catalog {
    static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    CATALOG.get_or_init(Catalog::embedded)
}

fn fixture(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The published rule is data of the tool itself (assets/rules/); the others are test fixtures.
    let dir = if name == "geak_blog_rule.cpp" { "assets/rules" } else { "tests/data/rules" };
    root.join(dir).join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

fn geak() -> Rule {
    parse_cpp(&read("geak_blog_rule.cpp"), cat()).unwrap()
}

fn ids(rule: &Rule) -> Vec<i32> {
    rule.leaves().iter().map(|l| l.kernel_id).collect()
}

use synth_core::rule::ir::build::{k, lit, m, n};
fn cmp(op: CmpOp, a: Expr, b: Expr) -> Cond {
    Cond::cmp(op, a, b)
}
fn leaf(id: i32, sk: u32) -> Node {
    Node::Leaf(Leaf::new(id, sk))
}
fn chain(branches: Vec<(Cond, Node)>, otherwise: Node) -> Node {
    Node::Chain { branches, otherwise: Box::new(otherwise) }
}
fn rule_branches(rule: &Rule) -> Vec<(Cond, Node)> {
    match &rule.root {
        Node::Chain { branches, .. } => branches.clone(),
        Node::Leaf(_) => Vec::new(),
    }
}
fn id_at(rule: &Rule, mm: u32, nn: u32, kk: u32) -> i32 {
    rule.eval(mm, nn, kk).kernel_id
}

/// Parse error of a C++ text, as (line, column, message).
fn cpp_err(text: &str) -> (usize, usize, String) {
    let e = parse_cpp(text, cat()).expect_err(text);
    (e.line, e.column, e.message)
}

fn rust_err(text: &str) -> (usize, usize, String) {
    let e = parse_rust(text, cat()).expect_err(text);
    (e.line, e.column, e.message)
}

// ---- the published GEAK rule ------------------------------------------------------------------

#[test]
fn geak_rule_parses_to_six_hand_checked_leaves() {
    let rule = geak();
    // The six older-grammar names, matched field by field against ck-instances (the older grammar
    // lacks MXdlPerWave x NXdlPerWave): 256x16x64x256/v1 → 8, 256x32x256x128/v1 → 9,
    // 256x128x128x128/v3 → 0, 256x64x64x256/v1 → 18, 256x64x128x128/v3 → 2, 256x128x64x128/v3 → 1.
    assert_eq!(ids(&rule), vec![8, 9, 0, 18, 2, 1]);
    assert!(rule.leaves().iter().all(|l| l.split_k == 0));
    assert_eq!(rule.num_leaves(), 6);
    assert_eq!(rule.depth(), 5);
    assert_eq!(rule.instances_used().len(), 6);
    assert_eq!(rule.vars_used().into_iter().collect::<Vec<_>>(), vec![Var::M, Var::N, Var::K]);
    assert_eq!(
        rule.note.as_deref(),
        Some("Optimized heuristic-based selector: for all (M,N,K) of small batch/skinny, large batch, or fallback")
    );
    // The first condition keeps its structure: ((M <= 128 && N >= 4096) || (M == 1) || (N == 1)).
    let Node::Chain { branches, .. } = &rule.root else { panic!("expected a chain") };
    assert_eq!(branches.len(), 5);
    assert_eq!(
        branches[0].0,
        Cond::Or(vec![
            Cond::And(vec![cmp(CmpOp::Le, m(), lit(128)), cmp(CmpOp::Ge, n(), lit(4096))]),
            cmp(CmpOp::Eq, m(), lit(1)),
            cmp(CmpOp::Eq, n(), lit(1)),
        ])
    );
    assert_eq!(branches[4].0, Cond::And(vec![cmp(CmpOp::Le, n(), lit(128)), cmp(CmpOp::Ge, m(), lit(512))]));
}

#[test]
fn geak_rule_evaluates_as_read_by_hand() {
    let rule = geak();
    let cases = [
        ((1, 5120, 5120), 8), // M <= 128 && N >= 4096
        ((128, 4096, 1), 8),  // boundary of the first test
        ((1, 100, 100), 8),   // M == 1
        ((2000, 1, 5), 8),    // N == 1
        ((129, 4096, 7), 9),  // M > 128 && M <= 512 && N >= 4096
        ((300, 5120, 5120), 9),
        ((512, 5120, 5120), 9), // M == 512 still in the second branch
        ((513, 5120, 5120), 0), // large and square
        ((600, 5120, 5120), 0),
        ((512, 512, 1024), 0),  // N < 4096: skips the second branch
        ((200, 200, 200), 18),  // very tiny
        ((2000, 100, 100), 2),  // tall and skinny (K < 1024 is irrelevant)
        ((2000, 100, 5000), 2), // N < 512 fails the third branch
        ((100, 1000, 1000), 1), // nothing matches
        ((600, 600, 512), 1),   // K < 1024 and N > 128
    ];
    for ((mm, nn, kk), want) in cases {
        assert_eq!(id_at(&rule, mm, nn, kk), want, "M={mm} N={nn} K={kk}");
    }
}

#[test]
fn geak_rule_branch_lines_come_from_the_file() {
    let parsed = load_with_source(&fixture("geak_blog_rule.cpp"), cat(), None).unwrap();
    assert_eq!(parsed.form, Form::Cpp);
    let lines: Vec<Option<usize>> = (0..=5).map(|i| parsed.source.guard_line(&[i])).collect();
    assert_eq!(lines, vec![Some(2), Some(5), Some(8), Some(11), Some(14), Some(17)]);
    assert_eq!(parsed.source.leaf_line(&[0]), Some(4));
    assert_eq!(parsed.source.leaf_line(&[5]), Some(19));
    assert!(validate_with_source(&parsed.rule, cat(), &parsed.source).is_empty());
}

// ---- i64 semantics ----------------------------------------------------------------------------

#[test]
fn integer_semantics_match_the_documented_ones() {
    let e = |op: BinOp, a: i64, b: i64| Expr::bin(op, lit(a), lit(b)).eval(0, 0, 0);
    assert_eq!(e(BinOp::Div, 7, 2), 3);
    assert_eq!(e(BinOp::Div, -7, 2), -3, "division truncates toward zero");
    assert_eq!(e(BinOp::Div, 7, -2), -3);
    assert_eq!(e(BinOp::Div, 7, 0), 0, "division by zero is 0");
    assert_eq!(e(BinOp::Div, i64::MIN, -1), i64::MIN, "MIN / -1 wraps");
    assert_eq!(e(BinOp::CeilDiv, 7, 2), 4);
    assert_eq!(e(BinOp::CeilDiv, 8, 2), 4);
    assert_eq!(e(BinOp::CeilDiv, 0, 5), 0);
    assert_eq!(e(BinOp::CeilDiv, -7, 2), -3, "(a + b - 1) / b with truncation: (-7 + 1) / 2");
    assert_eq!(e(BinOp::CeilDiv, 7, 0), 0);
    assert_eq!(e(BinOp::CeilDiv, 7, -3), 0, "non-positive divisor gives 0");
    assert_eq!(e(BinOp::CeilDiv, i64::MAX, 2), (i64::MAX.wrapping_add(1)) / 2, "the sum wraps");
    assert_eq!(e(BinOp::Add, i64::MAX, 1), i64::MIN);
    assert_eq!(e(BinOp::Sub, i64::MIN, 1), i64::MAX);
    assert_eq!(e(BinOp::Mul, i64::MAX, 2), -2);
    assert_eq!(e(BinOp::Min, -3, 2), -3);
    assert_eq!(e(BinOp::Max, -3, 2), 2);
    // Variables are the u32 dimensions, widened without loss.
    let tiles =
        Expr::bin(BinOp::Mul, Expr::bin(BinOp::CeilDiv, m(), lit(128)), Expr::bin(BinOp::CeilDiv, n(), lit(128)));
    assert_eq!(tiles.eval(300, 5120, 1), 3 * 40);
    assert_eq!(Expr::bin(BinOp::Mul, m(), n()).eval(1 << 31, 1 << 31, 0), 1i64 << 62);
    assert_eq!(
        Expr::bin(BinOp::Mul, m(), n()).eval(u32::MAX, u32::MAX, 0),
        i64::from(u32::MAX).wrapping_mul(i64::from(u32::MAX))
    );
    assert!(Cond::And(vec![]).eval(1, 1, 1));
    assert!(!Cond::Or(vec![]).eval(1, 1, 1));
    assert!(Cond::Not(Box::new(Cond::Const(false))).eval(1, 1, 1));
}

#[test]
fn cpp_arithmetic_follows_c_precedence() {
    let c = cat();
    // M + N * 2 > 10 - 3 - 2  ==  (M + (N * 2)) > ((10 - 3) - 2)
    let rule = parse_cpp("if (M + N * 2 > 10 - 3 - 2) return kernel(1); else return kernel(2);", c).unwrap();
    let Node::Chain { branches, .. } = &rule.root else { panic!() };
    let want = cmp(
        CmpOp::Gt,
        Expr::bin(BinOp::Add, m(), Expr::bin(BinOp::Mul, n(), lit(2))),
        Expr::bin(BinOp::Sub, Expr::bin(BinOp::Sub, lit(10), lit(3)), lit(2)),
    );
    assert_eq!(branches[0].0, want);
    // !, unary minus, calls, suffixes, hex, lower-case variables, std:: and && binding tighter than ||.
    let text = "if (!(m < 0x10) && ceil_div(k, 128UL) >= -2 || std::max(N, 7u) / min(M, 3) == 1) return kernel(3); \
                else return {kernel(4), 1};";
    let rule = parse_cpp(text, c).unwrap();
    let Node::Chain { branches, otherwise } = &rule.root else { panic!() };
    let want = Cond::Or(vec![
        Cond::And(vec![
            Cond::Not(Box::new(cmp(CmpOp::Lt, m(), lit(16)))),
            cmp(CmpOp::Ge, Expr::bin(BinOp::CeilDiv, k(), lit(128)), lit(-2)),
        ]),
        cmp(
            CmpOp::Eq,
            Expr::bin(BinOp::Div, Expr::bin(BinOp::Max, n(), lit(7)), Expr::bin(BinOp::Min, m(), lit(3))),
            lit(1),
        ),
    ]);
    assert_eq!(branches[0].0, want);
    assert_eq!(**otherwise, leaf(4, 1));
    // Unary minus on a non-literal means 0 - x; true/false are constants.
    let rule = parse_cpp("if (-M < -5 && true) { return kernel(1); } else { return kernel(2); }", c).unwrap();
    assert_eq!(id_at(&rule, 6, 1, 1), 1);
    assert_eq!(id_at(&rule, 5, 1, 1), 2);
}

// ---- other C++ shapes and the fixtures ----------------------------------------------------------

#[test]
fn guard_clause_fixture_parses_with_fall_through() {
    let rule = load(&fixture("guard_clauses.cpp"), cat()).unwrap();
    assert_eq!(
        rule.leaves(),
        vec![Leaf::new(8, 1), Leaf::new(9, 2), Leaf::new(0, 0), Leaf::new(1, 0), Leaf::new(1, 0)]
    );
    assert_eq!(rule.instances_used().len(), 4);
    assert_eq!(rule.eval(8, 5120, 5120), Leaf::new(8, 1));
    // cdiv(100, 64) * cdiv(5120, 128) = 2 * 40 = 80 < 304 and K >= 4096.
    assert_eq!(rule.eval(100, 5120, 5120), Leaf::new(9, 2));
    assert_eq!(rule.eval(100, 5120, 1024), Leaf::new(1, 0));
    // 64 * 40 tiles: not < 304; M > 2048 and N == 5120.
    assert_eq!(rule.eval(4096, 5120, 5120), Leaf::new(0, 0));
    // M > 2048 but N != 5120: falls out of the nested if to the final return.
    assert_eq!(rule.eval(4096, 25600, 5120), Leaf::new(1, 0));
    assert!(rule.note.as_deref().unwrap().starts_with("Guard-clause style"));
}

#[test]
fn cpp_leaf_forms_and_nesting() {
    let c = cat();
    let text = "if (M < 64) {\n  if (N < 64) return {kernel(3)};\n  else { return kernel(-1); }\n} \
                else if (K > 100) return {kernel(5), 2,};\nelse { { return kernel(6); } }";
    let rule = parse_cpp(text, c).unwrap();
    assert_eq!(
        rule.root,
        chain(
            vec![
                (cmp(CmpOp::Lt, m(), lit(64)), chain(vec![(cmp(CmpOp::Lt, n(), lit(64)), leaf(3, 0))], leaf(7, 0))),
                (cmp(CmpOp::Gt, k(), lit(100)), leaf(5, 2)),
            ],
            leaf(6, 0),
        )
    );
    // A bare return is a whole rule.
    assert_eq!(parse_cpp("return kernel(11);", c).unwrap().root, leaf(11, 0));
    // `else { if ... }` stays a nested chain in `otherwise` (distinct from `else if`).
    let nested =
        parse_cpp("if (M < 1) return kernel(1); else { if (N < 1) return kernel(2); else return kernel(3); }", c)
            .unwrap();
    assert_eq!(
        nested.root,
        chain(
            vec![(cmp(CmpOp::Lt, m(), lit(1)), leaf(1, 0))],
            chain(vec![(cmp(CmpOp::Lt, n(), lit(1)), leaf(2, 0))], leaf(3, 0))
        )
    );
}

#[test]
fn nested_rust_fixture_and_rust_forms() {
    let rule = load(&fixture("nested.rs"), cat()).unwrap();
    assert_eq!(ids(&rule), vec![4, 8, 0, 7]);
    assert_eq!(rule.eval(32, 8192, 512), Leaf::new(4, 0));
    assert_eq!(rule.eval(32, 4096, 512), Leaf::new(8, 0));
    // cdiv(2048, 128) * cdiv(5120, 128) = 16 * 40 = 640 >= 608 and !(k < 1024).
    assert_eq!(rule.eval(2048, 5120, 5120), Leaf::new(0, 1));
    assert_eq!(rule.eval(2048, 5120, 512), Leaf::new(7, 0));
    assert_eq!(rule.eval(128, 5120, 5120), Leaf::new(7, 0));
    assert_eq!(rule.depth(), 2);
    // Bare expression form with the function-call spellings.
    let rule = parse_rust("if cdiv(m, 16) > min(n, max(k, 2)) - 1 { (3, 1) } else { 5 }", cat()).unwrap();
    let want = cmp(
        CmpOp::Gt,
        Expr::bin(BinOp::CeilDiv, m(), lit(16)),
        Expr::bin(BinOp::Sub, Expr::bin(BinOp::Min, n(), Expr::bin(BinOp::Max, k(), lit(2))), lit(1)),
    );
    assert_eq!(rule.root, chain(vec![(want, leaf(3, 1))], leaf(5, 0)));
    // The same rule in C++ reads to the same IR.
    let cpp =
        parse_cpp("if (cdiv(M, 16) > min(N, max(K, 2)) - 1) return {kernel(3), 1}; return kernel(5);", cat()).unwrap();
    assert_eq!(cpp.root, rule.root);
}

#[test]
fn json_fixture_and_serde_form() {
    let rule = load(&fixture("split_k.json"), cat()).unwrap();
    assert_eq!(rule.eval(16, 1024, 8192), Leaf::new(12, 3));
    assert_eq!(rule.eval(16, 5120, 5120), Leaf::new(17, 1));
    assert_eq!(rule.eval(1024, 5120, 5120), Leaf::new(0, 0));
    assert_eq!(rule.eval(1000, 5120, 5120), Leaf::new(0, 0), "cdiv(1000, 128) = 8");
    assert_eq!(rule.eval(896, 5120, 5120), Leaf::new(17, 1), "cdiv(896, 128) = 7");
    assert_eq!(rule.note.as_deref(), Some("hand-written JSON rule with split-K leaves"));
    assert_eq!(parse_json(&to_json(&rule)).unwrap(), rule);
    assert!(validate(&rule, cat()).is_empty());
}

#[test]
fn form_detection() {
    assert_eq!(detect_form("  {\"root\": {}}"), Form::Json);
    assert_eq!(detect_form("{}"), Form::Json);
    assert_eq!(detect_form("{ return kernel(1); }"), Form::Cpp);
    assert_eq!(detect_form("// return in a comment only\nif m < 1 { 1 } else { 2 }"), Form::Rust);
    assert_eq!(detect_form(&read("geak_blog_rule.cpp")), Form::Cpp);
    assert_eq!(detect_form(&read("nested.rs")), Form::Rust);
    let c = cat();
    for name in ["geak_blog_rule.cpp", "guard_clauses.cpp", "nested.rs", "split_k.json"] {
        let via_any = parse_any(&read(name), c).unwrap();
        assert_eq!(via_any, load(&fixture(name), c).unwrap(), "{name}");
    }
    assert_eq!(parse_any_with_source(&read("nested.rs"), c).unwrap().form, Form::Rust);
}

// ---- canonical text and round trips ----------------------------------------------------------

#[test]
fn canonical_cpp_text_of_the_geak_rule() {
    let c = cat();
    let rule = geak();
    let text = rule_to_cpp_text(&rule, c);
    let expected_start = "// Optimized heuristic-based selector: for all (M,N,K) of small batch/skinny, large batch, or fallback\n\
        if ((M <= 128 && N >= 4096) || M == 1 || N == 1) {\n    \
        return {a8w8_blockscale_1x128x128_256x16x64x256_16x16_16x16_1x1_16x16x1_16x16x1_1x16x1x16_4_1x1_intrawave_v1<DDataType, EDataType>, 0};\n\
        } else if (M > 128 && M <= 512 && N >= 4096) {\n";
    assert!(text.starts_with(expected_start), "{text}");
    assert!(text.ends_with("} else {\n    return {a8w8_blockscale_1x128x128_256x128x64x128_16x16_32x32_2x1_8x32x1_8x32x1_1x32x1x8_8_1x1_intrawave_v3<DDataType, EDataType>, 0};\n}\n"), "{text}");
    assert_eq!(parse_cpp(&text, c).unwrap(), rule);
    let rust = rule_to_rust_text(&rule, c);
    assert!(rust.contains("\nif (m <= 128 && n >= 4096) || m == 1 || n == 1 {\n"), "{rust}");
    assert_eq!(parse_rust(&rust, c).unwrap(), rule);
    assert_eq!(parse_json(&to_json(&rule)).unwrap(), rule);
}

#[test]
fn expression_printing_keeps_grouping() {
    let sub = |a, b| Expr::bin(BinOp::Sub, a, b);
    assert_eq!(expr_to_cpp(&sub(sub(m(), n()), k())), "M - N - K");
    assert_eq!(expr_to_cpp(&sub(m(), sub(n(), k()))), "M - (N - K)");
    assert_eq!(expr_to_cpp(&Expr::bin(BinOp::Mul, Expr::bin(BinOp::Add, m(), lit(1)), lit(-2))), "(M + 1) * -2");
    assert_eq!(expr_to_cpp(&Expr::bin(BinOp::Div, m(), Expr::bin(BinOp::Mul, n(), k()))), "M / (N * K)");
    assert_eq!(expr_to_cpp(&Expr::bin(BinOp::CeilDiv, sub(m(), lit(1)), lit(64))), "cdiv(M - 1, 64)");
    let c = Cond::And(vec![
        Cond::Not(Box::new(cmp(CmpOp::Ne, m(), lit(1)))),
        Cond::Or(vec![Cond::Const(true), cmp(CmpOp::Ge, k(), lit(3))]),
        Cond::And(vec![Cond::Const(false), Cond::Const(true)]),
    ]);
    assert_eq!(cond_to_cpp(&c), "!(M != 1) && (true || K >= 3) && (false && true)");
    // The printed text reads back to the same tree.
    let rule = Rule::new(chain(vec![(c, leaf(1, 0))], leaf(2, 0)));
    assert_eq!(parse_cpp(&rule_to_cpp_text(&rule, cat()), cat()).unwrap(), rule);
    assert_eq!(parse_rust(&rule_to_rust_text(&rule, cat()), cat()).unwrap(), rule);
}

fn arb_expr() -> impl Strategy<Value = Expr> {
    let atom = prop_oneof![
        prop::sample::select(vec![Var::M, Var::N, Var::K]).prop_map(Expr::Var),
        (-5000i64..70000).prop_map(Expr::Lit),
        prop::sample::select(vec![i64::MIN, i64::MAX, -1, 0]).prop_map(Expr::Lit),
    ];
    atom.prop_recursive(3, 12, 2, |inner| {
        let ops = vec![BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::CeilDiv, BinOp::Min, BinOp::Max];
        (prop::sample::select(ops), inner.clone(), inner).prop_map(|(op, a, b)| Expr::bin(op, a, b))
    })
}

fn arb_cond() -> impl Strategy<Value = Cond> {
    let ops = vec![CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge, CmpOp::Eq, CmpOp::Ne];
    let atom = prop_oneof![
        8 => (prop::sample::select(ops), arb_expr(), arb_expr()).prop_map(|(op, a, b)| Cond::cmp(op, a, b)),
        1 => any::<bool>().prop_map(Cond::Const),
    ];
    atom.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 2..4).prop_map(Cond::And),
            prop::collection::vec(inner.clone(), 2..4).prop_map(Cond::Or),
            inner.prop_map(|c| Cond::Not(Box::new(c))),
        ]
    })
}

fn arb_node() -> impl Strategy<Value = Node> {
    let leaf = (0i32..19, 0u32..4).prop_map(|(id, sk)| Node::Leaf(Leaf::new(id, sk)));
    leaf.prop_recursive(3, 16, 3, |inner| {
        (prop::collection::vec((arb_cond(), inner.clone()), 1..4), inner)
            .prop_map(|(branches, otherwise)| Node::Chain { branches, otherwise: Box::new(otherwise) })
    })
}

fn arb_rule() -> impl Strategy<Value = Rule> {
    let note = prop::option::of(prop::collection::vec("[a-zA-Z0-9 ,.()<=]{0,16}", 1..3).prop_map(|l| l.join("\n")));
    (arb_node(), note).prop_map(|(root, note)| Rule { root, note })
}

/// A parse result as a proptest result, showing the text on failure.
fn ok<T>(r: Result<T, RuleError>, text: &str) -> Result<T, TestCaseError> {
    r.map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_rules_round_trip_through_every_form(rule in arb_rule()) {
        let c = cat();
        let cpp = rule_to_cpp_text(&rule, c);
        prop_assert_eq!(ok(parse_cpp(&cpp, c), &cpp)?, rule.clone());
        let rust = rule_to_rust_text(&rule, c);
        prop_assert_eq!(ok(parse_rust(&rust, c), &rust)?, rule.clone());
        let json = to_json(&rule);
        prop_assert_eq!(ok(parse_json(&json), &json)?, rule.clone());
        prop_assert_eq!(ok(parse_any(&cpp, c), &cpp)?, rule.clone());
        prop_assert_eq!(ok(parse_any(&rust, c), &rust)?, rule);
    }

    #[test]
    fn degenerate_and_or_print_as_their_canonical_form(
        items in prop::collection::vec(arb_cond(), 0..2), is_and in any::<bool>(), mm in 1u32..5000, nn in 1u32..5000, kk in 1u32..5000
    ) {
        let c = if is_and { Cond::And(items) } else { Cond::Or(items) };
        let rule = Rule::new(chain(vec![(c, leaf(1, 0))], leaf(2, 0)));
        let text = rule_to_cpp_text(&rule, cat());
        let back = ok(parse_cpp(&text, cat()), &text)?;
        prop_assert_eq!(&back, &rule.canonical());
        prop_assert_eq!(back.eval(mm, nn, kk), rule.eval(mm, nn, kk));
    }
}

// ---- error positions -------------------------------------------------------------------------

#[test]
fn cpp_errors_name_the_position_and_what_was_expected() {
    // Unbalanced parenthesis: the `{` where `)` was expected.
    let (l, c, msg) = cpp_err("if ((M <= 128) {\n  return kernel(1);\n} else { return kernel(2); }");
    assert_eq!((l, c), (1, 16));
    assert!(msg.contains("expected `)` closing the `(` at 1:4") && msg.contains("found `{`"), "{msg}");
    // Unknown variable.
    let (l, c, msg) = cpp_err("if (M <= 128) {\n  return kernel(1);\n} else if (batch > 2) {\n  return kernel(2);\n} else { return kernel(3); }");
    assert_eq!((l, c), (3, 12));
    assert_eq!(msg, "unknown variable `batch`; the rule may use M, N, K");
    // Unknown instance name, reported at the name with the field that differs.
    let text = "if (M < 2) {\n    return a8w8_blockscale_1x128x128_256x16x64x999_16x16_16x16_16x16x1_16x16x1_1x16x1x16_4_1x1_intrawave_v1<DDataType, EDataType>;\n} else { return kernel(1); }";
    let (l, c, msg) = cpp_err(text);
    assert_eq!((l, c), (2, 12));
    assert!(msg.starts_with("unknown instance `a8w8_blockscale_1x128x128_256x16x64x999_"), "{msg}");
    // Missing final else: at the last `if` of the chain.
    let (l, c, msg) = cpp_err("if (M < 2) {\n  return kernel(1);\n} else if (N < 2) {\n  return kernel(2);\n}\n");
    assert_eq!((l, c), (3, 8));
    assert!(msg.contains("no final `else`"), "{msg}");
    // ... also when the fall-through is inside a nested block.
    let (l, c, _) = cpp_err("if (M < 2) {\n  if (N < 3) return kernel(1);\n} else {\n  return kernel(2);\n}");
    assert_eq!((l, c), (2, 3));
    // Garbage.
    let (l, c, msg) = cpp_err("hello world");
    assert_eq!((l, c), (1, 1));
    assert!(msg.contains("expected `if`, `return`") && msg.contains("found `hello`"), "{msg}");
    let (l, c, msg) = cpp_err("if (M < 2) return kernel(1); else return kernel(2); @");
    assert_eq!((l, c), (1, 53));
    assert!(msg.contains("unexpected character `@`"), "{msg}");
    assert_eq!(cpp_err("").2, "expected a rule (`if` ... `else` ... with `return` leaves), found end of input");
    // Statements after a chain that always returns are dead code.
    let (l, c, msg) = cpp_err("if (M < 2) return kernel(1);\nelse return kernel(2);\nreturn kernel(3);");
    assert_eq!((l, c), (3, 1));
    assert!(msg.contains("never reached"), "{msg}");
    // Type errors in conditions.
    assert!(cpp_err("if (M) return kernel(1); else return kernel(2);").2.contains("expected a condition"));
    let (l, c, msg) = cpp_err("if (1 < M < 5) return kernel(1); else return kernel(2);");
    assert_eq!((l, c), (1, 5));
    assert!(msg.contains("a < b && b < c"), "{msg}");
    assert!(cpp_err("if (M % 2 == 0) return kernel(1); else return kernel(2);").2.contains("`%` is not supported"));
    assert!(cpp_err("if (log2(M) > 1) return kernel(1); else return kernel(2);").2.contains("unknown function `log2`"));
    assert!(cpp_err("if (cdiv(M) > 1) return kernel(1); else return kernel(2);")
        .2
        .contains("takes 2 arguments, found 1"));
    assert!(cpp_err("if (M > 99999999999999999999) return kernel(1); else return kernel(2);")
        .2
        .contains("out of range"));
    assert!(cpp_err("if (M > 12abc) return kernel(1); else return kernel(2);")
        .2
        .contains("invalid integer literal `12abc`"));
    assert!(cpp_err("/* never closed\nreturn kernel(1);").2.contains("unterminated"));
    // CK-tile instances are not rule leaves.
    let msg =
        cpp_err("return a8w8_blockscale_cktile_128x128x128_1x4x1_16x16x64_intrawave_0x1x0_1<DDataType, EDataType>;").2;
    assert!(msg.contains("CK-tile instance"), "{msg}");
    // Split-K must be a number.
    let (l, c, msg) = cpp_err("return {kernel(1), x};");
    assert_eq!((l, c), (1, 20));
    assert!(msg.contains("expected split-K"), "{msg}");
}

#[test]
fn rust_errors_name_the_position() {
    let (l, c, msg) = rust_err("if m <= 128 {\n    1\n} else if batch > 2 {\n    2\n} else {\n    3\n}");
    assert_eq!((l, c), (3, 11));
    assert_eq!(msg, "unknown variable `batch`; the rule may use M, N, K");
    let (l, c, msg) = rust_err("if m <= 128 {\n    1\n} else if n > 2 {\n    2\n}");
    assert_eq!((l, c), (3, 8));
    assert!(msg.contains("no final `else`"), "{msg}");
    let (l, c, msg) = rust_err("if (m <= 128 {\n    1\n} else {\n    2\n}");
    assert_eq!(l, 1, "{msg}");
    assert!(c >= 4, "{c} {msg}");
    assert!(msg.starts_with("Rust syntax error"), "{msg}");
    let (l, c, msg) = rust_err("if m < 2 {\n    a8w8_blockscale_1x128x128_bogus\n} else {\n    1\n}");
    assert_eq!((l, c), (2, 5));
    assert!(msg.starts_with("unknown instance `a8w8_blockscale_1x128x128_bogus`"), "{msg}");
    let (l, c, msg) = rust_err("if m < 2 {\n    let x = 1;\n    x\n} else {\n    1\n}");
    assert_eq!((l, c), (3, 5));
    assert!(msg.contains("single expression"), "{msg}");
    assert!(rust_err("if m % 2 == 0 { 1 } else { 2 }").2.contains("`%` is not supported"));
    assert!(rust_err("if m.pow(2) > 3 { 1 } else { 2 }").2.contains("unknown method `pow`"));
    assert!(rust_err("if m < 2 { (1, 2, 3) } else { 2 }").2.contains("expected an instance name"));
}

#[test]
fn json_and_file_errors() {
    let e = parse_json("{\n  \"root\": {\"leaf\": {\"kernel_id\": \"x\"}}\n}").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.message.starts_with("invalid rule JSON"), "{}", e.message);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.cpp");
    std::fs::write(&path, "if (M < 1) {\n  return kernel(1);\n} else {\n  return kernel(2)\n}\n").unwrap();
    let e: RuleError = load(&path, cat()).unwrap_err();
    assert_eq!((e.line, e.column), (5, 1));
    assert_eq!(e.to_string(), format!("{}:5:1: expected `;` after the returned kernel, found `}}`", path.display()));
    let missing = dir.path().join("missing.rs");
    let e = load(&missing, cat()).unwrap_err();
    assert!(e.to_string().starts_with(&format!("{}: cannot read the rule file", missing.display())), "{e}");
}

#[test]
fn nesting_limits_give_errors_not_crashes() {
    // json_depth matches the JSON reader's limit exactly: 127 levels read back, 128 do not.
    let with_nots = |k: usize| {
        let mut c = Cond::Const(true);
        for _ in 0..k {
            c = Cond::Not(Box::new(c));
        }
        Rule::new(chain(vec![(c, leaf(1, 0))], leaf(2, 0)))
    };
    let ok_rule = with_nots(121);
    assert_eq!(ok_rule.json_depth(), MAX_JSON_DEPTH);
    assert_eq!(parse_json(&to_json(&ok_rule)).unwrap(), ok_rule);
    let deep = with_nots(122);
    assert_eq!(deep.json_depth(), 128);
    assert!(parse_json(&to_json(&deep)).unwrap_err().message.contains("recursion limit"));
    // Text forms refuse what JSON could not store, and absurd nesting, with a position.
    let sum = |n: usize, var: &str| vec![var; n].join(" + ");
    let (l, c, msg) = cpp_err(&format!(
        "if (M > 0) return kernel(1);\nelse if ({} > 3) return kernel(1); else return kernel(2);",
        sum(70, "M")
    ));
    assert_eq!((l, c), (2, 6));
    assert!(msg.contains("nests too deeply") && msg.contains("127 levels"), "{msg}");
    let (l, c, msg) = rust_err(&format!("if {} > 3 {{ 1 }} else {{ 2 }}", sum(70, "m")));
    assert_eq!((l, c), (1, 1));
    assert!(msg.contains("nests too deeply"), "{msg}");
    assert!(parse_cpp(&format!("if ({} > 3) return kernel(1); else return kernel(2);", sum(40, "M")), cat()).is_ok());
    let parens = format!("{}M{}", "(".repeat(60), ")".repeat(60));
    let (l, c, msg) = cpp_err(&format!("if ({parens} > 1) return kernel(1); else return kernel(2);"));
    assert_eq!((l, c), (1, 52));
    assert!(msg.contains("brackets nest more than 48 levels"), "{msg}");
    assert!(rust_err(&format!("if {} m > 1 {{ 1 }} else {{ 2 }}", "!".repeat(100))).2.contains("in a row"));
    let ors = (0..400).map(|i| format!("M == {i}")).collect::<Vec<_>>().join(" || ");
    assert!(cpp_err(&format!("if ({ors}) return kernel(1); else return kernel(2);"))
        .2
        .contains("more than 1000 operator characters"));
    // Long flat chains are fine.
    let chain_text: String =
        (1..=2500).map(|i| format!("if (M == {i}) return kernel(1); else ")).collect::<String>() + "return kernel(2);";
    let rule = parse_cpp(&chain_text, cat()).unwrap();
    assert_eq!(rule.num_leaves(), 2501);
    assert_eq!(rule.eval(2500, 1, 1), Leaf::new(1, 0));
    assert_eq!(rule.eval(2501, 1, 1), Leaf::new(2, 0));
    // The Rust form (whose `else if` chains syn reads recursively) stops at 2000 `if`s.
    let (l, _, msg) = rust_err(&rule_to_rust_text(&rule, cat()));
    assert_eq!(l, 4001, "the 2001st `if` (two lines per branch)");
    assert!(msg.contains("at most 2000 `if`s"), "{msg}");
    let short = Rule::new(chain(rule_branches(&rule).into_iter().take(300).collect(), leaf(2, 0)));
    assert_eq!(parse_rust(&rule_to_rust_text(&short, cat()), cat()).unwrap(), short);
}

// ---- validation ----------------------------------------------------------------------------

fn warnings(text: &str) -> Vec<(Option<usize>, Vec<usize>, String)> {
    let c = cat();
    let parsed = parse_any_with_source(text, c).unwrap();
    validate_with_source(&parsed.rule, c, &parsed.source)
        .into_iter()
        .map(|i| {
            assert_eq!(i.severity, Severity::Warning, "{i}");
            (i.line, i.path, i.message)
        })
        .collect()
}

#[test]
fn unreachable_branches_are_found_exactly() {
    // M <= 64 after M <= 128: never taken.
    let w = warnings("if (M <= 128) return kernel(1);\nelse if (M <= 64) return kernel(2);\nelse return kernel(3);");
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!((w[0].0, &w[0].1), (Some(2), &vec![1]));
    assert!(w[0].2.starts_with("branch 2 (`if (M <= 64)`) is never taken"), "{}", w[0].2);
    // M > 64 after M <= 128: reachable (M > 128); only the final else is dead, since
    // M <= 128 || M > 64 covers every M.
    let w = warnings("if (M <= 128) return kernel(1);\nelse if (M > 64) return kernel(2);\nelse return kernel(3);\n");
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!((w[0].0, &w[0].1), (Some(3), &vec![2]));
    assert!(w[0].2.contains("final `else` is never taken"));
    assert!(warnings(
        "if (M <= 128) return kernel(1);\nelse if (M > 64 && N > 5) return kernel(2);\nelse return kernel(3);"
    )
    .is_empty());
    // Constants fold: 2 * 64 + 1 = 129.
    assert_eq!(warnings("if (M < 2 * 64 + 1) return kernel(1); else if (cdiv(256, 2) >= M) return kernel(2); else return kernel(3);").len(), 1);
    // The enclosing path counts: inside M >= 1000, M < 10 is impossible.
    let w = warnings("if (M >= 1000) {\n  if (M < 10 && N > 5) return kernel(1);\n  else return kernel(2);\n} else return kernel(3);");
    assert_eq!(w.iter().map(|x| (x.0, x.1.clone())).collect::<Vec<_>>(), vec![(Some(2), vec![0, 0])]);
    // Dimensions are at least 1.
    assert_eq!(warnings("if (N < 1) return kernel(1); else return kernel(2);").len(), 1);
    // Or/Not: N == 1 || N > 1 covers all N, so the final else is dead; M != 5 then M == 5 then M < 3 (dead).
    assert_eq!(warnings("if (N == 1 || !(N <= 1)) return kernel(1); else return kernel(2);").len(), 1);
    let w = warnings("if (M != 5) return kernel(1); else if (M == 5) return kernel(2); else if (M < 3) return kernel(3); else return kernel(4);");
    assert_eq!(w.iter().map(|x| x.1.clone()).collect::<Vec<_>>(), vec![vec![2], vec![3]]);
    // A constant true condition makes every later branch dead.
    let w = warnings("if m > 5 { 1 } else if true { 2 } else if n > 3 { 3 } else { 4 }");
    assert_eq!(w.iter().map(|x| x.1.clone()).collect::<Vec<_>>(), vec![vec![2], vec![3]]);
    assert!(w[0].2.contains("an earlier condition is always true"), "{}", w[0].2);
    // Conditions that are not variable-vs-constant are assumed reachable.
    assert!(warnings(
        "if (M * N <= 128) return kernel(1); else if (M * N <= 64) return kernel(2); else return kernel(3);"
    )
    .is_empty());
    assert!(
        warnings("if (M <= N) return kernel(1); else if (M > N) return kernel(2); else return kernel(3);").is_empty()
    );
    // Different variables do not interfere; multi-variable boxes stay exact.
    assert!(warnings(
        "if (M <= 128 && N <= 128) return kernel(1); else if (M <= 64) return kernel(2); else return kernel(3);"
    )
    .is_empty());
}

#[test]
fn unknown_instances_and_split_k_are_errors() {
    let c = cat();
    let rule = Rule::new(chain(
        vec![(cmp(CmpOp::Lt, m(), lit(8)), leaf(19, 0)), (cmp(CmpOp::Lt, m(), lit(16)), leaf(3, 6))],
        Node::Leaf(Leaf::new(-1, 0)),
    ));
    let issues = validate(&rule, c);
    assert_eq!(issues.len(), 3, "{issues:?}");
    assert!(issues.iter().all(|i| i.severity == Severity::Error && i.line.is_none()));
    assert_eq!(issues[0].path, vec![0]);
    assert!(
        issues[0].message.contains("kernelId 19 is not a legacy candidate (the catalog has 0..18)"),
        "{}",
        issues[0].message
    );
    assert_eq!(issues[1].path, vec![1]);
    assert!(issues[1].message.contains("split-K 6 is out of range"), "{}", issues[1].message);
    assert_eq!(issues[2].path, vec![2]);
    assert!(issues[2].message.contains("default alias; write its target kernelId 7"));
    // From text, errors carry the leaf's line; kernel(-1) is resolved to 7 when parsed.
    let parsed =
        parse_any_with_source("if (M < 8) {\n  return kernel(42);\n} else {\n  return {kernel(-1), 6};\n}", c).unwrap();
    assert_eq!(parsed.rule.leaves(), vec![Leaf::new(42, 0), Leaf::new(7, 6)]);
    let issues = validate_with_source(&parsed.rule, c, &parsed.source);
    assert_eq!(issues.iter().map(|i| i.line).collect::<Vec<_>>(), vec![Some(2), Some(4)]);
    // Leaves of a dead branch are still checked (and nothing inside it is reported as dead).
    let parsed = parse_any_with_source(
        "if m <= 128 {\n    (1, 0)\n} else if m <= 64 {\n    if m > 1000 { (2, 6) } else { 3 }\n} else {\n    4\n}",
        c,
    )
    .unwrap();
    let issues = validate_with_source(&parsed.rule, c, &parsed.source);
    let got: Vec<(Severity, Option<usize>, Vec<usize>)> =
        issues.iter().map(|i| (i.severity, i.line, i.path.clone())).collect();
    assert_eq!(got, vec![(Severity::Warning, Some(3), vec![1]), (Severity::Error, Some(4), vec![1, 0])]);
    // Division by a constant zero is flagged.
    let w = warnings("if (M / (2 - 2) > 1) return kernel(1); else return kernel(2);");
    assert_eq!(w.len(), 1);
    assert!(w[0].2.contains("divides by 0"), "{}", w[0].2);
}

#[test]
fn depth_counts_tests_on_the_longest_path() {
    assert_eq!(Rule::new(leaf(1, 0)).depth(), 0);
    let flat = Rule::new(chain(vec![(Cond::Const(true), leaf(1, 0)), (Cond::Const(true), leaf(2, 0))], leaf(3, 0)));
    let nested = Rule::new(chain(
        vec![(Cond::Const(true), leaf(1, 0))],
        chain(vec![(Cond::Const(true), leaf(2, 0))], leaf(3, 0)),
    ));
    assert_eq!(flat.depth(), 2);
    assert_eq!(nested.depth(), 2);
    let deep = Rule::new(chain(vec![(Cond::Const(true), nested.root.clone())], leaf(4, 0)));
    assert_eq!(deep.depth(), 3);
    assert_eq!(deep.num_leaves(), 4);
    assert_eq!(deep.instances_used().into_iter().map(|l| l.kernel_id).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
}

// ---- synth check ----------------------------------------------------------------------------

#[test]
fn check_command_prints_the_canonical_form_and_fails_on_errors() {
    let bin = env!("CARGO_BIN_EXE_synth");
    let out = std::process::Command::new(bin)
        .args(["check", fixture("geak_blog_rule.cpp").to_str().unwrap(), "--format", "rust"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(parse_rust(&stdout, cat()).unwrap(), geak());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("6 leaves, depth 5, 6 distinct instances, variables [M, N, K]; 0 issue(s)"), "{stderr}");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    let rule = Rule::new(chain(vec![(cmp(CmpOp::Le, m(), lit(128)), leaf(3, 7))], leaf(1, 0)));
    std::fs::write(&bad, to_json(&rule)).unwrap();
    let out = std::process::Command::new(bin).args(["check", bad.to_str().unwrap()]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error: split-K 7 is out of range"), "{stderr}");
    assert_eq!(parse_cpp(&String::from_utf8(out.stdout).unwrap(), cat()).unwrap(), rule);

    let garbage = dir.path().join("garbage.cpp");
    std::fs::write(&garbage, "if (M <= 128) {\n  return kernel(1);\n} else if (batch > 1) {\n  return kernel(2);\n} else {\n  return kernel(3);\n}\n").unwrap();
    let out = std::process::Command::new(bin).args(["check", garbage.to_str().unwrap()]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{}:3:12: unknown variable `batch`", garbage.display())), "{stderr}");
}

// ---- size and nesting: long rules parse or are refused, never abort ---------------------------------

/// `n` guard clauses `if (M == i) return kernel(i % 19);` and a final `return kernel(7);`.
fn guard_clauses(n: usize) -> String {
    (0..n)
        .map(|i| format!("if (M == {i}) return kernel({});\n", i % 19))
        .chain(["return kernel(7);\n".into()])
        .collect()
}

#[test]
fn twenty_thousand_flat_guard_clauses_parse_and_the_branch_limit_refuses_them() {
    let text = guard_clauses(20_000);
    assert!(text.len() > 600_000 && text.len() < 4 << 20, "{} bytes, under the rule file cap", text.len());
    let started = std::time::Instant::now();
    let rule = parse_cpp(&text, cat()).unwrap();
    let elapsed = started.elapsed();
    assert_eq!(rule_branches(&rule).len(), 20_000, "guard clauses read as one else-if chain");
    for mm in [0u32, 1, 18, 19, 12_345, 19_999] {
        assert_eq!(id_at(&rule, mm, 4096, 4096), (mm % 19) as i32, "M = {mm}");
    }
    assert_eq!(id_at(&rule, 20_000, 4096, 4096), 7);
    // Linear, not quadratic: a quadratic merge took minutes on 20,000 clauses.
    assert!(elapsed.as_secs() < 10, "parsing took {elapsed:?}");
    let issues = validate(&rule, cat());
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert!(issues[0].severity == Severity::Error && issues[0].message.contains("20000 branches"), "{issues:?}");

    // The same sequence written as an else-if chain and with braces.
    let chain_text: String = (0..20_000)
        .map(|i| format!("{}if (M == {i}) {{ return kernel({}); }}\n", if i > 0 { "else " } else { "" }, i % 19))
        .chain(["else { return kernel(7); }\n".into()])
        .collect();
    assert_eq!(parse_cpp(&chain_text, cat()).unwrap(), rule);
    let braced: String = (0..20_000)
        .map(|i| format!("if (M == {i}) {{ return kernel({}); }}\n", i % 19))
        .chain(["return kernel(7);\n".into()])
        .collect();
    assert_eq!(parse_cpp(&braced, cat()).unwrap(), rule);
}

#[test]
fn guard_clauses_with_fall_through_bodies_keep_their_meaning() {
    // The first `if` falls through to the clauses after it; nested guards merge into one chain.
    let text = "if (M > 100) { if (N > 4096) return kernel(1); }\nif (M > 50) return kernel(2);\nreturn kernel(3);\n";
    let rule = parse_cpp(text, cat()).unwrap();
    for (mm, nn, want) in [(200, 8192, 1), (200, 1024, 2), (60, 8192, 2), (10, 8192, 3)] {
        assert_eq!(id_at(&rule, mm, nn, 128), want, "M = {mm}, N = {nn}");
    }
    // Inside `M > 100` the copied `M > 50` always holds: the validator sees the copy's dead `else`.
    let issues = validate_with_source(&rule, cat(), &parse_any_with_source(text, cat()).unwrap().source);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert!(issues[0].severity == Severity::Warning && issues[0].line == Some(3), "{issues:?}");
    // Fall-through copies that would explode are refused with the expansion limit, at a line.
    let mut blowup = String::new();
    for i in 0..40 {
        blowup.push_str(&format!("if (M > {i}) {{ if (N > {i}) return kernel(1); }}\n"));
    }
    blowup.push_str("return kernel(2);\n");
    let (line, _, message) = cpp_err(&blowup);
    assert!(message.contains("expands to more than 200000 nodes"), "{message}");
    assert!((1..=40).contains(&line), "{line}");
}

#[test]
fn deeply_nested_rules_are_an_error_naming_the_line_in_every_form() {
    let depth = 10_000;
    // Without braces: the parser's nesting limit.
    let unbraced = format!("{}return kernel(1);\nreturn kernel(2);\n", "if (true)\n".repeat(depth));
    let (line, _, message) = cpp_err(&unbraced);
    assert!(message.contains("nests more than 256 levels deep"), "{message}");
    assert_eq!(line, 256);
    // With braces (also nested `else { if ... }`): the bracket limit.
    let braced =
        format!("{}return kernel(1);\n{}return kernel(2);\n", "if (M > 0) {\n".repeat(depth), "}\n".repeat(depth));
    let (line, _, message) = cpp_err(&braced);
    assert!(message.contains("brackets nest more than 48 levels"), "{message}");
    assert_eq!(line, 49);
    let elses = format!(
        "{}return kernel(1);\n{}",
        "if (M > 0) { return kernel(3); } else {\n".repeat(depth),
        "}\n".repeat(depth)
    );
    assert!(cpp_err(&elses).2.contains("brackets nest more than 48 levels"));
    // Nesting within the parser's limits but past the JSON form's depth: its own error.
    let forty = format!("{}return kernel(1);\nreturn kernel(2);\n", "if (true)\n".repeat(40));
    assert!(cpp_err(&forty).2.contains("nests too deeply"), "{:?}", cpp_err(&forty));

    // Rust: nested blocks hit the bracket limit; a long else-if chain is refused by the `if` count.
    let rust_nested = format!("{}1{}", "if m > 0 { ".repeat(depth), " } else { 2 }".repeat(depth));
    assert!(parse_rust(&rust_nested, cat()).unwrap_err().message.contains("brackets nest more than 48"));
    let rust_chain = |n: usize| -> String {
        (0..n).map(|i| format!("if m == {i} {{ {} }} else ", i % 19)).chain(["{ 7 }\n".into()]).collect()
    };
    let err = parse_rust(&rust_chain(20_000), cat()).unwrap_err();
    assert!(err.message.contains("at most 2000 `if`s"), "{err}");
    let at_limit = parse_rust(&rust_chain(2_000), cat()).unwrap();
    assert_eq!(rule_branches(&at_limit).len(), 2_000);
    assert_eq!(id_at(&at_limit, 1_234, 128, 128), 1_234 % 19);

    // JSON: deep nesting is serde_json's recursion limit; a flat chain reads, then the branch limit.
    let deep_json = format!("{}{}", "{\"root\": ".repeat(depth), "}".repeat(depth));
    assert!(parse_json(&deep_json).is_err());
    let flat = parse_cpp(&guard_clauses(20_000), cat()).unwrap();
    let back = parse_json(&to_json(&flat)).unwrap();
    assert_eq!(back, flat);
    assert!(validate(&back, cat())[0].message.contains("20000 branches"));
}

#[test]
fn check_command_refuses_huge_and_deep_rules_with_exit_code_1() {
    let bin = env!("CARGO_BIN_EXE_synth");
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("flat.cpp", guard_clauses(20_000), "the rule has 20000 branches"),
        ("deep.cpp", format!("{}return kernel(1);\nreturn kernel(2);\n", "if (true)\n".repeat(10_000)), ":256:"),
        ("deep_braces.cpp", format!("{}return kernel(1);\n", "if (M > 0) {\n".repeat(10_000)), ":49:"),
    ];
    for (name, text, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = std::process::Command::new(bin).args(["check", path.to_str().unwrap()]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
        // Every command reads rule files through `load_checked`: the same refusal, as an error.
        let err = synth_core::rule::load_checked(&path, cat()).unwrap_err().to_string();
        assert!(err.contains(expected) || err.contains("20000 branches"), "{name}: {err}");
    }
}

// ---- translation phases 1 and 2: synth reads rule text as g++ does ------------------------------------

/// Compiles each rule text (statements with `kernel(ID)` or instance-name leaves, included byte for byte
/// as the body of `select(M, N, K)`) with g++, runs it on every M of `ms` and returns the kernelIds.
fn gxx_selections(dir: &Path, rules: &[String], ms: &[u32]) -> Vec<Vec<i32>> {
    let ok = std::process::Command::new("g++").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(ok, "`g++` is required to check that synth reads rule text as the compiler does; install it and rerun");
    let mut src = String::from(
        "#include <cstdio>\nstruct Choice { int id; int split; Choice(int i, int s = 0) : id(i), split(s) {} };\n\
         static Choice kernel(int id) { return Choice(id); }\nusing DDataType = float;\nusing EDataType = float;\n",
    );
    for inst in cat().legacy_candidates() {
        src.push_str(&format!("template <typename D, typename E> constexpr int {} = {};\n", inst.name, inst.id));
    }
    for (i, rule) in rules.iter().enumerate() {
        std::fs::write(dir.join(format!("rule_{i}.inc")), rule).unwrap();
        src.push_str(&format!(
            "static Choice select_{i}(long long M, long long N, long long K) {{\n(void)M; (void)N; (void)K;\n\
             #include \"rule_{i}.inc\"\n}}\n"
        ));
    }
    let list: Vec<String> = ms.iter().map(u32::to_string).collect();
    src.push_str(&format!(
        "int main() {{\n  const long long ms[] = {{{}}};\n  for (long long m : ms) {{\n",
        list.join(", ")
    ));
    for i in 0..rules.len() {
        src.push_str(&format!("    std::printf(\"%d \", select_{i}(m, 4096, 4096).id);\n"));
    }
    src.push_str("    std::printf(\"\\n\");\n  }\n}\n");
    std::fs::write(dir.join("main.cpp"), src).unwrap();
    let exe = dir.join("select");
    let out = std::process::Command::new("g++")
        .current_dir(dir)
        .args(["-std=c++17", "-Werror=return-type", "main.cpp", "-o"])
        .arg(&exe)
        .output()
        .unwrap();
    assert!(out.status.success(), "g++ failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let out = std::process::Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<i32>> =
        text.lines().map(|l| l.split_whitespace().map(|v| v.parse().unwrap()).collect()).collect();
    assert_eq!(rows.len(), ms.len());
    (0..rules.len()).map(|i| rows.iter().map(|r| r[i]).collect()).collect()
}

/// Rule texts whose reading depends on translation phases 1 and 2 (and g++'s choices within them) or on
/// how C++ reads a literal.
fn phase_cases() -> Vec<(&'static str, String)> {
    [
        (
            "a note ending in `\\` swallows the next line",
            "// picked by hand \\\nreturn kernel(3);\nif (M <= 128) return kernel(1);\nreturn kernel(2);\n",
        ),
        (
            "a trailing comment ending in `\\`",
            "if (M <= 128) return kernel(1); // small M \\\nif (M <= 256) return kernel(2);\nreturn kernel(3);\n",
        ),
        (
            "`\\`, spaces and CRLF",
            "if (M <= 64) return kernel(4); // note \\  \r\nif (M <= 512) return kernel(5);\r\nreturn kernel(6);\r\n",
        ),
        ("a splice inside a number and a keyword", "if (M <= 1\\\n28) return kernel(1);\nret\\\nurn kernel(2);\n"),
        ("a lone CR ends a comment", "// note\rif (M <= 32) return kernel(8);\nreturn kernel(9);\n"),
        ("form feed and vertical tab are whitespace", "if (M <=\x0c 300)\x0b return kernel(10);\nreturn kernel(11);\n"),
        (
            "`*\\` + newline + `/` closes a block comment",
            "/* block *\\\n/ if (M <= 16) return kernel(12);\nreturn kernel(13);\n",
        ),
        (
            "`/*` inside `//` opens nothing",
            "// a /* b\nif (M <= 8) return kernel(14);\n// */ return kernel(0);\nreturn kernel(15);\n",
        ),
        ("`??/` is no trigraph in C++17", "if (M <= 100) return kernel(16); // what??/\nreturn kernel(17);\n"),
        ("a splice runs once", "if (M <= 200) return kernel(1); // x \\\\\n\nreturn kernel(2);\n"),
        ("a byte-order mark", "\u{FEFF}if (M <= 50) return kernel(3);\nreturn kernel(4);\n"),
        ("a backslash not before a line end", "if (M <= 40) return kernel(5); // a \\ b\nreturn kernel(6);\n"),
        (
            "a leading 0 makes an octal literal",
            "if (M <= 0100) return kernel(7);\nif (M <= 0x100ull) return kernel(8);\nreturn kernel(9);\n",
        ),
    ]
    .into_iter()
    .map(|(what, text)| (what, text.to_string()))
    .collect()
}

const PHASE_MS: [u32; 26] =
    [1, 8, 9, 16, 17, 28, 32, 33, 40, 41, 50, 51, 64, 65, 100, 101, 128, 129, 200, 201, 256, 257, 300, 301, 512, 513];

#[test]
fn synth_reads_spliced_lines_and_line_ends_as_gxx_does() {
    let cases = phase_cases();
    let texts: Vec<String> = cases.iter().map(|c| c.1.clone()).collect();
    let dir = tempfile::tempdir().unwrap();
    let compiled = gxx_selections(dir.path(), &texts, &PHASE_MS);
    let mut printed = Vec::new();
    for ((what, text), want) in cases.iter().zip(&compiled) {
        let rule = parse_cpp(text, cat()).unwrap_or_else(|e| panic!("{what}: {e}"));
        let got: Vec<i32> = PHASE_MS.iter().map(|&mm| id_at(&rule, mm, 4096, 4096)).collect();
        assert_eq!(&got, want, "{what}: synth's reading differs from g++'s (M = {PHASE_MS:?})");
        printed.push(rule_to_cpp_text(&rule, cat()));
    }
    // What `synth check --format cpp` prints compiles to the same selections.
    assert_eq!(gxx_selections(dir.path(), &printed, &PHASE_MS), compiled);
    // Hand-computed for two of them: the spliced lines are comments.
    assert_eq!(&compiled[0][16..18], &[1, 2], "M = 128, 129");
    assert_eq!(&compiled[1][17..22], &[3, 3, 3, 3, 3], "M = 129..257 skip the swallowed clause");
    let note = parse_cpp(&cases[0].1, cat()).unwrap().note;
    assert_eq!(note.as_deref(), Some("picked by hand return kernel(3);"));
}

#[test]
fn printed_notes_cannot_splice_or_end_the_comment() {
    // A note (from JSON, or a C++ `\\` + empty line) ending in a backslash, with a CR, with `\ ` at the end.
    let notes = ["ends in \\", "a\rreturn kernel(5);", "ends in \\  ", "x \\\n\\"];
    let base = parse_cpp("if (M <= 128) return kernel(1);\nreturn kernel(2);\n", cat()).unwrap();
    let texts: Vec<String> = notes
        .iter()
        .map(|n| rule_to_cpp_text(&Rule { root: base.root.clone(), note: Some(n.to_string()) }, cat()))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let compiled = gxx_selections(dir.path(), &texts, &PHASE_MS);
    let want: Vec<i32> = PHASE_MS.iter().map(|&mm| if mm <= 128 { 1 } else { 2 }).collect();
    for (text, got) in texts.iter().zip(&compiled) {
        assert_eq!(got, &want, "{text:?}");
        assert_eq!(parse_cpp(text, cat()).unwrap().root, base.root, "{text:?}");
    }
}

#[test]
fn integer_literals_are_read_as_cpp_reads_them() {
    for (word, value) in [("0", 0), ("0u", 0), ("0100", 64), ("017LL", 15), ("128", 128), ("0x80uLL", 128), ("7llu", 7)]
    {
        let rule = parse_cpp(&format!("if (M <= {word}) return kernel(1);\nreturn kernel(2);\n"), cat()).unwrap();
        assert_eq!(id_at(&rule, value, 1, 1), 1, "{word}");
        assert_eq!(id_at(&rule, value + 1, 1, 1), 2, "{word}");
    }
    for word in ["08", "0129", "1lL", "1lul", "1uu", "0b101"] {
        let (_, _, message) = cpp_err(&format!("if (M <= {word}) return kernel(1);\nreturn kernel(2);\n"));
        assert!(message.contains(&format!("invalid integer literal `{word}`")), "{word}: {message}");
    }
    assert!(cpp_err("if (M <= 09) return kernel(1);\nreturn kernel(2);\n").2.contains("octal"));
}

#[test]
fn positions_after_a_splice_name_the_lines_of_the_file() {
    // `bogus` stands on line 4 of the file (logical line 3).
    let (line, col, message) = cpp_err("// a \\\nb\nif (M <= \\\n  bogus) return kernel(1);\nreturn kernel(2);\n");
    assert_eq!((line, col), (4, 3), "{message}");
    assert!(message.contains("unknown variable `bogus`"), "{message}");
    let rule = parse_any_with_source("if (M <= 1\\\n28)\n  return kernel(1);\nreturn kernel(2);\n", cat()).unwrap();
    assert_eq!(rule.source.leaf_line(&[0]), Some(3));
    assert_eq!(rule.source.leaf_line(&[1]), Some(4));
}

#[test]
fn preprocessor_directives_other_than_include_and_pragma_are_errors() {
    for (text, word) in [
        ("#if 0\nreturn kernel(3);\n#endif\nreturn kernel(4);\n", "#if"),
        ("#define kernel(x) kernel(x + 1)\nreturn kernel(3);\n", "#define"),
        ("  #  ifdef X\nreturn kernel(3);\n", "#ifdef"),
    ] {
        let (line, _, message) = cpp_err(text);
        assert_eq!(line, 1, "{text}");
        assert!(message.contains(&format!("preprocessor directive `{word}`")), "{message}");
    }
    let ok = "#include <cstdint>\n#pragma once\n#\nreturn kernel(3);\n";
    assert_eq!(id_at(&parse_cpp(ok, cat()).unwrap(), 1, 1, 1), 3);
}
