//! Property-based fuzzing of the input parsers: the C++, Rust and JSON rule readers and the AITER CSV
//! reader get random byte strings, token soups of their own grammar and mutations of valid inputs. Each
//! must return (Ok or an error), never panic or hang; a rule that parses and validates must print in every
//! form and read back as the same rule. `FUZZ_CASES` sets the number of cases per parser (default 2000;
//! the figures in README.md come from `FUZZ_CASES=1000000`).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use synth_core::catalog::Catalog;
use synth_core::rule::{self, validate};

fn cases() -> u32 {
    std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000)
}

fn runner() -> TestRunner {
    TestRunner::new(Config { cases: cases(), failure_persistence: None, max_shrink_iters: 2000, ..Config::default() })
}

fn catalog() -> &'static Catalog {
    static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    CATALOG.get_or_init(Catalog::embedded)
}

const CPP_TOKENS: &[&str] = &[
    "if",
    "else",
    "return",
    "{",
    "}",
    "(",
    ")",
    ";",
    ",",
    "M",
    "N",
    "K",
    "<",
    "<=",
    ">",
    ">=",
    "==",
    "!=",
    "&&",
    "||",
    "!",
    "+",
    "-",
    "*",
    "/",
    "%",
    "cdiv",
    "min",
    "max",
    "std::min",
    "0",
    "1",
    "7",
    "128",
    "-1",
    "9223372036854775807",
    "9223372036854775808",
    "99999999999999999999",
    "<DDataType, EDataType>",
    "&",
    "//",
    "/*",
    "*/",
    "\n",
    " ",
    "\"",
    "'",
    "#",
    "?",
    ":",
    "true",
    "false",
    "splitK",
    "int",
    "auto",
    "BlockscaleChoice",
    "a8w8_blockscale_1x128x128_256x16x128x256_16x16_16x16_16x16x1_16x16x1_1x16x1x16_4_1x1_intrawave_v1",
    "a8w8_blockscale_1x128x128_256x128x128x128_16x16_32x32_2x2_8x32x1_8x32x1_1x32x1x8_8_1x1_intrawave_v3",
    "\r",
    "\u{202E}",
    "\0",
    "```",
    "```cpp",
    // Line splices (alone, after spaces, before CRLF), form feed, a BOM, preprocessor directives.
    "\\\n",
    "\\ \n",
    "\\\r\n",
    "\\",
    "\u{0C}",
    "\u{FEFF}",
    "#if 0",
    "#include <x>",
];

const RUST_TOKENS: &[&str] = &[
    "if",
    "else",
    "{",
    "}",
    "(",
    ")",
    ",",
    "m",
    "n",
    "k",
    "<",
    "<=",
    ">",
    ">=",
    "==",
    "!=",
    "&&",
    "||",
    "!",
    "+",
    "-",
    "*",
    "/",
    "cdiv",
    ".min",
    ".max",
    "wrapping_add",
    "0",
    "1",
    "64",
    "-3",
    "i64::MIN",
    "i64::MAX",
    "KERNEL_4",
    "Selection",
    "kernel_id",
    "split_k",
    ":",
    "=>",
    "match",
    "_",
    "let",
    ";",
    "\n",
    " ",
    "\"",
    "'",
    "//",
    "/*",
    "*/",
    "true",
    "false",
    "u32",
    "as",
    "18446744073709551616",
    "\u{202E}",
    "r#\"",
    "#",
];

const JSON_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"root\"",
    "\"leaf\"",
    "\"chain\"",
    "\"branches\"",
    "\"otherwise\"",
    "\"kernel_id\"",
    "\"split_k\"",
    "\"note\"",
    "\"cmp\"",
    "\"op\"",
    "\"Lt\"",
    "\"Ge\"",
    "\"lhs\"",
    "\"rhs\"",
    "\"var\"",
    "\"M\"",
    "\"K\"",
    "\"lit\"",
    "\"bin\"",
    "\"Div\"",
    "\"CeilDiv\"",
    "\"and\"",
    "\"or\"",
    "\"not\"",
    "\"const\"",
    "true",
    "false",
    "null",
    "0",
    "3",
    "-1",
    "19",
    "31",
    "4294967296",
    "1e999",
    "9223372036854775808",
    "\"x\\u0000\"",
    " ",
    "\n",
];

const CSV_TOKENS: &[&str] = &[
    ",",
    "\n",
    "\r\n",
    "\"",
    "sm_90",
    "gfx942",
    "132",
    "304",
    "1",
    "16",
    "5120",
    "4096",
    "ck",
    "0",
    "7",
    "18",
    "19",
    "3",
    "17",
    "1e308",
    "-1",
    "NaN",
    "inf",
    "0.5",
    "1.0",
    "117.0756",
    "",
    " ",
    "ok",
    "fail:compile",
    "fail:",
    "a8w8_blockscale_1x128x128_256x16x128x256_16x16_16x16_16x16x1_16x16x1_1x16x1x16_4_1x1_intrawave_v1",
    "a8w8_blockscale_1x128x128_256x128x128x128_16x16_32x32_2x2_8x32x1_8x32x1_1x32x1x8_8_1x1_intrawave_v3",
    "\u{FEFF}",
    "x\"; system(\"id\"); //",
];

const CSV_HEADER: &str = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio";

/// Text from `tokens`: a soup of tokens, raw bytes, or a valid seed with random edits.
fn text_strategy(tokens: &'static [&'static str], seeds: Vec<String>) -> BoxedStrategy<String> {
    let soup = prop::collection::vec(0..tokens.len(), 0..60)
        .prop_map(move |ix| ix.into_iter().map(|i| tokens[i]).collect::<Vec<_>>().join(" "));
    let tight = prop::collection::vec(0..tokens.len(), 0..60)
        .prop_map(move |ix| ix.into_iter().map(|i| tokens[i]).collect::<String>());
    let bytes = prop::collection::vec(any::<u8>(), 0..200).prop_map(|b| String::from_utf8_lossy(&b).into_owned());
    let mutated =
        (0..seeds.len(), prop::collection::vec((any::<prop::sample::Index>(), 0..tokens.len(), 0u8..3), 1..6))
            .prop_map(move |(s, edits)| {
                let mut t: Vec<char> = seeds[s].chars().collect();
                for (at, tok, kind) in edits {
                    let i = if t.is_empty() { 0 } else { at.index(t.len()) };
                    match kind {
                        0 if !t.is_empty() => {
                            t.remove(i);
                        }
                        1 => t.splice(i..i, tokens[tok].chars()).for_each(drop),
                        _ => {
                            let end = (i + 8).min(t.len());
                            t.splice(i..end, tokens[tok].chars()).for_each(drop);
                        }
                    }
                }
                t.into_iter().collect()
            });
    prop_oneof![soup, tight, bytes, mutated].boxed()
}

fn seeds() -> (Vec<String>, Vec<String>, Vec<String>) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let json = std::fs::read_to_string(dir.join("generated/rule.json")).unwrap();
    let rule = rule::parse_json(&json).unwrap();
    let cpp = rule::text::rule_to_cpp_text(&rule, catalog());
    let rust = rule::text::rule_to_rust_text(&rule, catalog());
    let geak = std::fs::read_to_string(dir.join("assets/rules/geak_blog_rule.cpp")).unwrap();
    (vec![cpp, geak], vec![rust], vec![json])
}

/// A rule that parsed and validated must print in every form and read back unchanged.
fn round_trip(r: &rule::Rule) -> Result<(), TestCaseError> {
    if validate::has_errors(&validate::validate(r, catalog())) {
        return Ok(());
    }
    let cat = catalog();
    let texts = [
        ("cpp", rule::text::rule_to_cpp_text(r, cat)),
        ("rust", rule::text::rule_to_rust_text(r, cat)),
        ("json", rule::to_json(r)),
    ];
    let want = rule::parse_json(&rule::to_json(r)).map_err(|e| TestCaseError::fail(e.to_string()))?;
    for (form, text) in texts {
        let back = rule::parse_any(&text, cat).map_err(|e| TestCaseError::fail(format!("{form}: {e}\n{text}")))?;
        prop_assert_eq!(back.canonical().root, want.canonical().root, "{} form: {}", form, text);
    }
    Ok(())
}

fn fuzz(name: &str, strategy: BoxedStrategy<String>, check: impl Fn(&str) -> Result<(), TestCaseError>) {
    let started = std::time::Instant::now();
    let mut runner = runner();
    let result = runner.run(&strategy, |t| check(&t));
    eprintln!("fuzz {name}: {} cases in {:.1} s", cases(), started.elapsed().as_secs_f64());
    if let Err(e) = result {
        panic!("fuzz {name}: {e}");
    }
}

#[test]
fn fuzz_cpp_rule_parser() {
    let (cpp, _, _) = seeds();
    fuzz("cpp", text_strategy(CPP_TOKENS, cpp), |t| match rule::parse_cpp(t, catalog()) {
        Ok(r) => round_trip(&r),
        Err(e) => {
            prop_assert!(!e.message.is_empty());
            Ok(())
        }
    });
}

#[test]
fn fuzz_rust_rule_parser() {
    let (_, rust, _) = seeds();
    fuzz("rust", text_strategy(RUST_TOKENS, rust), |t| match rule::parse_rust(t, catalog()) {
        Ok(r) => round_trip(&r),
        Err(e) => {
            prop_assert!(!e.message.is_empty());
            Ok(())
        }
    });
}

#[test]
fn fuzz_json_rule_parser() {
    let (_, _, json) = seeds();
    fuzz("json", text_strategy(JSON_TOKENS, json), |t| match rule::parse_json(t) {
        Ok(r) => round_trip(&r),
        Err(e) => {
            prop_assert!(!e.message.is_empty());
            Ok(())
        }
    });
}

#[test]
fn fuzz_aiter_csv_reader() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let data = std::fs::read_to_string(dir.join("measurements/h200/qwen3-32b-tp2.csv")).unwrap();
    let head: String = data.lines().take(6).map(|l| format!("{l}\n")).collect();
    let seeds = vec![head, format!("{CSV_HEADER}\n")];
    let body = text_strategy(CSV_TOKENS, seeds.clone());
    // Half the cases keep a valid header so the row checks are reached.
    let strategy =
        (any::<bool>(), body).prop_map(|(header, b)| if header { format!("{CSV_HEADER}\n{b}") } else { b }).boxed();
    fuzz("aiter-csv", strategy, |t| {
        match synth_core::table::parse_aiter_csv(t.as_bytes(), "fuzz.csv", catalog()) {
            Ok(rows) => {
                for r in rows {
                    if let Some(us) = r.us {
                        prop_assert!(synth_core::table::aiter_csv::US_RANGE.contains(&us), "{us}");
                    }
                }
            }
            Err(e) => prop_assert!(e.to_string().starts_with("fuzz.csv")),
        }
        Ok(())
    });
}
