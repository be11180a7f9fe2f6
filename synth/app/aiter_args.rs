//! The options of `synth bench --backend aiter` (and `drift --remeasure --backend aiter`): the backend
//! choice and AITER tuner options passed through under the tuner's own names.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

use synth_measure::measure::aiter_tuner::{Tuner, TunerLibtype, DEFAULT_SILENCE, TUNER_SCRIPT};

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
pub enum LibtypeArg {
    /// CK legacy instances only.
    Ck,
    /// CK-tile instances only.
    Cktile,
    /// CK legacy and CK-tile.
    Both,
    /// Every backend the tuner has; asm and opus rows are counted and left out of the journal.
    All,
}

impl From<LibtypeArg> for TunerLibtype {
    fn from(l: LibtypeArg) -> TunerLibtype {
        match l {
            LibtypeArg::Ck => TunerLibtype::Ck,
            LibtypeArg::Cktile => TunerLibtype::Cktile,
            LibtypeArg::Both => TunerLibtype::Both,
            LibtypeArg::All => TunerLibtype::All,
        }
    }
}

impl AiterTunerArgs {
    /// The first of these options given (set away from its default), as its flag: a run of another backend
    /// refuses it rather than ignore it.
    pub fn given(&self) -> Option<&'static str> {
        let defaults = [
            (self.aiter_dir.is_some(), "--aiter-dir"),
            (self.libtype != LibtypeArg::Both, "--libtype"),
            (self.mp.is_some(), "--mp"),
            (self.err_ratio.to_bits() != 0.05f64.to_bits(), "--err-ratio"),
            (self.warmup.is_some(), "--warmup"),
            (self.iters.is_some(), "--iters"),
            (self.timeout.is_some(), "--timeout"),
            (!self.block_per_cu.is_empty(), "--block-per-cu"),
            (self.tuner_batch != 4, "--tuner-batch"),
            (!self.tuner_args.is_empty(), "--tuner-arg"),
        ];
        defaults.iter().find(|(set, _)| *set).map(|(_, flag)| *flag)
    }
}

/// Options of the AITER tuner (used with `--backend aiter`), passed through under the tuner's own names.
#[derive(Debug, Clone, clap::Args)]
pub struct AiterTunerArgs {
    /// AITER checkout the tuner runs in (it must hold csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py).
    #[arg(long)]
    pub aiter_dir: Option<PathBuf>,
    /// Kernel families the tuner measures (its --libtype).
    #[arg(long, value_enum, default_value = "both")]
    pub libtype: LibtypeArg,
    /// Tuner worker processes, one per GPU (its --mp); default: the tuner's (every visible GPU), or with
    /// --gpus the number of GPUs named.
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

impl AiterTunerArgs {
    /// The tuner these options describe, run by `python`; checks the AITER checkout and the option values.
    /// The watchdog is [`DEFAULT_SILENCE`] ([`Tuner::with_silence_limit`] changes it).
    pub fn tuner(&self, python: &Path, split_k: bool) -> Result<Tuner> {
        let a = self;
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
            libtype: a.libtype.into(),
            split_k,
            mp: a.mp,
            err_ratio: a.err_ratio,
            warmup: a.warmup,
            iters: a.iters,
            timeout: a.timeout,
            block_per_cu: a.block_per_cu.clone(),
            batch: a.tuner_batch,
            extra_args: a.tuner_args.clone(),
            silence_limit: DEFAULT_SILENCE,
            visible_devices: None,
        })
    }
}
