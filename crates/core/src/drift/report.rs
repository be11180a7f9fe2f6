//! The report of the plain `synth drift` check: a JSON document and its markdown summary (for a CI job
//! summary), written where `--report-json` / `--report-md` name them.

use serde::Serialize;

use crate::table::Shape;

/// The rule's score on one configuration (or the whole data, `all`).
#[derive(Debug, Clone, Serialize)]
pub struct ConfigScore {
    pub config: String,
    pub shapes: usize,
    /// Geomean over the shapes of oracle µs / rule µs.
    pub fraction_of_oracle: f64,
    /// The same on the baseline, when one was given for this configuration.
    pub baseline_fraction_of_oracle: Option<f64>,
    /// Shapes whose pick is not measured or failed on the new data.
    pub unusable: usize,
}

/// A shape where the rule's pick is slower than the new oracle by more than --shape-regret.
#[derive(Debug, Clone, Serialize)]
pub struct SlowShape {
    pub shape: Shape,
    pub pick: String,
    pub us: f64,
    pub oracle_us: f64,
}

/// A shape whose pick is not measured or failed on the new data.
#[derive(Debug, Clone, Serialize)]
pub struct UnusablePick {
    pub shape: Shape,
    pub pick: String,
    pub reason: String,
}

/// The JSON report of the plain check.
#[derive(Debug, Clone, Serialize)]
pub struct PlainReport {
    /// `ok` or `drift`.
    pub verdict: String,
    pub problems: Vec<String>,
    /// What to do about drift.
    pub fix: String,
    /// The line printed when there is none.
    #[serde(skip)]
    pub ok_line: String,
    pub rule: String,
    pub dataset: String,
    pub baseline: Option<String>,
    pub min_fraction: f64,
    pub max_drop: f64,
    pub shape_regret: f64,
    /// One row per configuration of a manifest and `all`; one row `all` for a single table.
    pub configs: Vec<ConfigScore>,
    /// Slowest first (single table).
    pub slower: Vec<SlowShape>,
    pub unusable: Vec<UnusablePick>,
    /// What qualifies the figures (e.g. a default kernel without a usable cell on some shapes).
    pub notes: Vec<String>,
}

/// Text from inputs in a markdown table cell: control and bidi characters shown as code points, no `|`.
fn cell(text: &str) -> String {
    synth_base::sanitize::shown(text).replace('|', "\\|")
}

/// `x` with `digits` decimals, or `—` when it is not a finite number: the summary writes finite numbers
/// only, whatever the data held.
fn fixed(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        "—".to_string()
    }
}

/// How much slower `us` is than `oracle_us`, as `+N%` (`—` when the ratio is not a finite number).
fn slower(us: f64, oracle_us: f64) -> String {
    let pct = (us / oracle_us - 1.0) * 100.0;
    if pct.is_finite() {
        format!("{pct:+.0}%")
    } else {
        "—".to_string()
    }
}

/// Most shapes listed in each markdown table (the JSON report has them all).
const LISTED: usize = 50;

/// The markdown summary.
pub fn markdown(r: &PlainReport) -> String {
    let mut s = String::new();
    let head = if r.verdict == "ok" { "no drift" } else { "DRIFT" };
    s.push_str(&format!("## gemm-synth drift check: {head}\n\n"));
    s.push_str(&format!("Rule `{}` re-scored on `{}`", cell(&r.rule), cell(&r.dataset)));
    if let Some(b) = &r.baseline {
        s.push_str(&format!(" against baseline `{}`", cell(b)));
    }
    s.push_str(&format!(
        " (fail below {} of the oracle or on a drop of more than {}).\n\n",
        fixed(r.min_fraction, 3),
        fixed(r.max_drop, 3)
    ));
    s.push_str("| configuration | shapes | fraction of oracle | baseline | unusable picks |\n|---|---|---|---|---|\n");
    for c in &r.configs {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            cell(&c.config),
            c.shapes,
            fixed(c.fraction_of_oracle, 3),
            c.baseline_fraction_of_oracle.map_or_else(|| "—".to_string(), |b| fixed(b, 3)),
            c.unusable
        ));
    }
    s.push('\n');
    for n in &r.notes {
        s.push_str(&format!("Note: {}\n\n", cell(n)));
    }
    if !r.problems.is_empty() {
        s.push_str("### Problems\n\n");
        for p in &r.problems {
            s.push_str(&format!("- {}\n", cell(p)));
        }
        s.push_str(&format!("\nWhat to do: {}\n\n", cell(&r.fix)));
    }
    if !r.unusable.is_empty() {
        s.push_str("### Unusable picks\n\n| shape | pick | reason |\n|---|---|---|\n");
        for u in r.unusable.iter().take(LISTED) {
            s.push_str(&format!("| {} | {} | {} |\n", u.shape, u.pick, cell(&u.reason)));
        }
        s.push('\n');
    }
    if !r.slower.is_empty() {
        s.push_str(&format!(
            "### Shapes slower than the new oracle by more than {}%\n\n| shape | pick | µs | oracle µs | slower |\n|---|---|---|---|---|\n",
            fixed(r.shape_regret * 100.0, 0)
        ));
        for w in r.slower.iter().take(LISTED) {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                w.shape,
                w.pick,
                fixed(w.us, 2),
                fixed(w.oracle_us, 2),
                slower(w.us, w.oracle_us)
            ));
        }
        if r.slower.len() > LISTED {
            s.push_str(&format!("\n{} more in the JSON report.\n", r.slower.len() - LISTED));
        }
    }
    s
}
