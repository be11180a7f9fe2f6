//! What each proposer of a run achieved, from its attempts: how many proposals gave a candidate, how many
//! of those the task could read, how many scored, how many beat their parent, and what the calls cost
//! (tokens and seconds, where the proposer reports them in [`Attempt::agent`]).

use super::Attempt;
use std::collections::BTreeMap;

/// One proposer's figures over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProposerStats {
    pub proposer: String,
    /// Attempts it made (duplicates included).
    pub proposals: usize,
    /// Proposals that gave a candidate (the others failed before evaluation: no code, HTTP error, ...).
    pub candidates: usize,
    /// Candidates the task could read: every candidate except those whose evaluation stopped at reading
    /// them (`details.stage` "parse" for rules).
    pub parsed: usize,
    /// Candidates that were scored.
    pub valid: usize,
    /// Scored candidates better (lower) than their parent's score, or than the baseline's when they had
    /// no scored parent.
    pub better_than_parent: usize,
    /// Token counts the server reported (`usage`), summed.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Seconds spent proposing, summed over proposals (they may overlap in time).
    pub propose_s: f64,
    /// Answers cut at the token limit (`finish_reason` "length").
    pub cut: usize,
}

/// Per proposer (in order of first appearance), the baseline left out.
pub fn proposer_stats(attempts: &[Attempt]) -> Vec<ProposerStats> {
    let by_id: BTreeMap<usize, &Attempt> = attempts.iter().map(|a| (a.id, a)).collect();
    let baseline = by_id.get(&0).filter(|a| a.iteration == 0).and_then(|a| a.eval.score);
    let mut out: Vec<ProposerStats> = Vec::new();
    for a in attempts.iter().filter(|a| a.iteration > 0) {
        let i = match out.iter().position(|s| s.proposer == a.proposer) {
            Some(i) => i,
            None => {
                out.push(ProposerStats { proposer: a.proposer.clone(), ..Default::default() });
                out.len() - 1
            }
        };
        let s = &mut out[i];
        s.proposals += 1;
        let stage = a.eval.details.get("stage").and_then(|v| v.as_str()).unwrap_or("");
        if stage != "propose" {
            s.candidates += 1;
            if stage != "parse" {
                s.parsed += 1;
            }
        }
        if let Some(score) = a.eval.score {
            s.valid += 1;
            let parent = a.parent_id.and_then(|p| by_id.get(&p)).and_then(|p| p.eval.score).or(baseline);
            if parent.is_some_and(|p| score < p) {
                s.better_than_parent += 1;
            }
        }
        let num = |path: &str| a.agent.pointer(path).and_then(|v| v.as_u64()).unwrap_or(0);
        s.prompt_tokens += num("/usage/prompt_tokens");
        s.completion_tokens += num("/usage/completion_tokens");
        s.propose_s += a.agent.get("propose_s").and_then(|v| v.as_f64()).unwrap_or(0.0);
        s.cut += usize::from(a.agent.get("finish_reason").and_then(|v| v.as_str()) == Some("length"));
    }
    out
}

impl std::fmt::Display for ProposerStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} proposals, {} with a candidate, {} parsed, {} valid, {} better than the parent",
            self.proposer, self.proposals, self.candidates, self.parsed, self.valid, self.better_than_parent
        )?;
        if self.prompt_tokens + self.completion_tokens > 0 || self.propose_s > 0.0 {
            write!(
                f,
                "; {} prompt + {} completion tokens, {} cut at the token limit, {:.1} s proposing",
                self.prompt_tokens, self.completion_tokens, self.cut, self.propose_s
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Evaluation;
    use serde_json::json;

    fn a(id: usize, proposer: &str, parent: Option<usize>, score: Option<f64>, stage: &str) -> Attempt {
        let eval = Evaluation { score, feedback: String::new(), details: json!({ "stage": stage }) };
        Attempt {
            lineage: 1,
            parent_id: parent,
            agent: json!({ "usage": { "prompt_tokens": 100, "completion_tokens": 7 }, "propose_s": 1.5,
                           "finish_reason": if id == 3 { "length" } else { "stop" } }),
            ..Attempt::new(id, usize::from(id > 0), proposer, String::new(), eval)
        }
    }

    #[test]
    fn counts_follow_the_stages_and_parents() {
        let attempts = vec![
            a(0, "baseline", None, Some(10.0), "scored"),
            a(1, "llm", None, Some(9.0), "scored"),    // better than the baseline
            a(2, "llm", Some(1), Some(9.5), "scored"), // worse than its parent
            a(3, "llm", None, None, "propose"),        // no candidate
            a(4, "llm", Some(3), None, "parse"),       // a candidate that does not parse
            a(5, "builtin", Some(2), Some(9.4), "scored"), // better than its parent 2
            a(6, "llm", Some(1), None, "limits"),      // parsed, not valid
        ];
        let s = proposer_stats(&attempts);
        assert_eq!(s.len(), 2);
        let llm = &s[0];
        assert_eq!((llm.proposals, llm.candidates, llm.parsed, llm.valid, llm.better_than_parent), (5, 4, 3, 2, 1));
        assert_eq!((llm.prompt_tokens, llm.completion_tokens, llm.cut), (500, 35, 1));
        assert!((llm.propose_s - 7.5).abs() < 1e-9);
        assert_eq!((s[1].proposer.as_str(), s[1].better_than_parent), ("builtin", 1));
        assert!(llm.to_string().contains("5 proposals, 4 with a candidate, 3 parsed, 2 valid, 1 better"));
    }
}
