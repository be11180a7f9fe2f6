//! `synth tune`: the round loop replayed on a small fully measured journal (the answer known), the live
//! path against the protocol test double of the GPU harness (tests/fixtures/fake_harness.py; no GPU here),
//! resumability, `--dry-run` and bad input.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};

use synth_core::catalog::{Candidate, Catalog};
use synth_core::rule::{CmpOp, Cond, Expr, Leaf, Node, Rule, Var};
use synth_core::table::Cell;
use synth_core::{LatencyMatrix, Shape};
use synth_measure::tune::sim::{simulate, SimSpec};
use synth_measure::tune::{Family, Method, Prior};

const FAKE: &str = "tests/fixtures/fake_harness.py";

fn synth(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_synth"));
    c.current_dir(env!("CARGO_MANIFEST_DIR")).args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().expect("synth runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

const MS: [u32; 14] = [1, 2, 4, 8, 16, 24, 32, 48, 64, 128, 256, 512, 1024, 4096];
const LAYERS: [(u32, u32); 2] = [(1024, 4096), (8192, 1024)];
const KERNELS: [i32; 6] = [0, 1, 2, 3, 4, 5];

/// A known answer: on each layer one kernel is best below M = 32, another from 32 to 512, a third above,
/// the rest 30% slower; every cell measured.
fn time(m: u32, layer: usize, kernel: i32) -> f64 {
    let base = 5.0 + f64::from(m) * 0.01;
    let best = match (layer, m) {
        (0, 0..32) => 1,
        (0, 32..=512) => 2,
        (0, _) => 3,
        (_, 0..32) => 4,
        (_, 32..=512) => 5,
        _ => 0,
    };
    if kernel == best {
        base
    } else {
        base * (1.3 + 0.01 * f64::from(kernel))
    }
}

fn known_matrix() -> LatencyMatrix {
    let shapes: Vec<Shape> = LAYERS.iter().flat_map(|&(n, k)| MS.iter().map(move |&m| Shape::new(m, n, k))).collect();
    let cands: Vec<Candidate> = KERNELS.iter().map(|&k| Candidate::new(k, 0)).collect();
    let mut m = LatencyMatrix::new("sm_90", 132, Some("Fake GPU".into()), shapes.clone(), cands);
    for (s, sh) in shapes.iter().enumerate() {
        let layer = LAYERS.iter().position(|&l| l == (sh.n, sh.k)).unwrap();
        for (c, &k) in KERNELS.iter().enumerate() {
            m.set(s, c, Cell::Ok(time(sh.m, layer, k)));
        }
    }
    m
}

/// A prior wrong in a few places, as a prior from another card is: each layer's three kernels, but the
/// first band ends at M = 8 instead of 32 (and the second at 1024 instead of 512, which no M here tells).
fn wrong_prior() -> Rule {
    let lt = |v: Var, x: i64| Cond::cmp(CmpOp::Lt, Expr::Var(v), Expr::Lit(x));
    let bands = |a: i32, b: i32, c: i32| Node::Chain {
        branches: vec![(lt(Var::M, 8), Node::Leaf(Leaf::new(a, 0))), (lt(Var::M, 1024), Node::Leaf(Leaf::new(b, 0)))],
        otherwise: Box::new(Node::Leaf(Leaf::new(c, 0))),
    };
    Rule::new(Node::Chain { branches: vec![(lt(Var::N, 2000), bands(1, 2, 3))], otherwise: Box::new(bands(4, 5, 0)) })
}

fn sim_spec() -> SimSpec {
    let method = Method {
        family: Family::Ck,
        prior: Prior { rule: wrong_prior(), candidates: Vec::new() },
        limits: synth_core::synthesize::Limits { max_leaves: 8, ..Default::default() },
        weight: synth_core::synthesize::Weighting::Log,
        first_ms: 4,
        refine_ms: 3,
        held_out: 1,
        seed: 0,
    };
    SimSpec { method, max_rounds: 8, full_within: None }
}

/// Replayed on a fully measured journal, the tune reaches the quality of the rule trained on every cell
/// while measuring fewer cells than the journal holds.
#[test]
fn replay_reaches_the_full_data_rule_with_fewer_cells() {
    let matrix = known_matrix();
    let r = simulate(&matrix, &Catalog::embedded(), &sim_spec()).unwrap();
    assert!(r.full > 0.999, "the full-data rule finds the known answer: {}", r.full);
    assert!(r.prior < 0.95, "the prior is wrong here: {}", r.prior);
    let last = r.points.last().unwrap();
    assert!(last.of_full > 0.999, "{:?}", r.points);
    assert!(last.cells < r.total_cells, "{} of {}", last.cells, r.total_cells);
    // Rounds only add cells.
    assert!(r.points.windows(2).all(|w| w[0].cells < w[1].cells), "{:?}", r.points);
}

/// Tuning the same answers twice gives the same rounds (what a resumed run relies on).
#[test]
fn the_loop_is_deterministic_given_the_answers() {
    let matrix = known_matrix();
    let a = simulate(&matrix, &Catalog::embedded(), &sim_spec()).unwrap();
    let b = simulate(&matrix, &Catalog::embedded(), &sim_spec()).unwrap();
    assert_eq!(a.points, b.points);
}

/// The journal as harness result lines (`.jsonl`), which `--replay` reads like a CSV journal.
fn write_jsonl(path: &Path) {
    let catalog = Catalog::embedded();
    let matrix = known_matrix();
    let mut text = String::new();
    for (s, sh) in matrix.shapes.iter().enumerate() {
        for (c, cand) in matrix.candidates.iter().enumerate() {
            let name = &catalog.legacy_by_id(cand.kernel_id).unwrap().name;
            let us = matrix.us(s, c).unwrap();
            text.push_str(&format!(
                "{{\"gfx\": \"sm_90\", \"cu_num\": 132, \"M\": {}, \"N\": {}, \"K\": {}, \"libtype\": \"ck\", \
                 \"kernelId\": {}, \"splitK\": 0, \"kernelName\": \"{name}\", \"us\": {us}, \"tflops\": 1.0, \"bw\": 1.0, \
                 \"errRatio\": 0.0, \"us_min\": {us}, \"us_max\": {us}, \"us_p10\": {us}, \"us_p90\": {us}, \"reps\": 20, \
                 \"status\": \"ok\", \"recheck\": 0, \"device\": \"Fake GPU\", \"backend\": \"fake-1.0\", \"timing\": \"graph\"}}\n",
                sh.m, sh.n, sh.k, cand.kernel_id
            ));
        }
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn replay_command_writes_the_rule_and_the_report_all_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let journal = tmp.path().join("known.jsonl");
    write_jsonl(&journal);
    let out = tmp.path().join("out");
    let o = synth(
        &["tune", "--runtime", "aiter", "--replay", journal.to_str().unwrap(), "--out", out.to_str().unwrap()],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let report = std::fs::read_to_string(out.join("tune-report.md")).unwrap();
    assert!(report.contains("cells measured:"), "{report}");
    assert!(stderr(&o).contains("round 1:"), "{}", stderr(&o));
    // Fewer cells than the journal holds (2 layers x 14 M x 6 kernels), every pick a measured kernel.
    let cells: usize = report
        .split("cells measured: ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(cells > 0 && cells < 2 * MS.len() * KERNELS.len(), "{report}");
    let rule = synth_core::rule::parse_json(&std::fs::read_to_string(out.join("rule.json")).unwrap()).unwrap();
    for l in rule.leaves() {
        assert!(KERNELS.contains(&l.kernel_id) && l.split_k == 0, "{l:?}");
    }
    // The output directory is written all at once: the rule in every form beside the report.
    for f in ["rule.json", "tune-report.md", "select_kernel.py"] {
        assert!(out.join(f).is_file(), "{f}");
    }
}

fn live_args<'a>(journal: &'a str, out: &'a str, rounds: &'a str) -> Vec<&'a str> {
    vec![
        "tune",
        "--shapes",
        "5120:5120",
        "--runtime",
        "aiter",
        "--python",
        "python3",
        "--harness",
        FAKE,
        "--journal",
        journal,
        "--out",
        out,
        "--max-rounds",
        rounds,
        "--tolerance",
        "0",
    ]
}

/// The fake harness's log: one line per measured cell key.
fn measured(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_string).collect()
}

/// The live path with the harness test double: interrupted after a round (--max-rounds 1) and run again,
/// no cell is measured twice, and the rerun goes on from the journal.
#[test]
fn live_tune_resumes_from_its_journal_and_measures_no_cell_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let journal = tmp.path().join("tune.csv");
    let log = tmp.path().join("fake.log");
    let (j, out) = (journal.to_str().unwrap(), tmp.path().join("out"));
    let envs = [("FAKE_LOG", log.to_str().unwrap())];
    let first = synth(&live_args(j, out.to_str().unwrap(), "1"), &envs);
    assert!(first.status.success(), "{}", stderr(&first));
    let after_one = measured(&log);
    assert!(!after_one.is_empty());
    let bytes_one = std::fs::read(&journal).unwrap();
    // The same round again: everything is in the journal, nothing is measured, the journal is unchanged.
    let again = synth(&live_args(j, out.to_str().unwrap(), "1"), &envs);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(measured(&log), after_one, "a rerun of a finished round measures nothing");
    assert_eq!(std::fs::read(&journal).unwrap(), bytes_one);
    assert!(
        stderr(&again).contains(&format!("{} cells known from earlier runs", after_one.len())),
        "{}",
        stderr(&again)
    );
    // Going on: more rounds, still no cell twice.
    let more = synth(&live_args(j, out.to_str().unwrap(), "4"), &envs);
    assert!(more.status.success(), "{}", stderr(&more));
    let all = measured(&log);
    assert!(all.len() > after_one.len(), "later rounds measure more");
    let distinct: BTreeSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "a cell measured twice: {all:?}");
    assert!(out.join("tune-report.md").is_file() && out.join("rule.json").is_file());
}

/// A tune interrupted after round 1 and resumed ends with the rule of the same tune run without a stop
/// (the resumed run replays round 1 from its journal instead of training its first round on every cell the
/// journal holds), and so does a rerun of a finished tune over its journal.
#[test]
fn a_resumed_tune_ships_the_rule_of_an_uninterrupted_one() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |journal: &str, out: &str, rounds: &str| {
        let o = synth(&live_args(journal, out, rounds), &[]);
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::read_to_string(Path::new(out).join("rule.json")).unwrap()
    };
    let path = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();
    let straight = run(&path("a.csv"), &path("a"), "3");
    run(&path("b.csv"), &path("b1"), "1");
    let resumed = run(&path("b.csv"), &path("b3"), "3");
    assert_eq!(resumed, straight, "the resumed tune's rule differs from the uninterrupted tune's");
    let again = run(&path("a.csv"), &path("a-again"), "3");
    assert_eq!(again, straight, "a rerun over a finished journal ships another rule");
}

/// `--from-journal` rebuilds a finished tune's rule without running the harness (a harness that cannot
/// start is named), and refuses a tune whose next round the journal does not hold.
#[test]
fn a_finished_tune_is_rebuilt_from_its_journal_without_a_gpu() {
    let tmp = tempfile::tempdir().unwrap();
    let path = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();
    let (journal, live, rebuilt) = (path("t.csv"), path("live"), path("rebuilt"));
    let first = synth(&live_args(&journal, &live, "2"), &[]);
    assert!(first.status.success(), "{}", stderr(&first));
    let offline = |out: &str, rounds: &str| {
        let mut args = live_args(&journal, out, rounds);
        let h = args.iter().position(|a| *a == FAKE).unwrap();
        args[h] = "/nonexistent/harness.py";
        args.push("--from-journal");
        synth(&args, &[])
    };
    let again = offline(&rebuilt, "2");
    assert!(again.status.success(), "{}", stderr(&again));
    let rule = |dir: &str| std::fs::read_to_string(Path::new(dir).join("rule.json")).unwrap();
    assert_eq!(rule(&rebuilt), rule(&live));
    let report = std::fs::read_to_string(Path::new(&rebuilt).join("tune-report.md")).unwrap();
    assert!(report.contains("Rebuilt without a GPU from the journal"), "{report}");
    let further = offline(&path("further"), "3");
    assert!(!further.status.success());
    assert!(stderr(&further).contains("the journal lacks"), "{}", stderr(&further));
    assert!(!Path::new(&path("further")).exists(), "a refused rebuild writes nothing");
}

/// `--dry-run` prints the first round and an estimate; it starts no harness and writes nothing.
#[test]
fn dry_run_plans_without_a_gpu_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = synth(
        &[
            "tune",
            "--model",
            "llama-3.1-8b",
            "--tp",
            "1",
            "--runtime",
            "vllm",
            "--dry-run",
            "--python",
            "/nonexistent/python3",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("round 1:") && text.contains("GPU seconds"), "{text}");
    // Llama-3.1-8B at TP 1 has four layers.
    assert_eq!(text.lines().filter(|l| l.starts_with("layer N=")).count(), 4, "{text}");
    assert!(!out.exists(), "a dry run writes nothing");
}

/// `--shapes-from LOG`: the layers of vLLM's default-config warnings (N and K, no M: at the tuner's M
/// values) become the layers of the plan, each named once; the same log with --model is one error.
#[test]
fn shapes_from_a_runtime_log_are_the_layers_to_tune() {
    let log = "tests/data/runtime-logs/vllm.log";
    let o = synth(&["tune", "--shapes-from", log, "--runtime", "vllm", "--dry-run", "--out", "unused"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let layers: BTreeSet<&str> =
        text.lines().filter_map(|l| l.strip_prefix("layer ")).filter_map(|l| l.split(':').next()).collect();
    // The log's three warnings name N=16384 K=5120 twice and N=5120 K=8192 once; its found-config line for
    // N=7168 K=5120 is not a warning (the fixtures' README).
    assert_eq!(layers, BTreeSet::from(["N=16384 K=5120", "N=5120 K=8192"]), "{text}");
    assert!(!Path::new(env!("CARGO_MANIFEST_DIR")).join("unused").exists());
    let both = [
        "tune",
        "--shapes-from",
        log,
        "--model",
        "llama-3.1-8b",
        "--tp",
        "1",
        "--runtime",
        "vllm",
        "--dry-run",
        "--out",
        "unused",
    ];
    let o = synth(&both, &[]);
    assert!(!o.status.success() && stderr(&o).contains("--shapes-from names the shapes itself"), "{}", stderr(&o));
}

#[test]
fn bad_input_gives_one_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = out.to_str().unwrap();
    let cases: BTreeMap<&str, Vec<&str>> = BTreeMap::from([
        (
            "--budget \"10x\": the unit is s, m or h",
            vec!["tune", "--shapes", "5120:5120", "--runtime", "vllm", "--budget", "10x", "--out", o],
        ),
        (
            "K is not a multiple of 128",
            vec!["tune", "--shapes", "5120:5000", "--runtime", "vllm", "--dry-run", "--out", o],
        ),
        ("give --journal PATH", vec!["tune", "--shapes", "5120:5120", "--runtime", "aiter", "--out", o]),
        ("needs --tp T", vec!["tune", "--model", "llama-3.1-8b", "--runtime", "vllm", "--dry-run", "--out", o]),
        (
            "is outside [0, 1)",
            vec!["tune", "--shapes", "5120:5120", "--runtime", "vllm", "--dry-run", "--tolerance", "2", "--out", o],
        ),
    ]);
    for (want, args) in cases {
        let r = synth(&args, &[]);
        assert!(!r.status.success(), "{args:?}");
        let e = stderr(&r);
        assert!(e.contains(want), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
        assert!(!e.contains("panicked"), "{e}");
    }
    assert!(!out.exists());
}
