//! Journals of one device merged into one (`synth merge`): the shards of a plan measured on several hosts
//! (`synth bench --shard I/N`), or runs of several commands on one machine.
//!
//! Every input is read with the journal reader's checks, after refusing a torn last line (an interrupted
//! run: resume it first). The merge refuses, with one error naming both files and lines:
//! - rows of different devices or software: device name, `gfx`, CU count or `backend` (the runtime and its
//!   version, or the AITER tuner's commit) differ from the first row read;
//! - a cell (shape, libtype, kernelId, splitK, recheck) that two rows hold with different values.
//!
//! A cell two inputs hold byte for byte the same (a file merged with a copy of itself) is written once.
//! Each row is written with the bytes it has in its input, sorted (main rows, then rechecks; by N, K, M,
//! libtype, kernelId, splitK), so the result does not depend on the order of the inputs. The output is
//! written to a temporary file beside it and renamed over it only when everything is checked: a refused
//! merge leaves it as it was. An existing output must be one of the inputs (merging into it); the output's
//! journal lock is held while merging, and an input whose lock a measurement run holds is refused.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::journal::{columns, lock_journal, lock_path, read_input_journal_lines, CellResult};
use synth_base::sanitize::shown;
use synth_core::catalog::{Catalog, Libtype};

/// What a merge wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeReport {
    /// Rows read per input, in the order given.
    pub inputs: Vec<(PathBuf, usize)>,
    /// Rows written.
    pub rows: usize,
    /// Cells held byte for byte the same by two inputs (written once).
    pub duplicates: usize,
}

/// The identity of a cell in a merged journal.
type Key = (u8, u32, u32, u32, Libtype, i32, u32);

fn key_of(r: &CellResult) -> Key {
    (r.recheck, r.n, r.k, r.m, r.libtype, r.kernel_id, r.split_k)
}

/// Where a row came from: input index, line, its bytes (without the line end).
struct Source<'a> {
    file: usize,
    line: usize,
    raw: &'a [u8],
}

/// The bytes of every record of a journal (header excluded), by 1-based line of the record's start.
fn raw_records<'a>(bytes: &'a [u8], src: &str) -> Result<HashMap<usize, &'a [u8]>> {
    let newlines: Vec<usize> = bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i).collect();
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).from_reader(bytes);
    rdr.byte_headers().with_context(|| format!("{src}: cannot read the header"))?;
    let mut rec = csv::ByteRecord::new();
    let mut out = HashMap::new();
    while rdr.read_byte_record(&mut rec).with_context(|| format!("{src}: malformed CSV"))? {
        // The reader's start position may still point at the previous line's end or at skipped blank lines.
        let mut at = rec.position().map_or(0, |p| p.byte() as usize).min(bytes.len());
        while at < bytes.len() && matches!(bytes[at], b'\r' | b'\n') {
            at += 1;
        }
        let mut end = (rdr.position().byte() as usize).clamp(at, bytes.len());
        while end > at && matches!(bytes[end - 1], b'\r' | b'\n') {
            end -= 1;
        }
        out.insert(newlines.partition_point(|&p| p < at) + 1, &bytes[at..end]);
    }
    Ok(out)
}

/// Refuses an input journal that a measurement run holds (its `.lock` locked); returns the lock file
/// held shared until the merge ends. Nothing is created beside an input.
fn hold_input_lock(path: &Path) -> Result<Option<File>> {
    let lock = lock_path(path);
    if std::fs::symlink_metadata(&lock).is_err() {
        return Ok(None);
    }
    let file = super::auxfile::open(&lock, super::auxfile::Mode::Read, "the journal lock")?;
    match file.try_lock_shared() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&lock).unwrap_or_default();
            bail!(
                "journal {} is in use by a measurement run ({}); merge it once that run has finished",
                path.display(),
                if holder.trim().is_empty() { "holder unknown".to_string() } else { shown(holder.trim()) }
            )
        }
        Err(std::fs::TryLockError::Error(e)) => {
            bail!("cannot check the lock of journal {} ({}): {e}", path.display(), lock.display())
        }
    }
}

/// Refuses an input journal whose file a measurement run holds under another name (a symbolic or hard
/// link, so its `.lock` is not beside this name: `synth bench` also locks the journal file itself); returns
/// the file, held shared until the merge ends.
fn hold_input_file(path: &Path) -> Result<File> {
    let file = File::open(path).with_context(|| format!("cannot open journal {}", path.display()))?;
    match file.try_lock_shared() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "journal {} is in use by a measurement run (which names the file through another path, a symbolic or \
             hard link); merge it once that run has finished",
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => bail!("cannot check the lock of journal {}: {e}", path.display()),
    }
}

/// Merges the journals `inputs` into `out` (see the module comment).
pub fn merge_journals(inputs: &[PathBuf], out: &Path, catalog: &Catalog) -> Result<MergeReport> {
    if inputs.is_empty() {
        bail!("no journal to merge: name the journals, e.g. `synth merge a.csv b.csv --out all.csv`");
    }
    let mut canonical = Vec::with_capacity(inputs.len());
    for p in inputs {
        if !std::fs::metadata(p).is_ok_and(|m| m.is_file()) {
            bail!("journal {} does not exist or is not a regular file", p.display());
        }
        let c = p.canonicalize().with_context(|| format!("journal {}", p.display()))?;
        if let Some(j) = canonical.iter().position(|x| *x == c) {
            bail!("journal {} is given twice (as {} and {})", c.display(), inputs[j].display(), p.display());
        }
        canonical.push(c);
    }
    let out_is_input = match std::fs::symlink_metadata(out) {
        Err(_) => None,
        Ok(m) if !m.file_type().is_file() => bail!(
            "--out {} is {}; pass the path of a journal (a regular file) or of one to create",
            out.display(),
            synth_base::paths::file_kind(&m)
        ),
        Ok(_) => {
            let c = out.canonicalize().with_context(|| format!("--out {}", out.display()))?;
            match canonical.iter().position(|x| *x == c) {
                Some(i) => Some(i),
                None => bail!(
                    "--out {} exists and is not one of the journals merged; name it among them to merge into it, \
                     or pass another --out (nothing was written)",
                    out.display()
                ),
            }
        }
    };
    // The output's lock first (created beside it, as a measurement run creates it), then the inputs'.
    let out_lock = lock_journal(out)?;
    match merge_locked(inputs, out, out_is_input, catalog) {
        Ok(report) => Ok(report),
        Err(e) => {
            // Nothing was written: the lock file this run created (and its directories) go too.
            out_lock.release_unused();
            Err(e)
        }
    }
}

/// [`merge_journals`] once the output's lock is held.
fn merge_locked(inputs: &[PathBuf], out: &Path, out_is_input: Option<usize>, catalog: &Catalog) -> Result<MergeReport> {
    let mut _held = Vec::new();
    for (i, p) in inputs.iter().enumerate() {
        if Some(i) != out_is_input {
            _held.push(hold_input_lock(p)?);
        }
        _held.push(Some(hold_input_file(p)?));
    }

    let mut texts = Vec::with_capacity(inputs.len());
    for p in inputs {
        let bytes = synth_base::input::read_table_capped(p, synth_base::input::MAX_TABLE_BYTES, "journal")
            .with_context(|| format!("cannot read journal {}", p.display()))?;
        texts.push(bytes);
    }
    let names: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
    let mut cells: HashMap<Key, Source> = HashMap::new();
    let mut first: Option<(usize, usize, CellResult)> = None;
    let mut counts = Vec::with_capacity(inputs.len());
    let mut duplicates = 0;
    for (f, bytes) in texts.iter().enumerate() {
        let src = &names[f];
        let torn = synth_base::logfile::torn_tail(bytes);
        if let Some(tail) = &torn.tail {
            let line = bytes[..torn.keep].iter().filter(|&&b| b == b'\n').count() + 1;
            bail!(
                "{src}:{line}: the last line has no line end (\"{}\"), the mark of an interrupted measurement run: \
                 run it again to finish (it cuts the line and measures that cell again), then merge",
                shown(tail)
            );
        }
        let rows = read_input_journal_lines(bytes, src, catalog)?;
        let raws = raw_records(bytes, src)?;
        counts.push((inputs[f].clone(), rows.len()));
        for (line, row) in rows {
            let Some(&raw) = raws.get(&line) else {
                bail!("{src}:{line}: cannot locate the row's text");
            };
            match &first {
                None => first = Some((f, line, row.clone())),
                Some((f0, l0, r0)) => check_same_device(&row, r0, (src, line), (&names[*f0], *l0))?,
            }
            match cells.get(&key_of(&row)) {
                None => {
                    cells.insert(key_of(&row), Source { file: f, line, raw });
                }
                Some(seen) if seen.raw == raw => duplicates += 1,
                Some(seen) => bail!(
                    "{}:{} and {src}:{line} hold different measurements of one cell (M={} N={} K={} {} kernelId {} \
                     splitK {}{}): a cell is measured once per journal; keep one of the two lines (or measure each \
                     shard of a plan into its own journal with --shard I/N) and merge again (nothing was written)",
                    names[seen.file],
                    seen.line,
                    row.m,
                    row.n,
                    row.k,
                    row.libtype,
                    row.kernel_id,
                    row.split_k,
                    if row.recheck != 0 { ", recheck" } else { "" }
                ),
            }
        }
    }
    let mut sorted: Vec<(Key, Source)> = cells.into_iter().collect();
    sorted.sort_by_key(|a| a.0);
    write_all_or_nothing(out, sorted.iter().map(|(_, s)| s.raw))?;
    Ok(MergeReport { inputs: counts, rows: sorted.len(), duplicates })
}

/// Refuses a row whose device or software differs from the first row read.
fn check_same_device(row: &CellResult, first: &CellResult, at: (&str, usize), first_at: (&str, usize)) -> Result<()> {
    let what = if row.device != first.device {
        "device"
    } else if row.gfx != first.gfx {
        "gfx"
    } else if row.cu_num != first.cu_num {
        "CU count"
    } else if row.backend != first.backend {
        "backend (runtime and version)"
    } else {
        return Ok(());
    };
    let d = |r: &CellResult| {
        format!("\"{}\" ({}, {} CUs, backend \"{}\")", shown(&r.device), shown(&r.gfx), r.cu_num, shown(&r.backend))
    };
    bail!(
        "{}:{}: {what} differs from {}:{}: {} against {}; a journal holds the measurements of one device and one \
         software stack, so merge only journals measured alike (nothing was written)",
        at.0,
        at.1,
        first_at.0,
        first_at.1,
        d(row),
        d(first)
    )
}

/// Writes the journal header and `rows` (each without its line end) to a temporary file beside `out`, then
/// renames it over `out`.
fn write_all_or_nothing<'a>(out: &Path, rows: impl Iterator<Item = &'a [u8]>) -> Result<()> {
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".merging")
        .tempfile_in(&dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    let write = |tmp: &mut tempfile::NamedTempFile| -> std::io::Result<()> {
        let mut w = std::io::BufWriter::new(tmp.as_file_mut());
        w.write_all(columns().join(",").as_bytes())?;
        w.write_all(b"\n")?;
        for r in rows {
            w.write_all(r)?;
            w.write_all(b"\n")?;
        }
        w.flush()?;
        drop(w);
        tmp.as_file().sync_all()
    };
    write(&mut tmp).with_context(|| format!("cannot write {}", tmp.path().display()))?;
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(out).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0o644);
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(mode))?;
    tmp.persist(out).map_err(|e| e.error).with_context(|| format!("cannot write {}", out.display()))?;
    Ok(())
}
