//! `synth bench`: measure every legacy instance (with split-K where it can matter) on a model's GEMM
//! shapes with the GPU harness, appending to a resumable journal.

use super::aiter_args::Backend;
use super::bench_args::{bench_grid, print_summary};
use crate::catalog::{Catalog, Instance};
use crate::measure::driver::{DeviceInfo, Harness};
use crate::measure::journal::{CellResult, Journal};
use crate::measure::plan::{build_plan, PlanCell, PlanSpec};
use crate::table::Shape;
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Instant;

pub use super::bench_args::BenchArgs;

fn select_instances<'a>(catalog: &'a Catalog, text: &str) -> Result<Vec<&'a Instance>> {
    if text == "all" {
        return Ok(catalog.legacy_candidates().iter().collect());
    }
    text.split(',')
        .map(|s| {
            let id: i32 = s.trim().parse().with_context(|| format!("--instances: {s:?} is not a kernelId"))?;
            if id < 0 {
                bail!("--instances: {id} is an alias; name the candidate id it stands for ({})", catalog.default_alias);
            }
            catalog.legacy_by_id(id).with_context(|| format!("--instances: no legacy instance with kernelId {id}"))
        })
        .collect()
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

pub fn run(args: BenchArgs) -> Result<()> {
    if args.backend == Backend::Aiter {
        return super::aiter_bench::bench(&args);
    }
    let catalog = Catalog::embedded();
    let (ms, (layers, unrunnable)) = bench_grid(&args)?;
    let instances = select_instances(&catalog, &args.instances)?;
    let harness = harness_of(&args);
    let mut device: Option<DeviceInfo> = None;
    let cu_num = match args.cu_num {
        Some(0) => bail!("--cu-num 0: the device's CU/SM count is at least 1 (e.g. 304 for MI300X, 132 for H200)"),
        Some(c) => c,
        None => {
            let d = harness.probe()?;
            eprintln!(
                "device: {} ({}, {} CUs/SMs, {}; torch {}, triton {}; {})",
                d.name, d.gfx, d.cu_num, d.backend, d.torch, d.triton, d.mapping_rule
            );
            let c = d.cu_num;
            device = Some(d);
            c
        }
    };
    let shapes: Vec<Shape> = layers.iter().flat_map(|&(n, k)| ms.iter().map(move |&m| Shape::new(m, n, k))).collect();
    let spec = PlanSpec {
        shapes,
        instances,
        split_k: args.split_k,
        cu_num,
        recheck_fraction: args.recheck_fraction,
        seed: args.seed,
    };
    let plan = build_plan(&spec)?;
    let only_plan = args.dry_run || args.plan_only.is_some();
    // A dry run or plan export reads an existing journal but creates none.
    let journal = if only_plan && !args.out.exists() {
        None
    } else {
        let (j, cut) = Journal::open(&args.out, &catalog)?;
        if cut > 0 {
            eprintln!(
                "journal {}: dropped an incomplete last line ({cut} bytes, an interrupted write)",
                args.out.display()
            );
        }
        Some(j)
    };
    let todo = match &journal {
        Some(j) => crate::measure::remaining(&plan, j),
        None => plan.clone(),
    };
    let n_recheck = plan.iter().filter(|c| c.recheck != 0).count();
    eprintln!(
        "plan: {} cells ({} shapes x {} instances with split-K {:?}, {} rechecks); {} already in {}; {} to measure",
        plan.len(),
        spec.shapes.len(),
        spec.instances.len(),
        args.split_k,
        n_recheck,
        plan.len() - todo.len(),
        args.out.display(),
        todo.len()
    );
    if let Some(path) = &args.plan_only {
        let mut text = String::new();
        for c in &todo {
            text.push_str(&c.to_json_line());
            text.push('\n');
        }
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {} plan cells to {}", todo.len(), path.display());
        return Ok(());
    }
    if args.dry_run {
        println!("{}", todo.len());
        return Ok(());
    }
    let mut journal = journal.expect("opened unless only planning");
    if todo.is_empty() {
        print_summary(&journal, 0, 0.0);
        return Ok(());
    }
    if device.is_none() {
        harness.probe()?;
    }
    measure(&args, &harness, &todo, &mut journal, &unrunnable)
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
    let plan_file = tempfile::Builder::new()
        .prefix("synth-bench-plan")
        .suffix(".jsonl")
        .tempfile()
        .context("cannot create a plan file")?;
    let interactive = std::io::stderr().is_terminal();
    let pb = if interactive { ProgressBar::new(todo.len() as u64) } else { ProgressBar::hidden() };
    pb.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} cells  {per_sec}  ETA {eta}  {msg}")
            .expect("static progress template"),
    );
    let started = Instant::now();
    let total = todo.len();
    let mut count = 0usize;
    let pb_log = pb.clone();
    let result = harness.run(
        todo,
        plan_file.path(),
        journal,
        |row: &CellResult| {
            count += 1;
            pb.inc(1);
            pb.set_message(format!("M={} N={} K={}", row.m, row.n, row.k));
            if !interactive && (count.is_multiple_of(250) || count == total) {
                let el = started.elapsed().as_secs_f64();
                let rate = count as f64 / el.max(1e-9);
                eprintln!(
                    "{count}/{total} cells, {el:.0} s, {rate:.1} cells/s, ETA {:.0} s",
                    (total - count) as f64 / rate.max(1e-9)
                );
            }
        },
        move |line: &str| {
            // Harness progress lines start with '#': under a progress bar only errors and warnings are
            // shown; without a terminal (a log file) every line is kept.
            if !interactive {
                eprintln!("{line}");
            } else if !line.starts_with('#') {
                pb_log.println(line);
            }
        },
    );
    pb.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();
    let measured = journal.rows().len();
    let appended = match &result {
        Ok(n) => *n,
        Err(_) => count,
    };
    print_summary(journal, appended, elapsed);
    result
        .map(|_| ())
        .with_context(|| format!("{} rows are in {} ({} measured this run)", measured, args.out.display(), appended))?;
    if !unrunnable.is_empty() {
        bail!("the other layers were measured; {}", unrunnable.join("; "));
    }
    Ok(())
}
