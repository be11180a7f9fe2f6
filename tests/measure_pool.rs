//! Many GPUs on CPU: `synth bench --gpus` with the protocol double of the harness
//! (tests/fixtures/fake_harness.py) playing 4 GPUs — every cell written once under worker kills, a killed
//! worker's cells measured by the others, clear errors when every worker is gone or GPUs differ —;
//! `--shard I/N` (the shards partition the plan by shape, whatever the journal holds); `synth merge`
//! (shards merged equal one run; refusals name both files and lines and write nothing); and the AITER
//! backend on several GPUs (its --mp and visible devices, against the fake tuner).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{strs, text};

const FAKE: &str = "tests/fixtures/fake_harness.py";

fn synth() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_synth"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

/// 12 shapes (M in 1..4096 on two layers) x instances 0, 7, 8 with split-K, a quarter rechecked.
fn bench_args(out: &Path, extra: &[&str]) -> Vec<String> {
    let mut v = strs(&[
        "bench",
        "--m-set",
        "1,16,64,256,1024,4096",
        "--shapes",
        "5120:5120,1024:4096",
        "--instances",
        "0,7,8",
        "--cu-num",
        "132",
        "--recheck-fraction",
        "0.25",
        "--python",
        "python3",
        "--harness",
        FAKE,
        "--out",
    ]);
    v.push(out.display().to_string());
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn run(args: &[String], envs: &[(&str, &str)]) -> Output {
    let mut c = synth();
    c.args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    c.env_remove("CUDA_VISIBLE_DEVICES").env_remove("HIP_VISIBLE_DEVICES").env_remove("ROCR_VISIBLE_DEVICES");
    c.output().expect("synth runs")
}

fn ok(o: Output) -> Output {
    assert!(o.status.success(), "{}", text(&o));
    o
}

/// The key (M,N,K,kernelId,splitK,recheck) of each journal row, with its count.
fn journal_keys(path: &Path) -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let cols = ["M", "N", "K", "kernelId", "splitK", "recheck"].map(col);
    let mut keys = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        *keys.entry(cols.iter().map(|&c| f[c]).collect::<Vec<_>>().join(",")).or_insert(0) += 1;
    }
    keys
}

/// The rows of a journal (header left out), sorted.
fn sorted_rows(path: &Path) -> Vec<String> {
    let mut rows: Vec<String> = std::fs::read_to_string(path).unwrap().lines().skip(1).map(String::from).collect();
    rows.sort();
    rows
}

/// The shape (M,N,K) of a key.
fn shape_of(key: &str) -> String {
    key.split(',').take(3).collect::<Vec<_>>().join(",")
}

/// What the fake harness processes logged: per process (GPU, pid) its plan's keys and the keys it started.
#[derive(Debug, Default)]
struct WorkerLog {
    /// (gpu, pid, plan keys) in start order.
    plans: Vec<(String, u32, Vec<String>)>,
    /// (gpu, pid, key) in order.
    cells: Vec<(String, u32, String)>,
}

fn worker_log(path: &Path) -> WorkerLog {
    let mut log = WorkerLog::default();
    for l in std::fs::read_to_string(path).unwrap_or_default().lines() {
        let f: Vec<&str> = l.split(' ').collect();
        let (gpu, pid) = (f[1].to_string(), f[2].parse().unwrap());
        match f[0] {
            "plan" => log.plans.push((gpu, pid, f[3..].iter().map(|s| s.to_string()).collect())),
            "cell" => log.cells.push((gpu, pid, f[3].to_string())),
            other => panic!("worker log line {other}"),
        }
    }
    log
}

/// A one-worker run of the plan (the reference the many-GPU runs are compared with).
fn reference(dir: &Path) -> std::path::PathBuf {
    let out = dir.join("one.csv");
    ok(run(&bench_args(&out, &[]), &[]));
    out
}

fn assert_each_once(keys: &BTreeMap<String, usize>, want: &BTreeMap<String, usize>) {
    assert_eq!(keys.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "the journal's cells");
    let twice: Vec<_> = keys.iter().filter(|(_, &n)| n != 1).collect();
    assert!(twice.is_empty(), "cells written more than once: {twice:?}");
}

#[test]
fn four_gpus_measure_the_plan_once_each_shape_on_one_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let one = reference(dir.path());
    let out = dir.path().join("four.csv");
    let log = dir.path().join("workers.log");
    let o = ok(run(
        &bench_args(&out, &["--gpus", "0,1,2,3"]),
        &[("FAKE_DEVICES", "4"), ("FAKE_WORKER_LOG", log.to_str().unwrap())],
    ));
    let msg = text(&o);
    assert!(msg.contains("workers: GPU 0: ") && msg.contains(", GPU 3: "), "{msg}");
    // The same rows, byte for byte, as one worker writes (the fake's latencies are deterministic).
    assert_each_once(&journal_keys(&out), &journal_keys(&one));
    assert_eq!(sorted_rows(&out), sorted_rows(&one));
    let w = worker_log(&log);
    // One harness process per GPU, each with its own GPU visible, all four used.
    let gpus: Vec<&str> = w.plans.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(gpus.iter().copied().collect::<BTreeSet<_>>(), BTreeSet::from(["0", "1", "2", "3"]));
    assert_eq!(w.plans.len(), 4, "{:?}", w.plans);
    // Every cell of a shape, rechecks included, on one GPU.
    let mut gpu_of_shape: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (gpu, _, key) in &w.cells {
        gpu_of_shape.entry(shape_of(key)).or_default().insert(gpu.clone());
    }
    assert_eq!(gpu_of_shape.len(), 12);
    assert!(gpu_of_shape.values().all(|g| g.len() == 1), "{gpu_of_shape:?}");
    // Shares balanced to within the largest shape's cells.
    let sizes: Vec<usize> = w.plans.iter().map(|p| p.2.len()).collect();
    let mut per_shape: BTreeMap<String, usize> = BTreeMap::new();
    for k in journal_keys(&one).keys() {
        *per_shape.entry(shape_of(k)).or_default() += 1;
    }
    let heaviest = *per_shape.values().max().unwrap();
    assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= heaviest, "{sizes:?}");
}

/// Kills the worker processes of `gpus` (SIGKILL, from outside) once each has started `after` cells.
fn kill_workers_mid_run(child: &mut std::process::Child, log: &Path, gpus: &[&str], after: usize) -> Vec<u32> {
    let start = Instant::now();
    let mut killed = Vec::new();
    while killed.len() < gpus.len() {
        assert!(start.elapsed() < Duration::from_secs(120), "the workers made no progress");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before the kills");
        let w = worker_log(log);
        for gpu in gpus {
            let Some((_, pid, _)) = w.plans.iter().find(|p| p.0 == *gpu) else { continue };
            if killed.contains(pid) || w.cells.iter().filter(|c| c.1 == *pid).count() < after {
                continue;
            }
            let st = Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
            assert!(st.success(), "kill {pid}");
            killed.push(*pid);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    killed
}

fn wait_bounded(mut child: std::process::Child, limit: Duration) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("synth bench hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The keys of the plans started after each GPU's first (the re-dealt cells).
fn later_plans(w: &WorkerLog) -> Vec<(String, Vec<String>)> {
    let mut seen = BTreeSet::new();
    w.plans.iter().filter(|p| !seen.insert(p.0.clone())).map(|p| (p.0.clone(), p.2.clone())).collect()
}

/// The numbers N in each "its N unfinished cells" of the output.
fn moved_counts(msg: &str) -> Vec<usize> {
    msg.split("its ").skip(1).filter_map(|s| s.split(' ').next()?.parse().ok()).collect()
}

#[test]
fn two_workers_killed_mid_run_lose_and_repeat_no_cell() {
    let dir = tempfile::tempdir().unwrap();
    let one = reference(dir.path());
    let out = dir.path().join("four.csv");
    let log = dir.path().join("workers.log");
    let mut child = synth()
        .args(bench_args(&out, &["--gpus", "0,1,2,3"]))
        .env("FAKE_DEVICES", "4")
        .env("FAKE_DELAY_S", "0.1")
        .env("FAKE_WORKER_LOG", &log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let killed = kill_workers_mid_run(&mut child, &log, &["1", "2"], 2);
    let o = wait_bounded(child, Duration::from_secs(180));
    let msg = text(&o);
    assert!(o.status.success(), "{msg}");
    assert!(msg.contains("GPU 1 failed: the harness was killed by signal"), "{msg}");
    assert!(msg.contains("GPU 2 failed: the harness was killed by signal"), "{msg}");
    assert_each_once(&journal_keys(&out), &journal_keys(&one));
    assert_eq!(sorted_rows(&out), sorted_rows(&one));

    let w = worker_log(&log);
    let share =
        |gpu: &str| -> BTreeSet<String> { w.plans.iter().find(|p| p.0 == gpu).unwrap().2.iter().cloned().collect() };
    let killed_share: BTreeSet<String> = share("1").union(&share("2")).cloned().collect();
    let later = later_plans(&w);
    // Only the surviving GPUs started further harness processes, and only with the killed workers' cells.
    assert!(!later.is_empty(), "nothing was re-dealt: {:?}", w.plans);
    assert!(later.iter().all(|(g, _)| g == "0" || g == "3"), "{later:?}");
    let moved: BTreeSet<String> = later.iter().flat_map(|(_, keys)| keys.iter().cloned()).collect();
    assert!(moved.is_subset(&killed_share));
    assert_eq!(moved.len(), later.iter().map(|(_, k)| k.len()).sum::<usize>(), "a cell re-dealt twice");
    // What the killed workers had not finished is exactly what the others measured for them; the cells they
    // had finished were not measured again.
    for pid in &killed {
        let started: BTreeSet<&String> = w.cells.iter().filter(|c| c.1 == *pid).map(|c| &c.2).collect();
        assert!(started.len() >= 2);
        let gpu = &w.plans.iter().find(|p| p.1 == *pid).unwrap().0;
        for key in share(gpu) {
            if !started.contains(&key) {
                assert!(moved.contains(&key), "GPU {gpu}'s unstarted cell {key} was not re-dealt");
            }
        }
    }
    let others: BTreeSet<&String> = w.cells.iter().filter(|c| !killed.contains(&c.1)).map(|c| &c.2).collect();
    let finished_by_killed: Vec<&String> =
        w.cells.iter().filter(|c| killed.contains(&c.1)).map(|c| &c.2).filter(|k| !moved.contains(*k)).collect();
    assert!(finished_by_killed.len() >= 2);
    assert!(finished_by_killed.iter().all(|k| !others.contains(k)), "a finished cell was measured again");
    // Each failure reports what it moved: together at least the cells re-dealt (a cell moved to GPU 2 and then
    // moved again when GPU 2 died counts twice).
    assert!(moved_counts(&msg).iter().sum::<usize>() >= moved.len(), "{msg}");
}

#[test]
fn a_worker_that_dies_after_three_cells_has_the_rest_of_its_share_redealt() {
    let dir = tempfile::tempdir().unwrap();
    let one = reference(dir.path());
    let out = dir.path().join("four.csv");
    let log = dir.path().join("workers.log");
    let o = ok(run(
        &bench_args(&out, &["--gpus", "0,1,2,3"]),
        &[("FAKE_DEVICES", "4"), ("FAKE_KILL_GPU", "1:3"), ("FAKE_WORKER_LOG", log.to_str().unwrap())],
    ));
    let msg = text(&o);
    assert_each_once(&journal_keys(&out), &journal_keys(&one));
    let w = worker_log(&log);
    let first = &w.plans.iter().find(|p| p.0 == "1").unwrap().2;
    // GPU 1 measured its first 3 cells (in plan order); the other share.len() - 3 went to GPUs 0, 2, 3.
    let want = first.len() - 3;
    assert_eq!(moved_counts(&msg), vec![want], "{msg}");
    let later = later_plans(&w);
    let moved: Vec<String> = later.iter().flat_map(|(_, k)| k.iter().cloned()).collect();
    assert_eq!(moved.iter().collect::<BTreeSet<_>>(), first[3..].iter().collect::<BTreeSet<_>>());
    assert!(later.iter().all(|(g, _)| g != "1"));
    assert_eq!(w.plans.iter().filter(|p| p.0 == "1").count(), 1, "a failed GPU takes no more work");
    assert!(msg.contains("GPU 1 failed: the harness was killed by signal"), "{msg}");
    assert!(msg.contains(&format!("its {want} unfinished cells: re-dealt to GPU ")), "{msg}");
}

#[test]
fn every_worker_gone_is_one_error_and_a_rerun_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let one = reference(dir.path());
    let out = dir.path().join("four.csv");
    let log = dir.path().join("workers.log");
    let o = run(
        &bench_args(&out, &["--gpus", "0,1,2,3"]),
        &[("FAKE_DEVICES", "4"), ("FAKE_KILL_GPU", "0:1,1:1,2:1,3:1"), ("FAKE_WORKER_LOG", log.to_str().unwrap())],
    );
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains("every GPU worker failed"), "{msg}");
    assert!(msg.contains("the 4 cells measured in this run are in the journal: run again to resume"), "{msg}");
    for g in 0..4 {
        assert!(msg.contains(&format!("  GPU {g}: the harness was killed by signal")), "{msg}");
    }
    let first = journal_keys(&out);
    assert_eq!(first.len(), 4);
    assert!(first.values().all(|&n| n == 1));
    // The resumed run measures the rest, on two GPUs, and none of the four again.
    std::fs::remove_file(&log).unwrap();
    let o = ok(run(
        &bench_args(&out, &["--gpus", "0,3"]),
        &[("FAKE_DEVICES", "4"), ("FAKE_WORKER_LOG", log.to_str().unwrap())],
    ));
    assert!(text(&o).contains("4 already in"), "{}", text(&o));
    assert_each_once(&journal_keys(&out), &journal_keys(&one));
    let again: BTreeSet<String> = worker_log(&log).cells.into_iter().map(|c| c.2).collect();
    assert!(first.keys().all(|k| !again.contains(k)));
}

#[test]
fn a_cell_that_kills_its_worker_stops_the_run_after_the_retries() {
    let dir = tempfile::tempdir().unwrap();
    let one = reference(dir.path());
    let poison = journal_keys(&one).keys().nth(5).unwrap().clone();
    let out = dir.path().join("four.csv");
    let o = run(
        &bench_args(&out, &["--gpus", "0,1,2,3", "--worker-retries", "1"]),
        &[("FAKE_DEVICES", "4"), ("FAKE_KILL_CELL", &poison)],
    );
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    let f: Vec<&str> = poison.split(',').collect();
    let cell = format!("cell M={} N={} K={} kernelId {} splitK {}", f[0], f[1], f[2], f[3], f[4]);
    assert!(msg.contains(&cell), "{cell}: {msg}");
    assert!(msg.contains("more than --worker-retries 1 retries, so the run stopped"), "{msg}");
    // Two workers were lost to it (the first, and the one it was dealt to), no more.
    assert_eq!(msg.matches(" failed: the harness was killed by signal").count(), 1, "{msg}");
    let keys = journal_keys(&out);
    assert!(!keys.contains_key(&poison));
    assert!(keys.values().all(|&n| n == 1));
}

#[test]
fn gpus_that_differ_or_do_not_exist_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let o =
        run(&bench_args(&out, &["--gpus", "0,1,2,3"]), &[("FAKE_DEVICES", "4"), ("FAKE_DEVICE_NAMES", "2=Other GPU")]);
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(
        msg.contains("GPU 2 is \"Other GPU\" (sm_90, 132 CUs/SMs") && msg.contains("but GPU 0 is \"Fake GPU\""),
        "{msg}"
    );
    assert!(!out.exists(), "nothing was measured, no journal is left");

    let o = run(&bench_args(&out, &["--gpus", "0,7"]), &[("FAKE_DEVICES", "4")]);
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains("GPU 7 (--gpus)") && msg.contains("no GPU found"), "{msg}");

    let mut c = synth();
    c.args(bench_args(&out, &["--gpus", "0,2"])).env("FAKE_DEVICES", "4").env("CUDA_VISIBLE_DEVICES", "0,1");
    let o = c.output().unwrap();
    assert!(
        text(&o).contains("GPU 2 is not among the GPUs this environment allows (CUDA_VISIBLE_DEVICES=0,1)"),
        "{}",
        text(&o)
    );

    let o = run(&bench_args(&out, &["--worker-retries", "3"]), &[]);
    assert!(text(&o).contains("--worker-retries applies to --gpus"), "{}", text(&o));
    // With --gpus the dry run shows the deal.
    let o = ok(run(&bench_args(&dir.path().join("new.csv"), &["--gpus", "0,1", "--dry-run"]), &[]));
    assert!(text(&o).contains("workers: GPU 0: ") && !dir.path().join("new.csv").exists(), "{}", text(&o));
}

/// The plan cells of `args` (JSON lines of --plan-only) as sorted strings.
fn plan_cells(out: &Path, extra: &[&str]) -> Vec<String> {
    let plan = out.with_extension("plan.jsonl");
    let mut args = bench_args(out, extra);
    args.extend(["--plan-only".to_string(), plan.display().to_string()]);
    ok(run(&args, &[]));
    std::fs::read_to_string(&plan).unwrap().lines().map(String::from).collect()
}

fn shape_of_json(line: &str) -> (u64, u64, u64) {
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    (v["M"].as_u64().unwrap(), v["N"].as_u64().unwrap(), v["K"].as_u64().unwrap())
}

#[test]
fn shards_partition_the_plan_by_shape() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("absent.csv");
    let full = plan_cells(&out, &[]);
    assert!(full.len() > 100);
    for n in 1..=5u32 {
        let parts: Vec<Vec<String>> = (1..=n).map(|i| plan_cells(&out, &["--shard", &format!("{i}/{n}")])).collect();
        let mut union: Vec<String> = parts.iter().flatten().cloned().collect();
        union.sort();
        let mut want = full.clone();
        want.sort();
        assert_eq!(union, want, "shards of {n}: the union is the plan, no cell twice");
        let mut owner: BTreeMap<(u64, u64, u64), usize> = BTreeMap::new();
        for (i, part) in parts.iter().enumerate() {
            for line in part {
                assert_eq!(*owner.entry(shape_of_json(line)).or_insert(i), i, "a shape in two shards of {n}");
            }
            // Each shard keeps plan order.
            let pos: Vec<usize> = part.iter().map(|l| full.iter().position(|f| f == l).unwrap()).collect();
            assert!(pos.windows(2).all(|w| w[0] < w[1]), "shard {}/{n} out of plan order", i + 1);
        }
        if n >= 2 {
            assert!(parts.iter().all(|p| !p.is_empty()), "12 shapes leave no shard of {n} empty");
        }
    }
    let o = run(&bench_args(&out, &["--shard", "0/4", "--dry-run"]), &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("expected I/N with 1 <= I <= N"), "{}", text(&o));
}

#[test]
fn a_shard_is_the_same_whatever_the_journal_holds() {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("j.csv");
    let second = plan_cells(&dir.path().join("absent.csv"), &["--shard", "2/2"]);
    // The journal holds all of shard 1 and the first 5 cells of shard 2 (a run stopped midway).
    ok(run(&bench_args(&j, &["--shard", "1/2"]), &[]));
    let o = run(&bench_args(&j, &["--shard", "2/2", "--cell-timeout", "2"]), &[("FAKE_HANG_AFTER", "5")]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("shard 2/2: "), "{}", text(&o));
    assert!(plan_cells(&j, &["--shard", "1/2"]).is_empty(), "shard 1 is done");
    // Shard 2 is still computed on the whole plan: what is left of it is its cells less the five measured.
    assert_eq!(plan_cells(&j, &["--shard", "2/2"]), second[5..].to_vec());
    ok(run(&bench_args(&j, &["--shard", "2/2"]), &[]));
    let o = ok(run(&bench_args(&j, &["--dry-run"]), &[]));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0", "the two shards measured the whole plan");
}

/// Runs shard `i`/`n` (or the whole plan) into `out` with extra environment.
fn shard_run(out: &Path, shard: Option<&str>, envs: &[(&str, &str)]) {
    let extra: Vec<&str> = shard.map(|s| vec!["--shard", s]).unwrap_or_default();
    ok(run(&bench_args(out, &extra), envs));
}

fn merge(inputs: &[&Path], out: &Path) -> Output {
    let mut c = synth();
    c.arg("merge").args(inputs).arg("--out").arg(out);
    c.output().unwrap()
}

#[test]
fn merged_shards_equal_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let one = reference(dir.path());
    let parts: Vec<_> = (1..=3).map(|i| dir.path().join(format!("part{i}.csv"))).collect();
    for (i, p) in parts.iter().enumerate() {
        shard_run(p, Some(&format!("{}/3", i + 1)), &[]);
    }
    let m = dir.path().join("merged.csv");
    let o = ok(merge(&[&parts[0], &parts[1], &parts[2]], &m));
    assert!(text(&o).contains(&format!("into {}: {} rows", m.display(), journal_keys(&one).len())), "{}", text(&o));
    assert_eq!(sorted_rows(&m), sorted_rows(&one));
    assert_eq!(
        std::fs::read_to_string(&m).unwrap().lines().next(),
        std::fs::read_to_string(&one).unwrap().lines().next()
    );
    // The order of the inputs does not matter, and the result is a journal a bench resumes as complete.
    let m2 = dir.path().join("merged2.csv");
    ok(merge(&[&parts[2], &parts[0], &parts[1]], &m2));
    assert_eq!(std::fs::read(&m).unwrap(), std::fs::read(&m2).unwrap());
    let o = ok(run(&bench_args(&m, &["--dry-run"]), &[]));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0");
    // Merging into an existing journal: part1 absorbs the others.
    ok(merge(&[&parts[0], &parts[1], &parts[2]], &parts[0]));
    assert_eq!(std::fs::read(&parts[0]).unwrap(), std::fs::read(&m).unwrap());
    // A journal merged with a byte-for-byte copy of itself is written once.
    let copy = dir.path().join("copy.csv");
    std::fs::copy(&parts[1], &copy).unwrap();
    let o = ok(merge(&[&parts[1], &copy], &dir.path().join("self.csv")));
    assert!(text(&o).contains("held byte for byte the same by two journals written once"), "{}", text(&o));
    assert_eq!(sorted_rows(&dir.path().join("self.csv")), sorted_rows(&parts[1]));
}

/// The line numbers `a:N and b:M` name in a merge error.
fn named_lines(msg: &str, a: &Path, b: &Path) -> (usize, usize) {
    let pa = format!("{}:", a.display());
    let rest = &msg[msg.find(&pa).unwrap_or_else(|| panic!("{pa} not in {msg}")) + pa.len()..];
    let n: usize = rest.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap();
    let pb = format!("{}:", b.display());
    let rest = &msg[msg.find(&pb).unwrap_or_else(|| panic!("{pb} not in {msg}")) + pb.len()..];
    let m: usize = rest.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap();
    (n, m)
}

fn line(path: &Path, n: usize) -> String {
    std::fs::read_to_string(path).unwrap().lines().nth(n - 1).unwrap().to_string()
}

#[test]
fn merge_refuses_other_devices_software_and_conflicting_cells_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.csv");
    shard_run(&a, Some("1/2"), &[]);
    let out = dir.path().join("out.csv");
    let refused = |inputs: &[&Path], want: &str| -> String {
        let o = merge(inputs, &out);
        let msg = text(&o);
        assert_eq!(o.status.code(), Some(1), "{msg}");
        assert!(msg.contains(want), "{want}: {msg}");
        assert!(!out.exists(), "a refused merge wrote {}", out.display());
        msg
    };
    // Another device.
    let other = dir.path().join("other.csv");
    shard_run(&other, Some("2/2"), &[("FAKE_DEVICE_NAMES", "0=Other GPU")]);
    let msg = refused(&[&a, &other], "device differs from");
    assert_eq!(named_lines(&msg, &other, &a), (2, 2), "{msg}");
    assert!(msg.contains("\"Other GPU\" (sm_90, 132 CUs, backend \"fake-1.0\") against \"Fake GPU\""), "{msg}");
    // Another runtime version.
    let newer = dir.path().join("newer.csv");
    shard_run(&newer, Some("2/2"), &[("FAKE_BACKEND", "fake-2.0")]);
    refused(&[&a, &newer], "backend (runtime and version) differs");
    // One cell measured twice with different results (overlapping runs).
    let full = dir.path().join("full.csv");
    shard_run(&full, None, &[("FAKE_SCALE", "0=1.1")]);
    let msg = refused(&[&a, &full], "hold different measurements of one cell");
    let (la, lf) = named_lines(&msg, &a, &full);
    let key = |l: &str| {
        l.split(',')
            .enumerate()
            .filter(|(i, _)| [2, 3, 4, 5, 6, 7, 22].contains(i))
            .map(|(_, f)| f.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(key(&line(&a, la)), key(&line(&full, lf)), "the lines named hold one cell: {msg}");
    assert_ne!(line(&a, la), line(&full, lf));
    // A torn last line (an interrupted run), and a journal named twice.
    let torn = dir.path().join("torn.csv");
    let text_b = std::fs::read_to_string(&other).unwrap();
    std::fs::write(&torn, &text_b[..text_b.len() - 9]).unwrap();
    let rows = text_b.lines().count();
    let msg = refused(&[&a, &torn], "the last line has no line end");
    assert!(msg.contains(&format!("{}:{rows}:", torn.display())), "{msg}");
    refused(&[&a, &a], "is given twice");
    // An existing output that is not among the inputs is left alone.
    std::fs::write(&out, "mine\n").unwrap();
    let o = merge(&[&a], &out);
    assert!(text(&o).contains("exists and is not one of the journals merged"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "mine\n");
    std::fs::remove_file(&out).unwrap();
    // A journal a measurement run is writing is refused.
    let busy = dir.path().join("busy.csv");
    let mut child = synth()
        .args(bench_args(&busy, &[]))
        .env("FAKE_HANG_AFTER", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !std::fs::read_to_string(format!("{}.lock", busy.display())).is_ok_and(|t| t.starts_with("pid")) {
        assert!(start.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = merge(&[&a, &busy], &out);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(text(&o).contains("is in use by a measurement run (pid"), "{}", text(&o));
    assert!(!out.exists());
}

const FAKE_AITER: &str = "tests/fixtures/fake_aiter";

/// `synth bench --backend aiter` on 8 shapes.
fn aiter_args(out: &Path, extra: &[&str]) -> Vec<String> {
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
        "--libtype",
        "ck",
        "--recheck-fraction",
        "0.25",
        "--out",
    ]);
    v.push(out.display().to_string());
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

#[test]
fn the_aiter_tuner_gets_the_gpus_and_mp() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    let log = dir.path().join("tuner.log");
    ok(run(&aiter_args(&out, &["--gpus", "0,2,5"]), &[("FAKE_TUNER_LOG", log.to_str().unwrap())]));
    let runs: Vec<serde_json::Value> =
        std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(runs.len(), 2, "main pass and recheck pass");
    for r in &runs {
        let argv: Vec<&str> = r["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        let at = argv.iter().position(|a| *a == "--mp").expect("--mp passed");
        assert_eq!(argv[at + 1], "3");
        assert_eq!(r["HIP_VISIBLE_DEVICES"], "0,2,5");
        assert_eq!(r["mp_gpus"], 3, "the tuner's process pool spans the three GPUs");
    }
    // Without --gpus nothing changes: no --mp, the environment as it was.
    let plain = dir.path().join("plain.csv");
    let log2 = dir.path().join("tuner2.log");
    ok(run(&aiter_args(&plain, &[]), &[("FAKE_TUNER_LOG", log2.to_str().unwrap())]));
    let first: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&log2).unwrap().lines().next().unwrap()).unwrap();
    assert!(!first["argv"].as_array().unwrap().iter().any(|a| a == "--mp"));
    assert!(first["HIP_VISIBLE_DEVICES"].is_null());
    assert_eq!(sorted_rows(&out).len(), sorted_rows(&plain).len());

    let o = run(&aiter_args(&out, &["--gpus", "0,1", "--mp", "3"]), &[]);
    assert!(text(&o).contains("--mp 3 and --gpus 0,1 disagree"), "{}", text(&o));
    let o = run(&aiter_args(&dir.path().join("x.csv"), &["--gpus", "0,9"]), &[]);
    assert!(text(&o).contains("--gpus 0,9 names 2 GPUs but PyTorch") && text(&o).contains("sees 1"), "{}", text(&o));
    let o = run(&aiter_args(&dir.path().join("x.csv"), &["--gpus", "0", "--worker-retries", "1"]), &[]);
    assert!(text(&o).contains("--worker-retries applies to --backend harness"), "{}", text(&o));
}

#[test]
fn aiter_shards_split_the_shapes_and_merge_into_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one.csv");
    ok(run(&aiter_args(&one, &[]), &[]));
    let parts: Vec<_> = (1..=3).map(|i| dir.path().join(format!("p{i}.csv"))).collect();
    for (i, p) in parts.iter().enumerate() {
        let o = ok(run(&aiter_args(p, &["--shard", &format!("{}/3", i + 1)]), &[]));
        assert!(text(&o).contains(&format!("shard {}/3: ", i + 1)), "{}", text(&o));
    }
    let shapes = |p: &Path| -> BTreeSet<String> { journal_keys(p).keys().map(|k| shape_of(k)).collect() };
    let all: Vec<BTreeSet<String>> = parts.iter().map(|p| shapes(p)).collect();
    assert!(all[0].is_disjoint(&all[1]) && all[1].is_disjoint(&all[2]) && all[0].is_disjoint(&all[2]));
    let m = dir.path().join("m.csv");
    ok(merge(&[&parts[0], &parts[1], &parts[2]], &m));
    // The fake tuner's times are deterministic: the shards together are the one run, rechecks included.
    assert_eq!(sorted_rows(&m), sorted_rows(&one));
}

#[test]
fn a_shard_on_several_gpus_is_that_shard() {
    let dir = tempfile::tempdir().unwrap();
    let alone = dir.path().join("alone.csv");
    shard_run(&alone, Some("2/3"), &[]);
    let spread = dir.path().join("spread.csv");
    ok(run(&bench_args(&spread, &["--shard", "2/3", "--gpus", "1,3"]), &[("FAKE_DEVICES", "4")]));
    assert_eq!(sorted_rows(&spread), sorted_rows(&alone));
}

#[test]
fn gpu_ids_are_indices_or_uuids_compared_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.csv");
    for (gpus, want) in [
        ("0,00", "GPU 0 is named twice (entries 1 and 2)"),
        ("GPU-8932f937-d72c,gpu-8932F937-D72C", "is not a GPU id"),
        ("GPU-8932f937-d72c,GPU-8932F937-D72C", "GPU GPU-8932F937-D72C is named twice"),
        ("a", "--gpus: a is not a GPU id"),
        ("0x0", "--gpus: 0x0 is not a GPU id"),
        ("999999999999999999999", "--gpus: 999999999999999999999 is not a GPU id"),
        ("GPU-", "--gpus: GPU- is not a GPU id"),
    ] {
        let o = run(&bench_args(&out, &["--gpus", gpus, "--dry-run"]), &[]);
        assert_eq!(o.status.code(), Some(1), "{gpus}: {}", text(&o));
        assert!(text(&o).contains(want), "{gpus}: {}", text(&o));
    }
    // An index is printed as a number; UUIDs as given.
    let o = ok(run(&bench_args(&out, &["--gpus", "00,01", "--dry-run"]), &[]));
    assert!(text(&o).contains("workers: GPU 0: ") && text(&o).contains(", GPU 1: "), "{}", text(&o));
    let o = ok(run(&bench_args(&out, &["--gpus", "GPU-8932f937-d72c,MIG-0e5b1f2c-9a6d", "--dry-run"]), &[]));
    assert!(text(&o).contains("workers: GPU GPU-8932f937-d72c: "), "{}", text(&o));
}

#[test]
fn merge_names_an_input_that_is_not_a_journal() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.csv");
    shard_run(&a, Some("1/2"), &[]);
    let out = dir.path().join("out.csv");
    let empty = dir.path().join("empty.csv");
    std::fs::write(&empty, "").unwrap();
    let o = merge(&[&empty, &a], &out);
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains(&format!("{}:1: the file is empty, not a journal", empty.display())), "{msg}");
    assert!(!msg.contains("--out"), "advice about --out for an input: {msg}");
    let notes = dir.path().join("notes.csv");
    std::fs::write(&notes, "a,b\n1,2\n").unwrap();
    let msg = text(&merge(&[&a, &notes], &out));
    assert!(msg.contains(&format!("{}:1: header is `a,b`, not a journal's", notes.display())), "{msg}");
    assert!(!msg.contains("--out"), "advice about --out for an input: {msg}");
    assert!(!out.exists());
}

#[test]
fn a_worker_killed_in_the_middle_of_a_row_is_a_worker_failure_and_its_cells_are_redealt() {
    let dir = tempfile::tempdir().unwrap();
    let one = reference(dir.path());
    let out = dir.path().join("torn.csv");
    let o = ok(run(&bench_args(&out, &["--gpus", "0,1"]), &[("FAKE_DEVICES", "2"), ("FAKE_TEAR_GPU", "0:2")]));
    let msg = text(&o);
    // Every cell once, GPU 1's finished rows kept: the torn row is not a parse error that ends the run.
    assert_each_once(&journal_keys(&out), &journal_keys(&one));
    assert!(msg.contains("GPU 0 failed: the harness was killed by signal 9 (SIGKILL)"), "{msg}");
    assert!(msg.contains("its output ended in the middle of a line"), "{msg}");
    assert!(msg.contains("re-dealt to GPU 1"), "{msg}");
}

#[test]
fn a_harness_that_delivers_every_cell_and_does_not_exit_is_stopped_without_loss() {
    let dir = tempfile::tempdir().unwrap();
    let one = reference(dir.path());
    for gpus in [None, Some("0,1")] {
        let out = dir.path().join(format!("linger-{}.csv", gpus.is_some()));
        let mut args = bench_args(&out, &["--cell-timeout", "2"]);
        if let Some(g) = gpus {
            args.extend(strs(&["--gpus", g]));
        }
        let started = std::time::Instant::now();
        let o = ok(run(&args, &[("FAKE_DEVICES", "2"), ("FAKE_LINGER_S", "60")]));
        assert!(started.elapsed() < Duration::from_secs(40), "waited for the lingering harness");
        assert!(text(&o).contains("delivered every cell but had not exited"), "{}", text(&o));
        assert_each_once(&journal_keys(&out), &journal_keys(&one));
    }
}

#[test]
fn a_probe_that_reports_no_cus_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("zero.csv");
    let mut args = bench_args(&out, &[]);
    let at = args.iter().position(|a| a == "--cu-num").unwrap();
    args.drain(at..at + 2);
    let o = run(&args, &[("FAKE_CU", "0")]);
    assert!(!o.status.success());
    let msg = text(&o);
    assert!(msg.contains("cu_num 0: the device's CU/SM count is at least 1"), "{msg}");
    assert!(!out.exists(), "nothing was written");
}
