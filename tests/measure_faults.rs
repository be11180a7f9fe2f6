//! Faults of the measurement subprocesses and their files, end to end through the `synth` binary: a tuner
//! that goes silent, a harness or tuner that exits leaving a grandchild on its pipes, a relative `--out`
//! with the AITER backend, links planted at the auxiliary files, an endless profile file; and the
//! `synth aiter` command's inputs and outputs (rule validation, capped patch reads, its default output
//! directory). Fakes: tests/fixtures/fake_harness.py and tests/fixtures/fake_aiter/ (wrapped by small
//! scripts written here).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

mod common;
use common::run_bounded;

fn synth() -> Command {
    Command::new(env!("CARGO_BIN_EXE_synth"))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

const TUNER: &str = "csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py";

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else if e.file_name() != "__pycache__" {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// A copy of the fake AITER checkout whose tuner script is `tuner` (Python). `REAL_TUNER` in it names the
/// fixture's fake tuner, which a wrapper can run with `runpy`.
fn fake_checkout(tuner: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    copy_tree(&root().join("tests/fixtures/fake_aiter"), d.path());
    let real = root().join("tests/fixtures/fake_aiter").join(TUNER);
    let body = format!("REAL_TUNER = {:?}\n{tuner}", real.display().to_string());
    std::fs::write(d.path().join(TUNER), body).unwrap();
    d
}

/// `synth bench --backend aiter` on 2 shapes (CK legacy only, no rechecks) into `out`.
fn aiter_bench(aiter: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut c = synth();
    c.current_dir(root());
    c.args(["bench", "--backend", "aiter", "--aiter-dir"]).arg(aiter);
    c.args(["--m-set", "1,64", "--shapes", "5120:5120", "--libtype", "ck", "--recheck-fraction", "0", "--out"]);
    c.arg(out).args(extra);
    c
}

fn journal_rows(path: &Path) -> usize {
    std::fs::read_to_string(path).map(|t| t.lines().count().saturating_sub(1)).unwrap_or(0)
}

/// #8: a tuner that prints nothing and writes nothing is stopped at --cell-timeout with a clear error.
#[test]
fn a_silent_tuner_is_stopped_at_the_cell_timeout() {
    let aiter = fake_checkout("import time\ntime.sleep(120)\n");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let (o, took) =
        run_bounded(&mut aiter_bench(aiter.path(), &out, &["--cell-timeout", "3"]), Duration::from_secs(100));
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains("printed nothing and its profile file did not change for 3 s (--cell-timeout)"), "{msg}");
    assert!(msg.contains("0 of 2 shapes measured") && msg.contains("run again to resume"), "{msg}");
    assert!(took < Duration::from_secs(60), "{took:?}");
}

/// #8: a tuner that measures everything, then exits leaving a grandchild that holds its stdout and stderr,
/// does not hold the bench (which succeeds at once; the grandchild is killed with the group).
#[test]
fn a_tuner_leaving_a_grandchild_on_its_pipes_does_not_hold_bench() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("grandchild-survived");
    let wrapper = format!(
        "import runpy, subprocess, sys\n\
         subprocess.Popen(['sh', '-c', 'sleep 90; touch {}'])\n\
         sys.argv[0] = REAL_TUNER\n\
         runpy.run_path(REAL_TUNER, run_name='__main__')\n",
        marker.display()
    );
    let aiter = fake_checkout(&wrapper);
    let out = dir.path().join("j.csv");
    let (o, took) =
        run_bounded(&mut aiter_bench(aiter.path(), &out, &["--cell-timeout", "60"]), Duration::from_secs(200));
    assert!(o.status.success(), "{}", text(&o));
    assert!(took < Duration::from_secs(40), "bench waited for the grandchild: {took:?}");
    assert!(journal_rows(&out) > 0);
}

/// #8: the same for the harness: every cell is measured, the harness exits, a grandchild keeps its stdout.
#[test]
fn a_harness_leaving_a_grandchild_on_stdout_does_not_hold_bench() {
    let dir = tempfile::tempdir().unwrap();
    let harness = dir.path().join("harness.py");
    std::fs::write(
        &harness,
        format!(
            "import runpy, subprocess, sys\n\
             if '--probe' not in sys.argv:\n    subprocess.Popen(['sleep', '90'])\n\
             sys.argv[0] = {0:?}\n\
             runpy.run_path({0:?}, run_name='__main__')\n",
            root().join("tests/fixtures/fake_harness.py").display().to_string()
        ),
    )
    .unwrap();
    let out = dir.path().join("j.csv");
    let mut c = synth();
    c.current_dir(root()).args(["bench", "--m-set", "1,16", "--shapes", "5120:5120", "--instances", "0,7"]);
    c.args(["--cu-num", "132", "--recheck-fraction", "0", "--python", "python3", "--cell-timeout", "60"]);
    c.arg("--harness").arg(&harness).arg("--out").arg(&out);
    let (o, took) = run_bounded(&mut c, Duration::from_secs(200));
    assert!(o.status.success(), "{}", text(&o));
    assert!(took < Duration::from_secs(40), "bench waited for the grandchild: {took:?}");
    assert!(journal_rows(&out) >= 4);
}

/// #11: a relative --out: the tuner (which runs in the checkout) gets absolute paths; a second run resumes.
#[test]
fn a_relative_out_works_and_resumes() {
    let aiter =
        fake_checkout("import runpy, sys\nsys.argv[0] = REAL_TUNER\nrunpy.run_path(REAL_TUNER, run_name='__main__')\n");
    let cwd = tempfile::tempdir().unwrap();
    let run = || {
        let mut c = aiter_bench(aiter.path(), Path::new("sub/j.csv"), &[]);
        c.current_dir(cwd.path());
        run_bounded(&mut c, Duration::from_secs(200)).0
    };
    let first = run();
    assert!(first.status.success(), "{}", text(&first));
    let rows = journal_rows(&cwd.path().join("sub/j.csv"));
    assert!(rows > 0);
    assert!(cwd.path().join("sub/j.csv.aiter/profile.csv").is_file());
    assert!(!aiter.path().join("sub").exists(), "nothing is written inside the checkout");
    let again = run();
    assert!(again.status.success(), "{}", text(&again));
    assert!(text(&again).contains("2 already in"), "{}", text(&again));
    assert_eq!(journal_rows(&cwd.path().join("sub/j.csv")), rows);
}

/// #9: links planted at the auxiliary files are refused, naming the path; their targets are untouched.
#[test]
fn links_planted_at_auxiliary_files_are_refused() {
    let aiter =
        fake_checkout("import runpy, sys\nsys.argv[0] = REAL_TUNER\nrunpy.run_path(REAL_TUNER, run_name='__main__')\n");
    for name in ["j.csv.lock", "j.csv.aiter/untuned.csv", "j.csv.aiter/tuner.log", "j.csv.aiter/profile.csv"] {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("precious.txt");
        std::fs::write(&target, "keep me\n").unwrap();
        let link = dir.path().join(name);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let out = dir.path().join("j.csv");
        let (o, _) = run_bounded(&mut aiter_bench(aiter.path(), &out, &[]), Duration::from_secs(200));
        let msg = text(&o);
        assert_eq!(o.status.code(), Some(1), "{name}: {msg}");
        assert!(msg.contains(&format!("{name} is a symbolic link")), "{name}: {msg}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n", "{name}: the target was written");
    }
}

/// #7: a profile file that never ends (a link to /dev/zero, or /dev/zero itself copied in as a FIFO-like
/// device is impossible without root, so the link) stops at once with a clear error, never reads 4 GB.
#[test]
fn an_endless_profile_file_stops_at_once() {
    let aiter =
        fake_checkout("import runpy, sys\nsys.argv[0] = REAL_TUNER\nrunpy.run_path(REAL_TUNER, run_name='__main__')\n");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("j.csv.aiter")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("j.csv.aiter/profile.csv")).unwrap();
    let (o, took) =
        run_bounded(&mut aiter_bench(aiter.path(), &dir.path().join("j.csv"), &[]), Duration::from_secs(120));
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains("profile.csv is a symbolic link"), "{msg}");
    assert!(took < Duration::from_secs(60), "{took:?}");
}

fn leaf_json(id: i64, split_k: i64) -> String {
    format!(r#"{{"root": {{"leaf": {{"kernel_id": {id}, "split_k": {split_k}}}}}}}"#)
}

/// #6: `synth aiter --rule` and `--kit` validate the rule as `synth check` does.
#[test]
fn aiter_rule_and_kit_validate_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let mut branches = Vec::new();
    for i in 0..3001 {
        branches.push(format!(
            r#"[{{"cmp": {{"op": "Lt", "lhs": {{"var": "M"}}, "rhs": {{"lit": {i}}}}}}}, {{"leaf": {{"kernel_id": 4}}}}]"#
        ));
    }
    let huge = format!(
        r#"{{"root": {{"chain": {{"branches": [{}], "otherwise": {{"leaf": {{"kernel_id": 4}}}}}}}}}}"#,
        branches.join(",")
    );
    for (name, rule, words) in [("sk17.json", leaf_json(4, 17), "17"), ("huge.json", huge, "3001 branches")] {
        let path = dir.path().join(name);
        std::fs::write(&path, rule).unwrap();
        let check = synth().arg("check").arg(&path).output().unwrap();
        assert_eq!(check.status.code(), Some(1), "check accepts {name}");
        for args in [
            vec![
                "aiter".into(),
                "--rule".into(),
                path.clone().into_os_string(),
                "--out".into(),
                dir.path().join("o").into(),
            ],
            vec!["aiter".into(), "--rule".into(), path.clone().into(), "--kit".into(), dir.path().join("kit").into()],
        ] {
            let (o, _) = run_bounded(synth().args(&args), Duration::from_secs(120));
            let msg = text(&o);
            assert_eq!(o.status.code(), Some(1), "{name} {args:?}: {msg}");
            assert!(msg.contains("invalid rule") && msg.contains(words), "{name}: {msg}");
        }
        assert!(!dir.path().join("o").exists() && !dir.path().join("kit").exists(), "{name}: files were written");
    }
}

/// #7, #13: `aiter --patch /dev/zero` stops at the cap; `aiter --rule R` without --out writes
/// ./gemm-synth-out/aiter/, never the working directory (which may be the checkout's generated/aiter/).
#[test]
fn aiter_patch_reads_are_capped_and_the_default_out_is_gemm_synth_out() {
    let dir = tempfile::tempdir().unwrap();
    let (o, took) = run_bounded(
        synth().args(["aiter", "--patch", "/dev/zero", "--aiter-dir"]).arg(dir.path()),
        Duration::from_secs(120),
    );
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains("the cap for a patch file"), "{msg}");
    assert!(took < Duration::from_secs(60), "{took:?}");

    let rule = root().join("generated/rule.json");
    let (o, _) =
        run_bounded(synth().current_dir(dir.path()).arg("aiter").arg("--rule").arg(&rule), Duration::from_secs(120));
    assert!(o.status.success(), "{}", text(&o));
    let patch = "gemm_a8w8_blockscale_heuristic.patch";
    assert!(dir.path().join("gemm-synth-out/aiter").join(patch).is_file(), "{}", text(&o));
    assert!(!dir.path().join(patch).exists(), "written into the working directory");
}

/// `aiter --kit DIR` writes the kit in one transaction: when one file cannot be written (a directory stands
/// at its path), nothing of DIR changes — the earlier files of the kit are not left behind either.
#[test]
fn a_kit_that_cannot_be_written_whole_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let kit = dir.path().join("kit");
    std::fs::create_dir_all(kit.join("shapes.txt")).unwrap();
    std::fs::write(kit.join("notes.txt"), "mine\n").unwrap();
    let rule = root().join("generated/rule.json");
    let o = synth().arg("aiter").arg("--rule").arg(&rule).arg("--kit").arg(&kit).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let mut left: Vec<String> =
        std::fs::read_dir(&kit).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, ["notes.txt", "shapes.txt"], "{}", text(&o));
    assert!(kit.join("shapes.txt").is_dir());
    assert_eq!(std::fs::read_to_string(kit.join("notes.txt")).unwrap(), "mine\n");
    // Without the obstacle the whole kit is written, next to what was there.
    std::fs::remove_dir(kit.join("shapes.txt")).unwrap();
    let o = synth().arg("aiter").arg("--rule").arg(&rule).arg("--kit").arg(&kit).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for f in ["driver.cpp", "kernels.cpp", "shapes.txt", "expected.txt", "stub/torch/extension.h", "notes.txt"] {
        assert!(kit.join(f).is_file(), "{f} missing: {}", text(&o));
    }
}

// ---------------------------------------------------------------------------------------------------
// The harness backend's journal: rows the reader would refuse, rows of another device, the lock file,
// and AITER tuner options given to it.

const FAKE_HARNESS: &str = "tests/fixtures/fake_harness.py";

/// `synth bench` with the fake harness on M in {1, 16}, N = K = 5120, instances 0 and 7 (split-K auto).
fn harness_bench(harness: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut c = synth();
    c.current_dir(root()).args(["bench", "--m-set", "1,16", "--shapes", "5120:5120", "--instances", "0,7"]);
    c.args(["--cu-num", "132", "--recheck-fraction", "0", "--python", "python3", "--harness"]).arg(harness);
    c.arg("--out").arg(out).args(extra);
    c
}

/// `synth import PATH` succeeds.
#[track_caller]
fn imports(path: &Path) {
    let (o, _) = run_bounded(synth().arg("import").arg(path), Duration::from_secs(120));
    assert!(o.status.success(), "import {}: {}", path.display(), text(&o));
}

/// A harness row the journal reader would refuse (a negative tflops, an errRatio past 1, a negative bw) is
/// an error naming the column, and is not written: the journal keeps the first, honest row, imports, and a
/// run without the lie resumes it to the end.
#[test]
fn a_row_the_journal_reader_would_refuse_is_not_written() {
    for (patch, column) in
        [(r#"{"tflops": -5}"#, "tflops"), (r#"{"errRatio": 1.5}"#, "errRatio"), (r#"{"bw": -1}"#, "bw")]
    {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("j.csv");
        let harness = Path::new(FAKE_HARNESS);
        let (o, _) = run_bounded(harness_bench(harness, &out, &[]).env("FAKE_PATCH", patch), Duration::from_secs(120));
        let msg = text(&o);
        assert_eq!(o.status.code(), Some(1), "{patch}: {msg}");
        assert!(msg.contains(&format!("column {column} = ")), "{patch}: {msg}");
        assert!(msg.contains("the journal reader would refuse it"), "{patch}: {msg}");
        assert!(msg.contains("the row was not written"), "{patch}: {msg}");
        assert_eq!(journal_rows(&out), 1, "{patch}: only the first row: {}", std::fs::read_to_string(&out).unwrap());
        imports(&out);
        let (again, _) = run_bounded(&mut harness_bench(harness, &out, &[]), Duration::from_secs(120));
        assert!(again.status.success(), "{patch}: {}", text(&again));
        assert!(text(&again).contains("1 already in"), "{patch}: {}", text(&again));
        assert!(journal_rows(&out) > 1);
        imports(&out);
    }
}

/// A row from another device than the harness probe reported is refused before it is written: a backend
/// (runtime and version) that changes from the second row on (which the check of each row against the
/// run's first row does not compare) ...
#[test]
fn a_row_of_another_backend_than_the_probe_is_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let (o, _) = run_bounded(
        harness_bench(Path::new(FAKE_HARNESS), &out, &[]).env("FAKE_PATCH", r#"{"backend": "other-2.0"}"#),
        Duration::from_secs(120),
    );
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains("backend (runtime and version) differs"), "{msg}");
    assert!(msg.contains("backend \"other-2.0\"") && msg.contains("backend \"fake-1.0\""), "{msg}");
    assert!(msg.contains("the row was not written"), "{msg}");
    let written = std::fs::read_to_string(&out).unwrap();
    assert_eq!(journal_rows(&out), 1, "{written}");
    assert!(!written.contains("other-2.0"), "{written}");
    imports(&out);
    // The journal resumes with the honest harness.
    let (again, _) = run_bounded(&mut harness_bench(Path::new(FAKE_HARNESS), &out, &[]), Duration::from_secs(120));
    assert!(again.status.success(), "{}", text(&again));
    imports(&out);
}

/// ... and a harness whose rows, from the first on, name another device than its probe did: not one row is
/// written.
#[test]
fn rows_of_another_device_than_the_probe_are_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let harness = dir.path().join("harness.py");
    std::fs::write(
        &harness,
        format!(
            "import os, runpy, sys\n\
             if '--probe' in sys.argv:\n    os.environ['FAKE_DEVICE_NAMES'] = '0=Probe GPU'\n\
             sys.argv[0] = {0:?}\n\
             runpy.run_path({0:?}, run_name='__main__')\n",
            root().join(FAKE_HARNESS).display().to_string()
        ),
    )
    .unwrap();
    let out = dir.path().join("j.csv");
    let (o, _) = run_bounded(&mut harness_bench(&harness, &out, &[]), Duration::from_secs(120));
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains("its device differs"), "{msg}");
    assert!(msg.contains("\"Fake GPU\"") && msg.contains("\"Probe GPU\""), "{msg}");
    assert!(msg.contains("the row was not written"), "{msg}");
    assert_eq!(journal_rows(&out), 0, "{}", std::fs::read_to_string(&out).unwrap_or_default());
}

/// The journal lock `<out>.lock`: a file of the user's already there (not the `pid ...` line bench writes)
/// is in the way and stays as it was; an empty file or an old lock is taken over.
#[test]
fn a_user_file_at_the_lock_path_is_in_the_way_and_kept() {
    let harness = Path::new(FAKE_HARNESS);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let lock = dir.path().join("j.csv.lock");
    for notes in ["my notes\n", "{\"M\": 1}\n", "PID 12: not ours"] {
        std::fs::write(&lock, notes).unwrap();
        let (o, _) = run_bounded(&mut harness_bench(harness, &out, &[]), Duration::from_secs(120));
        let msg = text(&o);
        assert_eq!(o.status.code(), Some(1), "{notes:?}: {msg}");
        assert!(msg.contains(&format!("{} is in the way", lock.display())), "{notes:?}: {msg}");
        assert_eq!(std::fs::read_to_string(&lock).unwrap(), notes, "the file at the lock path was changed");
        assert!(!out.exists(), "{notes:?}: the journal was written");
    }
    for old in ["", "pid 12345: synth bench --out j.csv"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("j.csv");
        let lock = dir.path().join("j.csv.lock");
        std::fs::write(&lock, old).unwrap();
        let (o, _) = run_bounded(&mut harness_bench(harness, &out, &[]), Duration::from_secs(120));
        assert!(o.status.success(), "{old:?}: {}", text(&o));
        let now = std::fs::read_to_string(&lock).unwrap();
        assert!(now.starts_with("pid ") && now != old, "{old:?}: {now}");
        assert!(journal_rows(&out) > 0);
    }
}

/// `bench --plan-only <out>.lock` is refused: the next run on that journal would replace the plan.
#[test]
fn plan_only_to_the_journal_lock_file_is_refused() {
    let harness = Path::new(FAKE_HARNESS);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let lock = dir.path().join("j.csv.lock");
    let (o, _) = run_bounded(
        &mut harness_bench(harness, &out, &["--plan-only", lock.to_str().unwrap()]),
        Duration::from_secs(120),
    );
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains("lock file"), "{msg}");
    assert!(!lock.exists() && !out.exists(), "{msg}");
    // The same with the lock of an earlier run there: it stays as it was.
    let (first, _) = run_bounded(&mut harness_bench(harness, &out, &[]), Duration::from_secs(120));
    assert!(first.status.success(), "{}", text(&first));
    let before = std::fs::read(&lock).unwrap();
    let (o, _) = run_bounded(
        &mut harness_bench(harness, &out, &["--plan-only", lock.to_str().unwrap()]),
        Duration::from_secs(120),
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("lock file"), "{}", text(&o));
    assert_eq!(std::fs::read(&lock).unwrap(), before);
    // Another plan path is fine.
    let plan = dir.path().join("plan.jsonl");
    let (o, _) = run_bounded(
        &mut harness_bench(harness, &dir.path().join("k.csv"), &["--plan-only", plan.to_str().unwrap()]),
        Duration::from_secs(120),
    );
    assert!(o.status.success() && plan.is_file(), "{}", text(&o));
}

/// Options of the AITER tuner given to the harness backend are refused, never silently ignored; nothing is
/// measured or written.
#[test]
fn aiter_tuner_options_are_refused_by_the_harness_backend() {
    let harness = Path::new(FAKE_HARNESS);
    for (args, flag) in [
        (&["--err-ratio", "NaN"][..], "--err-ratio"),
        (&["--err-ratio", "0.2"], "--err-ratio"),
        (&["--tuner-batch", "0"], "--tuner-batch"),
        (&["--mp", "2"], "--mp"),
        (&["--aiter-dir", "/x"], "--aiter-dir"),
        (&["--libtype", "ck"], "--libtype"),
        (&["--tuner-arg=--x"], "--tuner-arg"),
        (&["--warmup", "3"], "--warmup"),
        (&["--iters", "20"], "--iters"),
        (&["--timeout", "60"], "--timeout"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("j.csv");
        let log = dir.path().join("cells.log");
        let (o, _) = run_bounded(harness_bench(harness, &out, args).env("FAKE_LOG", &log), Duration::from_secs(120));
        let msg = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {msg}");
        assert!(msg.contains(&format!("{flag} is an option of the AITER tuner")), "{args:?}: {msg}");
        assert!(msg.contains("applies to --backend aiter"), "{args:?}: {msg}");
        assert!(!out.exists() && !log.exists(), "{args:?}: measured or wrote: {msg}");
    }
}
