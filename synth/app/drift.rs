//! Drift: re-check a committed rule on new measurements (a new driver, ROCm or CUDA release, or another
//! GPU). The rule is re-scored against the new per-shape oracle; shapes where its choice fell behind and
//! choices that no longer run correctly are listed, and the command fails past a tolerance so CI can gate
//! on it. Scoring is `compare`'s: a choice that no longer runs is charged the default's time.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::catalog::{Candidate, Catalog};
use crate::compare::{self, Policy, Status};
use crate::rule::Rule;
use crate::table::{Cell, LatencyMatrix};

use super::session::load_matrix;

#[derive(Debug, clap::Args)]
pub struct DriftArgs {
    /// Rule to re-check (JSON, C++ or Rust form).
    #[arg(long, default_value = "generated/rule.json")]
    pub rule: PathBuf,
    /// New measurements (AITER CSV / gemm-synth measurement file), or a dataset manifest (`.toml`, e.g.
    /// measurements/h200/datasets.toml) for one row per (model, TP) configuration; with --remeasure, the
    /// journal the re-measurement is written to (resumable).
    #[arg(long)]
    pub dataset: PathBuf,
    /// Measurements the rule was accepted on; when given, the fraction of oracle is compared with it (per
    /// configuration when both this and --dataset are manifests).
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Fail when the rule's geomean fraction of oracle on the new data is below this.
    #[arg(long, default_value_t = 0.85)]
    pub min_fraction: f64,
    /// Fail when the fraction of oracle dropped by more than this against the baseline.
    #[arg(long, default_value_t = 0.05)]
    pub max_drop: f64,
    /// List shapes where the rule's choice is this much slower than the new oracle (0.25 = 25%).
    #[arg(long, default_value_t = 0.25)]
    pub shape_regret: f64,
    #[command(flatten)]
    pub remeasure: super::drift_remeasure::RemeasureArgs,
}

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
    RuleScore { shapes: report.shapes.len(), fraction_of_oracle: res.summary.of_oracle, regressions, unusable }
}

fn print_score(label: &str, mat: &LatencyMatrix, score: &RuleScore) {
    println!(
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
pub fn run(args: DriftArgs) -> Result<()> {
    if args.remeasure.remeasure {
        return super::drift_remeasure::run(&args);
    }
    let catalog = Catalog::embedded();
    let rule = crate::rule::load_checked(&args.rule, &catalog)
        .with_context(|| format!("cannot load the rule to re-check from {}", args.rule.display()))?;
    if let Some(manifest) = super::multi_eval::manifest_of(std::slice::from_ref(&args.dataset)) {
        return run_manifest(&args, &rule, &manifest);
    }
    let new = load_matrix(&args.dataset, &catalog)?;
    let score = score_rule(&rule, &new, &catalog, args.shape_regret);
    print_score("new measurements", &new, &score);

    let mut problems = Vec::new();
    if let Some(base_path) = &args.baseline {
        let base = load_matrix(base_path, &catalog)?;
        let base_score = score_rule(&rule, &base, &catalog, args.shape_regret);
        print_score("baseline", &base, &base_score);
        let drop = base_score.fraction_of_oracle - score.fraction_of_oracle;
        println!("change in fraction of oracle: {:+.3}", -drop);
        if drop > args.max_drop {
            problems.push(format!(
                "fraction of oracle fell by {drop:.3} (from {:.3} to {:.3}), more than --max-drop {}",
                base_score.fraction_of_oracle, score.fraction_of_oracle, args.max_drop
            ));
        }
    }
    if score.fraction_of_oracle < args.min_fraction {
        problems.push(format!(
            "fraction of oracle {:.3} is below --min-fraction {}",
            score.fraction_of_oracle, args.min_fraction
        ));
    }
    for (s, cand, reason) in &score.unusable {
        println!("  unusable: {} -> {cand}: {reason}", new.shapes[*s]);
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
        println!(
            "  slower: {} -> {cand}: {us:.2} us vs oracle {best:.2} us ({:+.0}%)",
            new.shapes[*s],
            (us / best - 1.0) * 100.0
        );
    }
    if problems.is_empty() {
        println!("no drift: the rule holds on the new measurements");
        Ok(())
    } else {
        anyhow::bail!(
            "drift detected:\n  - {}\nre-run `synth run --dataset {}` to synthesize a rule for the new data",
            problems.join("\n  - "),
            args.dataset.display()
        )
    }
}

/// Per-configuration fraction of the oracle of `rule` on a manifest's data (the default and the oracle
/// beside it), and the whole data's.
fn manifest_scores(rule: &Rule, data: &super::multi::MultiData) -> Vec<super::multi_eval::Evaluation> {
    let policies = [Policy::Default, Policy::Rule { name: RULE_NAME.into(), rule: rule.clone() }, Policy::Oracle];
    let mut evals = super::multi_eval::per_config(data, &policies);
    evals.push(super::multi_eval::Evaluation {
        evaluation: "all",
        config: "all".into(),
        report: compare::evaluate(&data.matrix, &data.catalog, &policies, &data.all_shapes()),
    });
    evals
}

/// `synth drift --dataset MANIFEST.toml`: the rule re-checked on every (model, TP) configuration of the
/// manifest, one row each; fails when any configuration (or the whole) is below --min-fraction, picks an
/// unusable cell, or (with a manifest --baseline) fell by more than --max-drop against the same
/// configuration of the baseline.
fn run_manifest(args: &DriftArgs, rule: &Rule, manifest: &std::path::Path) -> Result<()> {
    use super::multi_eval::{of_oracle, per_config_table, unusable};
    let data = super::multi_eval::open(manifest)?;
    let evals = manifest_scores(rule, &data);
    let m = &data.matrix;
    println!(
        "new measurements: {} ({} configurations, {} shapes, {} on {} ({} CUs))",
        super::session::display_path(manifest),
        data.configs.len(),
        m.shapes.len(),
        m.device.as_deref().unwrap_or("unknown device"),
        m.gfx,
        m.cu_num
    );
    print!("{}", per_config_table(&evals, RULE_NAME));
    let all = evals.last().expect("the whole data is scored");
    println!(
        "  {:<18} {:>6} fraction of oracle {:.3}",
        "all",
        all.report.shapes.len(),
        of_oracle(&all.report, RULE_NAME)
    );
    let mut problems = Vec::new();
    let baseline = match &args.baseline {
        Some(b) if super::multi_eval::manifest_of(std::slice::from_ref(b)).is_some() => {
            Some(manifest_scores(rule, &super::multi_eval::open(b)?))
        }
        Some(b) => {
            let base = load_matrix(b, &data.catalog)?;
            let score = score_rule(rule, &base, &data.catalog, args.shape_regret);
            print_score("baseline", &base, &score);
            let drop = score.fraction_of_oracle - of_oracle(&all.report, RULE_NAME);
            println!("change in fraction of oracle: {:+.3}", -drop);
            if drop > args.max_drop {
                problems.push(format!(
                    "fraction of oracle fell by {drop:.3} (from {:.3} to {:.3}), more than --max-drop {}",
                    score.fraction_of_oracle,
                    of_oracle(&all.report, RULE_NAME),
                    args.max_drop
                ));
            }
            None
        }
        None => None,
    };
    for e in &evals {
        let f = of_oracle(&e.report, RULE_NAME);
        if f < args.min_fraction {
            problems
                .push(format!("{}: fraction of oracle {f:.3} is below --min-fraction {}", e.config, args.min_fraction));
        }
        let bad = unusable(&e.report, RULE_NAME);
        if bad > 0 && e.evaluation == "config" {
            problems.push(format!("{}: {bad} shapes pick a kernel that is not measured or failed", e.config));
        }
        if let Some(base) = &baseline {
            match base.iter().find(|b| b.config == e.config) {
                Some(b) => {
                    let before = of_oracle(&b.report, RULE_NAME);
                    println!("  {:<18} baseline {before:.3} -> {f:.3} ({:+.3})", e.config, f - before);
                    if before - f > args.max_drop {
                        problems.push(format!(
                            "{}: fraction of oracle fell by {:.3} (from {before:.3} to {f:.3}), more than --max-drop {}",
                            e.config,
                            before - f,
                            args.max_drop
                        ));
                    }
                }
                None => println!("  {:<18} not in the baseline", e.config),
            }
        }
    }
    if problems.is_empty() {
        println!("no drift: the rule holds on every configuration of the new measurements");
        Ok(())
    } else {
        anyhow::bail!(
            "drift detected:\n  - {}\nre-run `synth run --manifest {}` to synthesize a rule for the new data",
            problems.join("\n  - "),
            manifest.display()
        )
    }
}
