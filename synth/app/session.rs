//! What the data commands (`run`, `compare`, `search`, `drift`) start from on a single dataset: the
//! [`Session`] they open (catalog, latency matrix, the model's shapes and layer names), the standard policy
//! set and provenance text. The argument groups live in [`super::args`] (re-exported here).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use synth_core::catalog::Catalog;
use synth_core::compare::report::LayerNames;
use synth_core::compare::{Policy, Report, TunedTable};
use synth_core::rule::Rule;
use synth_core::shapes::{sample_m, Layer, ModelSpec, ShapeError};
use synth_core::table::multi::VendorTimes;
use synth_core::table::LatencyMatrix;

use super::data::Dataset;
use super::line::canonical_path;

use super::args::{DataArgs, SampleArgs};
use super::shared::{published_rule, PUBLISHED_RULE_NAME};

/// Dataset used when `--dataset` is not given: its path in the repository and its name among the
/// embedded files ([`super::data::EMBEDDED`]).
pub const DEFAULT_DATASET: &str = super::data::DEFAULT_DATASET;
/// Built-in model used when neither `--model` nor `--spec` is given (except by `compare`, which then
/// scores every shape).
pub const DEFAULT_MODEL: &str = "qwen3-32b";

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
    /// The dataset's name (see [`Dataset::name`]).
    pub dataset: PathBuf,
    /// Where the dataset came from.
    pub source: Dataset,
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
    /// The `--dataset` values as the "Regenerate with" line writes them ([`dataset_names`]).
    pub dataset_args: Vec<String>,
    /// `--backends`: which rows are candidates (`None`: CK legacy, vendor rows a reference).
    pub backends: Option<synth_core::catalog::Backends>,
}

impl Session {
    /// Loads the dataset and keeps the shapes of the chosen model's layers.
    pub fn open(data: &DataArgs, scope: Scope) -> anyhow::Result<Session> {
        let catalog = Catalog::embedded();
        let backends = data.backends.backends.clone();
        let (source, matrix, vendor) = load_datasets(&data.dataset, &catalog, backends.as_ref())?;
        let dataset_args = dataset_names(&data.dataset);
        let dataset = PathBuf::from(source.name());
        let loaded = match scope {
            Scope::EveryShape => data.model.load(),
            Scope::DefaultModel => data.model.load_or(DEFAULT_MODEL).map(Some),
        };
        let Some(spec) = loaded.map_err(|e| match e {
            ShapeError::UnknownModel { .. } => {
                anyhow::Error::new(e).context("--model names the GEMM model whose layers to keep")
            }
            other => other.into(),
        })?
        else {
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
                dataset_args,
                backends,
            });
        };
        let layers = spec.layers(data.tp)?;
        let what = format!("{} TP={}", spec.name, data.tp);
        let shapes = shapes_of_layers(&matrix, &layers, &what).map_err(|_| {
            let model = data.model.option_text(DEFAULT_MODEL);
            anyhow::anyhow!(
                "{} holds no shape of {what}; pass the --model/--tp it was measured for, or measure it on a GPU with \
                 `synth bench {model} --tp {tp} --out X.csv`, then `synth run --dataset X.csv {model} --tp {tp}`",
                source.origin(),
                tp = data.tp
            )
        })?;
        let names = layer_names(&layers);
        Ok(Session { catalog, dataset, source, matrix, names, layers, what, shapes, vendor, dataset_args, backends })
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
    /// training shapes, `extra` (more tuned tables, rule files), the published rule (on data with CK
    /// rows: it returns CK instances), the `candidate` rule under its name, and the oracle.
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
        if self.matrix.candidates.iter().any(|c| c.backend == synth_core::catalog::Libtype::Ck) {
            // The published rule returns CK instances: on data without CK rows every pick would be unmeasured.
            policies.push(self.published_policy()?);
        }
        policies.extend(rules);
        policies.push(Policy::Rule { name: candidate.0.to_string(), rule: candidate.1.clone() });
        policies.push(Policy::Oracle);
        Ok(policies)
    }

    /// With `--backends`: an error naming the first backend of which the session's shapes hold no usable
    /// row, and the data ([`synth_core::compare::backends::check_rows`], the multi-model job's check too).
    pub fn check_backend_rows(&self) -> anyhow::Result<()> {
        let Some(backends) = &self.backends else { return Ok(()) };
        let data = format!("{} ({})", self.source.origin(), self.what);
        synth_core::compare::backends::check_rows(
            &self.matrix,
            backends,
            &self.shapes,
            &data,
            "give the journal that measures it as another --dataset (repeatable), or leave it out of --backends",
        )
        .map_err(anyhow::Error::msg)
    }

    /// With `--backends`: each backend's oracle and the best threshold policy fitted on `train`, with a
    /// line saying what the threshold is; nothing without `--backends`.
    pub fn backend_policies(&self, train: &[usize]) -> (Vec<Policy>, Vec<String>) {
        match &self.backends {
            Some(backends) => backend_policies(&self.matrix, &self.catalog, backends, train),
            None => (Vec::new(), Vec::new()),
        }
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
                let rule = synth_core::rule::load_checked(path, &self.catalog)?;
                note_uncallable(path, &rule, self.backends.as_ref(), &self.matrix);
                Ok(Policy::Rule { name: canonical_path(path), rule })
            })
            .collect()
    }

    /// An AITER tuned CSV as a tuned table of the dataset's device, named `tuned:<path>`.
    pub fn tuned_file(&self, path: &Path, any_device: bool) -> anyhow::Result<(String, TunedTable)> {
        Ok((format!("tuned:{}", canonical_path(path)), load_tuned(path, &self.catalog, &self.matrix, any_device)?))
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

/// Loads a latency table from a file or an embedded dataset name ([`Dataset::resolve`]),
/// naming the file on error.
pub fn load_matrix(path: &Path, catalog: &Catalog) -> anyhow::Result<LatencyMatrix> {
    Dataset::resolve(Some(path))?.load(catalog)
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

/// Loads an AITER tuned CSV as a tuned table of the matrix's device.
pub fn load_tuned(
    path: &Path,
    catalog: &Catalog,
    matrix: &LatencyMatrix,
    any_device: bool,
) -> anyhow::Result<TunedTable> {
    let rows = synth_core::table::read_aiter_csv(path, catalog).map_err(|e| anyhow::anyhow!("{e}"))?;
    let source = canonical_path(path);
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

/// Each backend's oracle and the best threshold policy over `backends` fitted on `train`, with a line saying
/// what the threshold is (and one per named backend the data has no row of).
pub fn backend_policies(
    matrix: &LatencyMatrix,
    catalog: &Catalog,
    backends: &synth_core::catalog::Backends,
    train: &[usize],
) -> (Vec<Policy>, Vec<String>) {
    let mut policies = synth_core::compare::backends::oracle_policies(backends);
    let mut notes = Vec::new();
    match synth_core::compare::backends::fit_threshold(matrix, catalog, backends, train) {
        Some(fit) => {
            notes.push(format!("threshold: {}", fit.text));
            policies.push(fit.policy);
        }
        None => notes.push(format!(
            "threshold: not scored (it needs two of --backends {backends} with a default kernel, and a training \
             shape with a usable cell)"
        )),
    }
    let present = matrix.backends();
    for b in backends.iter().filter(|b| !present.contains(b)) {
        notes.push(format!("{b}: named in --backends but the data has no {b} row"));
    }
    (policies, notes)
}

/// Each backend's own rule (`rule[B]`): synthesized on `train` from that backend's candidates alone, with
/// the job's limits and weights, at the rule's leaf budget.
pub fn own_rules(
    matrix: &LatencyMatrix,
    catalog: &Catalog,
    backends: &synth_core::catalog::Backends,
    train: &[usize],
    weights: Option<&[f64]>,
    limits: &synth_core::synthesize::Limits,
) -> anyhow::Result<Vec<Policy>> {
    let mut out = Vec::new();
    for backend in backends.iter() {
        let own = matrix.select_candidates(|c| c.backend == backend);
        if own.candidates.is_empty() {
            continue;
        }
        let rule =
            synth_core::synthesize::synthesize_budgets(&own, catalog, train, weights, limits, &[limits.max_leaves])
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .remove(0)
                .rule;
        out.push(Policy::Rule { name: format!("rule[{backend}]"), rule });
    }
    Ok(out)
}

/// A note on stderr when a scored rule returns leaves of a backend the data's candidates leave out
/// ([`synth_core::compare::backends::check_callable`]): those picks are charged the default's time.
pub fn note_uncallable(
    path: &Path,
    rule: &synth_core::rule::Rule,
    backends: Option<&synth_core::catalog::Backends>,
    matrix: &LatencyMatrix,
) {
    let check = synth_core::compare::backends::check_callable(rule, backends)
        .and_then(|()| synth_core::compare::backends::check_measured(rule, matrix));
    if let Err(m) = check {
        errln!(
            "note: {}: {m}; until then its picks of those backends are scored as unusable (charged the default's \
             time)",
            path.display()
        );
    }
}

/// The latency table of `--dataset` values: none → the default embedded dataset; one file or embedded name;
/// else several (files, embedded names, directories of `*.csv`) merged into one matrix of one device, the
/// vendor reference rows kept apart, named `a + b + ...`.
fn load_datasets(
    datasets: &[PathBuf],
    catalog: &Catalog,
    backends: Option<&synth_core::catalog::Backends>,
) -> anyhow::Result<(Dataset, LatencyMatrix, VendorTimes)> {
    if let (Some(b), [] | [_]) = (backends, datasets) {
        // One table read for the named backends (every row of them a candidate).
        let source = Dataset::resolve(datasets.first().map(PathBuf::as_path))?;
        if datasets.first().is_some_and(|d| d.is_dir()) {
            return load_many(datasets, catalog, backends);
        }
        let tables = [(PathBuf::from(source.origin()), source.rows(catalog)?)];
        let (matrix, vendor) =
            synth_core::table::multi::merge_tables_for(&tables, Some(b)).map_err(|e| anyhow::anyhow!("{e}"))?;
        return Ok((source, matrix, vendor));
    }
    match datasets {
        [] => {
            let source = Dataset::resolve(None)?;
            let matrix = source.load(catalog)?;
            Ok((source, matrix, VendorTimes::new()))
        }
        [one] if !one.is_dir() => {
            let source = Dataset::resolve(Some(one))?;
            let matrix = source.load(catalog)?;
            Ok((source, matrix, VendorTimes::new()))
        }
        many => load_many(many, catalog, backends),
    }
}

/// The latency matrix of one or several tables (`--dataset` values: files, embedded names, directories), read
/// as `run` and `compare` read them: with `backends`, rows of those backends are candidates.
pub fn load_tables(
    datasets: &[PathBuf],
    catalog: &Catalog,
    backends: Option<&synth_core::catalog::Backends>,
) -> anyhow::Result<LatencyMatrix> {
    Ok(load_datasets(datasets, catalog, backends)?.1)
}

/// Several `--dataset` values (files, embedded names, directories of `*.csv`) as one matrix.
fn load_many(
    many: &[PathBuf],
    catalog: &Catalog,
    backends: Option<&synth_core::catalog::Backends>,
) -> anyhow::Result<(Dataset, LatencyMatrix, VendorTimes)> {
    let mut sources = Vec::new();
    for d in many {
        if d.is_dir() {
            let files =
                synth_core::table::multi::expand_paths(std::slice::from_ref(d)).map_err(|e| anyhow::anyhow!("{e}"))?;
            for f in files {
                sources.push(Dataset::resolve(Some(&f))?);
            }
        } else {
            // A file where one exists, else an embedded dataset's name (so several embedded names work
            // anywhere, as one does).
            sources.push(Dataset::resolve(Some(d))?);
        }
    }
    let mut tables = Vec::with_capacity(sources.len());
    for s in &sources {
        tables.push((PathBuf::from(s.origin()), s.rows(catalog)?));
    }
    let (matrix, vendor) =
        synth_core::table::multi::merge_tables_for(&tables, backends).map_err(|e| anyhow::anyhow!("{e}"))?;
    let joined = sources.iter().map(Dataset::name).collect::<Vec<_>>().join(" + ");
    Ok((Dataset::Union(joined), matrix, vendor))
}

/// The dataset values as the line writes them: each embedded name as it is, each file or directory by its
/// canonical path (a file with the bytes of an embedded dataset by the embedded name).
pub fn dataset_names(datasets: &[PathBuf]) -> Vec<String> {
    if datasets.is_empty() {
        return vec![super::data::DEFAULT_DATASET.to_string()];
    }
    datasets
        .iter()
        .map(|d| match super::data::Dataset::resolve(Some(d)) {
            Ok(source) if !d.is_dir() => source.name(),
            _ => canonical_path(d),
        })
        .collect()
}
