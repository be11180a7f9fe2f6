//! The kernel-rewrite task end to end on a tiny C program built with gcc: spec parsing, the result
//! line, the evaluator's failure feedback, the loop's choice, the report, and the promise that the
//! task directory is never modified.
//!
//! The C harness reports an operation count as its "latency" (ops / 1000, in µs), so the loop's choice
//! and the speedups are deterministic: these tests never depend on wall-clock timing.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use synth_engine::engine::Task;
use synth_engine::rewrite::spec::{Pick, ResultFormat};
use synth_engine::rewrite::{extract_result, load_spec, parse_spec, ResultLineError, RewriteTask};

const HARNESS: &str = r#"#include <stdio.h>
long long ops = 0;
long long sum_squares(const int *v, int n);
int main(void) {
    enum { N = 1000 };
    int v[N];
    for (int i = 0; i < N; i++) v[i] = (i * 7) % 13 - 6;
    long long expect = 0;
    for (int i = 0; i < N; i++) expect += (long long)v[i] * v[i];
    long long got = sum_squares(v, N);
    printf("checking %d values\n", N);
    if (got != expect) {
        printf("GEMMSYNTH_RESULT {\"correct\": false, \"got\": %lld, \"expected\": %lld}\n", got, expect);
        return 1;
    }
    printf("GEMMSYNTH_RESULT {\"correct\": true, \"latency_us\": %.3f, \"ops\": %lld}\n", ops / 1000.0, ops);
    return 0;
}
"#;

/// Original: squares by repeated addition (one op per addition).
const ORIGINAL: &str = r#"extern long long ops;
long long sum_squares(const int *v, int n) {
    long long s = 0;
    for (int i = 0; i < n; i++) {
        int a = v[i] < 0 ? -v[i] : v[i];
        for (int k = 0; k < a; k++) { s += a; ops++; }
    }
    return s;
}
"#;

/// Correct, two ops per element.
const MEDIUM: &str = r#"extern long long ops;
long long sum_squares(const int *v, int n) {
    long long s = 0;
    for (int i = 0; i < n; i++) { long long a = v[i]; ops++; s += a * a; ops++; }
    return s;
}
"#;

/// Correct, one op per element: the fastest.
const FAST: &str = r#"extern long long ops;
long long sum_squares(const int *v, int n) {
    long long s = 0;
    for (int i = 0; i < n; i++) { s += (long long)v[i] * v[i]; ops++; }
    return s;
}
"#;

/// Compile error on line 4 (undeclared identifier).
const BROKEN: &str = r#"extern long long ops;
long long sum_squares(const int *v, int n) {
    long long s = 0;
    for (int i = 0; i < n; i++) { s += (long long)v[i] * v[i]; opz++; }
    return s;
}
"#;

/// Skips the last element: wrong result, very few ops.
const WRONG: &str = r#"extern long long ops;
long long sum_squares(const int *v, int n) {
    long long s = 0;
    for (int i = 0; i < n - 1; i++) { s += (long long)v[i] * v[i]; ops++; }
    return s;
}
"#;

/// Crashes before printing a result.
const CRASH: &str = r#"#include <stdlib.h>
extern long long ops;
long long sum_squares(const int *v, int n) { (void)v; (void)n; abort(); }
"#;

const SPEC: &str = r#"name = "sumsq"
target = "src/kernel.c"

[workdir]
root = "src"
exclude = ["prog"]
keep = "failed"

[build]
command = "gcc -O1 -o prog main.c kernel.c"
timeout_s = 60

[test]
command = "./prog"
timeout_s = 30
"#;

fn gcc_available() -> bool {
    Command::new("gcc").arg("--version").output().map(|o| o.status.success()).unwrap_or(false)
}

/// Builds the task directory (spec.toml + src/) and the rewrites directory.
fn make_task(root: &Path) -> (PathBuf, PathBuf) {
    let task = root.join("task");
    fs::create_dir_all(task.join("src")).unwrap();
    fs::write(task.join("spec.toml"), SPEC).unwrap();
    fs::write(task.join("src/main.c"), HARNESS).unwrap();
    fs::write(task.join("src/kernel.c"), ORIGINAL).unwrap();
    let rewrites = root.join("rewrites");
    fs::create_dir_all(&rewrites).unwrap();
    for (name, text) in [
        ("a_medium.c", MEDIUM),
        ("b_compile_error.c", BROKEN),
        ("c_wrong.c", WRONG),
        ("d_fast.c", FAST),
        ("e_crash.c", CRASH),
        ("f_original_again.c", ORIGINAL),
    ] {
        fs::write(rewrites.join(name), text).unwrap();
    }
    (task, rewrites)
}

/// FNV-1a over every path, permission mode and byte of a tree (sorted walk).
fn tree_hash(dir: &Path) -> u64 {
    fn walk(base: &Path, dir: &Path, h: &mut u64) {
        let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            feed(h, rel.as_bytes());
            let meta = fs::symlink_metadata(&p).unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                feed(h, &meta.permissions().mode().to_le_bytes());
            }
            if meta.is_dir() {
                walk(base, &p, h);
            } else {
                feed(h, &fs::read(&p).unwrap());
            }
        }
    }
    fn feed(h: &mut u64, bytes: &[u8]) {
        for b in bytes.iter().chain(&[0xffu8]) {
            *h ^= *b as u64;
            *h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    walk(dir, dir, &mut h);
    h
}

/// The harness's inputs and the original's op count, computed independently of the C code.
fn original_ops() -> u64 {
    (0..1000).map(|i: i64| ((i * 7) % 13 - 6).unsigned_abs()).sum()
}

#[test]
fn loop_picks_fastest_correct_rewrite_and_leaves_the_task_untouched() {
    if !gcc_available() {
        eprintln!("gcc not found: skipping the end-to-end rewrite test");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (task, rewrites) = make_task(tmp.path());
    let before = tree_hash(&task);
    let out = tmp.path().join("out");
    let run = Command::new(env!("CARGO_BIN_EXE_synth"))
        .args(["rewrite", "--task"])
        .arg(task.join("spec.toml"))
        .arg("--agent")
        .arg(format!("replay:{}", rewrites.display()))
        .args(["--iterations", "3", "--offspring", "2", "--quiet", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "synth rewrite failed:\n{stdout}\n{stderr}");
    assert_eq!(tree_hash(&task), before, "the task directory changed");
    assert!(!task.join("src/prog").exists(), "a build ran in the original directory");

    let report: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let base_us = original_ops() as f64 / 1000.0;
    assert_eq!(original_ops(), 3234);
    assert_eq!(report["baseline_latency_us"].as_f64(), Some(base_us));
    let winner = &report["winner"];
    assert_eq!(winner["source"], "d_fast.c", "{stdout}");
    assert_eq!(winner["latency_us"].as_f64(), Some(1.0));
    assert!((winner["speedup"].as_f64().unwrap() - base_us / 1.0).abs() < 1e-9);
    assert_eq!(fs::read_to_string(out.join("kernel.c")).unwrap(), FAST);

    let rows = report["candidates"].as_array().unwrap();
    assert_eq!(rows.len(), 7, "baseline + 6 replayed rewrites");
    let by_source = |s: &str| rows.iter().find(|r| r["source"] == s).unwrap_or_else(|| panic!("no row for {s}"));
    assert_eq!(by_source("original")["id"], 0);
    assert_eq!(by_source("original")["status"], "ok");

    let medium = by_source("a_medium.c");
    assert_eq!(medium["status"], "ok");
    assert_eq!(medium["latency_us"].as_f64(), Some(2.0));
    assert!((medium["speedup"].as_f64().unwrap() - base_us / 2.0).abs() < 1e-9);

    let broken = by_source("b_compile_error.c");
    assert_eq!(broken["status"], "build_error");
    let fb = broken["feedback"].as_str().unwrap();
    assert!(fb.contains("kernel.c:4:"), "compiler error should name the line: {fb}");
    assert!(fb.contains("opz"), "{fb}");
    assert!(!fb.contains(&tmp.path().display().to_string()), "temporary paths leak into feedback: {fb}");

    let wrong = by_source("c_wrong.c");
    assert_eq!(wrong["status"], "mismatch");
    assert!(wrong["latency_us"].is_null());
    let fb = wrong["feedback"].as_str().unwrap();
    // The rewrite skips the last element, v[999] = (999*7)%13 - 6 = 12 - 6 = 6: the sum is short by 36.
    let expected: i64 = (0..1000).map(|i: i64| ((i * 7) % 13 - 6).pow(2)).sum();
    assert_eq!(expected, 14014);
    assert!(fb.contains("expected=14014") && fb.contains("got=13978"), "{fb}");
    assert!(fb.contains("checking 1000 values"), "mismatch feedback keeps the other output: {fb}");

    let crash = by_source("e_crash.c");
    assert_eq!(crash["status"], "run_error");
    assert!(crash["feedback"].as_str().unwrap().contains("signal 6"), "{}", crash["feedback"]);

    let again = by_source("original");
    assert_eq!(again["id"], 0);
    let dup =
        rows.iter().find(|r| r["duplicate_of"] == 0).expect("the replayed original is a duplicate of the baseline");
    assert_eq!(dup["source"], "original");

    // Kept working copies of failures (workdir.keep = "failed"), with the build log.
    let kept: Vec<_> = fs::read_dir(out.join("work")).unwrap().collect();
    assert_eq!(kept.len(), 3, "build error, mismatch and crash are kept");
    assert!(out.join("report.txt").exists() && out.join("trace.jsonl").exists());
    let text = fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(text.contains("winner: #") && text.contains("d_fast.c"), "{text}");
}

#[test]
fn evaluator_feedback_and_timeouts() {
    if !gcc_available() {
        eprintln!("gcc not found: skipping");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (task_dir, _) = make_task(tmp.path());
    let spec = load_spec(&task_dir.join("spec.toml")).unwrap();
    let task = RewriteTask::new(spec).unwrap();
    assert_eq!(task.baseline().as_deref(), Some(ORIGINAL));
    assert_eq!(task.context()["target"], "kernel.c");
    assert_eq!(task.context()["language"], "c");

    let base = task.evaluate(ORIGINAL);
    assert_eq!(base.score, Some(3.234), "{}", base.feedback);
    let ok = task.evaluate(&format!("```c\n{FAST}```\n"));
    assert_eq!(ok.score, Some(1.0), "fenced candidates are unwrapped: {}", ok.feedback);
    assert!(ok.feedback.ends_with("; 3.23x the original's speed (3.234 us)"), "{}", ok.feedback);
    assert_eq!(ok.details["result"]["ops"], 1000);

    let empty = task.evaluate("  \n");
    assert_eq!(empty.score, None);
    assert_eq!(empty.details["status"], "empty");

    // A candidate that never finishes: the test step is killed at its timeout.
    let spec_text = SPEC.replace("timeout_s = 30", "timeout_s = 0.5");
    fs::write(task_dir.join("slow.toml"), spec_text).unwrap();
    let slow = RewriteTask::new(load_spec(&task_dir.join("slow.toml")).unwrap()).unwrap();
    let hang = "#include <unistd.h>\nlong long sum_squares(const int *v, int n) { for (;;) sleep(1); }\n";
    let e = slow.evaluate(hang);
    assert_eq!(e.details["status"], "run_timeout", "{}", e.feedback);
    assert!(e.feedback.contains("timed out after 0.5 s"), "{}", e.feedback);

    // A test that prints no result line.
    let quiet = SPEC.replace("command = \"./prog\"", "command = \"./prog > /dev/null\"");
    fs::write(task_dir.join("quiet.toml"), quiet).unwrap();
    let q = RewriteTask::new(load_spec(&task_dir.join("quiet.toml")).unwrap()).unwrap();
    let e = q.evaluate(FAST);
    assert_eq!(e.details["status"], "no_result", "{}", e.feedback);
    assert!(e.feedback.contains("GEMMSYNTH_RESULT"), "{}", e.feedback);
}

#[test]
fn output_directory_inside_the_task_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (task, rewrites) = make_task(tmp.path());
    let before = tree_hash(&task);
    let run = Command::new(env!("CARGO_BIN_EXE_synth"))
        .args(["rewrite", "--task"])
        .arg(task.join("spec.toml"))
        .arg("--agent")
        .arg(format!("replay:{}", rewrites.display()))
        .arg("--out")
        .arg(task.join("src/out"))
        .output()
        .unwrap();
    assert!(!run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("inside the task directory"), "{err}");
    assert_eq!(tree_hash(&task), before, "a refused --out must not be created");

    // An output directory that would put the winner over the original (via `..`) is refused too.
    let run = Command::new(env!("CARGO_BIN_EXE_synth"))
        .args(["rewrite", "--task"])
        .arg(task.join("spec.toml"))
        .arg("--agent")
        .arg(format!("replay:{}", rewrites.display()))
        .arg("--out")
        .arg(task.join("src/../src"))
        .output()
        .unwrap();
    assert!(!run.status.success());
    assert_eq!(tree_hash(&task), before);

    let run = Command::new(env!("CARGO_BIN_EXE_synth"))
        .args(["rewrite", "--task"])
        .arg(task.join("spec.toml"))
        .args(["--agent", "bogus:x", "--out"])
        .arg(tmp.path().join("o2"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&run.stderr)
        .contains("expected knobs (or builtin), replay:DIR, cmd:<command> or openai"));
}

#[test]
fn command_agent_gets_the_prompt_and_its_rewrite_is_evaluated() {
    if !gcc_available() {
        eprintln!("gcc not found: skipping");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (task, rewrites) = make_task(tmp.path());
    let req = tmp.path().join("request.json");
    // The agent saves its request and answers with the fast rewrite wrapped in prose and a fence.
    let agent = format!(
        "cmd:cat > {}; echo 'Here is a faster version:'; echo '```c'; cat {}; echo '```'",
        req.display(),
        rewrites.join("d_fast.c").display()
    );
    let out = tmp.path().join("out");
    let run = Command::new(env!("CARGO_BIN_EXE_synth"))
        .args(["rewrite", "--task"])
        .arg(task.join("spec.toml"))
        .arg("--agent")
        .arg(&agent)
        .args(["--iterations", "1", "--offspring", "1", "--quiet", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(fs::read_to_string(out.join("kernel.c")).unwrap(), FAST);
    let request: serde_json::Value = serde_json::from_str(&fs::read_to_string(&req).unwrap()).unwrap();
    let user = request["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains("The file to rewrite, kernel.c:") && user.contains(ORIGINAL.trim_end()), "{user}");
    assert!(user.contains("Build command: `gcc -O1 -o prog main.c kernel.c`"), "{user}");
    assert!(user.contains("Reply with the complete new kernel.c"), "{user}");
    assert_eq!(request["context"]["task"], "rewrite");
}

#[test]
fn agents_that_never_propose_a_working_rewrite_fail_the_run_and_their_text_is_shown_safely() {
    if !gcc_available() {
        eprintln!("gcc not found: skipping");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (task, _) = make_task(tmp.path());
    let out = tmp.path().join("out");
    // The agent answers a terminal escape (clear screen, set the window title) and no code.
    let run = Command::new(env!("CARGO_BIN_EXE_synth"))
        .args(["rewrite", "--task"])
        .arg(task.join("spec.toml"))
        .args(["--agent", "cmd:printf '\\033[2J\\033]0;title\\007 hi'"])
        .args(["--iterations", "1", "--offspring", "2", "--quiet", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("every one of the 2 proposals failed"), "{stderr}");
    let report = fs::read_to_string(out.join("report.txt")).unwrap();
    for text in [&report, &stdout.to_string(), &stderr.to_string()] {
        assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'), "raw escape in {text:?}");
    }
}

#[test]
fn a_task_whose_target_links_out_of_it_is_refused_before_any_candidate() {
    let tmp = tempfile::tempdir().unwrap();
    let (task, _) = make_task(tmp.path());
    let outside = tmp.path().join("outside.c");
    fs::rename(task.join("src/kernel.c"), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, task.join("src/kernel.c")).unwrap();
    let out = tmp.path().join("out");
    let run = Command::new(env!("CARGO_BIN_EXE_synth"))
        .args(["rewrite", "--task"])
        .arg(task.join("spec.toml"))
        .args(["--agent", "cmd:true", "--iterations", "2", "--offspring", "2", "--quiet", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot be copied") && stderr.contains("leads out of the task"), "{stderr}");
    assert!(!out.join("report.txt").exists(), "nothing runs: {stderr}");
}

fn spec_err(text: &str) -> String {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("k.c"), "int x;\n").unwrap();
    let file = tmp.path().join("bad.toml");
    let e = parse_spec(text, &file).unwrap_err().to_string();
    assert!(e.starts_with(&file.display().to_string()), "error must name the file: {e}");
    e.replacen(&file.display().to_string(), "bad.toml", 1)
}

#[test]
fn spec_errors_name_file_line_and_key() {
    let e = spec_err("target = \"k.c\"\n[test]\ncommand = \"./a\"\ntimeout_s = \"soon\"\n");
    assert_eq!(e, "bad.toml:4:13: key `test.timeout_s`: expected a number of seconds, found string \"soon\"");

    let e = spec_err("target = \"k.c\"\n[test]\ncomand = \"./a\"\n");
    assert!(e.starts_with("bad.toml:3:1: unknown field `comand`"), "{e}");

    let e = spec_err("target = \"k.c\"\n[build]\ncommand = \"make\"\n[test]\ntimeout_s = 3\n");
    assert!(e.starts_with("bad.toml:4:1: key `test.command`: missing"), "{e}");

    let e = spec_err("target = \"missing.c\"\n[test]\ncommand = \"./a\"\n");
    assert!(e.starts_with("bad.toml:1:10: key `target`: missing.c is not a file"), "{e}");

    let e = spec_err("target = \"../k.c\"\n[test]\ncommand = \"./a\"\n");
    assert!(e.contains("key `target`") && e.contains("without `..`"), "{e}");

    let e = spec_err("target = \"k.c\"\n[test]\ncommand = \"./a\"\n[result]\nline = \"middle\"\n");
    assert_eq!(e, "bad.toml:5:8: key `result.line`: expected one of \"first\", \"last\", found \"middle\"");

    let e = spec_err("target = \"k.c\"\n[test]\ncommand = \"./a\"\ntimeout_s = -1\n");
    assert!(e.starts_with("bad.toml:4:13: key `test.timeout_s`: expected seconds in (0, 86400]"), "{e}");

    let e = spec_err("target = \"k.c\"\n[test]\ncommand = \"./a\"\n[workdir]\nexclude = [\"*.c\"]\n");
    assert!(e.contains("key `workdir.exclude`") && e.contains("excludes the target"), "{e}");

    let e = spec_err("target = \"k.c\"\n");
    assert!(e.contains("key `test`: missing"), "{e}");

    let e = spec_err("target = \"k.c\n");
    assert!(e.starts_with("bad.toml:1:"), "syntax errors carry a position: {e}");
}

#[test]
fn spec_defaults_and_paths() {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir_all(tmp.path().join("src")).unwrap();
    fs::write(tmp.path().join("src/k.c"), "int x;\n").unwrap();
    let file = tmp.path().join("t.toml");
    let s = parse_spec("target = \"src/k.c\"\n[test]\ncommand = \"./a\"\n[env]\nN = 3\n", &file).unwrap();
    assert_eq!(s.name, "t");
    assert!(s.build.is_none());
    assert_eq!(s.workdir.root, tmp.path());
    assert_eq!(s.target_in_root(), Path::new("src/k.c"));
    assert_eq!(s.test.timeout.as_secs(), 600);
    assert!(s.exclusive_test);
    assert_eq!(s.result, ResultFormat::default());
    assert_eq!(s.env, BTreeMap::from([("N".to_string(), "3".to_string())]));
}

#[test]
fn shipped_swiglu_specs_parse_and_replays_start_from_the_original() {
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/swiglu");
    for (spec, target, replay) in
        [("cuda.toml", "cuda/swiglu.cu", "rewrites/cuda"), ("hip.toml", "hip/swiglu.hip", "rewrites/hip")]
    {
        let s = load_spec(&ex.join(spec)).unwrap();
        assert_eq!(s.target, ex.join(target));
        let original = fs::read_to_string(ex.join(target)).unwrap();
        let ext = Path::new(target).extension().unwrap().to_str().unwrap();
        let first = fs::read_to_string(ex.join(replay).join(format!("01_original.{ext}"))).unwrap();
        assert_eq!(original, first, "{replay}/01_original.{ext} must equal {target}");
        let names: Vec<String> = fs::read_dir(ex.join(replay))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 6, "{names:?}");
        assert!(names.iter().any(|n| n.contains("broken")) && names.iter().any(|n| n.contains("wrong")));
    }
}

fn fmt(pick: Pick) -> ResultFormat {
    ResultFormat { pick, ..ResultFormat::default() }
}

#[test]
fn result_line_extraction() {
    let last = fmt(Pick::Last);
    let first = fmt(Pick::First);

    assert_eq!(extract_result("hello\n", &last), Err(ResultLineError::Missing { tag: "GEMMSYNTH_RESULT".into() }));
    // A longer word starting with the tag is not the tag.
    assert!(matches!(
        extract_result("GEMMSYNTH_RESULTS {\"correct\": true}\n", &last),
        Err(ResultLineError::Missing { .. })
    ));

    let out = "warmup\nGEMMSYNTH_RESULT {\"correct\": true, \"latency_us\": 5}\nnoise\n  GEMMSYNTH_RESULT\t{\"correct\": true, \"latency_us\": 3.5, \"gbps\": 900}\n";
    let r = extract_result(out, &last).unwrap();
    assert_eq!((r.line_no, r.tagged_lines, r.correct, r.latency_us), (4, 2, true, Some(3.5)));
    assert_eq!(r.figures(&last), "gbps=900");
    let r = extract_result(out, &first).unwrap();
    assert_eq!((r.line_no, r.latency_us), (2, Some(5.0)));

    match extract_result("GEMMSYNTH_RESULT {\"correct\": true, latency_us: 3}\n", &last) {
        Err(ResultLineError::Malformed { line_no: 1, reason, .. }) => {
            assert!(reason.contains("key must be a string"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(extract_result("GEMMSYNTH_RESULT [1, 2]\n", &last), Err(ResultLineError::Malformed { .. })));
    assert!(matches!(extract_result("GEMMSYNTH_RESULT\n", &last), Err(ResultLineError::Malformed { .. })));
    // The picked (last) line is malformed: an error, never a silent fall-back to an earlier line.
    let two = "GEMMSYNTH_RESULT {\"correct\": true, \"latency_us\": 1}\nGEMMSYNTH_RESULT {oops\n";
    assert!(matches!(extract_result(two, &last), Err(ResultLineError::Malformed { line_no: 2, .. })));
    assert!(extract_result(two, &first).is_ok());

    let e = extract_result("GEMMSYNTH_RESULT {\"latency_us\": 1}\n", &last).unwrap_err();
    assert_eq!(e.to_string(), "result line 1: key `correct` is missing (a boolean verdict is required)");
    let e = extract_result("GEMMSYNTH_RESULT {\"correct\": \"yes\", \"latency_us\": 1}\n", &last).unwrap_err();
    assert!(e.to_string().contains("must be true or false"));
    let e = extract_result("GEMMSYNTH_RESULT {\"correct\": true}\n", &last).unwrap_err();
    assert!(e.to_string().contains("`latency_us` is missing"));
    let e = extract_result("GEMMSYNTH_RESULT {\"correct\": true, \"latency_us\": -2}\n", &last).unwrap_err();
    assert!(e.to_string().contains("must be a number of microseconds from 1e-6 to 1e12"), "{e}");

    // Wrong results need no latency; their figures are kept.
    let r = extract_result("GEMMSYNTH_RESULT {\"correct\": false, \"max_abs_err\": 0.5}\n", &last).unwrap();
    assert_eq!((r.correct, r.latency_us), (false, None));
    assert_eq!(r.figures(&last), "max_abs_err=0.5");

    // Custom tag and keys.
    let custom = ResultFormat {
        tag: "RES".into(),
        correct_key: "ok".into(),
        latency_key: "t".into(),
        ..ResultFormat::default()
    };
    let r = extract_result("RES {\"ok\": true, \"t\": 7}\n", &custom).unwrap();
    assert_eq!(r.latency_us, Some(7.0));
}

// ---------------------------------------------------------------------------------------------------
// Where a rewrite writes: tasks whose name or target file name collide with the output directory's own
// names, all-or-nothing outputs, and the counts the argument parser refuses. The "kernel" is a shell
// script with one knob (latency 10 - V, correct for every V), so these need no compiler.

/// A task directory `dir/<root>/` whose target `<root>/<target>` declares the knob V, and its spec
/// `dir/<spec_file>` (with `name = <name>` when given, else the spec's file stem names the task).
fn knob_task(dir: &Path, spec_file: &str, name: Option<&str>, root: &str, target: &str) -> PathBuf {
    let r = dir.join(root);
    fs::create_dir_all(&r).unwrap();
    fs::write(r.join(target), "# synth:knob V 1 2 3\nV=1\n").unwrap();
    fs::write(
        r.join("test.sh"),
        format!(". ./{target}\necho \"GEMMSYNTH_RESULT {{\\\"correct\\\": true, \\\"latency_us\\\": $((10 - V))}}\"\n"),
    )
    .unwrap();
    let name = name.map(|n| format!("name = {n:?}\n")).unwrap_or_default();
    let spec = dir.join(spec_file);
    fs::write(
        &spec,
        format!(
            "{name}target = \"{root}/{target}\"\n[workdir]\nroot = \"{root}\"\n[test]\ncommand = \"sh test.sh\"\n\
             timeout_s = 20\n"
        ),
    )
    .unwrap();
    spec
}

fn rewrite(args: &[&str], out: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_synth"))
        .arg("rewrite")
        .args(args)
        .args(["--agent", "knobs", "--iterations", "1", "--offspring", "2", "--quiet", "--out"])
        .arg(out)
        .output()
        .unwrap()
}

fn text(o: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn a_suite_task_named_dot_dot_writes_inside_the_output_directory() {
    // Once, a task named ".." wrote its report, trace and winner into the parent of --out.
    for (spec_file, name) in [("a.toml", Some("..")), ("...toml", None)] {
        let tmp = tempfile::tempdir().unwrap();
        let suite = tmp.path().join("suite");
        fs::create_dir_all(&suite).unwrap();
        knob_task(&suite, spec_file, name, "k", "kernel.sh");
        let parent = tmp.path().join("parent");
        fs::create_dir_all(&parent).unwrap();
        let out = parent.join("out");
        let r = rewrite(&["--suite", suite.to_str().unwrap()], &out);
        assert!(r.status.success(), "{spec_file}: {}", text(&r));
        assert_eq!(names(&parent), ["out"], "{spec_file}: written beside --out: {}", text(&r));
        assert_eq!(names(&out), ["suite.json", "suite.md", "suite.svg", "task__"], "{spec_file}");
        let task = out.join("task__");
        for f in ["report.json", "report.txt", "trace.jsonl", "kernel.sh"] {
            assert!(task.join(f).is_file(), "{spec_file}: no task__/{f}: {:?}", names(&task));
        }
        let summary: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(out.join("suite.json")).unwrap()).unwrap();
        assert_eq!(summary["tasks"][0]["task"], "..", "{spec_file}: the summary keeps the task's own name");
    }
}

#[test]
fn a_target_named_like_a_report_gets_its_winner_under_another_name() {
    for target in ["report.txt", "trace.jsonl", "report.json"] {
        let tmp = tempfile::tempdir().unwrap();
        let spec = knob_task(tmp.path(), "t.toml", None, "k", target);
        let out = tmp.path().join("out");
        let r = rewrite(&["--task", spec.to_str().unwrap()], &out);
        assert!(r.status.success(), "{target}: {}", text(&r));
        let winner = fs::read_to_string(out.join(format!("winner-{target}"))).unwrap();
        assert!(winner.starts_with("# synth:knob V 1 2 3\nV=") && !winner.contains("V=1"), "{target}: {winner}");
        let report: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
        assert_eq!(report["winner"]["path"], out.join(format!("winner-{target}")).to_str().unwrap(), "{target}");
        let txt = fs::read_to_string(out.join("report.txt")).unwrap();
        assert!(txt.contains("winner: #"), "{target}: report.txt is not the text report: {txt}");
        // The trace is the loop's, one attempt a line.
        let trace = fs::read_to_string(out.join("trace.jsonl")).unwrap();
        assert!(!trace.is_empty(), "{target}");
        for l in trace.lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{target}: {e}: {l}"));
            assert!(v.get("id").is_some(), "{target}: {l}");
        }
    }
}

#[test]
fn rewrite_outputs_are_written_all_or_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = knob_task(tmp.path(), "t.toml", None, "k", "kernel.sh");
    let out = tmp.path().join("out");
    fs::create_dir_all(out.join("report.json")).unwrap();
    let r = rewrite(&["--task", spec.to_str().unwrap()], &out);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r));
    assert!(text(&r).contains("a directory is in the way"), "{}", text(&r));
    // The trace is written during the loop; the files of the run's end are not, none of them.
    assert!(!out.join("candidates").exists(), "{:?}", names(&out));
    assert!(!out.join("kernel.sh").exists(), "{:?}", names(&out));
    assert!(!out.join("report.txt").exists(), "{:?}", names(&out));
    assert!(out.join("report.json").is_dir());
    for n in names(&out) {
        assert!(
            ["report.json", "trace.jsonl", "trace.jsonl.lock", "trace.jsonl.settings.json", "work"]
                .contains(&n.as_str()),
            "{n}"
        );
    }
}

#[test]
fn rewrite_counts_out_of_range_are_refused_by_the_argument_parser() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = knob_task(tmp.path(), "t.toml", None, "k", "kernel.sh");
    let spec = spec.to_str().unwrap();
    let out = tmp.path().join("out");
    for (args, needle) in [
        (&["--task", spec, "--threads", "100000"][..], "100000 is not in 0..=256"),
        (&["--suite", tmp.path().to_str().unwrap(), "--jobs", "0"][..], "0 is not in 1..=64"),
    ] {
        let r = rewrite(args, &out);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", text(&r));
        assert!(String::from_utf8_lossy(&r.stderr).contains(needle), "{args:?}: {}", text(&r));
        assert!(!out.exists(), "{args:?} ran");
    }
}

#[test]
fn rewrite_jobs_without_a_suite_is_an_error() {
    // --jobs runs the tasks of a suite side by side; with one --task it would be silently ignored.
    let tmp = tempfile::tempdir().unwrap();
    let spec = knob_task(tmp.path(), "t.toml", None, "k", "kernel.sh");
    let out = tmp.path().join("out");
    let r = rewrite(&["--task", spec.to_str().unwrap(), "--jobs", "2"], &out);
    assert!(!r.status.success(), "{}", text(&r));
    assert!(String::from_utf8_lossy(&r.stderr).contains("--suite"), "{}", text(&r));
    assert!(!out.exists(), "it ran: {}", text(&r));
}

// ---------------------------------------------------------------------------------------------------
// Hostile inputs: suite outputs against every task's inputs, result lines out of range, targets and
// agent answers over their caps, two runs into one --out.

/// Runs `synth rewrite ARGS --iterations 1 --quiet --out OUT` and kills it past `limit`: a run that hangs
/// is a failure, not a hung test.
fn rewrite_within(args: &[&str], out: &Path, limit: std::time::Duration) -> std::process::Output {
    use wait_timeout::ChildExt;
    let mut child = Command::new(env!("CARGO_BIN_EXE_synth"))
        .arg("rewrite")
        .args(args)
        .args(["--iterations", "1", "--quiet", "--out"])
        .arg(out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Output is small here: it fits the pipes while the child runs.
    if child.wait_timeout(limit).unwrap().is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("synth rewrite {args:?} ran past {limit:?}");
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_suite_task_whose_output_is_another_tasks_directory_is_refused_before_anything_runs() {
    // Task alpha's directory is `k`; task beta is named `k`, and --out is the suite directory: beta's
    // output directory would be alpha's task directory, its winner written over alpha's kernel.
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    knob_task(&suite, "alpha.toml", Some("alpha"), "k", "kernel.sh");
    knob_task(&suite, "beta.toml", Some("k"), "kb", "kernel.sh");
    let kernel = fs::read(suite.join("k/kernel.sh")).unwrap();
    let before = names(&suite);
    let r = rewrite(&["--suite", suite.to_str().unwrap()], &suite);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r));
    let msg = text(&r);
    assert!(msg.contains("task \"k\"") && msg.contains("lies in the task directory"), "{msg}");
    assert!(msg.contains("of task \"alpha\""), "{msg}");
    assert_eq!(fs::read(suite.join("k/kernel.sh")).unwrap(), kernel, "alpha's original was replaced");
    assert_eq!(names(&suite), before, "something was written");
    assert_eq!(names(&suite.join("k")), ["kernel.sh", "test.sh"]);

    // A task named like another task's spec file: its output directory would be that spec.
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    knob_task(&suite, "alpha.toml", Some("alpha"), "ka", "kernel.sh");
    knob_task(&suite, "beta.toml", Some("alpha.toml"), "kb", "kernel.sh");
    let r = rewrite(&["--suite", suite.to_str().unwrap()], &suite);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r));
    assert!(text(&r).contains("lies in the task spec"), "{}", text(&r));
    // The suite's summary over a task's directory (one named `suite.md`).
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    knob_task(&suite, "alpha.toml", Some("alpha"), "suite.md", "kernel.sh");
    let r = rewrite(&["--suite", suite.to_str().unwrap()], &suite);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r));
    assert!(text(&r).contains("would be written over the task directory"), "{}", text(&r));
    assert!(!suite.join("alpha").exists(), "it ran");
}

/// A task whose test reports the latency `LAT` for each knob value V = 1, 2, 3 (V=1 is the original).
fn latency_task(dir: &Path, lat: [&str; 3]) -> PathBuf {
    let spec = knob_task(dir, "t.toml", Some("t"), "k", "kernel.sh");
    fs::write(
        dir.join("k/test.sh"),
        format!(
            ". ./kernel.sh\ncase $V in 1) L={};; 2) L={};; 3) L={};; esac\n\
             echo \"GEMMSYNTH_RESULT {{\\\"correct\\\": true, \\\"latency_us\\\": $L}}\"\n",
            lat[0], lat[1], lat[2]
        ),
    )
    .unwrap();
    spec
}

#[test]
fn result_lines_out_of_the_latency_range_are_refused_and_the_suite_report_stays_finite() {
    // Before, 1e-320 us against 10 us was an infinite speedup, and drawing suite.svg spun forever.
    let limit = std::time::Duration::from_secs(120);
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    latency_task(&suite, ["10", "1e-320", "1e308"]);
    let out = tmp.path().join("out");
    let r = rewrite_within(&["--suite", suite.to_str().unwrap(), "--agent", "knobs", "--offspring", "2"], &out, limit);
    assert!(r.status.success(), "{}", text(&r));
    let report: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("t/report.json")).unwrap()).unwrap();
    let cands = report["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 3, "{report}");
    assert_eq!(cands[0]["status"], "ok");
    for c in &cands[1..] {
        assert_eq!(c["status"], "bad_result", "{c}");
        let fb = c["feedback"].as_str().unwrap();
        assert!(fb.contains("must be a number of microseconds from 1e-6 to 1e12"), "{fb}");
    }
    assert_eq!(report["winner"]["speedup"], 1.0);
    let svg = fs::read_to_string(out.join("suite.svg")).unwrap();
    assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");

    // An original of 1e308 against candidates of 1e-300: nothing is in range, no task is correct.
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    latency_task(&suite, ["1e308", "1e-300", "1e-300"]);
    let out = tmp.path().join("out");
    let r = rewrite_within(&["--suite", suite.to_str().unwrap(), "--agent", "knobs", "--offspring", "2"], &out, limit);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r));
    assert!(text(&r).contains("no candidate was correct (original: bad_result)"), "{}", text(&r));
    assert!(fs::read_to_string(out.join("suite.svg")).unwrap().contains("no correct candidate"));
}

#[test]
fn a_target_over_the_cap_is_refused_with_a_message() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = knob_task(tmp.path(), "t.toml", None, "k", "kernel.sh");
    let big = format!("# synth:knob V 1 2 3\nV=1\n{}", format!("# {}\n", "x".repeat(1000)).repeat(5 << 10));
    fs::write(tmp.path().join("k/kernel.sh"), big).unwrap();
    let out = tmp.path().join("out");
    let r = rewrite(&["--task", spec.to_str().unwrap()], &out);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r));
    let msg = text(&r);
    assert!(msg.contains("kernel.sh") && msg.contains("more than 4 MiB (the cap for a rewrite target)"), "{msg}");
    assert!(!out.exists(), "it ran");
}

#[test]
fn an_agent_answer_over_the_cap_is_refused_never_cut_and_built() {
    // Before, a 5 MB answer was cut at 4 MiB without a word and built as is.
    let tmp = tempfile::tempdir().unwrap();
    let spec = knob_task(tmp.path(), "t.toml", None, "k", "kernel.sh");
    let out = tmp.path().join("out");
    let agent = "cmd:cat >/dev/null; printf 'V=2\\n'; head -c 5000000 /dev/zero | tr '\\000' '#'";
    let r = rewrite_within(
        &["--task", spec.to_str().unwrap(), "--agent", agent, "--offspring", "1"],
        &out,
        std::time::Duration::from_secs(120),
    );
    assert_eq!(r.status.code(), Some(1), "{}", text(&r));
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("answer is 5000004 bytes, over the cap of 4 MiB"), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let cands = report["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 2, "{report}");
    assert_eq!(cands[1]["status"], "propose_error", "{report}");
    assert!(cands[1]["feedback"].as_str().unwrap().contains("refused whole (not cut, built or tested)"), "{report}");
    assert_eq!(names(&out.join("candidates")).len(), 1, "only the original is a candidate text");
}

#[test]
fn a_second_rewrite_into_one_output_directory_is_refused_naming_the_first() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = knob_task(tmp.path(), "t.toml", None, "k", "kernel.sh");
    // The first run's test takes a while, so the second starts while it holds the directory.
    let test = fs::read_to_string(tmp.path().join("k/test.sh")).unwrap();
    fs::write(tmp.path().join("k/test.sh"), format!("sleep 2\n{test}")).unwrap();
    let out = tmp.path().join("out");
    let mut first = Command::new(env!("CARGO_BIN_EXE_synth"))
        .args(["rewrite", "--task", spec.to_str().unwrap(), "--agent", "knobs", "--iterations", "1", "--quiet"])
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lock = out.join("trace.jsonl.lock");
    let start = std::time::Instant::now();
    while !fs::read_to_string(&lock).is_ok_and(|t| t.starts_with("pid ")) {
        assert!(start.elapsed().as_secs() < 60, "the first run never locked {}", lock.display());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = rewrite(&["--task", spec.to_str().unwrap()], &out);
    let status = first.wait().unwrap();
    assert!(status.success());
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    let msg = text(&second);
    assert!(msg.contains("is in use by another synth rewrite"), "{msg}");
    assert!(msg.contains(&format!("pid {}", first.id())), "{msg}");
    // The first run's trace is whole: the original and its two candidates.
    let trace = fs::read_to_string(out.join("trace.jsonl")).unwrap();
    assert_eq!(trace.lines().count(), 3, "{trace}");
}

#[test]
fn a_resumed_trace_with_a_latency_out_of_range_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = knob_task(tmp.path(), "t.toml", None, "k", "kernel.sh");
    let out = tmp.path().join("out");
    let r = rewrite(&["--task", spec.to_str().unwrap()], &out);
    assert!(r.status.success(), "{}", text(&r));
    // The original's latency edited to a subnormal: resumed, it would be an infinite speedup.
    let trace = out.join("trace.jsonl");
    let edited: String = fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["id"] == 0 {
                v["eval"]["score"] = serde_json::json!(1e-320);
            }
            format!("{v}\n")
        })
        .collect();
    fs::write(&trace, edited).unwrap();
    let before = fs::read(out.join("report.json")).unwrap();
    let r = rewrite(&["--task", spec.to_str().unwrap(), "--resume"], &out);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r));
    assert!(text(&r).contains("attempt 0 has the latency 1e-320 us, outside 1e-6 to 1e12 us"), "{}", text(&r));
    assert_eq!(fs::read(out.join("report.json")).unwrap(), before, "the report was rewritten");
}
