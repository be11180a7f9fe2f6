//! The multi-model job (`synth run` with no dataset or model, or `--manifest`): one rule for every model.
//!
//! A manifest ([`super::manifest`]) names the journals of each (model, TP) configuration, the off-grid M
//! values and the order in which configurations are drawn for training. The rule is trained on a sample of
//! grid shapes of the first `train_configs` configurations of the pool (stratified M values × layers per
//! configuration) and scored in four evaluations:
//!
//! - (a) held-out grid shapes of the training configurations;
//! - (b) off-grid M of the training configurations;
//! - (c) leave-one-model-out: per configuration, a rule trained on the first `train_configs` pool members
//!   other than it (shapes sharing an (N, K) with it removed from the training set) and scored on every
//!   shape of it — the untuned-(N, K) case;
//! - (d) AITER's real path: `tuned` (the tuned table built from the training shapes, lookup with
//!   AITER's padding, miss → the default kernel) against `tuned→rule` (miss → the rule), on every shape
//!   of every configuration without a tuned row.
//!
//! The job's own defaults ([`MULTI_LIMITS`]) differ from the other jobs'; [`MultiJob`] is the job as it
//! ran, which decides both the "Regenerate with" line and whether this is the main job (the one that
//! writes the committed `generated/`).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::bail;

use synth_core::compare::{self, Policy, Report};
use synth_core::render::{writer::GeneratedFile, Provenance};
use synth_core::synthesize::curve::{curve_csv, sample_curve, CurvePoint};
use synth_core::synthesize::{synthesize_budgets, FeatureSet, Limits, Synthesized, Weighting};
use synth_core::table::Cell;

use super::args::{Effort, LimitArgs, LimitDefaults, ResolvedLimits, SampleArgs};
use super::line::CommandLine;
use super::multi_eval::{policies_named, put_rows, training_splits};
use super::shared::{
    of_oracle, rule_outline, shown, summary_table, unusable, worst_layer, worst_layer_text, Progress, COMPARE_CSV,
    CURVE_CSV, EVALUATIONS_COLUMNS, EVALUATIONS_CSV, SPEEDUP_PNG, SPEEDUP_SVG,
};

use super::manifest::DEFAULT_MANIFEST;
use synth_core::manifest::MultiData;

/// The multi-model job's limits where an option is not given: 16 leaves, 8 distinct instances, the
/// log-ratio objective (the geometric-mean fraction of the oracle).
pub const MULTI_LIMITS: LimitDefaults = LimitDefaults {
    max_depth: 6,
    max_leaves: 16,
    max_instances: Some(8),
    weight: Weighting::Log,
    features: FeatureSet::Machine,
};
/// Leaves of the multi-model rule unless `--max-leaves` is given.
pub const MULTI_LEAVES: usize = MULTI_LIMITS.max_leaves;
/// Leaf budgets of the leaves curve (the same search as the rule).
pub const MULTI_CURVE: [usize; 3] = [4, 8, 16];

/// The synthesis settings of the multi-model job.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiSettings {
    pub limits: Limits,
    pub weight: Weighting,
    pub sample_m: usize,
    pub seed: u64,
}

/// The multi-model job as it runs: the manifest and every setting resolved against [`MULTI_LIMITS`].
#[derive(Debug, Clone, PartialEq)]
pub struct MultiJob {
    pub manifest: PathBuf,
    /// Whether the manifest is the default one (by name, or by its bytes).
    pub default_manifest: bool,
    /// The name of the embedded manifest it is (by name, or by its bytes), if any: how the line and the
    /// provenance name it wherever the job runs.
    pub embedded_name: Option<&'static str>,
    pub limits: ResolvedLimits,
    pub sample: (usize, u64),
    pub effort: Effort,
    /// `--backends`: which rows of the journals are candidates (`None`: CK legacy, vendor rows a reference).
    pub backends: Option<synth_core::catalog::Backends>,
    /// Whether evaluation (c), leave-one-model-out, runs (one more rule per configuration). The main job's
    /// CK rule leaves it to the command its line names, which runs it.
    pub folds: bool,
}

impl MultiJob {
    /// The job of these options on `manifest`; an error for an option it cannot use.
    pub fn resolve(limits: &LimitArgs, sample: &SampleArgs, effort: Effort, manifest: &Path) -> anyhow::Result<Self> {
        if sample.sample_m == 0 {
            bail!("--sample-m must be at least 1");
        }
        let embedded_name = super::data::embedded_manifest(manifest).map(|(n, _)| n).or_else(|| {
            synth_base::input::read_text_capped(manifest, synth_base::input::MAX_SPEC_BYTES, "dataset manifest")
                .ok()
                .and_then(|t| super::data::embedded_manifest_text(&t))
        });
        Ok(MultiJob {
            manifest: manifest.to_path_buf(),
            default_manifest: embedded_name == Some(DEFAULT_MANIFEST),
            embedded_name,
            limits: limits.resolve(MULTI_LIMITS)?,
            sample: (sample.sample_m, sample.seed),
            effort,
            backends: None,
            folds: true,
        })
    }

    /// The job over `backends` (`--backends`; never the main job).
    pub fn with_backends(self, backends: Option<synth_core::catalog::Backends>) -> Self {
        MultiJob { backends, ..self }
    }

    /// The job without evaluation (c), leave-one-model-out (its line, run, runs it).
    pub fn without_folds(self) -> Self {
        MultiJob { folds: false, ..self }
    }

    /// The main job: the default manifest with every setting at the job's default.
    pub fn is_main(&self) -> bool {
        let main = MultiJob::resolve(&LimitArgs::default(), &SampleArgs::default(), Effort::default(), &self.manifest)
            .expect("the defaults resolve");
        self.default_manifest
            && MultiJob {
                manifest: self.manifest.clone(),
                default_manifest: true,
                embedded_name: self.embedded_name,
                ..main
            } == *self
    }

    /// The synthesis settings.
    pub fn settings(&self) -> MultiSettings {
        let limits = Limits { lookahead: Some(1), ..self.effort.apply(self.limits.limits()) };
        MultiSettings { limits, weight: self.limits.weight, sample_m: self.sample.0, seed: self.sample.1 }
    }

    /// The "Regenerate with" line: every setting that differs from the job's default.
    pub fn line(&self) -> CommandLine {
        let mut l = CommandLine::new("run");
        match self.embedded_name {
            Some(name) if name == DEFAULT_MANIFEST => {}
            Some(name) => {
                l.always("--manifest", name);
            }
            None => {
                l.path("--manifest", &self.manifest);
            }
        }
        SampleArgs { sample_m: self.sample.0, seed: self.sample.1 }.write_line(&mut l);
        self.limits.write_line(&mut l);
        self.effort.write_line(&mut l);
        super::args::BackendArgs { backends: self.backends.clone() }.write_line(&mut l);
        l.flag("--no-folds", !self.folds);
        l
    }
}

/// One rule trained on `train`, with the curve budgets from the same search.
pub fn train(data: &MultiData, train: &[usize], settings: &MultiSettings) -> anyhow::Result<Vec<Synthesized>> {
    let weights = settings.weight.weights(&data.matrix, train);
    synthesize_budgets(&data.matrix, &data.catalog, train, weights.as_deref(), &settings.limits, &budgets(settings))
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The leaf budgets [`train`] synthesizes, in its order: the rule's, then the curve's smaller ones.
fn budgets(settings: &MultiSettings) -> Vec<usize> {
    let mut budgets = vec![settings.limits.max_leaves];
    budgets.extend(MULTI_CURVE.iter().filter(|&&b| b < settings.limits.max_leaves));
    budgets
}

/// The policies of every evaluation: default, tuned (AITER: lookup, miss → default), nearest-M, tuned→rule,
/// the published rule, the synthesized rule, the oracle; tables built from `train`. With `--backends`,
/// before the oracle: each backend's own rule (`rule[B]`, trained on `train` with `settings`), its oracle
/// (`oracle[B]`) and the threshold policy fitted on `train`.
pub fn policies(
    data: &MultiData,
    train: &[usize],
    rule: &synth_core::rule::Rule,
    settings: &MultiSettings,
) -> anyhow::Result<Vec<Policy>> {
    let mut out = policies_named(data, train, rule, "synthesized")?;
    if let Some(backends) = &data.backends {
        let oracle = out.pop().expect("the oracle is the last policy");
        let weights = settings.weight.weights(&data.matrix, train);
        out.extend(super::session::own_rules(
            &data.matrix,
            &data.catalog,
            backends,
            train,
            weights.as_deref(),
            &settings.limits,
        )?);
        out.extend(super::session::backend_policies(&data.matrix, &data.catalog, backends, train).0);
        out.push(oracle);
    }
    Ok(out)
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
    /// The fold's leaves-versus-quality curve on the held-out configuration (setting `lomo:NAME`; budgets
    /// 4, 8 and the rule's, from the same search).
    pub curve: Vec<CurvePoint>,
}

/// Leave-one-model-out: per configuration, a rule trained without it, scored on all of its shapes
/// (progress on stderr while it takes long: one rule per configuration).
pub fn leave_one_out(data: &MultiData, settings: &MultiSettings) -> anyhow::Result<Vec<LomoRow>> {
    use rayon::prelude::*;
    let progress = Progress::new("leave-one-model-out", "configurations", data.configs.len());
    let rows: Vec<anyhow::Result<LomoRow>> = (0..data.configs.len())
        .into_par_iter()
        .map(|c| {
            let held = &data.configs[c];
            let configs = data.training_configs(Some(c));
            let train_set = data.sample(&configs, &held.layer_set(), settings.sample_m, settings.seed);
            if train_set.is_empty() {
                bail!("leave-one-model-out of {}: the training sample is empty", shown(&held.name));
            }
            let results = train(data, &train_set, settings)?;
            let curve = sample_curve(
                &format!("lomo:{}", held.name),
                &data.matrix,
                &data.catalog,
                &train_set,
                &held.shapes(),
                &results,
                &budgets(settings),
            );
            let synth = results.into_iter().next().expect("one rule per budget, the rule's first");
            let pols = policies(data, &train_set, &synth.rule, settings)?;
            let report = compare::evaluate(&data.matrix, &data.catalog, &pols, &held.shapes());
            let _ = progress.tick();
            Ok(LomoRow {
                config: held.name.clone(),
                trained_on: configs.iter().map(|&i| data.configs[i].name.clone()).collect(),
                train_shapes: train_set.len(),
                leaves: synth.leaves,
                instances: synth.instances.len(),
                report,
                curve,
            })
        })
        .collect();
    rows.into_iter().collect()
}

/// Shapes of `shapes` without an exact row in the tuned table of `train`.
fn untuned(train: &[usize], shapes: &[usize]) -> Vec<usize> {
    let tuned: BTreeSet<usize> = train.iter().copied().collect();
    shapes.iter().copied().filter(|s| !tuned.contains(s)).collect()
}

/// The rule and its four evaluations.
struct Outcome {
    configs: Vec<usize>,
    train_set: Vec<usize>,
    results: Vec<Synthesized>,
    synth_time: Duration,
    grid: Report,
    off: Report,
    lomo: Vec<LomoRow>,
    lomo_time: Duration,
    untuned: Report,
    all: Report,
    policies: Vec<Policy>,
}

impl Outcome {
    fn synth(&self) -> &Synthesized {
        &self.results[0]
    }
}

/// Trains the rule and runs every evaluation.
fn evaluate(data: &MultiData, settings: &MultiSettings, folds: bool) -> anyhow::Result<Outcome> {
    let (catalog, matrix) = (&data.catalog, &data.matrix);
    let t0 = Instant::now();
    let configs = data.training_configs(None);
    let train_set = data.sample(&configs, &BTreeSet::new(), settings.sample_m, settings.seed);
    if train_set.is_empty() {
        bail!("the training sample is empty");
    }
    let results = train(data, &train_set, settings)?;
    let synth_time = t0.elapsed();
    let policies = policies(data, &train_set, &results[0].rule, settings)?;
    // (a) held-out grid shapes and (b) off-grid M of the training configurations.
    let (grid_held, off) = training_splits(data, &configs, &train_set);
    let grid = compare::evaluate(matrix, catalog, &policies, &grid_held);
    let off = compare::evaluate(matrix, catalog, &policies, &off);
    // (c) leave-one-model-out.
    let t1 = Instant::now();
    let lomo = if folds { leave_one_out(data, settings)? } else { Vec::new() };
    let lomo_time = t1.elapsed();
    // (d) AITER's path on every shape without a tuned row; and every shape for the CSV and plot.
    let all_shapes = data.all_shapes();
    let untuned = compare::evaluate(matrix, catalog, &policies, &untuned(&train_set, &all_shapes));
    let all = compare::evaluate(matrix, catalog, &policies, &all_shapes);
    Ok(Outcome { configs, train_set, results, synth_time, grid, off, lomo, lomo_time, untuned, all, policies })
}

/// A multi-model job's results before anything is written: the rule, its files (or the error that
/// rendering them gave), what it prints, and the input files (manifest and journals) an output must not be.
pub struct Prepared {
    pub rule: synth_core::rule::Rule,
    pub files: anyhow::Result<Vec<GeneratedFile>>,
    pub text: String,
    pub inputs: Vec<(&'static str, PathBuf)>,
}

/// Trains and scores the job's rule and renders its files (nothing written).
pub fn prepare(job: &MultiJob) -> anyhow::Result<Prepared> {
    let data = super::manifest::open_for(&job.manifest, job.backends.as_ref())?;
    let settings = job.settings();
    let o = evaluate(&data, &settings, job.folds)?;
    let provenance = provenance(job, &data, &settings, &o);
    let files = files(&data, &o)
        .and_then(|mut f| {
            if data.backends.is_some() {
                f.push(super::outputs::python_file(&o.synth().rule, &data.catalog, &provenance)?);
            }
            Ok(f)
        })
        .and_then(|f| super::outputs::rule_files(&o.synth().rule, &data.catalog, &data.matrix, &provenance, f));
    let mut inputs = vec![("--manifest", job.manifest.clone())];
    inputs.extend(data.journals.iter().map(|j| ("a journal of --manifest", j.clone())));
    let text = terminal_text(&data, &provenance, &o, (!job.folds).then(|| job.line().text()));
    Ok(Prepared { rule: o.synth().rule.clone(), files, text, inputs })
}

/// Runs the multi-model job, writing into `out` (or where [`super::outputs::out_dir`] says). The main job
/// ([`MultiJob::is_main`]) is not this: the command runs the shipped rules' job (`ship.rs`) for it.
pub fn run(job: &MultiJob, out: Option<&Path>, check: bool) -> anyhow::Result<()> {
    let started = Instant::now();
    let p = prepare(job)?;
    let target = super::outputs::out_dir(out, false, "run")?;
    let written = p.files.and_then(|f| {
        if !check {
            super::outputs::check_out_dir(&target.dir, &f, &p.inputs)?;
        }
        super::outputs::write_files(&target.dir, &f, check)
    });
    let end = super::outputs::RunEnd {
        target: &target,
        main_job: false,
        out_given: out.is_some(),
        check,
        blank_line: true,
        started,
    };
    super::outputs::finish_run(p.text, written, &end)
}

/// "(N shapes): F of oracle", or "no shapes" for an evaluation over none (never a made-up figure).
fn figure_of(report: &Report, policy: &str) -> String {
    if report.shapes.is_empty() {
        return "no shapes".to_string();
    }
    format!("({} shapes): {:.3} of oracle", report.shapes.len(), of_oracle(report, policy))
}

/// The provenance of the job's files.
fn provenance(job: &MultiJob, data: &MultiData, settings: &MultiSettings, o: &Outcome) -> Provenance {
    let matrix = &data.matrix;
    let training = format!(
        "{} grid shapes of {}: {} M values per configuration (stratified over its grid M, seed {}) × its layers",
        o.train_set.len(),
        o.configs.iter().map(|&c| data.configs[c].name.as_str()).collect::<Vec<_>>().join(", "),
        settings.sample_m,
        settings.seed
    );
    let figures = vec![
        o.synth().shape_line(),
        format!(
            "held-out grid shapes of the training configurations ({}): {:.3} of oracle (nearest-M {:.3})",
            o.grid.shapes.len(),
            of_oracle(&o.grid, "synthesized"),
            of_oracle(&o.grid, "nearest-M")
        ),
        format!("off-grid M {}", figure_of(&o.off, "synthesized")),
        lomo_figure(o),
    ];
    let dataset = format!(
        "{} ({} journals; {}, {} CUs{}; {} shapes × {} candidates; {} configurations)",
        job.embedded_name.map_or_else(|| super::line::canonical_path(&data.manifest), str::to_string),
        data.journals.len(),
        matrix.gfx,
        matrix.cu_num,
        matrix.device.as_deref().map(|d| format!(", {d}")).unwrap_or_default(),
        matrix.shapes.len(),
        matrix.candidates.len(),
        data.configs.len()
    );
    Provenance { dataset, training, figures, command: job.line().text() }
}

/// Evaluation (c)'s line of the provenance: the lowest fold and the lowest layer of any fold.
fn lomo_figure(o: &Outcome) -> String {
    if o.lomo.is_empty() {
        return "leave-one-model-out: not run (--no-folds; the command above without it runs the folds)".to_string();
    }
    let lomo_min = o.lomo.iter().map(|r| of_oracle(&r.report, "synthesized")).fold(f64::INFINITY, f64::min);
    let layer_min = o
        .lomo
        .iter()
        .filter_map(|r| worst_layer(&r.report, "synthesized").map(|(nk, f, _)| (f, nk, &r.config)))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    format!(
        "leave-one-model-out, {} configurations: min {:.3} of oracle{}",
        o.lomo.len(),
        lomo_min,
        layer_min
            .map_or(String::new(), |(f, (n, k), c)| format!("; lowest layer {f:.3} (N {n}, K {k} of {})", shown(c)))
    )
}

/// The files of the job besides the rule's own: comparison and evaluations CSV, the plot, the curve.
fn files(data: &MultiData, o: &Outcome) -> anyhow::Result<Vec<GeneratedFile>> {
    let (catalog, matrix) = (&data.catalog, &data.matrix);
    let mut ev = csv::Writer::from_writer(Vec::new());
    ev.write_record(EVALUATIONS_COLUMNS.split(',')).expect("writing CSV to memory cannot fail");
    put_rows(&mut ev, "heldout-grid", "training", &o.grid);
    put_rows(&mut ev, "off-grid", "training", &o.off);
    for r in &o.lomo {
        put_rows(&mut ev, "leave-one-model-out", &r.config, &r.report);
    }
    for e in super::multi_eval::per_config(data, &o.policies) {
        put_rows(&mut ev, e.evaluation, &e.config, &e.report);
    }
    put_rows(&mut ev, "untuned", "all", &o.untuned);
    let ev = String::from_utf8(ev.into_inner().expect("an in-memory CSV flushes")).expect("UTF-8");
    let all = &o.all;
    let groups: Vec<(String, Vec<usize>)> = data
        .configs
        .iter()
        .map(|c| {
            let set: BTreeSet<usize> = c.shapes().into_iter().collect();
            (c.name.clone(), (0..all.shapes.len()).filter(|&i| set.contains(&all.shapes[i])).collect())
        })
        .collect();
    let title = format!(
        "one rule, every model on {} — fraction of the oracle per configuration",
        matrix.device.as_deref().unwrap_or(&matrix.gfx)
    );
    let in_train: BTreeSet<usize> = o.train_set.iter().copied().collect();
    let held_all: Vec<usize> = data.all_shapes().into_iter().filter(|s| !in_train.contains(s)).collect();
    let budgets = &MULTI_CURVE[..o.results.len() - 1];
    let mut points = sample_curve("sample", matrix, catalog, &o.train_set, &held_all, &o.results[1..], budgets);
    points.extend(o.lomo.iter().flat_map(|r| r.curve.iter().cloned()));
    let svg = compare::plot::groups_svg(all, &groups, &title)?;
    let png = compare::raster::svg_to_png(&svg)?;
    Ok(vec![
        GeneratedFile::new(COMPARE_CSV, compare::report::csv_with_vendor(all, &data.names(), &data.vendor)),
        GeneratedFile::new(EVALUATIONS_CSV, ev),
        GeneratedFile::new(SPEEDUP_SVG, svg),
        GeneratedFile::binary(SPEEDUP_PNG, png),
        GeneratedFile::new(CURVE_CSV, curve_csv(&points)),
    ])
}

/// What the job prints before the list of files.
fn terminal_text(data: &MultiData, provenance: &Provenance, o: &Outcome, folds_by: Option<String>) -> String {
    let mut text = super::outputs::run_header(provenance);
    let synth = o.synth();
    let _ = writeln!(
        text,
        "rule:     {} leaves ({} split-K leaves guarded), depth {}, instances {:?}; {} unusable training picks; \
         synthesized in {:.2} s\n",
        synth.leaves,
        synth.guards,
        synth.depth,
        synth.instances,
        synth.unusable,
        o.synth_time.as_secs_f64()
    );
    text.push_str(&rule_outline(&synth.rule, &data.catalog));
    if let Some(b) = &data.backends {
        let _ = writeln!(
            text,
            "\nbackends {b}: `synthesized` is the mixed rule, `rule[B]` each backend's own rule (the same training \
             shapes and limits), `oracle[B]` its oracle, `threshold` the best one-M split of two backends' defaults \
             on the training shapes, `oracle` the union oracle"
        );
    }
    for (title, report) in [
        ("(a) held-out grid shapes of the training configurations", &o.grid),
        ("(b) off-grid M of the training configurations", &o.off),
    ] {
        if report.shapes.is_empty() {
            let _ = writeln!(text, "\n{title}: no shapes");
            continue;
        }
        let _ = writeln!(text, "\n{title} ({} shapes):", report.shapes.len());
        text.push_str(&summary_table(report));
    }
    match folds_by {
        Some(line) => {
            let _ = writeln!(
                text,
                "\n(c) leave-one-model-out: not run (--no-folds; {} folds, one rule each); `{line}` without --no-folds \
                 runs them",
                data.configs.len()
            );
        }
        None => {
            let _ = writeln!(
                text,
                "\n(c) leave-one-model-out: per configuration, a rule trained on up to {} others (shapes of its (N, K) \
                 removed), scored on all its shapes ({:.2} s):",
                data.train_configs,
                o.lomo_time.as_secs_f64()
            );
            text.push_str(&lomo_table(&o.lomo, data, &o.all));
        }
    }
    let _ = writeln!(
        text,
        "\n(d) AITER's path on the {} shapes of every configuration without a tuned row (tuned table: the {} training shapes):",
        o.untuned.shapes.len(),
        o.train_set.len()
    );
    text.push_str(&summary_table(&o.untuned));
    text
}

fn lomo_table(rows: &[LomoRow], data: &MultiData, all: &Report) -> String {
    use synth_base::textable::{left, right, TextTable};
    let columns = vec![
        left("held out").min(18),
        right("shapes").min(6),
        right("LOMO rule").min(12),
        right("main rule").min(12),
        right("default").min(9),
        right("worst layer, LOMO rule").min(24),
        right("unusable").min(9),
    ];
    let mixed = data.backends.is_some();
    let mut columns = columns;
    if mixed {
        // The mixed rule against the best of the backends' own rules of the same fold.
        columns.push(right("x best rule[B]").min(14));
    }
    columns.push(left("trained on"));
    let mut t = TextTable::new(columns).gap(1).indent("  ");
    for r in rows {
        let c = data.configs.iter().find(|c| c.name == r.config).expect("row of a configuration");
        let set: BTreeSet<usize> = c.shapes().into_iter().collect();
        let idx: Vec<usize> = (0..all.shapes.len()).filter(|&i| set.contains(&all.shapes[i])).collect();
        let main = all.policy_index("synthesized").map_or(f64::NAN, |p| all.summarize(p, &idx).of_oracle);
        let mut row = vec![
            shown(&r.config),
            r.report.shapes.len().to_string(),
            format!("{:.3}", of_oracle(&r.report, "synthesized")),
            format!("{main:.3}"),
            format!("{:.3}", of_oracle(&r.report, "default")),
            worst_layer_text(&r.report, "synthesized"),
            unusable(&r.report, "synthesized").to_string(),
        ];
        if mixed {
            let best = r
                .report
                .policies
                .iter()
                .filter(|p| p.name.starts_with("rule["))
                .map(|p| p.summary.of_oracle)
                .fold(f64::NAN, f64::max);
            row.push(format!("{:.3}", of_oracle(&r.report, "synthesized") / best));
        }
        row.push(format!(
            "{} ({} shapes, {} leaves, {} instances)",
            shown(&r.trained_on.join(", ")),
            r.train_shapes,
            r.leaves,
            r.instances
        ));
        t.row(row);
    }
    t.render()
}

/// Per-shape unusable picks of `rule` over every shape of `data` (for checks): (shape, leaf) pairs whose
/// cell is not a usable measurement.
pub fn unmeasured_picks(
    data: &MultiData,
    rule: &synth_core::rule::Rule,
) -> Vec<(synth_core::table::Shape, synth_core::rule::Leaf)> {
    let m = &data.matrix;
    (0..m.shapes.len())
        .filter_map(|s| {
            let sh = m.shapes[s];
            let leaf = rule.eval(sh.m, sh.n, sh.k);
            let ok = m.candidate_index(&leaf.candidate()).is_some_and(|c| matches!(m.cell(s, c), Cell::Ok(_)));
            (!ok).then_some((sh, leaf))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(limits: LimitArgs, manifest: &str) -> MultiJob {
        MultiJob::resolve(&limits, &SampleArgs::default(), Effort::default(), Path::new(manifest)).unwrap()
    }

    #[test]
    fn the_main_job_is_decided_by_what_it_runs_with() {
        let main = job(LimitArgs::default(), DEFAULT_MANIFEST);
        assert!(main.is_main());
        assert_eq!(main.line().text(), "cargo run --release -- run");
        assert_eq!((main.limits.max_leaves, main.limits.max_instances), (16, Some(8)));
        // `--max-leaves 8` equals clap's value for the other jobs but not this job's: not the main job, and
        // the line keeps it (once, `cargo run --release -- run` would have trained 16 leaves instead).
        let eight = job(LimitArgs { max_leaves: Some(8), ..LimitArgs::default() }, DEFAULT_MANIFEST);
        assert!(!eight.is_main());
        assert_eq!(eight.line().text(), "cargo run --release -- run --max-leaves 8");
        let uniform = job(LimitArgs { weight: Some(Weighting::Uniform), ..LimitArgs::default() }, DEFAULT_MANIFEST);
        assert!(!uniform.is_main() && uniform.line().text().ends_with("--weight uniform"));
        assert!(!uniform.settings().limits.log_ratio);
        // The job's defaults given explicitly: still the main job.
        let sixteen =
            job(LimitArgs { max_leaves: Some(16), max_instances: Some(8), ..LimitArgs::default() }, DEFAULT_MANIFEST);
        assert!(sixteen.is_main());
        // The default manifest however it is named (its path in the crate, or a copy of its bytes).
        let by_path = synth_base::paths::crate_root().join(DEFAULT_MANIFEST);
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("datasets.toml");
        std::fs::write(&copy, super::super::data::EMBEDDED_MANIFEST.1).unwrap();
        for named in [by_path.as_path(), copy.as_path()] {
            let j = job(LimitArgs::default(), named.to_str().unwrap());
            assert!(j.is_main(), "{}", named.display());
            assert_eq!(j.line().text(), "cargo run --release -- run");
        }
        // Another manifest is never the main job.
        let other = job(LimitArgs::default(), "elsewhere/m.toml");
        assert!(!other.is_main() && other.line().text().contains("--manifest"));
        let effort = Effort { refine: false, ..Effort::default() };
        let no_refine =
            MultiJob::resolve(&LimitArgs::default(), &SampleArgs::default(), effort, Path::new(DEFAULT_MANIFEST))
                .unwrap();
        assert!(!no_refine.is_main() && no_refine.line().text().ends_with("--no-refine"));
    }
}
