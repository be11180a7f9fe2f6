//! The options of `synth bench` (either backend) and what both backends share: the M set, the layers to
//! measure, and the closing summary of a journal.

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::aiter_args::{AiterTunerArgs, Backend};
use synth_core::catalog::triton::TritonConfig;
use synth_core::shapes;
use synth_measure::measure::journal::{recheck_noise, Journal};
use synth_measure::measure::plan::SplitKMode;
use synth_measure::measure::shard::Shard;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    // The model whose GEMM shapes are measured [default: --model qwen3-32b].
    #[command(flatten)]
    pub model: crate::app::model_args::ModelArgs,
    /// Tensor-parallel degree.
    #[arg(long, default_value_t = 2)]
    pub tp: u32,
    /// M values: `dataset` (the 80-value dataset grid), `decode` (1, 2, 4, 8), `sparse` (30 values of the
    /// dataset grid), `off-grid` (20 seeded values off AITER's tuning grid), `sparse+off-grid`, or a comma list.
    #[arg(long, default_value = "dataset")]
    pub m_set: String,
    /// (N,K) pairs to measure instead of the model's layers, e.g. `5120:5120,25600:5120`.
    #[arg(long)]
    pub shapes: Option<String>,
    /// Kernel family to measure: `ck` (the CK legacy instances, realized in the Triton harness) or `triton`
    /// (configs of the block-FP8 Triton GEMM vLLM and SGLang run, libtype triton; see --configs).
    #[arg(long, value_enum, default_value = "ck")]
    pub family: Family,
    /// Legacy kernelIds to measure (comma list), or `all` (the 19 candidates) [default: all]; --family ck.
    #[arg(long)]
    pub instances: Option<String>,
    /// With --family triton, the configs to measure: `kept` (the configs kept by the set cover of
    /// measurements/h200/triton-space/ and vLLM's default, embedded), `space` (the tuner's 1280 configs), a
    /// file of config names (one per line, `#` comments: the format of triton-space/kept.txt), or a comma
    /// list of names such as triton_bm64_bn128_bk128_g32_w4_s2 [default: kept].
    #[arg(long)]
    pub configs: Option<String>,
    /// Split-K levels: `auto` (1..3 where the grid is smaller than the CU count), `aiter` (the levels
    /// AITER's blockscale tuner tries, `compute_gemm_SplitK`, up to 5 and a whole KPerBLOCK step per split;
    /// the levels it leaves out are counted) or `none` [default: auto; --family triton: none, the kernel has
    /// no split-K].
    #[arg(long, value_enum)]
    pub split_k: Option<SplitKMode>,
    /// Share of cells measured a second time at the end (noise estimate).
    #[arg(long, default_value_t = 0.05)]
    pub recheck_fraction: f64,
    /// Seed of the recheck choice (and of the harness's random inputs).
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Journal: the output CSV (AITER columns plus extras). Existing rows are kept and skipped.
    #[arg(long)]
    pub out: PathBuf,
    /// Python interpreter with PyTorch and Triton.
    #[arg(long, default_value = "python3")]
    pub python: PathBuf,
    /// Path of the harness entry point.
    #[arg(long, default_value = "harness/blockscale_bench.py")]
    pub harness: PathBuf,
    /// Extra argument passed to the harness (repeatable), e.g. `--harness-arg=--mapping=64:2:3`.
    #[arg(long = "harness-arg", allow_hyphen_values = true)]
    pub harness_args: Vec<String>,
    /// CU/SM count for the split-K rule (e.g. 304 for MI300X, 132 for H200); default: ask the device
    /// (which needs PyTorch and a GPU).
    #[arg(long)]
    pub cu_num: Option<u32>,
    /// Seconds to wait for each cell's result before the harness is stopped (the run ends with an error
    /// and keeps every finished cell); with --backend aiter, the longest the tuner may print nothing and
    /// add nothing to its profile file before it is stopped.
    #[arg(long, default_value_t = 1800.0, value_parser = positive_seconds)]
    pub cell_timeout: f64,
    /// Print the plan size (total, already in the journal, to measure) and stop. Without a GPU (or
    /// PyTorch), also pass --cu-num (--family ck; a triton plan needs no device).
    #[arg(long)]
    pub dry_run: bool,
    /// Write the cells still to measure as a plan file (JSON lines) and stop.
    #[arg(long)]
    pub plan_only: Option<PathBuf>,
    /// Measurement backend: the Triton harness, or AITER's tuner on CK's own kernels (ROCm).
    #[arg(long, value_enum, default_value = "harness")]
    pub backend: Backend,
    #[command(flatten)]
    pub scale: ScaleArgs,
    #[command(flatten)]
    pub aiter: AiterTunerArgs,
}

/// The kernel family `synth bench` plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Family {
    /// CK legacy instances (kernelIds 0..18, split-K where it can matter).
    Ck,
    /// Configs of the block-FP8 Triton family (libtype triton, no split-K).
    Triton,
}

/// The kept configs of `measurements/h200/triton-space/kept.txt` (the default of `--family triton`).
pub const KEPT_CONFIGS: &str = include_str!("../../measurements/h200/triton-space/kept.txt");

/// The configs of `--configs` ([`BenchArgs::configs`]): `kept`, `space`, a file of names (`#` comments),
/// or a comma list of names. An error names the file and line, or the list entry, and the bad name.
pub(crate) fn parse_configs(text: Option<&str>) -> Result<Vec<TritonConfig>> {
    let text = text.unwrap_or("kept");
    let from_lines = |body: &str, origin: &str| -> Result<Vec<TritonConfig>> {
        let mut out = Vec::new();
        for (i, line) in body.lines().enumerate() {
            let name = line.split('#').next().unwrap_or_default().trim();
            if name.is_empty() {
                continue;
            }
            out.push(TritonConfig::parse_name(name).map_err(|e| anyhow::anyhow!("--configs {origin}:{}: {e}", i + 1))?);
        }
        if out.is_empty() {
            bail!("--configs {origin}: no config name (one per line, e.g. triton_bm64_bn128_bk128_g32_w4_s2)");
        }
        Ok(out)
    };
    match text {
        "kept" => from_lines(KEPT_CONFIGS, "kept (measurements/h200/triton-space/kept.txt)"),
        "space" => Ok(synth_core::catalog::triton::tuner_space()),
        _ if std::path::Path::new(text).is_file() => {
            let bytes = synth_base::input::read_bytes_capped(
                std::path::Path::new(text),
                synth_base::input::MAX_SPEC_BYTES,
                "--configs file",
            )
            .with_context(|| format!("--configs {text}: cannot read it"))?;
            let body = String::from_utf8(bytes).with_context(|| format!("--configs {text}: not UTF-8 text"))?;
            from_lines(&body, text)
        }
        list => list
            .split(',')
            .map(|name| {
                TritonConfig::parse_name(name.trim()).map_err(|e| {
                    anyhow::anyhow!(
                        "--configs: {e}; give `kept`, `space`, a file of config names or a comma list of names \
                         ({} is not a file either)",
                        synth_base::sanitize::shown(list)
                    )
                })
            })
            .collect(),
    }
}

/// Where a plan runs: several GPUs of this host (`--gpus`) and one share of a plan split over several runs
/// (`--shard`), for either backend.
#[derive(Debug, Clone, clap::Args)]
pub struct ScaleArgs {
    /// GPUs of this host to measure on, as CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES name them (comma
    /// list of indices or UUIDs, e.g. `0,1,2,3`): one harness worker per GPU, cells dealt by shape, every
    /// result written to the one journal; a failed worker's cells go to the others. With --backend aiter:
    /// the tuner sees these GPUs and gets --mp with their count. Default: one worker on the GPU the
    /// harness sees.
    #[arg(long)]
    pub gpus: Option<String>,
    /// Measure only share I of a plan split by shape into N (1 <= I <= N), e.g. `--shard 3/8`: the same
    /// command with I = 1..N on N machines measures the whole plan once; `synth merge` joins the journals.
    #[arg(long)]
    pub shard: Option<Shard>,
    /// With --gpus: how many times a cell being measured when its worker failed is dealt to another worker
    /// before the run stops [default: 2].
    #[arg(long)]
    pub worker_retries: Option<u32>,
}

/// Most GPUs of one `--gpus` list.
pub const MAX_GPUS: usize = 64;

impl ScaleArgs {
    /// The `--gpus` list, checked against this process's environment ([`check_gpus`]); `None` without it.
    pub(crate) fn gpu_list(&self) -> Result<Option<Vec<String>>> {
        match &self.gpus {
            None => Ok(None),
            Some(text) => check_gpus(text, |v| std::env::var(v).ok()).map(Some),
        }
    }
}

/// Parses a `--gpus` list: each id a decimal index (as `CUDA_VISIBLE_DEVICES` / `HIP_VISIBLE_DEVICES` number
/// GPUs; returned without leading zeros) or a UUID as `nvidia-smi -L` / `rocm-smi --showuniqueid` print it
/// ([`gpu_id`]: `GPU-…`, a MIG instance's `MIG-…`), none twice (compared as numbers, UUIDs ignoring case),
/// at most [`MAX_GPUS`]. Where the environment (`env`) already limits the GPUs this process may use
/// (`CUDA_VISIBLE_DEVICES`, `HIP_VISIBLE_DEVICES`), every id must be one it lists; under
/// `ROCR_VISIBLE_DEVICES` (which HIP numbers from 0) a numeric id must be below its count.
pub(crate) fn check_gpus(text: &str, env: impl Fn(&str) -> Option<String>) -> Result<Vec<String>> {
    let mut ids: Vec<String> = Vec::new();
    for entry in text.split(',').map(str::trim) {
        if entry.is_empty() {
            bail!("--gpus {:?}: an empty entry; name GPUs as a comma list, e.g. --gpus 0,1,2,3", text);
        }
        let Some(id) = gpu_id(entry) else {
            bail!(
                "--gpus: {} is not a GPU id (an index such as 0, at most {}, or a UUID as nvidia-smi -L prints it, \
                 such as GPU-8932f937-…)",
                synth_base::sanitize::shown(entry),
                u32::MAX
            );
        };
        ids.push(id);
    }
    let same = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    if let Some((i, id)) = ids.iter().enumerate().find(|(i, id)| ids[..*i].iter().any(|x| same(x, id))) {
        bail!(
            "--gpus: GPU {id} is named twice (entries {} and {}); one worker per GPU",
            ids[..i].iter().position(|x| same(x, id)).unwrap() + 1,
            i + 1
        );
    }
    if ids.len() > MAX_GPUS {
        bail!("--gpus names {} GPUs; at most {MAX_GPUS} per host", ids.len());
    }
    for var in ["CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"] {
        let Some(value) = env(var) else { continue };
        let allowed: Vec<String> =
            value.split(',').map(str::trim).map(|a| gpu_id(a).unwrap_or_else(|| a.to_string())).collect();
        if let Some(id) = ids.iter().find(|id| !allowed.iter().any(|a| same(a, id))) {
            bail!(
                "--gpus: GPU {id} is not among the GPUs this environment allows ({var}={}); name GPUs from that list",
                synth_base::sanitize::shown(&value)
            );
        }
    }
    if let Some(value) = env("ROCR_VISIBLE_DEVICES") {
        let count = value.split(',').filter(|s| !s.trim().is_empty()).count();
        if let Some(id) = ids.iter().find(|id| id.parse::<usize>().is_ok_and(|n| n >= count)) {
            bail!(
                "--gpus: GPU {id} is beyond the {count} GPUs of ROCR_VISIBLE_DEVICES={} (HIP numbers them from 0)",
                synth_base::sanitize::shown(&value)
            );
        }
    }
    Ok(ids)
}

/// One `--gpus` entry as the harness is given it, or `None` when it is no GPU id: a decimal index that fits
/// a u32, written without leading zeros; `GPU-` and a UUID (hex digits and dashes), as `nvidia-smi -L` and
/// ROCm's tools print it; or a MIG instance, `MIG-` and a UUID or the older `MIG-GPU-<uuid>/<gi>/<ci>`.
pub(crate) fn gpu_id(entry: &str) -> Option<String> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if digits(entry) {
        return entry.parse::<u32>().ok().map(|n| n.to_string());
    }
    let uuid =
        |s: &str| s.bytes().any(|b| b.is_ascii_hexdigit()) && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    let ok = match (entry.strip_prefix("GPU-"), entry.strip_prefix("MIG-")) {
        (Some(rest), _) => uuid(rest),
        (None, Some(rest)) => match rest.strip_prefix("GPU-") {
            Some(old) => {
                let parts: Vec<&str> = old.split('/').collect();
                parts.len() == 3 && uuid(parts[0]) && digits(parts[1]) && digits(parts[2])
            }
            None => uuid(rest),
        },
        (None, None) => false,
    };
    ok.then(|| entry.to_string())
}

/// Refuses a `--plan-only` path whose writing would lose something: the journal itself (`--out`, under any
/// name, also before it exists), something that is not a regular file, or an existing file that is not a
/// plan `synth bench` wrote (`is_plan` judges its first line; `what` names such a plan). Nothing is written.
pub(crate) fn check_plan_path(plan: &Path, out: &Path, is_plan: impl Fn(&str) -> bool, what: &str) -> Result<()> {
    if same_file(plan, out) {
        bail!(
            "--plan-only {} is the journal (--out {}): the plan would replace its measurements; write the plan to \
             another file (nothing was written)",
            plan.display(),
            out.display()
        );
    }
    if same_file(plan, &synth_measure::measure::journal::lock_path(out)) {
        bail!(
            "--plan-only {} is the journal's lock file: the next run on --out {} would replace the plan; write the \
             plan to another file (nothing was written)",
            plan.display(),
            out.display()
        );
    }
    let Ok(meta) = std::fs::metadata(plan) else { return Ok(()) };
    if !meta.is_file() {
        bail!(
            "--plan-only {} is {}; pass the path of a plan file to write (nothing was written)",
            plan.display(),
            synth_base::paths::file_kind(&meta)
        );
    }
    let mut first = Vec::new();
    std::fs::File::open(plan)
        .and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, 64 * 1024), &mut first))
        .with_context(|| format!("--plan-only {}: cannot read it", plan.display()))?;
    if first.is_empty() {
        return Ok(());
    }
    let line = String::from_utf8_lossy(first.split(|&b| b == b'\n').next().unwrap_or(&[])).into_owned();
    if !is_plan(line.trim_end_matches('\r')) {
        bail!(
            "--plan-only {} exists and is not {what} written by `synth bench` (its first line is {}); remove it or \
             pass another path (nothing was written)",
            plan.display(),
            synth_base::sanitize::shown(&line.chars().take(120).collect::<String>())
        );
    }
    Ok(())
}

/// Whether `a` and `b` name one file: the same inode when both exist, else the same canonical path (of the
/// parent directory and name for a file not created yet).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        return x.dev() == y.dev() && x.ino() == y.ino();
    }
    let would_be = |p: &Path| -> Option<PathBuf> {
        if let Ok(c) = p.canonicalize() {
            return Some(c);
        }
        let name = p.file_name()?;
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        Some(dir.canonicalize().ok()?.join(name))
    };
    match (would_be(a), would_be(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Writes a plan file all or nothing (staged beside it, then renamed into place).
pub(crate) fn write_plan(path: &Path, text: String) -> Result<()> {
    super::outputs::write_named_files(&[(path.to_path_buf(), text.into_bytes())])
}

/// The off-grid M set of `--m-set off-grid`: 20 seeded log-uniform values over 1..=16384 off AITER's grid.
pub const OFF_GRID_COUNT: usize = 20;
/// Largest M of the off-grid set.
pub const OFF_GRID_MAX: u32 = 16384;
/// Seed of the off-grid set.
pub const OFF_GRID_SEED: u64 = 2026;

pub(crate) fn parse_m_set(text: &str) -> Result<Vec<u32>> {
    match text {
        "dataset" => Ok(shapes::m_dataset_grid()),
        "decode" => Ok(shapes::m_decode()),
        "sparse" => Ok(shapes::m_sparse_grid()),
        "off-grid" => Ok(shapes::m_off_grid(OFF_GRID_COUNT, OFF_GRID_MAX, OFF_GRID_SEED)),
        "sparse+off-grid" => {
            let mut v = shapes::m_sparse_grid();
            v.extend(shapes::m_off_grid(OFF_GRID_COUNT, OFF_GRID_MAX, OFF_GRID_SEED));
            v.sort_unstable();
            Ok(v)
        }
        list => {
            list.split(',')
                .map(|s| {
                    let v: u32 = s.trim().parse().with_context(|| {
                        format!("--m-set: {s:?} is not a positive integer (or use `dataset`, `decode`, `sparse`, `off-grid`, `sparse+off-grid`)")
                    })?;
                    if v == 0 {
                        bail!("--m-set: M must be positive, got 0");
                    }
                    Ok(v)
                })
                .collect()
        }
    }
}

/// The M values and the runnable (N, K) layers a bench measures (`--shapes`, else the model's), and one
/// message per layer it cannot run (printed here; the caller fails after measuring the others).
pub(crate) fn bench_grid(args: &BenchArgs) -> Result<(Vec<u32>, ModelLayers)> {
    let ms = parse_m_set(&args.m_set)?;
    let (layers, unrunnable) = match &args.shapes {
        Some(s) => (parse_pairs(s)?, Vec::new()),
        None => model_layers(&args.model, args.tp)?,
    };
    for msg in &unrunnable {
        errln!("error: {msg}");
    }
    if layers.is_empty() {
        bail!("no layer of {} at TP {} can be measured (see above)", args.model.option_text(DEFAULT_MODEL), args.tp);
    }
    Ok((ms, (layers, unrunnable)))
}

/// The model `synth bench` measures when none is named.
pub const DEFAULT_MODEL: &str = "qwen3-32b";

/// Runnable (N, K) layers and one message per unrunnable layer.
type ModelLayers = (Vec<(u32, u32)>, Vec<String>);

/// (N, K) of a model's four GEMMs at a TP degree (qkv, o, gate_up, down) that blockscale can run, and one
/// message per layer it cannot (K not a multiple of the 128-wide scale group).
pub(crate) fn model_layers(model: &crate::app::model_args::ModelArgs, tp: u32) -> Result<ModelLayers> {
    let spec = model.load_or(DEFAULT_MODEL).with_context(|| model.option_text(DEFAULT_MODEL))?;
    let model = &spec.name;
    let layers = spec.layers(tp).with_context(|| format!("{} --tp {tp}", spec.name))?;
    let mut runnable = Vec::new();
    let mut unrunnable = Vec::new();
    for l in layers {
        if l.k % 128 == 0 {
            runnable.push((l.n, l.k));
        } else {
            unrunnable.push(format!(
                "{model} at TP {tp}, {}: K = {} is not a multiple of 128, so an FP8 blockscale GEMM (128-wide K \
                 scale groups) cannot run it; not measured",
                l.name, l.k
            ));
        }
    }
    Ok((runnable, unrunnable))
}

pub(crate) fn parse_pairs(text: &str) -> Result<Vec<(u32, u32)>> {
    text.split(',')
        .map(|p| {
            let (n, k) = p.split_once(':').with_context(|| format!("--shapes: {p:?} is not N:K"))?;
            let n: u32 = n.trim().parse().with_context(|| format!("--shapes: N in {p:?} is not an integer"))?;
            let k: u32 = k.trim().parse().with_context(|| format!("--shapes: K in {p:?} is not an integer"))?;
            if n == 0 || k == 0 {
                bail!("--shapes: {p:?} has a zero dimension");
            }
            Ok((n, k))
        })
        .collect()
}

fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1e7 => Ok(v),
        _ => Err(format!("expected a number of seconds in (0, 1e7], got {s:?}")),
    }
}

pub(crate) fn print_summary(journal: &Journal, appended: usize, elapsed: f64) {
    let rows = journal.rows();
    let mut fails: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rows {
        if let synth_core::table::RowStatus::Fail(reason) = &r.status {
            *fails.entry(reason.as_str()).or_default() += 1;
        }
    }
    let ok = rows.iter().filter(|r| r.is_ok()).count();
    let path = synth_base::sanitize::shown_path(journal.path());
    outln!("journal {path}: {} rows, {} ok, {} failed", rows.len(), ok, rows.len() - ok);
    if appended > 0 {
        outln!("this run: {appended} cells in {elapsed:.1} s = {:.2} cells/s", appended as f64 / elapsed.max(1e-9));
    }
    for (reason, n) in &fails {
        outln!("  fail:{}: {n}", synth_base::sanitize::shown(reason));
    }
    match recheck_noise(rows) {
        Some((med, n)) => {
            outln!("noise: median |us - us_recheck| / us = {:.2}% over {n} rechecked cells", med * 100.0)
        }
        None => outln!("noise: no rechecked cell pairs yet"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn m_sets() {
        assert_eq!(parse_m_set("dataset").unwrap().len(), 80);
        assert_eq!(parse_m_set("1, 16,4096").unwrap(), vec![1, 16, 4096]);
        assert!(parse_m_set("0").is_err());
        assert!(parse_m_set("abc").is_err());
    }

    #[test]
    fn qwen3_tp2_layers() {
        assert_eq!(
            model_layers(&crate::app::model_args::ModelArgs::builtin("qwen3-32b"), 2).unwrap(),
            (vec![(5120, 5120), (5120, 4096), (25600, 5120), (5120, 12800)], Vec::<String>::new())
        );
        assert!(model_layers(&crate::app::model_args::ModelArgs::builtin("qwen3-32b"), 3).is_err());
    }

    #[test]
    fn layers_blockscale_cannot_run_are_named() {
        // Qwen2.5-72B at TP 4: down_proj K = 29568 / 4 = 7392 = 57.75 x 128.
        let (ok, bad) = model_layers(&crate::app::model_args::ModelArgs::builtin("qwen2.5-72b"), 4).unwrap();
        assert_eq!(ok, vec![(2560, 8192), (8192, 2048), (14784, 8192)]);
        assert_eq!(bad.len(), 1);
        assert!(bad[0].contains("qwen2.5-72b at TP 4, down_proj: K = 7392 is not a multiple of 128"), "{}", bad[0]);
    }

    #[test]
    fn gpu_lists_are_checked_against_the_environment() {
        let none = |_: &str| None;
        assert_eq!(check_gpus("0,1, 3", none).unwrap(), ["0", "1", "3"]);
        assert_eq!(check_gpus("GPU-8932f937-d72c", none).unwrap(), ["GPU-8932f937-d72c"]);
        assert_eq!(check_gpus("007, 1", none).unwrap(), ["7", "1"]);
        assert_eq!(
            check_gpus("MIG-0e5b1f2c-9a6d,MIG-GPU-8932f937-d72c/1/0", none).unwrap(),
            ["MIG-0e5b1f2c-9a6d", "MIG-GPU-8932f937-d72c/1/0"]
        );
        for (text, want) in [
            ("0,,1", "an empty entry"),
            ("0,1,0", "GPU 0 is named twice (entries 1 and 3)"),
            ("0;1", "is not a GPU id"),
            ("", "an empty entry"),
            ("0,00", "GPU 0 is named twice (entries 1 and 2)"),
            ("a", "a is not a GPU id"),
            ("0x0", "0x0 is not a GPU id"),
            ("999999999999999999999", "999999999999999999999 is not a GPU id"),
            ("GPU-xyz", "GPU-xyz is not a GPU id"),
        ] {
            let e = check_gpus(text, none).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        let many: Vec<String> = (0..65).map(|i| i.to_string()).collect();
        assert!(check_gpus(&many.join(","), none).unwrap_err().to_string().contains("at most 64"));
        let cuda = |v: &str| (v == "CUDA_VISIBLE_DEVICES").then(|| "4,5,6,7".to_string());
        assert_eq!(check_gpus("5,7", cuda).unwrap(), ["5", "7"]);
        let e = check_gpus("0,5", cuda).unwrap_err().to_string();
        assert!(
            e.contains("GPU 0 is not among the GPUs this environment allows (CUDA_VISIBLE_DEVICES=4,5,6,7)"),
            "{e}"
        );
        let rocr = |v: &str| (v == "ROCR_VISIBLE_DEVICES").then(|| "2,3".to_string());
        assert_eq!(check_gpus("0,1", rocr).unwrap(), ["0", "1"]);
        assert!(check_gpus("2", rocr).unwrap_err().to_string().contains("beyond the 2 GPUs of ROCR_VISIBLE_DEVICES"));
    }

    #[test]
    fn named_m_sets() {
        assert_eq!(parse_m_set("sparse").unwrap().len(), 30);
        assert_eq!(parse_m_set("off-grid").unwrap().len(), 20);
        assert_eq!(parse_m_set("sparse+off-grid").unwrap().len(), 50);
    }
}
