//! The rule language as a decoding constraint (`rule::grammar`): the GBNF grammar of the C++ form and the
//! JSON schema of the JSON form, checked with a small GBNF matcher and generator and a JSON-schema
//! validator written here for the subset the tool emits (any other keyword fails the test).
//!
//! - every rule the synthesizer writes on the embedded H200 data (each feature set, 1..16 leaves), printed
//!   as `synth` prints it, matches the grammar, and its JSON validates against the schema;
//! - random texts generated from the grammar parse with the C++ parser, return only kernels and split-K
//!   levels of the vocabulary, and their JSON validates against the schema;
//! - the closed alternatives are closed: a kernel or split-K outside the data, an unknown function, a
//!   missing final `else` are refused by both.

use std::collections::{BTreeSet, HashMap};

use gemm_synth::app::search::rule_vocabulary;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use synth_core::catalog::triton::VLLM_DEFAULT;
use synth_core::catalog::{Candidate, Catalog, KernelRef, Libtype};
use synth_core::rule::grammar::{gbnf, json_schema, Vocabulary};
use synth_core::rule::text::rule_to_cpp_text;
use synth_core::rule::{parse_cpp, to_json, Rule};
use synth_core::synthesize::features::FeatureSet;
use synth_core::synthesize::{synthesize, Limits};
use synth_core::table::{parse_aiter_csv, LatencyMatrix};
use synth_search::search::task::RuleSetup;

// ---- a GBNF matcher and generator (llama.cpp's syntax: the subset the tool writes) -----------------------

#[derive(Debug, Clone)]
enum G {
    Lit(Vec<char>),
    Class { negated: bool, ranges: Vec<(char, char)> },
    Ref(String),
    Seq(Vec<G>),
    Alt(Vec<G>),
    Rep(Box<G>, usize, Option<usize>),
}

struct Grammar {
    rules: HashMap<String, G>,
}

struct Reader<'a> {
    s: &'a [char],
    i: usize,
}

impl Reader<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_whitespace() {
            self.i += 1;
        }
    }
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }
    fn escaped(&mut self) -> char {
        let c = self.s[self.i];
        self.i += 1;
        if c != '\\' {
            return c;
        }
        let e = self.s[self.i];
        self.i += 1;
        match e {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'x' => {
                let hex: String = self.s[self.i..self.i + 2].iter().collect();
                self.i += 2;
                char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap()
            }
            other => other,
        }
    }
    fn alt(&mut self) -> G {
        let mut alts = vec![self.seq()];
        loop {
            self.skip_ws();
            if self.peek() == Some('|') {
                self.i += 1;
                alts.push(self.seq());
            } else {
                return if alts.len() == 1 { alts.pop().unwrap() } else { G::Alt(alts) };
            }
        }
    }
    fn seq(&mut self) -> G {
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None | Some('|') | Some(')') => return G::Seq(items),
                _ => {
                    let p = self.primary();
                    items.push(self.postfix(p));
                }
            }
        }
    }
    fn postfix(&mut self, g: G) -> G {
        match self.peek() {
            Some('*') => {
                self.i += 1;
                G::Rep(Box::new(g), 0, None)
            }
            Some('+') => {
                self.i += 1;
                G::Rep(Box::new(g), 1, None)
            }
            Some('?') => {
                self.i += 1;
                G::Rep(Box::new(g), 0, Some(1))
            }
            Some('{') => {
                let close = self.s[self.i..].iter().position(|&c| c == '}').unwrap() + self.i;
                let inner: String = self.s[self.i + 1..close].iter().collect();
                self.i = close + 1;
                let (lo, hi) = match inner.split_once(',') {
                    Some((a, b)) => (a.trim().parse().unwrap(), b.trim().parse().ok()),
                    None => (inner.trim().parse().unwrap(), inner.trim().parse().ok()),
                };
                G::Rep(Box::new(g), lo, hi)
            }
            _ => g,
        }
    }
    fn primary(&mut self) -> G {
        match self.peek().unwrap() {
            '"' => {
                self.i += 1;
                let mut out = Vec::new();
                while self.peek() != Some('"') {
                    out.push(self.escaped());
                }
                self.i += 1;
                G::Lit(out)
            }
            '[' => {
                self.i += 1;
                let negated = self.peek() == Some('^');
                if negated {
                    self.i += 1;
                }
                let mut ranges = Vec::new();
                while self.peek() != Some(']') {
                    let a = self.escaped();
                    if self.peek() == Some('-') && self.s.get(self.i + 1) != Some(&']') {
                        self.i += 1;
                        let b = self.escaped();
                        ranges.push((a, b));
                    } else {
                        ranges.push((a, a));
                    }
                }
                self.i += 1;
                G::Class { negated, ranges }
            }
            '(' => {
                self.i += 1;
                let g = self.alt();
                self.skip_ws();
                assert_eq!(self.peek(), Some(')'));
                self.i += 1;
                g
            }
            _ => {
                let start = self.i;
                while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '-') {
                    self.i += 1;
                }
                assert!(self.i > start, "unexpected {:?} in the grammar", self.peek());
                G::Ref(self.s[start..self.i].iter().collect())
            }
        }
    }
}

impl Grammar {
    fn parse(text: &str) -> Grammar {
        let mut rules = HashMap::new();
        for line in text.lines().filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#')) {
            let (name, body) = line.split_once("::=").unwrap_or_else(|| panic!("not a rule: {line}"));
            let chars: Vec<char> = body.chars().collect();
            let mut r = Reader { s: &chars, i: 0 };
            let g = r.alt();
            r.skip_ws();
            assert_eq!(r.i, chars.len(), "rule {name} not read to its end");
            assert!(rules.insert(name.trim().to_string(), g).is_none(), "rule {name} twice");
        }
        let g = Grammar { rules };
        for g2 in g.rules.values() {
            g.check_refs(g2);
        }
        g
    }

    fn check_refs(&self, g: &G) {
        match g {
            G::Ref(n) => assert!(self.rules.contains_key(n), "undefined rule {n}"),
            G::Seq(v) | G::Alt(v) => v.iter().for_each(|x| self.check_refs(x)),
            G::Rep(x, _, _) => self.check_refs(x),
            _ => {}
        }
    }

    /// Whether `text` is in the language of `root`.
    fn matches(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        let mut memo = HashMap::new();
        self.ends(&G::Ref("root".into()), &chars, 0, &mut memo).contains(&chars.len())
    }

    /// The positions where `g` can end when it starts at `pos`.
    fn ends(
        &self,
        g: &G,
        s: &[char],
        pos: usize,
        memo: &mut HashMap<(String, usize), BTreeSet<usize>>,
    ) -> BTreeSet<usize> {
        match g {
            G::Lit(l) => {
                if s.len() >= pos + l.len() && s[pos..pos + l.len()] == l[..] {
                    BTreeSet::from([pos + l.len()])
                } else {
                    BTreeSet::new()
                }
            }
            G::Class { negated, ranges } => match s.get(pos) {
                Some(&c) if ranges.iter().any(|&(a, b)| a <= c && c <= b) != *negated => BTreeSet::from([pos + 1]),
                _ => BTreeSet::new(),
            },
            G::Ref(name) => {
                if let Some(r) = memo.get(&(name.clone(), pos)) {
                    return r.clone();
                }
                memo.insert((name.clone(), pos), BTreeSet::new()); // no left recursion in these grammars
                let r = self.ends(&self.rules[name], s, pos, memo);
                memo.insert((name.clone(), pos), r.clone());
                r
            }
            G::Seq(items) => {
                let mut at = BTreeSet::from([pos]);
                for item in items {
                    at = at.iter().flat_map(|&p| self.ends(item, s, p, memo)).collect();
                    if at.is_empty() {
                        break;
                    }
                }
                at
            }
            G::Alt(alts) => alts.iter().flat_map(|a| self.ends(a, s, pos, memo)).collect(),
            G::Rep(x, lo, hi) => {
                let mut out = BTreeSet::new();
                let mut frontier = BTreeSet::from([pos]);
                let mut seen = BTreeSet::new();
                for n in 0.. {
                    if n >= *lo {
                        out.extend(frontier.iter().copied());
                    }
                    if hi.is_some_and(|h| n >= h) || frontier.is_empty() {
                        break;
                    }
                    let next: BTreeSet<usize> = frontier.iter().flat_map(|&p| self.ends(x, s, p, memo)).collect();
                    // Past the minimum a position reached twice adds nothing new.
                    frontier = if n >= *lo { next.into_iter().filter(|p| seen.insert(*p)).collect() } else { next };
                }
                out
            }
        }
    }

    /// The fewest characters each rule can produce (a fixpoint; unreachable or endless rules stay huge).
    fn min_lens(&self) -> HashMap<String, usize> {
        let mut lens: HashMap<String, usize> = self.rules.keys().map(|k| (k.clone(), 1 << 20)).collect();
        loop {
            let mut changed = false;
            for (name, g) in &self.rules {
                let n = Self::min_len(g, &lens);
                if n < lens[name] {
                    lens.insert(name.clone(), n);
                    changed = true;
                }
            }
            if !changed {
                return lens;
            }
        }
    }

    /// The fewest characters `g` can produce, given each rule's.
    fn min_len(g: &G, lens: &HashMap<String, usize>) -> usize {
        match g {
            G::Lit(l) => l.len(),
            G::Class { .. } => 1,
            G::Ref(n) => lens[n],
            G::Seq(v) => v.iter().map(|x| Self::min_len(x, lens)).sum::<usize>().min(1 << 20),
            G::Alt(v) => v.iter().map(|x| Self::min_len(x, lens)).min().unwrap_or(0),
            G::Rep(x, lo, _) => (lo * Self::min_len(x, lens)).min(1 << 20),
        }
    }

    /// A random text of `g`: below depth 12 and within `budget` characters, uniform choices and up to three
    /// extra repetitions; past either, the shortest alternative and the fewest repetitions (so every text
    /// is finite even where the grammar recurses).
    fn generate(&self, g: &G, gen: &mut Gen, depth: usize, out: &mut String) {
        let deep = depth > 12 || out.len() > gen.budget;
        match g {
            G::Lit(l) => out.extend(l.iter()),
            G::Class { negated: false, ranges } => {
                let (a, b) = ranges[gen.rng.gen_range(0..ranges.len())];
                out.push(char::from_u32(gen.rng.gen_range(a as u32..=b as u32)).unwrap());
            }
            G::Class { negated: true, ranges } => {
                let pool: Vec<char> = " abcXYZ019(){};,<>=!&|+-*/#\"é"
                    .chars()
                    .filter(|c| !ranges.iter().any(|&(a, b)| a <= *c && *c <= b))
                    .collect();
                out.push(pool[gen.rng.gen_range(0..pool.len())]);
            }
            G::Ref(n) => self.generate(&self.rules[n], gen, depth + 1, out),
            G::Seq(v) => v.iter().for_each(|x| self.generate(x, gen, depth, out)),
            G::Alt(v) => {
                let pick = if deep {
                    v.iter().min_by_key(|x| Self::min_len(x, &gen.min_lens)).unwrap()
                } else {
                    &v[gen.rng.gen_range(0..v.len())]
                };
                self.generate(pick, gen, depth, out);
            }
            G::Rep(x, lo, hi) => {
                let extra = if deep { 0 } else { gen.rng.gen_range(0..=3) };
                let n = hi.map_or(lo + extra, |h| (lo + extra).min(h));
                (0..n).for_each(|_| self.generate(x, gen, depth + 1, out));
            }
        }
    }
}

/// The generator's state: its random source, each rule's shortest text and the length past which it
/// takes the shortest ways out.
struct Gen {
    rng: ChaCha8Rng,
    min_lens: HashMap<String, usize>,
    budget: usize,
}

// ---- a JSON-schema validator for the subset the tool emits ----------------------------------------------

const KEYWORDS: [&str; 15] = [
    "$ref",
    "$defs",
    "$schema",
    "title",
    "anyOf",
    "const",
    "enum",
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
];

fn valid(schema: &Value, root: &Value, v: &Value) -> bool {
    let obj = schema.as_object().expect("a schema is an object");
    for k in obj.keys() {
        assert!(KEYWORDS.contains(&k.as_str()), "keyword {k} is outside the validated subset");
    }
    if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
        let name = r.strip_prefix("#/$defs/").expect("local refs only");
        if !valid(&root["$defs"][name], root, v) {
            return false;
        }
    }
    if let Some(any) = obj.get("anyOf").and_then(Value::as_array) {
        if !any.iter().any(|s| valid(s, root, v)) {
            return false;
        }
    }
    if obj.get("const").is_some_and(|c| c != v) {
        return false;
    }
    if obj.get("enum").and_then(Value::as_array).is_some_and(|e| !e.contains(v)) {
        return false;
    }
    let type_ok = match obj.get("type").and_then(Value::as_str) {
        None => true,
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("string") => v.is_string(),
        Some("boolean") => v.is_boolean(),
        Some(t) => panic!("type {t} outside the validated subset"),
    };
    if !type_ok {
        return false;
    }
    if let Some(o) = v.as_object() {
        let props = obj.get("properties").and_then(Value::as_object);
        if let Some(req) = obj.get("required").and_then(Value::as_array) {
            if req.iter().any(|k| !o.contains_key(k.as_str().unwrap())) {
                return false;
            }
        }
        for (k, x) in o {
            let ok = match props.and_then(|p| p.get(k)) {
                Some(s) => valid(s, root, x),
                None => obj.get("additionalProperties") != Some(&Value::Bool(false)),
            };
            if !ok {
                return false;
            }
        }
    }
    if let Some(a) = v.as_array() {
        let count = |k: &str| obj.get(k).and_then(Value::as_u64).map(|n| n as usize);
        if count("minItems").is_some_and(|n| a.len() < n) || count("maxItems").is_some_and(|n| a.len() > n) {
            return false;
        }
        let prefix = obj.get("prefixItems").and_then(Value::as_array).cloned().unwrap_or_default();
        for (i, x) in a.iter().enumerate() {
            let s = prefix.get(i).or_else(|| obj.get("items"));
            if s.is_some_and(|s| !valid(s, root, x)) {
                return false;
            }
        }
    }
    true
}

fn schema_valid(schema: &Value, v: &Value) -> bool {
    valid(schema, schema, v)
}

// ---- data ---------------------------------------------------------------------------------------------

fn h200() -> (Catalog, LatencyMatrix) {
    let catalog = Catalog::embedded();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/measurements/h200/qwen3-32b-tp2.csv");
    let text = std::fs::read(path).unwrap();
    let rows = parse_aiter_csv(&text[..], path, &catalog).unwrap();
    (catalog, LatencyMatrix::from_rows(&rows).unwrap())
}

/// The vocabulary `synth search` constrains a model to (`app::search::rule_vocabulary`), `limits` deep.
fn vocabulary(catalog: &Catalog, m: &LatencyMatrix, limits: &Limits) -> Vocabulary {
    let train: Vec<usize> = (0..m.shapes.len()).collect();
    let setup = RuleSetup::new(catalog.clone(), m.clone(), train, None, limits.clone()).unwrap();
    rule_vocabulary(&setup)
}

fn rule_text(rule: &Rule, catalog: &Catalog) -> String {
    rule_to_cpp_text(rule, catalog)
}

fn limits_of(set: FeatureSet) -> Limits {
    Limits { features: set, ..Limits::default() }
}

#[test]
fn every_rule_the_synthesizer_writes_matches_the_grammar_and_the_schema() {
    let (catalog, m) = h200();
    let train: Vec<usize> = (0..m.shapes.len()).step_by(2).collect();
    let (mut checked, mut guarded) = (0, 0);
    for set in [FeatureSet::Raw, FeatureSet::Machine, FeatureSet::Contrast] {
        let vocab = vocabulary(&catalog, &m, &limits_of(set));
        assert_eq!(vocab.max_depth, Limits::default().max_depth);
        let grammar = Grammar::parse(&gbnf(&vocab, &catalog));
        let schema = json_schema(&vocab);
        for leaves in [1, 2, 3, 5, 8, 16] {
            let limits = Limits { max_leaves: leaves, ..limits_of(set) };
            let rule = synthesize(&m, &train, None, &limits);
            let text = rule_text(&rule, &catalog);
            assert!(grammar.matches(&text), "{set:?}, {leaves} leaves: the grammar refuses\n{text}");
            let json: Value = serde_json::from_str(&to_json(&rule)).unwrap();
            assert!(schema_valid(&schema, &json), "{set:?}, {leaves} leaves: the schema refuses\n{json}");
            checked += 1;
            guarded += usize::from(text.contains("&&"));
        }
    }
    assert_eq!(checked, 18);
    // Split-K guards (two comparisons joined by &&) are among them, so the guard terms are exercised.
    assert!(guarded > 0, "no guarded rule among the synthesized ones");
}

#[test]
fn random_texts_of_the_grammar_parse_to_rules_of_the_vocabulary() {
    let (catalog, m) = h200();
    let vocab = vocabulary(&catalog, &m, &limits_of(FeatureSet::Machine));
    let text = gbnf(&vocab, &catalog);
    let grammar = Grammar::parse(&text);
    let schema = json_schema(&vocab);
    let mut gen = Gen { rng: ChaCha8Rng::seed_from_u64(11), min_lens: grammar.min_lens(), budget: 4000 };
    let (mut chains, mut deepest, mut leaves_seen) = (0, 0, BTreeSet::new());
    for i in 0..400 {
        let mut out = String::new();
        grammar.generate(&G::Ref("root".into()), &mut gen, 0, &mut out);
        assert!(out.len() < 20_000, "case {i}: {} characters", out.len());
        assert!(grammar.matches(&out), "case {i}: the generator left the grammar\n{out}");
        let rule = parse_cpp(&out, &catalog).unwrap_or_else(|e| panic!("case {i}: {e}\n{out}"));
        for leaf in rule.leaves() {
            assert!(
                vocab.kernels.contains(&KernelRef { backend: leaf.backend, id: leaf.kernel_id }),
                "case {i}: {leaf:?}"
            );
            assert!(vocab.split_ks.contains(&leaf.split_k), "case {i}: {leaf:?}");
            leaves_seen.insert(leaf);
        }
        assert!(rule.depth() <= vocab.max_depth, "case {i}: depth {}\n{out}", rule.depth());
        deepest = deepest.max(rule.depth());
        chains += usize::from(rule.depth() > 0);
        let json: Value = serde_json::from_str(&to_json(&rule)).unwrap();
        assert!(schema_valid(&schema, &json), "case {i}: the schema refuses\n{json}");
    }
    // The cases cover nesting to the limit and many leaves.
    assert!(chains > 150 && leaves_seen.len() > 20, "{chains} chains, {} leaves", leaves_seen.len());
    assert_eq!(deepest, vocab.max_depth);
}

/// `depth` nested `if (M <= ..) { .. } else { return LEAF; }` around `leaf`.
fn nested(depth: usize, leaf: &str) -> String {
    (0..depth).fold(leaf.to_string(), |inner, i| format!("if (M <= {}) {{\n{inner}\n}} else {{\n{leaf}\n}}", 1 << i))
}

#[test]
fn kernels_and_split_levels_outside_the_data_are_refused_by_both() {
    let (catalog, m) = h200();
    let vocab = vocabulary(&catalog, &m, &limits_of(FeatureSet::Raw));
    let grammar = Grammar::parse(&gbnf(&vocab, &catalog));
    let schema = json_schema(&vocab);
    let id = vocab.kernels.iter().next().unwrap().id;
    let split = *vocab.split_ks.iter().next().unwrap();
    let ok = format!(
        "if (M <= 64) {{\n    return {{kernel({id}), {split}}};\n}} else {{\n    return {{kernel({id}), 0}};\n}}\n"
    );
    assert!(grammar.matches(&ok), "{ok}");
    let refused = [
        format!("return {{kernel(999), {split}}};"),
        format!("return {{kernel({id}), 9}};"),
        format!("if (M <= 64) {{ return {{kernel({id}), 0}}; }}"),
        format!("if (foo(M) <= 64) {{ return {{kernel({id}), 0}}; }} else {{ return {{kernel({id}), 0}}; }}"),
        format!("if (M <= 064) {{ return {{kernel({id}), 0}}; }} else {{ return {{kernel({id}), 0}}; }}"),
        format!("```cpp\nreturn {{kernel({id}), 0}};\n```"),
    ];
    for text in &refused {
        assert!(!grammar.matches(text), "accepted: {text}");
    }
    let leaf = |k: i64, s: i64| serde_json::json!({ "root": { "leaf": { "kernel_id": k, "split_k": s } } });
    assert!(schema_valid(&schema, &leaf(id.into(), split.into())));
    assert!(!schema_valid(&schema, &leaf(999, split.into())));
    assert!(!schema_valid(&schema, &leaf(id.into(), 9)));
    assert!(!schema_valid(&schema, &serde_json::json!({ "root": { "leaf": { "kernel_id": id } }, "extra": 1 })));
}

#[test]
fn the_language_is_bounded_in_depth_and_arithmetic() {
    let (catalog, m) = h200();
    let vocab = vocabulary(&catalog, &m, &limits_of(FeatureSet::Raw));
    let text = gbnf(&vocab, &catalog);
    let grammar = Grammar::parse(&text);
    let schema = json_schema(&vocab);
    let id = vocab.kernels.iter().next().unwrap().id;
    let leaf = format!("return {{kernel({id}), 0}};");
    let json_of = |t: &str| serde_json::from_str::<Value>(&to_json(&parse_cpp(t, &catalog).unwrap())).unwrap();
    // Depth: exactly the limit is in the language, one more is not (the parser reads both).
    let deepest = nested(vocab.max_depth, &leaf);
    assert!(grammar.matches(&deepest) && schema_valid(&schema, &json_of(&deepest)), "{deepest}");
    let deeper = nested(vocab.max_depth + 1, &leaf);
    assert!(!grammar.matches(&deeper) && !schema_valid(&schema, &json_of(&deeper)), "{deeper}");
    // A chain of `else if`s counts one level per branch, as `Node::depth` does.
    let chain = |n: usize| {
        let ifs: Vec<String> = (0..n).map(|i| format!("if (M <= {}) {{ {leaf} }}", i + 1)).collect();
        format!("{} else {{ {leaf} }}", ifs.join(" else "))
    };
    assert!(grammar.matches(&chain(vocab.max_depth)) && schema_valid(&schema, &json_of(&chain(vocab.max_depth))));
    let long = chain(vocab.max_depth + 1);
    assert!(!grammar.matches(&long) && !schema_valid(&schema, &json_of(&long)), "{long}");
    // Conditions: a term compared with an integer, at most two joined by &&; no free arithmetic, no ||.
    let with = |cond: &str| format!("if ({cond}) {{ {leaf} }} else {{ {leaf} }}");
    for ok in ["M <= 64", "K >= -3", "N > 0 && M == 7"] {
        assert!(grammar.matches(&with(ok)) && schema_valid(&schema, &json_of(&with(ok))), "{ok}");
    }
    for bad in ["(M + 1) * 2 <= 64", "M <= N", "M < 1 && N < 2 && K < 3", "M < 1 || N < 2", "cdiv(M, 2) < 9"] {
        let t = with(bad);
        assert!(!grammar.matches(&t), "accepted: {bad}");
        assert!(!schema_valid(&schema, &json_of(&t)), "the schema accepts: {bad}");
    }
    // Other spellings of a condition the language has are left to the parser's canonical form.
    for other in ["!(M < 1)", "(M < 1)", "M<1"] {
        assert_eq!(grammar.matches(&with(other)), other == "M<1", "{other}");
    }
    // Whitespace: at most one line break between tokens, and the rule ends at its last token (one line
    // break allowed), so a model cannot pad a finished rule until the token limit.
    assert!(
        grammar.matches(&format!("{leaf}\n"))
            && grammar.matches(&format!("if (M <= 1) {{\n\t  {leaf}\n}} else {{ {leaf} }}"))
    );
    for padded in [
        format!("{leaf}\n\n"),
        format!("{leaf} "),
        format!("\n{leaf}"),
        format!("if (M <= 1) {{\n\n{leaf} }} else {{ {leaf} }}"),
    ] {
        assert!(!grammar.matches(&padded), "accepted: {padded:?}");
    }
    // Small: the shape is spelled out once per depth level.
    assert!(text.lines().count() < 40 && text.len() < 16_000, "{} lines, {} bytes", text.lines().count(), text.len());
}

#[test]
fn other_backends_are_written_by_their_own_names() {
    let catalog = Catalog::embedded();
    let tri = Candidate::of(Libtype::Triton, VLLM_DEFAULT.kernel_id(), 0);
    let cands = [Candidate::new(7, 0), Candidate::new(3, 2), Candidate::vendor(), tri];
    let vocab = Vocabulary::new(&cands, vec![]);
    let grammar = Grammar::parse(&gbnf(&vocab, &catalog));
    let schema = json_schema(&vocab);
    let leaves = [
        format!("return {{{}, 0}};", VLLM_DEFAULT.name()),
        format!("return {{triton({}), 0}};", VLLM_DEFAULT.kernel_id()),
        "return {vendor(0), 2};".to_string(),
        "return {kernel(3), 2};".to_string(),
    ];
    for text in &leaves {
        assert!(grammar.matches(text), "{text}");
        let rule = parse_cpp(text, &catalog).unwrap();
        let json: Value = serde_json::from_str(&to_json(&rule)).unwrap();
        assert!(schema_valid(&schema, &json), "{json}");
    }
    // Vendor ids are their backend's: `vendor(7)` is no measured kernel, nor is a CK leaf of the vendor's id.
    assert!(!grammar.matches("return {vendor(7), 0};"));
    let ck_as_vendor = serde_json::json!({ "root": { "leaf": { "backend": "vendor", "kernel_id": 7, "split_k": 0 } } });
    assert!(!schema_valid(&schema, &ck_as_vendor));
}

// ---- rewrite proposals ------------------------------------------------------------------------------

#[test]
fn a_rewrite_is_constrained_to_the_declared_knob_values() {
    use synth_engine::engine::proposers::constrain::{for_source, gbnf_literal, Applied};
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/llm_rewrite_knobs/src/kernel.c");
    let source = std::fs::read_to_string(path).unwrap();
    let c = for_source(&source);
    let grammar = Grammar::parse(&c.gbnf);
    let with = |v: &str| source.replace("#define STEP 1\n", &format!("#define STEP {v}\n"));
    for v in ["1", "2", "4"] {
        assert!(grammar.matches(&format!("```c\n{}```", with(v))), "STEP {v}\n{}", c.gbnf);
        let answer = format!("{{\"STEP\": \"{v}\"}}");
        assert!(schema_valid(&c.schema, &serde_json::from_str(&answer).unwrap()));
        assert_eq!(c.candidate(Applied::JsonObject, &answer).unwrap(), with(v));
    }
    // An undeclared value, another line changed, or no fence: refused.
    assert!(!grammar.matches(&format!("```c\n{}```", with("3"))));
    assert!(!grammar.matches(&format!("```c\n{}```", source.replace("long long s = 0;", "long long s = 1;"))));
    assert!(!grammar.matches(&source));
    assert!(!schema_valid(&c.schema, &serde_json::json!({ "STEP": "3" })));
    let e = c.candidate(Applied::JsonObject, "{\"STEP\": \"3\"}").unwrap_err();
    assert!(e.contains("STEP") && e.contains("1 2 4"), "{e}");
    // Under the grammar the answer is the fenced file itself.
    assert_eq!(c.candidate(Applied::Grammar, "```c\nx\n```").unwrap(), "```c\nx\n```");
    // The engine's literal escaping is the rule grammar's.
    for text in ["a\"b\\c\nd\u{1}\t", "plain", "é → \u{7f}"] {
        assert_eq!(gbnf_literal(text), synth_core::rule::grammar::gbnf_literal(text));
    }
}

#[test]
fn a_rewrite_without_knobs_is_a_whole_file_in_one_fenced_block() {
    use synth_engine::engine::proposers::constrain::{for_source, Applied};
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/llm_rewrite/src/kernel.c");
    let source = std::fs::read_to_string(path).unwrap();
    let c = for_source(&source);
    let grammar = Grammar::parse(&c.gbnf);
    assert!(grammar.matches(&format!("```c\n{source}```")));
    assert!(grammar.matches(&format!("```\n{}```", source.replace("s += a;", "s += (long long)a * a; k = a;"))));
    assert!(!grammar.matches(&source), "a fence is required");
    assert!(!grammar.matches(&format!("Here it is:\n```c\n{source}```")), "no prose");
    let answer = serde_json::json!({ "source": source }).to_string();
    assert!(schema_valid(&c.schema, &serde_json::from_str(&answer).unwrap()));
    assert_eq!(c.candidate(Applied::JsonSchema, &answer).unwrap(), source);
    assert!(c.candidate(Applied::JsonSchema, "{\"source\": 7}").is_err());
}
