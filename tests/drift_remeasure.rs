//! `synth drift --remeasure` with the fake harness (tests/fixtures/fake_harness.py, seeded noise) and the
//! fake AITER tuner: noise alone never raises an alarm over 20 seeds; a 10% slowdown of the rule's picks,
//! a pick failing its correctness check and a new kernel becoming the oracle by >= 10% are each flagged
//! with exit status 3, a markdown summary and a JSON report naming the fix.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{strs as s, synth, synth_owned, text};

const FAKE: &str = "tests/fixtures/fake_harness.py";

/// Rule: kernel 8 (16x64x256) for M <= 64, otherwise kernel 0 (128x128x128).
const RULE: &str = r#"{"root": {"chain": {"branches": [[{"cmp": {"op": "Le", "lhs": {"var": "M"}, "rhs": {"lit": 64}}},
 {"leaf": {"kernel_id": 8}}]], "otherwise": {"leaf": {"kernel_id": 0}}}}}"#;

struct Setup {
    dir: tempfile::TempDir,
    baseline: PathBuf,
    rule: PathBuf,
}

/// Baseline: fake harness with 1% seeded noise, instances 0, 2, 4, 7, 8, 12 on 6 M values x 2 layers,
/// 30% rechecks.
fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("baseline.csv");
    let o = synth(
        &s(&[
            "bench",
            "--m-set",
            "1,16,64,256,1024,4096",
            "--shapes",
            "5120:5120,25600:5120",
            "--instances",
            "0,2,4,7,8,12",
            "--split-k",
            "none",
            "--cu-num",
            "132",
            "--recheck-fraction",
            "0.3",
            "--harness",
            FAKE,
            "--out",
            baseline.to_str().unwrap(),
        ]),
        &[("FAKE_NOISE", "0.01"), ("FAKE_SEED", "baseline")],
    );
    assert!(o.status.success(), "{}", text(&o));
    let rule = dir.path().join("rule.json");
    std::fs::write(&rule, RULE).unwrap();
    Setup { dir, baseline, rule }
}

fn drift(
    st: &Setup,
    name: &str,
    seed: u32,
    envs: &[(&str, String)],
    extra: &[&str],
) -> (Output, serde_json::Value, String) {
    let out = st.dir.path().join(format!("{name}.csv"));
    let md = st.dir.path().join(format!("{name}.md"));
    let json = st.dir.path().join(format!("{name}.json"));
    let mut args = s(&[
        "drift",
        "--remeasure",
        "--rule",
        st.rule.to_str().unwrap(),
        "--baseline",
        st.baseline.to_str().unwrap(),
        "--dataset",
        out.to_str().unwrap(),
        "--harness",
        FAKE,
        "--sample-shapes",
        "10",
        "--others",
        "6",
        "--report-md",
        md.to_str().unwrap(),
        "--report-json",
        json.to_str().unwrap(),
    ]);
    args.extend(extra.iter().map(|x| x.to_string()));
    let mut envs = envs.to_vec();
    envs.push(("FAKE_NOISE", "0.01".into()));
    envs.push(("FAKE_SEED", format!("run{seed}")));
    let o = synth_owned(&args, &envs);
    let report =
        std::fs::read_to_string(&json).map(|t| serde_json::from_str(&t).unwrap()).unwrap_or(serde_json::Value::Null);
    let md = std::fs::read_to_string(&md).unwrap_or_default();
    (o, report, md)
}

#[test]
fn noise_only_never_alarms_in_20_seeded_runs() {
    let st = setup();
    for seed in 0..20 {
        let (o, r, md) = drift(&st, &format!("noise{seed}"), seed, &[], &["--sample-seed", &seed.to_string()]);
        assert_eq!(o.status.code(), Some(0), "seed {seed}:\n{}", text(&o));
        assert_eq!(r["verdict"], "ok", "seed {seed}");
        assert!(r["problems"].as_array().unwrap().is_empty());
        assert_eq!(r["shapes_measured"], 10);
        // The baseline's noise: 1% per measurement -> median |ratio - 1| near 0.6745 * sqrt(2) * 1%.
        let noise = r["noise_median"].as_f64().unwrap();
        assert!(noise > 0.004 && noise < 0.02, "{noise}");
        assert!(md.contains("no drift"), "{md}");
    }
}

#[test]
fn slowdown_of_the_rules_picks_is_flagged() {
    let st = setup();
    let (o, r, md) = drift(&st, "slow", 1, &[("FAKE_SCALE", "8=1.1,0=1.1".into())], &[]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert_eq!(r["verdict"], "drift");
    let g = r["rule_geomean_ratio"].as_f64().unwrap();
    assert!((g - 1.1).abs() < 0.02, "{g}");
    let p = r["problems"].as_array().unwrap();
    assert!(p.iter().any(|x| x.as_str().unwrap().contains("the rule's picks are")), "{p:?}");
    // The moved cells are the rule's picks, listed as slower.
    let slower: Vec<&serde_json::Value> =
        r["cells"].as_array().unwrap().iter().filter(|c| c["verdict"] == "slower").collect();
    assert!(!slower.is_empty());
    assert!(slower.iter().all(|c| c["candidate"] == "#8" || c["candidate"] == "#0"));
    assert!(md.contains("DRIFT") && md.contains("synth run --dataset NEW.csv"), "{md}");
    assert!(text(&o).contains("synth bench --backend harness"), "{}", text(&o));
}

#[test]
fn a_pick_failing_its_correctness_check_is_flagged() {
    let st = setup();
    let (o, r, _) = drift(&st, "wrong", 2, &[("FAKE_WRONG_ID", "8".into())], &[]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let p = r["problems"].as_array().unwrap();
    assert!(p.iter().any(|x| x.as_str().unwrap().contains("of the rule's picks now fail")), "{p:?}");
    let fails: Vec<&serde_json::Value> =
        r["cells"].as_array().unwrap().iter().filter(|c| c["verdict"] == "now-fails").collect();
    assert!(!fails.is_empty());
    // Kernel 8 fails everywhere it was re-measured; the rule picks it for M <= 64.
    assert!(fails.iter().all(|c| c["candidate"] == "#8"));
    let picked = fails.iter().filter(|c| c["roles"]["rule"] == true).count();
    assert!(picked > 0);
    assert!(fails.iter().all(|c| (c["roles"]["rule"] == true) == (c["shape"]["m"].as_u64().unwrap() <= 64)));
    assert!(
        p.iter().any(|x| x.as_str().unwrap().starts_with(&format!("{picked} of the rule's picks now fail"))),
        "{p:?}"
    );
    assert!(fails[0]["reason"].as_str().unwrap().contains("errRatio"));
}

#[test]
fn a_new_oracle_by_ten_percent_is_reported() {
    let st = setup();
    // Kernel 12 becomes 3x faster: the oracle of the large shapes by far more than 10%.
    let (o, r, md) = drift(&st, "oracle", 3, &[("FAKE_SCALE", "12=0.3".into())], &[]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let no = r["new_oracles"].as_array().unwrap();
    assert!(!no.is_empty());
    for x in no {
        assert_eq!(x["new_oracle"], "#12");
        assert!(x["gain"].as_f64().unwrap() >= 0.10);
    }
    assert!(md.contains("New oracles"), "{md}");
    // A kernel that becomes the oracle by about 5% (below the 10% threshold) is not reported.
    let (o, r, _) = drift(&st, "oracle5", 3, &[("FAKE_SCALE", "2=0.95".into())], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(r["new_oracles"].as_array().unwrap().is_empty(), "{}", r["new_oracles"]);
}

#[test]
fn budget_and_errors() {
    let st = setup();
    // A zero budget measures nothing: an error (exit 1), not a verdict; the report says why.
    let (o, r, _) = drift(&st, "budget", 4, &[], &["--budget-s", "0"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(r["verdict"], "error");
    assert_eq!(r["budget_reached"], true);
    assert!(r["problems"][0].as_str().unwrap().contains("no sampled shape was measured"));
    // A baseline without rechecks has no noise estimate: an error (exit 1) unless --noise is given.
    let plain = st.dir.path().join("plain.csv");
    let o = synth(
        &s(&[
            "bench",
            "--m-set",
            "1,64",
            "--shapes",
            "5120:5120",
            "--instances",
            "0,8",
            "--cu-num",
            "132",
            "--recheck-fraction",
            "0",
            "--harness",
            FAKE,
            "--out",
            plain.to_str().unwrap(),
        ]),
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let args = |extra: &[&str]| {
        let mut v = s(&[
            "drift",
            "--remeasure",
            "--rule",
            st.rule.to_str().unwrap(),
            "--baseline",
            plain.to_str().unwrap(),
            "--dataset",
            st.dir.path().join("p2.csv").to_str().unwrap(),
            "--harness",
            FAKE,
        ]);
        v.extend(extra.iter().map(|x| x.to_string()));
        v
    };
    let o = synth(&args(&[]), &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("has no recheck pairs"), "{}", text(&o));
    let o = synth(&args(&["--noise", "0.01"]), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // --remeasure needs --baseline (clap: exit 2).
    let o = synth(&s(&["drift", "--remeasure", "--dataset", "x.csv"]), &[]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn aiter_backend_remeasure_with_the_fake_tuner() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("base.csv");
    let bench = |out: &Path, envs: &[(&str, String)]| {
        synth_owned(
            &s(&[
                "bench",
                "--backend",
                "aiter",
                "--aiter-dir",
                "tests/fixtures/fake_aiter",
                "--libtype",
                "ck",
                "--m-set",
                "1,64,512,4096",
                "--shapes",
                "5120:5120",
                "--recheck-fraction",
                "0.5",
                "--out",
                out.to_str().unwrap(),
            ]),
            envs,
        )
    };
    let o = bench(&baseline, &[("FAKE_TUNER_NOISE", "0.01".into()), ("FAKE_TUNER_SEED", "b".into())]);
    assert!(o.status.success(), "{}", text(&o));
    let rule = dir.path().join("rule.json");
    std::fs::write(&rule, RULE).unwrap();
    let run = |name: &str, envs: &[(&str, String)]| {
        let json = dir.path().join(format!("{name}.json"));
        let o = synth_owned(
            &s(&[
                "drift",
                "--remeasure",
                "--backend",
                "aiter",
                "--aiter-dir",
                "tests/fixtures/fake_aiter",
                "--libtype",
                "ck",
                "--rule",
                rule.to_str().unwrap(),
                "--baseline",
                baseline.to_str().unwrap(),
                "--dataset",
                dir.path().join(format!("{name}.csv")).to_str().unwrap(),
                "--sample-shapes",
                "4",
                "--report-json",
                json.to_str().unwrap(),
            ]),
            envs,
        );
        let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (o, r)
    };
    let (o, r) = run("same", &[("FAKE_TUNER_NOISE", "0.01".into()), ("FAKE_TUNER_SEED", "n".into())]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(r["shapes_measured"], 4);
    let (o, r) = run(
        "slow",
        &[
            ("FAKE_TUNER_NOISE", "0.01".into()),
            ("FAKE_TUNER_SEED", "n".into()),
            ("FAKE_TUNER_SCALE", "ck:8=1.1,ck:0=1.1".into()),
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert_eq!(r["verdict"], "drift");
}

/// Seconds a drift run took and its result.
fn timed(f: impl FnOnce() -> (Output, serde_json::Value, String)) -> (f64, Output, serde_json::Value, String) {
    let t = std::time::Instant::now();
    let (o, r, md) = f();
    (t.elapsed().as_secs_f64(), o, r, md)
}

/// Distinct shapes and rows of a journal.
fn journal_counts(path: &Path) -> (usize, usize) {
    let text = std::fs::read_to_string(path).unwrap();
    let rows: Vec<&str> = text.lines().skip(1).collect();
    let shapes: std::collections::BTreeSet<String> =
        rows.iter().map(|l| l.split(',').skip(2).take(3).collect::<Vec<_>>().join(",")).collect();
    (shapes.len(), rows.len())
}

/// The report's verdict agrees with what was measured: none measured is an error (exit 1), else a verdict.
fn assert_verdict_of_what_was_measured(o: &Output, r: &serde_json::Value, journal: &Path) {
    let (shapes, _) = journal_counts(journal);
    assert_eq!(r["shapes_measured"].as_u64().unwrap() as usize, shapes, "{}", text(o));
    match shapes {
        0 => assert_eq!((o.status.code(), r["verdict"].as_str()), (Some(1), Some("error")), "{}", text(o)),
        _ => assert!(matches!(o.status.code(), Some(0) | Some(3)), "{}", text(o)),
    }
}

#[test]
fn the_budget_stops_the_harness_inside_a_batch() {
    let st = setup();
    // One batch of every sampled shape (60 cells), 0.5 s per cell (30 s in all): a 3 s budget stops the
    // harness in the middle of it, and what was measured is compared.
    let one_batch = ["--batch-shapes", "100", "--budget-s", "3"];
    let (secs, o, r, md) = timed(|| drift(&st, "slow-cells", 5, &[("FAKE_DELAY_S", "0.5".into())], &one_batch));
    assert!(secs < 20.0, "{secs} s:\n{}", text(&o));
    assert_eq!(r["budget_reached"], true, "{}", text(&o));
    assert!(r["shapes_measured"].as_u64().unwrap() < 10, "{r}");
    assert!(md.contains("(time budget reached)"), "{md}");
    assert!(text(&o).contains("ran out during batch 1 of 1"), "{}", text(&o));
    let journal = st.dir.path().join("slow-cells.csv");
    assert!(journal_counts(&journal).1 < 60);
    assert_verdict_of_what_was_measured(&o, &r, &journal);
    // A harness that hangs on its sixth cell is stopped when the budget runs out, not after --cell-timeout
    // (30 min by default).
    let (secs, o, r, _) = timed(|| drift(&st, "hung", 6, &[("FAKE_HANG_AFTER", "5".into())], &one_batch));
    assert!(secs < 20.0, "{secs} s:\n{}", text(&o));
    assert_eq!(r["budget_reached"], true, "{}", text(&o));
    let journal = st.dir.path().join("hung.csv");
    assert!(journal_counts(&journal).1 <= 5);
    assert_verdict_of_what_was_measured(&o, &r, &journal);
}

#[test]
fn a_silent_harness_is_stopped_by_the_cell_timeout() {
    let st = setup();
    let (secs, o, _, _) =
        timed(|| drift(&st, "silent", 7, &[("FAKE_HANG_AFTER", "3".into())], &["--cell-timeout", "5"]));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("produced no result for 5 s (--cell-timeout)"), "{}", text(&o));
    assert!(secs < 25.0, "{secs} s");
    // The three cells it measured are in the journal, to resume from.
    let journal = std::fs::read_to_string(st.dir.path().join("silent.csv")).unwrap();
    assert_eq!(journal.lines().count(), 4, "{journal}");
    // Not a number of seconds, or zero: clap refuses it (exit 2).
    for bad in ["0", "-1", "soon"] {
        let (o, _, _) = drift(&st, "bad-timeout", 7, &[], &["--cell-timeout", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o));
    }
}

#[test]
fn the_baseline_itself_as_the_re_measurement_is_refused() {
    let st = setup();
    let copy = st.dir.path().join("copy.csv");
    std::fs::copy(&st.baseline, &copy).unwrap();
    let link = st.dir.path().join("link.csv");
    std::os::unix::fs::symlink(&st.baseline, &link).unwrap();
    let dotted = st.dir.path().join(".").join("baseline.csv");
    let before = std::fs::read(&st.baseline).unwrap();
    for (dataset, what) in [(&st.baseline, "is"), (&link, "is"), (&dotted, "is"), (&copy, "has the same bytes as")] {
        let o = synth(
            &s(&[
                "drift",
                "--remeasure",
                "--rule",
                st.rule.to_str().unwrap(),
                "--baseline",
                st.baseline.to_str().unwrap(),
                "--dataset",
                dataset.to_str().unwrap(),
                "--harness",
                FAKE,
            ]),
            &[],
        );
        assert_eq!(o.status.code(), Some(1), "{}: {}", dataset.display(), text(&o));
        assert!(text(&o).contains(&format!("{what} the baseline")), "{}", text(&o));
        // No verdict: nothing was compared.
        assert!(o.stdout.is_empty(), "{}", text(&o));
    }
    assert_eq!(std::fs::read(&st.baseline).unwrap(), before);
}

#[test]
fn a_harness_that_never_describes_the_device_is_stopped() {
    let st = setup();
    let hang = st.dir.path().join("hang.py");
    std::fs::write(&hang, "import time\ntime.sleep(600)\n").unwrap();
    let started = std::time::Instant::now();
    let o = synth(
        &s(&[
            "drift",
            "--remeasure",
            "--rule",
            st.rule.to_str().unwrap(),
            "--baseline",
            st.baseline.to_str().unwrap(),
            "--dataset",
            st.dir.path().join("never.csv").to_str().unwrap(),
            "--harness",
            hang.to_str().unwrap(),
            "--cell-timeout",
            "1",
        ]),
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("(--probe) within 1 s (--cell-timeout)"), "{}", text(&o));
    assert!(started.elapsed().as_secs() < 15, "{:?}", started.elapsed());
}

/// A copy of the fake AITER checkout (tests/fixtures/fake_aiter) whose tuner script is `tuner` (Python).
fn fake_checkout_with_tuner(tuner: &str) -> tempfile::TempDir {
    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            let dest = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy_tree(&e.path(), &dest);
            } else {
                std::fs::copy(e.path(), &dest).unwrap();
            }
        }
    }
    let d = tempfile::tempdir().unwrap();
    copy_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_aiter"), d.path());
    std::fs::write(d.path().join("csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py"), tuner).unwrap();
    d
}

#[test]
fn a_silent_tuner_is_stopped_by_the_cell_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("base.csv");
    let o = synth(
        &s(&[
            "bench",
            "--backend",
            "aiter",
            "--aiter-dir",
            "tests/fixtures/fake_aiter",
            "--libtype",
            "ck",
            "--m-set",
            "1,64",
            "--shapes",
            "5120:5120",
            "--recheck-fraction",
            "0.5",
            "--out",
            baseline.to_str().unwrap(),
        ]),
        &[("FAKE_TUNER_NOISE", "0.01")],
    );
    assert!(o.status.success(), "{}", text(&o));
    let rule = dir.path().join("rule.json");
    std::fs::write(&rule, RULE).unwrap();
    // The tuner starts, then prints nothing and writes no profile file: --cell-timeout 3 stops it (the
    // default would wait 30 minutes).
    let silent = fake_checkout_with_tuner("import time\ntime.sleep(300)\n");
    let journal = dir.path().join("new.csv");
    let started = std::time::Instant::now();
    let o = synth(
        &s(&[
            "drift",
            "--remeasure",
            "--backend",
            "aiter",
            "--aiter-dir",
            silent.path().to_str().unwrap(),
            "--libtype",
            "ck",
            "--rule",
            rule.to_str().unwrap(),
            "--baseline",
            baseline.to_str().unwrap(),
            "--dataset",
            journal.to_str().unwrap(),
            "--cell-timeout",
            "3",
        ]),
        &[],
    );
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains("printed nothing and its profile file did not change for 3 s (--cell-timeout)"), "{msg}");
    assert!(msg.contains("0 of 2 shapes measured"), "{msg}");
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
}
