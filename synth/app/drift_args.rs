//! The options of `synth drift` (the plain check and `--remeasure`), shared by both checks, and the report
//! files they write.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::invocation::Invocation;

/// Options of `synth drift`.
#[derive(Debug, clap::Args)]
pub struct DriftArgs {
    /// Rule to re-check (JSON, C++ or Rust form).
    #[arg(long, default_value = "generated/rule.json")]
    pub rule: PathBuf,
    /// New measurements (AITER CSV / gemm-synth measurement file; repeat for several tables read as one, e.g.
    /// a CK journal and a vendor journal for a rule with --backends ck,vendor), or a dataset manifest
    /// (`.toml`, e.g. measurements/h200/datasets.toml) for one row per (model, TP) configuration; with
    /// --remeasure, the journal the re-measurement is written to (resumable).
    #[arg(long, required = true)]
    pub dataset: Vec<PathBuf>,
    /// Measurements the rule was accepted on (repeatable as --dataset); when given, the fraction of oracle is
    /// compared with it (per configuration when both this and --dataset are manifests).
    #[arg(long)]
    pub baseline: Vec<PathBuf>,
    #[command(flatten)]
    pub backends: super::args::BackendArgs,
    /// Fail when the rule's geomean fraction of oracle on the new data is below this (in (0, 1]).
    #[arg(long, default_value_t = 0.85, value_parser = min_fraction)]
    pub min_fraction: f64,
    /// Fail when the fraction of oracle dropped by more than this against the baseline (in [0, 1)).
    #[arg(long, default_value_t = 0.05, value_parser = max_drop)]
    pub max_drop: f64,
    /// List shapes where the rule's choice is this much slower than the new oracle (0.25 = 25%; at least 0).
    #[arg(long, default_value_t = 0.25, value_parser = shape_regret)]
    pub shape_regret: f64,
    #[command(flatten)]
    pub remeasure: RemeasureArgs,
}

impl DriftArgs {
    /// The one path of `flag` where only one is read (a manifest, a re-measurement): an error naming why when
    /// it is given several times.
    pub fn one<'a>(flag: &str, paths: &'a [PathBuf], why: &str) -> Result<&'a Path> {
        match paths {
            [one] => Ok(one),
            [] => anyhow::bail!("{flag} is needed: {why}"),
            many => anyhow::bail!("{flag} is given {} times, but {why}: give it once", many.len()),
        }
    }

    /// The tables of `paths` as the report and the messages name them (`a + b`).
    pub fn shown(paths: &[PathBuf]) -> String {
        paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" + ")
    }
}

/// Options of `synth drift --remeasure` (flattened into `synth drift`).
#[derive(Debug, clap::Args)]
pub struct RemeasureArgs {
    /// Measure a seeded sample of the baseline's cells again into --dataset (a resumable journal) and compare
    /// cell by cell; needs --baseline.
    #[arg(long, requires = "baseline")]
    pub remeasure: bool,
    /// Measurement backend for --remeasure.
    #[arg(long, value_enum, default_value = "harness")]
    pub backend: super::aiter_args::Backend,
    /// Shapes sampled from the baseline.
    #[arg(long, default_value_t = 24)]
    pub sample_shapes: usize,
    /// Candidates per sampled shape measured besides the rule's, the oracle's and the default (seeded; the
    /// harness backend — AITER's tuner measures every candidate of the shape).
    #[arg(long, default_value_t = 3)]
    pub others: usize,
    /// Seed of the sample.
    #[arg(long, default_value_t = 0)]
    pub sample_seed: u64,
    /// Time budget in seconds: no new batch of shapes starts after it, and the harness is stopped when it
    /// runs out in the middle of one (AITER's tuner: between its batches); what was measured is compared.
    #[arg(long, default_value_t = 1800.0, value_parser = seconds)]
    pub budget_s: f64,
    /// Seconds to wait for each cell's result before the harness is stopped (the run ends with an error and
    /// keeps every finished cell in --dataset), as `synth bench --cell-timeout`; with --backend aiter, the
    /// longest the tuner may print nothing and add nothing to its profile file before it is stopped.
    #[arg(long, default_value_t = 1800.0, value_parser = positive_seconds)]
    pub cell_timeout: f64,
    /// Shapes per measurement batch (the unit progress is reported and the tuner is run in).
    #[arg(long, default_value_t = 4)]
    pub batch_shapes: usize,
    /// Noise multiplier of the tolerances (see the module doc).
    #[arg(long, default_value_t = 5.0)]
    pub noise_k: f64,
    /// Smallest relative change of one cell that counts as a move.
    #[arg(long, default_value_t = 0.05)]
    pub cell_tolerance: f64,
    /// Smallest geometric-mean slowdown of the rule's picks that counts as drift.
    #[arg(long, default_value_t = 0.03)]
    pub aggregate_tolerance: f64,
    /// Report a kernel that became a shape's oracle when it beats the baseline oracle by this share.
    #[arg(long, default_value_t = 0.10)]
    pub new_oracle: f64,
    /// Baseline noise (median |ratio - 1| of recheck pairs) to assume when the baseline has no recheck rows.
    #[arg(long)]
    pub noise: Option<f64>,
    /// Markdown summary (e.g. `$GITHUB_STEP_SUMMARY`).
    #[arg(long)]
    pub report_md: Option<PathBuf>,
    /// JSON report.
    #[arg(long)]
    pub report_json: Option<PathBuf>,
    /// Python interpreter (PyTorch and Triton for the harness; AITER's for the tuner).
    #[arg(long, default_value = "python3")]
    pub python: PathBuf,
    /// Harness entry point (`--backend harness`).
    #[arg(long, default_value = "harness/blockscale_bench.py")]
    pub harness: PathBuf,
    /// Extra argument passed to the harness (repeatable).
    #[arg(long = "harness-arg", allow_hyphen_values = true)]
    pub harness_args: Vec<String>,
    #[command(flatten)]
    pub aiter: super::aiter_args::AiterTunerArgs,
}

/// `--min-fraction`: a fraction of the oracle in (0, 1] (NaN or 0 would turn the gate off).
fn min_fraction(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(format!(
            "expected a fraction of the oracle in (0, 1] (e.g. 0.85), got {s:?}: the check fails when the rule's \
             fraction is below it"
        )),
    }
}

/// `--max-drop`: a drop of the fraction of the oracle in [0, 1) (NaN or infinity would turn the gate off).
fn max_drop(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..1.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected a drop of the fraction of the oracle in [0, 1) (e.g. 0.05), got {s:?}: the check fails when \
             the fraction falls by more than it"
        )),
    }
}

/// `--shape-regret`: a share >= 0, finite (0.25 = 25% slower than the oracle).
fn shape_regret(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=1e6).contains(&v) => Ok(v),
        _ => Err(format!("expected a share of at least 0 (e.g. 0.25 for 25% slower than the oracle), got {s:?}")),
    }
}

/// A number of seconds >= 0 (a budget of 0 measures nothing).
fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=1e7).contains(&v) => Ok(v),
        _ => Err(format!("expected a number of seconds in [0, 1e7], got {s:?}")),
    }
}

/// A number of seconds > 0.
fn positive_seconds(s: &str) -> Result<f64, String> {
    match seconds(s) {
        Ok(v) if v > 0.0 => Ok(v),
        _ => Err(format!("expected a number of seconds in (0, 1e7], got {s:?}")),
    }
}

/// Options of `--remeasure` that the plain check has no use for (every one but the report files).
const BOTH_CHECKS: [&str; 3] = ["remeasure", "report_md", "report_json"];

/// Refuses, naming them, the options given on the command line that only `--remeasure` uses: the plain
/// check measures nothing, so they would be accepted and silently do nothing.
pub fn refuse_remeasure_only(invocation: &Invocation) -> Result<()> {
    use clap::Args as _;
    let defined = RemeasureArgs::augment_args(clap::Command::new("drift"));
    let given: Vec<String> = defined
        .get_arguments()
        .filter(|a| !BOTH_CHECKS.contains(&a.get_id().as_str()) && invocation.given(a.get_id().as_str()))
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect();
    if given.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "{} only {} to `drift --remeasure`: the plain check re-scores the rule on --dataset and measures \
         nothing; drop {} or add --remeasure --baseline FILE",
        given.join(", "),
        if given.len() == 1 { "applies" } else { "apply" },
        if given.len() == 1 { "it" } else { "them" }
    )
}

/// Writes the markdown summary and the JSON report where the options name them, all or nothing: both are
/// staged beside their targets first ([`super::outputs::write_named_files`]), so a report that cannot be
/// written leaves the other unwritten too.
pub fn write_reports(args: &RemeasureArgs, markdown: &str, json: &impl serde::Serialize) -> Result<()> {
    let mut files = Vec::new();
    if let Some(p) = &args.report_md {
        files.push((p.clone(), markdown.as_bytes().to_vec()));
    }
    if let Some(p) = &args.report_json {
        let text = serde_json::to_string_pretty(json).context("cannot serialize the report")? + "\n";
        files.push((p.clone(), text.into_bytes()));
    }
    super::outputs::write_named_files(&files)
}

/// The report files of `args` as outputs (option, path), for [`super::outputs::check_distinct`].
pub fn report_outputs(args: &RemeasureArgs) -> Vec<(&'static str, PathBuf)> {
    let mut out = Vec::new();
    if let Some(p) = &args.report_md {
        out.push(("--report-md", p.clone()));
    }
    if let Some(p) = &args.report_json {
        out.push(("--report-json", p.clone()));
    }
    out
}

/// The files `synth drift` reads (option, path): the rule, every --dataset and --baseline.
pub fn drift_inputs(args: &DriftArgs) -> Vec<(&'static str, PathBuf)> {
    let mut inputs = vec![("--rule", args.rule.clone())];
    inputs.extend(args.dataset.iter().map(|p| ("--dataset", p.clone())));
    inputs.extend(args.baseline.iter().map(|p| ("--baseline", p.clone())));
    inputs
}
