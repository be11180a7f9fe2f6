//! The rule language as data, for decoding constraints: a GBNF grammar of the C++ form a model is asked
//! to write (llama.cpp's `grammar` request field) and a JSON schema of the rule's JSON form (the serde form
//! [`super::parse_json`] reads; `response_format`). Both are built from the definitions the parsers and
//! printers use — the comparisons of [`super::ir`] ([`CmpOp::ALL`] with their symbols), the variables, the
//! leaf spellings of [`super::text`] and the backend calls of [`super::parse_cpp`] — and from a
//! [`Vocabulary`]: the measured kernels and split-K levels, the terms a condition may compare (the
//! variables, the features, the split-K guards' grids) and the depth limit, each a closed set.
//!
//! The language is the bounded shape the synthesizer writes, so a constrained answer is short and cannot
//! run on until the token limit: a condition is one term compared with an integer, or two such joined by
//! `&&` (a split-K guard); no free arithmetic. Depth is counted as [`super::ir::Node::depth`] counts it
//! (an `else if` is one level deeper than its `if`), so a rule is in the language exactly when its
//! conditions and leaves are in the vocabulary and its depth is at most `max_depth`: the grammar's
//! `node-D` is a leaf or a chain `if (..) { node-(D-1) } else ( { node-(D-1) } | chain-(D-1) )`, and the
//! schema lists each chain length `k <= D` with its branches at depths `D-1 .. D-k`. Nothing recurses,
//! which also keeps llama.cpp's constrained sampling fast.
//!
//! The grammar is the canonical text [`super::text::rule_to_cpp_text`] prints, with free whitespace between
//! tokens: every text it accepts parses with [`super::parse_cpp`] to a rule of the vocabulary. Integer
//! literals have at most 18 digits (so they fit i64) and no leading zero (C++ would read an octal literal).
//! Between tokens the grammar takes spaces and tabs with at most one line break (`[ \t]* ("\n" [ \t]*)?`, as
//! the printer writes), and the rule ends at its last `}` or `;` (one line break allowed): SmolLM2-135M,
//! left free whitespace, finished a rule and then wrote line breaks and tabs until the token limit. A
//! counted repetition (`[ \t\n]{0,12}`) instead makes llama.cpp's sampler about ten times slower per token.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use super::ir::{CmpOp, Expr, Leaf, Var};
use super::parse_cpp::backend_call;
use super::text::{expr_to_cpp, leaf_item_cpp};
use crate::catalog::{Candidate, Catalog, KernelRef, Libtype};

/// The depth limit of a [`Vocabulary::new`] (the synthesizer's default `max_depth`).
pub const DEFAULT_MAX_DEPTH: usize = 6;

/// The deepest language written: deeper limits are cut to this, to keep the grammar and schema small.
pub const MAX_GRAMMAR_DEPTH: usize = 8;

/// What a rule may name: the kernels and split-K levels of the measured candidates, the features (name,
/// expression) offered to proposers, other terms a condition may compare, and the depth limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocabulary {
    pub kernels: BTreeSet<KernelRef>,
    pub split_ks: BTreeSet<u32>,
    pub features: Vec<(String, Expr)>,
    /// Terms besides the variables and features (the split-K guards' grids).
    pub terms: Vec<Expr>,
    /// Most conditions on a path ([`super::ir::Node::depth`]), at most [`MAX_GRAMMAR_DEPTH`].
    pub max_depth: usize,
}

impl Vocabulary {
    /// The vocabulary of a latency matrix's candidates and the given features, [`DEFAULT_MAX_DEPTH`] deep.
    pub fn new(candidates: &[Candidate], features: Vec<(String, Expr)>) -> Vocabulary {
        Vocabulary {
            kernels: candidates.iter().map(|c| KernelRef { backend: c.backend, id: c.kernel_id }).collect(),
            split_ks: candidates.iter().map(|c| c.split_k).collect(),
            features,
            terms: Vec::new(),
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }

    /// The same with `terms` also comparable.
    pub fn with_terms(mut self, terms: Vec<Expr>) -> Vocabulary {
        self.terms.extend(terms);
        self
    }

    /// The same with depth limit `depth` (cut to [`MAX_GRAMMAR_DEPTH`]).
    pub fn with_max_depth(mut self, depth: usize) -> Vocabulary {
        self.max_depth = depth.min(MAX_GRAMMAR_DEPTH);
        self
    }

    /// Every term a condition may compare with an integer, in order, each once: the variables, the
    /// features, the other terms.
    pub fn comparable(&self) -> Vec<Expr> {
        let vars = Var::ALL.iter().map(|&v| Expr::Var(v));
        let all = vars.chain(self.features.iter().map(|(_, e)| e.clone())).chain(self.terms.iter().cloned());
        let mut seen = BTreeSet::new();
        all.filter(|e| seen.insert(expr_to_cpp(e))).collect()
    }
}

pub use synth_base::sanitize::gbnf_literal;

/// The alternatives `items` (duplicates dropped) as one GBNF expression with shared prefixes factored out
/// (`"ab" ("c" | "d")` for `abc | abd`): llama.cpp's grammar sampler checks every vocabulary token against
/// every alternative alive at a character, so a list of long names with a common prefix (instance names,
/// feature expressions) costs one path through the prefix instead of one per name.
fn alternatives<I: IntoIterator<Item = String>>(items: I) -> String {
    let words: BTreeSet<Vec<char>> = items.into_iter().map(|s| s.chars().collect()).collect();
    let words: Vec<&[char]> = words.iter().map(Vec::as_slice).collect();
    factored(&words).0
}

/// [`alternatives`] of sorted distinct `words`, and whether the text needs parentheses inside a sequence.
fn factored(words: &[&[char]]) -> (String, bool) {
    let optional = words.first().is_some_and(|w| w.is_empty());
    let rest: Vec<&[char]> = words.iter().filter(|w| !w.is_empty()).copied().collect();
    let mut groups: Vec<String> = Vec::new();
    for group in rest.chunk_by(|a, b| a[0] == b[0]) {
        let lcp = (1..=group[0].len()).take_while(|&n| group.iter().all(|w| w.len() >= n && w[..n] == group[0][..n]));
        let lcp = lcp.last().unwrap_or(1);
        let literal = gbnf_literal(&group[0][..lcp].iter().collect::<String>());
        let tails: Vec<&[char]> = group.iter().map(|w| &w[lcp..]).collect();
        if tails.len() == 1 {
            groups.push(literal);
        } else {
            let (tail, paren) = factored(&tails);
            groups.push(if paren { format!("{literal} ({tail})") } else { format!("{literal} {tail}") });
        }
    }
    match (groups.len(), optional) {
        (0, _) => ("\"\"".into(), false),
        (_, true) => (format!("({})?", groups.join(" | ")), false),
        (1, false) => (groups.remove(0), false),
        (_, false) => (groups.join(" | "), true),
    }
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
    let depth = vocab.max_depth.min(MAX_GRAMMAR_DEPTH);
    let mut rules: Vec<(String, String)> = vec![("root".into(), format!(r#"node{depth} "\n"?"#))];
    rules.push(("node0".into(), "leaf".into()));
    for d in 1..=depth {
        let below = d - 1;
        rules.push((format!("node{d}"), format!("leaf | chain{d}")));
        let otherwise = if below == 0 {
            format!(r#"ws "{{" ws node{below} ws "}}""#)
        } else {
            format!(r#"(ws "{{" ws node{below} ws "}}" | ws1 chain{below})"#)
        };
        rules.push((
            format!("chain{d}"),
            format!(r#""if" ws "(" ws cond ws ")" ws "{{" ws node{below} ws "}}" ws "else" {otherwise}"#),
        ));
    }
    let fixed = [
        ("leaf", r#""return" ws "{" ws item ws "," ws split ws "}" ws ";""#.to_string()),
        ("cond", r#"cmp | cmp ws "&&" ws cmp"#.into()),
        ("cmp", "term ws cmp-op ws int".into()),
        ("term", alternatives(vocab.comparable().iter().map(expr_to_cpp))),
        ("cmp-op", cmp_ops),
        ("int", r#""-"? ("0" | [1-9] [0-9]{0,17})"#.into()),
        ("item", alternatives(item_spellings(vocab, catalog))),
        ("split", alternatives(vocab.split_ks.iter().map(u32::to_string))),
        ("ws", r#"[ \t]* ("\n" [ \t]*)?"#.into()),
        ("ws1", "[ \\t\\n] ws".into()),
    ];
    rules.extend(fixed.into_iter().map(|(k, v)| (k.to_string(), v)));
    let mut out = format!(
        "# The C++ form of a gemm-synth selection rule: if / else if / else at most {depth} conditions deep, each \
         condition a term compared with an integer (two joined by &&), every leaf `return {{ITEM, SPLIT}};`.\n"
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

/// An array of exactly `items`, in order.
fn tuple(items: Vec<Value>) -> Value {
    let n = items.len();
    json!({ "type": "array", "prefixItems": items, "minItems": n, "maxItems": n })
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

/// The comparison schema: a term compared with an integer literal.
fn cmp_schema(vocab: &Vocabulary) -> Value {
    let terms: Vec<Value> = vocab
        .comparable()
        .iter()
        .map(|e| json!({ "const": serde_json::to_value(e).expect("an expression serializes") }))
        .collect();
    variant(
        "cmp",
        object(
            vec![
                ("op", json!({ "enum": names(&CmpOp::ALL) })),
                ("lhs", json!({ "anyOf": terms })),
                ("rhs", variant("lit", json!({ "type": "integer" }))),
            ],
            &["op", "lhs", "rhs"],
        ),
    )
}

/// The JSON schema of a rule's JSON form over `vocab` (module documentation).
pub fn json_schema(vocab: &Vocabulary) -> Value {
    let depth = vocab.max_depth.min(MAX_GRAMMAR_DEPTH);
    let mut defs = Map::new();
    defs.insert("node0".into(), variant("leaf", reference("leaf")));
    for d in 1..=depth {
        let chains: Vec<Value> = (1..=d)
            .map(|k| {
                let branches = (1..=k).map(|i| tuple(vec![reference("cond"), reference(&format!("node{}", d - i))]));
                object(
                    vec![("branches", tuple(branches.collect())), ("otherwise", reference(&format!("node{}", d - k)))],
                    &["branches", "otherwise"],
                )
            })
            .collect();
        defs.insert(format!("chain{d}"), json!({ "anyOf": chains }));
        let chain = variant("chain", reference(&format!("chain{d}")));
        defs.insert(format!("node{d}"), json!({ "anyOf": [variant("leaf", reference("leaf")), chain] }));
    }
    // A condition: one comparison, or `and` of two.
    let two = variant("and", tuple(vec![reference("cmp"), reference("cmp")]));
    defs.insert("cond".into(), json!({ "anyOf": [reference("cmp"), two] }));
    defs.insert("cmp".into(), cmp_schema(vocab));
    defs.insert("leaf".into(), leaf_schema(vocab));
    let root = reference(&format!("node{depth}"));
    let mut schema = object(vec![("root", root), ("note", json!({ "type": "string" }))], &["root"]);
    schema["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    schema["title"] = json!("gemm-synth selection rule (JSON form)");
    schema["$defs"] = Value::Object(defs);
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
    fn alternatives_share_their_prefixes() {
        let words = ["abd", "b", "ab", "abc", "ab"].map(str::to_string);
        assert_eq!(alternatives(words), r#""ab" ("c" | "d")? | "b""#);
        assert_eq!(alternatives(["x\"y".to_string()]), r#""x\"y""#);
        assert_eq!(alternatives(["<=", "<", "=="].map(str::to_string)), r#""<" ("=")? | "==""#);
    }

    #[test]
    fn literals_escape_what_gbnf_would_misread() {
        assert_eq!(gbnf_literal("a\"b\\c\nd\u{1}"), r#""a\"b\\c\nd\x01""#);
    }
}
