//! OpenAI-compatible chat endpoint: POST `{base_url}/chat/completions` with a system and a user message
//! built by [`super::build_messages`]; the candidate is the first code block of
//! `choices[0].message.content` that the task's checker accepts. The API key comes from an environment
//! variable (sent as `Authorization: Bearer ...` when set). HTTP errors, timeouts and malformed replies
//! become the proposal's error (reflection feedback).

use super::{build_messages, Checker};
use crate::engine::clip;
use crate::engine::extract::pick_candidate;
use crate::engine::{ProposalRequest, ProposeError, Proposer};
use serde_json::json;
use std::time::Duration;

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
}

impl OpenAiProposer {
    /// A proposer for `model` at `base_url`, key from `api_key_env`.
    pub fn new(base_url: &str, model: &str, api_key_env: &str, timeout: Duration, checker: Checker) -> OpenAiProposer {
        OpenAiProposer {
            base_url: base_url.trim_end_matches('/').to_string(),
            model: model.to_string(),
            api_key_env: api_key_env.to_string(),
            timeout,
            temperature: None,
            checker,
        }
    }

    /// The request body for `req`.
    pub fn body(&self, req: &ProposalRequest) -> serde_json::Value {
        let (system, user) = build_messages(req);
        let mut body = json!({
            "model": self.model,
            "messages": [
                { "role": "system", "content": system },
                { "role": "user", "content": user },
            ],
        });
        if let Some(t) = self.temperature {
            body["temperature"] = json!(t);
        }
        body
    }
}

impl Proposer for OpenAiProposer {
    fn name(&self) -> String {
        format!("openai:{}", self.model)
    }

    fn propose(&self, req: &ProposalRequest) -> Result<String, ProposeError> {
        let url = format!("{}/chat/completions", self.base_url);
        let agent = ureq::AgentBuilder::new().timeout(self.timeout).build();
        let mut request = agent.post(&url).set("Content-Type", "application/json");
        match std::env::var(&self.api_key_env) {
            Ok(key) if !key.is_empty() => request = request.set("Authorization", &format!("Bearer {key}")),
            _ => {}
        }
        let response = match request.send_json(self.body(req)) {
            Ok(r) => r,
            Err(ureq::Error::Status(code, r)) => {
                let text = r.into_string().unwrap_or_default();
                let hint = if code == 401 || code == 403 {
                    format!(" (check the API key in ${})", self.api_key_env)
                } else {
                    String::new()
                };
                return Err(ProposeError::Failed(format!(
                    "{url} answered HTTP {code}{hint}: {}",
                    clip(text.trim(), 500)
                )));
            }
            Err(e) => return Err(ProposeError::Unavailable(format!("request to {url} failed: {e}"))),
        };
        let reply: serde_json::Value = response
            .into_json()
            .map_err(|e| ProposeError::Failed(format!("{url} returned a body that is not JSON: {e}")))?;
        let content = reply.pointer("/choices/0/message/content").and_then(|c| c.as_str()).ok_or_else(|| {
            ProposeError::Failed(format!(
                "{url} returned no choices[0].message.content: {}",
                clip(&reply.to_string(), 400)
            ))
        })?;
        pick_candidate(content, &*self.checker)
    }
}
