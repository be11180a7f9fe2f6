//! `synth bench --backend aiter`: CK's own kernels measured by AITER's tuner ([`super::aiter_tuner`]),
//! imported into the same journal as the harness backend writes.
//!
//! The untuned CSV of the shapes not yet in the journal goes into a work directory next to the journal
//! (`<out>.aiter/`), where the tuner's tune, profile and log files are kept too: CK legacy and CK-tile
//! rows, failures and rows over the errRatio tolerance as `fail:<reason>` rows. A killed run loses at most
//! the batch in flight; the next run imports what the profile file holds and tunes the rest.
//!
//! Not run on an AMD GPU: tested against a fake tuner written from the real script's argument parser and
//! output (tests/fixtures/fake_aiter/).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rand::seq::index::sample;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::aiter_tuner::{
    import_profile, shape_in_journal, shape_of, untuned_csv, AiterDevice, RowMeta, RunFiles, Tuner,
};
use super::bench_args::{bench_grid, check_plan_path, print_summary, write_plan, BenchArgs};
use crate::catalog::Catalog;
use crate::measure::journal::{check_resumable, ExpectedDevice, Journal};
use crate::measure::shard::shard_shapes;
use crate::table::Shape;

/// The `backend` column: the tuner and the checkout's git commit when it is a git work tree.
fn backend_label(aiter_dir: &Path) -> String {
    let mut git = Command::new("git");
    git.arg("-C").arg(aiter_dir).args(["rev-parse", "--short=10", "HEAD"]);
    let commit = crate::process::run_capture(&mut git, Duration::from_secs(60), 4096)
        .ok()
        .filter(|o| o.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit()));
    match commit {
        Some(c) => format!("aiter-tuner {c}"),
        None => "aiter-tuner".to_string(),
    }
}

/// The shapes of the recheck runs: a seeded `fraction` of `shapes` (at least one when the fraction is
/// positive), in the given order.
pub fn recheck_shapes(shapes: &[Shape], fraction: f64, seed: u64) -> Vec<Shape> {
    if fraction <= 0.0 || shapes.is_empty() {
        return Vec::new();
    }
    let n = ((shapes.len() as f64 * fraction).round() as usize).clamp(1, shapes.len());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut picks = sample(&mut rng, shapes.len(), n).into_vec();
    picks.sort_unstable();
    picks.into_iter().map(|i| shapes[i]).collect()
}

/// The work directory of a journal: `<out>.aiter/`.
pub fn work_dir(out: &Path) -> PathBuf {
    let mut name = out.file_name().map(|s| s.to_os_string()).unwrap_or_default();
    name.push(".aiter");
    out.with_file_name(name)
}

/// Measures `shapes` (main pass), then `rechecks` (a recheck pass; [`recheck_shapes`] of the plan's
/// shapes) into the journal at `out`. Returns the rows appended.
pub fn measure_shapes(
    tuner: &Tuner,
    device: &AiterDevice,
    shapes: &[Shape],
    rechecks: &[Shape],
    out: &Path,
    catalog: &Catalog,
) -> Result<(Journal, usize)> {
    let (mut journal, cut) = Journal::open(out, catalog)?;
    if cut > 0 {
        errln!("journal {}: dropped an incomplete last line ({cut} bytes, an interrupted write)", out.display());
    }
    match fill_journal(tuner, device, shapes, rechecks, out, catalog, &mut journal) {
        Ok(appended) => Ok((journal, appended)),
        Err(e) => {
            // A failed first run leaves no journal behind (one with rows is kept).
            journal.discard_if_unused();
            Err(e)
        }
    }
}

/// [`measure_shapes`] into the open `journal`; returns the rows appended.
fn fill_journal(
    tuner: &Tuner,
    device: &AiterDevice,
    shapes: &[Shape],
    rechecks: &[Shape],
    out: &Path,
    catalog: &Catalog,
    journal: &mut Journal,
) -> Result<usize> {
    let expected = ExpectedDevice {
        name: Some(device.name.clone()),
        gfx: Some(device.gfx.clone()),
        cu_num: Some(device.cu_num),
        backend: None,
        source: "as PyTorch reports the device".to_string(),
    };
    check_resumable(out, journal.first_read(), &expected)?;
    journal.expect_device(expected);
    let dir = work_dir(out);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        bail!(
            "the tuner's work directory {} is not a directory of its own (a link?); remove it or pass another --out",
            dir.display()
        );
    }
    let meta = RowMeta {
        device: device.name.clone(),
        backend: backend_label(&tuner.aiter_dir),
        timing: format!(
            "aiter run_perftest warmup={} iters={}",
            tuner.warmup.map_or("5".to_string(), |w| w.to_string()),
            tuner.iters.unwrap_or(101)
        ),
        reps: tuner.iters.unwrap_or(101),
        recheck: 0,
        err_ratio: tuner.err_ratio,
    };
    let mut appended = 0;
    for (recheck, list, prefix) in [(0u8, shapes.to_vec(), ""), (1u8, rechecks.to_vec(), "recheck-")] {
        let files = RunFiles::in_dir(&dir, prefix);
        let meta = RowMeta { recheck, ..meta.clone() };
        // What an interrupted run left in the profile file is imported before deciding what to tune.
        if files.profile.exists() {
            let s = import_profile(&files.profile, journal, &meta, catalog, None)?;
            if s.appended > 0 {
                errln!(
                    "aiter: imported {} rows of {} shapes left in {} by an earlier run",
                    s.appended,
                    s.shapes.len(),
                    files.profile.display()
                );
            }
            appended += s.appended;
        }
        let todo: Vec<Shape> = list.iter().filter(|s| !shape_in_journal(journal, s, recheck)).copied().collect();
        let what = if recheck == 1 { "recheck shapes" } else { "shapes" };
        errln!(
            "aiter: {} {what}; {} already in {}; {} to tune",
            list.len(),
            list.len() - todo.len(),
            out.display(),
            todo.len()
        );
        if todo.is_empty() {
            continue;
        }
        let s = tuner.run(&todo, &files, journal, &meta, catalog)?;
        if s.other_libtype > 0 {
            errln!(
                "aiter: {} asm/opus rows left out (the catalog has CK legacy and CK-tile instances only)",
                s.other_libtype
            );
        }
        appended += s.appended;
    }
    Ok(appended)
}

/// `synth bench --backend aiter`.
pub fn bench(args: &BenchArgs) -> Result<()> {
    let catalog = Catalog::embedded();
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
    if args.scale.worker_retries.is_some() {
        bail!(
            "--worker-retries applies to --backend harness; with --backend aiter the tuner's own process pool              (--mp) runs the GPUs"
        );
    }
    let mut tuner = Tuner::from_args(
        &args.python,
        &args.aiter,
        // The tuner's own --splitK tries AITER's levels: `auto` and `aiter` both turn it on.
        args.split_k.unwrap_or(crate::measure::SplitKMode::Auto) != crate::measure::SplitKMode::None,
    )?
    .with_silence_limit(Duration::from_secs_f64(args.cell_timeout));
    let gpus = args.scale.gpu_list()?;
    if let Some(g) = &gpus {
        tuner = tuner.on_gpus(g)?;
    }
    if let Some(p) = &args.plan_only {
        check_plan_path(p, &args.out, |line| line == "M,N,K", "an untuned CSV")?;
    }
    if args.dry_run || args.plan_only.is_some() {
        // Only read: a torn last line is reported, not cut.
        let done: BTreeSet<Shape> = if args.out.exists() {
            let contents = crate::measure::journal::read_for_planning(&args.out, &catalog, "shape")?;
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
        return Ok(());
    }
    let device = tuner.probe()?;
    if let Some(g) = gpus.as_ref().filter(|g| g.len() as u32 != device.devices) {
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

#[cfg(test)]
mod tests {
    use super::super::aiter_args::TunerLibtype;
    use super::super::aiter_tuner::ImportStats;
    use super::*;
    use crate::measure::journal::CellResult;

    fn meta() -> RowMeta {
        RowMeta {
            device: "MI300X".into(),
            backend: "aiter-tuner".into(),
            timing: "t".into(),
            reps: 101,
            recheck: 0,
            err_ratio: 0.05,
        }
    }

    const HEADER: &str = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio\n";

    fn import(profile: &str) -> (Result<ImportStats>, Vec<CellResult>) {
        let dir = tempfile::tempdir().unwrap();
        let cat = Catalog::embedded();
        let (mut j, _) = Journal::open(&dir.path().join("j.csv"), &cat).unwrap();
        let p = dir.path().join("profile.csv");
        std::fs::write(&p, profile).unwrap();
        let r = import_profile(&p, &mut j, &meta(), &cat, None);
        (r, j.rows().to_vec())
    }

    #[test]
    fn pandas_formatting_failures_and_other_libtypes() {
        let cat = Catalog::embedded();
        let ck3 = &cat.legacy_by_id(3).unwrap().name;
        let tile1 = &cat.cktile_by_id("gfx942", 1).unwrap().name;
        let text = format!(
            "{HEADER}gfx942,304,16,5120,5120,ck,3.0,1.0,12.5,{ck3},2.1,300.0,0.0\n\
             gfx942,304,16,5120,5120,ck,4,0,-1.0,None,0.0,0.0,1.0\n\
             gfx942,304,16,5120,5120,cktile,1,0,inf,None,0,0,1.0\n\
             gfx942,304,16,5120,5120,cktile,2,0,9.5,{},1.0,1.0,0.25\n\
             gfx942,304,16,5120,5120,asm,0,1,8.0,_ZN5aiter17fp8gemm_blockscaleE,1.0,1.0,0.0\n\
             gfx942,304,16,5120,5120,ck,5,0,7.",
            cat.cktile_by_id("gfx942", 2).unwrap().name
        );
        let (r, rows) = import(&text);
        let s = r.unwrap();
        // The unterminated last line (a write in progress) waits for the next import.
        assert_eq!((s.appended, s.other_libtype), (4, 1));
        assert_eq!(
            (rows[0].kernel_id, rows[0].split_k, rows[0].us, rows[0].status.to_string()),
            (3, 1, Some(12.5), "ok".into())
        );
        assert_eq!(&rows[1].kernel_name, &cat.legacy_by_id(4).unwrap().name);
        assert!(rows[1].us.is_none() && rows[1].status.to_string().contains("us=-1"));
        assert_eq!(&rows[2].kernel_name, tile1);
        assert!(rows[2].status.to_string().contains("us=inf") && rows[2].tflops.is_none());
        assert_eq!(rows[3].status.to_string(), "fail:errRatio 0.25 > 0.05 (wrong output)");
        assert_eq!(rows[3].us, Some(9.5));
        assert!(rows.iter().all(|r| r.validate().is_ok()));
    }

    #[test]
    fn bad_rows_name_file_line_and_value() {
        let cat = Catalog::embedded();
        let ck3 = &cat.legacy_by_id(3).unwrap().name;
        for (row, want) in [
            (format!("gfx942,304,16,5120,5120,ck,3,0,12.5,{ck3}_x,1,1,0.0\n"), ":2: column kernelName"),
            (format!("gfx942,304,16,5120,5120,ck,4,0,12.5,{ck3},1,1,0.0\n"), "is not ck kernelId 4"),
            ("gfx942,304,16,5120,5120,ck,40,0,-1,None,0,0,1.0\n".to_string(), "ck kernelId 40 has no catalog instance"),
            (format!("gfx942,304,16,5120,5120,ck,3,0,Null,{ck3},1,1,0.0\n"), "column us = \"Null\""),
            (format!("gfx942,304,16,5120,5120,ck,3,0,0,{ck3},1,1,0.0\n"), "expected a positive time"),
            (format!("gfx942,304,16,5120,5120,ck,3.5,0,1,{ck3},1,1,0.0\n"), "column kernelId = \"3.5\""),
            (format!("gfx942,304,16,5120,5120,ck,3,0,1,{ck3},1,1,1.5\n"), "column errRatio"),
            (
                "gfx90a,304,16,5120,5120,cktile,1,0,1,None,1,1,0.0\n".to_string(),
                "no CK-tile instances for this architecture",
            ),
        ] {
            let (r, rows) = import(&format!("{HEADER}{row}"));
            let e = format!("{:#}", r.unwrap_err());
            assert!(e.contains("profile.csv:2") && e.contains(want), "{row}: {e}");
            assert!(rows.is_empty());
        }
        let (r, _) = import("M,N,K\n1,2,3\n");
        assert!(format!("{:#}", r.unwrap_err()).contains("has no gfx column"));
    }

    #[test]
    fn tuner_command_line() {
        let t = Tuner {
            python: "python3".into(),
            aiter_dir: "/aiter".into(),
            libtype: TunerLibtype::Cktile,
            split_k: false,
            mp: None,
            err_ratio: 0.1,
            warmup: None,
            iters: Some(50),
            timeout: None,
            block_per_cu: vec![1, 2],
            batch: 3,
            extra_args: vec!["--shape_grouped".into()],
            silence_limit: Duration::from_secs(60),
            visible_devices: None,
        };
        let f = RunFiles::in_dir(Path::new("/w"), "recheck-");
        assert_eq!(
            t.args(&f).join(" "),
            "csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py -i /w/recheck-untuned.csv -o /w/recheck-tuned.csv \
             -o2 /w/recheck-profile.csv --libtype cktile --errRatio 0.1 --batch 3 --iters 50 --blockPerCu 1 2 --shape_grouped"
        );
        assert_eq!(work_dir(Path::new("out/my.csv")), PathBuf::from("out/my.csv.aiter"));
        let shapes: Vec<Shape> = (1..=10).map(|m| Shape::new(m, 5120, 5120)).collect();
        assert_eq!(recheck_shapes(&shapes, 0.2, 7).len(), 2);
        assert_eq!(recheck_shapes(&shapes, 0.01, 7).len(), 1);
        assert!(recheck_shapes(&shapes, 0.0, 7).is_empty());
        assert_eq!(recheck_shapes(&shapes, 0.3, 7), recheck_shapes(&shapes, 0.3, 7));
    }
}
