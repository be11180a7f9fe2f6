//! `synth bench` against a protocol test double of the GPU harness (tests/fixtures/fake_harness.py):
//! journal resume after a kill, the split-K plan rule, clear errors for a missing Python/PyTorch/GPU.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const FAKE: &str = "tests/fixtures/fake_harness.py";

fn synth() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_synth"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

/// `head`, then the fake harness, `--out out` and `extra`: the command line of a bench test.
fn with_fake_harness(head: &[&str], out: &Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = head.iter().map(|s| s.to_string()).collect();
    v.extend(["--python", "python3", "--harness", FAKE, "--out"].map(String::from));
    v.push(out.display().to_string());
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// `synth bench` over M in {1,16}, N=K=5120, instances 0, 7, 8 with the fake harness.
fn bench_args(out: &Path, extra: &[&str]) -> Vec<String> {
    let head = [
        "bench",
        "--m-set",
        "1,16",
        "--shapes",
        "5120:5120",
        "--instances",
        "0,7,8",
        "--cu-num",
        "132",
        "--recheck-fraction",
        "0.25",
    ];
    with_fake_harness(&head, out, extra)
}

fn run(args: &[String], envs: &[(&str, &str)]) -> Output {
    let mut c = synth();
    c.args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().expect("synth runs")
}

/// Journal keys (M,N,K,kernelId,splitK,recheck) with their multiplicity.
fn journal_keys(path: &Path) -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no column {name}"));
    let (m, n, k, id, sk, rc) = (col("M"), col("N"), col("K"), col("kernelId"), col("splitK"), col("recheck"));
    let mut keys = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        *keys.entry(format!("{},{},{},{},{},{}", f[m], f[n], f[k], f[id], f[sk], f[rc])).or_insert(0) += 1;
    }
    keys
}

fn log_counts(path: &Path) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for l in std::fs::read_to_string(path).unwrap_or_default().lines() {
        *counts.entry(l.to_string()).or_insert(0) += 1;
    }
    counts
}

// Plan of bench_args: per shape, instance 0 (128x128x128) and 7 (16x128x256) have 40 tiles at N=5120 ->
// split levels 0,1,2 (40, 80 < 132; 160 >= 132); instance 8 (16x64x256) has 80 tiles -> 0,1.
// 2 shapes x 8 = 16 cells, plus round(16 * 0.25) = 4 rechecks.
const PLAN_CELLS: usize = 20;

#[test]
fn dry_run_counts_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let o = run(&bench_args(&out, &["--dry-run"]), &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), PLAN_CELLS.to_string());
    assert!(!out.exists(), "a dry run creates no journal");
}

#[test]
fn resume_after_kill_loses_and_repeats_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("journal.csv");
    let log = dir.path().join("measured.log");
    let log_s = log.display().to_string();

    let mut child = synth()
        .args(bench_args(&out, &[]))
        .env("FAKE_DELAY_S", "0.2")
        .env("FAKE_LOG", &log_s)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until a few cells are journaled, then kill the driver mid-run.
    let start = Instant::now();
    loop {
        let rows = std::fs::read_to_string(&out).map(|t| t.lines().count().saturating_sub(1)).unwrap_or(0);
        if rows >= 4 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no progress from the fake harness");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The orphaned harness dies at its next write into the closed pipe.
    std::thread::sleep(Duration::from_millis(600));
    let first = journal_keys(&out);
    assert!(first.len() >= 4 && first.len() < PLAN_CELLS, "killed run journaled {} cells", first.len());
    assert!(first.values().all(|&c| c == 1));

    let o = run(&bench_args(&out, &[]), &[("FAKE_LOG", &log_s)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains(&format!("{} already in", first.len())), "{stderr}");

    let all = journal_keys(&out);
    assert_eq!(all.len(), PLAN_CELLS, "every planned cell is journaled");
    assert!(all.values().all(|&c| c == 1), "no duplicate rows: {all:?}");
    let measured = log_counts(&log);
    for key in first.keys() {
        assert_eq!(
            measured.get(key),
            Some(&1),
            "cell {key} was journaled before the kill and must not be measured again"
        );
    }
    let rechecks: BTreeSet<_> = all.keys().filter(|k| k.ends_with(",1")).collect();
    assert_eq!(rechecks.len(), 4);
    for r in &rechecks {
        let base = format!("{}0", &r[..r.len() - 1]);
        assert!(all.contains_key(&base), "recheck {r} repeats a planned cell");
    }
    // The fake harness reports rechecks 2% slower: the noise figure is exactly that.
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("noise: median |us - us_recheck| / us = 2.00% over 4"), "{stdout}");

    // A third run has nothing left to do.
    let o = run(&bench_args(&out, &["--dry-run"]), &[]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0");
}

#[test]
fn incomplete_last_line_is_dropped_and_remeasured() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let o = run(&bench_args(&out, &[]), &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    // Cut the file in the middle of its last row, as a kill during a write would.
    let cut = text.len() - 30;
    std::fs::write(&out, &text[..cut]).unwrap();
    let o = run(&bench_args(&out, &[]), &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("dropped an incomplete last line"));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
}

fn plan_levels(cu_num: &str) -> BTreeMap<i64, Vec<i64>> {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.jsonl");
    let args: Vec<String> = [
        "bench",
        "--m-set",
        "1",
        "--shapes",
        "5120:5120",
        "--instances",
        "0,7,8",
        "--cu-num",
        cu_num,
        "--recheck-fraction",
        "0",
        "--out",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([dir.path().join("j.csv").display().to_string(), "--plan-only".into(), plan.display().to_string()])
    .collect();
    let o = run(&args, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut levels: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for l in std::fs::read_to_string(&plan).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        levels.entry(v["kernelId"].as_i64().unwrap()).or_default().push(v["splitK"].as_i64().unwrap());
    }
    levels
}

#[test]
fn plan_split_k_rule() {
    // H200 (132 SMs): 40 tiles for 128x128 and 16x128 at N=5120 -> 0,1,2; 80 tiles for 16x64 -> 0,1.
    let h200 = plan_levels("132");
    assert_eq!(h200[&0], vec![0, 1, 2]);
    assert_eq!(h200[&7], vec![0, 1, 2]);
    assert_eq!(h200[&8], vec![0, 1]);
    // MI300X (304 CUs): 40, 80, 160 < 304 -> up to 3; 80, 160 < 304 <= 320 -> up to 2.
    let mi300 = plan_levels("304");
    assert_eq!(mi300[&0], vec![0, 1, 2, 3]);
    assert_eq!(mi300[&8], vec![0, 1, 2]);
}

#[test]
fn split_k_aiter_measures_level_5_and_a_rule_returns_it_through_every_form() {
    // M in {1, 2, 4}, N = 256, K = 8192 (small N, large K) on 132 SMs: kernel 6 (16x64x128) has 4 output
    // tiles, 132 / 4 = 33 >= 2^5 -> AITER's level 5, and 64 whole 128-deep steps cover 32 splits. The fake
    // harness makes every level 0.1 us faster, so level 5 wins and the rule must return it.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("deep.csv");
    let head = ["bench", "--m-set", "1,2,4", "--shapes", "256:8192", "--instances", "6,7,8", "--cu-num", "132"];
    let args = with_fake_harness(&head, &out, &["--split-k", "aiter", "--recheck-fraction", "0"]);
    let o = run(&args, &[("FAKE_SPLIT_US", "-0.1")]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    assert!(err.contains("with split-K aiter"), "{err}");
    let keys = journal_keys(&out);
    for m in [1, 2, 4] {
        for s in 0..=5 {
            assert_eq!(keys.get(&format!("{m},256,8192,6,{s},0")), Some(&1), "M={m} level {s}: {keys:?}");
        }
        assert!(!keys.contains_key(&format!("{m},256,8192,6,6,0")), "{keys:?}");
    }
    // The journal trains a rule whose leaves carry level 5; `synth check` accepts it and every form agrees.
    // A model whose qkv is that layer: (2 + 2·1) heads of 64 over a hidden size of 8192.
    let spec = dir.path().join("narrow.toml");
    std::fs::write(
        &spec,
        "name = \"narrow\"\nsource = \"a test\"\nhidden = 8192\nintermediate = 8192\nheads = 2\nkv_heads = 1\n\
         head_dim = 64\nlayers = 1\n",
    )
    .unwrap();
    let gen = dir.path().join("gen");
    let o = run(
        &[
            "run",
            "--dataset",
            out.to_str().unwrap(),
            "--spec",
            spec.to_str().unwrap(),
            "--tp",
            "1",
            "--train-all",
            "--out",
        ]
        .map(String::from)
        .into_iter()
        .chain([gen.display().to_string()])
        .collect::<Vec<_>>(),
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cat = synth_core::Catalog::embedded();
    let rule = synth_core::rule::load(&gen.join("rule.json"), &cat).unwrap();
    assert!(rule.leaves().iter().any(|l| l.split_k == 5), "{:?}", rule.leaves());
    for m in [1, 2, 4] {
        assert_eq!(rule.eval(m, 256, 8192).split_k, 5, "M={m}");
    }
    let o = run(&["check", gen.join("gemm_a8w8_blockscale_heuristic.h").to_str().unwrap()].map(String::from), &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let header = synth_core::rule::parse_any(
        &std::fs::read_to_string(gen.join("gemm_a8w8_blockscale_heuristic.h")).unwrap(),
        &cat,
    );
    let dispatch = synth_core::rule::parse_any(&std::fs::read_to_string(gen.join("dispatch.rs")).unwrap(), &cat);
    for form in [header, dispatch] {
        let form = form.unwrap();
        for m in [1, 2, 4, 17, 300] {
            assert_eq!(form.eval(m, 256, 8192), rule.eval(m, 256, 8192), "M={m}");
        }
    }
}

fn stderr_of(extra_env: &[(&str, &str)], python: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let mut args = bench_args(&out, &[]);
    let i = args.iter().position(|a| a == "python3").unwrap();
    args[i] = python.to_string();
    let o = run(&args, extra_env);
    assert!(!o.status.success());
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn clear_errors_for_missing_python_torch_gpu() {
    let e = stderr_of(&[], "/nonexistent/python3");
    assert!(e.contains("cannot start the harness with Python `/nonexistent/python3`"), "{e}");
    assert!(e.contains("--python"), "{e}");
    let e = stderr_of(&[("FAKE_EXIT", "5")], "python3");
    assert!(e.contains("no GPU found"), "{e}");
    let e = stderr_of(&[("FAKE_EXIT", "3")], "python3");
    assert!(e.contains("PyTorch is not importable"), "{e}");
    let e = stderr_of(&[("FAKE_EXIT", "4")], "python3");
    assert!(e.contains("Triton is not importable"), "{e}");
}

#[test]
fn failed_cells_are_journaled_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let o = run(&bench_args(&out, &[]), &[("FAKE_FAIL_ID", "7")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    let fails = text.lines().filter(|l| l.contains(",fail:compile,")).count();
    let id7 = journal_keys(&out).keys().filter(|k| k.split(',').nth(3) == Some("7")).count();
    assert!(fails > 0 && fails == id7, "{fails} fail rows vs {id7} id-7 rows");
    assert!(String::from_utf8_lossy(&o.stdout).contains("fail:compile: "));
}

/// The committed H200 dataset reads back through the journal reader and the table reader alike, and its
/// split-K cells are exactly what the plan rule gives for a 132-SM device.
#[test]
fn committed_h200_dataset_matches_the_plan() {
    use synth_measure::measure::{plan::split_levels, read_journal, recheck_noise};
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("measurements/h200/qwen3-32b-tp2.csv");
    let catalog = synth_core::Catalog::embedded();
    let rows = read_journal(&path, &catalog).unwrap();
    let table_rows = synth_core::table::read_aiter_csv(&path, &catalog).unwrap();
    assert_eq!(rows.len(), table_rows.len());
    assert_eq!(rows.len(), 7425);
    assert!(rows.iter().all(|r| r.is_ok() && r.cu_num == 132 && r.reps >= 20));
    let rechecks = rows.iter().filter(|r| r.recheck == 1).count();
    assert_eq!(rechecks, 354);
    let (noise, pairs) = recheck_noise(&rows).unwrap();
    assert_eq!(pairs, 354);
    assert!(noise < 0.05, "noise {noise}");
    let mut levels: BTreeMap<(u32, u32, u32, i32), Vec<u32>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.recheck == 0) {
        levels.entry((r.m, r.n, r.k, r.kernel_id)).or_default().push(r.split_k);
    }
    assert_eq!(levels.len(), 320 * 19);
    for ((m, n, k, id), mut got) in levels {
        got.sort();
        let inst = catalog.legacy_by_id(id).unwrap();
        let (bm, bn, bk) = inst.tile();
        let want = split_levels(synth_core::Shape::new(m, n, k), bm, bn, bk, 132);
        assert_eq!(got, want, "M={m} N={n} K={k} id={id}");
    }
}

// ---------------------------------------------------------------------------------------------------
// `--family triton`: configs of the block-FP8 Triton family, planned for the same harness.

/// `synth bench --family triton` over M in {16, 1}, N=5120, K=4096, two configs, with the fake harness.
fn triton_args(out: &Path, extra: &[&str]) -> Vec<String> {
    let head = [
        "bench",
        "--family",
        "triton",
        "--m-set",
        "16,1",
        "--shapes",
        "5120:4096",
        "--configs",
        "triton_bm64_bn128_bk128_g32_w4_s2, triton_bm16_bn32_bk128_g1_w4_s5",
        "--recheck-fraction",
        "0",
    ];
    with_fake_harness(&head, out, extra)
}

/// The plan lines of [`triton_args`], written out by hand: shapes by (N, K, M), each shape's configs in the
/// order given, the line `harness/triton_plan.py` writes for each cell (ids: log2(BM)·10^7 + log2(BN)·10^6 +
/// log2(BK)·10^5 + G·100 + log2(W)·10 + S).
const TRITON_PLAN: [&str; 4] = [
    r#"{"libtype": "triton", "M": 1, "N": 5120, "K": 4096, "kernelId": 67703222, "splitK": 0, "kernelName": "triton_bm64_bn128_bk128_g32_w4_s2", "BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 4, "num_stages": 2, "recheck": 0}"#,
    r#"{"libtype": "triton", "M": 1, "N": 5120, "K": 4096, "kernelId": 45700125, "splitK": 0, "kernelName": "triton_bm16_bn32_bk128_g1_w4_s5", "BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 5, "recheck": 0}"#,
    r#"{"libtype": "triton", "M": 16, "N": 5120, "K": 4096, "kernelId": 67703222, "splitK": 0, "kernelName": "triton_bm64_bn128_bk128_g32_w4_s2", "BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 4, "num_stages": 2, "recheck": 0}"#,
    r#"{"libtype": "triton", "M": 16, "N": 5120, "K": 4096, "kernelId": 45700125, "splitK": 0, "kernelName": "triton_bm16_bn32_bk128_g1_w4_s5", "BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 5, "recheck": 0}"#,
];

#[test]
fn triton_family_sends_the_plan_lines_and_journals_triton_rows() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let copy = dir.path().join("sent.jsonl");
    let o = run(&triton_args(&out, &[]), &[("FAKE_PLAN_COPY", copy.to_str().unwrap())]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("plan: 4 cells (2 shapes x 2 triton configs, no split-K, 0 rechecks)"), "{stderr}");
    let sent = std::fs::read_to_string(&copy).unwrap();
    assert_eq!(sent.lines().collect::<Vec<_>>(), TRITON_PLAN);

    // The real harness's plan reader takes every line as a triton cell of its config.
    let check = "import sys\nsys.path.insert(0, 'harness')\nfrom bsbench import plan\n\
                 cells = plan.read_plan(sys.argv[1])\n\
                 print(' '.join('%s:%d:%s' % (c.libtype, c.m, c.config.name()) for c in cells))";
    let py = Command::new("python3")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["-c", check, copy.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(py.status.success(), "{}", String::from_utf8_lossy(&py.stderr));
    assert_eq!(
        String::from_utf8_lossy(&py.stdout).trim(),
        "triton:1:triton_bm64_bn128_bk128_g32_w4_s2 triton:1:triton_bm16_bn32_bk128_g1_w4_s5 \
         triton:16:triton_bm64_bn128_bk128_g32_w4_s2 triton:16:triton_bm16_bn32_bk128_g1_w4_s5"
    );

    // The journal holds libtype triton rows the table reader accepts, with the fake harness's times:
    // 1 + M·N·K/1e9 + BM/100 + stages/10 (M=1, bm64 s2: 1 + 0.02097152 + 0.64 + 0.2).
    let rows = synth_core::table::read_aiter_csv(&out, &synth_core::Catalog::embedded()).unwrap();
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r.libtype == synth_core::catalog::Libtype::Triton && r.split_k == 0));
    let first = rows.iter().find(|r| r.m == 1 && r.kernel_id == 67703222).unwrap();
    assert_eq!(first.us, Some(1.8610));
    assert_eq!(first.kernel_name, "triton_bm64_bn128_bk128_g32_w4_s2");

    // A rerun resumes: nothing is left to measure.
    let o = run(&triton_args(&out, &[]), &[("FAKE_PLAN_COPY", copy.to_str().unwrap())]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && stderr.contains("4 already in") && stderr.contains("0 to measure"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), sent, "no cell was sent again");

    // Two GPU workers: the same cells, dealt by shape, in the one journal.
    let out2 = dir.path().join("j2.csv");
    let copy2 = dir.path().join("sent2.jsonl");
    let o = run(
        &triton_args(&out2, &["--gpus", "0,1"]),
        &[("FAKE_DEVICES", "2"), ("FAKE_PLAN_COPY", copy2.to_str().unwrap())],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut sent2: Vec<String> = std::fs::read_to_string(&copy2).unwrap().lines().map(str::to_string).collect();
    sent2.sort();
    let mut want: Vec<String> = TRITON_PLAN.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(sent2, want);
    assert_eq!(journal_keys(&out2), journal_keys(&out));
}

#[test]
fn triton_family_plans_the_kept_set_and_rechecks_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    // The kept set (the configs of the cover and vLLM's default, one a line in kept.txt) on two shapes.
    let kept_file = Path::new(env!("CARGO_MANIFEST_DIR")).join("measurements/h200/triton-space/kept.txt");
    let kept = std::fs::read_to_string(kept_file).unwrap();
    let kept: Vec<&str> = kept.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    assert!(kept.len() >= 2 && kept.iter().all(|c| c.starts_with("triton_bm")), "{kept:?}");
    let mut args = triton_args(&out, &["--dry-run"]);
    let at = args.iter().position(|a| a == "--configs").unwrap();
    args.drain(at..at + 2);
    let o = run(&args, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), (2 * kept.len()).to_string(), "2 shapes x the kept configs");
    assert!(!out.exists());
    // Rechecks: round(4 x 0.5) = 2 cells of the plan again, with recheck 1, after it.
    let plan = dir.path().join("plan.jsonl");
    let mut args = triton_args(&out, &["--plan-only", plan.to_str().unwrap()]);
    let at = args.iter().position(|a| a == "--recheck-fraction").unwrap();
    args[at + 1] = "0.5".into();
    let o = run(&args, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<String> = std::fs::read_to_string(&plan).unwrap().lines().map(str::to_string).collect();
    assert_eq!(&lines[..4], TRITON_PLAN);
    assert_eq!(lines.len(), 6);
    for l in &lines[4..] {
        let main = l.replace("\"recheck\": 1}", "\"recheck\": 0}");
        assert!(l.ends_with("\"recheck\": 1}") && TRITON_PLAN.contains(&main.as_str()), "{l}");
    }
}

#[test]
fn triton_family_options_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let configs = dir.path().join("configs.txt");
    std::fs::write(&configs, "# kept\ntriton_bm64_bn128_bk128_g32_w4_s2\ntriton_bm64_bn128_bk256_g32_w4_s2\n").unwrap();
    let file = format!("--configs={}", configs.display());
    let cases: [(Vec<&str>, &str); 6] = [
        (vec!["--instances", "7"], "--instances 7 names CK kernelIds"),
        (vec!["--split-k", "auto"], "the triton kernel has no split-K"),
        (vec!["--cu-num", "132"], "--family triton plans every config at split-K 0"),
        (vec!["--configs", "triton_bm64_bn128"], "\"triton_bm64_bn128\" is not a triton config name"),
        (vec![file.as_str()], "configs.txt:3: \"triton_bm64_bn128_bk256_g32_w4_s2\": BLOCK_SIZE_K 256"),
        (vec!["--backend", "aiter"], "--family triton and --configs apply to --backend harness"),
    ];
    for (extra, words) in cases {
        let mut args = triton_args(&out, &["--dry-run"]);
        if extra[0].starts_with("--configs") {
            let at = args.iter().position(|a| a == "--configs").unwrap();
            args.drain(at..at + 2);
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let o = run(&args, &[]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && stderr.contains(words), "{extra:?}: {stderr}");
    }
    // --configs belongs to the triton family.
    let o = run(&bench_args(&out, &["--dry-run", "--configs", "kept"]), &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("add --family triton"));
    assert!(!out.exists(), "nothing is written on an error");
}

/// `args` with the value of option `name` replaced by `value`.
fn with_opt(mut args: Vec<String>, name: &str, value: &str) -> Vec<String> {
    let i = args.iter().position(|a| a == name).unwrap();
    args[i + 1] = value.to_string();
    args
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn plan_only_never_replaces_the_journal_or_a_file_it_did_not_write() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let o = run(&with_opt(bench_args(&out, &[]), "--m-set", "1"), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let journal = std::fs::read_to_string(&out).unwrap();
    // The journal itself, by its name, another spelling of it, a link or a hard link to it.
    let link = dir.path().join("link.csv");
    std::os::unix::fs::symlink(&out, &link).unwrap();
    let hard = dir.path().join("hard.csv");
    std::fs::hard_link(&out, &hard).unwrap();
    let dotted = dir.path().join(".").join("j.csv");
    for plan in [&out, &dotted, &link, &hard] {
        let o = run(&bench_args(&out, &["--plan-only", plan.to_str().unwrap()]), &[]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains("is the journal (--out"), "{}", stderr(&o));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), journal, "the journal is unchanged");
    }
    // A journal that does not exist yet.
    let new = dir.path().join("new.csv");
    let o = run(&bench_args(&new, &["--plan-only", new.to_str().unwrap()]), &[]);
    assert!(stderr(&o).contains("is the journal (--out"), "{}", stderr(&o));
    assert!(!new.exists());
    // A file that is not a plan is not replaced; a plan is.
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "my notes\n").unwrap();
    let o = run(&bench_args(&new, &["--plan-only", notes.to_str().unwrap()]), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("exists and is not a plan file written by `synth bench`"), "{}", stderr(&o));
    assert!(stderr(&o).contains("my notes"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my notes\n");
    let plan = dir.path().join("plan.jsonl");
    for _ in 0..2 {
        let o = run(&bench_args(&new, &["--plan-only", plan.to_str().unwrap()]), &[]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(std::fs::read_to_string(&plan).unwrap().lines().count(), PLAN_CELLS);
    }
    assert!(!new.exists());
}

/// The first `rows` rows of a journal of `bench_args` measured with the environment `envs`, and the
/// journal's next row.
fn partial_journal(dir: &Path, name: &str, rows: usize, envs: &[(&str, &str)]) -> (PathBuf, String) {
    let full = dir.join(format!("full-{name}"));
    let o = run(&bench_args(&full, &[]), envs);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&full).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let path = dir.join(name);
    std::fs::write(&path, lines[..=rows].iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    (path, lines[rows + 1].to_string())
}

#[test]
fn a_journal_of_another_device_is_refused_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("measured.log");
    let log_s = log.display().to_string();
    let refused = |path: &Path, args: &[String], want: &[&str]| {
        let before = std::fs::read(path).unwrap();
        let o = run(args, &[("FAKE_LOG", &log_s)]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        for w in want {
            assert!(stderr(&o).contains(w), "{w}: {}", stderr(&o));
        }
        assert!(stderr(&o).contains("pass another --out"), "{}", stderr(&o));
        assert_eq!(std::fs::read(path).unwrap(), before, "the journal is unchanged");
        assert!(!log.exists(), "nothing was measured");
    };
    // One row of another device among this device's rows.
    let (mixed, next) = partial_journal(dir.path(), "mixed.csv", 5, &[]);
    let mut text = std::fs::read_to_string(&mixed).unwrap();
    text.push_str(&format!("{}\n", next.replace("Fake GPU", "Other GPU")));
    std::fs::write(&mixed, text).unwrap();
    let mixed_s = format!("{}:7:", mixed.display());
    refused(&mixed, &bench_args(&mixed, &[]), &[&mixed_s, "\"Other GPU\"", "line 2 is from \"Fake GPU\""]);
    refused(&mixed, &bench_args(&mixed, &["--dry-run"]), &[&mixed_s]);
    // A journal of another device, another runtime version, another CU count.
    let line2 = |p: &Path| format!("{}:2:", p.display());
    let (other, _) = partial_journal(dir.path(), "other.csv", 5, &[("FAKE_DEVICE_NAMES", "0=Other GPU")]);
    refused(&other, &bench_args(&other, &[]), &[&line2(&other), "device differs", "\"Other GPU\""]);
    let (newer, _) = partial_journal(dir.path(), "newer.csv", 5, &[("FAKE_BACKEND", "fake-2.0")]);
    refused(&newer, &bench_args(&newer, &[]), &[&line2(&newer), "backend (runtime and version) differs"]);
    let (mine, _) = partial_journal(dir.path(), "mine.csv", 5, &[]);
    for extra in [&[][..], &["--dry-run"][..]] {
        refused(
            &mine,
            &with_opt(bench_args(&mine, extra), "--cu-num", "304"),
            &[&line2(&mine), "CU count differs", "304"],
        );
    }
    // This device's journal resumes.
    let o = run(&bench_args(&mine, &[]), &[("FAKE_LOG", &log_s)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(log_counts(&log).len(), PLAN_CELLS - 5);
}

#[test]
fn dry_run_and_plan_only_only_read_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let o = run(&bench_args(&out, &[]), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    let torn = &text[..text.len() - 30];
    std::fs::write(&out, torn).unwrap();
    let rows = text.lines().count();
    let o = run(&bench_args(&out, &["--dry-run"]), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "1", "the torn row's cell is still to measure");
    assert!(stderr(&o).contains(&format!("{}:{rows}: the last line has no line end", out.display())), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), torn, "the dry run left the torn line");
    let plan = dir.path().join("plan.jsonl");
    let o = run(&bench_args(&out, &["--plan-only", plan.to_str().unwrap()]), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&plan).unwrap().lines().count(), 1);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), torn, "the plan export left the torn line");
    // An empty journal file stays empty, and no lock file is made beside it.
    let empty = dir.path().join("empty.csv");
    std::fs::write(&empty, "").unwrap();
    for extra in [&["--dry-run"][..], &["--plan-only", plan.to_str().unwrap()][..]] {
        let o = run(&bench_args(&empty, extra), &[]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(std::fs::read(&empty).unwrap(), b"");
    }
    assert!(!dir.path().join("empty.csv.lock").exists());
}

#[test]
fn repeated_instances_are_refused_and_repeated_shapes_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let o = run(&with_opt(bench_args(&out, &[]), "--instances", "7,0,7"), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--instances: kernelId 7 is named twice"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("CellKey"), "{}", stderr(&o));
    assert!(!out.exists());
    // M and (N, K) repeats are planned once and counted once.
    let args =
        with_opt(with_opt(bench_args(&out, &["--dry-run"]), "--m-set", "1,16,1"), "--shapes", "5120:5120,5120:5120");
    let o = run(&args, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), PLAN_CELLS.to_string());
    assert!(stderr(&o).contains(&format!("plan: {PLAN_CELLS} cells (2 shapes x 3 instances")), "{}", stderr(&o));
}

#[test]
fn a_failed_first_run_leaves_no_journal() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sub").join("j.csv");
    let o = run(&bench_args(&out, &[]), &[("FAKE_EXIT", "3")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("PyTorch is not importable"), "{}", stderr(&o));
    assert!(!out.exists(), "no header-only journal is left");
    // Nor the lock file or the directory the run created for them.
    assert!(!dir.path().join("sub").exists(), "the run wrote nothing, so it leaves nothing");
    // An empty file is left empty; a journal with rows keeps them.
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(&out, "").unwrap();
    let o = run(&bench_args(&out, &[]), &[("FAKE_EXIT", "3")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(std::fs::read(&out).unwrap(), b"");
    let o = run(&with_opt(bench_args(&out, &[]), "--m-set", "1"), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    let o = run(&bench_args(&out, &[]), &[("FAKE_EXIT", "3")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
}
