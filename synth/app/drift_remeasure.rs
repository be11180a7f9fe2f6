//! `synth drift --remeasure`: the CI check for a new ROCm (or CUDA) release. A seeded sample of the
//! committed dataset's cells (per sampled shape: the rule's pick, the oracle's, the default and a few
//! others) is measured again with either backend within a time budget, compared cell by cell with the
//! baseline — with tolerances from the baseline's own recheck noise — and the rule is re-scored against
//! the re-measured oracle. The result is a markdown summary (for a CI job summary), a JSON report and an
//! exit status: 0 no drift, [`EXIT_DRIFT`] drift, 1 an error (2 for bad arguments, from clap).
//!
//! The sample, the comparison and its tolerances (the noise model) are the drift stage's
//! ([`synth_core::drift::remeasure`]), and so is the report ([`synth_core::drift::remeasure_report`]).
//!
//! The budget holds inside a batch too: the harness driver is given the budget's end as its deadline
//! ([`Harness::run_until`]) and kills the harness's process group at it, even in the middle of a cell;
//! what was measured is compared.
//! With `--backend aiter` this runs AITER's tuner (ROCm only; the budget is checked between its batches):
//! not run on an AMD GPU, tested against a fake tuner.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::aiter_args::Backend;
use super::drift_args::{DriftArgs, RemeasureArgs};
use synth_core::catalog::{Candidate, Catalog};
use synth_core::table::{matrix::median, recheck_pairs, registry, LatencyMatrix, Shape};
use synth_measure::measure::aiter_journal::work_dir;
use synth_measure::measure::aiter_tuner::{import_profile, RowMeta, RunFiles};
use synth_measure::measure::driver::DeadlineReached;
use synth_measure::measure::{Harness, Journal, PlanCell};

use synth_core::drift::remeasure::{compare, sample_cells, Roles, Sample, Tolerances};
use synth_core::drift::remeasure_report::{markdown, Report};

/// Exit status of `synth drift` when drift is found.
pub const EXIT_DRIFT: i32 = 3;

/// Returned (as the error) when drift is found; `main` exits with [`EXIT_DRIFT`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DriftDetected(pub String);

/// The harness of `args` (`--seed` the sample seed).
fn harness(args: &RemeasureArgs) -> Harness {
    let mut extra_args = args.harness_args.clone();
    extra_args.push(format!("--seed={}", args.sample_seed));
    Harness {
        python: args.python.clone(),
        script: args.harness.clone(),
        extra_args,
        cell_timeout: Duration::from_secs_f64(args.cell_timeout),
    }
}

/// The harness's device description; a probe that does not answer within --cell-timeout is stopped.
fn probe(args: &RemeasureArgs) -> Result<synth_measure::measure::DeviceInfo> {
    let limit = Duration::from_secs_f64(args.cell_timeout);
    let started = Instant::now();
    harness(args).probe_within(limit).map_err(|e| {
        if started.elapsed() >= limit {
            anyhow::anyhow!(
                "the harness did not describe the device (--probe) within {} s (--cell-timeout) and was stopped",
                limit.as_secs_f64()
            )
        } else {
            e
        }
    })
}

/// The time budget of a re-measurement.
struct Budget {
    started: Instant,
    limit: Duration,
}

impl Budget {
    /// Time left, or None (with a message naming the progress) when it ran out.
    fn left(&self, batch: usize, batches: usize) -> Option<Duration> {
        let left = self.limit.saturating_sub(self.started.elapsed());
        if left.is_zero() {
            errln!(
                "drift: time budget of {} s reached after {:.0} s; {batch} of {batches} batches measured",
                self.limit.as_secs_f64(),
                self.started.elapsed().as_secs_f64()
            );
            return None;
        }
        Some(left)
    }

    /// When the budget runs out.
    fn end(&self) -> Instant {
        self.started + self.limit
    }
}

/// The plan cells of a batch that the journal does not hold yet.
fn batch_cells(
    batch: &[(Shape, BTreeMap<Candidate, Roles>)],
    journal: &Journal,
    catalog: &Catalog,
) -> Result<Vec<PlanCell>> {
    let mut cells = Vec::new();
    for (shape, cands) in batch {
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
    Ok(cells)
}

/// Measures with the harness, batch by batch, each run stopped when the budget runs out. Returns the
/// device label and whether the budget stopped it.
fn measure_harness(run: &Measuring) -> Result<(String, bool)> {
    let Measuring { args, batches, out, catalog, budget } = *run;
    let dev = probe(args)?;
    let (mut journal, _) = Journal::open(out, catalog)?;
    let plan_file = tempfile::Builder::new().prefix("synth-drift-plan").suffix(".jsonl").tempfile()?;
    let stopped = each_batch(batches, budget, |i, batch| {
        let cells = batch_cells(batch, &journal, catalog)?;
        if cells.is_empty() {
            return Ok(false);
        }
        let before = journal.rows().len();
        let deadline = Some(budget.end());
        let run =
            harness(args).run_until(&cells, plan_file.path(), &mut journal, deadline, |_| {}, |line| errln!("{line}"));
        if let Err(e) = run {
            if e.downcast_ref::<DeadlineReached>().is_none() {
                return Err(e);
            }
            errln!(
                "drift: time budget of {} s ran out during batch {} of {}: the harness was stopped after {} of its {} cells",
                budget.limit.as_secs_f64(),
                i + 1,
                batches.len(),
                journal.rows().len() - before,
                cells.len()
            );
            return Ok(true);
        }
        Ok(false)
    })?;
    Ok((dev.name, stopped))
}

/// Runs `step` on each batch (its index, its shapes) while the budget lasts; returns whether the budget
/// stopped the run, before a batch or, when `step` returns true, inside one.
fn each_batch(
    batches: &[Batch],
    budget: &Budget,
    mut step: impl FnMut(usize, &[(Shape, BTreeMap<Candidate, Roles>)]) -> Result<bool>,
) -> Result<bool> {
    for (i, batch) in batches.iter().enumerate() {
        if budget.left(i, batches.len()).is_none() || step(i, batch)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Measures with AITER's tuner, batch by batch while the budget lasts.
fn measure_aiter(run: &Measuring) -> Result<(String, bool)> {
    let Measuring { args, batches, out, catalog, budget } = *run;
    let tuner = args.aiter.tuner(&args.python, true)?.with_silence_limit(Duration::from_secs_f64(args.cell_timeout));
    let dev = tuner.probe()?;
    let (mut journal, _) = Journal::open(out, catalog)?;
    let dir = work_dir(out);
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
        import_profile(&files.profile, &mut journal, &meta, catalog, None)?;
    }
    let stopped = each_batch(batches, budget, |_, batch| {
        let todo: Vec<Shape> = batch
            .iter()
            .map(|(s, _)| *s)
            .filter(|s| !journal.rows().iter().any(|r| (r.m, r.n, r.k) == (s.m, s.n, s.k)))
            .collect();
        if !todo.is_empty() {
            tuner.run(&todo, &files, &mut journal, &meta, catalog)?;
        }
        Ok(false)
    })?;
    Ok((dev.name, stopped))
}

/// Measures the sampled cells into the journal at `out` while the budget lasts. Returns the device label
/// and whether the budget stopped it.
fn measure(
    args: &RemeasureArgs,
    sample: &Sample,
    out: &Path,
    catalog: &Catalog,
    started: Instant,
) -> Result<(String, bool)> {
    let batches: Vec<Batch> = sample.chunks(args.batch_shapes.max(1)).collect();
    let budget = Budget { started, limit: Duration::from_secs_f64(args.budget_s) };
    let run = Measuring { args, batches: &batches, out, catalog, budget: &budget };
    match args.backend {
        Backend::Harness => measure_harness(&run),
        Backend::Aiter => measure_aiter(&run),
    }
}

/// A re-measurement in progress: the options, the sample's batches, the journal's path, the budget.
#[derive(Clone, Copy)]
struct Measuring<'a> {
    args: &'a RemeasureArgs,
    batches: &'a [Batch<'a>],
    out: &'a Path,
    catalog: &'a Catalog,
    budget: &'a Budget,
}

/// Sampled shapes measured together, with the candidates of each.
type Batch<'a> = &'a [(Shape, BTreeMap<Candidate, Roles>)];

/// Refuses a `--dataset` that is the baseline itself (the same file, through any link) or a file with its
/// bytes: every sampled cell would already be "measured" and compared with itself, so the check could
/// never fail.
pub fn check_not_the_baseline(dataset: &Path, baseline: &Path) -> Result<()> {
    if !dataset.exists() {
        return Ok(());
    }
    let shown = |p: &Path| synth_base::sanitize::shown(&p.display().to_string());
    let canon = |p: &Path| std::fs::canonicalize(p).with_context(|| format!("cannot resolve {}", shown(p)));
    let same_file = canon(dataset)? == canon(baseline)?;
    let same_bytes = !same_file && {
        let len = |p: &Path| std::fs::metadata(p).map(|m| m.len()).with_context(|| format!("cannot read {}", shown(p)));
        let read = |p: &Path| {
            synth_base::input::read_table_capped(p, synth_base::input::MAX_TABLE_BYTES, "latency table")
                .with_context(|| format!("cannot read {}", shown(p)))
        };
        len(dataset)? == len(baseline)? && read(dataset)? == read(baseline)?
    };
    if same_file || same_bytes {
        bail!(
            "--dataset {} {} the baseline {}: the re-measurement would find every sampled cell already measured \
             and compare the baseline with itself, so no drift could show; pass a new journal for the \
             re-measurement (a file that does not exist yet, e.g. remeasure.csv)",
            shown(dataset),
            if same_file { "is" } else { "has the same bytes as" },
            shown(baseline)
        );
    }
    Ok(())
}

/// The baseline as a latency matrix (legacy rows) and its noise: the median |ratio - 1| of its recheck
/// pairs, or `--noise`, with where it came from.
fn baseline_and_noise(path: &Path, args: &RemeasureArgs, catalog: &Catalog) -> Result<(LatencyMatrix, f64, String)> {
    let rows = synth_core::table::read_aiter_csv(path, catalog).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (legacy, _) = registry::legacy_rows(rows);
    let base = LatencyMatrix::from_rows(&legacy).map_err(|mut e| {
        e.file = path.display().to_string();
        anyhow::anyhow!("{e}")
    })?;
    let ratios: Vec<f64> = recheck_pairs(&legacy).iter().filter_map(|p| p.ratio()).map(|q| (q - 1.0).abs()).collect();
    let (noise, source) = match (median(ratios.clone()), args.noise) {
        (_, Some(n)) if n >= 0.0 => (n, "--noise".to_string()),
        (_, Some(n)) => bail!("--noise {n} is negative"),
        (Some(m), None) => (m, format!("{} recheck pairs of the baseline", ratios.len())),
        (None, None) => bail!(
            "{}: the baseline has no recheck pairs, so its noise is unknown; measure it with --recheck-fraction > 0 or pass --noise",
            path.display()
        ),
    };
    Ok((base, noise, source))
}

fn backend_name(b: Backend) -> String {
    format!("{b:?}").to_lowercase()
}

/// The tolerances of the comparison, from the options.
fn tolerances(args: &RemeasureArgs, max_drop: f64) -> Tolerances {
    Tolerances {
        cell: args.cell_tolerance,
        noise_k: args.noise_k,
        aggregate: args.aggregate_tolerance,
        new_oracle: args.new_oracle,
        max_drop,
    }
}

/// The journal `--dataset` and the baseline `--baseline` of a re-measurement, checked.
fn inputs(d: &DriftArgs) -> Result<(&Path, &Path)> {
    if let Some(b) = &d.backends.backends {
        bail!(
            "--backends {b} applies to the plain check: --remeasure measures CK cells again; drop --backends, or \
             drop --remeasure to re-score a rule of several backends on new journals of each"
        );
    }
    let dataset = DriftArgs::one("--dataset", &d.dataset, "--remeasure writes one journal")?;
    let base_path = DriftArgs::one("--baseline", &d.baseline, "--remeasure samples the cells of one baseline table")?;
    check_not_the_baseline(dataset, base_path)?;
    Ok((dataset, base_path))
}

/// `synth drift --remeasure`.
pub fn run(d: &DriftArgs) -> Result<()> {
    let args = &d.remeasure;
    let started = Instant::now();
    let catalog = Catalog::embedded();
    let (dataset, base_path) = inputs(d)?;
    let rule = synth_core::rule::load_checked(&d.rule, &catalog)
        .with_context(|| format!("cannot load the rule to re-check from {}", d.rule.display()))?;
    let (base, noise_median, noise_source) = baseline_and_noise(base_path, args, &catalog)?;
    if args.sample_shapes == 0 {
        bail!("--sample-shapes must be at least 1");
    }
    let default = Candidate::new(catalog.default_alias, 0);
    let sample = sample_cells(&base, &rule, default, args.sample_shapes, args.others, args.sample_seed);
    let n_cells: usize = sample.iter().map(|(_, c)| c.len()).sum();
    errln!(
        "drift: re-measuring {n_cells} cells of {} sampled shapes with the {} backend into {} (budget {} s)",
        sample.len(),
        backend_name(args.backend),
        dataset.display(),
        args.budget_s
    );
    let (device, budget_reached) = measure(args, &sample, dataset, &catalog, started)?;
    let new = remeasured(dataset, &base, &catalog)?;
    let (cells, new_oracles, sum) = compare(&base, &new, &sample, &rule, noise_median, &tolerances(args, d.max_drop));
    let unchecked = sum.shapes_measured == 0;
    let mut problems = sum.problems.clone();
    if unchecked {
        problems
            .push(format!("no sampled shape was measured within the {} s budget: nothing was checked", args.budget_s));
    }
    let verdict = if unchecked {
        "error"
    } else if problems.is_empty() {
        "ok"
    } else {
        "drift"
    };
    let report = Report {
        verdict: verdict.into(),
        problems: problems.clone(),
        fix: fix(args.backend),
        rule: d.rule.display().to_string(),
        baseline: base_path.display().to_string(),
        dataset: dataset.display().to_string(),
        backend: backend_name(args.backend),
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
    finish(args, &report)
}

/// Writes the report and prints its summary; an error when nothing was checked or drift was found.
fn finish(args: &RemeasureArgs, report: &Report) -> Result<()> {
    let md = markdown(report);
    super::drift_args::write_reports(args, &md, report)?;
    out!("{md}");
    let problems = &report.problems;
    match report.verdict.as_str() {
        "error" => bail!("{}; raise --budget-s", problems.join("; ")),
        "ok" => Ok(()),
        _ => Err(DriftDetected(format!("drift detected:\n  - {}\n{}", problems.join("\n  - "), report.fix)).into()),
    }
}

/// The re-measured journal as a latency matrix (empty when it holds no first measurement yet).
fn remeasured(path: &Path, base: &LatencyMatrix, catalog: &Catalog) -> Result<LatencyMatrix> {
    let measured_rows = synth_measure::measure::read_journal(path, catalog)?.iter().filter(|r| r.recheck == 0).count();
    if measured_rows == 0 {
        return Ok(LatencyMatrix::new(&base.gfx, base.cu_num, None, Vec::new(), Vec::new()));
    }
    super::session::load_matrix(path, catalog).with_context(|| format!("reading the re-measurement {}", path.display()))
}

/// What to do about drift.
fn fix(backend: Backend) -> String {
    format!(
        "re-measure the full dataset on this release (`synth bench --backend {} --out NEW.csv ...`), then regenerate \
         the rule with `synth run --dataset NEW.csv` and commit generated/",
        match backend {
            Backend::Harness => "harness",
            Backend::Aiter => "aiter --aiter-dir AITER",
        }
    )
}
