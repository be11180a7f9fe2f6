//! What the data commands (`run`, `compare`, `search`, `drift`) start from: one set of flattened arguments
//! (dataset, model and TP, training sample, synthesis limits, chat endpoint), the [`Session`] they open
//! (catalog, latency matrix, the model's shapes and layer names), the standard policy set, provenance
//! text and the "Regenerate with" line derived from the parsed command line.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::catalog::Catalog;
use crate::compare::report::LayerNames;
use crate::compare::{Policy, Report, TunedTable};
use crate::engine::proposers::openai::OpenAiProposer;
use crate::engine::proposers::Checker;
use crate::rule::Rule;
use crate::shapes::{sample_m, Layer, ModelSpec};
use crate::synthesize::{FeatureSet, Limits, Weighting};
use crate::table::multi::VendorTimes;
use crate::table::LatencyMatrix;

/// Dataset used when `--dataset` is not given: its path in the repository and its name among the
/// embedded files ([`super::data::EMBEDDED`]).
pub const DEFAULT_DATASET: &str = "measurements/h200/qwen3-32b-tp2.csv";
/// Built-in model used when neither `--model` nor `--spec` is given (except by `compare`, which then
/// scores every shape).
pub const DEFAULT_MODEL: &str = "qwen3-32b";
/// The published rule (GEAK-HIP write-up), scored next to the synthesized one.
pub const PUBLISHED_RULE: &str = include_str!("../../tests/data/rules/geak_blog_rule.cpp");
/// Name under which the published rule is reported.
pub const PUBLISHED_RULE_NAME: &str = "published-rule";

/// The latency table and the model whose layers to keep.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DataArgs {
    /// Latency table: a gemm-synth measurement CSV, an AITER tuned/profile CSV, a directory of them, or the
    /// name of an embedded dataset (measurements/h200/*.csv); repeat for several (one matrix of the union of
    /// their shapes, one device; vendor reference rows kept apart) [default: measurements/h200/qwen3-32b-tp2.csv,
    /// embedded in the binary]
    #[arg(long)]
    pub dataset: Vec<PathBuf>,
    /// Built-in model whose GEMM layers to keep (qwen3-32b, llama-3.1-8b, llama-3.1-70b, qwen2.5-72b, ...)
    /// [default: qwen3-32b; `compare`: every shape of the dataset]
    #[arg(long, conflicts_with = "spec")]
    pub model: Option<String>,
    /// Model spec TOML file instead of a built-in model.
    #[arg(long)]
    pub spec: Option<PathBuf>,
    /// Tensor-parallel degree of the model's layers.
    #[arg(long, default_value_t = 2)]
    pub tp: u32,
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

/// Limits of the rules a command synthesizes or accepts.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitArgs {
    /// Most conditions on the way to a leaf.
    #[arg(long, default_value_t = 6)]
    pub max_depth: usize,
    /// Most leaves (return statements).
    #[arg(long, default_value_t = 8)]
    pub max_leaves: usize,
    /// Most distinct instances the rule may return (each one is compiled into AITER).
    #[arg(long)]
    pub max_instances: Option<usize>,
    /// Per-shape weight of the objective.
    #[arg(long, value_enum, default_value_t = Weighting::Uniform)]
    pub weight: Weighting,
    /// Features the splits may test (and the agents are shown).
    #[arg(long, value_enum, default_value_t = FeatureSet::Machine)]
    pub features: FeatureSet,
    /// Also grow each tree to this many leaves and keep its cheapest pruning back to --max-leaves when that
    /// beats the tree grown to --max-leaves (slower; a later split can make an earlier one pay).
    #[arg(long, value_name = "LEAVES")]
    pub prune_from: Option<usize>,
}

/// `--prune-from` must name more leaves than the budget it prunes back to.
pub fn check_prune_from(prune_from: Option<usize>, max_leaves: usize) -> anyhow::Result<()> {
    match prune_from {
        Some(p) if p <= max_leaves => bail!(
            "--prune-from {p} is not above --max-leaves {max_leaves}: it grows each tree to that many leaves \
             and prunes back to --max-leaves; pass a larger value (e.g. {}) or leave it out",
            3 * max_leaves
        ),
        _ => Ok(()),
    }
}

impl LimitArgs {
    /// The limits, the rest at their defaults; an error for a zero budget.
    pub fn limits(&self) -> anyhow::Result<Limits> {
        if self.max_leaves == 0 || self.max_depth == 0 || self.max_instances == Some(0) {
            bail!("--max-leaves, --max-depth and --max-instances must be at least 1");
        }
        check_prune_from(self.prune_from, self.max_leaves)?;
        Ok(Limits {
            max_depth: self.max_depth,
            max_leaves: self.max_leaves,
            max_instances: self.max_instances,
            features: self.features,
            log_ratio: self.weight.log_ratio(),
            prune_from: self.prune_from,
            ..Limits::default()
        })
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
}

impl EndpointArgs {
    /// The proposer of `--agent openai`.
    pub fn openai(&self, timeout: Duration, checker: Checker) -> anyhow::Result<OpenAiProposer> {
        let base =
            self.base_url.as_deref().context("--agent openai needs --base-url URL (e.g. https://api.openai.com/v1)")?;
        let model = self.chat_model.as_deref().context("--agent openai needs --chat-model NAME")?;
        let mut p = OpenAiProposer::new(base, model, &self.api_key_env, timeout, checker);
        p.temperature = self.temperature;
        Ok(p)
    }
}

/// `--agent-timeout` as a duration; an error unless it is a positive number of seconds.
pub fn agent_timeout(seconds: f64) -> anyhow::Result<Duration> {
    if !(seconds.is_finite() && seconds > 0.0) {
        bail!("--agent-timeout must be a positive number of seconds, got {seconds}");
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Which shapes a session keeps when neither `--model` nor `--spec` is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The layers of [`DEFAULT_MODEL`].
    DefaultModel,
    /// Every shape of the dataset.
    EveryShape,
}

/// The training sample drawn from a session's shapes.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Training shapes (matrix indices).
    pub train: Vec<usize>,
    /// Held-out shapes.
    pub heldout: Vec<usize>,
    /// Sampled M values (empty when training on every shape).
    pub picked: Vec<u32>,
}

/// A loaded dataset restricted to a model's layers.
#[derive(Debug, Clone)]
pub struct Session {
    pub catalog: Catalog,
    /// The dataset's name (see [`super::data::Dataset::name`]).
    pub dataset: PathBuf,
    /// Where the dataset came from.
    pub source: super::data::Dataset,
    pub matrix: LatencyMatrix,
    /// The model's layers (empty when every shape is kept).
    pub layers: Vec<Layer>,
    /// `qwen3-32b TP=2`, or `every layer`.
    pub what: String,
    /// Layer names by (N, K).
    pub names: LayerNames,
    /// The kept shapes (matrix indices).
    pub shapes: Vec<usize>,
    /// Vendor reference times of the dataset files (`libtype` vendor rows; never candidates).
    pub vendor: VendorTimes,
}

impl Session {
    /// Loads the dataset and keeps the shapes of the chosen model's layers.
    pub fn open(data: &DataArgs, scope: Scope) -> anyhow::Result<Session> {
        let catalog = Catalog::embedded();
        let (source, matrix, vendor) = match data.dataset.as_slice() {
            [] => {
                let source = super::data::Dataset::resolve(None)?;
                let matrix = source.load(&catalog)?;
                (source, matrix, VendorTimes::new())
            }
            [one] if !one.is_dir() => {
                let source = super::data::Dataset::resolve(Some(one))?;
                let matrix = source.load(&catalog)?;
                (source, matrix, VendorTimes::new())
            }
            many => {
                let files = crate::table::multi::expand_paths(many).map_err(|e| anyhow::anyhow!("{e}"))?;
                if let Some(absent) = files.iter().find(|f| !f.exists()) {
                    bail!(
                        "dataset {} does not exist; measure it with `synth bench` or pass --dataset FILE",
                        absent.display()
                    );
                }
                let (matrix, vendor) =
                    crate::table::multi::load_many(&files, &catalog).map_err(|e| anyhow::anyhow!("{e}"))?;
                let joined = files.iter().map(|f| display_path(f)).collect::<Vec<_>>().join(" + ");
                (super::data::Dataset::File(PathBuf::from(joined)), matrix, vendor)
            }
        };
        let dataset = PathBuf::from(source.name());
        let model = match (&data.model, &data.spec, scope) {
            (None, None, Scope::EveryShape) => None,
            (m, _, _) => Some(m.as_deref().unwrap_or(DEFAULT_MODEL)),
        };
        let Some(model) = model else {
            let shapes = (0..matrix.shapes.len()).collect();
            return Ok(Session {
                catalog,
                dataset,
                source,
                matrix,
                layers: Vec::new(),
                what: "every layer".to_string(),
                vendor,
                names: LayerNames::new(),
                shapes,
            });
        };
        let (name, layers) = model_layers(model, data.spec.as_deref(), data.tp)?;
        let what = format!("{name} TP={}", data.tp);
        let shapes = shapes_of_layers(&matrix, &layers, &what).map_err(|_| {
            let model = match &data.spec {
                Some(spec) => format!("--spec {}", spec.display()),
                None => format!("--model {model}"),
            };
            anyhow::anyhow!(
                "{} holds no shape of {what}; pass the --model/--tp it was measured for, or measure it on a GPU with \
                 `synth bench {model} --tp {tp} --out X.csv`, then `synth run --dataset X.csv {model} --tp {tp}`",
                source.name(),
                tp = data.tp
            )
        })?;
        Ok(Session { catalog, dataset, source, matrix, names: layer_names(&layers), layers, what, shapes, vendor })
    }

    /// The training sample of `args` over the session's shapes.
    pub fn sample(&self, args: &SampleArgs) -> Sample {
        let (train, heldout, picked) = training_sample(&self.matrix, &self.shapes, args.sample_m, args.seed);
        Sample { train, heldout, picked }
    }

    /// Every shape as the training set (scores are then in-sample).
    pub fn every_shape(&self) -> Sample {
        Sample { train: self.shapes.clone(), heldout: self.shapes.clone(), picked: Vec::new() }
    }

    /// The dataset for provenance: name, device, size.
    pub fn dataset_text(&self) -> String {
        let m = &self.matrix;
        format!(
            "{} ({}, {} CUs{}; {} shapes × {} candidates)",
            self.source.name(),
            m.gfx,
            m.cu_num,
            m.device.as_deref().map(|d| format!(", {d}")).unwrap_or_default(),
            m.shapes.len(),
            m.candidates.len()
        )
    }

    /// The standard policy set: the default, the offline-tuned table and nearest-M lookup built from the
    /// training shapes, `extra` (more tuned tables, rule files), the published rule, the `candidate`
    /// rule under its name, and the oracle.
    pub fn standard_policies(
        &self,
        train: &[usize],
        extra: Vec<Policy>,
        candidate: (&str, &Rule),
    ) -> anyhow::Result<Vec<Policy>> {
        let tuned = TunedTable::from_matrix(&self.matrix, train, &format!("best of {} training shapes", train.len()));
        let mut policies = vec![
            Policy::Default,
            Policy::Tuned { name: "tuned".into(), table: tuned.clone() },
            Policy::NearestM { name: "nearest-M".into(), table: tuned },
        ];
        let (rules, others): (Vec<Policy>, Vec<Policy>) =
            extra.into_iter().partition(|p| matches!(p, Policy::Rule { .. }));
        policies.extend(others);
        policies.push(self.published_policy()?);
        policies.extend(rules);
        policies.push(Policy::Rule { name: candidate.0.to_string(), rule: candidate.1.clone() });
        policies.push(Policy::Oracle);
        Ok(policies)
    }

    /// The published rule as a policy.
    pub fn published_policy(&self) -> anyhow::Result<Policy> {
        Ok(Policy::Rule { name: PUBLISHED_RULE_NAME.into(), rule: published_rule(&self.catalog)? })
    }

    /// Rule files as policies, each named after its path.
    pub fn rule_policies(&self, paths: &[PathBuf]) -> anyhow::Result<Vec<Policy>> {
        paths
            .iter()
            .map(|path| {
                let rule = crate::rule::load_checked(path, &self.catalog)?;
                Ok(Policy::Rule { name: display_path(path), rule })
            })
            .collect()
    }

    /// An AITER tuned CSV as a tuned table of the dataset's device, named `tuned:<path>`.
    pub fn tuned_file(&self, path: &Path, any_device: bool) -> anyhow::Result<(String, TunedTable)> {
        Ok((format!("tuned:{}", display_path(path)), load_tuned(path, &self.catalog, &self.matrix, any_device)?))
    }
}

/// The figure line of a policy's summary in a report (for the generated files' provenance).
pub fn summary_figure(scope: &str, report: &Report, policy: &str) -> anyhow::Result<String> {
    let p = report.policy_index(policy).with_context(|| format!("policy {policy} was not scored"))?;
    let s = &report.policies[p].summary;
    Ok(format!(
        "{scope} ({} shapes): {:.3}x default (geomean), {:.3}x default (total time), {:.3}x tuned (geomean), {:.3}x tuned (total time), {:.3} of oracle",
        report.shapes.len(),
        s.geomean_vs_default,
        s.total_vs_default,
        s.geomean_vs_tuned.unwrap_or(f64::NAN),
        s.total_vs_tuned.unwrap_or(f64::NAN),
        s.of_oracle
    ))
}

pub use crate::paths::{crate_root, display_path};

/// Loads a latency table from a file or an embedded dataset name ([`super::data::Dataset::resolve`]),
/// naming the file on error.
pub fn load_matrix(path: &Path, catalog: &Catalog) -> anyhow::Result<LatencyMatrix> {
    super::data::Dataset::resolve(Some(path))?.load(catalog)
}

/// A model's layers at a TP, from a built-in name or a spec file.
pub fn model_layers(model: &str, spec: Option<&Path>, tp: u32) -> anyhow::Result<(String, Vec<Layer>)> {
    let spec = match spec {
        Some(p) => ModelSpec::load(p)?,
        None => ModelSpec::builtin(model).context("--model names the GEMM model whose layers to keep")?,
    };
    let layers = spec.layers(tp)?;
    Ok((spec.name, layers))
}

/// Layer names by (N, K) (layers sharing a weight shape are joined with `/`).
pub fn layer_names(layers: &[Layer]) -> LayerNames {
    let mut out: LayerNames = BTreeMap::new();
    for l in layers {
        out.entry((l.n, l.k))
            .and_modify(|s: &mut String| *s = format!("{s}/{}", l.name))
            .or_insert_with(|| l.name.clone());
    }
    out
}

/// Indices of the matrix shapes that belong to `layers`; an error when there are none.
pub fn shapes_of_layers(matrix: &LatencyMatrix, layers: &[Layer], what: &str) -> anyhow::Result<Vec<usize>> {
    let idx: Vec<usize> = (0..matrix.shapes.len())
        .filter(|&s| layers.iter().any(|l| l.n == matrix.shapes[s].n && l.k == matrix.shapes[s].k))
        .collect();
    if idx.is_empty() {
        let want: Vec<String> = layers.iter().map(|l| format!("{} (N={}, K={})", l.name, l.n, l.k)).collect();
        let have: Vec<String> = matrix.layers().iter().map(|(n, k)| format!("N={n}, K={k}")).collect();
        bail!(
            "the dataset has no shape of {what}'s layers {}; its layers are {}; pick the matching --model/--tp",
            want.join(", "),
            have.join("; ")
        );
    }
    Ok(idx)
}

/// The training sample: `count` M values drawn by [`sample_m`] from the M values of `shapes`, with every
/// shape of those M values. Returns (training shapes, held-out shapes, sampled M values).
pub fn training_sample(
    matrix: &LatencyMatrix,
    shapes: &[usize],
    count: usize,
    seed: u64,
) -> (Vec<usize>, Vec<usize>, Vec<u32>) {
    let ms: Vec<u32> = shapes.iter().map(|&s| matrix.shapes[s].m).collect::<BTreeSet<_>>().into_iter().collect();
    let picked = sample_m(&ms, count, seed);
    let (train, held): (Vec<usize>, Vec<usize>) = shapes.iter().partition(|&&s| picked.contains(&matrix.shapes[s].m));
    (train, held, picked)
}

/// The published rule, parsed.
pub fn published_rule(catalog: &Catalog) -> anyhow::Result<Rule> {
    crate::rule::parse_any(PUBLISHED_RULE, catalog).map_err(|e| anyhow::anyhow!("published rule: {e}"))
}

/// Loads an AITER tuned CSV as a tuned table of the matrix's device.
pub fn load_tuned(
    path: &Path,
    catalog: &Catalog,
    matrix: &LatencyMatrix,
    any_device: bool,
) -> anyhow::Result<TunedTable> {
    let rows = crate::table::read_aiter_csv(path, catalog).map_err(|e| anyhow::anyhow!("{e}"))?;
    let source = display_path(path);
    let device = (!any_device).then_some((matrix.gfx.as_str(), matrix.cu_num));
    let (t, other, replaced) = TunedTable::from_rows(&rows, catalog, device, &source);
    if replaced > 0 {
        bail!(
            "{}: {replaced} rows repeat a shape: this is a profile file (every candidate per shape), not a tuned table \
             (one row per shape); score it as a latency table with --dataset {}",
            path.display(),
            path.display()
        );
    }
    if t.is_empty() {
        let devices: BTreeSet<String> = rows.iter().map(|r| format!("{}/{} CUs", r.gfx, r.cu_num)).collect();
        bail!(
            "{}: no row for the dataset's device {}/{} CUs ({other} rows are for {}); AITER would use the default \
             everywhere — pass --tuned-any-device to apply them anyway",
            path.display(),
            matrix.gfx,
            matrix.cu_num,
            devices.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    Ok(t)
}

/// Writes `text` to stdout; a closed pipe (`synth run | head`) is not an error.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(anyhow::anyhow!("cannot write to stdout: {e}")),
        _ => Ok(()),
    }
}
