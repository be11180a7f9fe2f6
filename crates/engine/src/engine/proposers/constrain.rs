//! Decoding constraints for a chat model's answer: a GBNF grammar (llama.cpp's `grammar` request field) or
//! a JSON schema (`response_format`), chosen by `--constrain grammar|json-schema|none` or, by default,
//! by what the server honours (probed once per run with a request whose only valid answer is known).
//!
//! A task supplies its [`Constraint`]: the rule task the grammar and schema of the rule language
//! (`rule::grammar`); a rewrite task the knob declarations' values ([`for_source`]: the file with each
//! knob's definition line one of its declared values, or an object of knob values turned back into the
//! file), or, without knobs, "a whole file in a fenced block".

use super::knobs::{parse_knobs, KnobSpace};
use crate::engine::clip;
use serde_json::{json, Value};
use std::sync::Arc;

/// Turns an answer constrained by the schema into the candidate text (Err: why it cannot).
pub type Decoder = Arc<dyn Fn(&str) -> Result<String, String> + Send + Sync>;

/// What `--constrain` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// What the server honours: the grammar, else the schema, else nothing (probed once).
    Auto,
    Grammar,
    JsonSchema,
    None,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "auto" => Ok(Mode::Auto),
            "grammar" => Ok(Mode::Grammar),
            "json-schema" => Ok(Mode::JsonSchema),
            "none" => Ok(Mode::None),
            other => Err(format!("`{other}`: expected grammar, json-schema, none or auto")),
        }
    }
}

impl Mode {
    /// `--constrain`'s value (clap's value parser).
    pub fn parse(text: &str) -> Result<Mode, String> {
        text.parse()
    }

    /// The word `--constrain` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Grammar => "grammar",
            Mode::JsonSchema => "json-schema",
            Mode::None => "none",
        }
    }
}

/// How a request carries the constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// `"grammar": GBNF` (llama.cpp, llama-cpp-python).
    Grammar,
    /// `"response_format": {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}` (OpenAI,
    /// llama.cpp's server, vLLM).
    JsonSchema,
    /// `"response_format": {"type": "json_object", "schema": ...}` (llama-cpp-python).
    JsonObject,
    /// No constraint.
    None,
}

impl Applied {
    /// The name written in the trace and in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Applied::Grammar => "grammar",
            Applied::JsonSchema => "json-schema (response_format json_schema)",
            Applied::JsonObject => "json-schema (response_format json_object)",
            Applied::None => "none",
        }
    }
}

/// A task's constraint in both forms.
#[derive(Clone)]
pub struct Constraint {
    /// The GBNF grammar of an answer.
    pub gbnf: String,
    /// The JSON schema of an answer.
    pub schema: Value,
    /// Turns a schema-constrained answer into the candidate (None: the JSON is the candidate).
    pub from_json: Option<Decoder>,
    /// The reply format the prompt states under the grammar, and under the schema (None: the task's own).
    pub grammar_reply: Option<String>,
    pub json_reply: Option<String>,
}

impl Constraint {
    /// Adds the constraint to a chat request `body` as `applied` says.
    pub fn apply(&self, applied: Applied, body: &mut Value) {
        match applied {
            Applied::Grammar => body["grammar"] = json!(self.gbnf),
            Applied::JsonSchema => {
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": { "name": "candidate", "schema": self.schema, "strict": true },
                })
            }
            Applied::JsonObject => body["response_format"] = json!({ "type": "json_object", "schema": self.schema }),
            Applied::None => {}
        }
    }

    /// The reply format a prompt constrained by `applied` states (None: the task's own).
    pub fn reply(&self, applied: Applied) -> Option<&str> {
        match applied {
            Applied::Grammar => self.grammar_reply.as_deref(),
            Applied::JsonSchema | Applied::JsonObject => self.json_reply.as_deref(),
            Applied::None => None,
        }
    }

    /// The candidate in a constrained answer: the decoded JSON under a schema with a decoder, else the text.
    pub fn candidate(&self, applied: Applied, content: &str) -> Result<String, String> {
        match (&self.from_json, applied) {
            (Some(decode), Applied::JsonSchema | Applied::JsonObject) => decode(content),
            _ => Ok(content.to_string()),
        }
    }
}

/// Whether a probe's answer is the one its constraint allows.
pub type ProbeCheck = fn(&str) -> bool;

/// The probe of one way of constraining: a constraint whose only answer is known, and the check of a
/// reply against it.
pub fn probe(applied: Applied) -> Option<(Constraint, ProbeCheck)> {
    const WORD: &str = "synth-ok";
    let c = Constraint {
        gbnf: format!("root ::= \"{WORD}\"\n"),
        schema: json!({
            "type": "object", "properties": { "probe": { "enum": [WORD] } },
            "required": ["probe"], "additionalProperties": false,
        }),
        from_json: None,
        grammar_reply: None,
        json_reply: None,
    };
    fn text(content: &str) -> bool {
        content.trim() == "synth-ok"
    }
    fn object(content: &str) -> bool {
        serde_json::from_str::<Value>(content.trim()).is_ok_and(|v| v["probe"] == "synth-ok")
    }
    match applied {
        Applied::Grammar => Some((c, text as ProbeCheck)),
        Applied::JsonSchema | Applied::JsonObject => Some((c, object as ProbeCheck)),
        Applied::None => None,
    }
}

/// The constraint of a rewrite proposal for `source`: the knob declarations' values where it declares
/// knobs, else a whole file in one fenced block.
pub fn for_source(source: &str) -> Constraint {
    match parse_knobs(source) {
        Ok(space) if !space.knobs.is_empty() => for_knobs(space),
        _ => whole_file(),
    }
}

/// Most renderings of one line (the product of the values of the knobs defined on it) the grammar lists.
const MAX_LINE_VARIANTS: usize = 4096;

/// The file with each knob definition line one of its renderings, in one fenced block; an object of knob
/// values under the schema.
fn for_knobs(space: KnobSpace) -> Constraint {
    let current = space.current();
    let base = space.render(&current);
    let lines: Vec<&str> = base.split_inclusive('\n').collect();
    let mut gbnf = String::from("root ::= \"```\" [a-z+]* \"\\n\" body \"```\"\nbody ::=");
    let mut pending = String::new();
    let flush = |pending: &mut String, gbnf: &mut String| {
        if !pending.is_empty() {
            gbnf.push(' ');
            gbnf.push_str(&gbnf_literal(pending));
            pending.clear();
        }
    };
    for (i, line) in lines.iter().enumerate() {
        let on_line: Vec<usize> = (0..space.knobs.len()).filter(|&k| space.knobs[k].def_line == i).collect();
        let variants = line_variants(&space, &current, &on_line, i);
        match variants {
            Some(v) if v.len() > 1 => {
                flush(&mut pending, &mut gbnf);
                let alts: Vec<String> = v.iter().map(|l| gbnf_literal(l)).collect();
                gbnf.push_str(&format!(" ({})", alts.join(" | ")));
            }
            _ => pending.push_str(line),
        }
    }
    if !base.ends_with('\n') {
        pending.push('\n');
    }
    flush(&mut pending, &mut gbnf);
    gbnf.push('\n');
    let mut props = serde_json::Map::new();
    for k in &space.knobs {
        props.insert(k.name.clone(), json!({ "enum": k.values }));
    }
    let names: Vec<&str> = space.knobs.iter().map(|k| k.name.as_str()).collect();
    let schema = json!({ "type": "object", "properties": props, "required": names, "additionalProperties": false });
    let json_reply = format!(
        "Reply with one JSON object giving each knob one of its declared values, e.g. {}.",
        serde_json::to_string(&example_setting(&space)).unwrap_or_default()
    );
    let decode: Decoder = Arc::new(move |content: &str| decode_knobs(&space, content));
    Constraint {
        gbnf,
        schema,
        from_json: Some(decode),
        grammar_reply: Some("Reply with the whole file, the knob values changed, in one fenced code block.".into()),
        json_reply: Some(json_reply),
    }
}

/// The source's own knob values as the JSON object the schema asks for.
fn example_setting(space: &KnobSpace) -> Value {
    let current = space.current();
    let map = space.knobs.iter().zip(current).map(|(k, i)| (k.name.clone(), json!(k.values[i]))).collect();
    Value::Object(map)
}

/// The renderings of line `i` over every setting of the knobs defined on it (None: too many, or none).
fn line_variants(space: &KnobSpace, current: &[usize], on_line: &[usize], i: usize) -> Option<Vec<String>> {
    if on_line.is_empty() {
        return None;
    }
    let total = on_line.iter().try_fold(1usize, |n, &k| n.checked_mul(space.knobs[k].values.len()))?;
    if total > MAX_LINE_VARIANTS {
        return None;
    }
    let mut out = Vec::with_capacity(total);
    for mut index in 0..total {
        let mut setting = current.to_vec();
        for &k in on_line {
            let n = space.knobs[k].values.len();
            setting[k] = index % n;
            index /= n;
        }
        let text = space.render(&setting);
        let line = text.split_inclusive('\n').nth(i)?.to_string();
        let line = if line.ends_with('\n') { line } else { format!("{line}\n") };
        if !out.contains(&line) {
            out.push(line);
        }
    }
    Some(out)
}

/// The file of a JSON object of knob values (each a declared value of its knob).
fn decode_knobs(space: &KnobSpace, content: &str) -> Result<String, String> {
    let v: Value = serde_json::from_str(content.trim()).map_err(|e| {
        format!("the answer is not the JSON object of knob values asked for: {e}: {}", clip(content, 200))
    })?;
    let mut setting = space.current();
    for (k, knob) in space.knobs.iter().enumerate() {
        let given = match &v[&knob.name] {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Null => return Err(format!("the answer gives no value for knob {}", knob.name)),
            other => other.to_string(),
        };
        setting[k] = knob.values.iter().position(|x| *x == given).ok_or_else(|| {
            format!(
                "knob {} = {}: not one of its declared values {}",
                knob.name,
                clip(&given, 40),
                knob.values.join(" ")
            )
        })?;
    }
    Ok(space.render(&setting))
}

/// A GBNF string literal (one escape for the grammar of rules and of rewrites: `synth_base::sanitize`).
pub use synth_base::sanitize::gbnf_literal;

/// A whole file in one fenced block; `{"source": FILE}` under the schema.
fn whole_file() -> Constraint {
    let gbnf = "root ::= \"```\" [a-z+]* \"\\n\" line* \"```\"\nline ::= ([^`\\n] [^\\n]*)? \"\\n\"\n".to_string();
    let schema = json!({
        "type": "object", "properties": { "source": { "type": "string" } },
        "required": ["source"], "additionalProperties": false,
    });
    let decode: Decoder = Arc::new(|content: &str| {
        let v: Value = serde_json::from_str(content.trim())
            .map_err(|e| format!("the answer is not the JSON object {{\"source\": FILE}} asked for: {e}"))?;
        v["source"].as_str().map(str::to_string).ok_or_else(|| "the answer's \"source\" is not a string".to_string())
    });
    Constraint {
        gbnf,
        schema,
        from_json: Some(decode),
        grammar_reply: None,
        json_reply: Some("Reply with one JSON object {\"source\": FILE}, FILE the whole rewritten file.".into()),
    }
}
