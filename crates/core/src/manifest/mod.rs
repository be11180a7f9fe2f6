//! A dataset manifest (`measurements/h200/datasets.toml`) loaded as data: the journals of each (model, TP)
//! configuration read into one latency matrix (the union of their shapes), each configuration's grid and
//! off-grid shapes, and the training pool the multi-model job and the manifest modes of `compare`,
//! `search` and `drift` draw from.
//!
//! The stage reads the manifest's text as given and its journals through a [`JournalSource`], so where
//! the text and the journals come from (a file, or the copies built into the binary) is the caller's.
//! Every check names the manifest and, where there is one, the configuration and the value.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::catalog::{Backends, Catalog};
use crate::compare::report::LayerNames;
use crate::shapes::{sample_m, Layer, ModelSpec};
use crate::table::multi::{expand_paths, merge_tables, merge_tables_for, VendorTimes};
use crate::table::{AiterRow, LatencyMatrix};

/// The manifest as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    off_grid_m: Vec<u32>,
    train_pool: Vec<String>,
    train_configs: usize,
    #[serde(default)]
    vendor: Vec<String>,
    config: Vec<ConfigEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigEntry {
    name: String,
    model: String,
    tp: u32,
    journals: Vec<String>,
}

/// Where the journals a manifest names are read from.
pub trait JournalSource {
    /// Whether `path`, where no file exists, names a journal built into the binary.
    fn built_in(&self, path: &Path) -> bool;
    /// The journal at `path` (one file, or a built-in copy): the name its errors give, and its rows.
    fn read(&self, path: &Path, catalog: &Catalog) -> anyhow::Result<(PathBuf, Vec<AiterRow>)>;
}

/// One (model, TP) configuration of the loaded data.
#[derive(Debug, Clone)]
pub struct Config {
    /// Manifest name, e.g. `llama-3.1-8b-tp1`.
    pub name: String,
    /// The model's layers at the TP that the data holds.
    pub layers: Vec<Layer>,
    /// Grid shapes (matrix indices).
    pub grid: Vec<usize>,
    /// Off-grid shapes (matrix indices).
    pub off_grid: Vec<usize>,
}

impl Config {
    /// Every shape of the configuration.
    pub fn shapes(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.grid.iter().chain(&self.off_grid).copied().collect();
        v.sort_unstable();
        v
    }

    pub fn layer_set(&self) -> BTreeSet<(u32, u32)> {
        self.layers.iter().map(|l| (l.n, l.k)).collect()
    }
}

/// The loaded multi-model data.
#[derive(Debug, Clone)]
pub struct MultiData {
    pub catalog: Catalog,
    pub manifest: PathBuf,
    pub journals: Vec<PathBuf>,
    pub matrix: LatencyMatrix,
    pub vendor: VendorTimes,
    pub configs: Vec<Config>,
    /// Training pool (indices into `configs`), in manifest order.
    pub pool: Vec<usize>,
    /// `--backends` the journals were read for (`None`: CK legacy candidates, vendor rows a reference).
    pub backends: Option<Backends>,
    pub train_configs: usize,
}

impl MultiData {
    /// The manifest `text` (read from `manifest`) and every journal it names, read through `source` (a
    /// manifest's paths are relative to its directory). With `backends`, rows of those backends are
    /// candidates (the vendor journals of the manifest's `vendor` list too when `vendor` is named), and
    /// every configuration must have rows of each named backend (a configuration without them would
    /// charge every pick of that backend the default's time and read as a weak rule).
    pub fn load(
        manifest: &Path,
        text: &str,
        source: &dyn JournalSource,
        backends: Option<&Backends>,
    ) -> anyhow::Result<MultiData> {
        let file: ManifestFile = toml::from_str(text).map_err(|e| {
            synth_base::diag::toml_error(&manifest.display().to_string(), text, "not a dataset manifest", &e)
        })?;
        check_configs(manifest, &file)?;
        let pool = pool_indices(manifest, &file)?;
        let journals = journal_paths(manifest, &file, source)?;
        let catalog = Catalog::embedded();
        let (matrix, vendor) = read_journals(&journals, source, &catalog, backends)?;
        check_off_grid(manifest, &file.off_grid_m)?;
        let off: BTreeSet<u32> = file.off_grid_m.iter().copied().collect();
        let configs = file
            .config
            .iter()
            .map(|c| config(manifest, c, &matrix, &off, backends))
            .collect::<anyhow::Result<Vec<Config>>>()?;
        Ok(MultiData {
            catalog,
            manifest: manifest.to_path_buf(),
            journals,
            matrix,
            vendor,
            configs,
            pool,
            train_configs: file.train_configs,
            backends: backends.cloned(),
        })
    }

    /// The first `train_configs` pool members other than `except`.
    pub fn training_configs(&self, except: Option<usize>) -> Vec<usize> {
        self.pool.iter().copied().filter(|&c| Some(c) != except).take(self.train_configs).collect()
    }

    /// The training sample over `configs`: per configuration, `count` M values stratified over its grid
    /// M values (seeded) × its layers; shapes whose (N, K) is in `exclude` are left out.
    pub fn sample(&self, configs: &[usize], exclude: &BTreeSet<(u32, u32)>, count: usize, seed: u64) -> Vec<usize> {
        let mut out = BTreeSet::new();
        for &c in configs {
            let grid: Vec<usize> = self.configs[c]
                .grid
                .iter()
                .copied()
                .filter(|&s| !exclude.contains(&(self.matrix.shapes[s].n, self.matrix.shapes[s].k)))
                .collect();
            let ms: Vec<u32> = grid.iter().map(|&s| self.matrix.shapes[s].m).collect();
            let picked = sample_m(&ms, count, seed);
            out.extend(grid.into_iter().filter(|&s| picked.contains(&self.matrix.shapes[s].m)));
        }
        out.into_iter().collect()
    }

    /// Layer names by (N, K): `config:layer`, shared shapes joined with `/`.
    pub fn names(&self) -> LayerNames {
        let mut out: LayerNames = BTreeMap::new();
        for c in &self.configs {
            for l in &c.layers {
                let name = format!("{}:{}", c.name, l.name);
                out.entry((l.n, l.k)).and_modify(|s| *s = format!("{s}/{name}")).or_insert(name);
            }
        }
        out
    }

    /// Every shape of every configuration, ascending.
    pub fn all_shapes(&self) -> Vec<usize> {
        self.configs.iter().flat_map(Config::shapes).collect::<BTreeSet<_>>().into_iter().collect()
    }
}

/// Each configuration named once and naming a journal.
fn check_configs(manifest: &Path, file: &ManifestFile) -> anyhow::Result<()> {
    let mut names = BTreeSet::new();
    for c in &file.config {
        if !names.insert(c.name.as_str()) {
            bail!("{}: configuration {:?} is listed twice", manifest.display(), c.name);
        }
        if c.journals.is_empty() {
            bail!("{}: configuration {:?} names no journal", manifest.display(), c.name);
        }
    }
    Ok(())
}

/// The training pool as configuration indices, each once, with `train_configs` within it.
fn pool_indices(manifest: &Path, file: &ManifestFile) -> anyhow::Result<Vec<usize>> {
    let mut in_pool = BTreeSet::new();
    if let Some(twice) = file.train_pool.iter().find(|n| !in_pool.insert(n.as_str())) {
        bail!(
            "{}: train_pool names {twice:?} twice; list each configuration once (the pool is the order in \
             which configurations are drawn for training)",
            manifest.display()
        );
    }
    let pool: Vec<usize> = file
        .train_pool
        .iter()
        .map(|n| {
            file.config.iter().position(|c| &c.name == n).with_context(|| {
                format!("{}: train_pool names {n:?}, which is not a [[config]] name", manifest.display())
            })
        })
        .collect::<anyhow::Result<_>>()?;
    if file.train_configs == 0 || file.train_configs > pool.len() || pool.len() < 2 {
        bail!(
            "{}: train_configs = {} must be at least 1 and at most the pool size {}, and the pool needs two \
             members (leave-one-model-out trains on up to train_configs members other than the held-out one)",
            manifest.display(),
            file.train_configs,
            pool.len()
        );
    }
    Ok(pool)
}

/// `path` made absolute against the working directory, for an error message.
fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    std::env::current_dir().map(|d| d.join(path)).unwrap_or_else(|_| path.to_path_buf())
}

/// Every journal the configurations and the vendor list name, each once: the built-in ones first, then
/// the files (a directory expanded to its journals).
fn journal_paths(manifest: &Path, file: &ManifestFile, source: &dyn JournalSource) -> anyhow::Result<Vec<PathBuf>> {
    let dir = manifest.parent().unwrap_or(Path::new("."));
    let mut journals: Vec<PathBuf> = Vec::new();
    let named = file
        .config
        .iter()
        .flat_map(|c| c.journals.iter().map(move |j| (format!("configuration {:?}", c.name), j)))
        .chain(file.vendor.iter().map(|j| ("the vendor list".to_string(), j)));
    for (whose, j) in named {
        let p = dir.join(j);
        if !(p.exists() || source.built_in(&p)) {
            bail!(
                "{}: {whose} names the journal {:?}, which does not exist at {} (a manifest's paths are \
                 relative to its directory): fix the path or measure it with `synth bench ... --out FILE.csv`",
                manifest.display(),
                synth_base::sanitize::shown(j),
                absolute(&p).display()
            );
        }
        if !journals.contains(&p) {
            journals.push(p);
        }
    }
    let on_disk: Vec<PathBuf> = journals.iter().filter(|p| p.exists()).cloned().collect();
    let mut journals: Vec<PathBuf> = journals.into_iter().filter(|p| !p.exists()).collect();
    journals.extend(expand_paths(&on_disk).map_err(|e| anyhow::anyhow!("{e}"))?);
    Ok(journals)
}

/// The journals read as one matrix (a cell in two of them is an error) and the vendor reference rows.
fn read_journals(
    journals: &[PathBuf],
    source: &dyn JournalSource,
    catalog: &Catalog,
    backends: Option<&Backends>,
) -> anyhow::Result<(LatencyMatrix, VendorTimes)> {
    let tables = journals.iter().map(|j| source.read(j, catalog)).collect::<anyhow::Result<Vec<_>>>()?;
    match backends {
        None => merge_tables(&tables),
        Some(b) => merge_tables_for(&tables, Some(b)),
    }
    .map_err(|e| anyhow::anyhow!("{e}"))
}

/// An off-grid M that is 0, listed twice, or an M of the dataset grid would move grid shapes out of
/// training and into the off-grid evaluation without a word.
fn check_off_grid(manifest: &Path, off_grid_m: &[u32]) -> anyhow::Result<()> {
    let grid_m: BTreeSet<u32> = crate::shapes::m_dataset_grid().into_iter().collect();
    let mut seen = BTreeSet::new();
    for &m in off_grid_m {
        let why = if m == 0 {
            "is not a token count (M is at least 1)"
        } else if !seen.insert(m) {
            "is listed twice"
        } else if grid_m.contains(&m) {
            "is an M of the dataset grid (`synth bench --m-set dataset`), so its grid shapes would be read as \
             off-grid"
        } else {
            continue;
        };
        bail!("{}: off_grid_m {m} {why}; list each off-grid M once, outside the grid", manifest.display());
    }
    Ok(())
}

/// One configuration: its model's layers the journals hold, and their shapes split into grid and off-grid.
fn config(
    manifest: &Path,
    c: &ConfigEntry,
    matrix: &LatencyMatrix,
    off: &BTreeSet<u32>,
    backends: Option<&Backends>,
) -> anyhow::Result<Config> {
    let have: BTreeSet<(u32, u32)> = matrix.layers().into_iter().collect();
    let layers =
        model_layers(&c.model, c.tp).with_context(|| format!("{}: configuration {:?}", manifest.display(), c.name))?;
    let layers: Vec<Layer> = layers.into_iter().filter(|l| have.contains(&(l.n, l.k))).collect();
    let set: BTreeSet<(u32, u32)> = layers.iter().map(|l| (l.n, l.k)).collect();
    let shapes: Vec<usize> =
        (0..matrix.shapes.len()).filter(|&s| set.contains(&(matrix.shapes[s].n, matrix.shapes[s].k))).collect();
    let data = format!("{}: configuration {:?} ({} TP={})", manifest.display(), c.name, c.model, c.tp);
    if shapes.is_empty() {
        bail!("{data}: no shape of its layers in the journals; check `journals`");
    }
    if let Some(b) = backends {
        let fix = "add its journal to the configuration's `journals` (or to `vendor`), or leave it out of --backends";
        crate::compare::backends::check_rows(matrix, b, &shapes, &data, fix).map_err(anyhow::Error::msg)?;
    }
    let (off_grid, grid): (Vec<usize>, Vec<usize>) =
        shapes.into_iter().partition(|&s| off.contains(&matrix.shapes[s].m));
    Ok(Config { name: c.name.clone(), layers, grid, off_grid })
}

/// The layers of the built-in model `model` at `tp`.
fn model_layers(model: &str, tp: u32) -> anyhow::Result<Vec<Layer>> {
    let spec = ModelSpec::builtin(model).context("--model names the GEMM model whose layers to keep")?;
    Ok(spec.layers(tp)?)
}
