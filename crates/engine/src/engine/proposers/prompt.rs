//! Chat prompts that fit a model's context. The user message is assembled from parts, each with a token
//! estimate, and the parts are kept in a stated order until the budget (the context, less the reply's
//! `max_tokens` and the chat template's overhead) is spent:
//!
//! 1. always: the system message, the task's fixed text (`prompt.user`: for rules the limits, the instance
//!    catalog and the feature list), the proposal's header with its parent candidate, and the reply format
//!    — when these alone do not fit, the proposal fails with an error naming the sizes;
//! 2. the guidance (the reflection on the parent), cut to what is left when it does not fit whole;
//! 3. the best candidate so far, then the latest failure, then the other history entries (best first);
//! 4. as many rows of the task's table (`prompt.table`: for rules the training shapes' latencies) as fit,
//!    in the table's `keep_order` (spread over the table, so a partial table still covers it), shown in
//!    table order with a note saying how many were left out.
//!
//! Tokens are estimated from bytes ([`estimate_tokens`]): one token per byte, an upper bound for every
//! byte-level BPE tokenizer (each token stands for at least one byte), so a prompt the estimate lets through
//! is never refused for its length. Measured on SmolLM2's tokenizer with this crate's rule prompts it
//! over-counts by 16–250% per part (1.16 bytes per token on the densest latency rows, 1.2 on instance
//! names, 1.3–1.5 on whole prompts; README, "A real model in the loop"). Without a budget
//! ([`build_messages`]) every part is kept.

use crate::engine::run::clip;
use crate::engine::{Attempt, ProposalRequest};
use std::fmt::Write as _;

/// The estimate counts one token per this many tenths of a byte: `tokens = ceil(10 · bytes / 10)`, one
/// per byte (see the module documentation for why, and for the measured ratios).
pub const BYTES_PER_TOKEN_TENTHS: usize = 10;

/// Tokens the chat template adds around two messages and the assistant's turn (role markers, separators;
/// ChatML uses 11 for two messages), with room to spare for other templates.
pub const CHAT_OVERHEAD_TOKENS: usize = 48;

/// Feedback shown per history entry when the prompt has a budget (without one: 1500 characters).
const BUDGET_FEEDBACK_CHARS: usize = 800;
/// Successful attempts shown in prompts.
const PROMPT_BEST: usize = 3;
/// Failed attempts shown in prompts.
const PROMPT_FAILURES: usize = 2;

/// A conservative token count of `text`: its length in bytes (module documentation).
pub fn estimate_tokens(text: &str) -> usize {
    (text.len() * 10).div_ceil(BYTES_PER_TOKEN_TENTHS)
}

/// The longest prefix of `text` (cut at a character boundary, "…" appended when cut) whose estimate is at
/// most `tokens`; empty when not even the mark fits.
pub fn clip_to_tokens(text: &str, tokens: usize) -> String {
    if estimate_tokens(text) <= tokens {
        return text.to_string();
    }
    let max_bytes = tokens * BYTES_PER_TOKEN_TENTHS / 10;
    let mark = "…";
    if max_bytes < mark.len() {
        return String::new();
    }
    let mut end = max_bytes - mark.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{mark}", &text[..end])
}

/// The context a prompt must fit: the model's context window and the tokens kept for its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The model's context window in tokens (prompt and reply together).
    pub context_tokens: usize,
    /// Tokens reserved for the reply (the request's `max_tokens`).
    pub reply_tokens: usize,
}

impl Budget {
    /// Tokens the two messages may take: the context less the reply and [`CHAT_OVERHEAD_TOKENS`].
    pub fn prompt_tokens(&self) -> usize {
        self.context_tokens.saturating_sub(self.reply_tokens).saturating_sub(CHAT_OVERHEAD_TOKENS)
    }
}

/// A prompt assembled within a budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    pub system: String,
    pub user: String,
    /// The estimate of both messages (at most `limit`).
    pub estimate: usize,
    /// Tokens the messages were allowed (None: no budget).
    pub limit: Option<usize>,
    /// Rows of the task's table kept, and how many it has.
    pub rows_kept: usize,
    pub rows_total: usize,
    /// History entries kept, and how many the request offered.
    pub history_kept: usize,
    pub history_total: usize,
    /// Whether the guidance was cut to fit.
    pub guidance_cut: bool,
}

/// One part of the user message.
struct Part {
    /// Position in the message (render order).
    pos: (usize, usize),
    text: String,
    /// None: always kept; else parts are kept by ascending (priority, rank).
    keep: Option<(u8, usize)>,
    /// Section whose header is written before the first kept part of it.
    section: Option<usize>,
    /// A history entry or a table row (for the counts).
    kind: PartKind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum PartKind {
    Fixed,
    History,
    Row,
}

impl Part {
    /// A part that is always kept, at `pos`.
    fn fixed(pos: (usize, usize), text: String) -> Part {
        Part { pos, text, keep: None, section: None, kind: PartKind::Fixed }
    }
}

const SEC_TABLE: usize = 0;
const SEC_BEST: usize = 1;
const SEC_FAILURES: usize = 2;

fn attempt_block(a: &Attempt, with_code: bool, feedback_chars: usize) -> String {
    let mut out = String::new();
    let score = a.eval.score.map(|s| format!("score {s:.4}")).unwrap_or_else(|| "FAILED".into());
    let _ = writeln!(out, "### Attempt {} (iteration {}, {}, {score})", a.id, a.iteration, a.proposer);
    if with_code && !a.candidate.trim().is_empty() {
        let _ = writeln!(out, "```\n{}\n```", a.candidate.trim_end());
    }
    let _ = writeln!(out, "Feedback:\n{}", clip(&a.eval.feedback, feedback_chars));
    out
}

/// System and user messages with every part kept (command agents and tests; no budget).
pub fn build_messages(req: &ProposalRequest) -> (String, String) {
    match fit_messages(req, None) {
        Ok(f) => (f.system, f.user),
        // Without a budget nothing can fail to fit.
        Err(e) => (String::new(), e),
    }
}

/// System and user messages for `req` within `budget` (None: every part), kept in the order the module
/// documentation states. An error when the parts that are always kept do not fit.
pub fn fit_messages(req: &ProposalRequest, budget: Option<Budget>) -> Result<Fitted, String> {
    let texts = PromptTexts::of(req);
    let table = PromptTable::of(texts.prompt);
    let feedback_chars = if budget.is_some() { BUDGET_FEEDBACK_CHARS } else { 1500 };

    let mut parts: Vec<Part> = vec![Part::fixed((0, 0), texts.head)];
    parts.extend(table.parts());
    let history_total = push_history(&mut parts, req, feedback_chars);
    parts.push(Part::fixed((4, 0), proposal_text(req)));
    parts.push(Part::fixed((6, 0), format!("\n{}\n", texts.reply)));

    let limit = budget.map(|b| b.prompt_tokens());
    let mut used = estimate_tokens(&texts.system);
    let mut kept: Vec<bool> = parts.iter().map(|part| part.keep.is_none()).collect();
    used += parts.iter().filter(|part| part.keep.is_none()).map(|part| estimate_tokens(&part.text)).sum::<usize>();
    if let (Some(limit), Some(b)) = (limit, budget) {
        check_fixed_part(used, limit, b)?;
    }
    let (guidance_text, guidance_cut) = fit_guidance(req.guidance.trim_end(), limit.map(|l| l - used));
    used += estimate_tokens(&guidance_text);
    keep_optional_parts(&parts, &mut kept, used, limit, &table);

    let rows_kept = count_kept(&parts, &kept, PartKind::Row);
    let user = render_user(&parts, &kept, &guidance_text, &table, rows_kept);
    let estimate = estimate_tokens(&texts.system) + estimate_tokens(&user);
    if let Some(l) = limit {
        if estimate > l {
            // The parts were counted one by one, and a sum of estimates is never below the estimate of the sum.
            return Err(format!("internal error: the prompt's estimate {estimate} exceeds its budget {l}"));
        }
    }
    Ok(Fitted {
        system: texts.system,
        user,
        estimate,
        limit,
        rows_kept,
        rows_total: table.rows.len(),
        history_kept: count_kept(&parts, &kept, PartKind::History),
        history_total,
        guidance_cut,
    })
}

/// The task's own texts of the prompt (`prompt.system`, `prompt.user`, `prompt.reply` of its context),
/// each with its generic default.
struct PromptTexts<'a> {
    /// The context's `prompt` object, if any.
    prompt: Option<&'a serde_json::Value>,
    system: String,
    /// The task's fixed text (default: the whole context as JSON, less its `prompt`).
    head: String,
    reply: String,
}

impl<'a> PromptTexts<'a> {
    fn of(req: &'a ProposalRequest) -> PromptTexts<'a> {
        let ctx = &req.task_context;
        let prompt = ctx.get("prompt");
        let text = |key: &str| prompt.and_then(|p| p.get(key)).and_then(|v| v.as_str()).map(str::to_string);
        let system = text("system").unwrap_or_else(|| {
            "You improve candidates for an optimization task. Each candidate is scored (lower is better).".to_string()
        });
        let head = text("user").unwrap_or_else(|| {
            let mut c = ctx.clone();
            if let Some(o) = c.as_object_mut() {
                o.remove("prompt");
            }
            format!("Task context (JSON):\n{}\n", serde_json::to_string_pretty(&c).unwrap_or_default())
        });
        let reply =
            text("reply").unwrap_or_else(|| "Reply with the complete candidate in one fenced code block.".into());
        PromptTexts { prompt, system, head, reply }
    }
}

/// The task's table (`prompt.table`): its title, its rows in table order, and each row's rank in
/// `keep_order` (rows the order leaves out come last, in table order).
struct PromptTable {
    title: String,
    rows: Vec<String>,
    rank: Vec<usize>,
}

impl PromptTable {
    fn of(prompt: Option<&serde_json::Value>) -> PromptTable {
        let table = prompt.and_then(|p| p.get("table"));
        let title = table.and_then(|t| t.get("title")).and_then(|v| v.as_str()).unwrap_or("").to_string();
        let rows: Vec<String> = table
            .and_then(|t| t.get("rows"))
            .and_then(|v| v.as_array())
            .map(|a| a.iter().map(|r| r.as_str().unwrap_or("").to_string()).collect())
            .unwrap_or_default();
        let order = table.and_then(|t| t.get("keep_order")).and_then(|v| v.as_array());
        let order = order.into_iter().flatten().filter_map(|v| v.as_u64()).map(|v| v as usize);
        let rank = keep_ranks(order, rows.len());
        PromptTable { title, rows, rank }
    }

    /// One optional part per row (priority 4, by rank).
    fn parts(&self) -> impl Iterator<Item = Part> + '_ {
        self.rows.iter().enumerate().map(|(i, row)| Part {
            pos: (1, i),
            text: format!("{row}\n"),
            keep: Some((4, self.rank[i])),
            section: Some(SEC_TABLE),
            kind: PartKind::Row,
        })
    }

    /// Section `s`'s header with `kept` rows of the table shown.
    fn header(&self, s: usize, kept: usize) -> String {
        match s {
            SEC_TABLE if kept < self.rows.len() => format!(
                "\n{} ({kept} of {} rows shown; the others did not fit the model's context)\n",
                self.title,
                self.rows.len()
            ),
            SEC_TABLE => format!("\n{}\n", self.title),
            SEC_BEST => "\n## Best candidates so far (lower score is better)\n".to_string(),
            _ => "\n## Recent failures\n".to_string(),
        }
    }

    /// A header's cost, counted at its longest (the table's note, with both counts as wide as the total).
    fn header_cost(&self, s: usize) -> usize {
        if s == SEC_TABLE {
            let n = self.rows.len();
            estimate_tokens(&format!(
                "\n{} ({n} of {n} rows shown; the others did not fit the model's context)\n",
                self.title
            ))
        } else {
            estimate_tokens(&self.header(s, self.rows.len()))
        }
    }
}

/// Each of `n` rows' rank: its place in `order` (indices out of range or repeated are ignored), then the
/// rows the order leaves out, in table order.
fn keep_ranks(order: impl Iterator<Item = usize>, n: usize) -> Vec<usize> {
    let mut rank: Vec<usize> = vec![usize::MAX; n];
    let mut next = 0;
    for i in order {
        if i < n && rank[i] == usize::MAX {
            rank[i] = next;
            next += 1;
        }
    }
    for (i, r) in rank.iter_mut().enumerate() {
        if *r == usize::MAX {
            *r = next + i;
        }
    }
    rank
}

/// The history's parts: the best first, then the latest failure, then the rest. Returns how many entries
/// were offered.
fn push_history(parts: &mut Vec<Part>, req: &ProposalRequest, feedback_chars: usize) -> usize {
    let best: Vec<&Attempt> = req.history.iter().filter(|a| a.eval.score.is_some()).take(PROMPT_BEST).collect();
    let failures: Vec<&Attempt> =
        req.history.iter().filter(|a| a.eval.score.is_none()).rev().take(PROMPT_FAILURES).collect();
    for (i, a) in best.iter().enumerate() {
        let keep = if i == 0 { (2, 0) } else { (3, i) };
        let text = attempt_block(a, true, feedback_chars);
        parts.push(Part { pos: (2, i), text, keep: Some(keep), section: Some(SEC_BEST), kind: PartKind::History });
    }
    for (i, a) in failures.iter().enumerate() {
        let keep = if i == 0 { (2, 1) } else { (3, PROMPT_BEST + i) };
        let text = attempt_block(a, false, feedback_chars);
        parts.push(Part { pos: (3, i), text, keep: Some(keep), section: Some(SEC_FAILURES), kind: PartKind::History });
    }
    best.len() + failures.len()
}

/// The proposal's header with its parent candidate (always kept).
fn proposal_text(req: &ProposalRequest) -> String {
    let mut this = format!("\n## This proposal (iteration {}, offspring {})\n", req.iteration, req.offspring_index);
    match &req.parent {
        Some(parent) if parent.eval.score.is_none() => {
            let _ = writeln!(this, "Repair this failed candidate (attempt {}):", parent.id);
            let _ = writeln!(this, "```\n{}\n```", parent.candidate.trim_end());
        }
        Some(parent) => {
            let _ = writeln!(this, "Improve this candidate (attempt {}):", parent.id);
            let _ = writeln!(this, "```\n{}\n```", parent.candidate.trim_end());
        }
        None => this.push_str("Propose a new candidate from scratch.\n"),
    }
    this
}

/// The error when the parts that are always kept (`used` tokens) exceed `limit`.
fn check_fixed_part(used: usize, limit: usize, b: Budget) -> Result<(), String> {
    if used <= limit {
        return Ok(());
    }
    Err(format!(
        "the prompt's fixed part (system message, task description with the instance catalog and features, the \
         parent candidate and the reply format) needs about {used} tokens, but the context of {} tokens leaves \
         {limit} after the reply's {} (--max-tokens) and {CHAT_OVERHEAD_TOKENS} for the chat template; raise \
         --context-tokens (if the model allows it) or lower --max-tokens",
        b.context_tokens, b.reply_tokens
    ))
}

/// The guidance block, cut to `room` tokens (None: no limit), and whether it was cut.
fn fit_guidance(guidance: &str, room: Option<usize>) -> (String, bool) {
    if guidance.trim().is_empty() {
        return (String::new(), false);
    }
    let guidance_head = "Guidance:\n";
    let head_cost = estimate_tokens(guidance_head) + 1; // + the newline after it
    let room = room.unwrap_or(usize::MAX);
    if room <= head_cost {
        return (String::new(), true);
    }
    let body = clip_to_tokens(guidance, room - head_cost);
    let cut = body.len() != guidance.len();
    if body.is_empty() {
        return (String::new(), cut);
    }
    (format!("{guidance_head}{body}\n"), cut)
}

/// Keeps the optional parts by ascending (priority, rank) while they fit in `limit` with `used` tokens
/// spent, a section's header counted with its first kept part.
fn keep_optional_parts(parts: &[Part], kept: &mut [bool], mut used: usize, limit: Option<usize>, table: &PromptTable) {
    let mut opened = [false; 3];
    let mut optional: Vec<usize> = (0..parts.len()).filter(|&i| parts[i].keep.is_some()).collect();
    optional.sort_by_key(|&i| parts[i].keep);
    for i in optional {
        let part = &parts[i];
        let section = part.section.unwrap_or(0);
        let extra = if opened[section] { 0 } else { table.header_cost(section) };
        let cost = estimate_tokens(&part.text) + extra;
        if limit.is_none_or(|l| used + cost <= l) {
            kept[i] = true;
            used += cost;
            opened[section] = true;
        }
    }
}

fn count_kept(parts: &[Part], kept: &[bool], kind: PartKind) -> usize {
    (0..parts.len()).filter(|&i| kept[i] && parts[i].kind == kind).count()
}

/// The user message: the kept parts in message order, each section's header before its first part and the
/// guidance before the reply format.
fn render_user(parts: &[Part], kept: &[bool], guidance_text: &str, table: &PromptTable, rows_kept: usize) -> String {
    let mut order: Vec<usize> = (0..parts.len()).filter(|&i| kept[i]).collect();
    order.sort_by_key(|&i| parts[i].pos);
    let mut user = String::new();
    let mut written = [false; 3];
    for i in order {
        let part = &parts[i];
        if part.pos.0 == 6 {
            user.push_str(guidance_text);
        }
        if let Some(s) = part.section {
            if !written[s] {
                user.push_str(&table.header(s, rows_kept));
                written[s] = true;
            }
        }
        user.push_str(&part.text);
    }
    user
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Evaluation;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use serde_json::json;

    fn text(rng: &mut ChaCha8Rng, max: usize) -> String {
        // ASCII, digits and multi-byte characters, so bytes and characters differ.
        let alphabet = ["a", "7", " ", "\n", "é", "→", "x", "{", "}", ";", "0.25"];
        let n = rng.gen_range(0..=max);
        (0..n).map(|_| alphabet[rng.gen_range(0..alphabet.len())]).collect()
    }

    fn attempt(id: usize, score: Option<f64>, candidate: String, feedback: String) -> Attempt {
        let eval = Evaluation { score, feedback, details: serde_json::Value::Null };
        Attempt { lineage: 1, ..Attempt::new(id, id, "p", candidate, eval) }
    }

    struct Case {
        req: ProposalRequest,
        system: String,
        head: String,
        reply: String,
        rows: Vec<String>,
    }

    fn case(rng: &mut ChaCha8Rng, equal_rows: bool) -> Case {
        let system = text(rng, 400);
        let head = text(rng, 3000);
        let reply = text(rng, 300);
        let n_rows = rng.gen_range(0..80);
        let rows: Vec<String> =
            (0..n_rows)
                .map(|i| {
                    if equal_rows {
                        format!("  row {i:03} {}", "9".repeat(40))
                    } else {
                        format!("  {}", text(rng, 120))
                    }
                })
                .collect();
        let mut keep: Vec<usize> = (0..n_rows).collect();
        for i in (1..keep.len()).rev() {
            keep.swap(i, rng.gen_range(0..=i));
        }
        let mut history = Vec::new();
        for i in 0..rng.gen_range(0..5) {
            history.push(attempt(i, Some(100.0 + i as f64), text(rng, 800), text(rng, 2500)));
        }
        for i in 0..rng.gen_range(0..5) {
            history.push(attempt(10 + i, None, text(rng, 800), text(rng, 2500)));
        }
        let parent = match rng.gen_range(0..3) {
            0 => None,
            1 => Some(attempt(50, Some(1.0), text(rng, 1200), text(rng, 100))),
            _ => Some(attempt(51, None, text(rng, 1200), text(rng, 100))),
        };
        let req = ProposalRequest {
            task_context: json!({ "prompt": {
                "system": system, "user": head, "reply": reply,
                "table": { "title": "Table:", "rows": rows, "keep_order": keep },
            }}),
            history,
            parent,
            guidance: text(rng, 4000),
            iteration: rng.gen_range(1..20),
            offspring_index: rng.gen_range(0..8),
        };
        Case { req, system, head, reply, rows }
    }

    #[test]
    fn a_prompt_never_exceeds_its_budget() {
        let mut rng = ChaCha8Rng::seed_from_u64(26);
        let (mut fitted, mut refused, mut cut_rows) = (0, 0, 0);
        for _ in 0..3000 {
            let c = case(&mut rng, false);
            let budget = Budget { context_tokens: rng.gen_range(0..16_000), reply_tokens: rng.gen_range(0..3000) };
            let limit = budget.context_tokens.saturating_sub(budget.reply_tokens + CHAT_OVERHEAD_TOKENS);
            assert_eq!(budget.prompt_tokens(), limit);
            match fit_messages(&c.req, Some(budget)) {
                Ok(f) => {
                    fitted += 1;
                    // One token per byte: the bytes of both messages are the estimate, and within the limit.
                    assert_eq!(f.estimate, f.system.len() + f.user.len());
                    assert!(f.estimate <= limit, "{} > {limit}", f.estimate);
                    assert_eq!(f.limit, Some(limit));
                    assert!(f.user.starts_with(&c.head) && f.user.ends_with(&format!("{}\n", c.reply)));
                    assert_eq!(f.system, c.system);
                    // Rows come after every history entry in the keep order: a history entry left out while
                    // rows were kept did not fit even without the rows.
                    let rows_bytes: usize =
                        c.rows.iter().filter(|r| f.user.contains(r.as_str())).map(|r| r.len() + 1).sum();
                    let best = c.req.history.iter().filter(|a| a.eval.score.is_some()).take(PROMPT_BEST);
                    let failures: Vec<&Attempt> = c.req.history.iter().filter(|a| a.eval.score.is_none()).collect();
                    let offered = best.chain(failures.iter().rev().take(PROMPT_FAILURES).copied());
                    for a in offered {
                        if !f.user.contains(&format!("### Attempt {} (", a.id)) && rows_bytes > 0 {
                            let block = attempt_block(a, a.eval.score.is_some(), BUDGET_FEEDBACK_CHARS).len();
                            assert!(block + 60 > limit - f.estimate + rows_bytes, "attempt {} left out", a.id);
                        }
                    }
                    cut_rows += usize::from(f.rows_kept < c.rows.len());
                }
                Err(e) => {
                    refused += 1;
                    let parent = c.req.parent.as_ref().map_or(0, |p| p.candidate.len());
                    let fixed = c.system.len() + c.head.len() + c.reply.len() + parent;
                    // The fixed parts plus their headings (under 120 bytes) really exceed the limit.
                    assert!(fixed + 120 > limit, "refused with {fixed} fixed bytes for {limit}: {e}");
                    assert!(e.contains("--context-tokens") && e.contains("--max-tokens"), "{e}");
                }
            }
        }
        // The cases cover all three outcomes.
        assert!(fitted > 500 && refused > 500 && cut_rows > 200, "{fitted} {refused} {cut_rows}");
    }

    #[test]
    fn rows_are_kept_in_keep_order_and_shown_in_table_order() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut partial = 0;
        for _ in 0..500 {
            let mut c = case(&mut rng, true);
            c.req.history.clear();
            c.req.guidance.clear();
            let budget = Budget { context_tokens: rng.gen_range(4000..12_000), reply_tokens: 500 };
            let Ok(f) = fit_messages(&c.req, Some(budget)) else { continue };
            let keep: Vec<usize> = c.req.task_context["prompt"]["table"]["keep_order"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as usize)
                .collect();
            // Equal rows: exactly a prefix of the keep order is kept ...
            let mut expect: Vec<usize> = keep[..f.rows_kept].to_vec();
            for (i, row) in c.rows.iter().enumerate() {
                assert_eq!(f.user.contains(row.as_str()), expect.contains(&i), "row {i}");
            }
            // ... and written in table order.
            expect.sort();
            let positions: Vec<usize> = expect.iter().map(|&i| f.user.find(c.rows[i].as_str()).unwrap()).collect();
            assert!(positions.windows(2).all(|w| w[0] < w[1]));
            if f.rows_kept < c.rows.len() && f.rows_kept > 0 {
                partial += 1;
                assert!(f.user.contains(&format!("({} of {} rows shown", f.rows_kept, c.rows.len())), "{}", f.user);
            }
        }
        assert!(partial > 50, "{partial}");
    }

    #[test]
    fn history_keeps_the_best_then_the_latest_failure() {
        let long = |c: char| c.to_string().repeat(700);
        let req = ProposalRequest {
            task_context: json!({ "prompt": { "system": "S", "user": "HEAD\n", "reply": "R" } }),
            history: vec![
                attempt(3, Some(1.0), "BEST".into(), long('b')),
                attempt(5, Some(2.0), "SECOND".into(), long('c')),
                attempt(4, None, "OLDFAIL".into(), long('d')),
                attempt(6, None, "NEWFAIL".into(), long('e')),
            ],
            parent: None,
            guidance: String::new(),
            iteration: 3,
            offspring_index: 0,
        };
        let everything = build_messages(&req).1;
        let full = fit_messages(&req, None).unwrap();
        assert_eq!(full.user, everything);
        assert_eq!((full.history_kept, full.history_total), (4, 4));
        // Room for about two entries: the best and the latest failure.
        let need = |n: usize| n + CHAT_OVERHEAD_TOKENS + 100;
        let two = fit_messages(&req, Some(Budget { context_tokens: need(2 * 790 + 200), reply_tokens: 100 })).unwrap();
        assert!(two.user.contains("BEST") && two.user.contains("Attempt 6"), "{}", two.user);
        assert!(!two.user.contains("SECOND") && !two.user.contains("Attempt 4"), "{}", two.user);
        let one = fit_messages(&req, Some(Budget { context_tokens: need(1000), reply_tokens: 100 })).unwrap();
        assert!(one.user.contains("BEST") && !one.user.contains("Attempt 6"), "{}", one.user);
    }

    #[test]
    fn guidance_is_cut_to_what_is_left() {
        let req = ProposalRequest {
            task_context: json!({ "prompt": { "system": "S", "user": "HEAD\n", "reply": "R" } }),
            history: vec![],
            parent: None,
            guidance: "g".repeat(5000),
            iteration: 1,
            offspring_index: 0,
        };
        let f = fit_messages(&req, Some(Budget { context_tokens: 1000, reply_tokens: 200 })).unwrap();
        assert!(f.guidance_cut);
        assert!(f.user.contains("Guidance:\ngggg") && f.user.contains("g…\n"), "{}", f.user);
        assert!(f.estimate <= 1000 - 200 - CHAT_OVERHEAD_TOKENS);
        let whole = fit_messages(&req, Some(Budget { context_tokens: 8000, reply_tokens: 200 })).unwrap();
        assert!(!whole.guidance_cut && whole.user.contains(&"g".repeat(5000)));
    }

    #[test]
    fn clipping_to_tokens_respects_the_estimate_and_character_boundaries() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for _ in 0..2000 {
            let t = text(&mut rng, 200);
            let n = rng.gen_range(0..300);
            let c = clip_to_tokens(&t, n);
            assert!(estimate_tokens(&c) <= n, "{c:?} for {n}");
            if estimate_tokens(&t) <= n {
                assert_eq!(c, t);
            } else if !c.is_empty() {
                assert!(t.starts_with(c.trim_end_matches('…')) && c.ends_with('…'));
            }
        }
    }
}
