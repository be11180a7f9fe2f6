//! Generator role: proposers the loop can use. [`knobs`] (local search over the tuning knobs a source
//! declares, no model needed), [`command`] (an external agent process: JSON on stdin, candidate on
//! stdout) and [`openai`] (an OpenAI-compatible chat endpoint); the rule task's own built-in proposer
//! lives in `search::builtin`. The external proposers are task-generic: they render the request
//! with [`build_messages`] / [`agent_input`] and pick the first code block the task's [`Checker`] accepts.

pub mod command;
pub mod knobs;
pub mod openai;

use super::run::clip;
use super::{Attempt, ProposalRequest, Rejection};
use serde_json::json;
use std::fmt::Write as _;
use std::sync::Arc;

/// Syntax check used to pick a candidate among the code blocks of a reply (Err = why it is rejected).
pub type Checker = Arc<dyn Fn(&str) -> Result<(), Rejection> + Send + Sync>;

/// A checker that accepts anything (the first code block wins).
pub fn accept_all() -> Checker {
    Arc::new(|_| Ok(()))
}

/// Successful attempts shown in prompts.
const PROMPT_BEST: usize = 3;
/// Failed attempts shown in prompts.
const PROMPT_FAILURES: usize = 2;

fn attempt_block(out: &mut String, a: &Attempt, with_code: bool) {
    let score = a.eval.score.map(|s| format!("score {s:.4}")).unwrap_or_else(|| "FAILED".into());
    let _ = writeln!(out, "### Attempt {} (iteration {}, {}, {score})", a.id, a.iteration, a.proposer);
    if with_code && !a.candidate.trim().is_empty() {
        let _ = writeln!(out, "```\n{}\n```", a.candidate.trim_end());
    }
    let _ = writeln!(out, "Feedback:\n{}", clip(&a.eval.feedback, 1500));
}

/// System and user messages for a chat model. The task context may carry a rendered prompt
/// (`prompt.system`, `prompt.user`, `prompt.reply`); otherwise the context is included as JSON. The
/// history (best attempts first, then recent failures), the parent and the guidance follow.
pub fn build_messages(req: &ProposalRequest) -> (String, String) {
    let ctx = &req.task_context;
    let p = ctx.get("prompt");
    let text = |key: &str| p.and_then(|p| p.get(key)).and_then(|v| v.as_str()).map(str::to_string);
    let system = text("system").unwrap_or_else(|| {
        "You improve candidates for an optimization task. Each candidate is scored (lower is better).".to_string()
    });
    let mut user = text("user").unwrap_or_else(|| {
        let mut c = ctx.clone();
        if let Some(o) = c.as_object_mut() {
            o.remove("prompt");
        }
        format!("Task context (JSON):\n{}\n", serde_json::to_string_pretty(&c).unwrap_or_default())
    });
    let reply = text("reply").unwrap_or_else(|| "Reply with the complete candidate in one fenced code block.".into());

    let best: Vec<&Attempt> = req.history.iter().filter(|a| a.eval.score.is_some()).take(PROMPT_BEST).collect();
    let failures: Vec<&Attempt> =
        req.history.iter().filter(|a| a.eval.score.is_none()).rev().take(PROMPT_FAILURES).collect();
    if !best.is_empty() {
        let _ = writeln!(user, "\n## Best candidates so far (lower score is better)");
        for a in best {
            attempt_block(&mut user, a, true);
        }
    }
    if !failures.is_empty() {
        let _ = writeln!(user, "\n## Recent failures");
        for a in failures {
            attempt_block(&mut user, a, false);
        }
    }
    let _ = writeln!(user, "\n## This proposal (iteration {}, offspring {})", req.iteration, req.offspring_index);
    match &req.parent {
        Some(parent) if parent.eval.score.is_none() => {
            let _ = writeln!(user, "Repair this failed candidate (attempt {}):", parent.id);
            let _ = writeln!(user, "```\n{}\n```", parent.candidate.trim_end());
        }
        Some(parent) => {
            let _ = writeln!(user, "Improve this candidate (attempt {}):", parent.id);
            let _ = writeln!(user, "```\n{}\n```", parent.candidate.trim_end());
        }
        None => {
            let _ = writeln!(user, "Propose a new candidate from scratch.");
        }
    }
    if !req.guidance.trim().is_empty() {
        let _ = writeln!(user, "Guidance:\n{}", req.guidance.trim_end());
    }
    let _ = writeln!(user, "\n{reply}");
    (system, user)
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
