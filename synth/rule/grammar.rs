//! The rule language as data, for decoding constraints: a GBNF grammar of the C++ form a model is asked
//! to write (llama.cpp's `grammar` request field) and a JSON schema of the rule's JSON form (the serde form
//! [`super::parse_json`] reads; `response_format`). Both are built from the definitions the parsers and
//! printers use — the operators of [`super::ir`] ([`CmpOp::ALL`], [`BinOp::ALL`] with their symbols and call
//! names), the variables, the leaf spellings of [`super::text`] and the backend calls of
//! [`super::parse_cpp`] — and from a [`Vocabulary`]: the measured kernels and split-K levels and the
//! feature expressions, each a closed set of alternatives.
//!
//! The grammar is the canonical shape [`super::text::rule_to_cpp_text`] prints (an `if` / `else if` /
//! `else` chain, every leaf `return {ITEM, SPLIT};`), with free whitespace between tokens: every text it
//! accepts parses with [`super::parse_cpp`] to a rule whose leaves are in the vocabulary. Integer literals
//! have at most 18 digits (so they fit i64) and no leading zero (C++ would read an octal literal).
//! Whitespace is `[ \t\n]*`: a bounded repetition (`{0,64}`) makes llama.cpp's grammar sampler so slow
//! that one answer of a 135M model took over 10 minutes on 2 cores; `max_tokens` bounds the answer instead.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use super::ir::{BinOp, CmpOp, Expr, Leaf, Var};
use super::parse_cpp::backend_call;
use super::text::{expr_to_cpp, leaf_item_cpp};
use crate::catalog::{Candidate, Catalog, KernelRef, Libtype};

/// What a rule may name: the kernels and split-K levels of the measured candidates, and the features
/// (name, expression) offered to proposers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocabulary {
    pub kernels: BTreeSet<KernelRef>,
    pub split_ks: BTreeSet<u32>,
    pub features: Vec<(String, Expr)>,
}

impl Vocabulary {
    /// The vocabulary of a latency matrix's candidates and the given features.
    pub fn new(candidates: &[Candidate], features: Vec<(String, Expr)>) -> Vocabulary {
        Vocabulary {
            kernels: candidates.iter().map(|c| KernelRef { backend: c.backend, id: c.kernel_id }).collect(),
            split_ks: candidates.iter().map(|c| c.split_k).collect(),
            features,
        }
    }
}

/// A GBNF string literal: `"`, `\` and control characters escaped (llama.cpp's escapes).
pub fn gbnf_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `a | b | c` of the literals of `items` (in order, duplicates dropped).
fn alternatives<I: IntoIterator<Item = String>>(items: I) -> String {
    let mut seen = BTreeSet::new();
    let lits: Vec<String> = items.into_iter().filter(|s| seen.insert(s.clone())).map(|s| gbnf_literal(&s)).collect();
    lits.join(" | ")
}

/// The call word of a `BACKEND(ID)` leaf (`kernel` for CK legacy), checked against the parser's.
fn call_word(backend: Libtype) -> &'static str {
    let word = if backend.is_ck() { "kernel" } else { backend.as_str() };
    debug_assert_eq!(backend_call(word), Some(backend));
    word
}

/// Every spelling of the vocabulary's kernels a leaf may use: `kernel(ID)` / `BACKEND(ID)` and the
/// printer's own (the instance name with its template arguments, a triton config's name).
pub fn item_spellings(vocab: &Vocabulary, catalog: &Catalog) -> Vec<String> {
    let mut out = Vec::new();
    for k in &vocab.kernels {
        out.push(format!("{}({})", call_word(k.backend), k.id));
        out.push(leaf_item_cpp(&Leaf::of(k.backend, k.id, 0), catalog));
    }
    out
}

/// The GBNF grammar of the C++ rule form over `vocab` (module documentation).
pub fn gbnf(vocab: &Vocabulary, catalog: &Catalog) -> String {
    let cmp_ops = {
        // Longer symbols first, so `<=` is never read as `<` then `=`.
        let mut ops: Vec<&str> = CmpOp::ALL.iter().map(|o| o.symbol()).collect();
        ops.sort_by_key(|s| std::cmp::Reverse(s.len()));
        alternatives(ops.into_iter().map(str::to_string))
    };
    let infix = |ops: &[BinOp]| alternatives(ops.iter().filter_map(|o| o.infix()).map(str::to_string));
    let calls = alternatives(BinOp::ALL.iter().filter_map(|o| o.call_name()).map(str::to_string));
    let vars = alternatives(Var::ALL.iter().map(|v| v.upper().to_string()));
    let splits = alternatives(vocab.split_ks.iter().map(u32::to_string));
    let items = alternatives(item_spellings(vocab, catalog));
    let mut rules: Vec<(&str, String)> = vec![
        ("root", "ws node ws".into()),
        ("node", "leaf | chain".into()),
        ("leaf", r#""return" ws "{" ws item ws "," ws split ws "}" ws ";""#.into()),
        ("chain", r#"branch (ws "else" ws1 branch)* ws "else" ws "{" ws node ws "}""#.into()),
        ("branch", r#""if" ws "(" ws cond ws ")" ws "{" ws node ws "}""#.into()),
        ("cond", r#"conj (ws "||" ws conj)*"#.into()),
        ("conj", r#"atom (ws "&&" ws atom)*"#.into()),
        ("atom", r#"cmp | "(" ws cond ws ")" | negation | bool"#.into()),
        ("negation", r#""!" ws ("(" ws cond ws ")" | negation | bool)"#.into()),
        ("bool", r#""true" | "false""#.into()),
    ];
    if vocab.features.is_empty() {
        rules.push(("cmp", "expr ws cmp-op ws expr".into()));
    } else {
        rules.push(("cmp", "(feature | expr) ws cmp-op ws expr".into()));
        rules.push(("feature", alternatives(vocab.features.iter().map(|(_, e)| expr_to_cpp(e)))));
    }
    rules.extend([
        ("cmp-op", cmp_ops),
        ("expr", "term (ws add-op ws term)*".into()),
        ("add-op", infix(&[BinOp::Add, BinOp::Sub])),
        ("term", "factor (ws mul-op ws factor)*".into()),
        ("mul-op", infix(&[BinOp::Mul, BinOp::Div])),
        (
            "factor",
            r#"var | int | "-" ws factor | call ws "(" ws expr ws "," ws expr ws ")" | "(" ws expr ws ")""#.into(),
        ),
        ("call", calls),
        ("var", vars),
        ("int", r#""0" | [1-9] [0-9]{0,17}"#.into()),
        ("item", items),
        ("split", splits),
        ("ws", r"[ \t\n]*".into()),
        ("ws1", r"[ \t\n]+".into()),
    ]);
    let mut out = String::from(
        "# The C++ form of a gemm-synth selection rule (if / else if / else, leaves `return {ITEM, SPLIT};`).\n",
    );
    for (name, body) in rules {
        let _ = writeln!(out, "{name} ::= {body}");
    }
    out
}

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/$defs/{name}") })
}

/// A closed object: exactly `props`, those named in `required` required.
fn object(props: Vec<(&str, Value)>, required: &[&str]) -> Value {
    let mut map = Map::new();
    for (k, v) in props {
        map.insert(k.to_string(), v);
    }
    json!({ "type": "object", "properties": map, "required": required, "additionalProperties": false })
}

/// `{key: value}` with the one key required (serde's externally tagged enum variant).
fn variant(key: &str, value: Value) -> Value {
    object(vec![(key, value)], &[key])
}

fn names<T: serde::Serialize>(items: &[T]) -> Value {
    Value::Array(items.iter().map(|x| serde_json::to_value(x).expect("a plain enum serializes")).collect())
}

/// The leaf schemas: per backend, its kernel ids and the split-K levels (a CK leaf writes no backend).
fn leaf_schema(vocab: &Vocabulary) -> Value {
    let backends: BTreeSet<Libtype> = vocab.kernels.iter().map(|k| k.backend).collect();
    let splits: Vec<u32> = vocab.split_ks.iter().copied().collect();
    let forms: Vec<Value> = backends
        .into_iter()
        .map(|b| {
            let ids: Vec<i32> = vocab.kernels.iter().filter(|k| k.backend == b).map(|k| k.id).collect();
            let backend = json!({ "enum": [b.as_str()] });
            let props = vec![
                ("backend", backend),
                ("kernel_id", json!({ "enum": ids })),
                ("split_k", json!({ "enum": splits })),
            ];
            let required: &[&str] =
                if b.is_ck() { &["kernel_id", "split_k"] } else { &["backend", "kernel_id", "split_k"] };
            object(props, required)
        })
        .collect();
    json!({ "anyOf": forms })
}

/// The JSON schema of a rule's JSON form over `vocab` (module documentation). Feature expressions are
/// offered as constants beside the general expression forms.
pub fn json_schema(vocab: &Vocabulary) -> Value {
    let binary = |ops: Value| {
        object(
            vec![("op", json!({ "enum": ops })), ("lhs", reference("expr")), ("rhs", reference("expr"))],
            &["op", "lhs", "rhs"],
        )
    };
    let mut exprs: Vec<Value> = vocab
        .features
        .iter()
        .map(|(_, e)| json!({ "const": serde_json::to_value(e).expect("an expression serializes") }))
        .collect();
    exprs.push(variant("var", json!({ "enum": names(&Var::ALL) })));
    exprs.push(variant("lit", json!({ "type": "integer" })));
    exprs.push(variant("bin", binary(names(&BinOp::ALL))));
    let conds = vec![
        variant("cmp", binary(names(&CmpOp::ALL))),
        variant("and", json!({ "type": "array", "items": reference("cond") })),
        variant("or", json!({ "type": "array", "items": reference("cond") })),
        variant("not", reference("cond")),
        variant("const", json!({ "type": "boolean" })),
    ];
    let branch =
        json!({ "type": "array", "prefixItems": [reference("cond"), reference("node")], "minItems": 2, "maxItems": 2 });
    let chain = object(
        vec![
            ("branches", json!({ "type": "array", "items": branch, "minItems": 1 })),
            ("otherwise", reference("node")),
        ],
        &["branches", "otherwise"],
    );
    let nodes = vec![variant("leaf", reference("leaf")), variant("chain", chain)];
    let mut schema = object(vec![("root", reference("node")), ("note", json!({ "type": "string" }))], &["root"]);
    schema["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    schema["title"] = json!("gemm-synth selection rule (JSON form)");
    schema["$defs"] = json!({
        "node": { "anyOf": nodes },
        "leaf": leaf_schema(vocab),
        "cond": { "anyOf": conds },
        "expr": { "anyOf": exprs },
    });
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_has_a_call_word_the_parser_reads() {
        for b in Libtype::ALL {
            assert_eq!(backend_call(call_word(b)), Some(b));
        }
    }

    #[test]
    fn literals_escape_what_gbnf_would_misread() {
        assert_eq!(gbnf_literal("a\"b\\c\nd\u{1}"), r#""a\"b\\c\nd\x01""#);
    }
}
