//! The loop's JSONL trace: one [`Attempt`] per line, appended and flushed as soon as the candidate has
//! been evaluated, so an interrupted run loses at most the candidates that were in flight.
//!
//! Reading tolerates a truncated last line (a run killed while writing it): that line is reported and
//! cut off before the run appends again. A malformed line anywhere else is an error naming the line.

use super::Attempt;
use anyhow::Context;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What [`read_trace`] found in an existing trace file.
#[derive(Debug, Clone)]
pub struct TraceContents {
    /// Every complete attempt, in file order.
    pub attempts: Vec<Attempt>,
    /// Byte length of the well-formed prefix (everything up to and including the last good newline).
    pub valid_len: u64,
    /// The partial last line that was dropped, if any (its first 200 bytes).
    pub dropped_tail: Option<String>,
}

/// Reads a trace. A last line that does not parse (or has no terminating newline and does not parse)
/// is treated as the remains of an interrupted write and dropped; any other bad line is an error.
pub fn read_trace(path: &Path) -> anyhow::Result<TraceContents> {
    let file = File::open(path).with_context(|| format!("cannot open trace {}", path.display()))?;
    let mut reader = BufReader::new(file);
    let mut lines: Vec<(Vec<u8>, bool)> = Vec::new();
    loop {
        let mut buf = Vec::new();
        let n = reader.read_until(b'\n', &mut buf).with_context(|| format!("cannot read trace {}", path.display()))?;
        if n == 0 {
            break;
        }
        let terminated = buf.last() == Some(&b'\n');
        if terminated {
            buf.pop();
        }
        lines.push((buf, terminated));
    }
    let mut attempts = Vec::new();
    let mut valid_len = 0u64;
    let mut dropped_tail = None;
    let count = lines.len();
    for (i, (bytes, terminated)) in lines.iter().enumerate() {
        let is_last = i + 1 == count;
        let text = String::from_utf8_lossy(bytes);
        if text.trim().is_empty() {
            if *terminated {
                valid_len += bytes.len() as u64 + 1;
            }
            continue;
        }
        match serde_json::from_str::<Attempt>(&text) {
            Ok(a) if *terminated => {
                attempts.push(a);
                valid_len += bytes.len() as u64 + 1;
            }
            // A complete JSON object without its newline: the write was cut just before the newline.
            // Keep the attempt; the writer re-terminates the line.
            Ok(a) => {
                attempts.push(a);
                valid_len += bytes.len() as u64;
            }
            Err(e) if is_last => {
                let _ = e;
                dropped_tail = Some(text.chars().take(200).collect());
            }
            Err(e) => {
                return Err(crate::diag::Located::new(
                    path.display().to_string(),
                    format!("malformed trace line ({e})"),
                )
                .at(i + 1, e.column())
                .hint("expected one JSON attempt per line. Fix or delete the line, or start a new run without --resume")
                .into())
            }
        }
    }
    Ok(TraceContents { attempts, valid_len, dropped_tail })
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

    /// Opens an existing trace for appending after cutting it to `valid_len` bytes (dropping a partial
    /// last line). If the kept prefix does not end with a newline one is added.
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

    /// The trace's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
