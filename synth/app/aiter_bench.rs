//! `synth bench --backend aiter`: CK's own kernels measured by AITER's tuner
//! ([`synth_measure::measure::aiter_tuner`]), imported into the same journal as the harness backend writes
//! ([`synth_measure::measure::aiter_journal`]). This module checks the options, plans the shapes and reports.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use super::bench_args::{bench_grid, check_plan_path, print_summary, write_plan, BenchArgs};
use synth_core::catalog::Catalog;
use synth_core::table::Shape;
use synth_measure::measure::aiter_journal::{measure_shapes, recheck_shapes};
use synth_measure::measure::aiter_tuner::{shape_of, untuned_csv, AiterDevice, Tuner};
use synth_measure::measure::shard::shard_shapes;

/// `synth bench --backend aiter`.
pub fn bench(args: &BenchArgs) -> Result<()> {
    let catalog = Catalog::embedded();
    refuse_harness_options(args)?;
    let (shapes, rechecks, unrunnable) = plan_shapes(args)?;
    if args.scale.worker_retries.is_some() {
        bail!(
            "--worker-retries applies to --backend harness; with --backend aiter the tuner's own process pool              (--mp) runs the GPUs"
        );
    }
    let (tuner, gpus) = tuner(args)?;
    if let Some(p) = &args.plan_only {
        check_plan_path(p, &args.out, |line| line == "M,N,K", "an untuned CSV")?;
    }
    if args.dry_run || args.plan_only.is_some() {
        return show_plan(args, &shapes, &catalog);
    }
    let device = probe(args, &tuner, gpus.as_deref())?;
    let started = Instant::now();
    let (journal, appended) = measure_shapes(&tuner, &device, &shapes, &rechecks, &args.out, &catalog)?;
    print_summary(&journal, appended, started.elapsed().as_secs_f64());
    let by_lib: BTreeMap<&str, usize> = journal.rows().iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.libtype.as_str()).or_default() += 1;
        m
    });
    outln!("rows by libtype: {}", by_lib.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "));
    if !unrunnable.is_empty() {
        bail!("the other layers were measured; {}", unrunnable.join("; "));
    }
    Ok(())
}

/// Options of the harness backend, refused rather than ignored.
fn refuse_harness_options(args: &BenchArgs) -> Result<()> {
    if let Some(instances) = args.instances.as_deref().filter(|i| *i != "all") {
        bail!(
            "--instances {instances}: AITER's tuner measures every candidate of --libtype; --instances applies to \
             --backend harness"
        );
    }
    if args.family != super::bench_args::Family::Ck || args.configs.is_some() {
        bail!(
            "--family triton and --configs apply to --backend harness (the Triton harness measures the triton \
             family); AITER's tuner measures CK kernels"
        );
    }
    if !args.harness_args.is_empty() {
        bail!("--harness-arg applies to --backend harness; pass tuner options with --tuner-arg");
    }
    Ok(())
}

/// The shapes to tune (this shard's, ordered by layer then M), their recheck shapes, and the layers that
/// cannot run.
fn plan_shapes(args: &BenchArgs) -> Result<(Vec<Shape>, Vec<Shape>, Vec<String>)> {
    let (ms, (layers, unrunnable)) = bench_grid(args)?;
    if !(0.0..=1.0).contains(&args.recheck_fraction) {
        bail!("--recheck-fraction {} is outside [0, 1]", args.recheck_fraction);
    }
    let mut shapes: Vec<Shape> = layers
        .iter()
        .flat_map(|&(n, k)| ms.iter().map(move |&m| Shape::new(m, n, k)))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    shapes.sort_by_key(|s| (s.n, s.k, s.m));
    // Rechecks are chosen on the whole plan, so the shards' rechecks together are the plan's.
    let mut rechecks = recheck_shapes(&shapes, args.recheck_fraction, args.seed);
    if let Some(shard) = args.scale.shard {
        let all = shapes.len();
        shapes = shard_shapes(&shapes, shard);
        let mine: BTreeSet<Shape> = shapes.iter().copied().collect();
        rechecks.retain(|s| mine.contains(s));
        errln!("shard {shard}: {} of the plan's {all} shapes ({} recheck shapes)", shapes.len(), rechecks.len());
    }
    Ok((shapes, rechecks, unrunnable))
}

/// The tuner of the options, on the GPUs `--gpus` names (returned too).
fn tuner(args: &BenchArgs) -> Result<(Tuner, Option<Vec<String>>)> {
    let mut tuner = args
        .aiter
        .tuner(
            &args.python,
            // The tuner's own --splitK tries AITER's levels: `auto` and `aiter` both turn it on.
            args.split_k.unwrap_or(synth_measure::measure::SplitKMode::Auto)
                != synth_measure::measure::SplitKMode::None,
        )?
        .with_silence_limit(Duration::from_secs_f64(args.cell_timeout));
    let gpus = args.scale.gpu_list()?;
    if let Some(g) = &gpus {
        tuner = tuner.on_gpus(g)?;
    }
    Ok((tuner, gpus))
}

/// `--dry-run` (the count of shapes to tune) or `--plan-only` (their untuned CSV), reading the journal
/// only: a torn last line is reported, not cut.
fn show_plan(args: &BenchArgs, shapes: &[Shape], catalog: &Catalog) -> Result<()> {
    let done: BTreeSet<Shape> = if args.out.exists() {
        let contents = synth_measure::measure::journal::read_for_planning(&args.out, catalog, "shape")?;
        contents.rows.iter().map(|(_, r)| r).filter(|r| r.recheck == 0).map(shape_of).collect()
    } else {
        BTreeSet::new()
    };
    let todo: Vec<Shape> = shapes.iter().filter(|s| !done.contains(s)).copied().collect();
    errln!(
        "plan: {} shapes; {} already in {}; {} to tune",
        shapes.len(),
        shapes.len() - todo.len(),
        args.out.display(),
        todo.len()
    );
    if let Some(p) = &args.plan_only {
        write_plan(p, untuned_csv(&todo))?;
        errln!("wrote the untuned CSV of {} shapes to {}", todo.len(), p.display());
    } else {
        outln!("{}", todo.len());
    }
    Ok(())
}

/// The device the tuner sees, checked against `--gpus` and reported.
fn probe(args: &BenchArgs, tuner: &Tuner, gpus: Option<&[String]>) -> Result<AiterDevice> {
    let device = tuner.probe()?;
    if let Some(g) = gpus.filter(|g| g.len() as u32 != device.devices) {
        bail!(
            "--gpus {} names {} GPUs but PyTorch under `{}` sees {} with HIP_VISIBLE_DEVICES={}; name GPUs that              exist",
            g.join(","),
            g.len(),
            args.python.display(),
            device.devices,
            g.join(",")
        );
    }
    errln!(
        "device: {} ({}, {} CUs, {} GPUs; torch {}, HIP {}); AITER {}",
        device.name,
        device.gfx,
        device.cu_num,
        device.devices,
        device.torch,
        device.hip,
        tuner.aiter_dir.display()
    );
    Ok(device)
}
