//! The one subprocess helper: every child runs in a process group of its own ([`own_group`]) so that
//! [`kill_group`] (`killpg` via libc) reaches what it starts, and every wait has a limit that also covers
//! lingering children.
//!
//! - [`Watched`]: a child whose stdout and stderr arrive as lines (each cut at a length cap, so an endless
//!   line cannot grow memory). Once the direct child has exited, reading stops when its pipes close or a
//!   grace period ([`LINGER_GRACE`]) later, whichever comes first: a grandchild that inherited a pipe and
//!   keeps it open cannot hold the caller, and the group is killed.
//! - [`run_capture`]: a short command with a wall-clock limit (the device probes, `git`), both streams
//!   captured up to a cap.
//!
//! Crate-root helper: it imports no stage, so `engine`, `measure` and `aiter` all run children through it.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long output is still read after the direct child has exited (a grandchild holding its pipe is
/// given this long to finish writing; then the group is killed and reading stops).
pub const LINGER_GRACE: Duration = Duration::from_secs(2);

/// Longest line kept from a child's output; the rest of a longer line is dropped (the line is marked).
pub const MAX_LINE: usize = 64 << 10;
/// The mark at the end of a line cut at [`MAX_LINE`].
pub const LINE_CUT: &str = " [... line cut]";

/// Makes `cmd` start in a process group of its own (its leader's id is the child's id), so that
/// [`kill_group`] reaches everything it starts.
pub fn own_group(cmd: &mut Command) -> &mut Command {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    cmd
}

/// Sends SIGKILL to the process group led by `child` (started with [`own_group`]), then to the child
/// itself; errors (the group is already gone) are ignored.
pub fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    if let Ok(pgid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: killpg only sends a signal; a stale or foreign id makes it fail with ESRCH/EPERM.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What [`Watched::next`] saw.
#[derive(Debug)]
pub enum Event {
    /// One line of output (without its newline; lossy UTF-8; cut at [`MAX_LINE`] bytes).
    Line(Stream, String),
    /// The stream's last bytes, which no newline ended (the child may have died in the middle of a write),
    /// as [`Event::Line`] has them; nothing more comes from that stream.
    Unterminated(Stream, String),
    /// A read error on a stream (that stream is closed).
    ReadError(Stream, std::io::Error),
    /// Nothing arrived within the tick.
    Idle,
    /// The child has exited and its output is read (or the grace period for lingering holders of its
    /// pipes has passed; the group was killed).
    Exited(ExitStatus),
}

/// Reads `stream` line by line into `tx`, each line cut at `max` bytes; stops at EOF, an error, or when
/// the receiver is gone.
fn pump(stream: impl Read, which: Stream, max: usize, tx: mpsc::Sender<Event>) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = Vec::new();
        let mut cut = false;
        let ended = loop {
            let buf = match reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let _ = tx.send(Event::ReadError(which, e));
                    return;
                }
            };
            if buf.is_empty() {
                break true;
            }
            let (take, newline) = match buf.iter().position(|&b| b == b'\n') {
                Some(p) => (p + 1, true),
                None => (buf.len(), false),
            };
            let room = max.saturating_sub(line.len());
            let body = if newline { take - 1 } else { take };
            line.extend_from_slice(&buf[..body.min(room)]);
            cut |= body > room;
            reader.consume(take);
            if newline {
                break false;
            }
        };
        if ended && line.is_empty() && !cut {
            return;
        }
        let mut text = String::from_utf8_lossy(&line).into_owned();
        if text.ends_with('\r') {
            text.pop();
        }
        if cut {
            text.push_str(LINE_CUT);
        }
        let event = if ended { Event::Unterminated(which, text) } else { Event::Line(which, text) };
        if tx.send(event).is_err() || ended {
            return;
        }
    }
}

/// A running child whose output arrives as [`Event`]s.
pub struct Watched {
    child: Child,
    rx: Receiver<Event>,
    /// Exit status and when it was seen.
    exited: Option<(ExitStatus, Instant)>,
    /// Whether every pipe reader has finished.
    drained: bool,
}

impl Watched {
    /// Starts `cmd` in its own process group with stdin closed and stdout/stderr piped.
    pub fn spawn(cmd: &mut Command) -> std::io::Result<Watched> {
        own_group(cmd).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn()?;
        let (tx, rx) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            let tx = tx.clone();
            std::thread::spawn(move || pump(out, Stream::Stdout, MAX_LINE, tx));
        }
        if let Some(err) = child.stderr.take() {
            let tx = tx.clone();
            std::thread::spawn(move || pump(err, Stream::Stderr, MAX_LINE, tx));
        }
        Ok(Watched { child, rx, exited: None, drained: false })
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The next event, waiting at most `tick`.
    pub fn next(&mut self, tick: Duration) -> std::io::Result<Event> {
        if !self.drained {
            match self.rx.recv_timeout(tick) {
                Ok(ev) => return Ok(ev),
                Err(RecvTimeoutError::Disconnected) => self.drained = true,
                Err(RecvTimeoutError::Timeout) => {}
            }
        } else {
            std::thread::sleep(tick.min(Duration::from_millis(50)));
        }
        if self.exited.is_none() {
            if let Some(status) = self.child.try_wait()? {
                self.exited = Some((status, Instant::now()));
            }
        }
        match self.exited {
            Some((status, at)) if self.drained || at.elapsed() >= LINGER_GRACE => {
                // What the child left behind (a background job, a grandchild holding a pipe) ends with it.
                kill_group(&mut self.child);
                self.drained = true;
                Ok(Event::Exited(status))
            }
            _ => Ok(Event::Idle),
        }
    }

    /// Kills the whole group and reaps the child.
    pub fn kill(&mut self) {
        kill_group(&mut self.child);
        let _ = self.child.wait();
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if self.exited.is_none() {
            self.kill();
        }
    }
}

/// What [`run_capture`] collected.
#[derive(Debug)]
pub struct Captured {
    /// Exit status; `None` when the limit was reached (the group was killed).
    pub status: Option<ExitStatus>,
    /// Standard output, at most the cap.
    pub stdout: Vec<u8>,
    /// Standard error, at most the cap.
    pub stderr: Vec<u8>,
    /// Whether a stream gave more than the cap (what is kept is its first bytes): a caller that reads the
    /// output says so ([`Captured::cut_note`]) rather than reading a cut answer as the whole one.
    pub cut: bool,
}

impl Captured {
    /// Whether the command exited with status 0 in time.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// A note for a message when the output was cut at `cap` bytes ([`Captured::cut`]); empty otherwise.
    pub fn cut_note(&self, cap: usize) -> String {
        if self.cut {
            format!(" (its output was longer than {cap} bytes and was cut there)")
        } else {
            String::new()
        }
    }
}

/// Runs `cmd` (stdin closed, own process group) for at most `limit`, keeping at most `cap` bytes of each
/// stream. Past the limit the group is killed and `status` is `None`. Errors only when it cannot start.
pub fn run_capture(cmd: &mut Command, limit: Duration, cap: usize) -> std::io::Result<Captured> {
    let mut w = Watched::spawn(cmd)?;
    let deadline = Instant::now() + limit;
    let (mut stdout, mut stderr, mut cut) = (Vec::new(), Vec::new(), false);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            w.kill();
            return Ok(Captured { status: None, stdout, stderr, cut });
        }
        match w.next(left.min(Duration::from_millis(100)))? {
            Event::Line(s, line) | Event::Unterminated(s, line) => {
                let buf = if s == Stream::Stdout { &mut stdout } else { &mut stderr };
                // A line cut at MAX_LINE is cut output too.
                cut |= line.ends_with(LINE_CUT);
                let room = cap.saturating_sub(buf.len());
                cut |= line.len() + 1 > room;
                buf.extend_from_slice(&line.as_bytes()[..line.len().min(room)]);
                if buf.len() < cap {
                    buf.push(b'\n');
                }
            }
            Event::ReadError(..) | Event::Idle => {}
            Event::Exited(status) => return Ok(Captured { status: Some(status), stdout, stderr, cut }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c").arg(script);
        c
    }

    #[test]
    fn lines_are_read_and_long_lines_cut() {
        let c = run_capture(
            &mut sh("echo one; echo two >&2; head -c 200000 /dev/zero | tr '\\0' x; echo; exit 3"),
            Duration::from_secs(30),
            1 << 20,
        )
        .unwrap();
        assert_eq!(c.status.and_then(|s| s.code()), Some(3));
        let out = String::from_utf8(c.stdout).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "one");
        assert_eq!(lines[1].len(), MAX_LINE + " [... line cut]".len());
        assert!(lines[1].ends_with("x [... line cut]"));
        assert_eq!(String::from_utf8(c.stderr).unwrap(), "two\n");
        assert!(c.cut, "a cut line is cut output");
    }

    /// Output over the cap is kept up to the cap and said to be cut (before, nothing told a caller).
    #[test]
    fn output_over_the_cap_is_marked_cut() {
        let c = run_capture(&mut sh("echo 0123456789; echo abc"), Duration::from_secs(30), 12).unwrap();
        assert_eq!(c.stdout, b"0123456789\na");
        assert!(c.cut);
        assert!(c.cut_note(12).contains("longer than 12 bytes"), "{}", c.cut_note(12));
        let whole = run_capture(&mut sh("echo 0123456789"), Duration::from_secs(30), 11).unwrap();
        assert_eq!(whole.stdout, b"0123456789\n");
        assert!(!whole.cut && whole.cut_note(11).is_empty());
    }

    #[test]
    fn a_grandchild_holding_the_pipe_does_not_hold_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("late");
        // The shell exits at once; its background child keeps stdout open for 30 s, then would write a
        // marker unless the group is killed.
        let script = format!("echo done; (sleep 30; touch {}) & exit 0", marker.display());
        let start = Instant::now();
        let c = run_capture(&mut sh(&script), Duration::from_secs(60), 1 << 20).unwrap();
        assert!(c.success());
        assert_eq!(c.stdout, b"done\n");
        assert!(start.elapsed() < LINGER_GRACE + Duration::from_secs(5), "{:?}", start.elapsed());
    }

    #[test]
    fn the_limit_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("late");
        let script = format!("(sleep 1; touch {}) & sleep 30", marker.display());
        let start = Instant::now();
        let c = run_capture(&mut sh(&script), Duration::from_millis(300), 1 << 20).unwrap();
        assert!(c.status.is_none());
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(1400));
        assert!(!marker.exists(), "the background child survived the limit");
    }
}
