//! Drift: re-check a committed rule on new measurements (a new driver, ROCm or CUDA release, or another
//! GPU). The rule is re-scored against the new per-shape oracle; shapes where its choice fell behind and
//! choices that no longer run correctly are listed, and the command fails past a tolerance so CI can gate
//! on it. Scoring is `compare`'s: a choice that no longer runs is charged the default's time. With
//! `--report-md` / `--report-json` the verdict is also written as a markdown summary (for a CI job summary)
//! and a JSON report ([`synth_core::drift::report`]).

use std::path::Path;

use anyhow::{Context, Result};

use synth_core::catalog::{Candidate, Catalog};
use synth_core::compare::{self, Policy, Status};
use synth_core::manifest::MultiData;
use synth_core::rule::Rule;
use synth_core::table::{Cell, LatencyMatrix};

use super::drift_args::{refuse_remeasure_only, write_reports, DriftArgs};
use super::invocation::Invocation;
use super::resolve::{dataset_mode, DataMode};
use super::session::{load_matrix, load_tables};

use synth_core::drift::report::{ConfigScore, PlainReport, SlowShape, UnusablePick};

/// How a rule does on one latency matrix.
#[derive(Debug, Clone)]
pub struct RuleScore {
    /// Shapes scored (those with at least one valid cell).
    pub shapes: usize,
    /// Geomean over scored shapes of oracle_us / rule_us (1.0 = always the fastest), a pick of a missing
    /// or invalid cell charged the default's time as [`compare::evaluate`] charges it.
    pub fraction_of_oracle: f64,
    /// (shape index, chosen candidate, rule us, oracle us) where the choice is slower than allowed.
    pub regressions: Vec<(usize, Candidate, f64, f64)>,
    /// (shape index, chosen candidate, reason) where the chosen cell is missing or invalid.
    pub unusable: Vec<(usize, Candidate, String)>,
    /// Shapes where the default kernel's cell is not usable: there an unusable pick is charged the slowest
    /// usable time of the shape ([`compare::evaluate`]), which bounds nothing.
    pub default_unusable: usize,
}

/// The note for [`RuleScore::default_unusable`] shapes, as `synth compare` says it.
fn default_note(n: usize) -> String {
    format!(
        "the default kernel's cell is not usable on {n} of the shapes; there an unusable pick is charged the slowest \
         usable time of the shape, so the fraction of oracle is no bound (a sparse table, such as a tuned CSV, makes \
         it meaningless)"
    )
}

/// Name of the re-checked rule in the comparison.
const RULE_NAME: &str = "rule";

/// Scores `rule` on every shape of `mat` that has a valid cell, with [`compare::evaluate`].
pub fn score_rule(rule: &Rule, mat: &LatencyMatrix, catalog: &Catalog, shape_regret: f64) -> RuleScore {
    let all: Vec<usize> = (0..mat.shapes.len()).collect();
    let policies = [Policy::Rule { name: RULE_NAME.into(), rule: rule.clone() }];
    let report = compare::evaluate(mat, catalog, &policies, &all);
    let res = &report.policies[0];
    let mut regressions = Vec::new();
    let mut unusable = Vec::new();
    for (i, o) in res.outcomes.iter().enumerate() {
        let s = report.shapes[i];
        let cand = o.pick.candidate;
        match o.status {
            Status::Ok => {
                let best = report.oracle_us[i];
                if o.us > best * (1.0 + shape_regret) {
                    regressions.push((s, cand, o.us, best));
                }
            }
            Status::Invalid | Status::Missing => {
                let reason = match mat.candidate_index(&cand).map(|c| mat.cell(s, c)) {
                    Some(Cell::Invalid(reason)) => reason.clone(),
                    _ => "not measured".to_string(),
                };
                unusable.push((s, cand, reason));
            }
        }
    }
    RuleScore {
        shapes: report.shapes.len(),
        fraction_of_oracle: res.summary.of_oracle,
        regressions,
        unusable,
        default_unusable: report.default_unusable,
    }
}

fn print_score(label: &str, mat: &LatencyMatrix, score: &RuleScore) {
    outln!(
        "{label}: {} shapes, {} on {} ({} CUs): geomean fraction of oracle {:.3}; {} shapes slower than allowed, {} choices unusable",
        score.shapes,
        mat.device.as_deref().unwrap_or("unknown device"),
        mat.gfx,
        mat.cu_num,
        score.fraction_of_oracle,
        score.regressions.len(),
        score.unusable.len()
    );
}

/// `synth drift`: exit non-zero when the rule no longer holds on the new measurements.
pub fn run(args: DriftArgs, invocation: &Invocation) -> Result<()> {
    super::outputs::check_distinct(
        &super::drift_args::drift_inputs(&args),
        &super::drift_args::report_outputs(&args.remeasure),
    )?;
    if args.remeasure.remeasure {
        return super::drift_remeasure::run(&args);
    }
    refuse_remeasure_only(invocation)?;
    let catalog = Catalog::embedded();
    let rule = synth_core::rule::load_checked(&args.rule, &catalog)
        .with_context(|| format!("cannot load the rule to re-check from {}", args.rule.display()))?;
    synth_core::compare::backends::check_callable(&rule, args.backends.backends.as_ref())
        .map_err(|e| anyhow::anyhow!("{} (the rule to re-check): {e}", args.rule.display()))?;
    let mut modes = Vec::new();
    for d in args.dataset.iter().chain(&args.baseline) {
        modes.push(dataset_mode(d)?);
    }
    let report = match modes.swap_remove(0) {
        DataMode::Manifest(manifest) => {
            DriftArgs::one("--dataset", &args.dataset, "a manifest names every journal of its configurations")?;
            if args.baseline.len() > 1 {
                DriftArgs::one("--baseline", &args.baseline, "a manifest's baseline is one table or manifest")?;
            }
            if let Some(b) = &args.backends.backends {
                anyhow::bail!(
                    "--backends {b} is read with tables given as --dataset: a manifest ({}) holds CK configurations",
                    manifest.display()
                );
            }
            check_manifest(&args, &rule, &manifest)?
        }
        // `dataset_mode` never names tuned tables (drift has no --train-tuned).
        DataMode::Single | DataMode::Tuned => {
            if let Some(DataMode::Manifest(m)) = modes.iter().find(|m| matches!(m, DataMode::Manifest(_))) {
                anyhow::bail!(
                    "{} is a manifest: with tables as --dataset, --baseline and every further --dataset are tables \
                     too (or give the manifest as the one --dataset)",
                    m.display()
                );
            }
            check_single(&args, &rule, &catalog)?
        }
    };
    write_reports(&args.remeasure, &synth_core::drift::report::markdown(&report), &report)?;
    if report.problems.is_empty() {
        outln!("{}", report.ok_line);
        Ok(())
    } else {
        anyhow::bail!("drift detected:\n  - {}\n{}", report.problems.join("\n  - "), report.fix)
    }
}

/// The report's fields every plain check fills the same way.
fn plain_report(args: &DriftArgs, problems: Vec<String>, fix: String, ok_line: &str) -> PlainReport {
    PlainReport {
        verdict: if problems.is_empty() { "ok" } else { "drift" }.into(),
        problems,
        fix,
        ok_line: ok_line.into(),
        rule: args.rule.display().to_string(),
        dataset: DriftArgs::shown(&args.dataset),
        baseline: (!args.baseline.is_empty()).then(|| DriftArgs::shown(&args.baseline)),
        min_fraction: args.min_fraction,
        max_drop: args.max_drop,
        shape_regret: args.shape_regret,
        configs: Vec::new(),
        slower: Vec::new(),
        unusable: Vec::new(),
        notes: Vec::new(),
    }
}

/// The plain check on one latency table (and a baseline table).
fn check_single(args: &DriftArgs, rule: &Rule, catalog: &Catalog) -> Result<PlainReport> {
    let backends = args.backends.backends.as_ref();
    let new = load_tables(&args.dataset, catalog, backends)?;
    // A rule of a backend the measurements do not hold is not drifting: it cannot be re-checked on them.
    synth_core::compare::backends::check_measured(rule, &new)
        .map_err(|e| anyhow::anyhow!("{} (the rule to re-check): {e}", args.rule.display()))?;
    let score = score_rule(rule, &new, catalog, args.shape_regret);
    print_score("new measurements", &new, &score);
    let mut problems = Vec::new();
    let baseline_fraction = match args.baseline.is_empty() {
        true => None,
        false => Some(against_baseline(args, rule, catalog, &new, &score, &mut problems)?),
    };
    if score.fraction_of_oracle < args.min_fraction {
        problems.push(format!(
            "fraction of oracle {:.3} is below --min-fraction {}",
            score.fraction_of_oracle, args.min_fraction
        ));
    }
    for (s, cand, reason) in &score.unusable {
        outln!("  unusable: {} -> {cand}: {reason}", new.shapes[*s]);
    }
    if !score.unusable.is_empty() {
        problems.push(format!(
            "{} shapes pick a kernel that is not measured or failed on the new data",
            score.unusable.len()
        ));
    }
    let mut worst = score.regressions.clone();
    worst.sort_by(|a, b| (b.2 / b.3).total_cmp(&(a.2 / a.3)));
    for (s, cand, us, best) in worst.iter().take(10) {
        outln!(
            "  slower: {} -> {cand}: {us:.2} us vs oracle {best:.2} us ({:+.0}%)",
            new.shapes[*s],
            (us / best - 1.0) * 100.0
        );
    }
    let mut report = plain_report(args, problems, rerun_fix(args), "no drift: the rule holds on the new measurements");
    if score.default_unusable > 0 {
        let note = default_note(score.default_unusable);
        outln!("note: {note}");
        report.notes.push(note);
    }
    report.configs.push(ConfigScore {
        config: "all".into(),
        shapes: score.shapes,
        fraction_of_oracle: score.fraction_of_oracle,
        baseline_fraction_of_oracle: baseline_fraction,
        unusable: score.unusable.len(),
    });
    report.slower = worst
        .iter()
        .map(|&(s, c, us, oracle_us)| SlowShape { shape: new.shapes[s], pick: c.to_string(), us, oracle_us })
        .collect();
    report.unusable = score
        .unusable
        .iter()
        .map(|(s, c, reason)| UnusablePick { shape: new.shapes[*s], pick: c.to_string(), reason: reason.clone() })
        .collect();
    Ok(report)
}

/// The rule scored on the baseline tables against its score on the new ones: prints the change, adds the
/// problem of a drop past `--max-drop`, returns the baseline's fraction of the oracle.
fn against_baseline(
    args: &DriftArgs,
    rule: &Rule,
    catalog: &Catalog,
    new: &LatencyMatrix,
    score: &RuleScore,
    problems: &mut Vec<String>,
) -> Result<f64> {
    let base = load_tables(&args.baseline, catalog, args.backends.backends.as_ref())?;
    check_baseline(new, &DriftArgs::shown(&args.dataset), &base, &DriftArgs::shown(&args.baseline))?;
    let base_score = score_rule(rule, &base, catalog, args.shape_regret);
    print_score("baseline", &base, &base_score);
    let drop = base_score.fraction_of_oracle - score.fraction_of_oracle;
    outln!("change in fraction of oracle: {:+.3}", -drop);
    if drop > args.max_drop {
        problems.push(format!(
            "fraction of oracle fell by {drop:.3} (from {:.3} to {:.3}), more than --max-drop {}",
            base_score.fraction_of_oracle, score.fraction_of_oracle, args.max_drop
        ));
    }
    Ok(base_score.fraction_of_oracle)
}

/// The fix of the plain check on tables: the `synth run` on the new data.
fn rerun_fix(args: &DriftArgs) -> String {
    let mut again: Vec<String> = args
        .dataset
        .iter()
        .map(|d| format!("--dataset {}", synth_base::sanitize::shell_word(&d.display().to_string())))
        .collect();
    if let Some(b) = &args.backends.backends {
        again.push(format!("--backends {b}"));
    }
    format!("re-run `synth run {}` to synthesize a rule for the new data", again.join(" "))
}

/// The device of a matrix as messages name it (`NVIDIA H200 (sm_90, 132 CUs)`).
fn device_text(m: &LatencyMatrix) -> String {
    match &m.device {
        Some(name) => format!("{name} ({}, {} CUs)", m.gfx, m.cu_num),
        None => format!("{} with {} CUs", m.gfx, m.cu_num),
    }
}

/// Refuses a baseline that cannot be compared with the new data: measured on another device (a fraction of
/// the oracle on one GPU says nothing of another), or a tuned table (only each shape's winner: the rule's
/// pick is mostly not among its rows, so it scores as unusable picks, not as the rule).
fn check_baseline(new: &LatencyMatrix, dataset: &str, base: &LatencyMatrix, baseline: &str) -> Result<()> {
    if (new.gfx.as_str(), new.cu_num) != (base.gfx.as_str(), base.cu_num) {
        anyhow::bail!(
            "--baseline {} holds measurements of {}, --dataset {} of {}: a baseline is the same device's \
             measurements the rule was accepted on (one matrix holds one device); give a baseline measured on {}",
            synth_base::sanitize::shown(baseline),
            device_text(base),
            synth_base::sanitize::shown(dataset),
            device_text(new),
            device_text(new)
        );
    }
    if synth_core::tuned::is_tuned_matrix(base) {
        anyhow::bail!(
            "--baseline {} is a tuned table (one row per shape, only its winner), not a measurement table: the \
             rule's picks are mostly not among its rows and would score as unusable, not as the rule; give the \
             measurements the rule was accepted on (every candidate of each shape, e.g. a `synth bench` journal)",
            synth_base::sanitize::shown(baseline)
        );
    }
    Ok(())
}

/// Per-configuration fraction of the oracle of `rule` on a manifest's data (the default and the oracle
/// beside it), and the whole data's.
fn manifest_scores(rule: &Rule, data: &MultiData) -> Vec<super::multi_eval::Evaluation> {
    let policies = [Policy::Default, Policy::Rule { name: RULE_NAME.into(), rule: rule.clone() }, Policy::Oracle];
    let mut evals = super::multi_eval::per_config(data, &policies);
    evals.push(super::multi_eval::Evaluation {
        evaluation: "all",
        config: "all".into(),
        report: compare::evaluate(&data.matrix, &data.catalog, &policies, &data.all_shapes()),
    });
    evals
}

/// A single-file baseline against the whole manifest's data: prints the comparison, returns the problem.
fn whole_against_baseline(
    args: &DriftArgs,
    rule: &Rule,
    base: &Path,
    data: &MultiData,
    all: f64,
) -> Result<(f64, Option<String>)> {
    let shown = base.display().to_string();
    let base = load_matrix(base, &data.catalog)?;
    check_baseline(&data.matrix, &args.dataset[0].display().to_string(), &base, &shown)?;
    let score = score_rule(rule, &base, &data.catalog, args.shape_regret);
    print_score("baseline", &base, &score);
    let drop = score.fraction_of_oracle - all;
    outln!("change in fraction of oracle: {:+.3}", -drop);
    let problem = (drop > args.max_drop).then(|| {
        format!(
            "fraction of oracle fell by {drop:.3} (from {:.3} to {all:.3}), more than --max-drop {}",
            score.fraction_of_oracle, args.max_drop
        )
    });
    Ok((score.fraction_of_oracle, problem))
}

/// `synth drift --dataset MANIFEST.toml`: the rule re-checked on every (model, TP) configuration of the
/// manifest, one row each; fails when any configuration (or the whole) is below --min-fraction, picks an
/// unusable cell, or (with a manifest --baseline) fell by more than --max-drop against the same
/// configuration of the baseline.
fn check_manifest(args: &DriftArgs, rule: &Rule, manifest: &Path) -> Result<PlainReport> {
    use super::multi_eval::per_config_table;
    use super::shared::of_oracle;
    let data = super::manifest::open(manifest)?;
    synth_core::compare::backends::check_measured(rule, &data.matrix)
        .map_err(|e| anyhow::anyhow!("{} (the rule to re-check): {e}", args.rule.display()))?;
    let evals = manifest_scores(rule, &data);
    let m = &data.matrix;
    outln!(
        "new measurements: {} ({} configurations, {} shapes, {} on {} ({} CUs))",
        synth_base::paths::display_path(manifest),
        data.configs.len(),
        m.shapes.len(),
        m.device.as_deref().unwrap_or("unknown device"),
        m.gfx,
        m.cu_num
    );
    out!("{}", per_config_table(&evals, RULE_NAME));
    let all = evals.last().expect("the whole data is scored");
    let all_fraction = of_oracle(&all.report, RULE_NAME);
    outln!("  {:<18} {:>6} fraction of oracle {:.3}", "all", all.report.shapes.len(), all_fraction);
    let mut problems = Vec::new();
    let mut whole_baseline = None;
    let baseline = match args.baseline.first() {
        Some(b) if matches!(dataset_mode(b)?, DataMode::Manifest(_)) => {
            let base = super::manifest::open(b)?;
            check_baseline(&data.matrix, &manifest.display().to_string(), &base.matrix, &b.display().to_string())?;
            Some(manifest_scores(rule, &base))
        }
        Some(b) => {
            let (fraction, problem) = whole_against_baseline(args, rule, b, &data, all_fraction)?;
            problems.extend(problem);
            whole_baseline = Some(fraction);
            None
        }
        None => None,
    };
    let configs = evals
        .iter()
        .map(|e| config_score(args, e, baseline.as_deref(), whole_baseline, &mut problems))
        .collect::<Vec<_>>();
    let fix = format!(
        "re-run `synth run --manifest {}` to synthesize a rule for the new data",
        synth_base::sanitize::shell_word(&manifest.display().to_string())
    );
    let mut report =
        plain_report(args, problems, fix, "no drift: the rule holds on every configuration of the new measurements");
    report.configs = configs;
    Ok(report)
}

/// One evaluation's row of the manifest check: its fraction of the oracle, against the same configuration
/// of a manifest `baseline` (or the whole against a single-file baseline, `whole_baseline`), its problems
/// added to `problems`.
fn config_score(
    args: &DriftArgs,
    e: &super::multi_eval::Evaluation,
    baseline: Option<&[super::multi_eval::Evaluation]>,
    whole_baseline: Option<f64>,
    problems: &mut Vec<String>,
) -> ConfigScore {
    use super::shared::{of_oracle, unusable};
    let f = of_oracle(&e.report, RULE_NAME);
    if f < args.min_fraction {
        problems.push(format!("{}: fraction of oracle {f:.3} is below --min-fraction {}", e.config, args.min_fraction));
    }
    let bad = unusable(&e.report, RULE_NAME);
    if bad > 0 && e.evaluation == "config" {
        problems.push(format!("{}: {bad} shapes pick a kernel that is not measured or failed", e.config));
    }
    let mut before = whole_baseline.filter(|_| e.evaluation == "all");
    if let Some(base) = baseline {
        match base.iter().find(|b| b.config == e.config) {
            Some(b) => {
                let was = of_oracle(&b.report, RULE_NAME);
                outln!("  {:<18} baseline {was:.3} -> {f:.3} ({:+.3})", e.config, f - was);
                if was - f > args.max_drop {
                    problems.push(format!(
                        "{}: fraction of oracle fell by {:.3} (from {was:.3} to {f:.3}), more than --max-drop {}",
                        e.config,
                        was - f,
                        args.max_drop
                    ));
                }
                before = Some(was);
            }
            None => outln!("  {:<18} not in the baseline", e.config),
        }
    }
    ConfigScore {
        config: e.config.clone(),
        shapes: e.report.shapes.len(),
        fraction_of_oracle: f,
        baseline_fraction_of_oracle: before,
        unusable: bad,
    }
}
