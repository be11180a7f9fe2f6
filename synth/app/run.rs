//! `synth run`: the main job. Loads the latency table, keeps the model's layers, draws the training
//! sample (stratified M values × layers), synthesizes a rule within the limits, writes `generated/`
//! (C++ header, instance list, Rust module, comparison CSV and SVG, leaves curve), and prints the
//! comparison on every held-out shape against the default, the offline-tuned table built from the same
//! training shapes, the nearest-tuned-M lookup, the published rule and the oracle.

use std::path::PathBuf;
use std::time::Instant;

use std::fmt::Write as _;

use anyhow::bail;

use crate::catalog::Catalog;
use crate::compare::{self, Policy};
use crate::render::{self, writer::GeneratedFile, Provenance};
use crate::rule::Rule;

use crate::synthesize::curve::{curve_csv, curve_table, cv_curve, sample_curve};
use crate::synthesize::synthesize_budgets;

use super::invocation::Invocation;
use super::outputs::out_dir;
use super::session::{summary_figure, DataArgs, LimitArgs, SampleArgs, Scope, Session, DEFAULT_MODEL};

/// Comparison CSV written into the output directory.
pub const COMPARE_CSV: &str = "compare.csv";
/// Speed-up plot written into the output directory.
pub const SPEEDUP_SVG: &str = "speedup.svg";
/// The same plot as a PNG ([`crate::compare::raster`]), beside the SVG.
pub const SPEEDUP_PNG: &str = "speedup.png";
/// The rule in JSON (the form `synth drift` and `synth check` read) written into the output directory.
pub const RULE_JSON: &str = "rule.json";
/// Leaves-versus-quality curve written into the output directory.
pub const CURVE_CSV: &str = "leaves_curve.csv";
/// Leaf budgets of the curve.
pub const CURVE_BUDGETS: [usize; 4] = [4, 8, 16, 32];
/// Folds of the cross-validated curve.
pub const CV_FOLDS: usize = 5;
/// Options of `synth run` that choose only where and how output goes: never in the "Regenerate with" line.
pub const OUTPUT_ONLY: [&str; 3] = ["out", "check", "curve"];

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
    /// Depth of the exact search phase (default: from the number of training rows).
    #[arg(long)]
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
    pub tuned_train: super::tuned::TunedTrainArgs,
    /// Dataset manifest of the multi-model job, run when neither --dataset, --model nor --spec is given
    /// (which journals make up which (model, TP) configuration, off-grid M, training pool)
    /// [default: measurements/h200/datasets.toml of the crate].
    #[arg(long)]
    pub manifest: Option<PathBuf>,
}

/// Runs the main job; `invocation` gives the "Regenerate with" line.
pub fn run(args: RunArgs, invocation: &Invocation) -> anyhow::Result<()> {
    super::tuned::check_flags(&args.tuned_train, invocation, super::tuned::RUN_FLAGS)?;
    if !args.tuned_train.train_tuned.is_empty() {
        return super::tuned::run_from_run(&args);
    }
    let given_manifest = super::multi_eval::manifest_of(&args.data.dataset)
        .filter(|_| args.data.model.is_none() && args.data.spec.is_none() && args.manifest.is_none());
    let single = given_manifest.is_none()
        && (!args.data.dataset.is_empty() || args.data.model.is_some() || args.data.spec.is_some());
    if !single {
        if args.train_all || args.tuned.is_some() || !args.rule.is_empty() || args.curve {
            bail!(
                "--train-all, --tuned, --rule and --curve belong to the single-dataset job: add --dataset FILE or \
                 --model NAME (the multi-model job, without them, reads --manifest)"
            );
        }
        let manifest = given_manifest
            .or_else(|| args.manifest.clone())
            .unwrap_or_else(|| PathBuf::from(super::multi::DEFAULT_MANIFEST));
        return super::multi::run(&args, &manifest, invocation);
    }
    if args.manifest.is_some() {
        bail!("--manifest is read by the multi-model job: leave out --dataset, --model and --spec");
    }
    let started = Instant::now();
    if args.limits.max_leaves == 0 {
        bail!("--max-leaves must be at least 1");
    }
    if args.limits.max_instances == Some(0) {
        bail!("--max-instances must be at least 1");
    }
    if args.sample.sample_m == 0 && !args.train_all {
        bail!("--sample-m must be at least 1 (or pass --train-all)");
    }
    let session = Session::open(&args.data, Scope::DefaultModel)?;
    // The same inputs give the same line however they were named (the embedded dataset by path, the
    // default model by name), so `--check` compares what the files would be for these inputs.
    let mut skip = OUTPUT_ONLY.to_vec();
    if session.source.is_default() {
        skip.push("dataset");
    }
    if args.data.spec.is_none() && args.data.model.as_deref() == Some(DEFAULT_MODEL) {
        skip.push("model");
    }
    let regenerate = invocation.regenerate_line(&skip);
    // The main job is the multi-model job (no --dataset, --model or --spec): this single-dataset job never
    // writes the committed generated/ unless --out says so.
    let main_job = false;
    let (catalog, matrix, what, names, shapes) =
        (&session.catalog, &session.matrix, &session.what, &session.names, &session.shapes);
    let sample = if args.train_all { session.every_shape() } else { session.sample(&args.sample) };
    let (train, heldout, picked) = (&sample.train, &sample.heldout, &sample.picked);
    if train.is_empty() {
        bail!("the training sample is empty");
    }
    if heldout.is_empty() {
        bail!("every shape is in the training sample: nothing is held out; lower --sample-m or pass --train-all");
    }
    let weight = args.limits.weight;
    super::session::check_prune_from(args.limits.prune_from, args.limits.max_leaves)?;
    let limits = crate::synthesize::Limits {
        max_depth: args.limits.max_depth,
        max_leaves: args.limits.max_leaves,
        max_instances: args.limits.max_instances,
        features: args.limits.features,
        split_k_guards: !args.no_split_k_guards,
        refine_thresholds: !args.no_refine,
        exact_depth: args.exact_depth,
        log_ratio: weight.log_ratio(),
        prune_from: args.limits.prune_from,
        ..crate::synthesize::Limits::default()
    };
    let weights = weight.weights(matrix, train);

    // Synthesis: one search serves the rule and the sample curve.
    let t0 = Instant::now();
    let mut budgets = vec![limits.max_leaves];
    budgets.extend(CURVE_BUDGETS);
    let results = synthesize_budgets(matrix, catalog, train, weights.as_deref(), &limits, &budgets)?;
    let synth = results[0].clone();
    let synth_time = t0.elapsed();

    // Comparison on the held-out shapes.
    let mut extra = Vec::new();
    if let Some(path) = &args.tuned {
        let (name, table) = session.tuned_file(path, args.tuned_any_device)?;
        extra.push(Policy::Tuned { name, table });
    }
    extra.extend(session.rule_policies(&args.rule)?);
    let policies = session.standard_policies(train, extra, ("synthesized", &synth.rule))?;
    let report = compare::evaluate(matrix, catalog, &policies, heldout);

    // Curves.
    let t1 = Instant::now();
    let sample_points = if args.train_all {
        Vec::new()
    } else {
        sample_curve(matrix, catalog, train, heldout, &results[1..], &CURVE_BUDGETS)
    };
    let cv_points = cv_curve(matrix, catalog, shapes, CV_FOLDS, weight, &limits, &CURVE_BUDGETS)?;
    let curve_time = t1.elapsed();
    let mut points = sample_points;
    points.extend(cv_points);

    // Provenance and files.
    let training_text = if args.train_all {
        format!("all {} shapes of {what} (weight {:?})", train.len(), weight).to_lowercase()
    } else {
        format!(
            "{} shapes of {what}: M in {:?} (sample_m of {} dataset M values, {} strata, seed {}) × {} layers; weight {}",
            train.len(),
            picked,
            matrix.m_values().len(),
            args.sample.sample_m,
            args.sample.seed,
            session.layers.len(),
            format!("{weight:?}").to_lowercase()
        )
    };
    let scope = if args.train_all { "in-sample" } else { "held-out" };
    let figures = vec![synth.shape_line(), summary_figure(scope, &report, "synthesized")?];
    let provenance =
        Provenance { dataset: session.dataset_text(), training: training_text, figures, command: regenerate };
    let target = out_dir(args.out.as_deref(), main_job, "run")?;
    let out = target.dir.clone();
    let generated = render::generated_files(&synth.rule, catalog, matrix, &provenance);
    let title = format!("{what} on {} — {scope} shapes", matrix.device.as_deref().unwrap_or(&matrix.gfx));
    let mut rule_json = crate::rule::to_json(&synth.rule);
    rule_json.push('\n');
    let svg = compare::plot::speedup_svg(&report, names, &title)?;
    let png = compare::raster::svg_to_png(&svg)?;
    let extra = vec![
        GeneratedFile::new(RULE_JSON, rule_json),
        GeneratedFile::new(COMPARE_CSV, compare::report::csv(&report, names)),
        GeneratedFile::new(SPEEDUP_SVG, svg),
        GeneratedFile::binary(SPEEDUP_PNG, png),
        GeneratedFile::new(CURVE_CSV, curve_csv(&points)),
    ];
    // One all-or-nothing write of every output file.
    let aiter_patch =
        GeneratedFile::new(crate::aiter::PATCH_FILE, crate::aiter::render_patch(&synth.rule, catalog, &provenance)?);
    let written = super::outputs::write_run_files(&out, generated, extra, aiter_patch, args.check);

    // Terminal output.
    let mut text = super::outputs::run_header(&provenance);
    let _ = writeln!(
        text,
        "rule:     {} leaves ({} split-K guards), depth {}, instances {:?}; its picks sum to {:.3} ms of measured \
         latency on the training shapes ({} unusable picks); synthesized in {:.2} s\n",
        synth.leaves,
        synth.guards,
        synth.depth,
        synth.instances,
        synth.train_us / 1000.0,
        synth.unusable,
        synth_time.as_secs_f64()
    );
    text.push_str(&rule_outline(&synth.rule, catalog));
    let _ = writeln!(text, "\ncomparison on {} {scope} shapes:", report.shapes.len());
    let _ = writeln!(text, "{}", compare::report::table(&report, names));
    if args.curve {
        let _ = writeln!(text, "leaves versus quality (curve computed in {:.2} s):", curve_time.as_secs_f64());
        let _ = writeln!(text, "{}", curve_table(&points));
    }
    let end = super::outputs::RunEnd {
        target: &target,
        main_job,
        out_given: args.out.is_some(),
        check: args.check,
        blank_line: false,
        started,
    };
    super::outputs::finish_run(text, written, &end)
}

/// A short outline of a rule: conditions in C++ syntax, leaves as `#id BMxBNxBK vP, splitK s (KBatch 2^s)`
/// (splitK is the log2 of AITER's KBatch: the number of K splits).
pub fn rule_outline(rule: &Rule, catalog: &Catalog) -> String {
    fn leaf_text(leaf: &crate::rule::Leaf, catalog: &Catalog) -> String {
        let tile = catalog.legacy_by_id(leaf.kernel_id).map_or_else(String::new, |inst| {
            let (bm, bn, bk) = inst.tile();
            let v = inst.legacy_params().map_or(String::new(), |p| format!(" v{}", p.pipeline));
            format!(" {bm}x{bn}x{bk}{v}")
        });
        format!("#{}{tile}, splitK {} (KBatch {})", leaf.kernel_id, leaf.split_k, 1u64 << leaf.split_k.min(63))
    }
    fn walk(node: &crate::rule::Node, catalog: &Catalog, indent: usize, out: &mut String) {
        let pad = "  ".repeat(indent);
        match node {
            crate::rule::Node::Leaf(l) => {
                let _ = writeln!(out, "{pad}-> {}", leaf_text(l, catalog));
            }
            crate::rule::Node::Chain { branches, otherwise } => {
                for (i, (cond, child)) in branches.iter().enumerate() {
                    let kw = if i == 0 { "if" } else { "else if" };
                    let _ = writeln!(out, "{pad}{kw} {}:", crate::rule::text::cond_to_cpp(cond));
                    walk(child, catalog, indent + 1, out);
                }
                let _ = writeln!(out, "{pad}else:");
                walk(otherwise, catalog, indent + 1, out);
            }
        }
    }
    let mut out = String::new();
    walk(&rule.root, catalog, 0, &mut out);
    out
}
