//! The options of `synth bench --backend aiter` (and `drift --remeasure --backend aiter`): the backend
//! choice and AITER tuner options passed through under the tuner's own names.

use std::path::PathBuf;

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
    pub(crate) fn as_arg(self) -> &'static str {
        match self {
            TunerLibtype::Ck => "ck",
            TunerLibtype::Cktile => "cktile",
            TunerLibtype::Both => "both",
            TunerLibtype::All => "all",
        }
    }
}

impl AiterArgs {
    /// The first of these options given (set away from its default), as its flag: a run of another backend
    /// refuses it rather than ignore it.
    pub fn given(&self) -> Option<&'static str> {
        let defaults = [
            (self.aiter_dir.is_some(), "--aiter-dir"),
            (self.libtype != TunerLibtype::Both, "--libtype"),
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
pub struct AiterArgs {
    /// AITER checkout the tuner runs in (it must hold csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py).
    #[arg(long)]
    pub aiter_dir: Option<PathBuf>,
    /// Kernel families the tuner measures (its --libtype).
    #[arg(long, value_enum, default_value = "both")]
    pub libtype: TunerLibtype,
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
