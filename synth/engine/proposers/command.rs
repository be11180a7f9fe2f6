//! External agent command: `sh -c <command>` reads the request as JSON on stdin ([`super::agent_input`])
//! and prints a candidate on stdout (markdown fences and prose around it are tolerated, see
//! [`crate::engine::extract`]). A timeout kills the command's whole process group; a non-zero exit,
//! empty or unusable output become the proposal's error (reflection feedback), never a crash.

use super::{agent_input, Checker};
use crate::engine::clip;
use crate::engine::extract::pick_candidate;
use crate::engine::process::{kill_group, own_group};
use crate::engine::{ProposalRequest, ProposeError, Proposer};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

/// Most bytes of stdout kept from the command.
const MAX_OUTPUT: usize = 4 << 20;

/// Runs an external command per proposal.
pub struct CommandProposer {
    /// Shell command line, run with `sh -c`.
    pub command: String,
    /// Wall-clock limit per proposal.
    pub timeout: Duration,
    /// Picks the candidate among the code blocks of the output.
    pub checker: Checker,
}

impl CommandProposer {
    /// A proposer running `command` with `timeout`, accepting the first code block `checker` accepts.
    pub fn new(command: impl Into<String>, timeout: Duration, checker: Checker) -> CommandProposer {
        CommandProposer { command: command.into(), timeout, checker }
    }
}

fn read_all(mut r: impl Read) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match r.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if buf.len() < MAX_OUTPUT {
                    buf.extend_from_slice(&chunk[..n.min(MAX_OUTPUT - buf.len())]);
                }
            }
        }
    }
    buf
}

impl Proposer for CommandProposer {
    fn name(&self) -> String {
        format!("cmd:{}", clip(&self.command, 60))
    }

    fn propose(&self, req: &ProposalRequest) -> Result<String, ProposeError> {
        let input = serde_json::to_vec(&agent_input(req))
            .map_err(|e| ProposeError::Unavailable(format!("cannot encode the request: {e}")))?;
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(&self.command)
            .env("SYNTH_ITERATION", req.iteration.to_string())
            .env("SYNTH_OFFSPRING", req.offspring_index.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        own_group(&mut cmd);
        let mut child = cmd.spawn().map_err(|e| {
            ProposeError::Unavailable(format!("cannot start the agent command `{}`: {e}", self.command))
        })?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        // Feed stdin and drain both pipes on threads so a large request or a chatty command never blocks.
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let (out_tx, out_rx) = std::sync::mpsc::channel();
        let (err_tx, err_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || out_tx.send(read_all(stdout)));
        std::thread::spawn(move || err_tx.send(read_all(stderr)));
        let started = std::time::Instant::now();
        let status = match child.wait_timeout(self.timeout) {
            Ok(Some(status)) => status,
            Ok(None) => {
                kill_group(&mut child);
                let _ = child.wait();
                return Err(ProposeError::Timeout(format!(
                    "the agent command timed out after {:.1} s and was killed; answer faster or raise --agent-timeout",
                    self.timeout.as_secs_f64()
                )));
            }
            Err(e) => {
                kill_group(&mut child);
                let _ = child.wait();
                return Err(ProposeError::Failed(format!("cannot wait for the agent command: {e}")));
            }
        };
        // Whatever the command left running in its process group (`sleep 1000 &`) is ended now; output is
        // read until the deadline at most (a process that left the group may still hold the pipes).
        kill_group(&mut child);
        let deadline = started + self.timeout;
        let remaining =
            || deadline.saturating_duration_since(std::time::Instant::now()).max(Duration::from_millis(200));
        let (Ok(out), Ok(err)) = (out_rx.recv_timeout(remaining()), err_rx.recv_timeout(remaining())) else {
            return Err(ProposeError::Timeout(format!(
                "the agent command exited, but a process it started still holds its output open after {:.1} s \
                 (--agent-timeout); do not leave background processes running",
                self.timeout.as_secs_f64()
            )));
        };
        drop(writer);
        let stdout = String::from_utf8_lossy(&out);
        let stderr = String::from_utf8_lossy(&err);
        if !status.success() {
            let code = status.code().map(|c| format!("status {c}")).unwrap_or_else(|| "a signal".into());
            let tail: String = stderr.trim().chars().rev().take(800).collect::<Vec<_>>().into_iter().rev().collect();
            return Err(ProposeError::Failed(format!(
                "the agent command exited with {code}; stderr: {}",
                if tail.is_empty() { "(empty)" } else { &tail }
            )));
        }
        pick_candidate(&stdout, &*self.checker)
    }
}
