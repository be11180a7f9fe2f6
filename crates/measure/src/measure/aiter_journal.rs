//! CK's own kernels measured by AITER's tuner ([`super::aiter_tuner`]) into a journal, the same journal
//! the harness backend writes (`synth bench --backend aiter`, `drift --remeasure --backend aiter`).
//!
//! The untuned CSV of the shapes not yet in the journal goes into a work directory next to the journal
//! (`<out>.aiter/`), where the tuner's tune, profile and log files are kept too: CK legacy and CK-tile
//! rows, failures and rows over the errRatio tolerance as `fail:<reason>` rows. A killed run loses at most
//! the batch in flight; the next run imports what the profile file holds and tunes the rest.
//!
//! Not run on an AMD GPU: tested against a fake tuner written from the real script's argument parser and
//! output (tests/fixtures/fake_aiter/).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rand::seq::index::sample;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::aiter_tuner::{import_profile, shape_in_journal, AiterDevice, RowMeta, RunFiles, Tuner};
use super::journal::{check_resumable, ExpectedDevice, Journal};
use synth_core::catalog::Catalog;
use synth_core::table::Shape;

/// The `backend` column: the tuner and the checkout's git commit when it is a git work tree.
fn backend_label(aiter_dir: &Path) -> String {
    let mut git = Command::new("git");
    git.arg("-C").arg(aiter_dir).args(["rev-parse", "--short=10", "HEAD"]);
    let commit = synth_base::process::run_capture(&mut git, Duration::from_secs(60), 4096)
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
    let filled = work_dir_for(device, out, &mut journal).and_then(|dir| {
        let meta = row_meta(tuner, device);
        let mut appended = 0;
        for (recheck, list, prefix) in [(0u8, shapes, ""), (1u8, rechecks, "recheck-")] {
            let pass = Pass { files: RunFiles::in_dir(&dir, prefix), meta: RowMeta { recheck, ..meta.clone() } };
            appended += pass.run(tuner, list, out, catalog, &mut journal)?;
        }
        Ok(appended)
    });
    match filled {
        Ok(appended) => Ok((journal, appended)),
        Err(e) => {
            // A failed first run leaves no journal behind (one with rows is kept).
            journal.discard_if_unused();
            Err(e)
        }
    }
}

/// The journal checked to be of `device` (and expecting its rows), and the tuner's work directory,
/// created: a directory of its own, never a link.
fn work_dir_for(device: &AiterDevice, out: &Path, journal: &mut Journal) -> Result<PathBuf> {
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
    Ok(dir)
}

/// The journal columns of a tuner run on `device`.
fn row_meta(tuner: &Tuner, device: &AiterDevice) -> RowMeta {
    RowMeta {
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
    }
}

/// One pass over a list of shapes (the main pass, or the recheck pass): its files and row columns.
struct Pass {
    files: RunFiles,
    meta: RowMeta,
}

impl Pass {
    /// Imports what an interrupted run left in the profile file, then tunes the shapes of `list` the
    /// journal still lacks; returns the rows appended.
    fn run(
        &self,
        tuner: &Tuner,
        list: &[Shape],
        out: &Path,
        catalog: &Catalog,
        journal: &mut Journal,
    ) -> Result<usize> {
        let (files, meta, recheck) = (&self.files, &self.meta, self.meta.recheck);
        let mut appended = 0;
        // What an interrupted run left in the profile file is imported before deciding what to tune.
        if files.profile.exists() {
            let s = import_profile(&files.profile, journal, meta, catalog, None)?;
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
            return Ok(appended);
        }
        let s = tuner.run(&todo, files, journal, meta, catalog)?;
        if s.other_libtype > 0 {
            errln!(
                "aiter: {} asm/opus rows left out (the catalog has CK legacy and CK-tile instances only)",
                s.other_libtype
            );
        }
        Ok(appended + s.appended)
    }
}

#[cfg(test)]
mod tests {
    use super::super::aiter_tuner::tests::{meta, HEADER};
    use super::super::aiter_tuner::{ImportStats, TunerLibtype};
    use super::super::journal::CellResult;
    use super::*;

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
