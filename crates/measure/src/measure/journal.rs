//! The journal: the measurement output file, in AITER's profile-CSV columns plus extra columns, appended
//! one flushed row per finished cell so an interrupted run loses at most the cell in flight.

use super::plan::CellKey;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use synth_core::catalog::Catalog;
use synth_core::table::aiter_csv::{parse_aiter_csv, AITER_COLUMNS};
use synth_core::table::aiter_record::extends_aiter_record;
use synth_core::table::{AiterRecord, AiterRow, Numbers, RowStatus};

/// Extra columns the journal adds after AITER's.
pub const EXTRA_COLUMNS: [&str; 10] =
    ["device", "backend", "timing", "us_min", "us_max", "us_p10", "us_p90", "reps", "status", "recheck"];

/// All journal columns, in order.
pub fn columns() -> Vec<&'static str> {
    AITER_COLUMNS.iter().chain(EXTRA_COLUMNS.iter()).copied().collect()
}

/// One measured cell as the harness streams it (JSON) and the journal stores it (CSV): AITER's columns (its
/// fields, through [`std::ops::Deref`]) and the journal's [`EXTRA_COLUMNS`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CellResult {
    #[serde(flatten)]
    pub record: AiterRecord,
    #[serde(default)]
    pub device: String,
    #[serde(default)]
    pub backend: String,
    #[serde(default)]
    pub timing: String,
    pub us_min: Option<f64>,
    pub us_max: Option<f64>,
    pub us_p10: Option<f64>,
    pub us_p90: Option<f64>,
    #[serde(default)]
    pub reps: u32,
    pub status: RowStatus,
    #[serde(default)]
    pub recheck: u8,
}

extends_aiter_record!(CellResult, record);

impl CellResult {
    pub fn key(&self) -> CellKey {
        CellKey::new(self.shape(), self.libtype, self.kernel_id, self.split_k, self.recheck != 0)
    }

    pub fn is_ok(&self) -> bool {
        self.status.is_ok()
    }

    /// Checks what the journal promises its readers beyond the typed status: a finite positive `us` for
    /// "ok" rows.
    pub fn validate(&self) -> Result<(), String> {
        if self.status.is_ok() {
            match self.us {
                Some(u) if synth_core::table::aiter_csv::US_RANGE.contains(&u) => Ok(()),
                other => Err(format!(
                    "status ok but us = {other:?} (expected a time in {:?} us)",
                    synth_core::table::aiter_csv::US_RANGE
                )),
            }
        } else {
            Ok(())
        }
    }

    /// The CSV record, in [`columns`] order.
    pub fn to_record(&self) -> Vec<String> {
        let f = |v: Option<f64>| v.map(|x| format!("{x:.4}")).unwrap_or_default();
        let mut rec = self.record.to_record(Numbers::Fixed);
        rec.extend([self.device.clone(), self.backend.clone(), self.timing.clone()]);
        rec.extend([f(self.us_min), f(self.us_max), f(self.us_p10), f(self.us_p90)]);
        rec.extend([self.reps.to_string(), self.status.to_string(), self.recheck.to_string()]);
        rec
    }
}

/// Reads every row of a journal with the table reader ([`synth_core::table::read_aiter_csv`]'s strict checks,
/// kernel names against `catalog`), after checking that the header is exactly the journal's.
pub fn read_journal(path: &Path, catalog: &Catalog) -> Result<Vec<CellResult>> {
    let bytes = synth_base::input::read_table_capped(path, synth_base::input::MAX_TABLE_BYTES, "journal")
        .with_context(|| format!("cannot read journal {}", path.display()))?;
    read_journal_bytes(&bytes, &path.display().to_string(), catalog)
}

fn read_journal_bytes(bytes: &[u8], src: &str, catalog: &Catalog) -> Result<Vec<CellResult>> {
    Ok(read_journal_lines(bytes, src, catalog)?.into_iter().map(|(_, r)| r).collect())
}

/// Every row of a journal's bytes with its 1-based line, after the header check of [`read_journal`].
pub fn read_journal_lines(bytes: &[u8], src: &str, catalog: &Catalog) -> Result<Vec<(usize, CellResult)>> {
    check_header(bytes, src, false, Role::Out)?;
    rows_with_lines(bytes, src, catalog)
}

/// [`read_journal_lines`] for a journal given as an input (`synth merge`): a file that is not a journal is
/// named as such, with advice about inputs rather than about `--out`.
pub fn read_input_journal_lines(bytes: &[u8], src: &str, catalog: &Catalog) -> Result<Vec<(usize, CellResult)>> {
    check_header(bytes, src, false, Role::Input)?;
    rows_with_lines(bytes, src, catalog)
}

fn rows_with_lines(bytes: &[u8], src: &str, catalog: &Catalog) -> Result<Vec<(usize, CellResult)>> {
    let rows = parse_aiter_csv(bytes, src, catalog)?;
    Ok(rows.iter().map(|r| (r.line, CellResult::from_aiter_row(r))).collect())
}

/// Whose journal a header is checked for: the `--out` a run appends to, or an input it reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Out,
    Input,
}

/// The first line of `bytes` must be the journal's header. With `torn_ok`, a first line without its newline
/// may be a prefix of it (a header whose write was interrupted).
fn check_header(bytes: &[u8], src: &str, torn_ok: bool, role: Role) -> Result<()> {
    let want = columns().join(",");
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let complete = first.len() < bytes.len();
    let header = String::from_utf8_lossy(first).trim_end_matches('\r').to_string();
    if header == want || (torn_ok && !complete && want.as_bytes().starts_with(first)) {
        return Ok(());
    }
    let err = match role {
        Role::Out => synth_base::diag::Located::new(src, format!("header is `{header}`"))
            .hint(format!("expected `{want}` (a journal written by `synth bench`); use another --out")),
        Role::Input if bytes.is_empty() => synth_base::diag::Located::new(src, "the file is empty, not a journal")
            .hint("name only journals written by `synth bench` (nothing was written)"),
        Role::Input => synth_base::diag::Located::new(src, format!("header is `{header}`, not a journal's"))
            .hint(format!("expected `{want}`; name only journals written by `synth bench` (nothing was written)")),
    };
    Err(err.line(1).into())
}

/// Refuses rows of more than one device or software stack in one journal (what `synth import` and
/// `synth merge` require of it), naming the first row that differs from the first row and that row.
pub fn check_one_device(rows: &[(usize, CellResult)], src: &str) -> Result<()> {
    let Some((l0, r0)) = rows.first() else { return Ok(()) };
    let Some((line, row)) = rows.iter().find(|(_, r)| !same_device(r, r0)) else { return Ok(()) };
    bail!(
        "{src}:{line}: the row is from {} but line {l0} is from {}: a journal holds the measurements of one device \
         and one software stack (`synth import` and `synth merge` refuse others); move the rows of the other device \
         to a journal of their own, or pass another --out (nothing was measured)",
        describe_device(row),
        describe_device(r0)
    )
}

fn same_device(a: &CellResult, b: &CellResult) -> bool {
    a.device == b.device && a.gfx == b.gfx && a.cu_num == b.cu_num && a.backend == b.backend
}

/// `"name" (gfx, N CUs, backend "b")`, as the journal's messages show a row's device.
pub fn describe_device(r: &CellResult) -> String {
    use synth_base::sanitize::shown;
    format!("\"{}\" ({}, {} CUs, backend \"{}\")", shown(&r.device), shown(&r.gfx), r.cu_num, shown(&r.backend))
}

/// What a run measures on, as far as it knows it: the plan's CU count (`--cu-num`), and once the harness
/// has been asked, the device's name, gfx and backend.
#[derive(Debug, Clone, Default)]
pub struct ExpectedDevice {
    pub name: Option<String>,
    pub gfx: Option<String>,
    pub cu_num: Option<u32>,
    pub backend: Option<String>,
    /// Where the expectation comes from, for the message (e.g. "--cu-num 304", "the harness reports").
    pub source: String,
}

/// Refuses to resume a journal whose rows (one device: [`check_one_device`]) are from another device than
/// this run's: `first` is the journal's first row and its line.
pub fn check_resumable(path: &Path, first: Option<(usize, &CellResult)>, want: &ExpectedDevice) -> Result<()> {
    let Some((line, row)) = first else { return Ok(()) };
    let Some(what) = want.mismatch(row) else { return Ok(()) };
    bail!(
        "{}:{line}: {what} differs: the journal holds measurements of {}, and this run measures {} ({}); a journal \
         holds one device's measurements, so its cells are not this run's: pass another --out for this device \
         (nothing was measured)",
        path.display(),
        describe_device(row),
        want.describe(),
        want.source
    )
}

impl ExpectedDevice {
    /// What of `row`'s device differs from this expectation (`"device"`, `"CU count"`, ...), or `None`.
    fn mismatch(&self, row: &CellResult) -> Option<&'static str> {
        if self.name.as_ref().is_some_and(|n| *n != row.device) {
            Some("device")
        } else if self.gfx.as_ref().is_some_and(|g| *g != row.gfx) {
            Some("gfx")
        } else if self.cu_num.is_some_and(|c| c != row.cu_num) {
            Some("CU count")
        } else if self.backend.as_ref().is_some_and(|b| *b != row.backend) {
            Some("backend (runtime and version)")
        } else {
            None
        }
    }

    /// `"name", gfx, N CUs, backend "b"` (the parts known).
    fn describe(&self) -> String {
        use synth_base::sanitize::shown;
        let mut this = Vec::new();
        if let Some(n) = &self.name {
            this.push(format!("\"{}\"", shown(n)));
        }
        if let Some(g) = &self.gfx {
            this.push(shown(g));
        }
        if let Some(c) = self.cu_num {
            this.push(format!("{c} CUs"));
        }
        if let Some(b) = &self.backend {
            this.push(format!("backend \"{}\"", shown(b)));
        }
        this.join(", ")
    }
}

/// A journal as a resuming run reads it ([`read_for_resume`]): its rows with their 1-based lines, and a torn
/// last line left by an interrupted write, which holds no row.
#[derive(Debug)]
pub struct JournalContents {
    pub rows: Vec<(usize, CellResult)>,
    pub torn: Option<TornLine>,
}

/// The incomplete last line of a journal (no line end): an interrupted write.
#[derive(Debug, Clone)]
pub struct TornLine {
    /// Its 1-based line.
    pub line: usize,
    /// Its length in bytes.
    pub bytes: usize,
    /// Bytes before it (the whole lines).
    keep: usize,
}

/// [`read_for_resume`], saying on stderr when the last line is torn (`unit`: what a measuring run measures
/// again there, "cell" or "shape").
pub fn read_for_planning(path: &Path, catalog: &Catalog, unit: &str) -> Result<JournalContents> {
    let contents = read_for_resume(path, catalog)?;
    if let Some(torn) = &contents.torn {
        errln!(
            "journal {}:{}: the last line has no line end ({} bytes, an interrupted write): it is not counted as \
             measured; a measuring run cuts it and measures that {unit} again",
            synth_base::sanitize::shown_path(path),
            torn.line,
            torn.bytes
        );
    }
    Ok(contents)
}

/// Reads the journal at `path` for a run that only plans (`--dry-run`, `--plan-only`): the checks of
/// [`Journal::open`] (a regular file, not too large, not compressed, the header, one device), but nothing is
/// changed: a torn last line is reported in [`JournalContents::torn`], not cut, and no lock is taken.
pub fn read_for_resume(path: &Path, catalog: &Catalog) -> Result<JournalContents> {
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        bail!("journal {} is not a regular file; pass the path of a CSV file to --out", path.display());
    }
    let mut f = File::open(path).with_context(|| format!("cannot open journal {}", path.display()))?;
    let mut bytes = Vec::new();
    (&mut f)
        .take(synth_base::input::MAX_TABLE_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read journal {}", path.display()))?;
    contents_for_resume(&bytes, path, catalog)
}

/// The checks and rows of [`read_for_resume`] on a journal's bytes.
fn contents_for_resume(bytes: &[u8], path: &Path, catalog: &Catalog) -> Result<JournalContents> {
    let src = path.display().to_string();
    if bytes.len() as u64 > synth_base::input::MAX_TABLE_BYTES {
        bail!(
            "journal {} holds more than {} MiB, the cap for a journal; pass another --out",
            path.display(),
            synth_base::input::MAX_TABLE_BYTES >> 20
        );
    }
    if synth_base::input::is_gzip(bytes) {
        bail!(
            "journal {} is gzip-compressed, and a journal is appended to: decompress it (`gunzip -k {}`) and pass \
             the .csv to --out",
            path.display(),
            path.display()
        );
    }
    // The header is checked before a torn tail is looked at: a file that is not a journal is never changed.
    if !bytes.is_empty() {
        check_header(bytes, &src, true, Role::Out)?;
    }
    let torn = synth_base::logfile::torn_tail(bytes);
    let kept = &bytes[..torn.keep];
    let rows = if kept.is_empty() { Vec::new() } else { read_journal_lines(kept, &src, catalog)? };
    check_one_device(&rows, &src)?;
    let torn = torn.tail.as_ref().map(|_| TornLine {
        line: kept.iter().filter(|&&b| b == b'\n').count() + 1,
        bytes: torn.cut(bytes.len()),
        keep: torn.keep,
    });
    Ok(JournalContents { rows, torn })
}

impl CellResult {
    /// The journal view of a row read by the table reader (extra columns by name).
    pub fn from_aiter_row(r: &AiterRow) -> CellResult {
        let text = |k: &str| r.extra.get(k).cloned().unwrap_or_default();
        let num = |k: &str| r.extra.get(k).and_then(|s| s.parse::<f64>().ok());
        CellResult {
            record: r.record.clone(),
            device: text("device"),
            backend: text("backend"),
            timing: text("timing"),
            us_min: num("us_min"),
            us_max: num("us_max"),
            us_p10: num("us_p10"),
            us_p90: num("us_p90"),
            reps: r.extra.get("reps").and_then(|s| s.parse().ok()).unwrap_or(0),
            status: r.status(),
            recheck: u8::from(r.is_recheck()),
        }
    }
}

/// An open journal, appending.
pub struct Journal {
    path: PathBuf,
    /// The exclusive lock on `<journal>.lock`, held while the journal is open.
    _lock: JournalLock,
    /// The journal file itself, locked exclusively ([`lock_file`]): another name of the same file (a
    /// symbolic or hard link) has another `.lock`, and the file's own lock refuses the second run.
    _held: File,
    writer: csv::Writer<File>,
    done: HashSet<CellKey>,
    rows: Vec<CellResult>,
    /// The first row read at open and its line.
    first: Option<(usize, CellResult)>,
    /// What the file was before [`Journal::open`] wrote the header into it.
    before: Before,
    /// The catalog rows are read against: a row is written only if the reader would read it back.
    catalog: Catalog,
    /// The device this run measures on, once the harness has said ([`Journal::expect_device`]).
    expected: Option<ExpectedDevice>,
}

/// The journal file before this run opened it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Before {
    /// There was none: `open` created it.
    Absent,
    /// An empty file.
    Empty,
    /// A journal with at least its header.
    Journal,
}

impl Journal {
    /// Opens (or creates) the journal at `path`. Existing rows are read (their keys are "done"); a torn
    /// last line left by an interrupted write is cut off ([`synth_base::logfile`]); a different header is an
    /// error.
    /// Returns the journal and the number of bytes cut.
    pub fn open(path: &Path, catalog: &Catalog) -> Result<(Journal, usize)> {
        if path.exists() && !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            bail!("journal {} is not a regular file; pass the path of a CSV file to --out", path.display());
        }
        let lock = lock_journal(path)?;
        // A run refused here wrote nothing: the lock file it created goes too.
        let opened = match Opened::open(path, catalog) {
            Ok(v) => v,
            Err(e) => {
                lock.release_unused();
                return Err(e);
            }
        };
        let Opened { cut, rows, before, writer, held } = opened;
        let done = rows.iter().map(|(_, r)| r.key()).collect();
        let first = rows.first().cloned();
        let rows = rows.into_iter().map(|(_, r)| r).collect();
        let journal = Journal {
            path: path.to_path_buf(),
            _lock: lock,
            _held: held,
            writer,
            done,
            rows,
            first,
            before,
            catalog: catalog.clone(),
            expected: None,
        };
        Ok((journal, cut))
    }

    /// The first row read at open and its 1-based line (`None` for a new or empty journal).
    pub fn first_read(&self) -> Option<(usize, &CellResult)> {
        self.first.as_ref().map(|(l, r)| (*l, r))
    }

    /// After a failed run: a journal that [`Journal::open`] created (or whose empty file it wrote the header
    /// into) and that holds no row is taken back: removed (or emptied again), so a failed first run leaves no
    /// journal behind. A journal with rows is kept as it is.
    pub fn discard_if_unused(self) {
        if !self.rows.is_empty() {
            return;
        }
        let Journal { path, _lock, writer, before, .. } = self;
        drop(writer);
        match before {
            Before::Absent => drop(std::fs::remove_file(&path)),
            Before::Empty => drop(OpenOptions::new().write(true).open(&path).and_then(|f| f.set_len(0))),
            Before::Journal => {}
        }
        _lock.release_unused();
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keys of the cells already in the journal.
    pub fn is_done(&self, key: &CellKey) -> bool {
        self.done.contains(key)
    }

    /// All rows, those read at open and those appended since.
    pub fn rows(&self) -> &[CellResult] {
        &self.rows
    }

    /// From now on every appended row must be from this device ([`check_resumable`] checked the rows
    /// read at open): a row of another is refused before it is written, so a later resume never finds
    /// the journal holding two devices.
    pub fn expect_device(&mut self, want: ExpectedDevice) {
        self.expected = Some(want);
    }

    /// Appends one row and flushes it to the file. A key already present is an error (no duplicates); so is
    /// a row the journal reader would refuse (a negative tflops, an errRatio past 1, ...) or one from
    /// another device than [`Journal::expect_device`] named: the row is not written, and the journal
    /// stays one that resumes, merges and imports.
    pub fn append(&mut self, row: CellResult) -> Result<()> {
        let at = || format!("harness row M={} N={} K={} id={}", row.m, row.n, row.k, row.kernel_id);
        row.validate().map_err(|e| anyhow::anyhow!("{}: {e}", at()))?;
        self.check_readable(&row).map_err(|e| anyhow::anyhow!("{}: {e}; the row was not written", at()))?;
        if let Some(want) = &self.expected {
            if let Some(what) = want.mismatch(&row) {
                bail!(
                    "{}: its {what} differs: the row is from {}, and this run measures {} ({}); the row was not \
                     written",
                    at(),
                    describe_device(&row),
                    want.describe(),
                    want.source
                );
            }
        }
        if !self.done.insert(row.key()) {
            bail!("the harness measured {} twice; it was written once", row.key());
        }
        self.writer.write_record(row.to_record())?;
        self.writer.flush()?;
        self.rows.push(row);
        Ok(())
    }
}

impl Journal {
    /// Reads `row` back as the journal reader ([`synth_core::table::aiter_csv::parse_aiter_csv`]) would.
    fn check_readable(&self, row: &CellResult) -> Result<()> {
        let mut w = csv::WriterBuilder::new().from_writer(Vec::new());
        w.write_record(columns())?;
        w.write_record(row.to_record())?;
        let bytes = w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?;
        synth_core::table::aiter_csv::parse_aiter_csv(&bytes, "row", &self.catalog).map(|_| ()).map_err(|e| {
            let column = e.column.as_deref().map(|c| format!("column {c}")).unwrap_or_default();
            let value =
                e.value.as_deref().map(|v| format!(" = \"{}\"", synth_base::sanitize::shown(v))).unwrap_or_default();
            anyhow::anyhow!("{column}{value}: {} (the journal reader would refuse it)", e.message)
        })
    }
}

/// A journal file [`Journal::open`] opened under its lock: the rows read, and the file appending.
struct Opened {
    /// Bytes of a torn last line cut off.
    cut: usize,
    rows: Vec<(usize, CellResult)>,
    before: Before,
    writer: csv::Writer<File>,
    /// The file, locked.
    held: File,
}

impl Opened {
    /// Reads the journal at `path` (if any: cutting a torn last line) and opens it for appending, writing
    /// the header into a new or empty file.
    fn open(path: &Path, catalog: &Catalog) -> Result<Opened> {
        let existed = path.exists();
        let (held, rows, cut) = if existed {
            let (f, contents) = Opened::read_existing(path, catalog)?;
            (Some(f), contents.rows, contents.torn.map_or(0, |t| t.bytes))
        } else {
            (None, Vec::new(), 0)
        };
        let needs_header = !existed || std::fs::metadata(path)?.len() == 0;
        let before = match (existed, needs_header) {
            (false, _) => Before::Absent,
            (true, true) => Before::Empty,
            (true, false) => Before::Journal,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open journal {} for appending", path.display()))?;
        let held = match held {
            Some(f) => f,
            None => {
                let f = file.try_clone()?;
                lock_file(&f, path)?;
                f
            }
        };
        let mut writer = csv::WriterBuilder::new().has_headers(false).from_writer(file);
        if needs_header {
            writer.write_record(columns())?;
            writer.flush()?;
        }
        Ok(Opened { cut, rows, before, writer, held })
    }

    /// The existing journal at `path`, locked, and what it holds; a torn last line is cut off.
    fn read_existing(path: &Path, catalog: &Catalog) -> Result<(File, JournalContents)> {
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open journal {}", path.display()))?;
        lock_file(&f, path)?;
        let mut bytes = Vec::new();
        (&mut f).take(synth_base::input::MAX_TABLE_BYTES + 1).read_to_end(&mut bytes)?;
        let contents = contents_for_resume(&bytes, path, catalog)?;
        if let Some(torn) = &contents.torn {
            f.set_len(torn.keep as u64)?;
            f.seek(SeekFrom::Start(torn.keep as u64))?;
        }
        Ok((f, contents))
    }
}

/// The lock file of the journal at `path`: `<path>.lock`.
pub fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".lock");
    path.with_file_name(name)
}

/// How a lock's messages name what is locked: the file (`journal`), the run that holds it (`measurement
/// run`) and the command that writes its `pid ...` line (`synth bench`).
pub struct LockWords {
    pub what: &'static str,
    pub run: &'static str,
    pub writer: &'static str,
}

/// A journal's lock, in messages.
const JOURNAL_LOCK: LockWords = LockWords { what: "journal", run: "measurement run", writer: "synth bench" };

/// Takes the exclusive lock of the journal at `path` (an OS file lock on [`lock_path`], released when
/// the process ends however it ends) and records this process in it. A second `synth bench` on the same
/// journal gets one error naming the holder. The lock file is opened without following links
/// ([`super::auxfile`]).
pub fn lock_journal(path: &Path) -> Result<JournalLock> {
    lock_exclusive(path, &JOURNAL_LOCK)
}

/// The lock of [`lock_journal`] for any file one run at a time may write (a rewrite's trace): `words`
/// name it in the messages.
pub fn lock_exclusive(path: &Path, words: &LockWords) -> Result<JournalLock> {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    let lock_path = lock_path(path);
    let mut created_dirs = Vec::new();
    if let Some(dir) = lock_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let mut missing = dir;
        while !missing.exists() {
            created_dirs.push(missing.to_path_buf());
            match missing.parent().filter(|d| !d.as_os_str().is_empty()) {
                Some(up) => missing = up,
                None => break,
            }
        }
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // A lock file another run removes (after a run that wrote nothing) may be opened here just before: the
    // lock is taken again on the file the path names when the one locked is no longer it.
    for _ in 0..100 {
        let existed = std::fs::symlink_metadata(&lock_path).is_ok();
        // Never through a link: a planted `<journal>.lock` symlink would get its target overwritten below.
        let file =
            super::auxfile::open(&lock_path, super::auxfile::Mode::ReadWrite, &format!("the {} lock", words.what))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.take(4096).read_to_string(&mut holder);
                let holder = synth_base::sanitize::shown(holder.trim());
                bail!(
                    "{} {} is in use by another {} ({}); wait for it to finish, or pass another --out",
                    words.what,
                    path.display(),
                    words.run,
                    if holder.is_empty() { "holder unknown".to_string() } else { holder }
                );
            }
            Err(std::fs::TryLockError::Error(e)) => {
                bail!("cannot lock the {} {} (through {}): {e}", words.what, path.display(), lock_path.display())
            }
        }
        let held = file.metadata()?;
        if !std::fs::metadata(&lock_path).is_ok_and(|m| m.dev() == held.dev() && m.ino() == held.ino()) {
            continue;
        }
        let lock = JournalLock { file, path: lock_path.clone(), created: (!existed).then_some(created_dirs.clone()) };
        // A file of the user's at the lock's name (a plan written there, notes) is not a lock to overwrite.
        let mut head = Vec::new();
        (&lock.file).take(64).read_to_end(&mut head)?;
        if !head.is_empty() && !head.starts_with(b"pid ") {
            bail!(
                "{} is in the way: the {}'s lock goes there, and it holds something else (not the `pid ...` \
                 line {} writes); move it away or pass another --out (nothing was written)",
                lock_path.display(),
                words.what,
                words.writer
            );
        }
        let mut file = &lock.file;
        file.seek(SeekFrom::Start(0))?;
        file.set_len(0)?;
        let args: Vec<String> = std::env::args().collect();
        write!(file, "pid {}: {}", std::process::id(), args.join(" "))?;
        file.flush()?;
        return Ok(lock);
    }
    bail!(
        "cannot lock the {} {}: its lock file {} keeps being replaced",
        words.what,
        path.display(),
        lock_path.display()
    )
}

/// Locks the journal file `file` (opened from `path`) exclusively, or says that another run holds it: the
/// run that locked it named it through another path (a symbolic or hard link), so its `.lock` is elsewhere.
fn lock_file(file: &File, path: &Path) -> Result<()> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "journal {} is in use by another measurement run, which names the same file through another path (a \
             symbolic or hard link); wait for it to finish, or pass another --out (nothing was written)",
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => bail!("cannot lock the journal {}: {e}", path.display()),
    }
}

/// The exclusive lock of a journal ([`lock_journal`]), held while this value lives (the OS releases it
/// when the process ends however it ends). The lock file stays when the run ends; a run that wrote
/// nothing takes back the lock file it created, and the directories it created for it
/// ([`JournalLock::release_unused`]).
pub struct JournalLock {
    file: File,
    path: PathBuf,
    /// The directories created for the lock file (deepest first), when this run created the file.
    created: Option<Vec<PathBuf>>,
}

impl JournalLock {
    /// After a run that wrote nothing: removes the lock file if this run created it (still holding the lock,
    /// so a run that opened it meanwhile finds it replaced and locks the new one), then the directories
    /// created for it that are still empty.
    pub fn release_unused(self) {
        if let Some(dirs) = &self.created {
            let _ = std::fs::remove_file(&self.path);
            for d in dirs {
                let _ = std::fs::remove_dir(d);
            }
        }
        drop(self.file);
    }
}

/// Noise: median over recheck pairs (both ok) of |us - us_recheck| / us, and the number of pairs.
pub fn recheck_noise(rows: &[CellResult]) -> Option<(f64, usize)> {
    let first: std::collections::HashMap<CellKey, f64> =
        rows.iter().filter(|r| r.recheck == 0 && r.is_ok()).filter_map(|r| Some((r.key(), r.us?))).collect();
    let mut rel: Vec<f64> = rows
        .iter()
        .filter(|r| r.recheck != 0 && r.is_ok())
        .filter_map(|r| {
            let base = *first.get(&CellKey { recheck: false, ..r.key() })?;
            Some((r.us? - base).abs() / base)
        })
        .collect();
    if rel.is_empty() {
        return None;
    }
    rel.sort_by(|a, b| a.total_cmp(b));
    let n = rel.len();
    let med = if n % 2 == 1 { rel[n / 2] } else { (rel[n / 2 - 1] + rel[n / 2]) / 2.0 };
    Some((med, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_open_of_one_journal_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.csv");
        let catalog = Catalog::embedded();
        let (first, _) = Journal::open(&path, &catalog).unwrap();
        let err = Journal::open(&path, &catalog).err().expect("the journal is locked");
        let msg = format!("{err:#}");
        assert!(msg.contains("is in use by another measurement run"), "{msg}");
        assert!(msg.contains(&format!("pid {}", std::process::id())), "{msg}");
        drop(first);
        Journal::open(&path, &catalog).expect("free again once the first is closed");
    }

    #[test]
    fn one_journal_named_through_a_link_is_refused_while_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.csv");
        let catalog = Catalog::embedded();
        let (first, _) = Journal::open(&path, &catalog).unwrap();
        let soft = dir.path().join("alias.csv");
        std::os::unix::fs::symlink(&path, &soft).unwrap();
        let hard = dir.path().join("hard.csv");
        std::fs::hard_link(&path, &hard).unwrap();
        for other in [&soft, &hard] {
            let err = format!("{:#}", Journal::open(other, &catalog).err().expect("the file is held"));
            assert!(err.contains("names the same file through another path"), "{err}");
            assert!(!lock_path(other).exists(), "a refused run leaves no lock file");
        }
        drop(first);
        Journal::open(&soft, &catalog).expect("free once the first run ends");
    }

    #[test]
    fn a_planted_lock_link_is_refused_and_its_target_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.csv");
        let target = dir.path().join("precious");
        std::fs::write(&target, "keep\n").unwrap();
        std::os::unix::fs::symlink(&target, lock_path(&path)).unwrap();
        let err = format!("{:#}", Journal::open(&path, &Catalog::embedded()).err().expect("refused"));
        assert!(err.contains("j.csv.lock is a symbolic link"), "{err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep\n");
        assert!(!path.exists(), "no journal is created");
    }

    /// Header and the first two rows of a committed journal.
    fn journal_text() -> String {
        let text = std::fs::read_to_string(concat!(
            concat!(env!("CARGO_MANIFEST_DIR"), "/../.."),
            "/measurements/h200/llama-3.1-8b-tp1.csv"
        ))
        .unwrap();
        text.lines().take(3).map(|l| format!("{l}\n")).collect()
    }

    #[test]
    fn a_torn_last_line_is_cut_and_written_again_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.csv");
        let catalog = Catalog::embedded();
        let whole = journal_text();
        let last = whole.lines().nth(2).unwrap();
        // The last row was torn before its last field's digit and its newline.
        let torn = &whole[..whole.len() - 2];
        std::fs::write(&path, torn).unwrap();
        let (mut journal, cut) = Journal::open(&path, &catalog).unwrap();
        assert_eq!(cut, last.len() - 1);
        assert_eq!(journal.rows().len(), 1);
        let lost = CellResult::from_aiter_row(&parse_aiter_csv(whole.as_bytes(), "j.csv", &catalog).unwrap()[1]);
        assert!(!journal.is_done(&lost.key()));
        journal.append(lost).unwrap();
        drop(journal);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(&whole[..whole.len() - last.len() - 1]) && text.ends_with(",ok,0\n"), "{text}");
        assert_eq!(text.lines().count(), 3);

        // A whole journal loses nothing.
        let (journal, cut) = Journal::open(&path, &catalog).unwrap();
        assert_eq!((cut, journal.rows().len()), (0, 2));
    }

    #[test]
    fn a_file_that_is_not_a_journal_is_refused_unchanged() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::embedded();
        // A rule file without a final newline: its last line would be a "torn tail".
        let rule = dir.path().join("rule.json");
        let text = "{\n  \"leaves\": []\n}";
        std::fs::write(&rule, text).unwrap();
        let err = format!("{:#}", Journal::open(&rule, &catalog).err().expect("refused"));
        assert!(err.contains("rule.json:1: header is `{`"), "{err}");
        assert_eq!(std::fs::read_to_string(&rule).unwrap(), text);
        // One line, no newline, not a header prefix.
        std::fs::write(&rule, "{}").unwrap();
        assert!(Journal::open(&rule, &catalog).is_err());
        assert_eq!(std::fs::read_to_string(&rule).unwrap(), "{}");
        // A gzip-compressed journal: refused (it cannot be appended to), unchanged; read_journal reads it.
        let gz = dir.path().join("j.csv.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(journal_text().as_bytes()).unwrap();
        let bytes = enc.finish().unwrap();
        std::fs::write(&gz, &bytes).unwrap();
        let err = format!("{:#}", Journal::open(&gz, &catalog).err().expect("refused"));
        assert!(err.contains("is gzip-compressed, and a journal is appended to"), "{err}");
        assert_eq!(std::fs::read(&gz).unwrap(), bytes);
        assert_eq!(read_journal(&gz, &catalog).unwrap().len(), 2);
        // A header torn before its newline is still cut and written again.
        let j = dir.path().join("j.csv");
        std::fs::write(&j, &journal_text()[..10]).unwrap();
        let (journal, cut) = Journal::open(&j, &catalog).unwrap();
        assert_eq!((cut, journal.rows().len()), (10, 0));
        drop(journal);
        assert_eq!(std::fs::read_to_string(&j).unwrap(), format!("{}\n", columns().join(",")));
    }
}
