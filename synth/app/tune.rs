//! `synth tune (--model M | --spec S | --hf-config F) --tp T | --shapes N:K,... --runtime vllm|sglang|aiter
//! --budget 10m --journal J --out DIR`: on a GPU host, from the shipped rule and candidate set (the prior) to
//! a rule for the device at hand, measuring in rounds only the cells that can change it (the stage:
//! [`synth_measure::tune`]), then the runtime's files, the rule in every form and the report, written through the
//! one all-or-nothing writer. `--dry-run` prints the first round and a GPU-time estimate without a GPU;
//! `--replay JOURNAL...` answers every "measure" from fully measured journals (the same code path, no GPU).

use super::args::LayerArgs;
use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context};

use super::configs::{Target, CK_RULE};
use super::export::{ExportArgs, ExportSpec, DEFAULT_MAX_M};
use synth_core::catalog::{Candidate, Catalog, Libtype};
use synth_core::export::Runtime;
use synth_core::render::writer::GeneratedFile;
use synth_core::table::{Cell, Shape};
use synth_measure::tune::{CellId, Family, Measurer, Method, Prior, Stop, TuneSpec, Tuned};

/// The M values vLLM's and SGLang's tuner measures for every (N, K) (`benchmark_w8a8_block_fp8.py`); a
/// live tune plans over them.
pub const TUNER_MS: [u32; 18] = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096];
/// Seconds of GPU time a cell takes, for `--dry-run`'s estimate: the H200 sweep of the Triton space
/// measured about 44 cells/s after compiling (`measurements/h200/triton-space/README.md`), rounded up with
/// the compile time per config to 0.05 s.
pub const SECONDS_PER_CELL: f64 = 0.05;
/// `synth tune --help`'s examples.
pub const HELP: &str = "Examples:
  # Tune Llama-3.1-8B at TP 1 for vLLM on this GPU, 10 minutes of GPU time at most:
  synth tune --model llama-3.1-8b --tp 1 --runtime vllm --budget 10m --journal tune.csv --out tuned/
  # The first round and a GPU-time estimate, without a GPU:
  synth tune --model llama-3.1-8b --tp 1 --runtime vllm --dry-run --out tuned/
  # The same loop answered from fully measured journals (no GPU):
  synth tune --runtime aiter --replay measurements/h100/llama-3.1-8b-tp1.csv.gz --out replayed/

A rerun with the same --journal measures only the cells the journal does not hold.";
/// Name of the report in `--out`.
pub const REPORT: &str = "tune-report.md";

#[derive(Debug, Clone, clap::Args)]
pub struct TuneArgs {
    /// The layers (a model and --tp, or --shapes).
    #[command(flatten)]
    pub layers: LayerArgs,
    /// The shapes a runtime ran, read from its log (AITER's untuned-shape CSV and "not found tuned config"
    /// lines, vLLM's and SGLang's default-config warnings).
    #[arg(long, value_name = "LOG")]
    pub shapes_from: Option<PathBuf>,
    /// Runtime whose files are written: vllm and sglang tune the block-FP8 Triton family, aiter the CK
    /// instances with split-K.
    #[arg(long, value_enum)]
    pub runtime: Target,
    /// GPU time to spend measuring, e.g. 10m, 600s, 1h (a round that would start past it is not started).
    #[arg(long, default_value = "10m")]
    pub budget: String,
    /// Stop once the rule's estimated loss on the held-out sample is below this (0.005: 0.5%).
    #[arg(long, default_value_t = 0.005)]
    pub tolerance: f64,
    /// Most rounds.
    #[arg(long, default_value_t = 12)]
    pub max_rounds: usize,
    /// The measurement journal: the tune's state (a rerun measures only what it does not hold).
    #[arg(long)]
    pub journal: Option<PathBuf>,
    /// Answer every "measure" from these fully measured journals (AITER-form CSV, or the harness's
    /// `.jsonl[.gz]` result lines) instead of the GPU.
    #[arg(long, num_args = 1.., value_name = "JOURNAL")]
    pub replay: Vec<PathBuf>,
    /// Print the first round's plan and a GPU-time estimate; measure and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Rebuild a finished tune's files from its --journal without a GPU: every round is answered from the
    /// journal (the device is the one its rows name); a cell the journal lacks is an error.
    #[arg(long)]
    pub from_journal: bool,
    /// GPU name as the runtime reports it (spaces become underscores) [default: the device's name].
    #[arg(long)]
    pub device_name: Option<String>,
    /// CU/SM count for the CK split-K rule of a dry run [default: 132, the H100's and H200's SMs].
    #[arg(long)]
    pub cu_num: Option<u32>,
    /// Python interpreter with PyTorch and Triton.
    #[arg(long, default_value = "python3")]
    pub python: PathBuf,
    /// Path of the harness entry point.
    #[arg(long, default_value = "harness/blockscale_bench.py")]
    pub harness: PathBuf,
    /// Seconds to wait for each cell's result before the harness is stopped.
    #[arg(long, default_value_t = 1800.0)]
    pub cell_timeout: f64,
    /// Seed of the held-out sample.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output directory (created if missing); nothing is written anywhere else.
    #[arg(long)]
    pub out: PathBuf,
}

/// `10m`, `600s`, `1h`, `90` (seconds) as seconds.
pub fn parse_budget(text: &str) -> anyhow::Result<f64> {
    let t = text.trim();
    let (num, unit) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => t.split_at(i),
        None => (t, "s"),
    };
    let scale = match unit {
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => bail!("--budget {text:?}: the unit is s, m or h (e.g. 10m)"),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * scale),
        _ => bail!("--budget {text:?}: expected a positive duration such as 10m, 600s or 1h"),
    }
}

fn family_of(target: Target) -> Family {
    if target == Target::Aiter {
        Family::Ck
    } else {
        Family::Triton
    }
}

/// The prior: the shipped rule of the runtime's family and its candidate set (Triton: the kept set).
/// The Triton prior is the shipped rule of the card `device` names (`configs::triton_rule_for`: the H100's
/// for a name that says H100, else the H200's).
pub fn prior(family: Family, device: &str) -> anyhow::Result<Prior> {
    let (path, text) = if family == Family::Ck { CK_RULE } else { super::configs::triton_rule_for(device) };
    let rule =
        synth_core::rule::parse_json(text).map_err(|e| anyhow::anyhow!("internal error: the embedded {path}: {e}"))?;
    let candidates = match family {
        Family::Ck => Vec::new(),
        Family::Triton => super::bench_args::parse_configs(None)?
            .into_iter()
            .map(|c| Candidate::of(Libtype::Triton, c.kernel_id(), 0))
            .collect(),
    };
    Ok(Prior { rule, candidates })
}

/// The spec of a tune of `layers`: the limits and weighting of the job that made the prior.
pub fn spec_for(
    family: Family,
    layers: BTreeMap<(u32, u32), Vec<u32>>,
    stop: Stop,
    (seed, device): (u64, &str),
) -> anyhow::Result<TuneSpec> {
    let job = match family {
        Family::Ck => super::ship::ck_job()?,
        Family::Triton => super::ship::triton_job(super::ship::triton_rule_of(device))?,
    };
    let settings = job.settings();
    let method = Method {
        family,
        prior: prior(family, device)?,
        limits: settings.limits,
        weight: settings.weight,
        first_ms: 4,
        refine_ms: 3,
        held_out: 1,
        seed,
    };
    Ok(TuneSpec { method, layers, stop })
}

/// The layers to tune and each one's M values: a runtime's log (`--shapes-from`: the shapes it ran, and the
/// tuner's M values for a layer whose message carries no M), or the layers `synth export` resolves (model and
/// --tp, or --shapes) at the tuner's M values.
fn target_layers(args: &TuneArgs) -> anyhow::Result<BTreeMap<(u32, u32), Vec<u32>>> {
    if let Some(log) = &args.shapes_from {
        if args.layers.model.given() || args.layers.shapes.is_some() || args.layers.tp.is_some() {
            bail!("--shapes-from names the shapes itself: drop --model/--hf-config/--spec, --tp and --shapes");
        }
        let found = synth_core::shapes::runtime_log::shapes_from_log(log, &TUNER_MS)?;
        let mut layers: BTreeMap<(u32, u32), Vec<u32>> = BTreeMap::new();
        for (m, n, k) in found.shapes {
            if k % synth_core::catalog::triton::SCALE_K != 0 {
                bail!(
                    "--shapes-from {}: N={n} K={k}: K is not a multiple of 128, so no 128x128 block-FP8 GEMM runs it",
                    synth_base::sanitize::shown_path(log)
                );
            }
            layers.entry((n, k)).or_default().push(m);
        }
        if layers.is_empty() {
            bail!(
                "--shapes-from {}: no shape of the a8w8 blockscale GEMM in it (AITER's untuned CSV or \
                 \"not found tuned config\" lines, vLLM's or SGLang's default-config warnings)",
                synth_base::sanitize::shown_path(log)
            );
        }
        return Ok(layers);
    }
    let (nks, left) = super::export::layers(&ExportArgs {
        runtime: Runtime::Vllm,
        rule: PathBuf::new(),
        layers: args.layers.clone(),
        device_name: String::new(),
        out: args.out.clone(),
        max_m: DEFAULT_MAX_M,
    })?;
    if let Some(note) = super::export::left_out_note(&left) {
        outln!("{note}");
    }
    Ok(nks.into_iter().map(|nk| (nk, TUNER_MS.to_vec())).collect())
}

pub fn run(args: TuneArgs) -> anyhow::Result<()> {
    let family = family_of(args.runtime);
    let stop =
        Stop { tolerance: args.tolerance, gpu_seconds: Some(parse_budget(&args.budget)?), max_rounds: args.max_rounds };
    if args.max_rounds == 0 {
        bail!("--max-rounds 0: a tune needs at least one round");
    }
    if args.from_journal && (args.dry_run || !args.replay.is_empty()) {
        bail!("--from-journal rebuilds a finished tune from its --journal: drop --dry-run and --replay");
    }
    if !args.replay.is_empty() {
        if args.journal.is_some() {
            bail!("--replay answers from its journals and measures nothing: drop --journal");
        }
        return run_replay(&args, family, stop);
    }
    let layers = target_layers(&args)?;
    if args.dry_run {
        let device = args.device_name.clone().unwrap_or_default();
        return dry_run(&args, &spec_for(family, layers, stop, (args.seed, &device))?);
    }
    run_live(&args, (family, layers, stop))
}

/// The first round's plan and its GPU-time estimate, without a GPU (cells a journal holds left out).
fn dry_run(args: &TuneArgs, spec: &TuneSpec) -> anyhow::Result<()> {
    synth_measure::tune::check_spec(spec)?;
    let catalog = Catalog::embedded();
    let cu_num = args.cu_num.unwrap_or(132);
    if cu_num == 0 {
        bail!("--cu-num 0: the device's CU/SM count is at least 1 (e.g. 132 for H100 and H200)");
    }
    let known = match &args.journal {
        Some(j) if j.exists() => read_known(j, &catalog, family_libtype(spec.method.family))?,
        _ => BTreeMap::new(),
    };
    let triton = triton_set()?;
    let universe = |s: Shape| universe_of(spec.method.family, &catalog, &triton, cu_num, s);
    let mut st = synth_measure::tune::planner::initial(spec);
    st.known = known;
    let plan = synth_measure::tune::planner::plan_round(spec, &mut st, &universe);
    let ck_cells: usize = spec
        .layers
        .iter()
        .map(|(&(n, k), ms)| ms.iter().map(|&m| universe(Shape::new(m, n, k)).len()).sum::<usize>())
        .sum();
    let exhaustive = synth_measure::tune::report::exhaustive_cells(spec.method.family, spec.layers.len(), ck_cells);
    for (&(n, k), ms) in &st.sampled {
        let cells = plan.iter().filter(|(s, _)| (s.n, s.k) == (n, k)).count();
        let held: Vec<u32> = st.held_out.iter().filter(|s| (s.n, s.k) == (n, k)).map(|s| s.m).collect();
        outln!("layer N={n} K={k}: M {ms:?} (held out: M {held:?}), {cells} cells");
    }
    outln!(
        "round 1: {} cells over {} layers; about {:.0} GPU seconds at {SECONDS_PER_CELL} s a cell (the exhaustive \
         tuner: {exhaustive} cells, about {:.0} s); budget {:.0} s",
        plan.len(),
        spec.layers.len(),
        plan.len() as f64 * SECONDS_PER_CELL,
        exhaustive as f64 * SECONDS_PER_CELL,
        spec.stop.gpu_seconds.unwrap_or(0.0)
    );
    Ok(())
}

fn family_libtype(family: Family) -> Libtype {
    if family == Family::Ck {
        Libtype::Ck
    } else {
        Libtype::Triton
    }
}

/// The triton configs a tune may measure: the kept set, then the rest of the tuner's space.
fn triton_set() -> anyhow::Result<Vec<synth_core::catalog::triton::TritonConfig>> {
    let mut set = super::bench_args::parse_configs(None)?;
    for c in synth_core::catalog::triton::tuner_space() {
        if !set.contains(&c) {
            set.push(c);
        }
    }
    Ok(set)
}

fn universe_of(
    family: Family,
    catalog: &Catalog,
    triton: &[synth_core::catalog::triton::TritonConfig],
    cu_num: u32,
    s: Shape,
) -> Vec<Candidate> {
    match family {
        Family::Ck => synth_measure::tune::live::ck_plan(catalog, s, cu_num)
            .map(|p| p.iter().map(|c| Candidate::new(c.kernel_id, c.split_k)).collect())
            .unwrap_or_default(),
        Family::Triton => triton.iter().map(|c| Candidate::of(Libtype::Triton, c.kernel_id(), 0)).collect(),
    }
}

/// The cells of `family` a journal holds (recheck rows aside), as the tune knows them.
fn read_known(path: &std::path::Path, catalog: &Catalog, libtype: Libtype) -> anyhow::Result<BTreeMap<CellId, Cell>> {
    let contents = synth_measure::measure::journal::read_for_planning(path, catalog, "cell")?;
    Ok(contents
        .rows
        .iter()
        .map(|(_, r)| r)
        .filter(|r| r.recheck == 0 && r.libtype == libtype)
        .map(|r| {
            (
                (Shape::new(r.m, r.n, r.k), Candidate::of(r.libtype, r.kernel_id, r.split_k)),
                synth_measure::tune::live::cell_of(r),
            )
        })
        .collect())
}

/// `--replay`: the layers of the journals (those of the model or --shapes when given), answered from them.
fn run_replay(args: &TuneArgs, family: Family, stop: Stop) -> anyhow::Result<()> {
    let catalog = Catalog::embedded();
    let backends = (family == Family::Triton)
        .then(|| synth_core::catalog::Backends::parse("triton"))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let matrix = synth_measure::tune::replay::load_matrix(&args.replay, backends.as_ref(), &catalog, false)?;
    let wanted: Option<Vec<(u32, u32)>> =
        (args.layers.shapes.is_some() || args.layers.model.given() || args.layers.tp.is_some())
            .then(|| target_layers(args).map(|l| l.into_keys().collect()))
            .transpose()?;
    let mut layers: BTreeMap<(u32, u32), Vec<u32>> = BTreeMap::new();
    for s in (0..matrix.shapes.len()).filter(|&s| matrix.best(s).is_some()) {
        let sh = matrix.shapes[s];
        if wanted.as_ref().is_none_or(|w| w.contains(&(sh.n, sh.k))) {
            layers.entry((sh.n, sh.k)).or_default().push(sh.m);
        }
    }
    if layers.is_empty() {
        bail!("--replay: the journals hold no usable cell of the layers asked for");
    }
    layers.values_mut().for_each(|v| {
        v.sort_unstable();
        v.dedup();
    });
    let device = args.device_name.clone().or(matrix.device.clone()).unwrap_or_else(|| matrix.gfx.clone());
    let spec = spec_for(family, layers, stop, (args.seed, &device))?;
    if args.dry_run {
        bail!("--dry-run prints a live tune's first round; with --replay nothing is measured anyway: drop one");
    }
    let mut replay = synth_measure::tune::replay::Replay::new(&matrix);
    let total = replay.total_cells();
    let tuned = synth_measure::tune::tune(&spec, &catalog, &mut replay, print_round)?;
    let what = format!(
        "Replayed on {} journal(s) ({total} measured cells; every \"measure\" answered from them, no GPU). GPU \
         seconds are the replayed cells' summed kernel times.",
        args.replay.len()
    );
    let inputs: Vec<(&str, PathBuf)> = args.replay.iter().map(|p| ("--replay", p.clone())).collect();
    write_outputs(args, &spec, &tuned, &catalog, (&device, total, &what), &inputs)
}

/// A live tune: the probe, the prior of the card it names, the journal (resumed), the rounds on the GPU.
fn run_live(
    args: &TuneArgs,
    (family, layers, stop): (Family, BTreeMap<(u32, u32), Vec<u32>>, Stop),
) -> anyhow::Result<()> {
    let Some(journal_path) = &args.journal else {
        bail!("synth tune measures into a journal, its state across runs: give --journal PATH (a CSV file)");
    };
    let catalog = Catalog::embedded();
    let harness = synth_measure::measure::Harness {
        python: args.python.clone(),
        script: args.harness.clone(),
        extra_args: vec![format!("--seed={}", args.seed)],
        cell_timeout: std::time::Duration::from_secs_f64(args.cell_timeout),
    };
    if args.from_journal && !journal_path.is_file() {
        bail!(
            "--from-journal {}: no such file (a finished tune's journal)",
            synth_base::sanitize::shown_path(journal_path)
        );
    }
    let (mut journal, _) = synth_measure::measure::Journal::open(journal_path, &catalog)?;
    let device = if args.from_journal { device_of_journal(&journal, journal_path)? } else { harness.probe()? };
    errln!("device: {} ({}, {} CUs/SMs, {})", device.name, device.gfx, device.cu_num, device.backend);
    let name = args.device_name.clone().unwrap_or_else(|| device.name.replace(' ', "_"));
    let spec = &spec_for(family, layers, stop, (args.seed, &name))?;
    if !args.from_journal {
        let expected = synth_measure::measure::journal::ExpectedDevice {
            name: Some(device.name.clone()),
            gfx: Some(device.gfx.clone()),
            cu_num: Some(device.cu_num),
            backend: Some(device.backend.clone()),
            source: "as the harness reports the device".to_string(),
        };
        synth_measure::measure::journal::check_resumable(journal_path, journal.first_read(), &expected)?;
        journal.expect_device(expected);
    }
    let libtype = family_libtype(spec.method.family);
    let known = journal.rows().iter().filter(|r| r.recheck == 0 && r.libtype == libtype).count();
    if known > 0 {
        errln!("journal {}: {known} cells known from earlier runs", synth_base::sanitize::shown_path(journal_path));
    }
    let mut live = synth_measure::tune::live::Live {
        harness: &harness,
        journal: &mut journal,
        catalog: &catalog,
        family: spec.method.family,
        gfx: device.gfx.clone(),
        cu_num: device.cu_num,
        triton: triton_set()?,
        log: |l| errln!("{l}"),
        spent: 0.0,
        offline: args.from_journal,
    };
    let layers_ck: usize = ck_universe_cells(spec, &live);
    let result = synth_measure::tune::tune(spec, &catalog, &mut live, print_round);
    drop(live);
    let tuned = match result {
        Ok(t) => t,
        Err(e) => {
            // A failed first run leaves no journal behind (one with rows is kept).
            journal.discard_if_unused();
            return Err(e);
        }
    };
    let shown = synth_base::sanitize::shown_path(journal_path);
    let what = if args.from_journal {
        format!("Rebuilt without a GPU from the journal {shown} (measured on {}): every cell was in it; GPU seconds are this run's, 0.", device.name)
    } else {
        format!("Measured live on {} with the harness; the journal is {shown}.", device.name)
    };
    let inputs = vec![("--journal", journal_path.clone())];
    write_outputs(args, spec, &tuned, &catalog, (&name, layers_ck, &what), &inputs)
}

/// The device a journal's rows were measured on (`--from-journal`): its first row's.
fn device_of_journal(
    journal: &synth_measure::measure::Journal,
    path: &std::path::Path,
) -> anyhow::Result<synth_measure::measure::DeviceInfo> {
    let Some(r) = journal.rows().first() else {
        bail!("--from-journal {}: the journal holds no row", synth_base::sanitize::shown_path(path));
    };
    let info = serde_json::json!({"name": r.device, "gfx": r.gfx, "cu_num": r.cu_num, "backend": r.backend});
    Ok(serde_json::from_value(info)?)
}

/// The exhaustive CK tuner's cells: every instance at every split-K level on every shape.
fn ck_universe_cells(spec: &TuneSpec, m: &dyn Measurer) -> usize {
    spec.layers
        .iter()
        .map(|(&(n, k), ms)| ms.iter().map(|&mm| m.universe(Shape::new(mm, n, k)).len()).sum::<usize>())
        .sum()
}

fn print_round(r: &synth_measure::tune::RoundLog) {
    let est = r.estimate.map_or("no estimate yet".to_string(), |e| format!("estimate {:.4} of the best", e.of_best));
    errln!("round {}: {} new cells, {} in all, {:.1} GPU s, {est}", r.round, r.measured, r.known, r.gpu_seconds);
}

/// The rule in every form, the runtime's files (vllm, sglang) and the report, all or nothing in --out.
fn write_outputs(
    args: &TuneArgs,
    spec: &TuneSpec,
    tuned: &Tuned,
    catalog: &Catalog,
    (device, universe_cells, what): (&str, usize, &str),
    inputs: &[(&str, PathBuf)],
) -> anyhow::Result<()> {
    let (gfx, cu_num) = &tuned.device;
    let train = synth_measure::tune::training_shapes(&tuned.state);
    let matrix = synth_measure::tune::known_matrix(&tuned.state, &train, gfx, *cu_num);
    let exhaustive =
        synth_measure::tune::report::exhaustive_cells(spec.method.family, spec.layers.len(), universe_cells);
    let report = synth_measure::tune::report::markdown(spec, tuned, exhaustive, what);
    let provenance = synth_core::render::Provenance {
        dataset: what.to_string(),
        training: format!("{} shapes measured by synth tune in {} rounds", train.len(), tuned.rounds.len()),
        figures: tuned
            .rounds
            .last()
            .and_then(|r| r.estimate)
            .map(|e| format!("held-out estimate {:.4} of the best", e.of_best))
            .into_iter()
            .collect(),
        command: "synth tune".to_string(),
    };
    let extra = vec![
        GeneratedFile::new(REPORT, report.clone()),
        super::outputs::python_file(&tuned.rule, catalog, &provenance)?,
    ];
    let mut files = super::outputs::rule_files(&tuned.rule, catalog, &matrix, &provenance, extra)?;
    if let Some(runtime) = match args.runtime {
        Target::Vllm => Some(Runtime::Vllm),
        Target::Sglang => Some(Runtime::Sglang),
        Target::Aiter => None,
    } {
        let nks: Vec<(u32, u32)> = spec.layers.keys().copied().collect();
        let es = ExportSpec {
            runtime,
            rule: &tuned.rule,
            rule_name: "the tuned rule",
            rule_file: super::shared::RULE_JSON.to_string(),
            device,
            max_m: DEFAULT_MAX_M,
        };
        files.extend(super::export::runtime_files(&es, &nks, &args.out).context("the runtime's files")?);
    }
    super::outputs::check_out_dir(&args.out, &files, inputs)?;
    let written = super::outputs::write_files(&args.out, &files, false)?;
    outln!("{report}");
    outln!("{} files written in {}", written.len(), synth_base::paths::display_path(&args.out));
    Ok(())
}
