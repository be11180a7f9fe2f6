//! The built-in knob proposer and the suite runner end to end on fake tasks whose "kernel" is a shell
//! script: its knobs set a latency with a known optimum, one knob value fails to build and another gives
//! a wrong result, so the search's choice, its use of the failures and the suite's figures are known in
//! advance (no GPU, no timing).

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use synth_engine::engine::proposers::knobs::KnobProposer;
use synth_engine::engine::{run_loop, LoopConfig, Proposer, Task};
use synth_engine::rewrite::{load_spec, RewriteTask};

/// The "kernel": two knobs over a 5 x 4 grid, starting at the worst corner.
const KERNEL: &str = "# synth:knob BLOCK 64 128 256 512 1024
# synth:knob VEC 1 2 4 8
BLOCK=64
VEC=1
";

/// Fails to "build" at BLOCK=1024, with a compiler-style message.
const BUILD: &str = r#". ./kernel.sh
if [ "$BLOCK" = 1024 ]; then
  echo "kernel.sh:3:7: error: BLOCK=1024 exceeds the block limit" >&2
  exit 1
fi
"#;

/// latency = BASE + 3 * |index(BLOCK) - 3| + 2 * |index(VEC) - 2|: the optimum is BLOCK=512 VEC=4. VEC=8
/// gives a wrong result.
const TEST: &str = r#". ./kernel.sh
case $BLOCK in 64) b=0;; 128) b=1;; 256) b=2;; 512) b=3;; 1024) b=4;; esac
case $VEC in 1) v=0;; 2) v=1;; 4) v=2;; 8) v=3;; esac
if [ $v = 3 ]; then echo 'GEMMSYNTH_RESULT {"correct": false, "max_abs_err": 1.5}'; exit 1; fi
db=$((3 - b)); [ $db -lt 0 ] && db=$((-db))
dv=$((2 - v)); [ $dv -lt 0 ] && dv=$((-dv))
echo "GEMMSYNTH_RESULT {\"correct\": true, \"latency_us\": $((BASE + 3 * db + 2 * dv))}"
"#;

/// A task directory `dir/<name>/` and its spec `dir/<name>.toml`; `base` is the optimum's latency.
fn fake_task(dir: &Path, name: &str, base: u32, kernel: &str) -> PathBuf {
    let root = dir.join(name);
    fs::create_dir_all(&root).unwrap();
    fs::write(root.join("kernel.sh"), kernel).unwrap();
    fs::write(root.join("build.sh"), BUILD).unwrap();
    fs::write(root.join("test.sh"), TEST.replace("BASE", &base.to_string())).unwrap();
    let spec = dir.join(format!("{name}.toml"));
    fs::write(
        &spec,
        format!(
            "name = \"{name}\"\ntarget = \"{name}/kernel.sh\"\n[workdir]\nroot = \"{name}\"\n[build]\ncommand = \"sh \
             build.sh\"\ntimeout_s = 20\n[test]\ncommand = \"sh test.sh\"\ntimeout_s = 20\n"
        ),
    )
    .unwrap();
    spec
}

fn setting(text: &str) -> (String, String) {
    let get =
        |k: &str| text.lines().find_map(|l| l.strip_prefix(&format!("{k}="))).map(str::to_string).unwrap_or_default();
    (get("BLOCK"), get("VEC"))
}

#[test]
fn knob_search_finds_the_optimum_and_avoids_failed_settings() {
    let dir = tempfile::tempdir().unwrap();
    let spec = fake_task(dir.path(), "fake", 10, KERNEL);
    let task = RewriteTask::new(load_spec(&spec).unwrap()).unwrap();
    let knobs = KnobProposer::new(task.original()).unwrap();
    let proposers: Vec<Box<dyn Proposer>> = vec![Box::new(knobs)];
    let cfg = LoopConfig {
        iterations: 8,
        offspring: 2,
        history_successes: usize::MAX,
        history_failures: usize::MAX,
        ..LoopConfig::default()
    };
    let out = run_loop(&task, &proposers, &cfg).unwrap();
    let best = out.best.expect("a correct setting");
    assert_eq!(setting(&best.candidate), ("512".into(), "4".into()));
    assert_eq!(best.eval.score, Some(10.0));
    // The original (64, 1) scores 10 + 9 + 4.
    assert_eq!(out.attempts[0].eval.score, Some(23.0));

    // Every evaluated setting is distinct: failures are never proposed again.
    let mut seen = HashSet::new();
    for a in out.attempts.iter().filter(|a| !a.candidate.is_empty()) {
        assert!(a.duplicate_of.is_none(), "attempt {} repeats attempt {:?}", a.id, a.duplicate_of);
        assert!(seen.insert(setting(&a.candidate)), "setting {:?} proposed twice", setting(&a.candidate));
    }
    // The build failure at BLOCK=1024 came back as feedback with the compiler's line, and the search
    // still reached the optimum around it.
    let failed: Vec<_> = out.attempts.iter().filter(|a| setting(&a.candidate).0 == "1024").collect();
    assert!(!failed.is_empty(), "the neighbour BLOCK=1024 of the best was tried");
    for a in &failed {
        assert_eq!(a.eval.score, None);
        assert!(
            a.eval.feedback.contains("kernel.sh:3:7: error: BLOCK=1024 exceeds the block limit"),
            "{}",
            a.eval.feedback
        );
    }
    // Only the render of a setting changes: every candidate differs from the original in the two values.
    for a in out.attempts.iter().filter(|a| !a.candidate.is_empty()) {
        let diff: Vec<_> = a.candidate.lines().zip(KERNEL.lines()).filter(|(x, y)| x != y).collect();
        assert!(diff.iter().all(|(x, _)| x.starts_with("BLOCK=") || x.starts_with("VEC=")), "{diff:?}");
    }
    // The task itself was never written, and the winner scores the same when evaluated again.
    assert_eq!(fs::read_to_string(dir.path().join("fake/kernel.sh")).unwrap(), KERNEL);
    assert!(task.evaluate(&best.candidate).score == Some(10.0));
}

fn synth(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_synth")).args(args).output().unwrap()
}

#[test]
fn suite_runs_every_task_reports_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite");
    fs::create_dir_all(&suite).unwrap();
    fake_task(&suite, "alpha", 10, KERNEL);
    // Beta's original is already at the optimum's BLOCK: a smaller speedup.
    fake_task(&suite, "beta", 20, &KERNEL.replace("BLOCK=64", "BLOCK=512"));
    let out = dir.path().join("out");
    let (s, o) = (suite.to_str().unwrap(), out.to_str().unwrap());
    let args =
        ["rewrite", "--suite", s, "--agent", "knobs", "--iterations", "6", "--offspring", "2", "--out", o, "--quiet"];
    let r = synth(&args);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));

    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("suite.json")).unwrap()).unwrap();
    let tasks = summary["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0]["task"], "alpha");
    // alpha: 23 -> 10; beta: (512, 1) = 20 + 4 -> 20.
    assert_eq!(tasks[0]["speedup"].as_f64().unwrap(), 2.3);
    assert_eq!(tasks[1]["speedup"].as_f64().unwrap(), 1.2);
    assert_eq!(tasks[0]["best_source"], "BLOCK=512 VEC=4");
    assert_eq!((summary["tasks_built"].as_u64(), summary["tasks_correct"].as_u64()), (Some(2), Some(2)));
    assert_eq!(summary["tasks_faster"], 2);
    assert!((summary["geomean_speedup"].as_f64().unwrap() - (2.3f64 * 1.2).sqrt()).abs() < 1e-12);
    // Failures are counted: beta tries BLOCK=1024 (no build) and VEC=8 (built, wrong).
    let beta = &tasks[1];
    assert!(beta["built"].as_u64() < beta["candidates"].as_u64());
    assert!(beta["correct"].as_u64() < beta["built"].as_u64());
    let md = fs::read_to_string(out.join("suite.md")).unwrap();
    assert!(md.contains("| alpha |") && md.contains("| tasks ≥ 5% faster | 2 of 2 (100%) |"), "{md}");
    let svg = fs::read_to_string(out.join("suite.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("alpha"), "{svg}");
    for t in ["alpha", "beta"] {
        assert!(out.join(t).join("report.json").is_file() && out.join(t).join("kernel.sh").is_file());
    }

    // Resumed: every task replays its trace, nothing is evaluated again, the figures are the same.
    let mut resumed = args.to_vec();
    resumed.push("--resume");
    let r = synth(&resumed);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("alpha/report.json")).unwrap()).unwrap();
    assert_eq!(report["evaluations"], 0);
    let again: serde_json::Value = serde_json::from_str(&fs::read_to_string(out.join("suite.json")).unwrap()).unwrap();
    assert_eq!(again["tasks"][0]["speedup"], summary["tasks"][0]["speedup"]);
    assert_eq!(fs::read_to_string(out.join("suite.svg")).unwrap(), svg, "the plot depends on the results only");
}

#[test]
fn suite_with_a_bad_knob_line_fails_before_running_anything() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite");
    fs::create_dir_all(&suite).unwrap();
    fake_task(&suite, "alpha", 10, KERNEL);
    fake_task(&suite, "beta", 10, &KERNEL.replace("VEC 1 2 4 8", "VEC 1 2 $(reboot)"));
    let out = dir.path().join("out");
    let r = synth(&["rewrite", "--suite", suite.to_str().unwrap(), "--agent", "knobs", "--out", out.to_str().unwrap()]);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("beta/kernel.sh:2: knob VEC: value \"$(reboot)\" is not a plain literal"), "{err}");
    assert!(!out.exists(), "nothing is written when a task is refused");

    // Inside a task's directory, the output would be copied with every candidate.
    let inside = suite.join("alpha/o");
    let r =
        synth(&["rewrite", "--suite", suite.to_str().unwrap(), "--agent", "knobs", "--out", inside.to_str().unwrap()]);
    assert!(!r.status.success());
    assert!(String::from_utf8_lossy(&r.stderr).contains("is inside the task directory"));
    // An empty directory is not a suite.
    let empty = dir.path().join("empty");
    fs::create_dir_all(&empty).unwrap();
    let r = synth(&["rewrite", "--suite", empty.to_str().unwrap(), "--agent", "knobs", "--out", out.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&r.stderr).contains("holds no task specs"));
}

#[test]
fn shipped_suites_parse_and_every_original_declares_its_knobs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/suite");
    for lang in ["cuda", "hip"] {
        let specs: Vec<PathBuf> = {
            let mut v: Vec<PathBuf> = fs::read_dir(root.join(lang))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            v.sort();
            v
        };
        assert_eq!(specs.len(), 10, "{lang}: ten tasks");
        for spec in specs {
            let s = load_spec(&spec).unwrap_or_else(|e| panic!("{}: {e}", spec.display()));
            assert!(s.name.ends_with(&format!("-{lang}")), "{}", s.name);
            let original = fs::read_to_string(&s.target).unwrap();
            let k = KnobProposer::new(&original).unwrap_or_else(|e| panic!("{}: {e}", s.target.display()));
            assert!(k.space().grid_size() >= 8, "{}: at least a few settings", s.target.display());
        }
    }
}

#[test]
fn a_suite_spec_that_is_no_file_is_an_error_not_a_task_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite");
    fs::create_dir_all(&suite).unwrap();
    fake_task(&suite, "alpha", 10, KERNEL);
    std::os::unix::fs::symlink(suite.join("gone.toml.orig"), suite.join("beta.toml")).unwrap();
    let out = dir.path().join("out");
    let r = synth(&["rewrite", "--suite", suite.to_str().unwrap(), "--agent", "knobs", "--out", out.to_str().unwrap()]);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("beta.toml in the suite directory cannot be read"), "{err}");
    assert!(!out.exists(), "nothing is written");
}

#[test]
fn the_winner_never_lands_on_the_task_spec() {
    let dir = tempfile::tempdir().unwrap();
    // The spec `tune.toml` and a target of the same file name: --out in the spec's directory would put the
    // winner over the spec.
    let spec = fake_task(dir.path(), "tune", 10, KERNEL);
    let text = fs::read_to_string(&spec).unwrap();
    fs::rename(dir.path().join("tune/kernel.sh"), dir.path().join("tune/tune.toml")).unwrap();
    fs::write(&spec, text.replace("tune/kernel.sh", "tune/tune.toml")).unwrap();
    let before = fs::read(&spec).unwrap();
    let r = synth(&[
        "rewrite",
        "--task",
        spec.to_str().unwrap(),
        "--agent",
        "knobs",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("would write its tune.toml over the task spec"), "{err}");
    assert_eq!(fs::read(&spec).unwrap(), before);
}
