//! Agent loop: engine (lineages, repair limit, trace, resume, determinism), the rule-search task, and the
//! proposer protocols (external command, OpenAI-compatible endpoint).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use synth_engine::engine::{attempt_id, run_loop, LoopConfig, StopReason};
use synth_engine::engine::{Evaluation, ProposalRequest, ProposeError, Proposer, Task};

// ---------------------------------------------------------------------------------------------------
// A toy task for the engine: the candidate is an integer, the score its distance to 1000.

struct Distance {
    evals: AtomicUsize,
    seen: Mutex<Vec<String>>,
}

impl Distance {
    fn new() -> Self {
        Distance { evals: AtomicUsize::new(0), seen: Mutex::new(Vec::new()) }
    }
}

impl Task for Distance {
    fn kind(&self) -> &'static str {
        "distance"
    }
    fn context(&self) -> serde_json::Value {
        serde_json::json!({ "target": "1000" })
    }
    fn evaluate(&self, candidate: &str) -> Evaluation {
        self.evals.fetch_add(1, Ordering::SeqCst);
        self.seen.lock().unwrap().push(candidate.to_string());
        match candidate.trim().parse::<i64>() {
            Ok(v) => Evaluation {
                score: Some((v - 1000).abs() as f64),
                feedback: format!("off by {}", v - 1000),
                details: serde_json::Value::Null,
            },
            Err(e) => Evaluation {
                score: None,
                feedback: format!("1:1: not an integer: {e}"),
                details: serde_json::Value::Null,
            },
        }
    }
    fn baseline(&self) -> Option<String> {
        Some("0".into())
    }
}

/// Steps from the parent toward the target by a slot-dependent amount (deterministic).
struct Stepper;
impl Proposer for Stepper {
    fn name(&self) -> String {
        "stepper".into()
    }
    fn propose(&self, req: &ProposalRequest) -> Result<String, ProposeError> {
        let base: i64 = req.parent.as_ref().and_then(|p| p.candidate.trim().parse().ok()).unwrap_or(0);
        Ok((base + 37 * (req.offspring_index as i64 + 1) + req.iteration as i64).to_string())
    }
}

/// Always returns text the task cannot parse; records the requests it saw.
struct Broken {
    requests: Mutex<Vec<ProposalRequest>>,
}
impl Proposer for Broken {
    fn name(&self) -> String {
        "broken".into()
    }
    fn propose(&self, req: &ProposalRequest) -> Result<String, ProposeError> {
        self.requests.lock().unwrap().push(req.clone());
        Ok(format!("not a number {}", req.iteration))
    }
}

fn cfg(iterations: usize, offspring: usize) -> LoopConfig {
    LoopConfig { iterations, offspring, repair_limit: 2, seed: 7, threads: 2, ..LoopConfig::default() }
}

#[test]
fn engine_improves_and_is_deterministic() {
    let run = || {
        let task = Distance::new();
        let props: Vec<Box<dyn Proposer>> = vec![Box::new(Stepper)];
        run_loop(&task, &props, &cfg(6, 3)).unwrap()
    };
    let a = run();
    let b = run();
    assert_eq!(a.attempts, b.attempts);
    assert_eq!(a.iterations_run, 6);
    assert_eq!(a.attempts.len(), 1 + 6 * 3);
    assert_eq!(a.evaluations, a.attempts.iter().filter(|x| x.duplicate_of.is_none()).count());
    assert_eq!(a.stop, StopReason::Iterations);
    // Slot 0 always continues from the best so far, so the best strictly beats the baseline (1000).
    let best = a.best.unwrap();
    assert!(best.eval.score.unwrap() < 1000.0 - 6.0 * 37.0);
    // Ids are stable and every non-baseline attempt with a parent points at an earlier iteration.
    for x in &a.attempts {
        assert_eq!(x.id, attempt_id(x.iteration, x.slot, 3));
        if let Some(p) = x.parent_id {
            let parent = a.attempts.iter().find(|y| y.id == p).unwrap();
            assert!(parent.iteration < x.iteration);
        }
    }
}

#[test]
fn engine_repair_limit_drops_lineage_and_asks_for_new_strategy() {
    let task = Distance::new();
    let broken = Box::new(Broken { requests: Mutex::new(Vec::new()) });
    let props: Vec<Box<dyn Proposer>> = vec![broken];
    // No baseline success would change parent choice, so use a task whose baseline also fails.
    struct NoBase(Distance);
    impl Task for NoBase {
        fn kind(&self) -> &'static str {
            "nobase"
        }
        fn context(&self) -> serde_json::Value {
            self.0.context()
        }
        fn evaluate(&self, c: &str) -> Evaluation {
            self.0.evaluate(c)
        }
    }
    let task = NoBase(task);
    let c = LoopConfig { iterations: 8, offspring: 1, repair_limit: 2, ..LoopConfig::default() };
    let out = run_loop(&task, &props, &c).unwrap();
    assert!(out.best.is_none());
    let lineages: Vec<usize> = out.attempts.iter().map(|a| a.lineage).collect();
    // Iteration 1 fails, repairs 1 and 2 fail (K = 2) → iteration 4 starts lineage 2, and so on.
    assert_eq!(lineages, vec![1, 1, 1, 2, 2, 2, 3, 3]);
    let parents: Vec<Option<usize>> = out.attempts.iter().map(|a| a.parent_id).collect();
    assert_eq!(parents, vec![None, Some(1), Some(2), None, Some(4), Some(5), None, Some(7)]);
    let dropped = &out.attempts[3];
    assert!(dropped.guidance.contains("new strategy"), "{}", dropped.guidance);
    assert!(dropped.guidance.contains("Lineage 1 was dropped"), "{}", dropped.guidance);
    assert!(dropped.guidance.contains("not an integer"), "{}", dropped.guidance);
    // Repairs carry the failure's reflection (the error with its position).
    assert!(out.attempts[1].guidance.contains("Repair attempt 1 of 2"), "{}", out.attempts[1].guidance);
    assert!(out.attempts[1].guidance.contains("1:1: not an integer"), "{}", out.attempts[1].guidance);
}

#[test]
fn engine_proposer_failure_and_panic_become_feedback() {
    struct Failing;
    impl Proposer for Failing {
        fn name(&self) -> String {
            "failing".into()
        }
        fn propose(&self, req: &ProposalRequest) -> Result<String, ProposeError> {
            if req.offspring_index == 0 {
                Err(ProposeError::Timeout("timed out after 1 s".into()))
            } else {
                panic!("boom")
            }
        }
    }
    let task = Distance::new();
    let props: Vec<Box<dyn Proposer>> = vec![Box::new(Failing)];
    let out = run_loop(&task, &props, &cfg(1, 2)).unwrap();
    assert_eq!(out.attempts.len(), 3);
    assert!(out.attempts[1].eval.feedback.contains("timed out after 1 s"));
    assert!(out.attempts[2].eval.feedback.contains("panicked: boom"));
    assert_eq!(out.best.unwrap().id, 0);
}

#[test]
fn engine_resume_from_truncated_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let props: Vec<Box<dyn Proposer>> = vec![Box::new(Stepper)];

    // Reference: an uninterrupted run of 5 iterations.
    let full_task = Distance::new();
    let full =
        run_loop(&full_task, &props, &LoopConfig { trace: Some(dir.path().join("full.jsonl")), ..cfg(5, 3) }).unwrap();

    // Interrupted run: 3 iterations, then cut the file in the middle of its last line.
    let first = Distance::new();
    run_loop(&first, &props, &LoopConfig { trace: Some(trace.clone()), ..cfg(3, 3) }).unwrap();
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 3 * 3);
    let last = lines[lines.len() - 1];
    let mut cut = lines[..lines.len() - 1].join("\n");
    cut.push('\n');
    cut.push_str(&last[..last.len() / 2]);
    std::fs::write(&trace, &cut).unwrap();
    let kept: Vec<usize> = lines[..lines.len() - 1]
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_u64().unwrap() as usize)
        .collect();

    let second = Distance::new();
    let resumed =
        run_loop(&second, &props, &LoopConfig { trace: Some(trace.clone()), resume: true, ..cfg(5, 3) }).unwrap();
    assert_eq!(resumed.iterations_run, 5);
    assert_eq!(resumed.resumed, kept.len());
    // Exactly the lost attempt and iterations 4 and 5 were evaluated; nothing finished was re-evaluated.
    let mut expected: Vec<String> = full
        .attempts
        .iter()
        .filter(|a| !kept.contains(&a.id) && a.duplicate_of.is_none())
        .map(|a| a.candidate.clone())
        .collect();
    let mut seen = second.seen.lock().unwrap().clone();
    expected.sort();
    seen.sort();
    assert_eq!(seen, expected);
    assert_eq!(resumed.evaluations, expected.len());
    // Same result as the uninterrupted run, and the trace parses completely.
    assert_eq!(resumed.attempts, full.attempts);
    let text = std::fs::read_to_string(&trace).unwrap();
    assert_eq!(text.lines().count(), 1 + 5 * 3);
    for l in text.lines() {
        serde_json::from_str::<serde_json::Value>(l).unwrap();
    }

    // Resuming a complete trace does nothing.
    let third = Distance::new();
    let again =
        run_loop(&third, &props, &LoopConfig { trace: Some(trace.clone()), resume: true, ..cfg(5, 3) }).unwrap();
    assert_eq!(again.evaluations, 0);
    assert_eq!(third.evals.load(Ordering::SeqCst), 0);
    assert_eq!(again.attempts, full.attempts);
}

#[test]
fn engine_resume_rejects_corrupt_middle_line_and_other_offspring() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let props: Vec<Box<dyn Proposer>> = vec![Box::new(Stepper)];
    run_loop(&Distance::new(), &props, &LoopConfig { trace: Some(trace.clone()), ..cfg(2, 2) }).unwrap();
    let err = run_loop(&Distance::new(), &props, &LoopConfig { trace: Some(trace.clone()), resume: true, ..cfg(3, 3) })
        .unwrap_err()
        .to_string();
    assert!(err.contains("offspring"), "{err}");

    // A trace of another task (different baseline) is refused.
    struct OtherBase(Distance);
    impl Task for OtherBase {
        fn kind(&self) -> &'static str {
            "other"
        }
        fn context(&self) -> serde_json::Value {
            self.0.context()
        }
        fn evaluate(&self, c: &str) -> Evaluation {
            self.0.evaluate(c)
        }
        fn baseline(&self) -> Option<String> {
            Some("5".into())
        }
    }
    let err = run_loop(
        &OtherBase(Distance::new()),
        &props,
        &LoopConfig { trace: Some(trace.clone()), resume: true, ..cfg(3, 2) },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("baseline"), "{err}");

    let text = std::fs::read_to_string(&trace).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines[1] = "{garbage".into();
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let err = run_loop(&Distance::new(), &props, &LoopConfig { trace: Some(trace.clone()), resume: true, ..cfg(3, 2) })
        .unwrap_err()
        .to_string();
    assert!(err.contains("t.jsonl:2:"), "{err}");
}

// ---------------------------------------------------------------------------------------------------
// The rule task on a small synthetic latency matrix (built here, independent of any measurement file).

use std::sync::Arc;
use std::time::Duration;
use synth_core::catalog::{Candidate, Catalog};
use synth_core::synthesize::Limits;
use synth_core::table::{Cell, LatencyMatrix, Shape};
use synth_engine::engine::proposers::command::CommandProposer;
use synth_engine::engine::proposers::openai::OpenAiProposer;
use synth_engine::engine::run_loop_with;
use synth_search::search::builtin::BuiltinProposer;
use synth_search::search::task::{score_rule, RuleReflector, RuleSetup, RuleTask};

const MS: [u32; 6] = [1, 16, 64, 256, 1024, 4096];
const LAYERS: [(u32, u32); 2] = [(5120, 5120), (5120, 4096)];
const CANDS: [(i32, u32); 4] = [(0, 0), (4, 0), (4, 1), (7, 0)];

/// Latency model of the synthetic matrix: kernel 0 wins at large M, kernel 4 at small M (split-K 1
/// helps the wider-K layer a little at the smallest M), the default kernel 7 is in between.
fn model_us(m: u32, k: u32, c: (i32, u32)) -> f64 {
    let m = m as f64;
    let scale = if k == 5120 { 1.0 } else { 0.8 };
    scale
        * match c {
            (0, 0) => 20.0 + 0.01 * m,
            (4, 0) => 5.0 + 0.05 * m,
            (4, 1) => {
                if k == 5120 {
                    4.0 + 0.06 * m
                } else {
                    6.5 + 0.06 * m
                }
            }
            _ => 12.0 + 0.02 * m,
        }
}

/// Cells that are not Ok: (M, K, candidate) → Invalid, and one Missing.
fn cell_of(m: u32, k: u32, c: (i32, u32)) -> Cell {
    if m == 4096 && k == 5120 && c == (4, 0) {
        Cell::Invalid("errRatio 0.2".into())
    } else if m == 1024 && k == 4096 && c == (0, 0) {
        Cell::Missing
    } else {
        Cell::Ok(model_us(m, k, c))
    }
}

fn synthetic_matrix() -> LatencyMatrix {
    let shapes: Vec<Shape> = LAYERS.iter().flat_map(|&(n, k)| MS.iter().map(move |&m| Shape::new(m, n, k))).collect();
    let cands: Vec<Candidate> = CANDS.iter().map(|&(id, sk)| Candidate::new(id, sk)).collect();
    let mut mat = LatencyMatrix::new("gfx942", 304, Some("synthetic".into()), shapes.clone(), cands);
    for (s, sh) in shapes.iter().enumerate() {
        for (c, &cand) in CANDS.iter().enumerate() {
            mat.set(s, c, cell_of(sh.m, sh.k, cand));
        }
    }
    mat
}

fn setup_all(max_leaves: usize) -> Arc<RuleSetup> {
    let mat = synthetic_matrix();
    let train: Vec<usize> = (0..mat.shapes.len()).collect();
    let limits = Limits { max_leaves, max_depth: 4, ..Limits::default() };
    Arc::new(RuleSetup::new(Catalog::embedded(), mat, train, None, limits).unwrap())
}

fn name(id: i32) -> String {
    Catalog::embedded().legacy_by_id(id).unwrap().name.clone()
}

/// `if (M <= 64) kernel 4 else kernel 0`, in the C++ form.
fn two_leaf_rule() -> String {
    format!(
        "if (M <= 64) {{\n    return {{{}<DDataType, EDataType>, 0}};\n}} else {{\n    return {{{}<DDataType, EDataType>, 0}};\n}}\n",
        name(4),
        name(0)
    )
}

#[test]
fn rule_task_scores_hand_computed_totals() {
    let setup = setup_all(8);
    let task = RuleTask::new(setup.clone());
    let eval = task.evaluate(&two_leaf_rule());
    // Expected: kernel 4 for M <= 64, kernel 0 above; unusable cells charged the default (7) time.
    let mut total = 0.0;
    let mut oracle = 0.0;
    for &(_, k) in &LAYERS {
        for &m in &MS {
            let pick = if m <= 64 { (4, 0) } else { (0, 0) };
            total += match cell_of(m, k, pick) {
                Cell::Ok(t) => t,
                _ => model_us(m, k, (7, 0)),
            };
            oracle += CANDS.iter().filter_map(|&c| cell_of(m, k, c).us()).fold(f64::INFINITY, f64::min);
        }
    }
    let score = eval.score.expect(&eval.feedback);
    assert!((score - total).abs() < 1e-9, "{score} vs {total}");
    assert!((eval.details["oracle_us"].as_f64().unwrap() - oracle).abs() < 1e-9);
    // The Missing cell (M=1024, K=4096, kernel 0) is a fallback.
    assert_eq!(eval.details["fallbacks"].as_u64(), Some(1));
    assert!(eval.feedback.contains("1 pick(s) of unmeasured or failed cells"), "{}", eval.feedback);
    // Worst shape: M=1024 K=4096 charged 0.8*(12+20.48)=25.984 vs best 0.8*(5+51.2)... compute regret independently.
    let regret = |m: u32, k: u32| {
        let pick = if m <= 64 { (4, 0) } else { (0, 0) };
        let t = cell_of(m, k, pick).us().unwrap_or_else(|| model_us(m, k, (7, 0)));
        t - CANDS.iter().filter_map(|&c| cell_of(m, k, c).us()).fold(f64::INFINITY, f64::min)
    };
    let mut worst: Vec<(f64, u32, u32)> = LAYERS
        .iter()
        .flat_map(|&(_, k)| MS.iter().map(move |&m| (regret(m, k), m, k)))
        .filter(|x| x.0 > 1e-9)
        .collect();
    worst.sort_by(|a, b| b.0.total_cmp(&a.0));
    let first = &eval.details["worst"][0];
    assert_eq!((first["m"].as_u64().unwrap() as u32, first["k"].as_u64().unwrap() as u32), (worst[0].1, worst[0].2));
    assert!((first["regret_us"].as_f64().unwrap() - worst[0].0).abs() < 1e-9);
    assert!(eval.feedback.contains(&format!("M={} N=5120 K={}", worst[0].1, worst[0].2)), "{}", eval.feedback);
    assert!(eval.feedback.contains("[leaf at line"), "{}", eval.feedback);

    // score_rule agrees, and the built-in proposer's fast objective matches it on every neighbour.
    let rule = synth_core::rule::parse_any(&two_leaf_rule(), &setup.catalog).unwrap();
    assert!((score_rule(&setup, &rule).objective - total).abs() < 1e-9);
    let b = BuiltinProposer::new(setup.clone(), 0);
    let nb = b.neighbours(&rule);
    assert!(nb.len() > 5);
    for r in nb.iter().chain(std::iter::once(&rule)) {
        assert!((b.objective(r) - score_rule(&setup, r).objective).abs() < 1e-9);
        assert!(r.num_leaves() <= 8);
    }
}

#[test]
fn rule_task_failures_carry_positions_and_limits() {
    let setup = setup_all(2);
    let task = RuleTask::new(setup.clone());
    let bad = "if (M <= 64) {\n    return {nope, 0};\n} else {\n    return {also_nope, 0};\n}\n";
    let e = task.evaluate(bad);
    assert!(e.score.is_none());
    assert!(e.feedback.contains("2:"), "{}", e.feedback);
    assert_eq!(e.details["stage"], "parse");
    assert_eq!(e.details["line"], 2);
    let three = format!(
        "if (M <= 16) {{ return {{{a}<DDataType, EDataType>, 0}}; }} else if (M <= 64) {{ return {{{b}<DDataType, EDataType>, 0}}; }} else {{ return {{{b}<DDataType, EDataType>, 1}}; }}\n",
        a = name(4),
        b = name(0)
    );
    let e = task.evaluate(&three);
    assert!(e.score.is_none());
    assert!(e.feedback.contains("3 leaves") && e.feedback.contains("at most 2"), "{}", e.feedback);
    let reflection = RuleReflector.reflect(
        &synth_engine::engine::Attempt {
            lineage: 1,
            ..synth_engine::engine::Attempt::new(1, 1, "x", bad.into(), task.evaluate(bad))
        },
        None,
    );
    assert!(reflection.contains("does not parse") && reflection.contains("2:"), "{reflection}");
}

use synth_engine::engine::Reflector;

#[test]
fn builtin_search_reaches_the_oracle_and_is_deterministic() {
    let setup = setup_all(8);
    let run = || {
        let task = RuleTask::new(setup.clone());
        let props: Vec<Box<dyn Proposer>> = vec![Box::new(BuiltinProposer::new(setup.clone(), 3))];
        let c = LoopConfig { iterations: 3, offspring: 4, seed: 3, threads: 2, ..LoopConfig::default() };
        run_loop_with(&task, &props, &RuleReflector, &c).unwrap()
    };
    let a = run();
    let b = run();
    assert_eq!(a.attempts, b.attempts);
    let best = a.best.unwrap();
    // The oracle on this matrix needs at most 8 leaves, so the best rule matches it exactly.
    let oracle = best.eval.details["oracle_us"].as_f64().unwrap();
    assert!(
        (best.eval.score.unwrap() - oracle).abs() < 1e-9,
        "{} vs {oracle}\n{}",
        best.eval.score.unwrap(),
        best.candidate
    );
    // The baseline (default rule) scores the default's total.
    let base = &a.attempts[0];
    let default_total: f64 = LAYERS.iter().flat_map(|&(_, k)| MS.iter().map(move |&m| model_us(m, k, (7, 0)))).sum();
    assert!((base.eval.score.unwrap() - default_total).abs() < 1e-9);
    assert!(a.attempts.iter().all(|x| x.eval.score.is_some()), "built-in proposals never fail here");
}

// ---------------------------------------------------------------------------------------------------
// External command agents.

fn script(dir: &std::path::Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    format!("python3 {}", p.display())
}

#[test]
fn command_agents_tolerate_llm_output_and_failures() {
    let setup = setup_all(8);
    let dir = tempfile::tempdir().unwrap();
    let rule = two_leaf_rule();
    let seen = dir.path().join("request.json");
    let fenced = script(
        dir.path(),
        "fenced.py",
        &format!(
            "import sys, json\nreq = json.load(sys.stdin)\nopen({seen:?}, 'w').write(json.dumps(req))\n\
             print('Sure! Here is a rule that should beat the default:')\nprint('```cpp')\nprint({rule:?}, end='')\nprint('```')\n\
             print('It picks the small-tile kernel for decode shapes.')\n",
            seen = seen.display().to_string()
        ),
    );
    let several = script(
        dir.path(),
        "several.py",
        &format!(
            "import sys\nsys.stdin.read()\nprint('First try:')\nprint('```')\nprint('if (M <= 64) {{ return {{bogus_kernel, 0}}; }} else {{ return {{bogus, 0}}; }}')\nprint('```')\n\
             print('Better:')\nprint('```rust')\nprint({rust:?})\nprint('```')\n",
            rust = format!("if m <= 64 {{ ({}, 0) }} else {{ ({}, 0) }}", name(4), name(0))
        ),
    );
    let garbage =
        script(dir.path(), "garbage.py", "import sys\nsys.stdin.read()\nprint('I am not sure what you mean.')\n");
    let sleepy =
        script(dir.path(), "sleepy.py", "import sys, time\nsys.stdin.read()\ntime.sleep(60)\nprint('too late')\n");
    let failing = script(
        dir.path(),
        "failing.py",
        "import sys\nsys.stdin.read()\nsys.stderr.write('model quota exceeded')\nsys.exit(3)\n",
    );
    let checker = gemm_synth::app::search::rule_checker(setup.catalog.clone());
    let t = Duration::from_secs(2);
    let props: Vec<Box<dyn Proposer>> = vec![
        Box::new(CommandProposer::new(fenced, t, checker.clone())),
        Box::new(CommandProposer::new(several, t, checker.clone())),
        Box::new(CommandProposer::new(garbage, t, checker.clone())),
        Box::new(CommandProposer::new(sleepy, Duration::from_millis(700), checker.clone())),
        Box::new(CommandProposer::new(failing, t, checker.clone())),
    ];
    let task = RuleTask::new(setup.clone());
    let c = LoopConfig { iterations: 1, offspring: 5, threads: 5, ..LoopConfig::default() };
    let out = run_loop_with(&task, &props, &RuleReflector, &c).unwrap();
    let a = &out.attempts;
    assert_eq!(a.len(), 6);
    // 1: fenced code with prose around it.
    assert!(a[1].eval.score.is_some(), "{}", a[1].eval.feedback);
    assert_eq!(a[1].candidate.trim(), rule.trim());
    // The request carried the context: training shapes with latencies, history and guidance.
    let req: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(req["context"]["training_shapes"].as_array().unwrap().len(), 12);
    assert_eq!(req["context"]["training_shapes"][0]["m"], 1);
    assert!(req["context"]["instances"].as_array().unwrap().iter().any(|i| i["id"] == 4));
    assert_eq!(req["history"][0]["proposer"], "baseline");
    assert!(req["messages"][1]["content"].as_str().unwrap().contains("M=16 N=5120 K=5120"));
    // 2: several blocks, the first invalid: the second (Rust form) is taken.
    assert!(a[2].eval.score.is_some(), "{}", a[2].eval.feedback);
    assert!(a[2].candidate.contains("if m <= 64"), "{}", a[2].candidate);
    assert_eq!(a[2].eval.score, a[1].eval.score);
    // 3: garbage → failure feedback listing what was tried.
    assert!(a[3].eval.score.is_none());
    assert!(a[3].eval.feedback.contains("no code block in the output is a valid candidate"), "{}", a[3].eval.feedback);
    assert!(a[3].reflection.contains("No rule was received"), "{}", a[3].reflection);
    // 4: timeout → killed, feedback.
    assert!(a[4].eval.score.is_none());
    assert!(a[4].eval.feedback.contains("timed out"), "{}", a[4].eval.feedback);
    // 5: non-zero exit → status and stderr in the feedback.
    assert!(a[5].eval.score.is_none());
    assert!(
        a[5].eval.feedback.contains("status 3") && a[5].eval.feedback.contains("model quota exceeded"),
        "{}",
        a[5].eval.feedback
    );
}

#[test]
fn command_agent_reports_every_rejected_block() {
    let setup = setup_all(8);
    let dir = tempfile::tempdir().unwrap();
    let cmd = script(
        dir.path(),
        "two_bad.py",
        "import sys\nsys.stdin.read()\nprint('```cpp\\nif (M <= ) { return {x, 0}; } else { return {y, 0}; }\\n```\\ntext\\n```\\nreturn {z, 0};\\n```')\n",
    );
    let p =
        CommandProposer::new(cmd, Duration::from_secs(5), gemm_synth::app::search::rule_checker(setup.catalog.clone()));
    let req = synth_engine::engine::ProposalRequest {
        task_context: RuleTask::new(setup.clone()).context(),
        history: vec![],
        parent: None,
        guidance: String::new(),
        iteration: 1,
        offspring_index: 0,
    };
    let err = p.propose(&req).unwrap_err().to_string();
    assert!(err.contains("code block 1 (cpp) at output line 2: 1:"), "{err}");
    assert!(err.contains("code block 2 at output line 6: 1:"), "{err}");
}

// ---------------------------------------------------------------------------------------------------
// OpenAI-compatible endpoint on a loopback server.

#[test]
fn openai_proposer_talks_to_a_chat_endpoint() {
    let setup = setup_all(8);
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let addr = server.server_addr().to_ip().unwrap();
    let reply_rule = two_leaf_rule();
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for i in 0..2 {
            let mut req = server.recv().unwrap();
            let mut body = String::new();
            req.as_reader().read_to_string(&mut body).unwrap();
            let auth = req.headers().iter().find(|h| h.field.equiv("Authorization")).map(|h| h.value.to_string());
            seen.push((req.url().to_string(), auth, body));
            let resp = if i == 0 {
                let content =
                    format!("Here is an improved rule.\n\n```cpp\n{reply_rule}```\nIt should help decode shapes.");
                let json =
                    serde_json::json!({ "choices": [ { "message": { "role": "assistant", "content": content } } ] });
                tiny_http::Response::from_string(json.to_string()).with_status_code(200)
            } else {
                tiny_http::Response::from_string("{\"error\": \"overloaded\"}").with_status_code(503)
            };
            req.respond(resp).unwrap();
        }
        seen
    });
    let key_env = "GEMM_SYNTH_TEST_OPENAI_KEY";
    std::env::set_var(key_env, "sk-test-123");
    let p = OpenAiProposer::new(
        &format!("http://{addr}/v1/"),
        "rule-writer-7b",
        key_env,
        Duration::from_secs(10),
        gemm_synth::app::search::rule_checker(setup.catalog.clone()),
    );
    let props: Vec<Box<dyn Proposer>> = vec![Box::new(p)];
    let task = RuleTask::new(setup.clone());
    let c = LoopConfig { iterations: 1, offspring: 2, threads: 1, ..LoopConfig::default() };
    let out = run_loop_with(&task, &props, &RuleReflector, &c).unwrap();
    let seen = handle.join().unwrap();
    assert_eq!(seen.len(), 2);
    let (url, auth, body) = &seen[0];
    assert_eq!(url, "/v1/chat/completions");
    assert_eq!(auth.as_deref(), Some("Bearer sk-test-123"));
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["model"], "rule-writer-7b");
    assert_eq!(body["messages"][0]["role"], "system");
    let user = body["messages"][1]["content"].as_str().unwrap();
    for m in MS {
        assert!(user.contains(&format!("M={m} N=5120 K=5120")), "prompt lacks M={m}: {user}");
    }
    assert!(user.contains("#4: 16x256x128") && user.contains("kernel(ID)"), "{user}");
    // One slot got the rule, the other the HTTP error as feedback.
    let ok: Vec<_> = out.attempts.iter().filter(|a| a.iteration == 1 && a.eval.score.is_some()).collect();
    let bad: Vec<_> = out.attempts.iter().filter(|a| a.iteration == 1 && a.eval.score.is_none()).collect();
    assert_eq!((ok.len(), bad.len()), (1, 1));
    assert_eq!(ok[0].candidate.trim(), two_leaf_rule().trim());
    assert!(
        bad[0].eval.feedback.contains("HTTP 503") && bad[0].eval.feedback.contains("overloaded"),
        "{}",
        bad[0].eval.feedback
    );
}

/// An agent that prints its answer, exits and leaves a background child holding stdout: the answer is
/// used (or the timeout reported) without waiting for the child, and the child is killed with the group.
#[test]
fn command_agent_leaving_a_background_child_neither_hangs_nor_leaks_it() {
    let setup = setup_all(8);
    let dir = tempfile::tempdir().unwrap();
    let rule = dir.path().join("rule.txt");
    std::fs::write(&rule, two_leaf_rule()).unwrap();
    let marker = "1000003";
    let cmd = format!("cat {}; sleep {marker} &", rule.display());
    let p =
        CommandProposer::new(cmd, Duration::from_secs(5), gemm_synth::app::search::rule_checker(setup.catalog.clone()));
    let req = synth_engine::engine::ProposalRequest {
        task_context: RuleTask::new(setup.clone()).context(),
        history: vec![],
        parent: None,
        guidance: String::new(),
        iteration: 1,
        offspring_index: 0,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(p.propose(&req)));
    // Generous: only a hang takes this long.
    let answer = rx.recv_timeout(Duration::from_secs(120)).expect("propose hung on the background child");
    assert_eq!(answer.unwrap(), two_leaf_rule());
    let ps = std::process::Command::new("ps").args(["-eo", "args"]).output().unwrap();
    let left = String::from_utf8_lossy(&ps.stdout).lines().filter(|l| l.trim() == format!("sleep {marker}")).count();
    assert_eq!(left, 0, "the background child was left running");
}

/// What a real model and server do, played by a loopback server: an HTTP 400 naming the context length (the
/// proposal is fitted again within it, once, and later proposals keep to it), an answer cut at the token
/// limit, and a code block that is not a rule (handed to the task, whose parse error has a position).
#[test]
fn openai_proposer_refits_after_a_context_refusal_and_reports_cut_answers_and_near_misses() {
    use synth_engine::engine::proposers::prompt::{estimate_tokens, CHAT_OVERHEAD_TOKENS};
    let setup = setup_all(8);
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let addr = server.server_addr().to_ip().unwrap();
    let refusal =
        "{\"error\":{\"message\":\"This model's maximum context length is 6000 tokens. However, you requested \
                   6400 tokens (6400 in your prompt; 0 for the completion). Please reduce your prompt; or completion \
                   length.\",\"type\":\"invalid_request_error\"}}";
    let cut = "Sure:\n```cpp\nif (M <= 64) {\n    return {kernel(4), 0};\n} else if (N <";
    let near_miss = "Here is the program:\n```cpp\n#include <cstdio>\nint main() { return 0; }\n```\nIt is fast.";
    let handle = std::thread::spawn(move || {
        let mut bodies = Vec::new();
        for i in 0..3 {
            let mut req = server.recv().unwrap();
            let mut body = String::new();
            req.as_reader().read_to_string(&mut body).unwrap();
            bodies.push(serde_json::from_str::<serde_json::Value>(&body).unwrap());
            let (status, text) = match i {
                0 => (400, refusal.to_string()),
                1 => (200, serde_json::json!({ "choices": [ { "message": { "content": cut }, "finish_reason": "length" } ],
                                             "usage": { "prompt_tokens": 900, "completion_tokens": 256 } }).to_string()),
                _ => (200, serde_json::json!({ "choices": [ { "message": { "content": near_miss }, "finish_reason": "stop" } ] })
                    .to_string()),
            };
            req.respond(tiny_http::Response::from_string(text).with_status_code(status)).unwrap();
        }
        bodies
    });
    let mut p = OpenAiProposer::new(
        &format!("http://{addr}/v1"),
        "small",
        "GEMM_SYNTH_TEST_NO_KEY",
        Duration::from_secs(10),
        gemm_synth::app::search::rule_checker(setup.catalog.clone()),
    );
    p.max_tokens = 256;
    let task = RuleTask::new(setup.clone());
    let base = task.evaluate(&two_leaf_rule());
    let history = vec![synth_engine::engine::Attempt {
        reflection: "x".repeat(6000),
        ..synth_engine::engine::Attempt::new(0, 0, "baseline", two_leaf_rule(), base.clone())
    }];
    let req = synth_engine::engine::ProposalRequest {
        task_context: task.context(),
        history: history.clone(),
        parent: Some(history[0].clone()),
        guidance: "g".repeat(6000),
        iteration: 1,
        offspring_index: 0,
    };
    // 1: refused, fitted again within 6000 - (400 + 100) tokens, answered with a cut-off rule.
    let first = p.propose_traced(&req);
    let e = first.result.unwrap_err().to_string();
    assert!(e.contains("cut at the token limit") && e.contains("max_tokens 256"), "{e}");
    assert_eq!(first.raw.as_deref(), Some(cut), "the cut answer is kept");
    assert_eq!(first.meta["refused"]["limit"], 6000);
    assert_eq!(first.meta["refused"]["retry_context"], 5500);
    assert_eq!(first.meta["finish_reason"], "length");
    assert_eq!(first.meta["usage"]["prompt_tokens"], 900);
    assert_eq!(p.effective_context(), 5500);
    // 2: the next proposal keeps to the learned context; a program instead of a rule is evaluated, so the
    // task's parse error (with its line) is the feedback.
    let second = p.propose_traced(&req);
    let candidate = second.result.unwrap();
    assert_eq!(candidate, "#include <cstdio>\nint main() { return 0; }\n");
    assert!(second.meta["near_miss"]["rejected"].as_str().unwrap().contains("no code block"), "{}", second.meta);
    let eval = task.evaluate(&candidate);
    assert!(eval.score.is_none() && eval.feedback.contains("parse error at 2:"), "{}", eval.feedback);

    let bodies = handle.join().unwrap();
    let size = |b: &serde_json::Value| -> usize {
        b["messages"].as_array().unwrap().iter().map(|m| estimate_tokens(m["content"].as_str().unwrap())).sum()
    };
    assert_eq!(bodies[0]["max_tokens"], 256);
    assert!(size(&bodies[0]) <= 8192 - 256 - CHAT_OVERHEAD_TOKENS);
    assert!(size(&bodies[0]) > 5500 - 256 - CHAT_OVERHEAD_TOKENS, "the first prompt was already small enough");
    for b in &bodies[1..] {
        assert!(size(b) <= 5500 - 256 - CHAT_OVERHEAD_TOKENS, "{}", size(b));
    }
}

/// A mock chat server for the constraint tests: answers each request with `answer(body)` (status, text)
/// until `n` requests were served, and returns the bodies it saw.
fn constraint_server(
    n: usize,
    answer: impl Fn(&serde_json::Value) -> (u16, String) + Send + 'static,
) -> (String, std::thread::JoinHandle<Vec<serde_json::Value>>) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let addr = server.server_addr().to_ip().unwrap();
    let handle = std::thread::spawn(move || {
        let mut bodies = Vec::new();
        for _ in 0..n {
            let mut req = server.recv().unwrap();
            let mut body = String::new();
            req.as_reader().read_to_string(&mut body).unwrap();
            let body: serde_json::Value = serde_json::from_str(&body).unwrap();
            let (status, text) = answer(&body);
            bodies.push(body);
            req.respond(tiny_http::Response::from_string(text).with_status_code(status)).unwrap();
        }
        bodies
    });
    (format!("http://{addr}/v1"), handle)
}

fn chat_reply(content: &str) -> String {
    serde_json::json!({ "choices": [ { "message": { "content": content }, "finish_reason": "stop" } ] }).to_string()
}

fn is_probe(body: &serde_json::Value) -> bool {
    body["messages"][0]["content"] == "Answer with the word synth-ok."
}

fn constrained_proposer(setup: &Arc<RuleSetup>, url: &str, mode: &str) -> OpenAiProposer {
    let mut p = OpenAiProposer::new(
        url,
        "small",
        "GEMM_SYNTH_TEST_NO_KEY",
        Duration::from_secs(10),
        gemm_synth::app::search::rule_checker(setup.catalog.clone()),
    );
    p.constraint = Some(gemm_synth::app::search::rule_constraint(setup));
    p.constrain = mode.parse().unwrap();
    p
}

fn first_request(task: &RuleTask) -> ProposalRequest {
    ProposalRequest {
        task_context: task.context(),
        history: vec![],
        parent: None,
        guidance: String::new(),
        iteration: 1,
        offspring_index: 0,
    }
}

#[test]
fn openai_proposer_probes_once_and_sends_the_grammar_the_server_honours() {
    let setup = setup_all(8);
    let rule = two_leaf_rule();
    let (url, handle) = constraint_server(3, move |b| match (is_probe(b), b.get("grammar").is_some()) {
        (true, true) => (200, chat_reply("synth-ok")),
        (true, false) => (400, "no grammar".into()),
        (false, _) => (200, chat_reply(&rule)),
    });
    let p = constrained_proposer(&setup, &url, "auto");
    let task = RuleTask::new(setup.clone());
    let req = first_request(&task);
    for _ in 0..2 {
        let out = p.propose_traced(&req);
        assert_eq!(out.result.unwrap().trim(), two_leaf_rule().trim());
        assert_eq!(out.meta["constraint"], "grammar");
    }
    let bodies = handle.join().unwrap();
    // One probe, then two proposals, each carrying the grammar of the rule language over the data.
    assert_eq!(bodies.iter().filter(|b| is_probe(b)).count(), 1);
    let grammar = gemm_synth::app::search::rule_constraint(&setup).gbnf;
    for b in &bodies[1..] {
        assert_eq!(b["grammar"].as_str(), Some(grammar.as_str()));
        assert!(b.get("response_format").is_none());
        // The prompt asks for the bare rule the grammar allows, not a fenced block.
        let user = b["messages"][1]["content"].as_str().unwrap();
        assert!(user.contains("nothing else (no prose, no fence)"), "{user}");
    }
    let item = grammar.lines().find(|l| l.starts_with("item ::= ")).unwrap_or_else(|| panic!("{grammar}"));
    assert!(item.contains("\"kernel(\"") && grammar.contains("\nsplit ::="), "{grammar}");
}

#[test]
fn openai_proposer_falls_back_to_the_schema_form_the_server_honours() {
    // A server that ignores a grammar (answers freely), refuses OpenAI's json_schema form and honours
    // llama-cpp-python's json_object form: the rule comes back as JSON and is scored.
    let setup = setup_all(8);
    let json_rule = synth_core::rule::to_json(&synth_core::rule::parse_any(&two_leaf_rule(), &setup.catalog).unwrap());
    let (url, handle) = constraint_server(4, move |b| {
        let format = b["response_format"]["type"].as_str().unwrap_or("");
        match (is_probe(b), format) {
            (true, "json_object") => (200, chat_reply("{\"probe\": \"synth-ok\"}")),
            (true, "json_schema") => (422, "{\"detail\": \"type must be text or json_object\"}".into()),
            (true, _) => (200, chat_reply("Sure! synth-ok is the word.")),
            (false, _) => (200, chat_reply(&json_rule)),
        }
    });
    let p = constrained_proposer(&setup, &url, "auto");
    let task = RuleTask::new(setup.clone());
    let out = p.propose_traced(&first_request(&task));
    let candidate = out.result.unwrap();
    assert!(out.meta["constraint"].as_str().unwrap().contains("json_object"), "{}", out.meta);
    assert!(task.evaluate(&candidate).score.is_some(), "{candidate}");
    let bodies = handle.join().unwrap();
    let last = bodies.last().unwrap();
    assert_eq!(last["response_format"]["type"], "json_object");
    assert_eq!(last["response_format"]["schema"], gemm_synth::app::search::rule_constraint(&setup).schema);
    assert!(last.get("grammar").is_none());
}

#[test]
fn openai_proposer_goes_on_unconstrained_after_a_refusal_and_sends_nothing_under_none() {
    let setup = setup_all(8);
    let rule = two_leaf_rule();
    // The probe passes, the real (larger) grammar is refused: the same proposal is sent again without it,
    // and later ones never carry it.
    let (url, handle) = constraint_server(4, move |b| match (is_probe(b), b.get("grammar").is_some()) {
        (true, _) => (200, chat_reply("synth-ok")),
        (false, true) => (400, "{\"error\": \"grammar: parse error at rule item\"}".into()),
        (false, false) => (200, chat_reply(&format!("```cpp\n{rule}```"))),
    });
    let p = constrained_proposer(&setup, &url, "grammar");
    let task = RuleTask::new(setup.clone());
    let req = first_request(&task);
    for _ in 0..2 {
        let out = p.propose_traced(&req);
        assert_eq!(out.result.unwrap().trim(), two_leaf_rule().trim());
        assert_eq!(out.meta["constraint"], "none");
    }
    let bodies = handle.join().unwrap();
    assert_eq!(
        bodies.iter().map(|b| (is_probe(b), b.get("grammar").is_some())).collect::<Vec<_>>(),
        [(true, true), (false, true), (false, false), (false, false)]
    );
    // --constrain none: no probe, nothing in the request.
    let (url, handle) = constraint_server(1, move |_| (200, chat_reply(&two_leaf_rule())));
    let p = constrained_proposer(&setup, &url, "none");
    assert!(p.propose_traced(&req).result.is_ok());
    let body = &handle.join().unwrap()[0];
    assert!(!is_probe(body) && body.get("grammar").is_none() && body.get("response_format").is_none());
}
