//! The argument groups the data commands flatten (`DataArgs`, `SampleArgs`, `LimitArgs`, `EndpointArgs`) and
//! the one conversion of `LimitArgs` into synthesis [`Limits`]: one set of checks, each job's own defaults
//! ([`LimitDefaults`]) filled in where an option is not given.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};

use synth_core::synthesize::{FeatureSet, Limits, Weighting};
use synth_core::tuned::AgreeWeight;
use synth_engine::engine::proposers::openai::{
    reported_context, OpenAiProposer, DEFAULT_CONTEXT_TOKENS, DEFAULT_MAX_TOKENS,
};
use synth_engine::engine::proposers::Checker;

use super::line::{enum_name, CommandLine};

/// The latency table and the model whose layers to keep.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DataArgs {
    /// Latency table: a gemm-synth measurement CSV, an AITER tuned/profile CSV, a directory of them, or the
    /// name of an embedded dataset (measurements/h200/*.csv); repeat for several (one matrix of the union of
    /// their shapes, one device; vendor reference rows kept apart) [default: measurements/h200/qwen3-32b-tp2.csv,
    /// embedded in the binary]
    #[arg(long)]
    pub dataset: Vec<PathBuf>,
    // The model whose GEMM layers to keep [default: --model qwen3-32b; `compare`: every shape of the dataset].
    #[command(flatten)]
    pub model: crate::app::model_args::ModelArgs,
    /// Tensor-parallel degree of the model's layers.
    #[arg(long, default_value_t = 2)]
    pub tp: u32,
    #[command(flatten)]
    pub backends: BackendArgs,
}

/// Which backends the target runtime can call (flattened into the data options of `run`, `compare` and
/// `search`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct BackendArgs {
    /// Backends the target runtime can call, comma-separated: ck (CK legacy instances), cktile, triton
    /// (the block-FP8 Triton config family), vendor (cuBLAS / hipBLASLt blockwise FP8). Rows of these
    /// libtypes are candidates (vendor rows stop being a reference only); rows of any other backend
    /// are an error, except vendor rows, which stay a reference. Adds each backend's oracle, its own rule
    /// (run) and the best one-threshold policy over the backends' defaults to the comparison
    /// [default: CK legacy only, vendor rows a reference]
    #[arg(long, value_name = "LIST", value_parser = parse_backends)]
    pub backends: Option<synth_core::catalog::Backends>,
}

fn parse_backends(text: &str) -> Result<synth_core::catalog::Backends, String> {
    synth_core::catalog::Backends::parse(text)
}

impl BackendArgs {
    /// Writes `--backends` to a "Regenerate with" line when given.
    pub fn write_line(&self, l: &mut CommandLine) {
        if let Some(b) = &self.backends {
            l.always("--backends", b);
        }
    }
}

/// The runtimes' own choices over the triton family, scored as policies (`compare`): the default config
/// and a directory of the runtime's shipped config files ([`super::export::runtime_policies`]).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RuntimeArgs {
    /// Also score the runtime's default Triton config on every shape, as `vllm-default` / `sglang-default`
    /// (vLLM: triton_bm64_bn128_bk128_g32_w4_s2; SGLang: the same with 3 stages); repeat it or give a comma
    /// list. Needs --backends naming triton.
    #[arg(long, value_name = "RUNTIME", value_enum, value_delimiter = ',')]
    pub runtime_default: Vec<synth_core::export::Runtime>,
    /// Also score a directory of the runtime's block-FP8 config files (e.g. the ones vLLM ships), as
    /// `vllm-tuned` / `sglang-tuned`: the file of the shape's (N, K) for --device-name, its nearest M key (ties
    /// to the key first in the file), the runtime's default config on a layer without a file. `vllm=DIR` or
    /// `sglang=DIR`, repeatable. Needs --backends naming triton, and --device-name.
    #[arg(long, value_name = "RUNTIME=DIR", value_parser = parse_runtime_dir)]
    pub runtime_tuned: Vec<(synth_core::export::Runtime, PathBuf)>,
    /// GPU name in the config files' names, as the runtime reports it (spaces become underscores, as
    /// `synth export` writes it), e.g. NVIDIA_H200; read with --runtime-tuned.
    #[arg(long)]
    pub device_name: Option<String>,
}

fn parse_runtime_dir(text: &str) -> Result<(synth_core::export::Runtime, PathBuf), String> {
    let (runtime, dir) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not RUNTIME=DIR (e.g. vllm=path/to/configs or sglang=path/to/configs)"))?;
    let runtime = match runtime.trim() {
        "vllm" => synth_core::export::Runtime::Vllm,
        "sglang" => synth_core::export::Runtime::Sglang,
        other => return Err(format!("{other:?} is not a runtime: expected vllm=DIR or sglang=DIR")),
    };
    if dir.is_empty() {
        return Err(format!("{text:?} names no directory after '='"));
    }
    Ok((runtime, PathBuf::from(dir)))
}

impl RuntimeArgs {
    /// Whether any runtime policy was asked for.
    pub fn is_empty(&self) -> bool {
        self.runtime_default.is_empty() && self.runtime_tuned.is_empty() && self.device_name.is_none()
    }
}

/// The training sample: M values stratified in log2 M over the dataset's M values, × every layer.
#[derive(Debug, Clone, clap::Args)]
pub struct SampleArgs {
    /// Number of M values in the training sample (stratified in log2 M over the dataset's M values).
    #[arg(long, default_value_t = 10)]
    pub sample_m: usize,
    /// Seed of the training sample (and of the agent loop).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl Default for SampleArgs {
    fn default() -> Self {
        SampleArgs { sample_m: 10, seed: 0 }
    }
}

impl SampleArgs {
    /// `--sample-m` and `--seed` as the line writes them (both defaults are the same for every job).
    pub fn write_line(&self, line: &mut CommandLine) {
        line.value("--sample-m", self.sample_m, 10);
        line.value("--seed", self.seed, 0);
    }
}

/// Limits of the rules a command synthesizes or accepts. An option left out takes the job's own default
/// ([`LimitDefaults`]; the help text names both where they differ).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LimitArgs {
    /// Most conditions on the way to a leaf [default: 6].
    #[arg(long)]
    pub max_depth: Option<usize>,
    /// Most leaves (return statements), at most 2001 (a rule holds at most 2000 branches in every form)
    /// [default: 8; the multi-model job of `synth run`: 16].
    #[arg(long)]
    pub max_leaves: Option<usize>,
    /// Most distinct instances the rule may return (each one is compiled into AITER) [default: no limit;
    /// the multi-model job of `synth run`: 8].
    #[arg(long)]
    pub max_instances: Option<usize>,
    /// Per-shape weight of the objective [default: uniform; the multi-model job of `synth run`: log].
    #[arg(long, value_enum)]
    pub weight: Option<Weighting>,
    /// Features the splits may test (and the agents are shown) [default: machine].
    #[arg(long, value_enum)]
    pub features: Option<FeatureSet>,
    /// Also grow each tree to this many leaves and keep its cheapest pruning back to --max-leaves when that
    /// beats the tree grown to --max-leaves (slower; a later split can make an earlier one pay).
    #[arg(long, value_name = "LEAVES")]
    pub prune_from: Option<usize>,
    /// Also search with a split-K leaf charged, on training shapes where its level is not measured, the time
    /// of the level its guard falls back to plus this margin (percent, 0-100); the cheaper rule on the
    /// training shapes is kept [default: off: such a cell is unusable in training].
    #[arg(long, value_name = "PERCENT")]
    pub split_k_fallback: Option<f64>,
}

/// A job's own limits where an option is not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitDefaults {
    pub max_depth: usize,
    pub max_leaves: usize,
    pub max_instances: Option<usize>,
    pub weight: Weighting,
    pub features: FeatureSet,
}

/// The defaults of every job that does not declare its own (single dataset, search, tuned tables).
pub const STANDARD_LIMITS: LimitDefaults = LimitDefaults {
    max_depth: 6,
    max_leaves: 8,
    max_instances: None,
    weight: Weighting::Uniform,
    features: FeatureSet::Machine,
};

/// The most leaves a rule may have: every rule form is read with at most
/// [`synth_core::rule::validate::MAX_BRANCHES`] branches, so a larger budget could only write a rule the tool
/// itself refuses to read (and the search would spend minutes and gigabytes on budgets no tree reaches).
pub const MAX_LEAVES: usize = synth_core::rule::validate::MAX_BRANCHES + 1;

/// The limits a job ran with: every option resolved against the job's defaults and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedLimits {
    pub max_depth: usize,
    pub max_leaves: usize,
    pub max_instances: Option<usize>,
    pub weight: Weighting,
    pub features: FeatureSet,
    pub prune_from: Option<usize>,
    /// `--split-k-fallback` in basis points (1/100 %).
    pub split_k_fallback_bp: Option<u32>,
    /// The defaults they were resolved against (the line leaves out what equals them).
    pub defaults: LimitDefaults,
}

/// The one check of a rule's size budgets, for every command that trains a rule (`compress`'s own options
/// included): none zero, and no leaf budget above [`MAX_LEAVES`].
pub fn check_budgets(max_leaves: usize, max_depth: usize, max_instances: Option<usize>) -> anyhow::Result<()> {
    if max_leaves == 0 || max_depth == 0 || max_instances == Some(0) {
        bail!("--max-leaves, --max-depth and --max-instances must be at least 1");
    }
    if max_leaves > MAX_LEAVES {
        bail!(
            "--max-leaves {max_leaves} is above {MAX_LEAVES}, the most leaves a rule can hold (every rule form is \
             read with at most {} branches); trees on real data stop far below that (the committed rule has 16)",
            MAX_LEAVES - 1
        );
    }
    Ok(())
}

/// `--split-k-fallback PERCENT` in basis points; an error unless it is a number from 0 to 100 with at most
/// two decimals.
pub fn fallback_bp(percent: f64) -> anyhow::Result<u32> {
    let bp = percent * 100.0;
    if !(percent.is_finite() && (0.0..=100.0).contains(&percent)) || (bp - bp.round()).abs() > 1e-6 {
        bail!(
            "--split-k-fallback {percent} is not a percentage from 0 to 100 with at most two decimals (e.g. 2 or 0.5)"
        );
    }
    Ok(bp.round() as u32)
}

/// `--prune-from` must name more leaves than the budget it prunes back to.
pub fn check_prune_from(prune_from: Option<usize>, max_leaves: usize) -> anyhow::Result<()> {
    match prune_from {
        Some(p) if p <= max_leaves => bail!(
            "--prune-from {p} is not above --max-leaves {max_leaves}: it grows each tree to that many leaves \
             and prunes back, so give a larger number (e.g. {}) or leave it out",
            3 * max_leaves
        ),
        Some(p) if p > MAX_LEAVES => bail!(
            "--prune-from {p} is above {MAX_LEAVES}, the most leaves a rule can hold (every rule form is read \
             with at most {} branches); give a smaller number",
            MAX_LEAVES - 1
        ),
        _ => Ok(()),
    }
}

impl LimitArgs {
    /// The limits with `defaults` where an option is not given; an error for a zero budget, a leaf budget
    /// above [`MAX_LEAVES`] or a `--prune-from` not above `--max-leaves`.
    pub fn resolve(&self, defaults: LimitDefaults) -> anyhow::Result<ResolvedLimits> {
        let r = ResolvedLimits {
            max_depth: self.max_depth.unwrap_or(defaults.max_depth),
            max_leaves: self.max_leaves.unwrap_or(defaults.max_leaves),
            max_instances: self.max_instances.or(defaults.max_instances),
            weight: self.weight.unwrap_or(defaults.weight),
            features: self.features.unwrap_or(defaults.features),
            prune_from: self.prune_from,
            split_k_fallback_bp: self.split_k_fallback.map(fallback_bp).transpose()?,
            defaults,
        };
        check_budgets(r.max_leaves, r.max_depth, r.max_instances)?;
        check_prune_from(r.prune_from, r.max_leaves)?;
        Ok(r)
    }

    /// [`LimitArgs::resolve`] against [`STANDARD_LIMITS`], as synthesis limits.
    pub fn limits(&self) -> anyhow::Result<Limits> {
        Ok(self.resolve(STANDARD_LIMITS)?.limits())
    }
}

impl ResolvedLimits {
    /// As synthesis limits, the rest at their defaults.
    pub fn limits(&self) -> Limits {
        Limits {
            max_depth: self.max_depth,
            max_leaves: self.max_leaves,
            max_instances: self.max_instances,
            features: self.features,
            log_ratio: self.weight.log_ratio(),
            prune_from: self.prune_from,
            split_k_fallback_bp: self.split_k_fallback_bp,
            ..Limits::default()
        }
    }

    /// Every limit that differs from the job's default, as the line writes it.
    pub fn write_line(&self, line: &mut CommandLine) {
        let d = &self.defaults;
        line.value("--max-depth", self.max_depth, d.max_depth);
        line.value("--max-leaves", self.max_leaves, d.max_leaves);
        if self.max_instances != d.max_instances {
            if let Some(k) = self.max_instances {
                line.always("--max-instances", k);
            }
        }
        line.value("--weight", enum_name(&self.weight), enum_name(&d.weight));
        line.value("--features", enum_name(&self.features), enum_name(&d.features));
        if let Some(p) = self.prune_from {
            line.always("--prune-from", p);
        }
        if let Some(bp) = self.split_k_fallback_bp {
            line.always("--split-k-fallback", format!("{}", f64::from(bp) / 100.0));
        }
    }
}

/// How hard a synthesis searches and what it may change: `--exact-depth`, `--no-refine`,
/// `--no-split-k-guards` (the same defaults for every job).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effort {
    pub exact_depth: Option<usize>,
    pub refine: bool,
    pub split_k_guards: bool,
}

impl Default for Effort {
    fn default() -> Self {
        Effort { exact_depth: None, refine: true, split_k_guards: true }
    }
}

impl Effort {
    /// From the flags as given.
    pub fn new(exact_depth: Option<usize>, no_refine: bool, no_split_k_guards: bool) -> Effort {
        Effort { exact_depth, refine: !no_refine, split_k_guards: !no_split_k_guards }
    }

    /// `limits` with this effort.
    pub fn apply(&self, limits: Limits) -> Limits {
        Limits {
            exact_depth: self.exact_depth,
            refine_thresholds: self.refine,
            split_k_guards: self.split_k_guards,
            ..limits
        }
    }

    /// The flags as the line writes them.
    pub fn write_line(&self, line: &mut CommandLine) {
        if let Some(d) = self.exact_depth {
            line.always("--exact-depth", d);
        }
        line.flag("--no-refine", !self.refine).flag("--no-split-k-guards", !self.split_k_guards);
    }
}

/// An OpenAI-compatible chat endpoint (for `--agent openai`).
#[derive(Debug, Clone, clap::Args)]
pub struct EndpointArgs {
    /// Base URL of the OpenAI-compatible API (for `--agent openai`), e.g. https://api.openai.com/v1.
    #[arg(long)]
    pub base_url: Option<String>,
    /// Chat model name (for `--agent openai`).
    #[arg(long)]
    pub chat_model: Option<String>,
    /// Environment variable holding the API key (for `--agent openai`).
    #[arg(long, default_value = "OPENAI_API_KEY")]
    pub api_key_env: String,
    /// Sampling temperature sent to the chat model.
    #[arg(long)]
    pub temperature: Option<f64>,
    /// The chat model's context window in tokens: prompts are cut to fit it with room for the reply (keeping
    /// the task, its catalog and features first, then the best and latest candidates, then as many table
    /// rows as fit) [default: what the server's /models reports, else 8192].
    #[arg(long, value_name = "TOKENS")]
    pub context_tokens: Option<usize>,
    /// Tokens the chat model may write per answer (the request's max_tokens; kept free in the context).
    #[arg(long, value_name = "TOKENS", default_value_t = DEFAULT_MAX_TOKENS)]
    pub max_tokens: usize,
}

impl EndpointArgs {
    /// The proposer of `--agent openai`.
    pub fn openai(&self, timeout: Duration, checker: Checker) -> anyhow::Result<OpenAiProposer> {
        let base =
            self.base_url.as_deref().context("--agent openai needs --base-url URL (e.g. https://api.openai.com/v1)")?;
        let model = self.chat_model.as_deref().context("--agent openai needs --chat-model NAME")?;
        if self.max_tokens == 0 {
            bail!("--max-tokens must be at least 1");
        }
        let mut p = OpenAiProposer::new(base, model, &self.api_key_env, timeout, checker);
        if let Some(t) = self.temperature.filter(|t| !(t.is_finite() && *t >= 0.0)) {
            bail!("--temperature {t}: a sampling temperature is a finite number, 0 or more (e.g. 0.7)");
        }
        p.temperature = self.temperature;
        p.max_tokens = self.max_tokens;
        p.context_tokens = match self.context_tokens {
            Some(n) => n,
            None => {
                // One short question to the server; a server without the answer gets the documented default.
                let ask = timeout.min(Duration::from_secs(30));
                match reported_context(&p.base_url, model, &self.api_key_env, ask) {
                    Ok(Some(n)) => {
                        errln!("context:  {n} tokens, as {}/models reports for {model}", p.base_url);
                        n
                    }
                    Ok(None) => {
                        errln!(
                            "context:  {DEFAULT_CONTEXT_TOKENS} tokens assumed ({}/models does not say; --context-tokens sets it)",
                            p.base_url
                        );
                        DEFAULT_CONTEXT_TOKENS
                    }
                    Err(e) => {
                        errln!("context:  {DEFAULT_CONTEXT_TOKENS} tokens assumed ({e}; --context-tokens sets it)");
                        DEFAULT_CONTEXT_TOKENS
                    }
                }
            }
        };
        if p.context_tokens <= p.max_tokens {
            bail!(
                "--max-tokens {} leaves no room for a prompt in a context of {} tokens; lower --max-tokens or raise \
                 --context-tokens",
                p.max_tokens,
                p.context_tokens
            );
        }
        Ok(p)
    }

    /// The endpoint options as the line writes them.
    pub fn write_line(&self, line: &mut CommandLine) {
        if let Some(u) = &self.base_url {
            line.always("--base-url", u);
        }
        if let Some(m) = &self.chat_model {
            line.always("--chat-model", m);
        }
        line.value("--api-key-env", self.api_key_env.as_str(), "OPENAI_API_KEY");
        if let Some(t) = self.temperature {
            line.always("--temperature", t);
        }
        if let Some(c) = self.context_tokens {
            line.always("--context-tokens", c);
        }
        line.value("--max-tokens", self.max_tokens, DEFAULT_MAX_TOKENS);
    }
}

/// `--agent-timeout` as a duration; an error unless it is a positive number of seconds.
pub fn agent_timeout(seconds: f64) -> anyhow::Result<Duration> {
    if !(seconds.is_finite() && seconds > 0.0) {
        bail!("--agent-timeout must be a positive number of seconds, got {seconds}");
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// The arguments of `synth run` (every job's; each job reads its own and refuses the rest).
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub sample: SampleArgs,
    /// Train on every shape (the comparison is then in-sample).
    #[arg(long)]
    pub train_all: bool,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Depth of the exact search phase, 1 to 3 (default: from the number of training rows; each level
    /// deeper multiplies the search's time by the number of candidate splits).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=3))]
    pub exact_depth: Option<usize>,
    /// Keep the search's thresholds (halfway between training values of the first feature in preference
    /// order) instead of refining them against a nearest-M reading of the training data.
    #[arg(long)]
    pub no_refine: bool,
    /// Do not guard split-K leaves with the bench's measurement condition (a rule may then pick unmeasured
    /// split-K cells on new shapes).
    #[arg(long)]
    pub no_split_k_guards: bool,
    /// Output directory [default: generated/ of the checkout you are in for the main job with its default
    /// inputs; else ./gemm-synth-out/run].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Check that the files in the output directory are up to date instead of writing them (for CI).
    #[arg(long)]
    pub check: bool,
    /// Also print the leaves-versus-quality curve (it is always written to leaves_curve.csv).
    #[arg(long)]
    pub curve: bool,
    /// AITER tuned CSV to score as another offline-tuned policy (rows of the dataset's device).
    #[arg(long)]
    pub tuned: Option<PathBuf>,
    /// Apply the --tuned rows whatever device they were tuned on (AITER would ignore them).
    #[arg(long)]
    pub tuned_any_device: bool,
    /// More rule files (C++, Rust or JSON) to score.
    #[arg(long)]
    pub rule: Vec<PathBuf>,
    #[command(flatten)]
    pub tuned_train: TunedTrainArgs,
    /// Leave out the multi-model job's evaluation (c), leave-one-model-out (one more rule per configuration);
    /// the main job's CK rule is written so, and its line says so.
    #[arg(long)]
    pub no_folds: bool,
    /// Dataset manifest of the multi-model job, run when neither --dataset, --model nor --spec is given
    /// (which journals make up which (model, TP) configuration, off-grid M, training pool)
    /// [default: measurements/h200/datasets.toml of the crate].
    #[arg(long)]
    pub manifest: Option<PathBuf>,
}

/// Training on tuned tables (flattened into `synth run` and `synth search`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TunedTrainArgs {
    /// AITER tuned CSVs to train on instead of a latency table (repeat for several): classification
    /// against each row's tuned (kernel, splitK). Needs --out.
    #[arg(long = "train-tuned")]
    pub train_tuned: Vec<PathBuf>,
    /// Device whose rows of the --train-tuned tables are used (GFX:CU).
    #[arg(long, default_value = DEFAULT_DEVICE)]
    pub train_device: String,
    /// Agreement objective of the written rule: every row once, each row by its tuned time, or every M band
    /// weighing the same (band).
    #[arg(long, value_enum, default_value_t = AgreeWeight::Uniform)]
    pub agree_weight: AgreeWeight,
}

impl TunedTrainArgs {
    /// The tables and their options as the line writes them.
    pub fn write_line(&self, line: &mut CommandLine) {
        line.paths("--train-tuned", &self.train_tuned);
        line.value("--train-device", self.train_device.as_str(), DEFAULT_DEVICE);
        line.value("--agree-weight", enum_name(&self.agree_weight), enum_name(&AgreeWeight::Uniform));
    }
}

/// `--train-device` when not given.
pub const DEFAULT_DEVICE: &str = "gfx942:304";

/// The layers a command writes or measures: a model (`--model`, `--spec`, `--hf-config`) at `--tp`, or
/// `--shapes` (`export`, `configs`, `tune`).
#[derive(Debug, Clone, clap::Args)]
pub struct LayerArgs {
    // The model whose layers are used (with --tp).
    #[command(flatten)]
    pub model: crate::app::model_args::ModelArgs,
    /// Tensor-parallel degree of the model's layers.
    #[arg(long)]
    pub tp: Option<u32>,
    /// Layers as N:K pairs, comma-separated (instead of a model and --tp).
    #[arg(long, conflicts_with = "model_source")]
    pub shapes: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_set_of_checks_and_the_jobs_defaults() {
        let given = |f: fn(&mut LimitArgs)| {
            let mut a = LimitArgs::default();
            f(&mut a);
            a
        };
        for bad in
            [given(|a| a.max_depth = Some(0)), given(|a| a.max_leaves = Some(0)), given(|a| a.max_instances = Some(0))]
        {
            let e = bad.resolve(STANDARD_LIMITS).unwrap_err().to_string();
            assert!(e.contains("at least 1"), "{e}");
        }
        let e = given(|a| a.max_leaves = Some(1_000_000)).resolve(STANDARD_LIMITS).unwrap_err().to_string();
        assert!(e.contains("--max-leaves 1000000 is above 2001"), "{e}");
        assert!(given(|a| a.max_leaves = Some(MAX_LEAVES)).resolve(STANDARD_LIMITS).is_ok());
        let e = given(|a| a.prune_from = Some(8)).resolve(STANDARD_LIMITS).unwrap_err().to_string();
        assert!(e.contains("--prune-from 8 is not above --max-leaves 8"), "{e}");
        let multi = LimitDefaults { max_leaves: 16, max_instances: Some(8), weight: Weighting::Log, ..STANDARD_LIMITS };
        let r = LimitArgs::default().resolve(multi).unwrap();
        assert_eq!((r.max_leaves, r.max_instances, r.weight), (16, Some(8), Weighting::Log));
        let mut line = CommandLine::new("run");
        r.write_line(&mut line);
        assert_eq!(line.text(), "cargo run --release -- run", "the job's own defaults are left out");
        // Equal to clap's old default, but not to the job's: written.
        let r = given(|a| {
            a.max_leaves = Some(8);
            a.weight = Some(Weighting::Uniform)
        })
        .resolve(multi)
        .unwrap();
        let mut line = CommandLine::new("run");
        r.write_line(&mut line);
        assert_eq!(line.text(), "cargo run --release -- run --max-leaves 8 --weight uniform");
    }
}
