//! `synth drift --remeasure`: the CI check for a new ROCm (or CUDA) release. A seeded sample of the
//! committed dataset's cells (per sampled shape: the rule's pick, the oracle's, the default and a few
//! others) is measured again with either backend within a time budget, compared cell by cell with the
//! baseline — with tolerances from the baseline's own recheck noise — and the rule is re-scored against
//! the re-measured oracle. The result is a markdown summary (for a CI job summary), a JSON report and an
//! exit status: 0 no drift, [`EXIT_DRIFT`] drift, 1 an error (2 for bad arguments, from clap).
//!
//! Noise model: a recheck pair's ratio and a re-measured/baseline ratio are both ratios of two
//! measurements of one cell, so they share a distribution; with `med` the baseline's median |ratio - 1|,
//! the ratio's standard deviation is `sigma = med / 0.6745`. A cell has moved when its ratio leaves
//! `1 ± max(--cell-tolerance, --noise-k * sigma)`; the rule's picks have slowed when their geometric-mean
//! ratio exceeds `1 + max(--aggregate-tolerance, --noise-k * sigma / sqrt(n))`.
//!
//! With `--backend aiter` this runs AITER's tuner (ROCm only): not run on an AMD GPU, tested against a
//! fake tuner.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rand::seq::SliceRandom;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::aiter_backend::{self, AiterArgs, Backend, RowMeta, RunFiles, Tuner};
use super::drift::DriftArgs;
use crate::catalog::{Candidate, Catalog};
use crate::measure::{Harness, Journal, PlanCell};
use crate::rule::Rule;
use crate::table::{matrix::median, recheck_pairs, registry, Cell, LatencyMatrix, Shape};

/// Exit status of `synth drift` when drift is found.
pub const EXIT_DRIFT: i32 = 3;

/// Returned (as the error) when drift is found; `main` exits with [`EXIT_DRIFT`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DriftDetected(pub String);

/// Options of `synth drift --remeasure` (flattened into `synth drift`).
#[derive(Debug, clap::Args)]
pub struct RemeasureArgs {
    /// Measure a seeded sample of the baseline's cells again into --dataset (a resumable journal) and compare
    /// cell by cell; needs --baseline.
    #[arg(long, requires = "baseline")]
    pub remeasure: bool,
    /// Measurement backend for --remeasure.
    #[arg(long, value_enum, default_value = "harness")]
    pub backend: Backend,
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
    /// Time budget in seconds: no new batch of shapes starts after it; what was measured is compared.
    #[arg(long, default_value_t = 1800.0)]
    pub budget_s: f64,
    /// Shapes per measurement batch (the unit the budget is checked at).
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
    pub aiter: AiterArgs,
}

/// Roles a re-measured cell plays on its shape.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Roles {
    pub rule: bool,
    pub oracle: bool,
    pub default: bool,
}

/// One re-measured cell next to its baseline.
#[derive(Debug, Clone, Serialize)]
pub struct CellCompare {
    pub shape: Shape,
    pub candidate: String,
    pub roles: Roles,
    pub baseline_us: Option<f64>,
    pub new_us: Option<f64>,
    /// new / baseline, when both ran.
    pub ratio: Option<f64>,
    /// `slower`, `faster`, `now-fails`, `now-runs`, `same`, `new-cell` or `not-remeasured`.
    pub verdict: String,
    /// Why the new cell is unusable, if it is.
    pub reason: Option<String>,
}

/// A shape whose re-measured oracle is another kernel, faster than the baseline oracle by the threshold.
#[derive(Debug, Clone, Serialize)]
pub struct NewOracle {
    pub shape: Shape,
    pub old_oracle: String,
    pub new_oracle: String,
    pub old_oracle_new_us: Option<f64>,
    pub new_oracle_us: f64,
    /// 1 - new oracle / old oracle (re-measured; the baseline time when the old oracle now fails).
    pub gain: f64,
}

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

/// The cells to re-measure: per sampled shape the rule's pick, the oracle, the default and `others` seeded
/// further candidates of the baseline. Shapes are a seeded sample of those with a valid cell.
pub fn sample_cells(
    base: &LatencyMatrix,
    rule: &Rule,
    default: Candidate,
    shapes: usize,
    others: usize,
    seed: u64,
) -> Vec<(Shape, BTreeMap<Candidate, Roles>)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut idx: Vec<usize> = (0..base.shapes.len()).filter(|&s| base.best(s).is_some()).collect();
    idx.shuffle(&mut rng);
    idx.truncate(shapes);
    idx.sort_by_key(|&s| (base.shapes[s].n, base.shapes[s].k, base.shapes[s].m));
    idx.into_iter()
        .map(|s| {
            let shape = base.shapes[s];
            let mut cells: BTreeMap<Candidate, Roles> = BTreeMap::new();
            let leaf = rule.eval(shape.m, shape.n, shape.k);
            cells.entry(Candidate::new(leaf.kernel_id, leaf.split_k)).or_default().rule = true;
            let (oc, _) = base.best(s).expect("filtered above");
            cells.entry(base.candidates[oc]).or_default().oracle = true;
            cells.entry(default).or_default().default = true;
            let mut rest: Vec<Candidate> = (0..base.candidates.len())
                .filter(|&c| base.us(s, c).is_some() && !cells.contains_key(&base.candidates[c]))
                .map(|c| base.candidates[c])
                .collect();
            rest.shuffle(&mut rng);
            for c in rest.into_iter().take(others) {
                cells.entry(c).or_default();
            }
            (shape, cells)
        })
        .collect()
}

fn cell_of(m: &LatencyMatrix, shape: &Shape, c: &Candidate) -> Cell {
    match (m.shape_index(shape), m.candidate_index(c)) {
        (Some(s), Some(ci)) => m.cell(s, ci).clone(),
        _ => Cell::Missing,
    }
}

/// Compares the re-measured matrix with the baseline on the sampled cells. Pure: the tests call it on
/// hand-built matrices.
#[allow(clippy::too_many_arguments)]
pub fn compare(
    base: &LatencyMatrix,
    new: &LatencyMatrix,
    sample: &[(Shape, BTreeMap<Candidate, Roles>)],
    rule: &Rule,
    noise_median: f64,
    args: &RemeasureArgs,
    max_drop: f64,
) -> (Vec<CellCompare>, Vec<NewOracle>, Summary) {
    let sigma = noise_median / 0.6745;
    let tol = args.cell_tolerance.max(args.noise_k * sigma);
    let mut cells = Vec::new();
    let mut new_oracles = Vec::new();
    let mut rule_logs = Vec::new();
    let mut rule_failing = 0;
    let mut measured_shapes = BTreeSet::new();
    let (mut frac_base, mut frac_new, mut n_frac) = (0.0f64, 0.0f64, 0usize);
    for (shape, roles) in sample {
        let Some(ns) = new.shape_index(shape) else { continue };
        measured_shapes.insert(*shape);
        let mut listed: BTreeMap<Candidate, Roles> = roles.clone();
        // Every cell re-measured on the shape is compared (the tuner measures them all).
        for (ci, c) in new.candidates.iter().enumerate() {
            if !matches!(new.cell(ns, ci), Cell::Missing) {
                listed.entry(*c).or_default();
            }
        }
        for (c, r) in &listed {
            let b = cell_of(base, shape, c);
            let n = cell_of(new, shape, c);
            let (verdict, ratio, reason) = match (&b, &n) {
                (_, Cell::Missing) => ("not-remeasured", None, None),
                (Cell::Ok(bu), Cell::Ok(nu)) => {
                    let q = nu / bu;
                    let v = if q > 1.0 + tol {
                        "slower"
                    } else if q < 1.0 - tol {
                        "faster"
                    } else {
                        "same"
                    };
                    (v, Some(q), None)
                }
                (Cell::Ok(_), Cell::Invalid(why)) => ("now-fails", None, Some(why.clone())),
                (Cell::Invalid(_), Cell::Ok(_)) => ("now-runs", None, None),
                (Cell::Invalid(_), Cell::Invalid(why)) => ("same", None, Some(why.clone())),
                (Cell::Missing, Cell::Invalid(why)) => ("new-cell", None, Some(why.clone())),
                (Cell::Missing, Cell::Ok(_)) => ("new-cell", None, None),
            };
            if r.rule {
                if let Some(q) = ratio {
                    rule_logs.push(q.ln());
                }
                if matches!(n, Cell::Invalid(_)) {
                    rule_failing += 1;
                }
            }
            cells.push(CellCompare {
                shape: *shape,
                candidate: c.to_string(),
                roles: r.clone(),
                baseline_us: b.us(),
                new_us: n.us(),
                ratio,
                verdict: verdict.to_string(),
                reason,
            });
        }
        // The rule against the oracle of the re-measured cells (and the baseline oracle on the same shape).
        let leaf = rule.eval(shape.m, shape.n, shape.k);
        let rc = Candidate::new(leaf.kernel_id, leaf.split_k);
        let bs = base.shape_index(shape).expect("sampled from the baseline");
        if let (Some((_, base_best)), Some(rule_base)) = (base.best(bs), cell_of(base, shape, &rc).us()) {
            if let (Some((nbc, new_best)), Some(rule_new)) = (new.best(ns), cell_of(new, shape, &rc).us()) {
                frac_base += (base_best / rule_base).ln();
                frac_new += (new_best / rule_new).ln();
                n_frac += 1;
                let _ = nbc;
            }
        }
        // A kernel that became the oracle by the threshold.
        let (boc, base_best) = base.best(bs).expect("sampled shapes have a valid cell");
        let old = base.candidates[boc];
        if let Some((nbc, new_best)) = new.best(ns) {
            let cand = new.candidates[nbc];
            let old_new = cell_of(new, shape, &old).us();
            let reference = old_new.unwrap_or(base_best);
            let gain = 1.0 - new_best / reference;
            if cand != old && gain >= args.new_oracle {
                new_oracles.push(NewOracle {
                    shape: *shape,
                    old_oracle: old.to_string(),
                    new_oracle: cand.to_string(),
                    old_oracle_new_us: old_new,
                    new_oracle_us: new_best,
                    gain,
                });
            }
        }
    }
    let n = rule_logs.len();
    let geo = (n > 0).then(|| (rule_logs.iter().sum::<f64>() / n as f64).exp());
    let agg_tol = if n > 0 { args.aggregate_tolerance.max(args.noise_k * sigma / (n as f64).sqrt()) } else { 0.0 };
    let (fb, fnew) =
        if n_frac > 0 { ((frac_base / n_frac as f64).exp(), (frac_new / n_frac as f64).exp()) } else { (0.0, 0.0) };
    let mut problems = Vec::new();
    if let Some(g) = geo {
        if g > 1.0 + agg_tol {
            problems.push(format!(
                "the rule's picks are {:.1}% slower (geomean over {n} cells), beyond the {:.1}% tolerance",
                (g - 1.0) * 100.0,
                agg_tol * 100.0
            ));
        }
    }
    if rule_failing > 0 {
        problems.push(format!("{rule_failing} of the rule's picks now fail (run error or correctness check)"));
    }
    if !new_oracles.is_empty() {
        problems.push(format!(
            "on {} shapes another kernel is now the oracle, faster by at least {:.0}%",
            new_oracles.len(),
            args.new_oracle * 100.0
        ));
    }
    if n_frac > 0 && fb - fnew > max_drop {
        problems.push(format!(
            "the rule's fraction of oracle on the sample fell from {fb:.3} to {fnew:.3}, more than --max-drop {max_drop}"
        ));
    }
    let summary = Summary {
        sigma,
        tol,
        rule_cells: n,
        rule_geo: geo,
        agg_tol,
        frac_base: fb,
        frac_new: fnew,
        shapes_measured: measured_shapes.len(),
        problems,
    };
    (cells, new_oracles, summary)
}

/// Aggregates of [`compare`].
#[derive(Debug, Clone)]
pub struct Summary {
    pub sigma: f64,
    pub tol: f64,
    pub rule_cells: usize,
    pub rule_geo: Option<f64>,
    pub agg_tol: f64,
    pub frac_base: f64,
    pub frac_new: f64,
    pub shapes_measured: usize,
    pub problems: Vec<String>,
}

/// Measures the sampled cells into the journal at `out`, batch by batch while the budget lasts. Returns
/// the device label and whether the budget stopped it.
fn measure(
    args: &RemeasureArgs,
    sample: &[(Shape, BTreeMap<Candidate, Roles>)],
    out: &Path,
    catalog: &Catalog,
    started: Instant,
) -> Result<(String, bool)> {
    let batches: Vec<&[(Shape, BTreeMap<Candidate, Roles>)]> = sample.chunks(args.batch_shapes.max(1)).collect();
    let over = |i: usize| -> bool {
        let el = started.elapsed().as_secs_f64();
        if el >= args.budget_s {
            eprintln!(
                "drift: time budget of {} s reached after {el:.0} s; {i} of {} batches measured",
                args.budget_s,
                batches.len()
            );
            true
        } else {
            false
        }
    };
    match args.backend {
        Backend::Harness => {
            let mut extra = args.harness_args.clone();
            extra.push(format!("--seed={}", args.sample_seed));
            let harness = Harness {
                python: args.python.clone(),
                script: args.harness.clone(),
                extra_args: extra,
                // The same per-cell limit as `synth bench`'s default.
                cell_timeout: std::time::Duration::from_secs(1800),
            };
            let dev = harness.probe()?;
            let (mut journal, _) = Journal::open(out, catalog)?;
            let plan_file = tempfile::Builder::new().prefix("synth-drift-plan").suffix(".jsonl").tempfile()?;
            for (i, batch) in batches.iter().enumerate() {
                if over(i) {
                    return Ok((dev.name, true));
                }
                let mut cells = Vec::new();
                for (shape, cands) in batch.iter() {
                    for c in cands.keys() {
                        let inst = catalog.legacy_by_id(c.kernel_id).with_context(|| {
                            format!("the rule or baseline names kernelId {}, which the catalog lacks", c.kernel_id)
                        })?;
                        let p = inst.legacy_params().expect("legacy instance");
                        let cell = PlanCell::new(*shape, inst, p, c.split_k);
                        if !journal.is_done(&cell.key()) {
                            cells.push(cell);
                        }
                    }
                }
                if !cells.is_empty() {
                    harness.run(&cells, plan_file.path(), &mut journal, |_| {}, |line| eprintln!("{line}"))?;
                }
            }
            Ok((dev.name, false))
        }
        Backend::Aiter => {
            let tuner = Tuner::from_args(&args.python, &args.aiter, true)?;
            let dev = tuner.probe()?;
            let (mut journal, _) = Journal::open(out, catalog)?;
            let dir = aiter_backend::work_dir(out);
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            let files = RunFiles::in_dir(&dir, "");
            let meta = RowMeta {
                device: dev.name.clone(),
                backend: "aiter-tuner".into(),
                timing: "aiter run_perftest".into(),
                reps: tuner.iters.unwrap_or(101),
                recheck: 0,
                err_ratio: tuner.err_ratio,
            };
            if files.profile.exists() {
                aiter_backend::import_profile(&files.profile, &mut journal, &meta, catalog, None)?;
            }
            for (i, batch) in batches.iter().enumerate() {
                if over(i) {
                    return Ok((dev.name, true));
                }
                let todo: Vec<Shape> = batch
                    .iter()
                    .map(|(s, _)| *s)
                    .filter(|s| !journal.rows().iter().any(|r| (r.m, r.n, r.k) == (s.m, s.n, s.k)))
                    .collect();
                if !todo.is_empty() {
                    tuner.run(&todo, &files, &mut journal, &meta, catalog)?;
                }
            }
            Ok((dev.name, false))
        }
    }
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
    let moved: Vec<&CellCompare> =
        r.cells.iter().filter(|c| !matches!(c.verdict.as_str(), "same" | "new-cell" | "not-remeasured")).collect();
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

/// `synth drift --remeasure`.
pub fn run(d: &DriftArgs) -> Result<()> {
    let args = &d.remeasure;
    let started = Instant::now();
    let catalog = Catalog::embedded();
    let base_path = d.baseline.as_ref().expect("clap requires --baseline with --remeasure");
    let rule = crate::rule::load(&d.rule, &catalog)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("cannot load the rule to re-check from {}", d.rule.display()))?;
    let rows = crate::table::read_aiter_csv(base_path, &catalog).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (legacy, _) = registry::legacy_rows(rows);
    let base = LatencyMatrix::from_rows(&legacy).map_err(|mut e| {
        e.file = base_path.display().to_string();
        anyhow::anyhow!("{e}")
    })?;
    let ratios: Vec<f64> = recheck_pairs(&legacy).iter().filter_map(|p| p.ratio()).map(|q| (q - 1.0).abs()).collect();
    let (noise_median, noise_source) = match (median(ratios.clone()), args.noise) {
        (_, Some(n)) if n >= 0.0 => (n, "--noise".to_string()),
        (_, Some(n)) => bail!("--noise {n} is negative"),
        (Some(m), None) => (m, format!("{} recheck pairs of the baseline", ratios.len())),
        (None, None) => bail!(
            "{}: the baseline has no recheck pairs, so its noise is unknown; measure it with --recheck-fraction > 0 or pass --noise",
            base_path.display()
        ),
    };
    if args.sample_shapes == 0 {
        bail!("--sample-shapes must be at least 1");
    }
    let default = Candidate::new(catalog.default_alias, 0);
    let sample = sample_cells(&base, &rule, default, args.sample_shapes, args.others, args.sample_seed);
    let n_cells: usize = sample.iter().map(|(_, c)| c.len()).sum();
    eprintln!(
        "drift: re-measuring {n_cells} cells of {} sampled shapes with the {} backend into {} (budget {} s)",
        sample.len(),
        format!("{:?}", args.backend).to_lowercase(),
        d.dataset.display(),
        args.budget_s
    );
    let (device, budget_reached) = measure(args, &sample, &d.dataset, &catalog, started)?;
    let measured_rows = crate::measure::read_journal(&d.dataset, &catalog)?.iter().filter(|r| r.recheck == 0).count();
    let new = if measured_rows == 0 {
        LatencyMatrix::new(&base.gfx, base.cu_num, None, Vec::new(), Vec::new())
    } else {
        super::session::load_matrix(&d.dataset, &catalog)
            .with_context(|| format!("reading the re-measurement {}", d.dataset.display()))?
    };
    let (cells, new_oracles, sum) = compare(&base, &new, &sample, &rule, noise_median, args, d.max_drop);
    let mut problems = sum.problems.clone();
    let unchecked = sum.shapes_measured == 0;
    if unchecked {
        problems
            .push(format!("no sampled shape was measured within the {} s budget: nothing was checked", args.budget_s));
    }
    let fix = format!(
        "re-measure the full dataset on this release (`synth bench --backend {} --out NEW.csv ...`), then regenerate \
         the rule with `synth run --dataset NEW.csv` and commit generated/",
        match args.backend {
            Backend::Harness => "harness",
            Backend::Aiter => "aiter --aiter-dir AITER",
        }
    );
    let report = Report {
        verdict: if unchecked {
            "error".into()
        } else if problems.is_empty() {
            "ok".into()
        } else {
            "drift".into()
        },
        problems: problems.clone(),
        fix: fix.clone(),
        rule: d.rule.display().to_string(),
        baseline: base_path.display().to_string(),
        dataset: d.dataset.display().to_string(),
        backend: format!("{:?}", args.backend).to_lowercase(),
        device,
        noise_median,
        noise_source,
        sigma_ratio: sum.sigma,
        cell_tolerance: sum.tol,
        shapes_sampled: sample.len(),
        shapes_measured: sum.shapes_measured,
        budget_s: args.budget_s,
        budget_reached,
        elapsed_s: started.elapsed().as_secs_f64(),
        rule_cells: sum.rule_cells,
        rule_geomean_ratio: sum.rule_geo,
        rule_aggregate_tolerance: sum.agg_tol,
        rule_fraction_of_oracle_baseline: sum.frac_base,
        rule_fraction_of_oracle_new: sum.frac_new,
        new_oracles,
        cells,
    };
    let md = markdown(&report);
    if let Some(p) = &args.report_md {
        std::fs::write(p, &md).with_context(|| format!("cannot write {}", p.display()))?;
    }
    if let Some(p) = &args.report_json {
        let text = serde_json::to_string_pretty(&report).expect("report serializes");
        std::fs::write(p, text + "\n").with_context(|| format!("cannot write {}", p.display()))?;
    }
    print!("{md}");
    if unchecked {
        bail!("{}; raise --budget-s", problems.join("; "))
    } else if problems.is_empty() {
        Ok(())
    } else {
        Err(DriftDetected(format!("drift detected:\n  - {}\n{fix}", problems.join("\n  - "))).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[arg(long)]
        baseline: Option<PathBuf>,
        #[command(flatten)]
        r: RemeasureArgs,
    }

    fn matrix(cells: &[(u32, i32, f64)]) -> LatencyMatrix {
        let shapes: Vec<Shape> =
            cells.iter().map(|c| Shape::new(c.0, 5120, 5120)).collect::<BTreeSet<_>>().into_iter().collect();
        let cands: Vec<Candidate> =
            cells.iter().map(|c| Candidate::new(c.1, 0)).collect::<BTreeSet<_>>().into_iter().collect();
        let mut m = LatencyMatrix::new("gfx942", 304, None, shapes, cands);
        for &(mv, id, us) in cells {
            let s = m.shape_index(&Shape::new(mv, 5120, 5120)).unwrap();
            let c = m.candidate_index(&Candidate::new(id, 0)).unwrap();
            m.set(s, c, if us > 0.0 { Cell::Ok(us) } else { Cell::Invalid("errRatio".into()) });
        }
        m
    }

    #[test]
    fn tolerances_from_noise_hand_computed() {
        let cat = Catalog::embedded();
        let rule = crate::rule::parse_any(r#"{"root": {"leaf": {"kernel_id": 8}}}"#, &cat).unwrap();
        let args = Cli::parse_from(["x"]).r;
        let base = matrix(&[(1, 0, 10.0), (1, 8, 20.0), (2, 0, 10.0), (2, 8, 20.0), (2, 7, 30.0)]);
        // noise 1%: sigma = 0.01 / 0.6745 = 0.014826; per-cell tolerance max(0.05, 5 sigma) = 0.07413.
        // Rule cells (kernel 8): 1.07 (same) and 1.08 (slower); geomean sqrt(1.07 * 1.08) = 1.07499 >
        // 1 + max(0.03, 5 sigma / sqrt 2 = 0.05242).
        let new = matrix(&[(1, 0, 10.0), (1, 8, 21.4), (2, 0, 8.5), (2, 8, 21.6), (2, 7, -1.0)]);
        let sample = sample_cells(&base, &rule, Candidate::new(7, 0), 2, 5, 0);
        assert_eq!(sample.len(), 2);
        let (cells, oracles, sum) = compare(&base, &new, &sample, &rule, 0.01, &args, 0.05);
        assert!((sum.tol - 0.074130).abs() < 1e-5, "{}", sum.tol);
        assert!((sum.agg_tol - 0.052418).abs() < 1e-5, "{}", sum.agg_tol);
        assert!((sum.rule_geo.unwrap() - (1.07f64 * 1.08).sqrt()).abs() < 1e-9);
        let v = |m: u32, c: &str| cells.iter().find(|x| x.shape.m == m && x.candidate == c).unwrap().verdict.clone();
        assert_eq!(v(1, "#8"), "same");
        assert_eq!(v(2, "#8"), "slower");
        assert_eq!(v(2, "#0"), "faster");
        assert_eq!(v(2, "#7"), "now-fails");
        // The oracle stays kernel 0 (8.5 us): no new oracle.
        assert!(oracles.is_empty());
        assert!(sum.problems.iter().any(|p| p.contains("7.5% slower")), "{:?}", sum.problems);
        // Fraction of oracle: baseline 10/20 on both shapes = 0.5; new sqrt(10/21.4 * 8.5/21.6).
        assert!((sum.frac_base - 0.5).abs() < 1e-9);
        assert!((sum.frac_new - (10.0f64 / 21.4 * 8.5 / 21.6).sqrt()).abs() < 1e-9);
    }
}
