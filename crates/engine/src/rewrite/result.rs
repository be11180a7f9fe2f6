//! The structured result line a test program prints:
//!
//! ```text
//! GEMMSYNTH_RESULT {"correct": true, "max_abs_err": 0.0039, "latency_us": 152.4}
//! ```
//!
//! Format: a line whose first non-blank text is the tag (default `GEMMSYNTH_RESULT`, see
//! [`super::spec::ResultFormat`]), then at least one space or tab, then exactly one JSON object and nothing
//! else. Required keys: the correctness key (default `correct`, a boolean) and — when correct — the
//! latency key (default `latency_us`, a number of microseconds in [`US_RANGE`], 1e-6 to 1e12, as a
//! journal's times: the score). Any other
//! keys (error figures, bandwidth, sizes) are kept and shown in feedback and reports. When a program
//! prints several tagged lines, the spec's `result.line` picks the first or the last; the picked line
//! must be valid (a malformed line is an error, never skipped).

use super::spec::{Pick, ResultFormat};
use serde_json::{Map, Value};
use std::fmt;
use synth_base::input::US_RANGE;

/// A parsed result line.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultLine {
    /// 1-based line number in the searched output.
    pub line_no: usize,
    /// How many tagged lines the output held.
    pub tagged_lines: usize,
    /// The correctness verdict.
    pub correct: bool,
    /// Latency in µs; always present when `correct`.
    pub latency_us: Option<f64>,
    /// The whole JSON object.
    pub fields: Map<String, Value>,
}

impl ResultLine {
    /// The fields other than correctness and latency, as `key=value` pairs (for feedback).
    pub fn figures(&self, fmt: &ResultFormat) -> String {
        let parts: Vec<String> = self
            .fields
            .iter()
            .filter(|(k, _)| **k != fmt.correct_key && **k != fmt.latency_key)
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect();
        parts.join(", ")
    }
}

/// Why no result could be read.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultLineError {
    /// No line starts with the tag.
    Missing { tag: String },
    /// The picked line's payload is not one JSON object.
    Malformed { line_no: usize, text: String, reason: String },
    /// A required key is absent or has the wrong type/value.
    BadField { line_no: usize, key: String, reason: String },
}

impl fmt::Display for ResultLineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResultLineError::Missing { tag } => write!(
                f,
                "no result line: the program must print a line `{tag} {{\"correct\": ..., \"latency_us\": ...}}`"
            ),
            ResultLineError::Malformed { line_no, text, reason } => {
                write!(f, "result line {line_no} is not `TAG <one JSON object>`: {reason}: {text}")
            }
            ResultLineError::BadField { line_no, key, reason } => {
                write!(f, "result line {line_no}: key `{key}` {reason}")
            }
        }
    }
}

impl std::error::Error for ResultLineError {}

/// Finds the tagged lines in `output` and parses the one `fmt.pick` selects.
pub fn extract_result(output: &str, fmt: &ResultFormat) -> Result<ResultLine, ResultLineError> {
    let tagged = tagged_lines(output, &fmt.tag);
    let picked = match fmt.pick {
        Pick::First => tagged.first(),
        Pick::Last => tagged.last(),
    };
    let Some(&(line_no, payload)) = picked else {
        return Err(ResultLineError::Missing { tag: fmt.tag.clone() });
    };
    let payload = payload.trim();
    let shown: String = payload.chars().take(200).collect();
    let value: Value = serde_json::from_str(payload).map_err(|e| ResultLineError::Malformed {
        line_no,
        text: shown.clone(),
        reason: e.to_string(),
    })?;
    let Value::Object(fields) = value else {
        return Err(ResultLineError::Malformed { line_no, text: shown, reason: "expected a JSON object".into() });
    };
    let bad = |key: &str, reason: String| ResultLineError::BadField { line_no, key: key.to_string(), reason };
    let correct = verdict(fields.get(&fmt.correct_key)).map_err(|r| bad(&fmt.correct_key, r))?;
    let latency_us = latency(fields.get(&fmt.latency_key), correct).map_err(|r| bad(&fmt.latency_key, r))?;
    Ok(ResultLine { line_no, tagged_lines: tagged.len(), correct, latency_us, fields })
}

/// The lines of `output` that start with `tag` as a whole word: (1-based line number, the rest of the line).
fn tagged_lines<'a>(output: &'a str, tag: &str) -> Vec<(usize, &'a str)> {
    output
        .lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let rest = line.trim_start().strip_prefix(tag)?;
            // The tag must be a whole word: followed by blank space (or nothing, which is then malformed).
            (rest.is_empty() || rest.starts_with([' ', '\t'])).then_some((i + 1, rest))
        })
        .collect()
}

/// The correctness verdict field: a boolean, else why not.
fn verdict(field: Option<&Value>) -> Result<bool, String> {
    match field {
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(format!("must be true or false, found {other}")),
        None => Err("is missing (a boolean verdict is required)".into()),
    }
}

/// The latency field: microseconds in [`US_RANGE`], optional only when the result is not correct.
fn latency(field: Option<&Value>, correct: bool) -> Result<Option<f64>, String> {
    match field {
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if US_RANGE.contains(&x) => Ok(Some(x)),
            _ => Err(format!(
                "must be a number of microseconds from {:e} to {:e} (the range a latency may take), found {n}",
                US_RANGE.start(),
                US_RANGE.end()
            )),
        },
        None | Some(Value::Null) if !correct => Ok(None),
        Some(other) => Err(format!("must be a number of microseconds, found {other}")),
        None => Err("is missing (required when the result is correct)".into()),
    }
}
