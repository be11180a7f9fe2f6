//! `synth bench --backend aiter` against a fake of AITER's tuner (tests/fixtures/fake_aiter/, written from
//! the real script's argument parser and output files): pass-through of the tuner's options, import of the
//! profile file (CK legacy and CK-tile rows, failures, rows over the errRatio tolerance), resume after the
//! tuner is killed midway, clear errors for a missing checkout / GPU / bad option, and the CK-tile
//! candidate filter of `synth run` and `synth compare`. Not run on an AMD GPU.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::{strs, synth, text};

const FAKE_AITER: &str = "tests/fixtures/fake_aiter";
const TUNER: &str = "tests/fixtures/fake_aiter/csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py";

/// M in {1, 64, 512, 4096} on N=K=5120 and N=25600,K=5120: 8 shapes.
fn bench_args(out: &Path, extra: &[&str]) -> Vec<String> {
    let mut v = strs(&[
        "bench",
        "--backend",
        "aiter",
        "--aiter-dir",
        FAKE_AITER,
        "--m-set",
        "1,64,512,4096",
        "--shapes",
        "5120:5120,25600:5120",
        "--recheck-fraction",
        "0.25",
        "--tuner-batch",
        "2",
        "--out",
    ]);
    v.push(out.display().to_string());
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

struct Row {
    fields: BTreeMap<String, String>,
}

fn journal(path: &Path) -> Vec<Row> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let h = r.headers().unwrap().clone();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            Row { fields: h.iter().zip(rec.iter()).map(|(a, b)| (a.to_string(), b.to_string())).collect() }
        })
        .collect()
}

impl Row {
    fn get(&self, k: &str) -> &str {
        &self.fields[k]
    }
    fn key(&self) -> String {
        ["M", "N", "K", "libtype", "kernelId", "splitK", "recheck"]
            .iter()
            .map(|k| self.get(k))
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn tuner_log(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Candidates the real tuner enumerates on gfx942 / 304 CUs with -k, by the rule of its script:
/// 19 legacy instances and 8 CK-tile ones, each with splitK 0..=compute_gemm_SplitK.
fn expected_candidates(m: u32, n: u32, k: u32) -> usize {
    let split = |mt: u32, nt: u32, kt: u32| {
        let tiles = m.div_ceil(mt) * n.div_ceil(nt);
        let cus_per_tile = 304.0 / tiles as f64;
        let mut s = 0;
        while cus_per_tile >= 2f64.powi(s + 1) && 2u32.pow((s + 1) as u32) * kt < 2 * k {
            s += 1;
        }
        s as usize
    };
    let cat = synth_core::Catalog::embedded();
    let mut total = 0;
    for i in cat.legacy_candidates() {
        let (mt, nt, kt) = i.tile();
        total += split(mt, nt, kt) + 1;
    }
    for i in cat.cktile_for_arch("gfx942").filter(|i| i.role == synth_core::catalog::Role::Candidate) {
        let (mt, nt, kt) = i.tile();
        total += split(mt, nt, kt) + 1;
    }
    total
}

#[test]
fn imports_the_profile_with_cktile_rows_failures_and_rechecks() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let log = dir.path().join("tuner.jsonl");
    let o = synth(
        &bench_args(&out, &["--mp", "2", "--iters", "20", "--warmup", "3", "--timeout", "60", "--err-ratio", "0.05"]),
        &[("FAKE_TUNER_LOG", log.to_str().unwrap()), ("FAKE_TUNER_FAIL", "ck:3"), ("FAKE_TUNER_WRONG", "cktile:1")],
    );
    assert!(o.status.success(), "{}", text(&o));
    let rows = journal(&out);
    let main: Vec<&Row> = rows.iter().filter(|r| r.get("recheck") == "0").collect();
    // Every candidate of every shape, as the real tuner enumerates them.
    let want: usize =
        [(1, 5120), (64, 5120), (512, 5120), (4096, 5120), (1, 25600), (64, 25600), (512, 25600), (4096, 25600)]
            .iter()
            .map(|&(m, n)| expected_candidates(m, n, 5120))
            .sum();
    assert_eq!(main.len(), want);
    assert!(main.iter().any(|r| r.get("libtype") == "cktile"));
    // Failures: kernelName "None" resolved through the kernelId; us empty; status names the reason.
    let cat = synth_core::Catalog::embedded();
    for r in main.iter().filter(|r| r.get("libtype") == "ck" && r.get("kernelId") == "3") {
        assert_eq!(r.get("kernelName"), cat.legacy_by_id(3).unwrap().name);
        assert_eq!(r.get("us"), "");
        assert!(r.get("status").starts_with("fail:tuner reported us=-1"), "{}", r.get("status"));
    }
    for r in main.iter().filter(|r| r.get("libtype") == "cktile" && r.get("kernelId") == "1") {
        assert_eq!(r.get("kernelName"), cat.cktile_by_id("gfx942", 1).unwrap().name);
        assert!(r.get("status").starts_with("fail:errRatio 0.5 > 0.05"), "{}", r.get("status"));
        assert!(!r.get("us").is_empty());
    }
    assert!(main.iter().filter(|r| r.get("status") == "ok").all(|r| r.get("reps") == "20"));
    // Rechecks: round(8 * 0.25) = 2 shapes tuned again, every candidate.
    let rechecks: std::collections::BTreeSet<String> =
        rows.iter().filter(|r| r.get("recheck") == "1").map(|r| format!("{}x{}", r.get("M"), r.get("N"))).collect();
    assert_eq!(rechecks.len(), 2);
    // The tuner's command line: the options passed through under its own names.
    let runs = tuner_log(&log);
    assert_eq!(runs.len(), 2, "a main run and a recheck run");
    let argv: Vec<String> =
        runs[0]["argv"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    let joined = argv.join(" ");
    for part in
        ["--libtype both", "--errRatio 0.05", "--batch 2", "-k", "--mp 2", "--warmup 3", "--iters 20", "--timeout 60"]
    {
        assert!(joined.contains(part), "{part} missing from {joined}");
    }
    assert_eq!(runs[0]["shapes"].as_array().unwrap().len(), 8);
    // The journal reads back through the table reader (CK-tile names resolved by the catalog).
    let table = synth_core::table::read_aiter_csv(&out, &cat).unwrap();
    assert_eq!(table.len(), rows.len());
    // Running again measures nothing.
    let again = synth(&bench_args(&out, &[]), &[("FAKE_TUNER_LOG", log.to_str().unwrap())]);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(tuner_log(&log).len(), 2);
    assert_eq!(journal(&out).len(), rows.len());
}

#[test]
fn killed_midway_resumes_without_remeasuring() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.csv");
    let o = synth(&bench_args(&full, &["--libtype", "ck"]), &[]);
    assert!(o.status.success(), "{}", text(&o));

    let out = dir.path().join("j.csv");
    let log = dir.path().join("tuner.jsonl");
    // The tuner writes two batches (4 shapes) to its profile file, then is killed in the third.
    let killed = synth(
        &bench_args(&out, &["--libtype", "ck"]),
        &[("FAKE_TUNER_KILL_AFTER", "2"), ("FAKE_TUNER_LOG", log.to_str().unwrap())],
    );
    assert_eq!(killed.status.code(), Some(1), "{}", text(&killed));
    let msg = text(&killed);
    assert!(msg.contains("was killed by a signal with 4 of 8 shapes measured"), "{msg}");
    assert!(msg.contains("run again to resume"), "{msg}");
    let shapes_after_kill: std::collections::BTreeSet<String> =
        journal(&out).iter().map(|r| format!("{},{}", r.get("M"), r.get("N"))).collect();
    assert_eq!(shapes_after_kill.len(), 4);

    let resumed = synth(&bench_args(&out, &["--libtype", "ck"]), &[("FAKE_TUNER_LOG", log.to_str().unwrap())]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let runs = tuner_log(&log);
    // The resumed run asked the tuner for the 4 missing shapes only (then the recheck run).
    let second: Vec<String> = runs[1]["shapes"].as_array().unwrap().iter().map(|s| s.to_string()).collect();
    assert_eq!(second.len(), 4);
    for s in &second {
        let v: Vec<u32> = serde_json::from_str(s).unwrap();
        assert!(!shapes_after_kill.contains(&format!("{},{}", v[0], v[1])), "{s} re-measured");
    }
    // Same cells and times as the uninterrupted run (the fake's times are deterministic).
    let key_us = |p: &Path| -> BTreeMap<String, String> {
        journal(p).into_iter().map(|r| (r.key(), format!("{}|{}", r.get("us"), r.get("status")))).collect()
    };
    assert_eq!(key_us(&out), key_us(&full));
}

#[test]
fn clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    type Case<'a> = (Vec<String>, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            strs(&[
                "bench",
                "--backend",
                "aiter",
                "--shapes",
                "5120:5120",
                "--m-set",
                "1",
                "--out",
                out.to_str().unwrap(),
            ]),
            vec![],
            "--backend aiter needs --aiter-dir",
        ),
        (
            strs(&[
                "bench",
                "--backend",
                "aiter",
                "--aiter-dir",
                "tests",
                "--m-set",
                "1",
                "--out",
                out.to_str().unwrap(),
            ]),
            vec![],
            "is not an AITER checkout with the blockscale tuner",
        ),
        (bench_args(&out, &[]), vec![("FAKE_AITER_NO_GPU", "1")], "no ROCm GPU found"),
        (bench_args(&out, &["--python", "/nonexistent/python3"]), vec![], "cannot start Python"),
        (bench_args(&out, &["--instances", "0,1"]), vec![], "--instances applies to --backend harness"),
        (bench_args(&out, &["--block-per-cu", "5"]), vec![], "BlockPerCu 1..4"),
        (bench_args(&out, &["--err-ratio", "0"]), vec![], "--err-ratio 0 is outside (0, 1]"),
        // The tuner's own parser rejects what the real one rejects (argparse exits 2).
        (bench_args(&out, &["--tuner-arg=--update_improved"]), vec![], "--update_improved requires --compare"),
        (bench_args(&out, &["--tuner-arg=--bogus"]), vec![], "unrecognized arguments: --bogus"),
    ];
    for (args, envs, want) in cases {
        let o = synth(&args, &envs);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(text(&o).contains(want), "{args:?}: expected {want:?} in\n{}", text(&o));
    }
    assert!(!out.exists() || journal(&out).is_empty());
}

/// A checkout with the tuner script and the given Python modules (relative path -> source).
fn checkout(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let mut all = vec![("csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py", "raise SystemExit(9)\n")];
    all.extend_from_slice(files);
    for (path, body) in all {
        let p = d.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    d
}

#[test]
fn probe_errors_for_torch_rocm_and_aiter() {
    let torch_stub = std::fs::read_to_string(format!("{FAKE_AITER}/torch/__init__.py")).unwrap();
    let cuda_torch = torch_stub.replace("hip = \"6.4.0-fake\"", "hip = None");
    let cases = [
        (checkout(&[("torch/__init__.py", "raise ImportError('simulated: no torch')\n")]), "PyTorch is not importable"),
        (checkout(&[("torch/__init__.py", &cuda_torch)]), "is not a ROCm build"),
        (checkout(&[("torch/__init__.py", &torch_stub)]), "AITER is not importable"),
    ];
    for (dir, want) in cases {
        let out = dir.path().join("j.csv");
        let mut args = bench_args(&out, &[]);
        let at = args.iter().position(|a| a == FAKE_AITER).unwrap();
        args[at] = dir.path().display().to_string();
        let o = synth(&args, &[]);
        assert_eq!(o.status.code(), Some(1));
        assert!(text(&o).contains(want), "expected {want:?} in\n{}", text(&o));
    }
}

#[test]
fn fake_tuner_rejects_what_the_real_parser_rejects() {
    let run = |args: &[&str]| Command::new("python3").arg(TUNER).args(args).output().unwrap();
    for (args, msg) in [
        (vec!["--libtype", "triton"], "invalid choice: 'triton'"),
        (vec!["--mp", "two"], "invalid int value: 'two'"),
        (vec!["--errRatio", "x"], "invalid float value: 'x'"),
        (vec!["--sort", "maybe"], "Boolean value expected"),
        (vec!["--blockPerCu"], "expected at least one argument"),
        (vec!["--update_improved"], "--update_improved requires --compare"),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(msg), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    // A missing untuned file is the real script's assertion (exit 1).
    let o = run(&["-i", "/nonexistent.csv"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("Not exist untuned file"));
}

#[test]
fn cktile_candidates_are_left_out_of_run_and_compare_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    // qwen3-32b TP 2's four layers on a few M values, both families.
    let o = synth(
        &strs(&[
            "bench",
            "--backend",
            "aiter",
            "--aiter-dir",
            FAKE_AITER,
            "--m-set",
            "1,8,64,256,1024,4096",
            "--recheck-fraction",
            "0",
            "--tuner-batch",
            "8",
            "--out",
            out.to_str().unwrap(),
        ]),
        &[("FAKE_TUNER_SCALE", "cktile:1=0.5")],
    );
    assert!(o.status.success(), "{}", text(&o));
    let gen = dir.path().join("gen");
    let run = synth(
        &strs(&["run", "--dataset", out.to_str().unwrap(), "--sample-m", "3", "--out", gen.to_str().unwrap()]),
        &[],
    );
    let t = text(&run);
    assert!(run.status.success(), "{t}");
    assert!(t.contains("CK-tile rows"), "{t}");
    assert!(t.contains("left out: the C++ dispatcher chooses among CK legacy instances"), "{t}");
    assert!(t.contains("a CK-tile kernel is faster than every legacy one"), "{t}");
    // The rule returns legacy instances only.
    let rule: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(gen.join("rule.json")).unwrap()).unwrap();
    let cat = synth_core::Catalog::embedded();
    let rule = synth_core::rule::parse_any(&rule.to_string(), &cat).unwrap();
    for leaf in rule.leaves() {
        assert!(cat.legacy_by_id(leaf.kernel_id).is_some());
    }
    let cmp = synth(
        &strs(&[
            "compare",
            "--dataset",
            out.to_str().unwrap(),
            "--rule",
            gen.join("rule.json").to_str().unwrap(),
            "--csv",
            dir.path().join("cmp.csv").to_str().unwrap(),
        ]),
        &[],
    );
    assert!(cmp.status.success(), "{}", text(&cmp));
    assert!(text(&cmp).contains("CK-tile rows"), "{}", text(&cmp));
}
