//! The loop's JSONL trace: one [`Attempt`] per line, appended and flushed as soon as the candidate has
//! been evaluated, so an interrupted run loses at most the candidates that were in flight.
//!
//! Reading follows the torn-line rule of [`synth_base::logfile`]: the bytes after the last newline (a run
//! killed while writing its line) are reported and cut off before the run appends again. A malformed line
//! anywhere else is an error naming the line.

use super::Attempt;
use anyhow::Context;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What [`read_trace`] found in an existing trace file.
#[derive(Debug, Clone)]
pub struct TraceContents {
    /// Every complete attempt, in file order.
    pub attempts: Vec<Attempt>,
    /// Byte length of the whole lines (everything up to and including the last newline).
    pub valid_len: u64,
    /// The torn last line that was dropped, if any (its first 200 characters).
    pub dropped_tail: Option<String>,
}

/// Reads a trace. The bytes after its last newline are a torn line left by an interrupted write
/// ([`synth_base::logfile`]): they are dropped (and reported in [`TraceContents::dropped_tail`]). Every line
/// before them must be a whole attempt; a malformed one is an error naming its file, line and column.
pub fn read_trace(path: &Path) -> anyhow::Result<TraceContents> {
    let bytes = synth_base::input::read_bytes_capped(path, synth_base::input::MAX_TABLE_BYTES, "trace")
        .with_context(|| format!("cannot read trace {}", path.display()))?;
    let torn = synth_base::logfile::torn_tail(&bytes);
    let mut attempts = Vec::new();
    for (i, line) in bytes[..torn.keep].split(|&b| b == b'\n').enumerate() {
        let text = String::from_utf8_lossy(line);
        if text.trim().is_empty() {
            continue;
        }
        let attempt = serde_json::from_str::<Attempt>(&text).map_err(|e| {
            synth_base::diag::Located::new(path.display().to_string(), format!("malformed trace line ({e})"))
                .at(i + 1, e.column())
                .hint("expected one JSON attempt per line. Fix or delete the line, or start a new run without --resume")
        })?;
        attempts.push(attempt);
    }
    Ok(TraceContents { attempts, valid_len: torn.keep as u64, dropped_tail: torn.tail })
}

/// Appends attempts to a trace file, one JSON line each, flushed per line. Safe to share across threads.
#[derive(Debug)]
pub struct TraceWriter {
    path: PathBuf,
    file: Mutex<File>,
}

impl TraceWriter {
    /// Creates (or empties) the trace at `path`, creating parent directories.
    pub fn create(path: &Path) -> anyhow::Result<TraceWriter> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let file = File::create(path).with_context(|| format!("cannot create trace {}", path.display()))?;
        Ok(TraceWriter { path: path.to_path_buf(), file: Mutex::new(file) })
    }

    /// Opens an existing trace for appending after cutting it to `valid_len` bytes (dropping a torn last
    /// line). If the kept prefix does not end with a newline one is added.
    pub fn append_after(path: &Path, valid_len: u64) -> anyhow::Result<TraceWriter> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open trace {} for appending", path.display()))?;
        file.set_len(valid_len).with_context(|| format!("cannot truncate trace {}", path.display()))?;
        file.seek(SeekFrom::End(0))?;
        if valid_len > 0 {
            let mut last = [0u8; 1];
            use std::io::Read;
            file.seek(SeekFrom::Start(valid_len - 1))?;
            file.read_exact(&mut last)?;
            file.seek(SeekFrom::End(0))?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
            }
        }
        Ok(TraceWriter { path: path.to_path_buf(), file: Mutex::new(file) })
    }

    /// Appends one attempt as a JSON line and flushes it.
    pub fn append(&self, attempt: &Attempt) -> anyhow::Result<()> {
        let mut line = serde_json::to_string(attempt).context("cannot serialize attempt")?;
        line.push('\n');
        let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
        f.write_all(line.as_bytes())
            .and_then(|_| f.flush())
            .with_context(|| format!("cannot write trace {}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(id: usize) -> Attempt {
        let eval = super::super::Evaluation {
            score: Some(id as f64),
            feedback: String::new(),
            details: serde_json::Value::Null,
        };
        Attempt::new(id, id, "p", format!("c{id}"), eval)
    }

    fn line(id: usize) -> String {
        serde_json::to_string(&attempt(id)).unwrap() + "\n"
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_cut_before_appending() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let whole = line(0) + &line(1);
        let third = line(2);
        // Torn inside the line, and torn just before its newline: both are dropped.
        for torn in [&third[..third.len() / 2], &third[..third.len() - 1]] {
            std::fs::write(&path, format!("{whole}{torn}")).unwrap();
            let c = read_trace(&path).unwrap();
            assert_eq!(c.attempts, vec![attempt(0), attempt(1)]);
            assert_eq!(c.valid_len, whole.len() as u64);
            assert_eq!(c.dropped_tail.as_deref(), Some(torn));
            let w = TraceWriter::append_after(&path, c.valid_len).unwrap();
            w.append(&attempt(2)).unwrap();
            drop(w);
            assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{whole}{third}"));
        }
        let c = read_trace(&path).unwrap();
        assert_eq!((c.attempts.len(), c.dropped_tail), (3, None));
    }

    #[test]
    fn a_malformed_whole_line_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, format!("{}{{\"id\": oops}}\n{}", line(0), line(1))).unwrap();
        let e = read_trace(&path).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:2:", path.display())), "{e}");
        assert!(e.contains("malformed trace line") && e.contains("without --resume"), "{e}");
    }
}
