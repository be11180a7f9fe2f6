//! `synth bench --backend aiter`: CK's own kernels measured by AITER's tuner
//! (`csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py` in an AITER checkout), imported into the
//! same journal as the harness backend writes.
//!
//! The tuner reads an untuned CSV (`M,N,K`), measures every candidate of `--libtype` per shape and, with
//! `-o2`, rewrites a profile file after each batch of `--batch` shapes: one row per candidate in AITER's
//! columns, failed candidates with `us` -1 (error) or inf (timeout) and kernelName `None`. This backend
//! writes the untuned CSV of the shapes not yet in the journal into a work directory next to the journal
//! (`<out>.aiter/`), runs the tuner there, streams its output, and imports the profile file whenever it has
//! settled: CK legacy and CK-tile rows, kernel names resolved through the catalog (a `None` name through
//! the kernelId), failures and rows over the errRatio tolerance as `fail:<reason>` rows. A killed run loses
//! at most the batch in flight; the next run imports what the profile file holds and tunes the rest.
//!
//! Not run on an AMD GPU: tested against a fake tuner written from the real script's argument parser and
//! output (tests/fixtures/fake_aiter/).

use super::bench::{print_summary, BenchArgs};
use crate::catalog::Catalog;
use crate::diag::Located;
use crate::measure::journal::{CellResult, Journal};
use crate::table::{RowStatus, Shape};
use anyhow::{anyhow, bail, Context, Result};
use rand::seq::index::sample;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The tuner script, relative to the AITER checkout.
pub const TUNER_SCRIPT: &str = "csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py";

/// Probe exit codes (synth/measure/aiter_probe.py).
const PROBE_NO_TORCH: i32 = 3;
const PROBE_NO_GPU: i32 = 5;
const PROBE_NO_AITER: i32 = 7;
const PROBE_NOT_ROCM: i32 = 8;

/// Which measurement backend `synth bench` (and `synth drift --remeasure`) uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// The Triton harness of harness/ (CUDA or ROCm): CK legacy tile geometries realized in Triton.
    Harness,
    /// AITER's own tuner in an AITER checkout (ROCm): CK's compiled kernels, legacy and CK-tile.
    Aiter,
}

/// The tuner's `--libtype` values this backend passes (asm and opus kernels are not in the catalog).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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
    fn as_arg(self) -> &'static str {
        match self {
            TunerLibtype::Ck => "ck",
            TunerLibtype::Cktile => "cktile",
            TunerLibtype::Both => "both",
            TunerLibtype::All => "all",
        }
    }
}

/// Options of the AITER tuner (used with `--backend aiter`), passed through under the tuner's own names.
#[derive(Debug, Clone, clap::Args)]
pub struct AiterArgs {
    /// AITER checkout the tuner runs in (it must hold csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py).
    #[arg(long)]
    pub aiter_dir: Option<PathBuf>,
    /// Kernel families the tuner measures (its --libtype).
    #[arg(long, value_enum, default_value = "both")]
    pub libtype: TunerLibtype,
    /// Tuner worker processes, one per GPU (its --mp); default: the tuner's (every visible GPU).
    #[arg(long)]
    pub mp: Option<u32>,
    /// Largest share of wrong output elements a kernel may have (its --errRatio); above it the row is a
    /// failed correctness check.
    #[arg(long, default_value_t = 0.05)]
    pub err_ratio: f64,
    /// Warm-up iterations per candidate (its --warmup); default: the tuner's (5).
    #[arg(long)]
    pub warmup: Option<u32>,
    /// Timed iterations per candidate (its --iters); default: the tuner's (101).
    #[arg(long)]
    pub iters: Option<u32>,
    /// Watchdog in seconds for one tuner job (its --timeout); default: the tuner's (1800).
    #[arg(long)]
    pub timeout: Option<u32>,
    /// CK-tile BlockPerCu values to measure (its --blockPerCu), comma list; default: the tuner's (1..4).
    #[arg(long, value_delimiter = ',')]
    pub block_per_cu: Vec<u32>,
    /// Shapes per tuner batch (its --batch). The profile file is rewritten after each batch, so this is the
    /// unit of progress and what an interruption can lose.
    #[arg(long, default_value_t = 4)]
    pub tuner_batch: u32,
    /// Extra argument passed to the tuner (repeatable), e.g. `--tuner-arg=--shape_grouped`.
    #[arg(long = "tuner-arg", allow_hyphen_values = true)]
    pub tuner_args: Vec<String>,
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

/// How to run AITER's tuner.
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
}

/// Files of one tuner run inside the work directory.
#[derive(Debug, Clone)]
pub struct RunFiles {
    pub untuned: PathBuf,
    pub tuned: PathBuf,
    pub profile: PathBuf,
    pub log: PathBuf,
}

impl RunFiles {
    /// `<dir>/<prefix>untuned.csv`, `tuned.csv`, `profile.csv` and the shared `tuner.log`.
    pub fn in_dir(dir: &Path, prefix: &str) -> RunFiles {
        RunFiles {
            untuned: dir.join(format!("{prefix}untuned.csv")),
            tuned: dir.join(format!("{prefix}tuned.csv")),
            profile: dir.join(format!("{prefix}profile.csv")),
            log: dir.join("tuner.log"),
        }
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

impl Tuner {
    /// The tuner from `synth bench` arguments; checks the AITER checkout and the option values.
    pub fn from_args(python: &Path, a: &AiterArgs, split_k: bool) -> Result<Tuner> {
        let dir = a.aiter_dir.as_ref().ok_or_else(|| {
            anyhow!("--backend aiter needs --aiter-dir: the AITER checkout whose tuner measures the CK kernels")
        })?;
        if !dir.is_dir() {
            bail!("--aiter-dir {}: no such directory; pass an AITER checkout (git clone of ROCm/aiter)", dir.display());
        }
        let script = dir.join(TUNER_SCRIPT);
        if !script.is_file() {
            bail!(
                "--aiter-dir {} is not an AITER checkout with the blockscale tuner: {} does not exist",
                dir.display(),
                script.display()
            );
        }
        if !(a.err_ratio > 0.0 && a.err_ratio <= 1.0) {
            bail!("--err-ratio {} is outside (0, 1]: it is the largest tolerated share of wrong elements", a.err_ratio);
        }
        if a.tuner_batch == 0 {
            bail!("--tuner-batch must be at least 1 shape");
        }
        if a.iters == Some(0) {
            bail!("--iters must be at least 1");
        }
        if let Some(b) = a.block_per_cu.iter().find(|&&b| !(1..=4).contains(&b)) {
            bail!("--block-per-cu {b}: AITER's CK-tile instances have BlockPerCu 1..4");
        }
        if a.mp == Some(0) {
            bail!("--mp must be at least 1 process");
        }
        Ok(Tuner {
            python: python.to_path_buf(),
            aiter_dir: dir.canonicalize().with_context(|| format!("--aiter-dir {}", dir.display()))?,
            libtype: a.libtype,
            split_k,
            mp: a.mp,
            err_ratio: a.err_ratio,
            warmup: a.warmup,
            iters: a.iters,
            timeout: a.timeout,
            block_per_cu: a.block_per_cu.clone(),
            batch: a.tuner_batch,
            extra_args: a.tuner_args.clone(),
        })
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
        let out =
            self.python_command().arg(script.path()).stdin(Stdio::null()).output().map_err(|e| self.spawn_error(e))?;
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let py = self.python.display();
        if !out.status.success() {
            return Err(match out.status.code() {
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
        serde_json::from_str(line)
            .with_context(|| format!("the device probe printed {line:?}, expected one JSON object"))
    }

    /// The tuner's command line for one run.
    pub fn args(&self, files: &RunFiles) -> Vec<String> {
        let mut v: Vec<String> = vec![
            TUNER_SCRIPT.into(),
            "-i".into(),
            files.untuned.display().to_string(),
            "-o".into(),
            files.tuned.display().to_string(),
            "-o2".into(),
            files.profile.display().to_string(),
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
        write_untuned(&files.untuned, shapes)?;
        // The tuner skips shapes already in its tune file; a shape reaching this point is not in the
        // journal, so an old tune file (an interrupted run) must not hide it.
        if files.tuned.exists() {
            std::fs::remove_file(&files.tuned).with_context(|| format!("cannot remove {}", files.tuned.display()))?;
        }
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&files.log)
            .with_context(|| format!("cannot open {}", files.log.display()))?;
        let args = self.args(files);
        writeln!(log, "$ {} {}", self.python.display(), args.join(" "))?;
        eprintln!("aiter: {} shapes: {} {}", shapes.len(), self.python.display(), args.join(" "));
        let mut child = self
            .python_command()
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| self.spawn_error(e))?;
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let mut readers = Vec::new();
        for stream in [
            Box::new(child.stdout.take().expect("piped")) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().expect("piped")),
        ] {
            let tx = tx.clone();
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            }));
        }
        drop(tx);
        let mut tail: Vec<String> = Vec::new();
        let mut total = ImportStats::default();
        let mut last_len: Option<u64> = None;
        let want: HashSet<Shape> = shapes.iter().copied().collect();
        let status = loop {
            while let Ok(line) = rx.try_recv() {
                writeln!(log, "{line}")?;
                eprintln!("aiter| {line}");
                tail.push(line);
                if tail.len() > 20 {
                    tail.remove(0);
                }
            }
            if let Some(st) = child.try_wait().context("waiting for the tuner")? {
                break st;
            }
            // Import once the file has the same length on two polls (the tuner rewrites it per batch).
            let len = std::fs::metadata(&files.profile).map(|m| m.len()).ok();
            if len.is_some() && len == last_len {
                match import_profile(&files.profile, journal, meta, catalog, Some(&want)) {
                    Ok(s) => report_import(&mut total, s, journal, &want),
                    Err(e) => {
                        let _ = child.kill();
                        let _ = child.wait();
                        return Err(e);
                    }
                }
                last_len = None;
            } else {
                last_len = len;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        for r in readers {
            let _ = r.join();
        }
        for line in rx.try_iter() {
            writeln!(log, "{line}")?;
            eprintln!("aiter| {line}");
            tail.push(line);
        }
        if files.profile.exists() {
            let s = import_profile(&files.profile, journal, meta, catalog, Some(&want))?;
            report_import(&mut total, s, journal, &want);
        }
        let missing: Vec<Shape> =
            shapes.iter().filter(|s| !shape_in_journal(journal, s, meta.recheck)).copied().collect();
        let tail = tail.iter().rev().take(8).rev().cloned().collect::<Vec<_>>().join("\n");
        if !status.success() {
            if missing.is_empty() {
                // AITER's tune_summary exits 1 when a shape had no valid candidate; its rows are imported.
                eprintln!(
                    "aiter: the tuner exited with {status} (a shape without a valid kernel makes it exit 1); every shape's rows are in the journal"
                );
            } else {
                let what = match status.code() {
                    Some(c) => format!("exited with status {c}"),
                    None => "was killed by a signal".to_string(),
                };
                bail!(
                    "AITER's tuner {what} with {} of {} shapes measured (log: {}):\n{tail}\nfinished shapes are in the journal; run again to resume",
                    shapes.len() - missing.len(),
                    shapes.len(),
                    files.log.display()
                );
            }
        } else if !missing.is_empty() {
            bail!(
                "AITER's tuner finished but its profile file {} has no rows for {} shapes (first: {}); see {}",
                files.profile.display(),
                missing.len(),
                missing[0],
                files.log.display()
            );
        }
        Ok(total)
    }
}

fn report_import(total: &mut ImportStats, s: ImportStats, journal: &Journal, want: &HashSet<Shape>) {
    if s.appended > 0 {
        let done = want.iter().filter(|sh| journal.rows().iter().any(|r| shape_of(r) == **sh)).count();
        eprintln!(
            "aiter: imported {} rows of {} shapes ({done}/{} shapes of this run in the journal)",
            s.appended,
            s.shapes.len(),
            want.len()
        );
    }
    total.appended += s.appended;
    total.already += s.already;
    total.other_libtype = total.other_libtype.max(s.other_libtype);
    total.shapes.extend(s.shapes);
}

/// Writes the tuner's input: `M,N,K` rows.
pub fn write_untuned(path: &Path, shapes: &[Shape]) -> Result<()> {
    let mut w = csv::Writer::from_path(path).with_context(|| format!("cannot write {}", path.display()))?;
    w.write_record(["M", "N", "K"])?;
    for s in shapes {
        w.write_record([s.m.to_string(), s.n.to_string(), s.k.to_string()])?;
    }
    w.flush()?;
    Ok(())
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

/// One row of AITER's profile file, as text (pandas writes ints, floats, `inf` and `Null`).
#[derive(Debug, Deserialize)]
struct ProfileRow {
    gfx: String,
    cu_num: String,
    #[serde(rename = "M")]
    m: String,
    #[serde(rename = "N")]
    n: String,
    #[serde(rename = "K")]
    k: String,
    libtype: String,
    #[serde(rename = "kernelId")]
    kernel_id: String,
    #[serde(rename = "splitK")]
    split_k: String,
    us: String,
    #[serde(rename = "kernelName")]
    kernel_name: String,
    tflops: String,
    bw: String,
    #[serde(rename = "errRatio")]
    err_ratio: String,
}

/// A bad value in a column of the profile file.
fn cell_error(src: &str, line: usize, col: &str, v: &str, message: &str) -> anyhow::Error {
    Located::new(src, message).line(line).column(col).value(v).into()
}

/// A problem of a line of the profile file.
fn line_error(src: &str, line: usize, message: impl Into<String>) -> anyhow::Error {
    Located::new(src, message).line(line).into()
}

fn int_field(src: &str, line: usize, col: &str, v: &str) -> Result<i64> {
    let x: f64 = v.trim().parse().map_err(|_| cell_error(src, line, col, v, "expected an integer"))?;
    if x.fract() != 0.0 || !x.is_finite() {
        return Err(cell_error(src, line, col, v, "expected an integer"));
    }
    Ok(x as i64)
}

fn float_field(v: &str) -> Option<f64> {
    match v.trim() {
        "" | "Null" | "nan" | "NaN" => None,
        t => t.parse::<f64>().ok(),
    }
}

/// Reads AITER's profile file and appends every row whose cell the journal lacks (rows of shapes outside
/// `only`, when given, are errors: the file belongs to this journal's work directory). An incomplete last
/// line (a write in progress) is left for the next import.
pub fn import_profile(
    path: &Path,
    journal: &mut Journal,
    meta: &RowMeta,
    catalog: &Catalog,
    only: Option<&HashSet<Shape>>,
) -> Result<ImportStats> {
    let mut bytes =
        std::fs::read(path).with_context(|| format!("cannot read the tuner's profile {}", path.display()))?;
    let keep = bytes.iter().rposition(|&b| b == b'\n').map(|p| p + 1).unwrap_or(0);
    bytes.truncate(keep);
    let mut stats = ImportStats::default();
    if bytes.is_empty() {
        return Ok(stats);
    }
    let src = path.display().to_string();
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).from_reader(bytes.as_slice());
    let header = rdr.headers().with_context(|| format!("{src}:1: cannot read the header"))?.clone();
    for col in crate::table::AITER_COLUMNS {
        if !header.iter().any(|h| h == col) {
            bail!(
                "{src}:1: the tuner's profile file has no {col} column (header: {}); is this AITER's blockscale tuner?",
                header.iter().collect::<Vec<_>>().join(",")
            );
        }
    }
    let mut rows: Vec<(usize, CellResult)> = Vec::new();
    for (i, rec) in rdr.deserialize::<ProfileRow>().enumerate() {
        let line = i + 2;
        let r = rec.map_err(|e| line_error(&src, line, e.to_string()))?;
        if r.libtype == "asm" || r.libtype == "opus" {
            stats.other_libtype += 1;
            continue;
        }
        let cell = profile_row_to_cell(&r, &src, line, meta, catalog)?;
        if let Some(want) = only {
            if !want.contains(&shape_of(&cell)) && !journal.is_done(&cell.key()) {
                bail!(
                    "{src}:{line}: shape {} was not asked of this tuner run; the work directory belongs to another journal — remove {}",
                    shape_of(&cell),
                    path.parent().map(|p| p.display().to_string()).unwrap_or_default()
                );
            }
        }
        rows.push((line, cell));
    }
    let mut seen = HashSet::new();
    for (line, cell) in rows {
        if journal.is_done(&cell.key()) {
            stats.already += 1;
            continue;
        }
        if !seen.insert(cell.key()) {
            return Err(line_error(&src, line, format!("the profile file holds cell {:?} twice", cell.key())));
        }
        stats.shapes.insert(shape_of(&cell));
        journal.append(cell).with_context(|| format!("{src}:{line}"))?;
        stats.appended += 1;
    }
    Ok(stats)
}

fn profile_row_to_cell(
    r: &ProfileRow,
    src: &str,
    line: usize,
    meta: &RowMeta,
    catalog: &Catalog,
) -> Result<CellResult> {
    let u32_of = |col: &str, v: &str| -> Result<u32> {
        let x = int_field(src, line, col, v)?;
        u32::try_from(x).map_err(|_| cell_error(src, line, col, v, "expected a non-negative integer"))
    };
    let (m, n, k) = (u32_of("M", &r.m)?, u32_of("N", &r.n)?, u32_of("K", &r.k)?);
    let cu_num = u32_of("cu_num", &r.cu_num)?;
    let kernel_id = i32::try_from(int_field(src, line, "kernelId", &r.kernel_id)?)
        .map_err(|_| cell_error(src, line, "kernelId", &r.kernel_id, "out of range"))?;
    let split_k = u32_of("splitK", &r.split_k)?;
    let libtype = match crate::catalog::Libtype::parse(&r.libtype) {
        Some(t @ (crate::catalog::Libtype::Ck | crate::catalog::Libtype::Cktile)) => t,
        _ => return Err(cell_error(src, line, "libtype", &r.libtype, "expected ck, cktile, asm or opus")),
    };
    let by_id = match libtype {
        crate::catalog::Libtype::Ck => catalog.legacy_by_id(kernel_id).filter(|_| kernel_id >= 0),
        _ => {
            let arch = catalog.cktile_arch_for_gfx(&r.gfx).ok_or_else(|| {
                cell_error(src, line, "gfx", &r.gfx, "the catalog has no CK-tile instances for this architecture")
            })?;
            catalog.cktile_by_id(arch, kernel_id).filter(|_| kernel_id >= 0)
        }
    }
    .ok_or_else(|| {
        anyhow!(
            "{src}:{line}: {libtype} kernelId {kernel_id} has no catalog instance; this AITER checkout's instance list \
             differs from ck-instances/ (update the catalog from its gemm_a8w8_blockscale_*instance.py)"
        )
    })?;
    if r.kernel_name != "None" {
        let inst = catalog
            .resolve_name(&r.kernel_name)
            .map_err(|e| anyhow::Error::from(Located::new(src, e.to_string()).line(line).column("kernelName")))?;
        if inst.libtype() != libtype || inst.params != by_id.params {
            bail!(
                "{src}:{line}: kernelName {} is not {libtype} kernelId {kernel_id} of the catalog ({}); the checkout's \
                 instance list differs from ck-instances/",
                r.kernel_name,
                by_id.name
            );
        }
    }
    let err_ratio = float_field(&r.err_ratio)
        .filter(|e| (0.0..=1.0).contains(e))
        .ok_or_else(|| cell_error(src, line, "errRatio", &r.err_ratio, "expected a share in [0, 1]"))?;
    let us_raw = r.us.trim();
    let us_val: f64 = match us_raw {
        "inf" | "Infinity" => f64::INFINITY,
        t => t.parse().map_err(|_| cell_error(src, line, "us", us_raw, "expected a time, -1 or inf"))?,
    };
    let (us, status) = if us_val == -1.0 {
        (None, RowStatus::Fail("tuner reported us=-1 (run error or unsupported shape)".into()))
    } else if us_val.is_infinite() {
        (None, RowStatus::Fail("tuner reported us=inf (timeout)".into()))
    } else if us_val.is_nan() || us_val <= 0.0 {
        return Err(cell_error(src, line, "us", us_raw, "expected a positive time, -1 or inf"));
    } else if err_ratio > meta.err_ratio {
        (Some(us_val), RowStatus::Fail(format!("errRatio {err_ratio} > {} (wrong output)", meta.err_ratio)))
    } else {
        (Some(us_val), RowStatus::Ok)
    };
    let ok = us.is_some();
    Ok(CellResult {
        gfx: r.gfx.clone(),
        cu_num,
        m,
        n,
        k,
        libtype,
        kernel_id,
        split_k,
        us,
        kernel_name: by_id.name.clone(),
        tflops: float_field(&r.tflops).filter(|_| ok),
        bw: float_field(&r.bw).filter(|_| ok),
        err_ratio: Some(err_ratio),
        device: meta.device.clone(),
        backend: meta.backend.clone(),
        timing: meta.timing.clone(),
        us_min: None,
        us_max: None,
        us_p10: None,
        us_p90: None,
        reps: meta.reps,
        status,
        recheck: meta.recheck,
    })
}

fn shape_of(r: &CellResult) -> Shape {
    Shape::new(r.m, r.n, r.k)
}

fn shape_in_journal(journal: &Journal, s: &Shape, recheck: u8) -> bool {
    journal.rows().iter().any(|r| shape_of(r) == *s && r.recheck == recheck)
}

/// The `backend` column: the tuner and the checkout's git commit when it is a git work tree.
fn backend_label(aiter_dir: &Path) -> String {
    let commit = Command::new("git")
        .arg("-C")
        .arg(aiter_dir)
        .args(["rev-parse", "--short=10", "HEAD"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty());
    match commit {
        Some(c) => format!("aiter-tuner {c}"),
        None => "aiter-tuner".to_string(),
    }
}

/// The shapes of the recheck runs: a seeded `fraction` of `shapes` (at least one when the fraction is
/// positive), in the given order.
pub fn recheck_shapes(shapes: &[Shape], fraction: f64, seed: u64) -> Vec<Shape> {
    if fraction <= 0.0 || shapes.is_empty() {
        return Vec::new();
    }
    let n = ((shapes.len() as f64 * fraction).round() as usize).clamp(1, shapes.len());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut picks = sample(&mut rng, shapes.len(), n).into_vec();
    picks.sort_unstable();
    picks.into_iter().map(|i| shapes[i]).collect()
}

/// The work directory of a journal: `<out>.aiter/`.
pub fn work_dir(out: &Path) -> PathBuf {
    let mut name = out.file_name().map(|s| s.to_os_string()).unwrap_or_default();
    name.push(".aiter");
    out.with_file_name(name)
}

/// Measures `shapes` (main pass, then a recheck pass over a seeded sample) into the journal at `out`.
/// Returns the rows appended.
pub fn measure_shapes(
    tuner: &Tuner,
    device: &AiterDevice,
    shapes: &[Shape],
    out: &Path,
    recheck_fraction: f64,
    seed: u64,
    catalog: &Catalog,
) -> Result<(Journal, usize)> {
    let (mut journal, cut) = Journal::open(out, catalog)?;
    if cut > 0 {
        eprintln!("journal {}: dropped an incomplete last line ({cut} bytes, an interrupted write)", out.display());
    }
    if let Some(r) = journal.rows().iter().find(|r| r.gfx != device.gfx || r.cu_num != device.cu_num) {
        bail!(
            "journal {} holds measurements of {} with {} CUs; this device is {} with {} CUs; use another --out",
            out.display(),
            r.gfx,
            r.cu_num,
            device.gfx,
            device.cu_num
        );
    }
    let dir = work_dir(out);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let meta = RowMeta {
        device: device.name.clone(),
        backend: backend_label(&tuner.aiter_dir),
        timing: format!(
            "aiter run_perftest warmup={} iters={}",
            tuner.warmup.map_or("5".to_string(), |w| w.to_string()),
            tuner.iters.unwrap_or(101)
        ),
        reps: tuner.iters.unwrap_or(101),
        recheck: 0,
        err_ratio: tuner.err_ratio,
    };
    let mut appended = 0;
    for (recheck, list, prefix) in
        [(0u8, shapes.to_vec(), ""), (1u8, recheck_shapes(shapes, recheck_fraction, seed), "recheck-")]
    {
        let files = RunFiles::in_dir(&dir, prefix);
        let meta = RowMeta { recheck, ..meta.clone() };
        // What an interrupted run left in the profile file is imported before deciding what to tune.
        if files.profile.exists() {
            let s = import_profile(&files.profile, &mut journal, &meta, catalog, None)?;
            if s.appended > 0 {
                eprintln!(
                    "aiter: imported {} rows of {} shapes left in {} by an earlier run",
                    s.appended,
                    s.shapes.len(),
                    files.profile.display()
                );
            }
            appended += s.appended;
        }
        let todo: Vec<Shape> = list.iter().filter(|s| !shape_in_journal(&journal, s, recheck)).copied().collect();
        let what = if recheck == 1 { "recheck shapes" } else { "shapes" };
        eprintln!(
            "aiter: {} {what}; {} already in {}; {} to tune",
            list.len(),
            list.len() - todo.len(),
            out.display(),
            todo.len()
        );
        if todo.is_empty() {
            continue;
        }
        let s = tuner.run(&todo, &files, &mut journal, &meta, catalog)?;
        if s.other_libtype > 0 {
            eprintln!(
                "aiter: {} asm/opus rows left out (the catalog has CK legacy and CK-tile instances only)",
                s.other_libtype
            );
        }
        appended += s.appended;
    }
    Ok((journal, appended))
}

/// `synth bench --backend aiter`.
pub fn bench(args: &BenchArgs) -> Result<()> {
    let catalog = Catalog::embedded();
    if args.instances != "all" {
        bail!(
            "--instances {}: AITER's tuner measures every candidate of --libtype; --instances applies to --backend harness",
            args.instances
        );
    }
    if !args.harness_args.is_empty() {
        bail!("--harness-arg applies to --backend harness; pass tuner options with --tuner-arg");
    }
    let (ms, (layers, unrunnable)) = super::bench::bench_grid(args)?;
    if !(0.0..=1.0).contains(&args.recheck_fraction) {
        bail!("--recheck-fraction {} is outside [0, 1]", args.recheck_fraction);
    }
    let mut shapes: Vec<Shape> = layers
        .iter()
        .flat_map(|&(n, k)| ms.iter().map(move |&m| Shape::new(m, n, k)))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    shapes.sort_by_key(|s| (s.n, s.k, s.m));
    let tuner = Tuner::from_args(&args.python, &args.aiter, args.split_k == crate::measure::SplitKMode::Auto)?;
    if args.dry_run || args.plan_only.is_some() {
        let done: BTreeSet<Shape> = if args.out.exists() {
            crate::measure::read_journal(&args.out, &catalog)?.iter().filter(|r| r.recheck == 0).map(shape_of).collect()
        } else {
            BTreeSet::new()
        };
        let todo: Vec<Shape> = shapes.iter().filter(|s| !done.contains(s)).copied().collect();
        eprintln!(
            "plan: {} shapes; {} already in {}; {} to tune",
            shapes.len(),
            shapes.len() - todo.len(),
            args.out.display(),
            todo.len()
        );
        if let Some(p) = &args.plan_only {
            write_untuned(p, &todo)?;
            eprintln!("wrote the untuned CSV of {} shapes to {}", todo.len(), p.display());
        } else {
            println!("{}", todo.len());
        }
        return Ok(());
    }
    let device = tuner.probe()?;
    eprintln!(
        "device: {} ({}, {} CUs, {} GPUs; torch {}, HIP {}); AITER {}",
        device.name,
        device.gfx,
        device.cu_num,
        device.devices,
        device.torch,
        device.hip,
        tuner.aiter_dir.display()
    );
    let started = Instant::now();
    let (journal, appended) =
        measure_shapes(&tuner, &device, &shapes, &args.out, args.recheck_fraction, args.seed, &catalog)?;
    print_summary(&journal, appended, started.elapsed().as_secs_f64());
    let by_lib: BTreeMap<&str, usize> = journal.rows().iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.libtype.as_str()).or_default() += 1;
        m
    });
    println!("rows by libtype: {}", by_lib.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "));
    if !unrunnable.is_empty() {
        bail!("the other layers were measured; {}", unrunnable.join("; "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> RowMeta {
        RowMeta {
            device: "MI300X".into(),
            backend: "aiter-tuner".into(),
            timing: "t".into(),
            reps: 101,
            recheck: 0,
            err_ratio: 0.05,
        }
    }

    const HEADER: &str = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio\n";

    fn import(profile: &str) -> (Result<ImportStats>, Vec<CellResult>) {
        let dir = tempfile::tempdir().unwrap();
        let cat = Catalog::embedded();
        let (mut j, _) = Journal::open(&dir.path().join("j.csv"), &cat).unwrap();
        let p = dir.path().join("profile.csv");
        std::fs::write(&p, profile).unwrap();
        let r = import_profile(&p, &mut j, &meta(), &cat, None);
        (r, j.rows().to_vec())
    }

    #[test]
    fn pandas_formatting_failures_and_other_libtypes() {
        let cat = Catalog::embedded();
        let ck3 = &cat.legacy_by_id(3).unwrap().name;
        let tile1 = &cat.cktile_by_id("gfx942", 1).unwrap().name;
        let text = format!(
            "{HEADER}gfx942,304,16,5120,5120,ck,3.0,1.0,12.5,{ck3},2.1,300.0,0.0\n\
             gfx942,304,16,5120,5120,ck,4,0,-1.0,None,0.0,0.0,1.0\n\
             gfx942,304,16,5120,5120,cktile,1,0,inf,None,0,0,1.0\n\
             gfx942,304,16,5120,5120,cktile,2,0,9.5,{},1.0,1.0,0.25\n\
             gfx942,304,16,5120,5120,asm,0,1,8.0,_ZN5aiter17fp8gemm_blockscaleE,1.0,1.0,0.0\n\
             gfx942,304,16,5120,5120,ck,5,0,7.",
            cat.cktile_by_id("gfx942", 2).unwrap().name
        );
        let (r, rows) = import(&text);
        let s = r.unwrap();
        // The unterminated last line (a write in progress) waits for the next import.
        assert_eq!((s.appended, s.other_libtype), (4, 1));
        assert_eq!(
            (rows[0].kernel_id, rows[0].split_k, rows[0].us, rows[0].status.to_string()),
            (3, 1, Some(12.5), "ok".into())
        );
        assert_eq!(&rows[1].kernel_name, &cat.legacy_by_id(4).unwrap().name);
        assert!(rows[1].us.is_none() && rows[1].status.to_string().contains("us=-1"));
        assert_eq!(&rows[2].kernel_name, tile1);
        assert!(rows[2].status.to_string().contains("us=inf") && rows[2].tflops.is_none());
        assert_eq!(rows[3].status.to_string(), "fail:errRatio 0.25 > 0.05 (wrong output)");
        assert_eq!(rows[3].us, Some(9.5));
        assert!(rows.iter().all(|r| r.validate().is_ok()));
    }

    #[test]
    fn bad_rows_name_file_line_and_value() {
        let cat = Catalog::embedded();
        let ck3 = &cat.legacy_by_id(3).unwrap().name;
        for (row, want) in [
            (format!("gfx942,304,16,5120,5120,ck,3,0,12.5,{ck3}_x,1,1,0.0\n"), ":2: column kernelName"),
            (format!("gfx942,304,16,5120,5120,ck,4,0,12.5,{ck3},1,1,0.0\n"), "is not ck kernelId 4"),
            ("gfx942,304,16,5120,5120,ck,40,0,-1,None,0,0,1.0\n".to_string(), "ck kernelId 40 has no catalog instance"),
            (format!("gfx942,304,16,5120,5120,ck,3,0,Null,{ck3},1,1,0.0\n"), "column us = \"Null\""),
            (format!("gfx942,304,16,5120,5120,ck,3,0,0,{ck3},1,1,0.0\n"), "expected a positive time"),
            (format!("gfx942,304,16,5120,5120,ck,3.5,0,1,{ck3},1,1,0.0\n"), "column kernelId = \"3.5\""),
            (format!("gfx942,304,16,5120,5120,ck,3,0,1,{ck3},1,1,1.5\n"), "column errRatio"),
            (
                "gfx90a,304,16,5120,5120,cktile,1,0,1,None,1,1,0.0\n".to_string(),
                "no CK-tile instances for this architecture",
            ),
        ] {
            let (r, rows) = import(&format!("{HEADER}{row}"));
            let e = format!("{:#}", r.unwrap_err());
            assert!(e.contains("profile.csv:2") && e.contains(want), "{row}: {e}");
            assert!(rows.is_empty());
        }
        let (r, _) = import("M,N,K\n1,2,3\n");
        assert!(format!("{:#}", r.unwrap_err()).contains("has no gfx column"));
    }

    #[test]
    fn tuner_command_line() {
        let t = Tuner {
            python: "python3".into(),
            aiter_dir: "/aiter".into(),
            libtype: TunerLibtype::Cktile,
            split_k: false,
            mp: None,
            err_ratio: 0.1,
            warmup: None,
            iters: Some(50),
            timeout: None,
            block_per_cu: vec![1, 2],
            batch: 3,
            extra_args: vec!["--shape_grouped".into()],
        };
        let f = RunFiles::in_dir(Path::new("/w"), "recheck-");
        assert_eq!(
            t.args(&f).join(" "),
            "csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py -i /w/recheck-untuned.csv -o /w/recheck-tuned.csv \
             -o2 /w/recheck-profile.csv --libtype cktile --errRatio 0.1 --batch 3 --iters 50 --blockPerCu 1 2 --shape_grouped"
        );
        assert_eq!(work_dir(Path::new("out/my.csv")), PathBuf::from("out/my.csv.aiter"));
        let shapes: Vec<Shape> = (1..=10).map(|m| Shape::new(m, 5120, 5120)).collect();
        assert_eq!(recheck_shapes(&shapes, 0.2, 7).len(), 2);
        assert_eq!(recheck_shapes(&shapes, 0.01, 7).len(), 1);
        assert!(recheck_shapes(&shapes, 0.0, 7).is_empty());
        assert_eq!(recheck_shapes(&shapes, 0.3, 7), recheck_shapes(&shapes, 0.3, 7));
    }
}
