//! The propose → evaluate → reflect → select loop, generic over the task. Two tasks use it: GEMM
//! selection rules (`rule_task`) and GEAK-style kernel rewriting (`rewrite`). Candidates are always text
//! (a rule in C++/Rust/JSON form, or a whole rewritten source file).

pub mod extract;
pub mod process;
pub mod proposers;
pub mod run;
pub mod stats;
pub mod trace;

pub use run::{
    attempt_id, clip, first_line, joined_lines, run_loop, run_loop_with, DefaultReflector, LoopConfig, LoopOutcome,
    Reflector, StopReason,
};

use serde::{Deserialize, Serialize};

/// Result of evaluating one candidate.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Evaluation {
    /// Lower is better (total latency in µs for rules, kernel µs for rewrites). None = the candidate
    /// failed (parse/validation/build/run/mismatch); `feedback` then says why.
    pub score: Option<f64>,
    /// Human/LLM-readable feedback: totals, worst shapes with regret, errors with positions, build logs.
    pub feedback: String,
    /// Task-specific structured details (kept in the trace).
    #[serde(default)]
    pub details: serde_json::Value,
}

/// A task the loop can optimize.
pub trait Task: Sync {
    /// Short identifier written into the trace ("rule", "rewrite").
    fn kind(&self) -> &'static str;
    /// Static context handed to every proposer (instances, features, shapes, latencies, the original
    /// source, ...). History and feedback are added by the engine.
    fn context(&self) -> serde_json::Value;
    /// Evaluate one candidate. Must never panic on bad text: every failure becomes `score: None`.
    fn evaluate(&self, candidate: &str) -> Evaluation;
    /// The starting point (e.g. the original kernel source, or the default rule), evaluated first.
    fn baseline(&self) -> Option<String> {
        None
    }
    /// Whether `evaluate` gives the same result for the same text every time (a score computed from data,
    /// not a timed run): a resumed trace's attempts are then evaluated again and must agree.
    fn deterministic(&self) -> bool {
        false
    }
}

/// One entry of the history shown to proposers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Attempt {
    pub iteration: usize,
    pub lineage: usize,
    pub proposer: String,
    pub candidate: String,
    pub eval: Evaluation,
    /// Reflection: guidance derived from this attempt's failure or regret.
    pub reflection: String,
    /// Stable id within a run: 0 for the baseline, then `1 + (iteration - 1) * offspring + slot`.
    #[serde(default)]
    pub id: usize,
    /// Offspring slot (0..offspring) that produced the attempt.
    #[serde(default)]
    pub slot: usize,
    /// Id of the attempt this one was proposed from (None: a fresh strategy or the baseline).
    #[serde(default)]
    pub parent_id: Option<usize>,
    /// The guidance the proposer was given.
    #[serde(default)]
    pub guidance: String,
    /// Set when the candidate text equals an earlier attempt's; its evaluation was reused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<usize>,
    /// What the agent answered, as it answered it (a model's whole reply: prose, fences, a cut-off
    /// answer), kept whether or not a candidate could be taken from it. None for proposers whose answer
    /// is the candidate itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// How the proposal was made: the seconds it took (`propose_s`) and what the proposer reports (an
    /// LLM's token counts, finish reason, prompt budget). Null when nothing was recorded.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub agent: serde_json::Value,
}

impl Attempt {
    /// An attempt `id` of `iteration` by `proposer`: its candidate and evaluation, with no reflection yet,
    /// lineage 0 in slot 0, no parent, guidance, duplicate, raw answer or agent record. Every attempt is
    /// built from this; the loop sets the plan's lineage, slot, parent and guidance on it (struct update
    /// syntax: `Attempt { lineage, ..Attempt::new(..) }`).
    pub fn new(
        id: usize,
        iteration: usize,
        proposer: impl Into<String>,
        candidate: String,
        eval: Evaluation,
    ) -> Attempt {
        Attempt {
            iteration,
            lineage: 0,
            proposer: proposer.into(),
            candidate,
            eval,
            reflection: String::new(),
            id,
            slot: 0,
            parent_id: None,
            guidance: String::new(),
            duplicate_of: None,
            raw: None,
            agent: serde_json::Value::Null,
        }
    }
}

/// What a proposer sees each iteration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProposalRequest {
    pub task_context: serde_json::Value,
    /// Evaluated candidates so far, successful ones sorted by score ascending, then failures.
    pub history: Vec<Attempt>,
    /// The lineage this proposal continues (a repair of `parent`) or None for a fresh strategy.
    pub parent: Option<Attempt>,
    /// Reflection for this proposal (why the parent failed / where it loses time).
    pub guidance: String,
    pub iteration: usize,
    pub offspring_index: usize,
}

/// Why a proposal produced no candidate. The engine writes it into the attempt's feedback (the text is
/// the message alone; the kind is for callers that branch on it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    /// The agent could not be started or reached (spawn failure, connection error, request encoding).
    #[error("{0}")]
    Unavailable(String),
    /// The agent took longer than its timeout and was stopped.
    #[error("{0}")]
    Timeout(String),
    /// The agent ran and failed (non-zero exit, HTTP error status, malformed reply, a panic).
    #[error("{0}")]
    Failed(String),
    /// The reply holds no candidate the task's checker accepts (each block's rejection is listed).
    #[error("{0}")]
    NoCandidate(String),
    /// The proposer has nothing (more) to offer: a replay list ran out, every variant is already known.
    #[error("{0}")]
    Exhausted(String),
}

/// Why a task's checker rejects a code block (the position and reason, as the parser reports it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Rejection(pub String);

/// A proposal with what the engine keeps beside it in the trace.
#[derive(Debug, Clone)]
pub struct Proposal {
    /// The candidate, or why there is none.
    pub result: Result<String, ProposeError>,
    /// The agent's raw answer ([`Attempt::raw`]).
    pub raw: Option<String>,
    /// Details of the call ([`Attempt::agent`]): a JSON object, or null.
    pub meta: serde_json::Value,
}

impl From<Result<String, ProposeError>> for Proposal {
    fn from(result: Result<String, ProposeError>) -> Proposal {
        Proposal { result, raw: None, meta: serde_json::Value::Null }
    }
}

/// Generator role. `propose` may fail (timeout, garbage output); the engine turns that into
/// reflection feedback, never a crash.
pub trait Proposer: Send + Sync {
    fn name(&self) -> String;
    fn propose(&self, req: &ProposalRequest) -> Result<String, ProposeError>;
    /// The proposal with the agent's raw answer and call details; the engine calls this one. Proposers
    /// that talk to a model override it; the default wraps [`Proposer::propose`].
    fn propose_traced(&self, req: &ProposalRequest) -> Proposal {
        self.propose(req).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_attempt_writes_only_the_trace_fields_every_attempt_has() {
        let eval = Evaluation { score: Some(1.5), feedback: "f".into(), details: serde_json::Value::Null };
        let a = Attempt::new(3, 2, "p", "c".into(), eval);
        let json = serde_json::to_value(&a).unwrap();
        let mut keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "candidate",
                "eval",
                "guidance",
                "id",
                "iteration",
                "lineage",
                "parent_id",
                "proposer",
                "reflection",
                "slot"
            ]
        );
        assert_eq!((a.id, a.iteration, a.lineage, a.slot, a.proposer.as_str()), (3, 2, 0, 0, "p"));
        assert_eq!(serde_json::from_value::<Attempt>(json).unwrap(), a);
    }
}
