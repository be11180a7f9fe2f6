//! The multi-model job (`synth run` with no dataset or model): one rule for every model.
//!
//! A manifest (`measurements/h200/datasets.toml`) names the journals of each (model, TP) configuration,
//! the off-grid M values and the order in which configurations are drawn for training. All journals are
//! loaded into one latency matrix (the union of their shapes); a configuration's shapes are those whose
//! (N, K) is one of its model's layers at its TP. The rule is trained on a sample of grid shapes of the
//! first `train_configs` configurations of the pool (stratified M values × layers per configuration) and
//! scored in four evaluations:
//!
//! - (a) held-out grid shapes of the training configurations;
//! - (b) off-grid M of the training configurations;
//! - (c) leave-one-model-out: per configuration, a rule trained on the first `train_configs` pool members
//!   other than it (shapes sharing an (N, K) with it removed from the training set) and scored on every
//!   shape of it — the untuned-(N, K) case;
//! - (d) AITER's real path: `tuned` (the tuned table built from the training shapes, lookup with
//!   AITER's padding, miss → the default kernel) against `tuned→rule` (miss → the rule), on every shape
//!   of every configuration without a tuned row.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::catalog::Catalog;
use crate::compare::report::LayerNames;
use crate::compare::{self, Policy, Report, TunedTable};
use crate::render::{self, writer::GeneratedFile, Provenance};
use crate::shapes::{sample_m, Layer};
use crate::synthesize::curve::{curve_csv, sample_curve};
use crate::synthesize::{synthesize_budgets, Limits, Synthesized};
use crate::table::multi::{expand_paths, merge_tables, VendorTimes};
use crate::table::{Cell, LatencyMatrix};

use super::invocation::Invocation;
use super::run::{rule_outline, RunArgs, COMPARE_CSV, CURVE_CSV, OUTPUT_ONLY, RULE_JSON, SPEEDUP_PNG, SPEEDUP_SVG};
use super::session::{display_path, model_layers, published_rule};

/// The manifest read when `--manifest` is not given, relative to the crate root.
pub const DEFAULT_MANIFEST: &str = "measurements/h200/datasets.toml";
/// Summary rows of the four evaluations, written into the output directory.
pub const EVALUATIONS_CSV: &str = "evaluations.csv";
/// Leaves of the multi-model rule unless `--max-leaves` is given.
pub const MULTI_LEAVES: usize = 16;
/// Distinct instances of the multi-model rule unless `--max-instances` is given.
pub const MULTI_INSTANCES: usize = 8;
/// Leaf budgets of the leaves curve (the same search as the rule).
pub const MULTI_CURVE: [usize; 3] = [4, 8, 16];

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

    fn layer_set(&self) -> BTreeSet<(u32, u32)> {
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
    pub train_configs: usize,
}

impl MultiData {
    /// Reads the manifest and every journal it names.
    pub fn open(manifest: &Path) -> anyhow::Result<MultiData> {
        let text = if !manifest.exists() && manifest == Path::new(super::data::EMBEDDED_MANIFEST.0) {
            super::data::EMBEDDED_MANIFEST.1.to_string()
        } else {
            crate::input::read_text_capped(manifest, crate::input::MAX_SPEC_BYTES, "dataset manifest")
                .with_context(|| format!("cannot read the dataset manifest {}", manifest.display()))?
        };
        let file: ManifestFile = toml::from_str(&text).map_err(|e| {
            crate::diag::toml_error(&manifest.display().to_string(), &text, "not a dataset manifest", &e)
        })?;
        let dir = manifest.parent().unwrap_or(Path::new("."));
        let mut names = BTreeSet::new();
        for c in &file.config {
            if !names.insert(c.name.as_str()) {
                bail!("{}: configuration {:?} is listed twice", manifest.display(), c.name);
            }
            if c.journals.is_empty() {
                bail!("{}: configuration {:?} names no journal", manifest.display(), c.name);
            }
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
        if file.train_configs == 0 || file.train_configs >= pool.len() {
            bail!(
                "{}: train_configs = {} must be at least 1 and below the pool size {} (leave-one-model-out \
                 trains on train_configs members other than the held-out one)",
                manifest.display(),
                file.train_configs,
                pool.len()
            );
        }
        let mut journals: Vec<PathBuf> = Vec::new();
        for j in file.config.iter().flat_map(|c| &c.journals).chain(&file.vendor) {
            let p = dir.join(j);
            if !journals.contains(&p) {
                journals.push(p);
            }
        }
        // A journal is a file (or a directory of them) where one exists, else a dataset embedded in the binary.
        let on_disk: Vec<PathBuf> = journals.iter().filter(|p| p.exists()).cloned().collect();
        let mut journals: Vec<PathBuf> = journals.into_iter().filter(|p| !p.exists()).collect();
        journals.extend(expand_paths(&on_disk).map_err(|e| anyhow::anyhow!("{e}"))?);
        let catalog = Catalog::embedded();
        let mut tables = Vec::with_capacity(journals.len());
        for j in &journals {
            let source = super::data::Dataset::resolve(Some(j))?;
            tables.push((PathBuf::from(source.name()), source.rows(&catalog)?));
        }
        let (matrix, vendor) = merge_tables(&tables).map_err(|e| anyhow::anyhow!("{e}"))?;
        let off: BTreeSet<u32> = file.off_grid_m.iter().copied().collect();
        let have: BTreeSet<(u32, u32)> = matrix.layers().into_iter().collect();
        let mut configs = Vec::new();
        for c in &file.config {
            let (_, layers) = model_layers(&c.model, None, c.tp)
                .with_context(|| format!("{}: configuration {:?}", manifest.display(), c.name))?;
            let layers: Vec<Layer> = layers.into_iter().filter(|l| have.contains(&(l.n, l.k))).collect();
            let set: BTreeSet<(u32, u32)> = layers.iter().map(|l| (l.n, l.k)).collect();
            let shapes: Vec<usize> =
                (0..matrix.shapes.len()).filter(|&s| set.contains(&(matrix.shapes[s].n, matrix.shapes[s].k))).collect();
            if shapes.is_empty() {
                bail!(
                    "{}: configuration {:?} ({} TP={}): no shape of its layers in the journals; check `journals`",
                    manifest.display(),
                    c.name,
                    c.model,
                    c.tp
                );
            }
            let (off_grid, grid): (Vec<usize>, Vec<usize>) =
                shapes.into_iter().partition(|&s| off.contains(&matrix.shapes[s].m));
            configs.push(Config { name: c.name.clone(), layers, grid, off_grid });
        }
        Ok(MultiData {
            catalog,
            manifest: manifest.to_path_buf(),
            journals,
            matrix,
            vendor,
            configs,
            pool,
            train_configs: file.train_configs,
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

/// The synthesis settings of the multi-model job.
#[derive(Debug, Clone)]
pub struct MultiSettings {
    pub limits: Limits,
    pub sample_m: usize,
    pub seed: u64,
}

/// One rule trained on `train`, with the curve budgets from the same search.
pub fn train(data: &MultiData, train: &[usize], settings: &MultiSettings) -> anyhow::Result<Vec<Synthesized>> {
    let mut budgets = vec![settings.limits.max_leaves];
    budgets.extend(MULTI_CURVE.iter().filter(|&&b| b < settings.limits.max_leaves));
    synthesize_budgets(&data.matrix, &data.catalog, train, None, &settings.limits, &budgets)
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The policies of every evaluation: default, tuned (AITER: lookup, miss → default), nearest-M, tuned→rule,
/// the published rule, the synthesized rule, the oracle; tables built from `train`.
pub fn policies(data: &MultiData, train: &[usize], rule: &crate::rule::Rule) -> anyhow::Result<Vec<Policy>> {
    policies_named(data, train, rule, "synthesized")
}

/// [`policies`] with the rule scored under `name`.
pub fn policies_named(
    data: &MultiData,
    train: &[usize],
    rule: &crate::rule::Rule,
    name: &str,
) -> anyhow::Result<Vec<Policy>> {
    let tuned = TunedTable::from_matrix(&data.matrix, train, &format!("best of {} training shapes", train.len()));
    Ok(vec![
        Policy::Default,
        Policy::Tuned { name: "tuned".into(), table: tuned.clone() },
        Policy::NearestM { name: "nearest-M".into(), table: tuned.clone() },
        Policy::TunedRule { name: "tuned→rule".into(), table: tuned, rule: rule.clone() },
        Policy::Rule { name: super::session::PUBLISHED_RULE_NAME.into(), rule: published_rule(&data.catalog)? },
        Policy::Rule { name: name.into(), rule: rule.clone() },
        Policy::Oracle,
    ])
}

/// One leave-one-model-out row.
#[derive(Debug, Clone)]
pub struct LomoRow {
    pub config: String,
    pub trained_on: Vec<String>,
    pub train_shapes: usize,
    pub leaves: usize,
    pub instances: usize,
    pub report: Report,
}

/// Leave-one-model-out: per configuration, a rule trained without it, scored on all of its shapes.
pub fn leave_one_out(data: &MultiData, settings: &MultiSettings) -> anyhow::Result<Vec<LomoRow>> {
    use rayon::prelude::*;
    let rows: Vec<anyhow::Result<LomoRow>> = (0..data.configs.len())
        .into_par_iter()
        .map(|c| {
            let held = &data.configs[c];
            let configs = data.training_configs(Some(c));
            let train_set = data.sample(&configs, &held.layer_set(), settings.sample_m, settings.seed);
            if train_set.is_empty() {
                bail!("leave-one-model-out of {}: the training sample is empty", held.name);
            }
            let synth = train(data, &train_set, settings)?.swap_remove(0);
            let pols = policies(data, &train_set, &synth.rule)?;
            let report = compare::evaluate(&data.matrix, &data.catalog, &pols, &held.shapes());
            Ok(LomoRow {
                config: held.name.clone(),
                trained_on: configs.iter().map(|&i| data.configs[i].name.clone()).collect(),
                train_shapes: train_set.len(),
                leaves: synth.leaves,
                instances: synth.instances.len(),
                report,
            })
        })
        .collect();
    rows.into_iter().collect()
}

use super::multi_eval::{of_oracle, unusable};

/// Header of [`EVALUATIONS_CSV`].
pub const EVALUATIONS_COLUMNS: &str =
    "evaluation,config,policy,shapes,geomean_vs_default,total_vs_default,of_oracle,missing,invalid";

use super::multi_eval::put_rows as put_summaries;

/// Shapes of `shapes` without an exact row in the tuned table of `train`.
fn untuned(train: &[usize], shapes: &[usize]) -> Vec<usize> {
    let tuned: BTreeSet<usize> = train.iter().copied().collect();
    shapes.iter().copied().filter(|s| !tuned.contains(s)).collect()
}

/// Runs the multi-model job.
pub fn run(args: &RunArgs, manifest: &Path, invocation: &Invocation) -> anyhow::Result<()> {
    let started = Instant::now();
    let data = MultiData::open(manifest)?;
    // The default manifest, however it was named, gives the main job's line (so `--check` judges inputs).
    let mut skip = OUTPUT_ONLY.to_vec();
    let default_manifest = manifest == Path::new(DEFAULT_MANIFEST)
        || std::fs::read_to_string(manifest).is_ok_and(|t| t == super::data::EMBEDDED_MANIFEST.1);
    if default_manifest {
        skip.push("manifest");
    }
    let limits = Limits {
        max_depth: args.limits.max_depth,
        max_leaves: if invocation.given("max_leaves") { args.limits.max_leaves } else { MULTI_LEAVES },
        max_instances: if invocation.given("max_instances") {
            args.limits.max_instances
        } else {
            Some(MULTI_INSTANCES)
        },
        features: args.limits.features,
        split_k_guards: !args.no_split_k_guards,
        refine_thresholds: !args.no_refine,
        exact_depth: args.exact_depth,
        log_ratio: if invocation.given("weight") { args.limits.weight.log_ratio() } else { true },
        lookahead: Some(1),
        prune_from: args.limits.prune_from,
    };
    if limits.max_leaves == 0 || limits.max_instances == Some(0) || args.sample.sample_m == 0 {
        bail!("--max-leaves, --max-instances and --sample-m must be at least 1");
    }
    super::session::check_prune_from(limits.prune_from, limits.max_leaves)?;
    let settings = MultiSettings { limits, sample_m: args.sample.sample_m, seed: args.sample.seed };
    let (catalog, matrix) = (&data.catalog, &data.matrix);
    let names = data.names();

    // The rule.
    let t0 = Instant::now();
    let configs = data.training_configs(None);
    let train_set = data.sample(&configs, &BTreeSet::new(), settings.sample_m, settings.seed);
    if train_set.is_empty() {
        bail!("the training sample is empty");
    }
    let results = train(&data, &train_set, &settings)?;
    let synth = results[0].clone();
    let synth_time = t0.elapsed();
    let pols = policies(&data, &train_set, &synth.rule)?;
    let in_train: BTreeSet<usize> = train_set.iter().copied().collect();

    // (a) held-out grid shapes and (b) off-grid M of the training configurations.
    let (grid_held, off) = super::multi_eval::training_splits(&data, &configs, &train_set);
    let report_grid = compare::evaluate(matrix, catalog, &pols, &grid_held);
    let report_off = compare::evaluate(matrix, catalog, &pols, &off);
    // (c) leave-one-model-out.
    let t1 = Instant::now();
    let lomo = leave_one_out(&data, &settings)?;
    let lomo_time = t1.elapsed();
    // (d) AITER's path on every shape without a tuned row; and every shape for the CSV and plot.
    let all = data.all_shapes();
    let report_untuned = compare::evaluate(matrix, catalog, &pols, &untuned(&train_set, &all));
    let report_all = compare::evaluate(matrix, catalog, &pols, &all);

    // Files.
    let training_text = format!(
        "{} grid shapes of {}: {} M values per configuration (stratified over its grid M, seed {}) × its layers",
        train_set.len(),
        configs.iter().map(|&c| data.configs[c].name.as_str()).collect::<Vec<_>>().join(", "),
        settings.sample_m,
        settings.seed
    );
    let lomo_min = lomo.iter().map(|r| of_oracle(&r.report, "synthesized")).fold(f64::INFINITY, f64::min);
    let figures = vec![
        synth.shape_line(),
        format!(
            "held-out grid shapes of the training configurations ({}): {:.3} of oracle (nearest-M {:.3})",
            report_grid.shapes.len(),
            of_oracle(&report_grid, "synthesized"),
            of_oracle(&report_grid, "nearest-M")
        ),
        format!(
            "off-grid M ({} shapes): {:.3} of oracle",
            report_off.shapes.len(),
            of_oracle(&report_off, "synthesized")
        ),
        format!("leave-one-model-out, {} configurations: min {:.3} of oracle", lomo.len(), lomo_min),
    ];
    let dataset_text = format!(
        "{} ({} journals; {}, {} CUs{}; {} shapes × {} candidates; {} configurations)",
        display_path(&data.manifest),
        data.journals.len(),
        matrix.gfx,
        matrix.cu_num,
        matrix.device.as_deref().map(|d| format!(", {d}")).unwrap_or_default(),
        matrix.shapes.len(),
        matrix.candidates.len(),
        data.configs.len()
    );
    let provenance = Provenance {
        dataset: dataset_text,
        training: training_text,
        figures,
        command: invocation.regenerate_line(&skip),
    };
    let main_job = provenance.command == Invocation::defaults("run").regenerate_line(&[]);
    let target = super::outputs::out_dir(args.out.as_deref(), main_job, "run")?;
    let out = target.dir.clone();
    let generated = render::generated_files(&synth.rule, catalog, matrix, &provenance);
    let aiter_patch =
        GeneratedFile::new(crate::aiter::PATCH_FILE, crate::aiter::render_patch(&synth.rule, catalog, &provenance)?);
    let mut rule_json = crate::rule::to_json(&synth.rule);
    rule_json.push('\n');
    let mut ev = csv::Writer::from_writer(Vec::new());
    ev.write_record(EVALUATIONS_COLUMNS.split(',')).expect("writing CSV to memory cannot fail");
    put_summaries(&mut ev, "heldout-grid", "training", &report_grid);
    put_summaries(&mut ev, "off-grid", "training", &report_off);
    for r in &lomo {
        put_summaries(&mut ev, "leave-one-model-out", &r.config, &r.report);
    }
    for e in super::multi_eval::per_config(&data, &pols) {
        put_summaries(&mut ev, e.evaluation, &e.config, &e.report);
    }
    put_summaries(&mut ev, "untuned", "all", &report_untuned);
    let ev = String::from_utf8(ev.into_inner().expect("an in-memory CSV flushes")).expect("UTF-8");
    let groups: Vec<(String, Vec<usize>)> = data
        .configs
        .iter()
        .map(|c| {
            let set: BTreeSet<usize> = c.shapes().into_iter().collect();
            (c.name.clone(), (0..report_all.shapes.len()).filter(|&i| set.contains(&report_all.shapes[i])).collect())
        })
        .collect();
    let title = format!(
        "one rule, every model on {} — fraction of the oracle per configuration",
        matrix.device.as_deref().unwrap_or(&matrix.gfx)
    );
    let held_all: Vec<usize> = all.iter().copied().filter(|s| !in_train.contains(s)).collect();
    let points = sample_curve(matrix, catalog, &train_set, &held_all, &results[1..], &MULTI_CURVE[..results.len() - 1]);
    let svg = compare::plot::groups_svg(&report_all, &groups, &title)?;
    let png = compare::raster::svg_to_png(&svg)?;
    let extra = vec![
        GeneratedFile::new(RULE_JSON, rule_json),
        GeneratedFile::new(COMPARE_CSV, compare::report::csv_with_vendor(&report_all, &names, &data.vendor)),
        GeneratedFile::new(EVALUATIONS_CSV, ev),
        GeneratedFile::new(SPEEDUP_SVG, svg),
        GeneratedFile::binary(SPEEDUP_PNG, png),
        GeneratedFile::new(CURVE_CSV, curve_csv(&points)),
    ];
    // One all-or-nothing write of the output directory, then the AITER patch beside it.
    let written = super::outputs::write_run_files(&out, generated, extra, aiter_patch, args.check);

    // Terminal output.
    let mut text = super::outputs::run_header(&provenance);
    let _ = writeln!(
        text,
        "rule:     {} leaves ({} split-K leaves guarded), depth {}, instances {:?}; {} unusable training picks; \
         synthesized in {:.2} s\n",
        synth.leaves,
        synth.guards,
        synth.depth,
        synth.instances,
        synth.unusable,
        synth_time.as_secs_f64()
    );
    text.push_str(&rule_outline(&synth.rule, catalog));
    for (title, report) in [
        ("(a) held-out grid shapes of the training configurations", &report_grid),
        ("(b) off-grid M of the training configurations", &report_off),
    ] {
        let _ = writeln!(text, "\n{title} ({} shapes):", report.shapes.len());
        text.push_str(&summary_table(report));
    }
    let _ = writeln!(
        text,
        "\n(c) leave-one-model-out: per configuration, a rule trained on {} others (shapes of its (N, K) removed), \
         scored on all its shapes ({:.2} s):",
        data.train_configs,
        lomo_time.as_secs_f64()
    );
    text.push_str(&lomo_table(&lomo, &data, &report_all));
    let _ = writeln!(
        text,
        "\n(d) AITER's path on the {} shapes of every configuration without a tuned row (tuned table: the {} training shapes):",
        report_untuned.shapes.len(),
        train_set.len()
    );
    text.push_str(&summary_table(&report_untuned));
    let end = super::outputs::RunEnd {
        target: &target,
        main_job,
        out_given: args.out.is_some(),
        check: args.check,
        blank_line: true,
        started,
    };
    super::outputs::finish_run(text, written, &end)
}

/// Policy rows: geomean and total speed-up against the default, fraction of the oracle, unusable picks.
pub fn summary_table(report: &Report) -> String {
    use crate::textable::{left, right, TextTable};
    let columns = vec![
        left("policy").min(16),
        right("x def (geo)").min(12),
        right("x def (tot)").min(12),
        right("of oracle").min(10),
        right("unusable").min(9),
    ];
    let mut t = TextTable::new(columns).gap(1).indent("  ");
    for p in &report.policies {
        let s = &p.summary;
        t.row([
            p.name.clone(),
            format!("{:.3}", s.geomean_vs_default),
            format!("{:.3}", s.total_vs_default),
            format!("{:.3}", s.of_oracle),
            (s.missing + s.invalid).to_string(),
        ]);
    }
    t.render()
}

fn lomo_table(rows: &[LomoRow], data: &MultiData, all: &Report) -> String {
    use crate::textable::{left, right, TextTable};
    let columns = vec![
        left("held out").min(18),
        right("shapes").min(6),
        right("LOMO rule").min(12),
        right("main rule").min(12),
        right("default").min(9),
        right("unusable").min(9),
        left("trained on"),
    ];
    let mut t = TextTable::new(columns).gap(1).indent("  ");
    for r in rows {
        let c = data.configs.iter().find(|c| c.name == r.config).expect("row of a configuration");
        let set: BTreeSet<usize> = c.shapes().into_iter().collect();
        let idx: Vec<usize> = (0..all.shapes.len()).filter(|&i| set.contains(&all.shapes[i])).collect();
        let main = all.policy_index("synthesized").map_or(f64::NAN, |p| all.summarize(p, &idx).of_oracle);
        t.row([
            r.config.clone(),
            r.report.shapes.len().to_string(),
            format!("{:.3}", of_oracle(&r.report, "synthesized")),
            format!("{main:.3}"),
            format!("{:.3}", of_oracle(&r.report, "default")),
            unusable(&r.report, "synthesized").to_string(),
            format!(
                "{} ({} shapes, {} leaves, {} instances)",
                r.trained_on.join(", "),
                r.train_shapes,
                r.leaves,
                r.instances
            ),
        ]);
    }
    t.render()
}

/// Per-shape unusable picks of `rule` over every shape of `data` (for checks): (shape, leaf) pairs whose
/// cell is not a usable measurement.
pub fn unmeasured_picks(data: &MultiData, rule: &crate::rule::Rule) -> Vec<(crate::table::Shape, crate::rule::Leaf)> {
    let m = &data.matrix;
    (0..m.shapes.len())
        .filter_map(|s| {
            let sh = m.shapes[s];
            let leaf = rule.eval(sh.m, sh.n, sh.k);
            let ok = m
                .candidate_index(&crate::catalog::Candidate::new(leaf.kernel_id, leaf.split_k))
                .is_some_and(|c| matches!(m.cell(s, c), Cell::Ok(_)));
            (!ok).then_some((sh, leaf))
        })
        .collect()
}
