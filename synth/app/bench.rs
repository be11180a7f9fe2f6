//! `synth bench`: measure every legacy instance (with split-K where it can matter), or with `--family
//! triton` every config of a set of the block-FP8 Triton family, on a model's GEMM shapes with the GPU
//! harness, appending to a resumable journal.

use super::aiter_args::Backend;
use super::bench_args::{bench_grid, check_plan_path, parse_configs, print_summary, write_plan, Family};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Instant;
use synth_core::catalog::{Catalog, Instance};
use synth_core::table::Shape;
use synth_measure::measure::driver::{DeviceInfo, Harness, PROBE_LIMIT};
use synth_measure::measure::journal::{check_resumable, read_for_planning, CellResult, ExpectedDevice, Journal};
use synth_measure::measure::plan::{build_plan, build_triton_plan, PlanCell, PlanSpec, SplitKMode, TritonPlanSpec};
use synth_measure::measure::pool::{probe_all, Pool, PoolEvent, DEFAULT_RETRIES};
use synth_measure::measure::shard::{deal_by_shape, shard_plan};

use super::bench_args::BenchArgs;

fn select_instances<'a>(catalog: &'a Catalog, text: &str) -> Result<Vec<&'a Instance>> {
    if text == "all" {
        return Ok(catalog.legacy_candidates().iter().collect());
    }
    let mut seen: Vec<i32> = Vec::new();
    text.split(',')
        .map(|s| {
            let id: i32 = s.trim().parse().with_context(|| format!("--instances: {s:?} is not a kernelId"))?;
            if id < 0 {
                bail!("--instances: {id} is an alias; name the candidate id it stands for ({})", catalog.default_alias);
            }
            if seen.contains(&id) {
                bail!("--instances: kernelId {id} is named twice; name each instance once");
            }
            seen.push(id);
            catalog.legacy_by_id(id).with_context(|| format!("--instances: no legacy instance with kernelId {id}"))
        })
        .collect()
}

/// Whether `line` is a line of a plan file `--plan-only` writes (a JSON object naming a cell).
fn is_plan_line(line: &str) -> bool {
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(line)
        .is_ok_and(|o| ["M", "N", "K", "kernelId", "splitK", "kernelName"].iter().all(|k| o.contains_key(*k)))
}

/// What a run expects of the journal's device: the harness's answer to the probe.
fn expected_of(d: &DeviceInfo) -> ExpectedDevice {
    ExpectedDevice {
        name: Some(d.name.clone()),
        gfx: Some(d.gfx.clone()),
        cu_num: Some(d.cu_num),
        backend: Some(d.backend.clone()),
        source: "as the harness reports the device".to_string(),
    }
}

fn harness_of(args: &BenchArgs) -> Harness {
    let mut extra = args.harness_args.clone();
    extra.push(format!("--seed={}", args.seed));
    Harness {
        python: args.python.clone(),
        script: args.harness.clone(),
        extra_args: extra,
        cell_timeout: std::time::Duration::from_secs_f64(args.cell_timeout),
    }
}

/// `synth bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    if args.backend == Backend::Aiter {
        return super::aiter_bench::bench(&args);
    }
    if let Some(flag) = args.aiter.given() {
        bail!(
            "{flag} is an option of the AITER tuner and applies to --backend aiter; the harness backend does not use \
             it: drop it, or add --backend aiter"
        );
    }
    let catalog = Catalog::embedded();
    let (ms, (layers, unrunnable)) = bench_grid(&args)?;
    let harness = harness_of(&args);
    let gpus = args.scale.gpu_list()?;
    if gpus.is_none() && args.scale.worker_retries.is_some() {
        bail!("--worker-retries applies to --gpus (several GPU workers); one worker stops at its first failure");
    }
    if let Some(path) = &args.plan_only {
        check_plan_path(path, &args.out, is_plan_line, "a plan file")?;
    }
    let shapes: Vec<Shape> = layers.iter().flat_map(|&(n, k)| ms.iter().map(move |&m| Shape::new(m, n, k))).collect();
    // Repeats in --m-set or --shapes are planned once.
    let n_shapes = shapes.iter().collect::<std::collections::HashSet<_>>().len();
    let planned = match args.family {
        Family::Ck => ck_plan(&args, &catalog, shapes, &harness, gpus.as_deref())?,
        Family::Triton => triton_plan(&args, shapes)?,
    };
    let plan = shard(&args, planned.cells);
    let (journal, todo) = open_journal(&args, &plan, &catalog, &planned.expected)?;
    let n_recheck = plan.iter().filter(|c| c.recheck != 0).count();
    errln!(
        "plan: {} cells ({} shapes x {}, {} rechecks); {} already in {}; {} to measure",
        plan.len(),
        if args.scale.shard.is_some() { shape_count(&plan) } else { n_shapes },
        planned.what,
        n_recheck,
        plan.len() - todo.len(),
        synth_base::sanitize::shown_path(&args.out),
        todo.len()
    );
    if let Some(path) = &args.plan_only {
        return write_plan_cells(path, &todo);
    }
    if let Some(gpus) = &gpus {
        report_shares(gpus, &todo);
    }
    if args.dry_run {
        outln!("{}", todo.len());
        return Ok(());
    }
    let mut journal = journal.expect("opened unless only planning");
    if todo.is_empty() {
        print_summary(&journal, 0, 0.0);
        return Ok(());
    }
    let result = probe_and_measure(&args, &harness, gpus, planned.device, &todo, &mut journal, &unrunnable);
    if result.is_err() {
        // A failed first run leaves no journal behind (one with rows is kept).
        journal.discard_if_unused();
    }
    result
}

/// A plan: its cells, what it measures (for the plan line), the device the journal must be of, and the
/// device when planning probed it.
struct Planned {
    cells: Vec<PlanCell>,
    what: String,
    expected: ExpectedDevice,
    device: Option<DeviceInfo>,
}

/// The CK plan: the instances of `--instances` with the split-K rule, over the device's CU count
/// (`--cu-num`, else the harness's probe).
fn ck_plan(
    args: &BenchArgs,
    catalog: &Catalog,
    shapes: Vec<Shape>,
    harness: &Harness,
    gpus: Option<&[String]>,
) -> Result<Planned> {
    if args.configs.is_some() {
        bail!(
            "--configs names configs of the triton family: add --family triton, or give CK kernelIds with --instances"
        );
    }
    let instances = select_instances(catalog, args.instances.as_deref().unwrap_or("all"))?;
    let split_k = args.split_k.unwrap_or(SplitKMode::Auto);
    let (cu_num, expected, device) = match args.cu_num {
        Some(0) => bail!("--cu-num 0: the device's CU/SM count is at least 1 (e.g. 304 for MI300X, 132 for H200)"),
        Some(c) => {
            let expected = ExpectedDevice {
                cu_num: Some(c),
                source: format!("as --cu-num {c} plans it"),
                ..ExpectedDevice::default()
            };
            (c, expected, None)
        }
        None => {
            let d = probe(harness, gpus)?;
            (d.cu_num, expected_of(&d), Some(d))
        }
    };
    let spec =
        PlanSpec { shapes, instances, split_k, cu_num, recheck_fraction: args.recheck_fraction, seed: args.seed };
    let what = format!("{} instances with split-K {}", spec.instances.len(), split_mode_name(split_k));
    if let Some(line) = synth_measure::measure::plan::aiter_refusals(&spec).describe() {
        errln!("{line}");
    }
    Ok(Planned { cells: build_plan(&spec)?, what, expected, device })
}

/// The triton plan: the configs of `--configs` at split-K 0 (the CK options refused).
fn triton_plan(args: &BenchArgs, shapes: Vec<Shape>) -> Result<Planned> {
    if let Some(i) = &args.instances {
        bail!("--instances {i} names CK kernelIds; with --family triton name the configs with --configs");
    }
    if let Some(mode @ (SplitKMode::Auto | SplitKMode::Aiter)) = args.split_k {
        bail!(
            "--split-k {}: the triton kernel has no split-K; leave --split-k out (or give none) with --family \
             triton",
            split_mode_name(mode)
        );
    }
    if let Some(c) = args.cu_num {
        bail!(
            "--cu-num {c} is read by the CK split-K rule; --family triton plans every config at split-K 0 \
             without it (a dry run needs no GPU): leave it out"
        );
    }
    let configs = parse_configs(args.configs.as_deref())?;
    let distinct = configs.iter().collect::<std::collections::BTreeSet<_>>().len();
    let spec = TritonPlanSpec { shapes, configs, recheck_fraction: args.recheck_fraction, seed: args.seed };
    let what = format!("{distinct} triton configs, no split-K");
    Ok(Planned { cells: build_triton_plan(&spec)?, what, expected: ExpectedDevice::default(), device: None })
}

/// This host's share of the plan under `--shard`.
fn shard(args: &BenchArgs, plan: Vec<PlanCell>) -> Vec<PlanCell> {
    let Some(shard) = args.scale.shard else { return plan };
    let part = shard_plan(&plan, shard);
    errln!(
        "shard {shard}: {} of the plan's {} cells ({} of {} shapes, dealt by shape)",
        part.len(),
        plan.len(),
        shape_count(&part),
        shape_count(&plan)
    );
    part
}

/// The journal (opened, unless only planning) and the plan cells it does not hold yet. A dry run or plan
/// export only reads the journal: it creates none, takes no lock, cuts no torn line.
fn open_journal(
    args: &BenchArgs,
    plan: &[PlanCell],
    catalog: &Catalog,
    expected: &ExpectedDevice,
) -> Result<(Option<Journal>, Vec<PlanCell>)> {
    if args.dry_run || args.plan_only.is_some() {
        let done: std::collections::HashSet<_> = if args.out.exists() {
            let contents = read_for_planning(&args.out, catalog, "cell")?;
            check_resumable(&args.out, contents.rows.first().map(|(l, r)| (*l, r)), expected)?;
            contents.rows.iter().map(|(_, r)| r.key()).collect()
        } else {
            Default::default()
        };
        return Ok((None, plan.iter().filter(|c| !done.contains(&c.key())).cloned().collect()));
    }
    let (j, cut) = Journal::open(&args.out, catalog)?;
    if cut > 0 {
        errln!(
            "journal {}: dropped an incomplete last line ({cut} bytes, an interrupted write)",
            synth_base::sanitize::shown_path(&args.out)
        );
    }
    if let Err(e) = check_resumable(&args.out, j.first_read(), expected) {
        j.discard_if_unused();
        return Err(e);
    }
    let todo = synth_measure::measure::remaining(plan, &j);
    Ok((Some(j), todo))
}

/// `--plan-only`: the cells to measure as plan lines.
fn write_plan_cells(path: &std::path::Path, todo: &[PlanCell]) -> Result<()> {
    let mut text = String::new();
    for c in todo {
        text.push_str(&c.to_json_line());
        text.push('\n');
    }
    write_plan(path, text)?;
    errln!("wrote {} plan cells to {}", todo.len(), synth_base::sanitize::shown_path(path));
    Ok(())
}

/// Each GPU's share of the cells to measure.
fn report_shares(gpus: &[String], todo: &[PlanCell]) {
    let shares = deal_by_shape(todo, &vec![0; gpus.len()]);
    let text: Vec<String> = gpus
        .iter()
        .zip(&shares)
        .map(|(g, cells)| format!("GPU {g}: {} cells ({} shapes)", cells.len(), shape_count(cells)))
        .collect();
    errln!("workers: {}", text.join(", "));
}

/// The early check for Python, PyTorch and the GPU(s) where the plan did not probe already (--cu-num or
/// --family triton), the journal's device checked against the harness's, then the measuring.
fn probe_and_measure(
    args: &BenchArgs,
    harness: &Harness,
    gpus: Option<Vec<String>>,
    device: Option<DeviceInfo>,
    todo: &[PlanCell],
    journal: &mut Journal,
    unrunnable: &[String],
) -> Result<()> {
    let device = match (device, &gpus, args.family) {
        (Some(d), _, _) => d,
        // A triton plan shows the device here.
        (None, _, Family::Triton) => probe(harness, gpus.as_deref())?,
        (None, None, Family::Ck) => harness.probe()?,
        (None, Some(g), Family::Ck) => probe_all(harness, g, PROBE_LIMIT)?,
    };
    check_resumable(&args.out, journal.first_read(), &expected_of(&device))?;
    journal.expect_device(expected_of(&device));
    match gpus {
        None => measure(args, harness, todo, journal, unrunnable),
        Some(gpus) => {
            let pool = Pool { harness, gpus, retries: args.scale.worker_retries.unwrap_or(DEFAULT_RETRIES) };
            measure_on_gpus(args, &pool, todo, journal, unrunnable)
        }
    }
}

/// Distinct shapes of `cells`.
fn shape_count(cells: &[PlanCell]) -> usize {
    cells.iter().map(|c| c.shape()).collect::<std::collections::HashSet<_>>().len()
}

/// The device description: the harness's probe, or with `--gpus` every GPU's (they must agree); printed.
fn probe(harness: &Harness, gpus: Option<&[String]>) -> Result<DeviceInfo> {
    let d = match gpus {
        None => harness.probe()?,
        Some(g) => probe_all(harness, g, PROBE_LIMIT)?,
    };
    errln!(
        "device: {} ({}, {} CUs/SMs, {}; torch {}, triton {}; {}){}",
        d.name,
        d.gfx,
        d.cu_num,
        d.backend,
        d.torch,
        d.triton,
        d.mapping_rule,
        gpus.map(|g| format!(" on GPUs {}", g.join(", "))).unwrap_or_default()
    );
    Ok(d)
}

/// The progress of a measurement: a bar on a terminal, else a line every 250 cells, with the rate and ETA.
struct Progress {
    pb: ProgressBar,
    interactive: bool,
    started: Instant,
    total: usize,
    count: usize,
}

impl Progress {
    fn new(total: usize) -> Progress {
        let interactive = std::io::stderr().is_terminal();
        let pb = if interactive { ProgressBar::new(total as u64) } else { ProgressBar::hidden() };
        pb.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} cells  {per_sec}  ETA {eta}  {msg}")
                .expect("static progress template"),
        );
        Progress { pb, interactive, started: Instant::now(), total, count: 0 }
    }

    /// One row measured: `message` on the bar; `workers` closes the periodic line.
    fn row(&mut self, message: String, workers: &str) {
        let (count, total) = (self.count + 1, self.total);
        self.count = count;
        self.pb.inc(1);
        self.pb.set_message(message);
        if !self.interactive && (count.is_multiple_of(250) || count == total) {
            let el = self.started.elapsed().as_secs_f64();
            let rate = count as f64 / el.max(1e-9);
            errln!(
                "{count}/{total} cells, {el:.0} s, {rate:.1} cells/s, ETA {:.0} s{workers}",
                (total - count) as f64 / rate.max(1e-9)
            );
        }
    }

    /// What prints a harness line after `prefix`: progress lines start with '#', so under a progress bar
    /// only errors and warnings are shown; without a terminal (a log file) every line is kept.
    fn logger(&self, prefix: String) -> impl Fn(&str) + Send + 'static {
        let (pb, interactive) = (self.pb.clone(), self.interactive);
        move |line: &str| {
            if !interactive {
                errln!("{prefix}{line}");
            } else if !line.starts_with('#') {
                pb.println(format!("{prefix}{line}"));
            }
        }
    }

    /// The bar cleared and the journal's summary printed; `result` (the rows appended, or the error, with
    /// `what` of the rows saying where they are), then the layers that could not run, as the outcome.
    fn finish(
        self,
        journal: &Journal,
        result: Result<usize>,
        what: impl FnOnce(usize, usize) -> String,
        unrunnable: &[String],
    ) -> Result<()> {
        self.pb.finish_and_clear();
        let elapsed = self.started.elapsed().as_secs_f64();
        let measured = journal.rows().len();
        let appended = match &result {
            Ok(n) => *n,
            Err(_) => self.count,
        };
        print_summary(journal, appended, elapsed);
        result.map(|_| ()).with_context(|| what(measured, appended))?;
        if !unrunnable.is_empty() {
            bail!("the other layers were measured; {}", unrunnable.join("; "));
        }
        Ok(())
    }
}

/// [`measure`] over the GPU workers of `pool`: one progress bar (or a line every 250 cells) and ETA for the
/// whole plan, each worker failure and where its cells went.
fn measure_on_gpus(
    args: &BenchArgs,
    pool: &Pool,
    todo: &[PlanCell],
    journal: &mut Journal,
    unrunnable: &[String],
) -> Result<()> {
    let mut progress = Progress::new(todo.len());
    let workers = pool.gpus.len();
    let mut alive = workers;
    let result = pool.run(todo, journal, |ev| match ev {
        PoolEvent::Started { gpu, cells, shapes } => {
            if !progress.interactive {
                let s = if shapes == 1 { "" } else { "s" };
                errln!("GPU {gpu}: harness started on {cells} cells ({shapes} shape{s})");
            }
        }
        PoolEvent::Row { row, .. } => {
            let message = format!("{alive}/{workers} GPUs  M={} N={} K={}", row.m, row.n, row.k);
            progress.row(message, &format!(" ({alive} of {workers} GPU workers)"));
        }
        PoolEvent::Log { gpu, line } => progress.logger(format!("GPU {gpu}| "))(line),
        PoolEvent::Failed { gpu, error, moved, to } => {
            alive -= 1;
            let dest: Vec<String> = to.iter().map(|(g, n)| format!("GPU {g} ({n})")).collect();
            let whereto = if dest.is_empty() {
                "no worker is left".to_string()
            } else {
                format!("re-dealt to {}", dest.join(", "))
            };
            let line = format!("GPU {gpu} failed: {error}; its {moved} unfinished cells: {whereto}");
            if progress.interactive {
                progress.pb.println(line)
            } else {
                errln!("{line}")
            }
        }
    });
    let out = args.out.display();
    let what =
        |measured, appended| format!("{measured} rows are in {out} ({appended} measured this run on {workers} GPUs)");
    progress.finish(journal, result, what, unrunnable)
}

/// Measures `todo` with the harness into `journal`, with a progress bar on a terminal (a line every 250
/// cells otherwise), then prints the journal's summary.
fn measure(
    args: &BenchArgs,
    harness: &Harness,
    todo: &[PlanCell],
    journal: &mut Journal,
    unrunnable: &[String],
) -> Result<()> {
    let plan_file = synth_measure::measure::auxfile::plan_file()?;
    let mut progress = Progress::new(todo.len());
    let log = progress.logger(String::new());
    let result = harness.run(
        todo,
        plan_file.path(),
        journal,
        |row: &CellResult| progress.row(format!("M={} N={} K={}", row.m, row.n, row.k), ""),
        log,
    );
    let out = args.out.display();
    let what = |measured, appended| format!("{measured} rows are in {out} ({appended} measured this run)");
    progress.finish(journal, result, what, unrunnable)
}

/// The mode as the command line spells it.
fn split_mode_name(mode: SplitKMode) -> &'static str {
    match mode {
        SplitKMode::Auto => "auto",
        SplitKMode::Aiter => "aiter",
        SplitKMode::None => "none",
    }
}
