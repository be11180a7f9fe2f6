//! AITER's tuner as a subprocess (`csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py` in an AITER
//! checkout) and the import of its profile file into a journal.
//!
//! The tuner reads an untuned CSV (`M,N,K`), measures every candidate of `--libtype` per shape and, with
//! `-o2`, rewrites a profile file after each batch of `--batch` shapes ([`synth_core::table::aiter_profile`]
//! reads it). [`Tuner::run`] writes the untuned CSV, runs the tuner in its own process group (the one
//! subprocess helper, [`synth_base::process`]), streams its output (lines cut at a cap) to a log and stderr,
//! and imports the profile file whenever it has settled, reading only what was added since the last
//! import. A watchdog stops a tuner that prints nothing and adds nothing to its profile file for
//! [`Tuner::silence_limit`]; a tuner that exits while a grandchild keeps its pipes open is not waited for.
//! Every file handed to the tuner has an absolute path (it runs in the checkout) and is used only when it
//! is absent or a regular file, never through a link ([`crate::measure::auxfile`]).

use std::collections::{BTreeSet, HashSet};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;

use super::auxfile::{self, Mode};
use super::journal::{CellResult, Journal};
use synth_base::process::{run_capture, Event, Watched};
use synth_core::catalog::Catalog;
use synth_core::table::aiter_profile::{ProfileCell, ProfileReader};
use synth_core::table::Shape;

/// The tuner script, relative to the AITER checkout.
pub const TUNER_SCRIPT: &str = "csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py";

/// Probe exit codes (synth/app/aiter_probe.py).
const PROBE_NO_TORCH: i32 = 3;
const PROBE_NO_GPU: i32 = 5;
const PROBE_NO_AITER: i32 = 7;
const PROBE_NOT_ROCM: i32 = 8;
/// Longest wait for the device probe.
const PROBE_LIMIT: Duration = Duration::from_secs(600);
/// Default of [`Tuner::silence_limit`] (bench's `--cell-timeout` default).
pub const DEFAULT_SILENCE: Duration = Duration::from_secs(1800);
/// Poll interval of the tuner loop.
const TICK: Duration = Duration::from_millis(200);

/// The tuner's `--libtype` values this backend passes (asm and opus kernels are not in the catalog).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunerLibtype {
    /// CK legacy instances only.
    Ck,
    /// CK-tile instances only.
    Cktile,
    /// CK legacy and CK-tile.
    Both,
    /// Every backend the tuner has; asm and opus rows are counted and left out of the journal.
    All,
}

impl TunerLibtype {
    /// The value of the tuner's `--libtype`.
    pub fn as_arg(self) -> &'static str {
        match self {
            TunerLibtype::Ck => "ck",
            TunerLibtype::Cktile => "cktile",
            TunerLibtype::Both => "both",
            TunerLibtype::All => "all",
        }
    }
}

/// What the probe reports about the ROCm device.
#[derive(Debug, Clone, Deserialize)]
pub struct AiterDevice {
    pub name: String,
    pub gfx: String,
    pub cu_num: u32,
    pub devices: u32,
    pub torch: String,
    pub hip: String,
}

/// How to run AITER's tuner (`synth bench --backend aiter` checks its options and builds it).
#[derive(Debug, Clone)]
pub struct Tuner {
    pub python: PathBuf,
    /// The AITER checkout (absolute).
    pub aiter_dir: PathBuf,
    pub libtype: TunerLibtype,
    pub split_k: bool,
    pub mp: Option<u32>,
    pub err_ratio: f64,
    pub warmup: Option<u32>,
    pub iters: Option<u32>,
    pub timeout: Option<u32>,
    pub block_per_cu: Vec<u32>,
    pub batch: u32,
    pub extra_args: Vec<String>,
    /// Longest time the tuner may print nothing and add nothing to its profile file before it is stopped.
    pub silence_limit: Duration,
    /// The GPUs the tuner (and the probe) may see: `HIP_VISIBLE_DEVICES` and `CUDA_VISIBLE_DEVICES` set to
    /// this comma list (`synth bench --gpus`); `None` leaves the environment as it is.
    pub visible_devices: Option<String>,
}

/// Files of one tuner run inside the work directory (absolute paths).
#[derive(Debug, Clone)]
pub struct RunFiles {
    pub untuned: PathBuf,
    pub tuned: PathBuf,
    pub profile: PathBuf,
    pub log: PathBuf,
}

/// `path` made absolute against the working directory (unchanged when that cannot be read).
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

impl RunFiles {
    /// `<dir>/<prefix>untuned.csv`, `tuned.csv`, `profile.csv` and the shared `tuner.log`, absolute: the
    /// tuner runs in the AITER checkout, so a relative path would name another file there.
    pub fn in_dir(dir: &Path, prefix: &str) -> RunFiles {
        let dir = absolute(dir);
        RunFiles {
            untuned: dir.join(format!("{prefix}untuned.csv")),
            tuned: dir.join(format!("{prefix}tuned.csv")),
            profile: dir.join(format!("{prefix}profile.csv")),
            log: dir.join("tuner.log"),
        }
    }

    /// Refuses a link or a non-regular file at any of the names.
    fn check(&self) -> Result<()> {
        auxfile::check(&self.untuned, "the tuner's untuned CSV")?;
        auxfile::check(&self.tuned, "the tuner's tune file")?;
        auxfile::check(&self.profile, "the tuner's profile file")?;
        auxfile::check(&self.log, "the tuner log")
    }
}

/// Counts of one profile import.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportStats {
    /// Rows appended to the journal.
    pub appended: usize,
    /// Rows whose cell the journal already held (an earlier import).
    pub already: usize,
    /// asm / opus rows (no catalog instances; not journaled).
    pub other_libtype: usize,
    /// Shapes of the rows appended.
    pub shapes: BTreeSet<Shape>,
}

impl ImportStats {
    fn add(&mut self, s: ImportStats) {
        self.appended += s.appended;
        self.already += s.already;
        self.other_libtype = self.other_libtype.max(s.other_libtype);
        self.shapes.extend(s.shapes);
    }
}

/// Journal columns the tuner does not report, the same for every row of a run.
#[derive(Debug, Clone)]
pub struct RowMeta {
    pub device: String,
    pub backend: String,
    pub timing: String,
    pub reps: u32,
    /// 1 for the rows of a recheck run.
    pub recheck: u8,
    /// The errRatio tolerance the tuner ran with.
    pub err_ratio: f64,
}

impl RowMeta {
    fn cell_result(&self, c: ProfileCell) -> CellResult {
        CellResult {
            record: c.record,
            device: self.device.clone(),
            backend: self.backend.clone(),
            timing: self.timing.clone(),
            us_min: None,
            us_max: None,
            us_p10: None,
            us_p90: None,
            reps: self.reps,
            status: c.status,
            recheck: self.recheck,
        }
    }
}

/// The shape of a journal row.
pub fn shape_of(r: &CellResult) -> Shape {
    Shape::new(r.m, r.n, r.k)
}

/// Whether the journal holds rows of shape `s` from a run marked `recheck`.
pub fn shape_in_journal(journal: &Journal, s: &Shape, recheck: u8) -> bool {
    journal.rows().iter().any(|r| shape_of(r) == *s && r.recheck == recheck)
}

/// Imports a profile file as it grows: the complete lines added since the last [`ProfileImport::poll`]
/// are parsed, rows whose cell the journal lacks are appended. When the file was rewritten with other
/// bytes before the point already read (it shrank, or the last line read changed), it is read again from
/// the start (rows already in the journal are counted, not appended twice). At most
/// [`synth_base::input::MAX_TABLE_BYTES`] are read in all; the file is opened without following links.
pub struct ProfileImport {
    path: PathBuf,
    err_ratio: f64,
    reader: ProfileReader,
    /// Bytes of complete lines read.
    offset: u64,
    /// The last complete line read (with its newline), to notice a rewrite.
    last_line: Vec<u8>,
}

impl ProfileImport {
    /// An import of the profile file at `path` of a tuner run with tolerance `err_ratio`.
    pub fn new(path: &Path, err_ratio: f64) -> ProfileImport {
        ProfileImport {
            path: path.to_path_buf(),
            err_ratio,
            reader: ProfileReader::new(path.display().to_string(), err_ratio),
            offset: 0,
            last_line: Vec::new(),
        }
    }

    fn restart(&mut self) {
        *self = ProfileImport::new(&self.path.clone(), self.err_ratio);
    }

    /// The bytes added since the last poll, cut after their last newline (a row being written waits).
    fn new_bytes(&mut self) -> Result<Vec<u8>> {
        let what = "the tuner's profile file";
        let mut f = auxfile::open(&self.path, Mode::Read, what)?;
        let len = f.metadata()?.len();
        let cap = synth_base::input::MAX_TABLE_BYTES;
        if len > cap {
            bail!(
                "{what} {} holds more than {} MiB (the cap for a latency table); is it the right file?",
                self.path.display(),
                cap >> 20
            );
        }
        let back = self.last_line.len() as u64;
        let unchanged = len >= self.offset && {
            let mut tail = vec![0; back as usize];
            f.seek(SeekFrom::Start(self.offset - back))?;
            f.read_exact(&mut tail).is_ok() && tail == self.last_line
        };
        if !unchanged {
            self.restart();
            f.seek(SeekFrom::Start(0))?;
        }
        let mut bytes = Vec::new();
        f.take(cap - self.offset).read_to_end(&mut bytes)?;
        let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
        bytes.truncate(keep);
        if keep > 0 {
            let start = bytes[..keep - 1].iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
            self.last_line = bytes[start..].to_vec();
        }
        self.offset += keep as u64;
        Ok(bytes)
    }

    /// Reads what was added and appends every row whose cell the journal lacks (rows of shapes outside
    /// `only`, when given, are errors: the file belongs to this journal's work directory).
    pub fn poll(
        &mut self,
        journal: &mut Journal,
        meta: &RowMeta,
        catalog: &Catalog,
        only: Option<&HashSet<Shape>>,
    ) -> Result<ImportStats> {
        let mut stats = ImportStats::default();
        if std::fs::symlink_metadata(&self.path).is_err() {
            return Ok(stats);
        }
        let bytes = self.new_bytes()?;
        let chunk = self.reader.read_lines(&bytes, catalog)?;
        stats.other_libtype = chunk.other_libtype;
        let src = self.path.display().to_string();
        let mut rows = Vec::with_capacity(chunk.cells.len());
        for (line, cell) in chunk.cells {
            let cell = meta.cell_result(cell);
            if let Some(want) = only {
                if !want.contains(&shape_of(&cell)) && !journal.is_done(&cell.key()) {
                    bail!(
                        "{src}:{line}: shape {} was not asked of this tuner run; the work directory belongs to another journal — remove {}",
                        shape_of(&cell),
                        self.path.parent().map(|p| p.display().to_string()).unwrap_or_default()
                    );
                }
            }
            rows.push((line, cell));
        }
        for (line, cell) in rows {
            if journal.is_done(&cell.key()) {
                stats.already += 1;
                continue;
            }
            stats.shapes.insert(shape_of(&cell));
            journal.append(cell).with_context(|| format!("{src}:{line}"))?;
            stats.appended += 1;
        }
        Ok(stats)
    }
}

/// Reads the whole profile file at `path` once and appends every row whose cell the journal lacks (see
/// [`ProfileImport::poll`]).
pub fn import_profile(
    path: &Path,
    journal: &mut Journal,
    meta: &RowMeta,
    catalog: &Catalog,
    only: Option<&HashSet<Shape>>,
) -> Result<ImportStats> {
    ProfileImport::new(path, meta.err_ratio).poll(journal, meta, catalog, only)
}

/// The tuner's input for `shapes`: an `M,N,K` header and one row per shape.
pub fn untuned_csv(shapes: &[Shape]) -> String {
    let mut text = String::from("M,N,K\n");
    for s in shapes {
        text.push_str(&format!("{},{},{}\n", s.m, s.n, s.k));
    }
    text
}

/// Writes the tuner's input ([`untuned_csv`]) into its work directory, never through a link.
pub fn write_untuned(path: &Path, shapes: &[Shape]) -> Result<()> {
    let mut file = auxfile::open(path, Mode::Truncate, "the tuner's untuned CSV")?;
    file.write_all(untuned_csv(shapes).as_bytes()).with_context(|| format!("cannot write {}", path.display()))
}

impl Tuner {
    /// The same tuner on the GPUs `gpus` (`synth bench --gpus`): only they are visible to it, and its `--mp`
    /// (the process pool AITER's `mp_tuner` spreads the candidates over, one process per visible GPU) is
    /// their count. An `--mp` given as well must be that count.
    pub fn on_gpus(self, gpus: &[String]) -> Result<Tuner> {
        let n = gpus.len() as u32;
        if let Some(mp) = self.mp.filter(|&mp| mp != n) {
            bail!(
                "--mp {mp} and --gpus {} disagree: with --gpus the tuner runs one process per named GPU (--mp {n});                  leave out --mp",
                gpus.join(",")
            );
        }
        Ok(Tuner { mp: Some(n), visible_devices: Some(gpus.join(",")), ..self })
    }

    /// The same tuner with another watchdog.
    pub fn with_silence_limit(self, limit: Duration) -> Tuner {
        Tuner { silence_limit: limit, ..self }
    }

    fn python_command(&self) -> Command {
        let mut c = Command::new(&self.python);
        c.current_dir(&self.aiter_dir);
        let mut path = std::ffi::OsString::from(&self.aiter_dir);
        if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
            path.push(":");
            path.push(old);
        }
        c.env("PYTHONPATH", path);
        if let Some(ids) = &self.visible_devices {
            c.env("HIP_VISIBLE_DEVICES", ids).env("CUDA_VISIBLE_DEVICES", ids);
        }
        c
    }

    fn spawn_error(&self, e: std::io::Error) -> anyhow::Error {
        anyhow!(
            "cannot start Python `{}`: {e}; pass --python with the interpreter AITER is installed for",
            self.python.display()
        )
    }

    /// Checks Python, PyTorch (a ROCm build), the GPU and AITER, and describes the device.
    pub fn probe(&self) -> Result<AiterDevice> {
        let script = tempfile::Builder::new()
            .prefix("synth-aiter-probe")
            .suffix(".py")
            .tempfile()
            .context("cannot create the probe script")?;
        std::fs::write(script.path(), include_str!("aiter_probe.py")).context("cannot write the probe script")?;
        let out = run_capture(self.python_command().arg(script.path()), PROBE_LIMIT, 1 << 20)
            .map_err(|e| self.spawn_error(e))?;
        let err = synth_base::sanitize::shown(String::from_utf8_lossy(&out.stderr).trim());
        let py = self.python.display();
        let Some(status) = out.status else {
            bail!("the device probe gave no answer in {} s and was stopped (`{py}`)", PROBE_LIMIT.as_secs());
        };
        if !status.success() {
            return Err(match status.code() {
                Some(PROBE_NO_TORCH) => anyhow!("PyTorch is not importable by `{py}` ({err}); pass --python with AITER's interpreter"),
                Some(PROBE_NOT_ROCM) => anyhow!("{err}; AITER's CK kernels need a ROCm build of PyTorch (pass another --python)"),
                Some(PROBE_NO_GPU) => anyhow!("no ROCm GPU found: {err}"),
                Some(PROBE_NO_AITER) => anyhow!(
                    "AITER is not importable from {} by `{py}` ({err}); install it (`pip install -e .` in the checkout) or pass another --aiter-dir",
                    self.aiter_dir.display()
                ),
                other => anyhow!("the device probe exited with {other:?}: {err}"),
            });
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
        serde_json::from_str(line).with_context(|| {
            format!("the device probe printed {}, expected one JSON object", synth_base::sanitize::shown(line))
        })
    }

    /// The tuner's command line for one run (every file absolute).
    pub fn args(&self, files: &RunFiles) -> Vec<String> {
        let path = |p: &Path| absolute(p).display().to_string();
        let mut v: Vec<String> = vec![
            TUNER_SCRIPT.into(),
            "-i".into(),
            path(&files.untuned),
            "-o".into(),
            path(&files.tuned),
            "-o2".into(),
            path(&files.profile),
            "--libtype".into(),
            self.libtype.as_arg().into(),
            "--errRatio".into(),
            format!("{}", self.err_ratio),
            "--batch".into(),
            self.batch.to_string(),
        ];
        if self.split_k {
            v.push("-k".into());
        }
        let mut opt = |flag: &str, val: Option<u32>| {
            if let Some(x) = val {
                v.push(flag.into());
                v.push(x.to_string());
            }
        };
        opt("--mp", self.mp);
        opt("--warmup", self.warmup);
        opt("--iters", self.iters);
        opt("--timeout", self.timeout);
        if !self.block_per_cu.is_empty() {
            v.push("--blockPerCu".into());
            v.extend(self.block_per_cu.iter().map(|b| b.to_string()));
        }
        v.extend(self.extra_args.iter().cloned());
        v
    }

    /// Runs the tuner on `shapes`, importing its profile file into `journal` (rows marked `recheck`) as it
    /// settles and once more at the end. Tuner output goes to `files.log` and, line by line, to stderr.
    pub fn run(
        &self,
        shapes: &[Shape],
        files: &RunFiles,
        journal: &mut Journal,
        meta: &RowMeta,
        catalog: &Catalog,
    ) -> Result<ImportStats> {
        let files = &RunFiles {
            untuned: absolute(&files.untuned),
            tuned: absolute(&files.tuned),
            profile: absolute(&files.profile),
            log: absolute(&files.log),
        };
        files.check()?;
        write_untuned(&files.untuned, shapes)?;
        // The tuner skips shapes already in its tune file; a shape reaching this point is not in the
        // journal, so an old tune file (an interrupted run) must not hide it.
        if std::fs::symlink_metadata(&files.tuned).is_ok() {
            std::fs::remove_file(&files.tuned).with_context(|| format!("cannot remove {}", files.tuned.display()))?;
        }
        let mut log = auxfile::open(&files.log, Mode::Append, "the tuner log")?;
        let args = self.args(files);
        writeln!(log, "$ {} {}", self.python.display(), args.join(" "))?;
        errln!("aiter: {} shapes: {} {}", shapes.len(), self.python.display(), args.join(" "));
        let child = Watched::spawn(self.python_command().args(&args)).map_err(|e| self.spawn_error(e))?;
        let mut watch = TunerWatch {
            child,
            log,
            tail: Vec::new(),
            import: ProfileImport::new(&files.profile, meta.err_ratio),
            total: ImportStats::default(),
            want: shapes.iter().copied().collect(),
        };
        let status = watch.wait(self, files, journal, meta, catalog)?;
        let s = watch.import.poll(journal, meta, catalog, Some(&watch.want))?;
        report_import(&mut watch.total, s, journal, &watch.want);
        let missing: Vec<Shape> =
            shapes.iter().filter(|s| !shape_in_journal(journal, s, meta.recheck)).copied().collect();
        let tail = watch.tail.iter().rev().take(8).rev().cloned().collect::<Vec<_>>().join("\n");
        finish(status, shapes.len(), &missing, files, &tail)?;
        Ok(watch.total)
    }
}

/// A running tuner: its output, its profile import, the watchdog.
struct TunerWatch {
    child: Watched,
    log: std::fs::File,
    tail: Vec<String>,
    import: ProfileImport,
    total: ImportStats,
    want: HashSet<Shape>,
}

impl TunerWatch {
    /// Follows the tuner until it exits (importing the profile file whenever its length is the same on
    /// two polls), or stops it: an import error, or [`Tuner::silence_limit`] without output or growth.
    fn wait(
        &mut self,
        tuner: &Tuner,
        files: &RunFiles,
        journal: &mut Journal,
        meta: &RowMeta,
        catalog: &Catalog,
    ) -> Result<ExitStatus> {
        let mut last_len: Option<u64> = None;
        let mut last_progress = Instant::now();
        let mut last_check = Instant::now();
        loop {
            match self.child.next(TICK)? {
                Event::Line(_, line) | Event::Unterminated(_, line) => {
                    last_progress = Instant::now();
                    writeln!(self.log, "{line}")?;
                    errln!("aiter| {}", synth_base::sanitize::shown(&line));
                    self.tail.push(line);
                    if self.tail.len() > 20 {
                        self.tail.remove(0);
                    }
                }
                Event::Exited(status) => return Ok(status),
                Event::ReadError(..) | Event::Idle => {}
            }
            // The profile file and the watchdog, once per tick however much the tuner prints.
            if last_check.elapsed() < TICK {
                continue;
            }
            last_check = Instant::now();
            let len = std::fs::symlink_metadata(&files.profile).map(|m| m.len()).ok();
            if len.is_some() && len == last_len {
                match self.import.poll(journal, meta, catalog, Some(&self.want)) {
                    Ok(s) => report_import(&mut self.total, s, journal, &self.want),
                    Err(e) => {
                        self.child.kill();
                        return Err(e);
                    }
                }
                last_len = None;
            } else {
                if len != last_len && len.is_some() {
                    last_progress = Instant::now();
                }
                last_len = len;
            }
            if last_progress.elapsed() >= tuner.silence_limit {
                self.child.kill();
                let done = self.want.iter().filter(|s| shape_in_journal(journal, s, meta.recheck)).count();
                bail!(
                    "AITER's tuner printed nothing and its profile file did not change for {:.0} s (--cell-timeout), so it \
                     was stopped with {done} of {} shapes measured (log: {}); finished shapes are in the journal: run \
                     again to resume, or raise --cell-timeout",
                    tuner.silence_limit.as_secs_f64(),
                    self.want.len(),
                    files.log.display()
                );
            }
        }
    }
}

/// The end of a tuner run: an error unless every shape is in the journal.
fn finish(status: ExitStatus, asked: usize, missing: &[Shape], files: &RunFiles, tail: &str) -> Result<()> {
    if !status.success() {
        if missing.is_empty() {
            // AITER's tune_summary exits 1 when a shape had no valid candidate; its rows are imported.
            errln!(
                "aiter: the tuner exited with {status} (a shape without a valid kernel makes it exit 1); every shape's rows are in the journal"
            );
            return Ok(());
        }
        let what = match status.code() {
            Some(c) => format!("exited with status {c}"),
            None => "was killed by a signal".to_string(),
        };
        bail!(
            "AITER's tuner {what} with {} of {asked} shapes measured (log: {}):\n{}\nfinished shapes are in the journal; run again to resume",
            asked - missing.len(),
            files.log.display(),
            synth_base::sanitize::shown_with(tail, true)
        );
    }
    if !missing.is_empty() {
        bail!(
            "AITER's tuner finished but its profile file {} has no rows for {} shapes (first: {}); see {}",
            files.profile.display(),
            missing.len(),
            missing[0],
            files.log.display()
        );
    }
    Ok(())
}

fn report_import(total: &mut ImportStats, s: ImportStats, journal: &Journal, want: &HashSet<Shape>) {
    if s.appended > 0 {
        let done = want.iter().filter(|sh| journal.rows().iter().any(|r| shape_of(r) == **sh)).count();
        errln!(
            "aiter: imported {} rows of {} shapes ({done}/{} shapes of this run in the journal)",
            s.appended,
            s.shapes.len(),
            want.len()
        );
    }
    total.add(s);
}

#[cfg(test)]
pub mod tests {
    use super::*;

    pub const HEADER: &str = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio\n";

    pub fn meta() -> RowMeta {
        RowMeta {
            device: "MI300X".into(),
            backend: "aiter-tuner".into(),
            timing: "t".into(),
            reps: 101,
            recheck: 0,
            err_ratio: 0.05,
        }
    }

    fn row(m: u32, id: i32, cat: &Catalog) -> String {
        format!("gfx942,304,{m},5120,5120,ck,{id},0,12.5,{},1,1,0.0\n", cat.legacy_by_id(id).unwrap().name)
    }

    #[test]
    fn a_growing_profile_is_read_once_and_a_rewrite_from_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let cat = Catalog::embedded();
        let (mut j, _) = Journal::open(&dir.path().join("j.csv"), &cat).unwrap();
        let p = dir.path().join("profile.csv");
        let mut imp = ProfileImport::new(&p, 0.05);
        assert_eq!(imp.poll(&mut j, &meta(), &cat, None).unwrap().appended, 0, "no file yet");
        std::fs::write(&p, format!("{HEADER}{}{}", row(1, 3, &cat), &row(1, 4, &cat)[..20])).unwrap();
        let s = imp.poll(&mut j, &meta(), &cat, None).unwrap();
        assert_eq!((s.appended, s.already), (1, 0), "the unterminated row waits");
        let grown = format!("{HEADER}{}{}{}", row(1, 3, &cat), row(1, 4, &cat), row(2, 3, &cat));
        std::fs::write(&p, &grown).unwrap();
        let s = imp.poll(&mut j, &meta(), &cat, None).unwrap();
        assert_eq!((s.appended, s.already), (2, 0), "only the new lines are read");
        assert_eq!(imp.offset, grown.len() as u64);
        // Rewritten with other bytes before the point read (rows reordered): read again from the start.
        let rewritten = format!("{HEADER}{}{}{}{}", row(2, 3, &cat), row(1, 3, &cat), row(1, 4, &cat), row(4, 5, &cat));
        std::fs::write(&p, rewritten).unwrap();
        let s = imp.poll(&mut j, &meta(), &cat, None).unwrap();
        assert_eq!((s.appended, s.already), (1, 3));
        assert_eq!(j.rows().len(), 4);
        // A shape tuned twice (a retry after a failed import) keeps its first rows.
        std::fs::write(&p, format!("{HEADER}{}{}", row(8, 3, &cat), row(8, 3, &cat))).unwrap();
        let s = ProfileImport::new(&p, 0.05).poll(&mut j, &meta(), &cat, None).unwrap();
        assert_eq!((s.appended, s.already), (1, 1));
    }

    #[test]
    fn an_oversized_profile_is_refused_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let cat = Catalog::embedded();
        let (mut j, _) = Journal::open(&dir.path().join("j.csv"), &cat).unwrap();
        let p = dir.path().join("profile.csv");
        // 300 MB, sparse: over the cap for a latency table.
        std::fs::File::create(&p).unwrap().set_len(300_000_000).unwrap();
        let e = format!("{:#}", import_profile(&p, &mut j, &meta(), &cat, None).unwrap_err());
        assert!(e.contains("holds more than 256 MiB (the cap for a latency table)"), "{e}");
        assert!(j.rows().is_empty());
    }
}
