//! The engine's build and test steps: [`run_step`] runs one step, `sh -c <command>` in a working copy with
//! stdout/stderr captured to files (no pipe can block the child) and a wall-clock limit past which the
//! whole group is killed. Process groups and their kill ([`own_group`], [`kill_group`]) are the crate's
//! one subprocess helper, [`synth_base::process`], re-exported here for the command proposer.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use wait_timeout::ChildExt;

pub use synth_base::process::{kill_group, own_group};

/// Most bytes of each stream read back (the head and tail are kept when a stream is longer).
pub const MAX_CAPTURE: usize = 16 << 20;

/// What a step did.
#[derive(Debug, Clone)]
pub struct StepOutput {
    /// Exit status; None when killed for the timeout.
    pub status: Option<ExitStatus>,
    /// Whether the timeout fired.
    pub timed_out: bool,
    /// Wall time.
    pub elapsed: Duration,
    /// Captured standard output (lossy UTF-8).
    pub stdout: String,
    /// Captured standard error (lossy UTF-8).
    pub stderr: String,
}

impl StepOutput {
    /// True when the step exited with status 0 in time.
    pub fn success(&self) -> bool {
        !self.timed_out && self.status.is_some_and(|s| s.success())
    }

    /// "exit status 2", "killed by signal 11", "timed out after 5.0 s (killed)".
    pub fn describe_status(&self, timeout: Duration) -> String {
        if self.timed_out {
            return format!("timed out after {:.1} s (process group killed)", timeout.as_secs_f64());
        }
        match self.status {
            Some(s) => match s.code() {
                // A shell reports a child killed by signal N as status 128 + N.
                Some(c) if c > 128 && c < 160 => format!("exit status {c} (killed by signal {})", c - 128),
                Some(c) => format!("exit status {c}"),
                None => {
                    #[cfg(unix)]
                    {
                        use std::os::unix::process::ExitStatusExt;
                        if let Some(sig) = s.signal() {
                            return format!("killed by signal {sig}");
                        }
                    }
                    "terminated abnormally".to_string()
                }
            },
            None => "did not run".to_string(),
        }
    }

    /// Standard output and error, one after the other.
    pub fn combined(&self) -> String {
        match (self.stdout.is_empty(), self.stderr.is_empty()) {
            (true, _) => self.stderr.clone(),
            (_, true) => self.stdout.clone(),
            _ => format!("{}\n{}", self.stdout.trim_end(), self.stderr),
        }
    }
}

/// Runs `command` with `sh -c` in `cwd`, logging to `log_dir/<name>.stdout|.stderr`. Errors only when
/// the shell cannot be started or the log files cannot be used.
pub fn run_step(
    command: &str,
    cwd: &Path,
    env: &BTreeMap<String, String>,
    timeout: Duration,
    log_dir: &Path,
    name: &str,
) -> std::io::Result<StepOutput> {
    let out_path = log_dir.join(format!("{name}.stdout"));
    let err_path = log_dir.join(format!("{name}.stderr"));
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(File::create(&out_path)?)
        .stderr(File::create(&err_path)?);
    own_group(&mut cmd);
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    let waited = child.wait_timeout(timeout)?;
    let (status, timed_out) = match waited {
        Some(s) => (Some(s), false),
        None => {
            kill_group(&mut child);
            let _ = child.wait();
            (None, true)
        }
    };
    // Background processes the step left behind would keep running (and keep a GPU busy): end them.
    kill_group(&mut child);
    let elapsed = start.elapsed();
    Ok(StepOutput { status, timed_out, elapsed, stdout: read_capped(&out_path)?, stderr: read_capped(&err_path)? })
}

/// Reads a log file as lossy UTF-8; past [`MAX_CAPTURE`] bytes keeps the first and last halves.
fn read_capped(path: &Path) -> std::io::Result<String> {
    let mut f = File::open(path)?;
    let len = f.metadata()?.len() as usize;
    if len <= MAX_CAPTURE {
        let mut buf = Vec::with_capacity(len);
        f.read_to_end(&mut buf)?;
        return Ok(String::from_utf8_lossy(&buf).into_owned());
    }
    let half = MAX_CAPTURE / 2;
    let mut head = vec![0u8; half];
    f.read_exact(&mut head)?;
    use std::io::{Seek, SeekFrom};
    f.seek(SeekFrom::Start((len - half) as u64))?;
    let mut tail = Vec::with_capacity(half);
    f.read_to_end(&mut tail)?;
    Ok(format!(
        "{}\n[... {} bytes of output omitted ...]\n{}",
        String::from_utf8_lossy(&head),
        len - 2 * half,
        String::from_utf8_lossy(&tail)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_and_status() {
        let dir = tempfile::tempdir().unwrap();
        let out = run_step(
            "echo hi; echo err >&2; exit 3",
            dir.path(),
            &BTreeMap::new(),
            Duration::from_secs(10),
            dir.path(),
            "s",
        )
        .unwrap();
        assert_eq!(out.stdout, "hi\n");
        assert_eq!(out.stderr, "err\n");
        assert!(!out.success());
        assert_eq!(out.describe_status(Duration::from_secs(10)), "exit status 3");
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("late");
        // A child of the shell that would write the marker after the timeout unless it is killed too.
        let cmd = format!("(sleep 1; touch {}) & sleep 30", marker.display());
        let start = Instant::now();
        let out = run_step(&cmd, dir.path(), &BTreeMap::new(), Duration::from_millis(300), dir.path(), "t").unwrap();
        assert!(out.timed_out);
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(1400));
        assert!(!marker.exists(), "the background child survived the timeout");
    }
}
