//! Hostile inputs and faults, end to end through the `synth` binary: text from data never becomes code,
//! nothing hangs, nothing is lost or poisoned, and each bad input gets one clear error.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// The H200 dataset with every row's `device` (and optionally other columns) rewritten by `edit`.
fn edited_dataset(path: &Path, edit: impl Fn(&mut csv::StringRecord, &csv::StringRecord)) {
    let mut rd = csv::Reader::from_path(root().join("measurements/h200/qwen3-32b-tp2.csv")).unwrap();
    let headers = rd.headers().unwrap().clone();
    let mut wr = csv::Writer::from_path(path).unwrap();
    wr.write_record(&headers).unwrap();
    for rec in rd.records() {
        let mut rec = rec.unwrap();
        edit(&mut rec, &headers);
        wr.write_record(&rec).unwrap();
    }
    wr.flush().unwrap();
}

fn set(rec: &mut csv::StringRecord, headers: &csv::StringRecord, column: &str, value: &str) {
    let i = headers.iter().position(|h| h == column).unwrap();
    let mut fields: Vec<String> = rec.iter().map(str::to_string).collect();
    fields[i] = value.to_string();
    *rec = csv::StringRecord::from(fields);
}

// ---------------------------------------------------------------------------------------------------
// 1. No code injection into generated sources; the "Regenerate with" line is shell-quoted.

#[test]
fn hostile_device_and_file_names_stay_comments_and_the_command_is_quoted() {
    let dir = tempfile::tempdir().unwrap();
    let device = "NVIDIA H200\rstatic int pwn = system(\"id\");\r// \u{202E}evil\u{2028}x\u{FEFF}\\";
    let data = dir.path().join("a;touch PWNED;$(id)\u{202E}.csv");
    edited_dataset(&data, |rec, h| set(rec, h, "device", device));
    let out_dir = dir.path().join("out");
    let out = synth().arg("run").arg("--dataset").arg(&data).arg("--out").arg(&out_dir).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));

    let header = std::fs::read_to_string(out_dir.join("gemm_a8w8_blockscale_heuristic.h")).unwrap();
    let module = std::fs::read_to_string(out_dir.join("dispatch.rs")).unwrap();
    for (name, src) in [("header", &header), ("module", &module)] {
        assert!(!src.contains('\r') && !src.contains('\u{202E}') && !src.contains('\u{2028}'), "{name}");
        assert!(!src.contains('\u{FEFF}'), "{name}");
        for line in src.lines().filter(|l| l.contains("pwn") || l.contains("PWNED")) {
            assert!(line.starts_with("//"), "{name}: data outside a comment: {line:?}");
            assert!(!line.ends_with('\\'), "{name}: a comment line that splices: {line:?}");
        }
    }
    assert!(header.contains("NVIDIA H200<U+000D>static int pwn"), "{header}");

    // The header compiles with the stand-in declarations and holds no `pwn` symbol.
    let catalog = synth_core::Catalog::embedded();
    std::fs::write(out_dir.join("stub.h"), synth_core::render::cpp::render_check_stub(&catalog).unwrap()).unwrap();
    let include = "#include \"stub.h\"\n#include \"gemm_a8w8_blockscale_heuristic.h\"\n";
    std::fs::write(out_dir.join("tu.cpp"), format!("{include}int probe() {{ return pwn; }}\n")).unwrap();
    let gxx =
        Command::new("g++").current_dir(&out_dir).args(["-std=c++17", "-fsyntax-only", "tu.cpp"]).output().unwrap();
    let msg = text(&gxx);
    assert!(
        !gxx.status.success() && msg.contains("pwn") && msg.contains("was not declared"),
        "pwn must not be declared:\n{msg}"
    );
    std::fs::write(out_dir.join("tu.cpp"), include).unwrap();
    let gxx =
        Command::new("g++").current_dir(&out_dir).args(["-std=c++17", "-fsyntax-only", "tu.cpp"]).output().unwrap();
    assert!(gxx.status.success(), "{}", text(&gxx));
    let rustc = Command::new("rustc")
        .current_dir(&out_dir)
        .args(["--edition", "2021", "--crate-type", "lib", "-D", "warnings", "dispatch.rs", "-o"])
        .arg(out_dir.join("libdispatch.rlib"))
        .output()
        .unwrap();
    assert!(rustc.status.success(), "{}", text(&rustc));

    // Pasting the "Regenerate with" line into bash runs no command and passes the file's own name (its
    // bidi override included, written as `$'\u202e'`) as one argument.
    let line = header.lines().find_map(|l| l.strip_prefix("// Regenerate with: ")).expect("a Regenerate line");
    let args = line.strip_prefix("cargo run --release -- ").expect(line);
    let sh =
        Command::new("bash").current_dir(dir.path()).arg("-c").arg(format!("printf '%s\\n' {args}")).output().unwrap();
    assert!(sh.status.success());
    assert!(!dir.path().join("PWNED").exists(), "pasting the command ran `touch`");
    let words: Vec<String> = String::from_utf8(sh.stdout).unwrap().lines().map(str::to_string).collect();
    assert!(words.contains(&data.display().to_string()), "{words:?}");
}

// ---------------------------------------------------------------------------------------------------
// 6. Times that would make sums overflow are rejected by the reader, with the line; never a panic.

#[test]
fn a_time_of_1e308_is_a_reader_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("huge.csv");
    let row = std::sync::atomic::AtomicUsize::new(0);
    edited_dataset(&data, |rec, h| {
        if row.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 6 {
            set(rec, h, "us", "1e308");
        }
    });
    for cmd in [&["run", "--out"][..], &["import"][..]] {
        let mut c = synth();
        c.args(cmd);
        if cmd[0] == "run" {
            c.arg(dir.path().join("out")).arg("--dataset");
        }
        let out = c.arg(&data).output().unwrap();
        let msg = text(&out);
        assert_eq!(out.status.code(), Some(1), "{cmd:?}: {msg}");
        assert!(!msg.contains("panicked"), "{msg}");
        assert!(msg.contains("huge.csv:8") && msg.contains("1e308") && msg.contains("outside"), "{cmd:?}: {msg}");
    }
}

// ---------------------------------------------------------------------------------------------------
// Measurement runs against the protocol fake of the harness.

const FAKE: &str = "tests/fixtures/fake_harness.py";

fn bench(out: &Path, extra: &[&str]) -> Command {
    let mut c = synth();
    c.current_dir(root());
    c.args(["bench", "--m-set", "1,16", "--shapes", "5120:5120", "--instances", "0,7,8", "--cu-num", "132"]);
    c.args(["--recheck-fraction", "0", "--python", "python3", "--harness", FAKE, "--out"]).arg(out).args(extra);
    c
}

/// 4. A second `bench` on a journal in use fails at once, naming the holder, and writes nothing.
#[test]
fn a_second_bench_on_one_journal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.csv");
    let mut first = bench(&journal, &["--cell-timeout", "300"])
        .env("FAKE_HANG_AFTER", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait (generously) until the first run holds the lock and has written its first row.
    let lock = dir.path().join("j.csv.lock");
    let t0 = Instant::now();
    while !(std::fs::read_to_string(&lock).unwrap_or_default().starts_with("pid ")
        && std::fs::read_to_string(&journal).unwrap_or_default().lines().count() >= 2)
    {
        assert!(t0.elapsed() < Duration::from_secs(120), "the first run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = std::fs::read(&journal).unwrap();
    let (second, _) = run_bounded(&mut bench(&journal, &[]), Duration::from_secs(120));
    let msg = text(&second);
    let _ = first.kill();
    let _ = first.wait();
    assert_eq!(second.status.code(), Some(1), "{msg}");
    assert!(
        msg.contains("is in use by another measurement run") && msg.contains(&format!("pid {}", first.id())),
        "{msg}"
    );
    assert_eq!(std::fs::read(&journal).unwrap(), before, "the refused run must not write");
}

/// 5b. A harness that hangs after two cells: the run stops at the cell timeout with a clear error and
/// keeps the two cells; a rerun resumes.
#[test]
fn a_hanging_harness_is_stopped_at_the_cell_timeout_keeping_finished_cells() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.csv");
    let (out, _) =
        run_bounded(bench(&journal, &["--cell-timeout", "3"]).env("FAKE_HANG_AFTER", "2"), Duration::from_secs(240));
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(msg.contains("produced no result for 3 s (--cell-timeout)") && msg.contains("2 cells finished"), "{msg}");
    assert_eq!(std::fs::read_to_string(&journal).unwrap().lines().count(), 1 + 2);
    let (again, _) = run_bounded(&mut bench(&journal, &[]), Duration::from_secs(240));
    assert!(again.status.success(), "{}", text(&again));
    let rows = std::fs::read_to_string(&journal).unwrap().lines().count() - 1;
    assert!(rows > 2, "{rows}");
    let (import, _) = run_bounded(synth().arg("import").arg(&journal), Duration::from_secs(120));
    assert!(import.status.success(), "{}", text(&import));
}

/// 8. Harness rows that the journal's reader would reject later are errors for that cell, never rows.
#[test]
fn lying_harness_rows_are_never_written() {
    for (patch, words) in [
        (r#"{"device": "Other GPU"}"#, "from device \"Other GPU\""),
        (r#"{"gfx": "gfx942", "cu_num": 304}"#, "(gfx942, 304 CUs)"),
        (r#"{"kernelName": "x\"; system(\"id\"); //"}"#, "is not the plan's"),
        (r#"{"us": 1e308}"#, "expected a time in"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("j.csv");
        let (out, _) = run_bounded(bench(&journal, &[]).env("FAKE_PATCH", patch), Duration::from_secs(240));
        let msg = text(&out);
        assert_eq!(out.status.code(), Some(1), "{patch}: {msg}");
        assert!(msg.contains(words), "{patch}: {msg}");
        let written = std::fs::read_to_string(&journal).unwrap();
        assert_eq!(written.lines().count(), 1 + 1, "{patch}: only the first, honest row: {written}");
        assert!(!written.contains("system"), "{written}");
        let (import, _) = run_bounded(synth().arg("import").arg(&journal), Duration::from_secs(120));
        assert!(import.status.success(), "{patch}: {}", text(&import));
    }
}

// ---------------------------------------------------------------------------------------------------
// 7. One validation path: every command that takes a rule rejects what `check` rejects.

fn leaf_json(id: i64, split_k: i64) -> String {
    format!(r#"{{"root": {{"leaf": {{"kernel_id": {id}, "split_k": {split_k}}}}}}}"#)
}

#[test]
fn every_entry_point_rejects_what_check_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let data = root().join("measurements/h200/qwen3-32b-tp2.csv");
    let mut branches = String::new();
    for i in 0..3000 {
        if i > 0 {
            branches.push(',');
        }
        branches.push_str(&format!(
            r#"[{{"cmp": {{"op": "Lt", "lhs": {{"var": "M"}}, "rhs": {{"lit": {i}}}}}}}, {{"leaf": {{"kernel_id": 4}}}}]"#
        ));
    }
    let huge = format!(
        r#"{{"root": {{"chain": {{"branches": [{branches}], "otherwise": {{"leaf": {{"kernel_id": 4}}}}}}}}}}"#
    );
    for (name, rule, words) in [
        ("id19.json", leaf_json(19, 0), "kernelId 19"),
        ("sk31.json", leaf_json(4, 31), "31"),
        ("unknown.json", r#"{"root": {"leaf": {"kernel_id": 3, "splitK": 2}}}"#.to_string(), "unknown field `splitK`"),
        ("huge.json", huge, "3000 branches"),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, rule).unwrap();
        let runs: Vec<Vec<std::ffi::OsString>> = vec![
            vec!["check".into(), path.clone().into()],
            vec!["compare".into(), "--dataset".into(), data.clone().into(), "--rule".into(), path.clone().into()],
            vec!["drift".into(), "--rule".into(), path.clone().into(), "--dataset".into(), data.clone().into()],
            vec![
                "run".into(),
                "--model".into(),
                "qwen3-32b".into(),
                "--out".into(),
                dir.path().join("out").into(),
                "--rule".into(),
                path.clone().into(),
            ],
        ];
        for args in runs {
            let (out, _) = run_bounded(synth().args(&args), Duration::from_secs(300));
            let msg = text(&out);
            assert_eq!(out.status.code(), Some(1), "{name} {:?}: {msg}", args[0]);
            assert!(msg.contains(words), "{name} {:?}: {msg}", args[0]);
            assert!(!msg.contains("drift detected") && !msg.contains("fallbacks"), "{name}: {msg}");
        }
    }
}

#[test]
fn a_model_spec_with_more_kv_heads_than_heads_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("bad.toml");
    std::fs::write(
        &spec,
        "name = 'bad'\nhidden = 4096\nintermediate = 8192\nheads = 8\nkv_heads = 16\nhead_dim = 128\nlayers = 2\n",
    )
    .unwrap();
    let out = synth().args(["shapes", "--spec"]).arg(&spec).output().unwrap();
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(msg.contains("kv_heads = 16 must divide heads = 8"), "{msg}");
}

// ---------------------------------------------------------------------------------------------------
// 5c. Endless inputs stop at a stated cap.

#[test]
fn endless_inputs_stop_at_a_cap_with_a_clear_error() {
    let data = root().join("measurements/h200/qwen3-32b-tp2.csv");
    let runs: Vec<(Vec<std::ffi::OsString>, &str)> = vec![
        (vec!["check".into(), "/dev/zero".into()], "the cap for a rule file"),
        (
            vec!["compare".into(), "--dataset".into(), data.into(), "--rule".into(), "/dev/zero".into()],
            "the cap for a rule file",
        ),
        (vec!["import".into(), "/dev/zero".into()], "the cap for a latency table"),
        (vec!["shapes".into(), "--spec".into(), "/dev/zero".into()], "the cap for a model spec"),
    ];
    for (args, words) in runs {
        let (out, _) = run_bounded(synth().args(&args), Duration::from_secs(300));
        let msg = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {msg}");
        assert!(msg.contains(words) && msg.contains("MiB"), "{args:?}: {msg}");
    }
    let (out, _) = run_bounded(
        synth().current_dir(root()).args([
            "bench",
            "--cu-num",
            "132",
            "--python",
            "python3",
            "--harness",
            FAKE,
            "--out",
            "/dev/full",
        ]),
        Duration::from_secs(300),
    );
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(msg.contains("/dev/full is not a regular file"), "{msg}");
    // An M count no memory can hold is refused at once; one larger than the set says what it lists.
    let (out, _) = run_bounded(
        synth().args(["shapes", "--m-set", "log-uniform", "--count", "4294967295", "--max-m", "1048576"]),
        Duration::from_secs(300),
    );
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(msg.contains("--count 4294967295") && msg.contains("at most 100000"), "{msg}");
    let out = synth().args(["shapes", "--m-set", "forty", "--count", "1000", "--format", "csv"]).output().unwrap();
    let msg = text(&out);
    assert!(out.status.success(), "{msg}");
    assert!(msg.contains("holds only 80 distinct values") && msg.contains("fewer than --count 1000"), "{msg}");
}

// ---------------------------------------------------------------------------------------------------
// 10. No silent failure; 11. messages show invisible characters as code points.

#[test]
fn a_search_whose_every_proposal_fails_says_why_and_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let (out, _) = run_bounded(
        synth()
            .args(["search", "--iterations", "1", "--offspring", "2", "--quiet", "--agent", "cmd:/nonexistent/agent"])
            .arg("--out")
            .arg(&out_dir),
        Duration::from_secs(300),
    );
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(msg.contains("every one of the 2 proposals failed") && msg.contains("status 127"), "{msg}");
    assert!(!out_dir.join("dispatch.rs").exists(), "the baseline must not be written as the result");
}

#[test]
fn a_proposal_without_a_valid_rule_is_refused_with_the_parse_error() {
    // The agent answers a code block that is not a rule: the final error says what is wrong with it, not
    // only that no block is a valid candidate.
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let (out, _) = run_bounded(
        synth()
            .args(["search", "--iterations", "1", "--offspring", "1", "--quiet", "--agent"])
            .arg("cmd:printf '```cpp\nwhile (M) { }\n```\n'")
            .arg("--out")
            .arg(&out_dir),
        Duration::from_secs(300),
    );
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(msg.contains("no code block in the output is a valid candidate"), "{msg}");
    assert!(msg.contains("code block 1 (cpp) at output line"), "the block's own error must be shown: {msg}");
}

#[test]
fn a_second_search_into_the_same_directory_keeps_the_first_ones_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let search = || {
        run_bounded(
            synth().args(["search", "--iterations", "1", "--offspring", "1", "--quiet"]).arg("--out").arg(&out_dir),
            Duration::from_secs(300),
        )
        .0
    };
    let first = search();
    assert!(first.status.success(), "{}", text(&first));
    let trace = std::fs::read(out_dir.join("trace.jsonl")).unwrap();
    let again = search();
    let msg = text(&again);
    assert_eq!(again.status.code(), Some(1), "{msg}");
    assert!(msg.contains("holds the attempts of an earlier run") && msg.contains("--resume"), "{msg}");
    assert_eq!(std::fs::read(out_dir.join("trace.jsonl")).unwrap(), trace, "the earlier trace is kept");
}

#[test]
fn resuming_a_trace_of_other_settings_or_garbage_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let base = |extra: &[&str]| {
        let mut c = synth();
        c.args(["search", "--offspring", "1", "--quiet"]).arg("--out").arg(&out_dir).args(extra);
        c
    };
    let (first, _) = run_bounded(&mut base(&["--iterations", "1"]), Duration::from_secs(300));
    assert!(first.status.success(), "{}", text(&first));
    let (other, _) = run_bounded(
        &mut base(&["--resume", "--iterations", "1", "--max-leaves", "3", "--seed", "5"]),
        Duration::from_secs(300),
    );
    let msg = text(&other);
    assert_eq!(other.status.code(), Some(1), "{msg}");
    assert!(
        msg.contains("other settings") && msg.contains("max_leaves: trace 8, now 3") && msg.contains("seed"),
        "{msg}"
    );
    let (same, _) = run_bounded(&mut base(&["--resume", "--iterations", "2"]), Duration::from_secs(300));
    assert!(same.status.success(), "{}", text(&same));

    std::fs::write(out_dir.join("trace.jsonl"), "garbage\u{202E}\n").unwrap();
    let (garbage, _) = run_bounded(&mut base(&["--resume", "--iterations", "1"]), Duration::from_secs(300));
    let msg = text(&garbage);
    assert_eq!(garbage.status.code(), Some(1), "{msg}");
    // A whole line that is no attempt is a damaged trace, not a torn write: an error naming its line.
    assert!(msg.contains("trace.jsonl:1:1: malformed trace line") && msg.contains("without --resume"), "{msg}");
    assert!(!msg.contains('\u{202E}'), "{msg}");
    assert_eq!(std::fs::read_to_string(out_dir.join("trace.jsonl")).unwrap(), "garbage\u{202E}\n");
}

#[test]
fn messages_show_invisible_characters_as_code_points() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    std::fs::write(&path, "{\"root\": {\"leaf\": {\"kernel_id\": 3, \"x\u{200B}\u{202E}\u{FEFF}\\u0000\": 1}}}")
        .unwrap();
    let out = synth().arg("check").arg(&path).output().unwrap();
    let msg = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(msg.contains("x<U+200B><U+202E><U+FEFF><U+0000>"), "{msg}");
    for c in ['\u{200B}', '\u{202E}', '\u{FEFF}', '\0'] {
        assert!(!msg.contains(c), "raw {c:?} in {msg:?}");
    }
}

#[test]
fn compare_with_no_scorable_shape_is_an_error_not_nan() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("failed.csv");
    edited_dataset(&data, |rec, h| {
        set(rec, h, "status", "fail:launch");
        set(rec, h, "us", "");
    });
    let (out, _) = run_bounded(synth().arg("compare").arg("--dataset").arg(&data), Duration::from_secs(300));
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(msg.contains("can be scored") && !msg.contains("NaN") && !msg.contains("-0.000"), "{msg}");
}

#[test]
fn a_split_k_fallback_margin_out_of_range_or_without_guards_is_one_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let run = |extra: &[&str]| {
        let mut cmd = synth();
        cmd.args(["run", "--model", "qwen3-32b", "--tp", "2"]).args(extra).arg("--out").arg(&out);
        cmd.output().unwrap()
    };
    for bad in ["150", "-1", "0.125", "NaN"] {
        let o = run(&[&format!("--split-k-fallback={bad}")]);
        let err = text(&o);
        assert!(!o.status.success() && err.contains(&format!("--split-k-fallback {bad}")), "{bad}: {err}");
        assert!(err.contains("percentage from 0 to 100"), "{err}");
        assert!(!out.exists());
    }
    let o = run(&["--split-k-fallback", "2", "--no-split-k-guards"]);
    let err = text(&o);
    assert!(!o.status.success() && err.contains("--no-split-k-guards drops the guards"), "{err}");
    assert!(!out.exists());
    // A margin the job reads is written back on the "Regenerate with" line.
    let o = run(&["--split-k-fallback", "0.5", "--max-leaves", "4"]);
    assert!(o.status.success(), "{}", text(&o));
    let header = std::fs::read_to_string(out.join("gemm_a8w8_blockscale_heuristic.h")).unwrap();
    assert!(header.contains("--max-leaves 4 --split-k-fallback 0.5"), "{}", &header[..400.min(header.len())]);
}

#[test]
fn a_reader_that_closed_its_pipe_ends_the_output_quietly() {
    // `synth check rule.json | head -1`: once the reader is gone, the next write fails with EPIPE. The
    // pipe's read end is closed before the command starts, so every run hits it (not only a racy few).
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    unsafe { libc::close(fds[0]) };
    let write_end = unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[1]) };
    let rule = root().join("generated/rule.json");
    let runs: Vec<Vec<std::ffi::OsString>> = vec![
        vec!["check".into(), rule.into()],
        vec!["instances".into()],
        vec!["shapes".into(), "--model".into(), "llama-3.1-8b".into(), "--m-set".into(), "aiter".into()],
    ];
    for args in runs {
        let out = synth()
            .args(&args)
            .stdout(Stdio::from(write_end.try_clone().unwrap()))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?}: {err}");
    }
}

#[test]
fn output_that_cannot_be_written_is_an_error() {
    // A redirect to a full disk: the command finishes its work and exits 1, saying the output is incomplete.
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let out = synth().arg("instances").stdout(Stdio::from(full)).stderr(Stdio::piped()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot write to standard output") && err.contains("incomplete"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
