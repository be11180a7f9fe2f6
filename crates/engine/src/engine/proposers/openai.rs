//! OpenAI-compatible chat endpoint: POST `{base_url}/chat/completions` with a system and a user message
//! that fit the model's context ([`super::prompt`]: the context less the reply's `max_tokens`); the
//! candidate is the first code block of `choices[0].message.content` that the task's checker accepts. The
//! API key comes from an environment variable (sent as `Authorization: Bearer ...` when set).
//!
//! What a real model does is feedback, never a crash: HTTP errors and timeouts become the proposal's
//! error; an HTTP 400 that names the server's context length (a prompt the estimate let through, or a
//! server whose context is smaller than assumed) is retried once within that length, which later
//! proposals then use; an answer cut at the token limit (`finish_reason: "length"`) without a complete
//! candidate says so; when no code block passes the checker, the first fenced block is still handed to
//! the task, so its evaluation reports the parse error with its position (a near miss gets repaired, not
//! dropped). The model's whole answer is kept in the trace ([`crate::engine::Attempt::raw`]), with the
//! token counts, the finish reason and the prompt's budget ([`crate::engine::Attempt::agent`]).
//!
//! Decoding constraints ([`super::constrain`]): with the task's [`Constraint`] and `--constrain` other than
//! `none`, the way of constraining is settled once per run by a probe request whose only valid answer is
//! known (`auto`: the grammar, else the JSON schema in OpenAI's `json_schema` form, else in
//! llama-cpp-python's `json_object` form, else none), and every request carries it. A server that does not
//! honour what was asked, or refuses a constrained request, is one line on stderr, and the proposals go on
//! unconstrained.

use super::constrain::{probe, Applied, Constraint, Mode};
use super::prompt::{fit_messages, Budget, Fitted};
use super::Checker;
use crate::engine::clip;
use crate::engine::extract::{fenced_blocks, pick_candidate};
use crate::engine::{Proposal, ProposalRequest, ProposeError, Proposer};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The context assumed when neither `--context-tokens` nor the server says (8192 tokens: SmolLM2's, and
/// the smallest of the usual local models; a larger model is only given less than it could read).
pub const DEFAULT_CONTEXT_TOKENS: usize = 8192;
/// Tokens asked for the reply (`max_tokens`) unless set: room for a rule of the default size or a short
/// kernel file.
pub const DEFAULT_MAX_TOKENS: usize = 1024;

/// A chat-completions client used as a proposer.
pub struct OpenAiProposer {
    /// Base URL up to the API version, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8000/v1`.
    pub base_url: String,
    /// Model name sent in the request.
    pub model: String,
    /// Environment variable holding the API key.
    pub api_key_env: String,
    /// Request timeout.
    pub timeout: Duration,
    /// Sampling temperature (None: the server's default).
    pub temperature: Option<f64>,
    /// Picks the candidate among the code blocks of the reply.
    pub checker: Checker,
    /// The model's context window in tokens (prompt and reply).
    pub context_tokens: usize,
    /// Tokens asked for the reply (`max_tokens`), kept free in the context.
    pub max_tokens: usize,
    /// The task's decoding constraint (None: answers are free text).
    pub constraint: Option<Constraint>,
    /// How to constrain (`--constrain`).
    pub constrain: Mode,
    /// A smaller context learned from the server's HTTP 400 (0: none yet).
    learned_context: AtomicUsize,
    /// How requests are constrained, once settled (probed on the first proposal).
    applied: Mutex<Option<Applied>>,
}

impl OpenAiProposer {
    /// A proposer for `model` at `base_url`, key from `api_key_env`, with the default context and reply
    /// size ([`DEFAULT_CONTEXT_TOKENS`], [`DEFAULT_MAX_TOKENS`]).
    pub fn new(base_url: &str, model: &str, api_key_env: &str, timeout: Duration, checker: Checker) -> OpenAiProposer {
        OpenAiProposer {
            base_url: base_url.trim_end_matches('/').to_string(),
            model: model.to_string(),
            api_key_env: api_key_env.to_string(),
            timeout,
            temperature: None,
            checker,
            context_tokens: DEFAULT_CONTEXT_TOKENS,
            max_tokens: DEFAULT_MAX_TOKENS,
            constraint: None,
            constrain: Mode::Auto,
            learned_context: AtomicUsize::new(0),
            applied: Mutex::new(None),
        }
    }

    /// The context the next prompt is fitted to: the configured one, or the smaller one a server's
    /// refusal named.
    pub fn effective_context(&self) -> usize {
        match self.learned_context.load(Ordering::Relaxed) {
            0 => self.context_tokens,
            learned => learned.min(self.context_tokens),
        }
    }

    fn budget(&self) -> Budget {
        Budget { context_tokens: self.effective_context(), reply_tokens: self.max_tokens }
    }

    /// The request body for `req` within the current budget (an error when the prompt's fixed part does
    /// not fit), constrained as [`Self::applied`] says.
    pub fn body(&self, req: &ProposalRequest) -> Result<serde_json::Value, String> {
        let applied = self.applied();
        fit_messages(&self.stated(req, applied), Some(self.budget())).map(|f| self.body_of(&f, applied))
    }

    /// `req` with the reply format the constraint states under `applied` (the task's own otherwise).
    fn stated(&self, req: &ProposalRequest, applied: Applied) -> ProposalRequest {
        let mut req = req.clone();
        if let Some(reply) = self.constraint.as_ref().and_then(|c| c.reply(applied)) {
            if let Some(prompt) = req.task_context.get_mut("prompt").and_then(|p| p.as_object_mut()) {
                prompt.insert("reply".into(), json!(reply));
            }
        }
        req
    }

    fn body_of(&self, f: &Fitted, applied: Applied) -> serde_json::Value {
        let mut body = json!({
            "model": self.model,
            "messages": [
                { "role": "system", "content": f.system },
                { "role": "user", "content": f.user },
            ],
            "max_tokens": self.max_tokens,
        });
        if let Some(t) = self.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(c) = &self.constraint {
            c.apply(applied, &mut body);
        }
        body
    }

    /// How requests are constrained: settled on the first call (the probes of [`Self::settle`]), then kept.
    pub fn applied(&self) -> Applied {
        let mut guard = self.applied.lock().unwrap_or_else(|e| e.into_inner());
        *guard.get_or_insert_with(|| self.settle())
    }

    /// The ways `--constrain` allows, in order of preference.
    fn wanted(&self) -> &'static [Applied] {
        match (self.constraint.is_some(), self.constrain) {
            (false, _) | (_, Mode::None) => &[],
            (true, Mode::Grammar) => &[Applied::Grammar],
            (true, Mode::JsonSchema) => &[Applied::JsonSchema, Applied::JsonObject],
            (true, Mode::Auto) => &[Applied::Grammar, Applied::JsonSchema, Applied::JsonObject],
        }
    }

    /// Probes the allowed ways in order and takes the first the server honours; says which on stderr.
    fn settle(&self) -> Applied {
        let wanted = self.wanted();
        if wanted.is_empty() {
            return Applied::None;
        }
        let mut refusals = Vec::new();
        for &way in wanted {
            match self.probe_one(way) {
                Ok(()) => {
                    errln!("constrain: {} (the server at {} honours it)", way.as_str(), self.base_url);
                    return way;
                }
                Err(why) => refusals.push(format!("{}: {why}", way.as_str())),
            }
        }
        errln!(
            "constrain: none: the server at {} honoured no constraint --constrain {} allows ({}); proposals go \
             unconstrained",
            self.base_url,
            self.constrain.as_str(),
            refusals.join("; ")
        );
        Applied::None
    }

    /// One probe request constrained by `way` to a known answer: Ok when the answer is that one.
    fn probe_one(&self, way: Applied) -> Result<(), String> {
        let Some((constraint, valid)) = probe(way) else { return Err("nothing to probe".into()) };
        let mut body = json!({
            "model": self.model,
            "messages": [{ "role": "user", "content": "Answer with the word synth-ok." }],
            "max_tokens": 16,
            "temperature": 0,
        });
        constraint.apply(way, &mut body);
        let url = format!("{}/chat/completions", self.base_url);
        match exchange(self, &url, &body) {
            Ok(Exchange::Reply(r)) => {
                let content = r.pointer("/choices/0/message/content").and_then(|c| c.as_str()).unwrap_or("");
                if valid(content) {
                    Ok(())
                } else {
                    Err(format!("answered {:?}, not the only answer the constraint allows", clip(content, 60)))
                }
            }
            Ok(Exchange::Status(code, text)) => Err(format!("HTTP {code}: {}", clip(text.trim(), 160))),
            Err(e) => Err(e.to_string()),
        }
    }

    /// A server that refused a constrained request: the run goes on unconstrained, said once.
    fn refused(&self, way: Applied, code: u16, text: &str) {
        let mut guard = self.applied.lock().unwrap_or_else(|e| e.into_inner());
        if *guard == Some(way) {
            *guard = Some(Applied::None);
            errln!(
                "constrain: the server refused a request constrained by {} (HTTP {code}: {}); proposals go \
                 unconstrained",
                way.as_str(),
                clip(text.trim(), 200)
            );
        }
    }

    fn agent(&self) -> ureq::Agent {
        ureq::AgentBuilder::new().timeout(self.timeout).build()
    }

    fn authorized(&self, request: ureq::Request) -> ureq::Request {
        match std::env::var(&self.api_key_env) {
            Ok(key) if !key.is_empty() => request.set("Authorization", &format!("Bearer {key}")),
            _ => request,
        }
    }
}

/// What one HTTP exchange gave.
enum Exchange {
    Reply(serde_json::Value),
    /// A status other than 2xx, with the body's text.
    Status(u16, String),
}

fn exchange(p: &OpenAiProposer, url: &str, body: &serde_json::Value) -> Result<Exchange, ProposeError> {
    let request = p.authorized(p.agent().post(url).set("Content-Type", "application/json"));
    match request.send_json(body) {
        Ok(r) => r
            .into_json()
            .map(Exchange::Reply)
            .map_err(|e| ProposeError::Failed(format!("{url} returned a body that is not JSON: {e}"))),
        Err(ureq::Error::Status(code, r)) => Ok(Exchange::Status(code, r.into_string().unwrap_or_default())),
        Err(ureq::Error::Transport(t)) => {
            let text = t.to_string();
            if text.contains("timed out") || text.contains("Timeout") {
                Err(ProposeError::Timeout(format!(
                    "{url} did not answer within {:.0} s (--agent-timeout): {text}",
                    p.timeout.as_secs_f64()
                )))
            } else {
                Err(ProposeError::Unavailable(format!(
                    "request to {url} failed: {text}; is the server running at --base-url {}?",
                    p.base_url
                )))
            }
        }
    }
}

/// The context length and the requested size an HTTP error's text names, from the wordings of OpenAI,
/// vLLM and llama-cpp-python ("maximum context length is 8192 tokens ... you requested 8236 tokens") and
/// llama.cpp's ("exceeds the available context size" with `n_ctx`).
pub fn context_limit_in(text: &str) -> Option<(usize, Option<usize>)> {
    let lower = text.to_ascii_lowercase();
    let number_after = |key: &str| -> Option<usize> {
        let at = lower.find(key)? + key.len();
        let digits: String =
            lower[at..].trim_start_matches([' ', ':', '=', '"']).chars().take_while(|c| c.is_ascii_digit()).collect();
        digits.parse().ok()
    };
    let limit = ["maximum context length is", "context window of", "context length of", "\"n_ctx\"", "n_ctx"]
        .iter()
        .find_map(|k| number_after(k))?;
    let requested = ["you requested", "requested tokens (", "\"n_prompt_tokens\""].iter().find_map(|k| number_after(k));
    Some((limit, requested))
}

/// What `/v1/models` says about the context of `model` (the entry with its id, or the only entry):
/// `context_length`, `max_model_len` (vLLM), `n_ctx`, `context_window`, or `meta.n_ctx_train` (llama.cpp).
/// Ok(None) when the server answers without one; an error when it cannot be asked.
pub fn reported_context(
    base_url: &str,
    model: &str,
    api_key_env: &str,
    timeout: Duration,
) -> Result<Option<usize>, String> {
    let url = format!("{}/models", base_url.trim_end_matches('/'));
    let agent = ureq::AgentBuilder::new().timeout(timeout).build();
    let mut request = agent.get(&url);
    if let Ok(key) = std::env::var(api_key_env) {
        if !key.is_empty() {
            request = request.set("Authorization", &format!("Bearer {key}"));
        }
    }
    let body: serde_json::Value = match request.call() {
        Ok(r) => r.into_json().map_err(|e| format!("{url} returned a body that is not JSON: {e}"))?,
        Err(ureq::Error::Status(code, r)) => {
            return Err(format!(
                "{url} answered HTTP {code}: {}",
                clip(r.into_string().unwrap_or_default().trim(), 300)
            ))
        }
        Err(e) => return Err(format!("cannot reach {url}: {e}")),
    };
    let models = body.get("data").and_then(|d| d.as_array()).cloned().unwrap_or_default();
    let entry = models.iter().find(|m| m.get("id").and_then(|i| i.as_str()) == Some(model)).or_else(|| {
        if models.len() == 1 {
            models.first()
        } else {
            None
        }
    });
    let Some(entry) = entry else { return Ok(None) };
    let keys = ["/context_length", "/max_model_len", "/n_ctx", "/context_window", "/meta/n_ctx", "/meta/n_ctx_train"];
    Ok(keys.iter().find_map(|k| entry.pointer(k).and_then(|v| v.as_u64())).map(|v| v as usize).filter(|&v| v > 0))
}

impl Proposer for OpenAiProposer {
    fn name(&self) -> String {
        format!("openai:{}", self.model)
    }

    fn propose(&self, req: &ProposalRequest) -> Result<String, ProposeError> {
        self.propose_traced(req).result
    }

    fn propose_traced(&self, req: &ProposalRequest) -> Proposal {
        let url = format!("{}/chat/completions", self.base_url);
        let mut meta = json!({ "model": self.model, "max_tokens": self.max_tokens });
        let fail = |meta: serde_json::Value, e: ProposeError| Proposal { result: Err(e), raw: None, meta };
        let mut retried = false;
        loop {
            let applied = self.applied();
            meta["constraint"] = json!(applied.as_str());
            let budget = self.budget();
            let fitted = match fit_messages(&self.stated(req, applied), Some(budget)) {
                Ok(f) => f,
                Err(e) => {
                    meta["context_tokens"] = json!(budget.context_tokens);
                    return fail(meta, ProposeError::Failed(e));
                }
            };
            meta["context_tokens"] = json!(budget.context_tokens);
            meta["prompt"] = json!({
                "estimate": fitted.estimate, "limit": fitted.limit,
                "rows_kept": fitted.rows_kept, "rows_total": fitted.rows_total,
                "history_kept": fitted.history_kept, "history_total": fitted.history_total,
                "guidance_cut": fitted.guidance_cut,
            });
            let reply = match exchange(self, &url, &self.body_of(&fitted, applied)) {
                Err(e) => return fail(meta, e),
                Ok(Exchange::Reply(r)) => r,
                Ok(Exchange::Status(code, text)) => {
                    meta["http_status"] = json!(code);
                    if applied != Applied::None && matches!(code, 400 | 422) && context_limit_in(&text).is_none() {
                        // The constraint itself may be what the server refused: go on without it.
                        self.refused(applied, code, &text);
                        continue;
                    }
                    if let (false, Some((limit, requested))) = (retried, context_limit_in(&text)) {
                        // The server's context is smaller than assumed, or the estimate let a prompt through
                        // that its tokenizer counts longer: fit again within what it said, once.
                        let over = requested.map(|r| r.saturating_sub(limit)).unwrap_or(0);
                        let shrunk = limit.min(budget.context_tokens).saturating_sub(over + over / 4);
                        if shrunk < budget.context_tokens && shrunk > self.max_tokens {
                            self.learned_context.store(shrunk, Ordering::Relaxed);
                            meta["refused"] =
                                json!({ "limit": limit, "requested": requested, "retry_context": shrunk });
                            retried = true;
                            continue;
                        }
                    }
                    let hint = match code {
                        401 | 403 => format!(" (check the API key in ${})", self.api_key_env),
                        400 if context_limit_in(&text).is_some() => format!(
                            " (the prompt, estimated at {} tokens, and --max-tokens {} do not fit the model's \
                             context: lower --context-tokens or --max-tokens)",
                            fitted.estimate, self.max_tokens
                        ),
                        _ => String::new(),
                    };
                    return fail(
                        meta,
                        ProposeError::Failed(format!("{url} answered HTTP {code}{hint}: {}", clip(text.trim(), 500))),
                    );
                }
            };
            return self.answer(&url, &reply, applied, meta);
        }
    }
}

impl OpenAiProposer {
    /// The proposal in a chat reply: the candidate (decoded from a constrained answer, picked among its
    /// code blocks, or the first block as a near miss), or why there is none.
    fn answer(&self, url: &str, reply: &serde_json::Value, applied: Applied, mut meta: serde_json::Value) -> Proposal {
        let finish = reply.pointer("/choices/0/finish_reason").and_then(|f| f.as_str()).map(str::to_string);
        meta["finish_reason"] = json!(finish);
        if let Some(u) = reply.get("usage") {
            meta["usage"] = json!({
                "prompt_tokens": u.get("prompt_tokens"),
                "completion_tokens": u.get("completion_tokens"),
            });
        }
        let Some(content) = reply.pointer("/choices/0/message/content").and_then(|c| c.as_str()) else {
            let e = ProposeError::Failed(format!(
                "{url} returned no choices[0].message.content: {}",
                clip(&reply.to_string(), 400)
            ));
            return Proposal { result: Err(e), raw: None, meta };
        };
        let raw = Some(content.to_string());
        let decoded = match &self.constraint {
            Some(c) => c.candidate(applied, content),
            None => Ok(content.to_string()),
        };
        let text = match decoded {
            Ok(text) => text,
            Err(e) => {
                let cut = finish.as_deref() == Some("length");
                let why = if cut {
                    format!(
                        "the answer was cut at the token limit (max_tokens {}) before it was complete; {e}",
                        self.max_tokens
                    )
                } else {
                    e
                };
                return Proposal { result: Err(ProposeError::NoCandidate(why)), raw, meta };
            }
        };
        let content = text.as_str();
        let result = match pick_candidate(content, &*self.checker) {
            Ok(c) => Ok(c),
            Err(e) => {
                let cut = finish.as_deref() == Some("length");
                let first = fenced_blocks(content).into_iter().find(|b| !b.code.trim().is_empty());
                match first {
                    // A near miss: the task's evaluation reports where it breaks.
                    Some(b) if !cut => {
                        meta["near_miss"] = json!({ "block_line": b.line, "rejected": e.to_string() });
                        Ok(b.code)
                    }
                    _ if cut => Err(ProposeError::NoCandidate(format!(
                        "the answer was cut at the token limit (max_tokens {}, finish_reason \"length\") before \
                         it held a complete candidate; write a shorter one. {e}",
                        self.max_tokens
                    ))),
                    _ => Err(e),
                }
            }
        };
        Proposal { result, raw, meta }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_limits_are_read_from_the_servers_wordings() {
        // llama-cpp-python (the OpenAI wording) and vLLM.
        let llama_cpp_python =
            "{\"error\":{\"message\":\"This model's maximum context length is 8192 tokens. However, \
            you requested 8236 tokens (8236 in your prompt; 0 for the completion). Please reduce your prompt; or \
            completion length.\",\"type\":\"invalid_request_error\"}}";
        assert_eq!(context_limit_in(llama_cpp_python), Some((8192, Some(8236))));
        let vllm = "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens";
        assert_eq!(context_limit_in(vllm), Some((4096, Some(5000))));
        // llama.cpp's own server.
        let llama_cpp = "{\"error\":{\"code\":400,\"message\":\"the request exceeds the available context size, try \
            increasing it\",\"type\":\"exceed_context_size_error\",\"n_prompt_tokens\":9000,\"n_ctx\":8192}}";
        assert_eq!(context_limit_in(llama_cpp), Some((8192, Some(9000))));
        assert_eq!(context_limit_in("Requested tokens (5000) exceed context window of 4096"), Some((4096, Some(5000))));
        assert_eq!(context_limit_in("{\"error\": \"overloaded\"}"), None);
        assert_eq!(context_limit_in("maximum context length is unknown"), None);
    }
}
