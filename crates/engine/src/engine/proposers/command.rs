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

/// Most bytes of an answer (stdout) the command may give: a longer answer is refused whole, never cut
/// and built ([`synth_base::input::MAX_SOURCE_BYTES`], the cap of the sources a rewrite reads).
pub const MAX_OUTPUT: usize = synth_base::input::MAX_SOURCE_BYTES as usize;
/// Most bytes of stderr kept (only its end is shown, in the message of a failed command).
const MAX_STDERR: usize = 1 << 20;

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

/// What a pipe of the command gave: at most `cap` bytes, and how many bytes it gave in all (the rest is
/// read and dropped, so the command never blocks on a full pipe).
struct Drained {
    bytes: Vec<u8>,
    total: u64,
}

impl Drained {
    /// Whether the pipe gave more than was kept.
    fn over(&self) -> bool {
        self.total > self.bytes.len() as u64
    }
}

fn read_all(mut r: impl Read, cap: usize) -> Drained {
    let mut bytes = Vec::new();
    let mut total = 0u64;
    let mut chunk = [0u8; 8192];
    loop {
        match r.read(&mut chunk) {
            Ok(0) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
            Ok(n) => {
                total += n as u64;
                if bytes.len() < cap {
                    bytes.extend_from_slice(&chunk[..n.min(cap - bytes.len())]);
                }
            }
        }
    }
    Drained { bytes, total }
}

/// The refusal of an answer over [`MAX_OUTPUT`] (also said on stderr: the trace's feedback is not the
/// only place it shows).
fn oversized(total: u64) -> ProposeError {
    let msg = format!(
        "the agent command's answer is {total} bytes, over the cap of {} MiB for an answer; it was refused \
         whole (not cut, built or tested): answer with the one rewritten file",
        MAX_OUTPUT >> 20
    );
    errln!("note: {msg}");
    ProposeError::Failed(msg)
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
        std::thread::spawn(move || out_tx.send(read_all(stdout, MAX_OUTPUT)));
        std::thread::spawn(move || err_tx.send(read_all(stderr, MAX_STDERR)));
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
        let stderr = String::from_utf8_lossy(&err.bytes);
        if !status.success() {
            let code = status.code().map(|c| format!("status {c}")).unwrap_or_else(|| "a signal".into());
            let tail: String = stderr.trim().chars().rev().take(800).collect::<Vec<_>>().into_iter().rev().collect();
            return Err(ProposeError::Failed(format!(
                "the agent command exited with {code}; stderr: {}",
                if tail.is_empty() { "(empty)" } else { &tail }
            )));
        }
        if out.over() {
            return Err(oversized(out.total));
        }
        pick_candidate(&String::from_utf8_lossy(&out.bytes), &*self.checker)
    }
}
