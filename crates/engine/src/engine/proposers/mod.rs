//! Generator role: proposers the loop can use. [`knobs`] (local search over the tuning knobs a source
//! declares, no model needed), [`command`] (an external agent process: JSON on stdin, candidate on
//! stdout) and [`openai`] (an OpenAI-compatible chat endpoint); the rule task's own built-in proposer
//! lives in `search::builtin`. The external proposers are task-generic: they render the request
//! with [`build_messages`] / [`agent_input`] (a chat model's within its context: [`prompt`]) and pick the
//! first code block the task's [`Checker`] accepts. [`constrain`] holds the decoding constraints (a GBNF
//! grammar, a JSON schema) an OpenAI-compatible request may carry.

pub mod command;
pub mod constrain;
pub mod knobs;
pub mod openai;
pub mod prompt;

pub use prompt::{build_messages, fit_messages, Budget, Fitted};

use super::{ProposalRequest, Rejection};
use serde_json::json;
use std::sync::Arc;

/// Syntax check used to pick a candidate among the code blocks of a reply (Err = why it is rejected).
pub type Checker = Arc<dyn Fn(&str) -> Result<(), Rejection> + Send + Sync>;

/// A checker that accepts anything (the first code block wins).
pub fn accept_all() -> Checker {
    Arc::new(|_| Ok(()))
}

/// The JSON an external agent command reads on stdin: the task context, the history, the parent,
/// the guidance, the last feedback (the parent's, else the most recent attempt's), and the rendered
/// chat messages (so a thin wrapper can forward them to a model).
pub fn agent_input(req: &ProposalRequest) -> serde_json::Value {
    let last_feedback = req
        .parent
        .as_ref()
        .map(|p| p.eval.feedback.clone())
        .or_else(|| req.history.iter().max_by_key(|a| a.id).map(|a| a.eval.feedback.clone()));
    let (system, user) = build_messages(req);
    json!({
        "context": req.task_context,
        "history": req.history,
        "parent": req.parent,
        "guidance": req.guidance,
        "last_feedback": last_feedback,
        "iteration": req.iteration,
        "offspring_index": req.offspring_index,
        "messages": [
            { "role": "system", "content": system },
            { "role": "user", "content": user },
        ],
    })
}
