//! What the commands share: the names of the files a run writes, the rule outline and summary tables they
//! print, and the figures read off a report. Every command module depends on this one; it depends on no
//! command.

use std::fmt::Write as _;

use synth_core::catalog::Catalog;
use synth_core::compare::Report;
use synth_core::rule::Rule;

/// Comparison CSV written into the output directory.
pub const COMPARE_CSV: &str = "compare.csv";
/// Speed-up plot written into the output directory.
pub const SPEEDUP_SVG: &str = "speedup.svg";
/// The same plot as a PNG ([`synth_core::compare::raster`]), beside the SVG.
pub const SPEEDUP_PNG: &str = "speedup.png";
/// The rule in JSON (the form `synth drift` and `synth check` read) written into the output directory.
pub const RULE_JSON: &str = "rule.json";
/// Leaves-versus-quality curve written into the output directory.
pub const CURVE_CSV: &str = "leaves_curve.csv";
/// Summary rows of the multi-model evaluations, written into the output directory.
pub const EVALUATIONS_CSV: &str = "evaluations.csv";
/// Header of [`EVALUATIONS_CSV`].
pub const EVALUATIONS_COLUMNS: &str =
    "evaluation,config,policy,shapes,geomean_vs_default,total_vs_default,of_oracle,missing,invalid";
/// The published rule (GEAK-HIP write-up), scored next to the synthesized one.
pub const PUBLISHED_RULE: &str = include_str!("../../assets/rules/geak_blog_rule.cpp");
/// Name under which the published rule is reported.
pub const PUBLISHED_RULE_NAME: &str = "published-rule";

/// The published rule, parsed.
pub fn published_rule(catalog: &Catalog) -> anyhow::Result<Rule> {
    synth_core::rule::parse_any(PUBLISHED_RULE, catalog).map_err(|e| anyhow::anyhow!("published rule: {e}"))
}

/// Writes `text` to stdout; a closed pipe (`synth run | head`) is not an error (see [`synth_base::stdout`]).
pub fn emit(text: &str) -> anyhow::Result<()> {
    out!("{text}");
    Ok(())
}

/// A configuration or policy name for the terminal: control, bidi and line-breaking characters shown as
/// `<U+XXXX>` ([`synth_base::sanitize::shown`]), as errors and generated headers show them.
pub fn shown(name: &str) -> String {
    synth_base::sanitize::shown(name)
}

/// A short outline of a rule: conditions in C++ syntax, leaves as `#id BMxBNxBK vP, splitK s (KBatch 2^s)`
/// (splitK is the log2 of AITER's KBatch: the number of K splits).
pub fn rule_outline(rule: &Rule, catalog: &Catalog) -> String {
    fn leaf_text(leaf: &synth_core::rule::Leaf, catalog: &Catalog) -> String {
        if let Some(item) = synth_core::rule::text::other_backend_item(leaf) {
            return format!("{} {item}, splitK {}", leaf.backend, leaf.split_k);
        }
        let tile = catalog.legacy_by_id(leaf.kernel_id).map_or_else(String::new, |inst| {
            let (bm, bn, bk) = inst.tile();
            let v = inst.legacy_params().map_or(String::new(), |p| format!(" v{}", p.pipeline));
            format!(" {bm}x{bn}x{bk}{v}")
        });
        format!("#{}{tile}, splitK {} (KBatch {})", leaf.kernel_id, leaf.split_k, 1u64 << leaf.split_k.min(63))
    }
    fn walk(node: &synth_core::rule::Node, catalog: &Catalog, indent: usize, out: &mut String) {
        let pad = "  ".repeat(indent);
        match node {
            synth_core::rule::Node::Leaf(l) => {
                let _ = writeln!(out, "{pad}-> {}", leaf_text(l, catalog));
            }
            synth_core::rule::Node::Chain { branches, otherwise } => {
                for (i, (cond, child)) in branches.iter().enumerate() {
                    let kw = if i == 0 { "if" } else { "else if" };
                    let _ = writeln!(out, "{pad}{kw} {}:", synth_core::rule::text::cond_to_cpp(cond));
                    walk(child, catalog, indent + 1, out);
                }
                let _ = writeln!(out, "{pad}else:");
                walk(otherwise, catalog, indent + 1, out);
            }
        }
    }
    let mut out = String::new();
    walk(&rule.root, catalog, 0, &mut out);
    out
}

/// Policy rows: geomean and total speed-up against the default, fraction of the oracle, unusable picks.
pub fn summary_table(report: &Report) -> String {
    use synth_base::textable::{left, right, TextTable};
    let columns = vec![
        left("policy").min(16),
        right("x def (geo)").min(12),
        right("x def (tot)").min(12),
        right("of oracle").min(10),
        right("unusable").min(9),
    ];
    let mut t = TextTable::new(columns).gap(1).indent("  ");
    for p in &report.policies {
        let s = &p.summary;
        t.row([
            p.name.clone(),
            format!("{:.3}", s.geomean_vs_default),
            format!("{:.3}", s.total_vs_default),
            format!("{:.3}", s.of_oracle),
            (s.missing + s.invalid).to_string(),
        ]);
    }
    t.render()
}

/// Fraction of the oracle of `policy` in `report` (NaN when it is not scored there).
pub fn of_oracle(report: &Report, policy: &str) -> f64 {
    report.policy_index(policy).map_or(f64::NAN, |p| report.policies[p].summary.of_oracle)
}

/// The layer ((N, K)) of `report` where `policy` reaches the lowest fraction of the oracle: its (N, K),
/// that fraction (geomean over the layer's scored shapes) and its shape count; None when nothing is scored
/// or `policy` is not in `report`. Ties go to the smaller (N, K).
pub fn worst_layer(report: &Report, policy: &str) -> Option<((u32, u32), f64, usize)> {
    let p = report.policy_index(policy)?;
    let mut layers: std::collections::BTreeMap<(u32, u32), Vec<usize>> = std::collections::BTreeMap::new();
    for (i, s) in report.shape_list.iter().enumerate() {
        layers.entry((s.n, s.k)).or_default().push(i);
    }
    layers
        .into_iter()
        .map(|(nk, idx)| (nk, report.summarize(p, &idx).of_oracle, idx.len()))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// `worst_layer` as table text: `0.912 (N 5120, K 25600)`, or `-`.
pub fn worst_layer_text(report: &Report, policy: &str) -> String {
    worst_layer(report, policy).map_or("-".to_string(), |((n, k), f, _)| format!("{f:.3} (N {n}, K {k})"))
}

/// Picks of missing or invalid cells by `policy` in `report`.
pub fn unusable(report: &Report, policy: &str) -> usize {
    report.policy_index(policy).map_or(0, |p| report.policies[p].summary.missing + report.policies[p].summary.invalid)
}

/// Progress of a long loop on stderr (a manifest of thousands of configurations trains a rule per
/// configuration for leave-one-model-out): a line at most every few seconds, none for a loop that ends
/// sooner, so short runs print nothing more.
pub struct Progress {
    what: &'static str,
    unit: &'static str,
    total: usize,
    every_s: f64,
    done: std::sync::atomic::AtomicUsize,
    started: std::time::Instant,
    last: std::sync::Mutex<std::time::Instant>,
}

/// Seconds between two progress lines.
pub const PROGRESS_EVERY_S: f64 = 30.0;

impl Progress {
    pub fn new(what: &'static str, unit: &'static str, total: usize) -> Progress {
        Progress::every(what, unit, total, PROGRESS_EVERY_S)
    }

    /// A progress that prints at most every `every_s` seconds.
    pub fn every(what: &'static str, unit: &'static str, total: usize, every_s: f64) -> Progress {
        let now = std::time::Instant::now();
        Progress { what, unit, total, every_s, done: 0.into(), started: now, last: std::sync::Mutex::new(now) }
    }

    /// One more item done; returns the line printed on stderr, if one was due.
    pub fn tick(&self) -> Option<String> {
        let done = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let mut last = self.last.lock().ok()?;
        if last.elapsed().as_secs_f64() < self.every_s || done >= self.total {
            return None;
        }
        *last = std::time::Instant::now();
        let line = self.message(done, self.started.elapsed().as_secs_f64());
        errln!("{line}");
        Some(line)
    }

    /// The line for `done` items after `elapsed` seconds, with the time left at the same pace.
    pub fn message(&self, done: usize, elapsed: f64) -> String {
        let left = elapsed / done.max(1) as f64 * self.total.saturating_sub(done) as f64;
        format!("{}: {done} of {} {} done in {elapsed:.0} s (about {left:.0} s left)", self.what, self.total, self.unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_says_how_far_and_how_long_is_left_and_stays_quiet_when_quick() {
        let p = Progress::new("leave-one-model-out", "configurations", 10_000);
        assert_eq!(
            p.message(100, 50.0),
            "leave-one-model-out: 100 of 10000 configurations done in 50 s (about 4950 s left)"
        );
        assert_eq!(p.tick(), None, "nothing within the first {PROGRESS_EVERY_S} s");
        let p = Progress::every("x", "items", 3, 0.0);
        assert!(p.tick().is_some_and(|l| l.starts_with("x: 1 of 3 items done")));
        assert!(p.tick().is_some());
        assert_eq!(p.tick(), None, "no line for the last item (the loop's own output follows)");
    }

    #[test]
    fn names_are_shown_with_hazards_as_code_points() {
        assert_eq!(shown("tp1\r\n\u{202E}x"), "tp1<U+000D><U+000A><U+202E>x");
    }
}
