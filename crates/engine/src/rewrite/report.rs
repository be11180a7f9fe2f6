//! The rewrite report: every candidate's status, latency and speedup against the original, the winner,
//! as JSON and as a text table.

use crate::engine::clip;
use crate::engine::Attempt;
use serde::Serialize;
use std::fmt::Write as _;

use synth_base::textable::{left, right, TextTable};

/// One evaluated candidate.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CandidateRow {
    /// Attempt id (0 = the original, evaluated first).
    pub id: usize,
    /// Loop iteration (0 = baseline).
    pub iteration: usize,
    /// Offspring slot.
    pub slot: usize,
    /// Lineage.
    pub lineage: usize,
    /// Proposer name.
    pub proposer: String,
    /// What the candidate is: "original", a replayed file name, or the proposer.
    pub source: String,
    /// Evaluation status (see [`super::task::Status`]); "propose_error" when no candidate came back.
    pub status: String,
    /// Latency in µs when correct.
    pub latency_us: Option<f64>,
    /// Original latency / this latency.
    pub speedup: Option<f64>,
    /// Set when the text repeats an earlier attempt (its evaluation was reused, not re-measured).
    pub duplicate_of: Option<usize>,
    /// The test's result fields (error figures, bandwidth, sizes), when a result line was read.
    pub result: Option<serde_json::Value>,
    /// The evaluator's (or proposer's) feedback.
    pub feedback: String,
}

/// The winning candidate.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Winner {
    /// Attempt id.
    pub id: usize,
    /// What it is.
    pub source: String,
    /// Its latency.
    pub latency_us: f64,
    /// Original latency / winner latency.
    pub speedup: Option<f64>,
    /// Where the winner was written.
    pub path: String,
}

/// The whole report.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    /// Task name.
    pub task: String,
    /// Spec file.
    pub spec: String,
    /// Target file (relative to the working-copy root).
    pub target: String,
    /// The command line that produced the report.
    pub command: String,
    /// Latency of the original file (None when it failed).
    pub baseline_latency_us: Option<f64>,
    /// Status of the original.
    pub baseline_status: String,
    /// The best correct candidate.
    pub winner: Option<Winner>,
    /// Iterations run.
    pub iterations_run: usize,
    /// Candidates evaluated (duplicates excluded).
    pub evaluations: usize,
    /// Wall time in seconds.
    pub elapsed_s: f64,
    /// Every attempt, by id.
    pub candidates: Vec<CandidateRow>,
}

/// `num / den` when it is a finite positive number (a speedup): never an infinity or NaN in a report.
pub fn ratio(num: f64, den: f64) -> Option<f64> {
    let r = num / den;
    (r.is_finite() && r > 0.0).then_some(r)
}

/// `x` with `digits` decimals, or `-` when it is not a finite number (so a report holds finite numbers
/// only, whatever reaches it).
pub fn fixed(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        "-".to_string()
    }
}

/// Status name stored in an attempt's evaluation details.
pub fn status_of(a: &Attempt) -> String {
    match a.eval.details.get("status").and_then(|s| s.as_str()) {
        Some(s) => s.to_string(),
        None if a.eval.details.get("stage").and_then(|s| s.as_str()) == Some("propose") => "propose_error".into(),
        None if a.eval.score.is_some() => "ok".into(),
        None => "failed".into(),
    }
}

/// Rows for `attempts`; `source` names a candidate text (the original, a replay file, ...).
pub fn rows(attempts: &[Attempt], baseline: Option<f64>, source: &dyn Fn(&Attempt) -> String) -> Vec<CandidateRow> {
    attempts
        .iter()
        .map(|a| CandidateRow {
            id: a.id,
            iteration: a.iteration,
            slot: a.slot,
            lineage: a.lineage,
            proposer: a.proposer.clone(),
            source: source(a),
            status: status_of(a),
            latency_us: a.eval.score,
            speedup: baseline.zip(a.eval.score).and_then(|(b, s)| ratio(b, s)),
            duplicate_of: a.duplicate_of,
            result: a.eval.details.get("result").cloned(),
            feedback: a.eval.feedback.clone(),
        })
        .collect()
}

/// The text form: a header, one table row per candidate, then each failure's feedback.
/// The notes column of one candidate: a duplicate's original, a measured result's extra fields, or the
/// first line of a failure's feedback.
fn notes(c: &CandidateRow) -> String {
    let mut notes = Vec::new();
    if let Some(d) = c.duplicate_of {
        notes.push(format!("same text as #{d}, not re-run"));
    }
    match (&c.result, c.latency_us) {
        (Some(serde_json::Value::Object(m)), Some(_)) => {
            for key in ["gbps", "max_abs_err"] {
                if let Some(v) = m.get(key) {
                    notes.push(format!("{key}={v}"));
                }
            }
        }
        (_, Some(_)) => {}
        (_, None) => notes.push(clip(c.feedback.lines().next().unwrap_or(""), 90)),
    }
    notes.join("; ")
}

pub fn render_text(r: &Report) -> String {
    let mut s = String::new();
    // One line whatever the names hold (the whole text is filtered below, newlines kept).
    let one = |t: &str| synth_base::sanitize::shown(t);
    let _ = writeln!(s, "rewrite task {} ({}), target {}", one(&r.task), one(&r.spec), one(&r.target));
    let _ = writeln!(s, "command: {}", r.command);
    match r.baseline_latency_us {
        Some(b) => {
            let _ = writeln!(s, "original: {} us", fixed(b, 2));
        }
        None => {
            let _ = writeln!(s, "original: {} (no baseline latency; speedups are not available)", r.baseline_status);
        }
    }
    match &r.winner {
        Some(w) => {
            let sp = w
                .speedup
                .filter(|x| x.is_finite())
                .map_or_else(|| "no baseline".into(), |x| format!("{x:.2}x vs original"));
            let lat = fixed(w.latency_us, 2);
            let _ = writeln!(s, "winner: #{} {} at {lat} us ({sp}), written to {}", w.id, w.source, w.path);
        }
        None => {
            let _ = writeln!(s, "winner: none (no candidate was correct)");
        }
    }
    let _ = writeln!(
        s,
        "{} iteration(s), {} evaluation(s), {} s\n",
        r.iterations_run,
        r.evaluations,
        fixed(r.elapsed_s, 1)
    );
    let columns = vec![
        right("id").min(3),
        right("iter"),
        left("source").min(34),
        left("status").min(13),
        right("latency_us").min(12),
        right("speedup").min(8),
        left("notes"),
    ];
    let mut table = TextTable::new(columns).gap(1);
    for c in &r.candidates {
        let lat = c.latency_us.map_or_else(|| "-".into(), |x| fixed(x, 2));
        let sp = c.speedup.filter(|x| x.is_finite()).map_or_else(|| "-".into(), |x| format!("{x:.2}x"));
        let source: String = c.source.chars().take(34).collect();
        table.row([c.id.to_string(), c.iteration.to_string(), source, c.status.to_string(), lat, sp, notes(c)]);
    }
    s.push_str(&table.render());
    let failures: Vec<&CandidateRow> =
        r.candidates.iter().filter(|c| c.latency_us.is_none() && c.duplicate_of.is_none()).collect();
    if !failures.is_empty() {
        let _ = writeln!(s, "\nfeedback of failed candidates:");
        for c in failures {
            let _ = writeln!(s, "--- #{} {} ({})", c.id, c.source, c.status);
            for line in c.feedback.lines().take(25) {
                let _ = writeln!(s, "    {line}");
            }
        }
    }
    // Feedback and sources come from compilers and agents: an escape sequence or a bidi override must
    // reach neither the terminal nor report.txt as such.
    synth_base::sanitize::shown_with(&s, true)
}
