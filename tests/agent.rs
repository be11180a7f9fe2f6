//! Agent loop: engine (lineages, repair limit, trace, resume, determinism), the rule-search task, and the
//! proposer protocols (external command, OpenAI-compatible endpoint).

use gemm_synth::agent::engine::{attempt_id, run_loop, LoopConfig, StopReason};
use gemm_synth::agent::{Evaluation, ProposalRequest, Proposer, Task};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

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
            Err(e) => Evaluation { score: None, feedback: format!("1:1: not an integer: {e}"), details: serde_json::Value::Null },
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
    fn propose(&self, req: &ProposalRequest) -> Result<String, String> {
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
    fn propose(&self, req: &ProposalRequest) -> Result<String, String> {
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
        fn propose(&self, req: &ProposalRequest) -> Result<String, String> {
            if req.offspring_index == 0 {
                Err("timed out after 1 s".into())
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
    let full = run_loop(&full_task, &props, &LoopConfig { trace: Some(dir.path().join("full.jsonl")), ..cfg(5, 3) })
        .unwrap();

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
    let resumed = run_loop(&second, &props, &LoopConfig { trace: Some(trace.clone()), resume: true, ..cfg(5, 3) })
        .unwrap();
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
    let again = run_loop(&third, &props, &LoopConfig { trace: Some(trace.clone()), resume: true, ..cfg(5, 3) })
        .unwrap();
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

    let text = std::fs::read_to_string(&trace).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines[1] = "{garbage".into();
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let err = run_loop(&Distance::new(), &props, &LoopConfig { trace: Some(trace.clone()), resume: true, ..cfg(3, 2) })
        .unwrap_err()
        .to_string();
    assert!(err.contains("t.jsonl:2:"), "{err}");
}
