//! The report of `drift --remeasure`: the JSON document and its markdown summary (for a CI job summary).

use serde::Serialize;

use super::remeasure::{CellCompare, NewOracle};

/// The JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub verdict: String,
    pub problems: Vec<String>,
    pub fix: String,
    pub rule: String,
    pub baseline: String,
    pub dataset: String,
    pub backend: String,
    pub device: String,
    pub noise_median: f64,
    pub noise_source: String,
    pub sigma_ratio: f64,
    pub cell_tolerance: f64,
    pub shapes_sampled: usize,
    pub shapes_measured: usize,
    pub budget_s: f64,
    pub budget_reached: bool,
    pub elapsed_s: f64,
    pub rule_cells: usize,
    pub rule_geomean_ratio: Option<f64>,
    pub rule_aggregate_tolerance: f64,
    pub rule_fraction_of_oracle_baseline: f64,
    pub rule_fraction_of_oracle_new: f64,
    pub new_oracles: Vec<NewOracle>,
    pub cells: Vec<CellCompare>,
}

fn fmt_us(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "—".into())
}

/// The markdown summary.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let head = if r.verdict == "ok" { "no drift" } else { "DRIFT" };
    s.push_str(&format!("## gemm-synth drift check: {head}\n\n"));
    s.push_str(&format!(
        "Rule `{}` against baseline `{}`, re-measured into `{}` with the {} backend on {}.\n\n",
        r.rule, r.baseline, r.dataset, r.backend, r.device
    ));
    s.push_str("| | |\n|---|---|\n");
    s.push_str(&format!(
        "| shapes | {} of {} sampled measured{} |\n",
        r.shapes_measured,
        r.shapes_sampled,
        if r.budget_reached { " (time budget reached)" } else { "" }
    ));
    s.push_str(&format!(
        "| baseline noise | {:.2}% median recheck change ({}); per-cell tolerance {:.1}% |\n",
        r.noise_median * 100.0,
        r.noise_source,
        r.cell_tolerance * 100.0
    ));
    s.push_str(&format!(
        "| rule's picks | {} cells, geomean new/baseline {} (tolerance +{:.1}%) |\n",
        r.rule_cells,
        r.rule_geomean_ratio.map(|g| format!("{g:.3}")).unwrap_or_else(|| "—".into()),
        r.rule_aggregate_tolerance * 100.0
    ));
    s.push_str(&format!(
        "| rule's fraction of oracle | {:.3} baseline → {:.3} re-measured |\n\n",
        r.rule_fraction_of_oracle_baseline, r.rule_fraction_of_oracle_new
    ));
    if !r.problems.is_empty() {
        s.push_str("### Problems\n\n");
        for p in &r.problems {
            s.push_str(&format!("- {p}\n"));
        }
        s.push_str(&format!("\nWhat to do: {}\n\n", r.fix));
    }
    if !r.new_oracles.is_empty() {
        s.push_str("### New oracles\n\n| shape | was | now | now µs | gain |\n|---|---|---|---|---|\n");
        for o in &r.new_oracles {
            s.push_str(&format!(
                "| {} | {} | {} | {:.2} | {:.1}% |\n",
                o.shape,
                o.old_oracle,
                o.new_oracle,
                o.new_oracle_us,
                o.gain * 100.0
            ));
        }
        s.push('\n');
    }
    s.push_str(&moved_cells(&r.cells));
    s
}

/// The table of the cells that moved (the first 50; the JSON report holds them all).
fn moved_cells(cells: &[CellCompare]) -> String {
    let mut s = String::new();
    let moved: Vec<&CellCompare> =
        cells.iter().filter(|c| !matches!(c.verdict.as_str(), "same" | "new-cell" | "not-remeasured")).collect();
    if !moved.is_empty() {
        s.push_str("### Cells that moved\n\n| shape | kernel | role | baseline µs | new µs | change | verdict |\n");
        s.push_str("|---|---|---|---|---|---|---|\n");
        for c in moved.iter().take(50) {
            let role = [(c.roles.rule, "rule"), (c.roles.oracle, "oracle"), (c.roles.default, "default")]
                .iter()
                .filter(|(b, _)| *b)
                .map(|(_, n)| *n)
                .collect::<Vec<_>>()
                .join("+");
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {}{} |\n",
                c.shape,
                c.candidate,
                role,
                fmt_us(c.baseline_us),
                fmt_us(c.new_us),
                c.ratio.map(|q| format!("{:+.1}%", (q - 1.0) * 100.0)).unwrap_or_else(|| "—".into()),
                c.verdict,
                c.reason.as_ref().map(|r| format!(" ({})", r.replace('|', "/"))).unwrap_or_default()
            ));
        }
        if moved.len() > 50 {
            s.push_str(&format!("\n{} more in the JSON report.\n", moved.len() - 50));
        }
    }
    s
}
