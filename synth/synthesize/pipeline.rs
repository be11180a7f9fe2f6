//! `synth run`: the main job. Loads the latency table, keeps the model's layers, draws the training
//! sample (stratified M values × layers), synthesizes a rule within the limits, writes `generated/`
//! (C++ header, instance list, Rust module, comparison CSV and SVG, leaves curve), and prints the
//! comparison on every held-out shape against the default, the offline-tuned table built from the same
//! training shapes, the nearest-tuned-M lookup, the published rule and the oracle.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::{bail, Context};

use crate::catalog::Catalog;
use crate::compare::{self, report::LayerNames, Policy, TunedTable};
use crate::render::{self, writer::GeneratedFile, Provenance};
use crate::rule::Rule;
use crate::shapes::{sample_m, Layer, ModelSpec};
use crate::table::LatencyMatrix;

use super::curve::{curve_csv, curve_table, cv_curve, sample_curve};
use super::{synthesize_budgets, FeatureSet, Limits, Weighting};

/// Dataset used when `--dataset` is not given, relative to the crate root.
pub const DEFAULT_DATASET: &str = "measurements/h200/qwen3-32b-tp2.csv";
/// The published rule (GEAK-HIP write-up), scored next to the synthesized one.
pub const PUBLISHED_RULE: &str = include_str!("../../tests/data/rules/geak_blog_rule.cpp");
/// Name under which the published rule is reported.
pub const PUBLISHED_RULE_NAME: &str = "published-rule";
/// Comparison CSV written into the output directory.
pub const COMPARE_CSV: &str = "compare.csv";
/// Speed-up plot written into the output directory.
pub const SPEEDUP_SVG: &str = "speedup.svg";
/// The rule in JSON (the form `synth drift` and `synth check` read) written into the output directory.
pub const RULE_JSON: &str = "rule.json";
/// Leaves-versus-quality curve written into the output directory.
pub const CURVE_CSV: &str = "leaves_curve.csv";
/// Leaf budgets of the curve.
pub const CURVE_BUDGETS: [usize; 4] = [4, 8, 16, 32];
/// Folds of the cross-validated curve.
pub const CV_FOLDS: usize = 5;

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Latency table: a gemm-synth measurement CSV or an AITER tuned/profile CSV
    /// [default: measurements/h200/qwen3-32b-tp2.csv of the crate]
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Built-in model whose layers to keep (qwen3-32b, llama-3.1-8b, llama-3.1-70b, qwen2.5-72b).
    #[arg(long, default_value = "qwen3-32b", conflicts_with = "spec")]
    pub model: String,
    /// Model spec TOML file instead of a built-in model.
    #[arg(long)]
    pub spec: Option<PathBuf>,
    /// Tensor-parallel degree of the model's layers.
    #[arg(long, default_value_t = 2)]
    pub tp: u32,
    /// Number of M values in the training sample (stratified in log2 M over the dataset's M values).
    #[arg(long, default_value_t = 10)]
    pub sample_m: usize,
    /// Seed of the training sample.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Train on every shape (the comparison is then in-sample).
    #[arg(long)]
    pub train_all: bool,
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
    /// Features the splits may test.
    #[arg(long, value_enum, default_value_t = FeatureSet::Machine)]
    pub features: FeatureSet,
    /// Depth of the exact search phase (default: from the number of training rows).
    #[arg(long)]
    pub exact_depth: Option<usize>,
    /// Keep the search's thresholds (halfway between training values of the first feature in preference
    /// order) instead of refining them against a nearest-M reading of the training data.
    #[arg(long)]
    pub no_refine: bool,
    /// Do not guard split-K leaves with the tile-count boundary seen on the training shapes.
    #[arg(long)]
    pub no_split_k_guards: bool,
    /// Output directory [default: generated/ of the crate].
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
}

/// The crate root (where `measurements/` and `generated/` live), whatever the working directory.
pub fn crate_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `path` relative to the crate root when it is inside it, else as given (for provenance text).
pub fn display_path(path: &Path) -> String {
    let root = crate_root();
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map(|d| d.join(path)).unwrap_or_else(|_| path.to_path_buf())
    };
    match abs.strip_prefix(root) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

/// Loads a latency table, naming the file on error.
pub fn load_matrix(path: &Path, catalog: &Catalog) -> anyhow::Result<LatencyMatrix> {
    if !path.exists() {
        bail!("dataset {} does not exist; measure it with `synth bench` or pass --dataset FILE", path.display());
    }
    LatencyMatrix::load(path, catalog)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("cannot load dataset {}", path.display()))
}

/// A model's layers at a TP, from a built-in name or a spec file.
pub fn model_layers(model: &str, spec: Option<&Path>, tp: u32) -> anyhow::Result<(String, Vec<Layer>)> {
    let spec = match spec {
        Some(p) => ModelSpec::load(p)?,
        None => ModelSpec::builtin(model)?,
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
    let ms: Vec<u32> =
        shapes.iter().map(|&s| matrix.shapes[s].m).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
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
    let (t, other, _) = TunedTable::from_rows(&rows, catalog, device, &source);
    if t.is_empty() {
        let devices: std::collections::BTreeSet<String> =
            rows.iter().map(|r| format!("{}/{} CUs", r.gfx, r.cu_num)).collect();
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

/// Runs the main job.
pub fn run(args: RunArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    if args.max_leaves == 0 {
        bail!("--max-leaves must be at least 1");
    }
    if args.max_instances == Some(0) {
        bail!("--max-instances must be at least 1");
    }
    if args.sample_m == 0 && !args.train_all {
        bail!("--sample-m must be at least 1 (or pass --train-all)");
    }
    let catalog = Catalog::embedded();
    let dataset = args.dataset.clone().unwrap_or_else(|| crate_root().join(DEFAULT_DATASET));
    let matrix = load_matrix(&dataset, &catalog)?;
    let (model, layers) = model_layers(&args.model, args.spec.as_deref(), args.tp)?;
    let what = format!("{model} TP={}", args.tp);
    let names = layer_names(&layers);
    let shapes = shapes_of_layers(&matrix, &layers, &what)?;
    let (train, heldout, picked) = if args.train_all {
        (shapes.clone(), shapes.clone(), Vec::new())
    } else {
        training_sample(&matrix, &shapes, args.sample_m, args.seed)
    };
    if train.is_empty() {
        bail!("the training sample is empty");
    }
    if heldout.is_empty() {
        bail!("every shape is in the training sample: nothing is held out; lower --sample-m or pass --train-all");
    }
    let limits = Limits {
        max_depth: args.max_depth,
        max_leaves: args.max_leaves,
        max_instances: args.max_instances,
        features: args.features,
        split_k_guards: !args.no_split_k_guards,
        refine_thresholds: !args.no_refine,
        exact_depth: args.exact_depth,
        ..Limits::default()
    };
    let weights = args.weight.weights(&matrix, &train);

    // Synthesis: one search serves the rule and the sample curve.
    let t0 = Instant::now();
    let mut budgets = vec![args.max_leaves];
    budgets.extend(CURVE_BUDGETS);
    let results = synthesize_budgets(&matrix, &catalog, &train, weights.as_deref(), &limits, &budgets)?;
    let synth = results[0].clone();
    let synth_time = t0.elapsed();

    // Comparison on the held-out shapes.
    let tuned = TunedTable::from_matrix(&matrix, &train, &format!("best of {} training shapes", train.len()));
    let mut policies = vec![
        Policy::Default,
        Policy::Tuned { name: "tuned".into(), table: tuned.clone() },
        Policy::NearestM { name: "nearest-M".into(), table: tuned },
    ];
    if let Some(path) = &args.tuned {
        policies.push(Policy::Tuned {
            name: format!("tuned:{}", display_path(path)),
            table: load_tuned(path, &catalog, &matrix, args.tuned_any_device)?,
        });
    }
    policies.push(Policy::Rule { name: PUBLISHED_RULE_NAME.into(), rule: published_rule(&catalog)? });
    for path in &args.rule {
        let rule = crate::rule::load(path, &catalog).map_err(|e| anyhow::anyhow!("{e}"))?;
        policies.push(Policy::Rule { name: display_path(path), rule });
    }
    policies.push(Policy::Rule { name: "synthesized".into(), rule: synth.rule.clone() });
    policies.push(Policy::Oracle);
    let report = compare::evaluate(&matrix, &catalog, &policies, &heldout);

    // Curves.
    let t1 = Instant::now();
    let sample_points = if args.train_all {
        Vec::new()
    } else {
        sample_curve(&matrix, &catalog, &train, &heldout, &results[1..], &CURVE_BUDGETS)
    };
    let cv_points = cv_curve(&matrix, &catalog, &shapes, CV_FOLDS, args.weight, &limits, &CURVE_BUDGETS)?;
    let curve_time = t1.elapsed();
    let mut points = sample_points;
    points.extend(cv_points);

    // Provenance and files.
    let synth_idx = report.policy_index("synthesized").expect("synthesized policy scored");
    let s = &report.policies[synth_idx].summary;
    let dataset_text = format!(
        "{} ({}, {} CUs{}; {} shapes × {} candidates)",
        display_path(&dataset),
        matrix.gfx,
        matrix.cu_num,
        matrix.device.as_deref().map(|d| format!(", {d}")).unwrap_or_default(),
        matrix.shapes.len(),
        matrix.candidates.len()
    );
    let training_text = if args.train_all {
        format!("all {} shapes of {what} (weight {:?})", train.len(), args.weight).to_lowercase()
    } else {
        format!(
            "{} shapes of {what}: M in {:?} (sample_m of {} dataset M values, {} strata, seed {}) × {} layers; weight {}",
            train.len(),
            picked,
            matrix.m_values().len(),
            args.sample_m,
            args.seed,
            layers.len(),
            format!("{:?}", args.weight).to_lowercase()
        )
    };
    let scope = if args.train_all { "in-sample" } else { "held-out" };
    let figures = vec![
        format!("{} leaves, depth {}, {} instances: {:?}", synth.leaves, synth.depth, synth.instances.len(), synth.instances),
        format!(
            "{scope} ({} shapes): {:.3}x default (geomean), {:.3}x default (total time), {:.3}x tuned (geomean), {:.3}x tuned (total time), {:.3} of oracle",
            report.shapes.len(),
            s.geomean_vs_default,
            s.total_vs_default,
            s.geomean_vs_tuned.unwrap_or(f64::NAN),
            s.total_vs_tuned.unwrap_or(f64::NAN),
            s.of_oracle
        ),
    ];
    let provenance =
        Provenance { dataset: dataset_text, training: training_text, figures, command: command_line(&args) };
    let out = args.out.clone().unwrap_or_else(|| crate_root().join("generated"));
    let written = render::write_generated(&synth.rule, &catalog, &matrix, &provenance, &out, args.check);
    let title = format!("{what} on {} — {scope} shapes", matrix.device.as_deref().unwrap_or(&matrix.gfx));
    let mut rule_json = crate::rule::to_json(&synth.rule);
    rule_json.push('\n');
    let extra = vec![
        GeneratedFile::new(RULE_JSON, rule_json),
        GeneratedFile::new(COMPARE_CSV, compare::report::csv(&report, &names)),
        GeneratedFile::new(SPEEDUP_SVG, compare::plot::speedup_svg(&report, &names, &title)?),
        GeneratedFile::new(CURVE_CSV, curve_csv(&points)),
    ];
    let extra_written = render::writer::write_files(&out, &extra, args.check);
    let aiter_patch =
        GeneratedFile::new(crate::aiter::PATCH_FILE, crate::aiter::render_patch(&synth.rule, &catalog, &provenance)?);
    let aiter_written =
        render::writer::write_files(&out.join(crate::aiter::GENERATED_SUBDIR), &[aiter_patch], args.check);

    // Terminal output.
    let mut text = String::new();
    let _ = writeln!(text, "dataset:  {}", provenance.dataset);
    let _ = writeln!(text, "training: {}", provenance.training);
    let _ = writeln!(
        text,
        "rule:     {} leaves ({} split-K guards), depth {}, instances {:?}; training time {:.3} ms ({} unusable picks); \
         synthesized in {:.2} s\n",
        synth.leaves,
        synth.guards,
        synth.depth,
        synth.instances,
        synth.train_us / 1000.0,
        synth.unusable,
        synth_time.as_secs_f64()
    );
    text.push_str(&rule_outline(&synth.rule, &catalog));
    let _ = writeln!(text, "\ncomparison on {} {scope} shapes:", report.shapes.len());
    let _ = writeln!(text, "{}", compare::report::table(&report, &names));
    if args.curve {
        let _ = writeln!(text, "leaves versus quality (curve computed in {:.2} s):", curve_time.as_secs_f64());
        let _ = writeln!(text, "{}", curve_table(&points));
    }
    let mut paths = Vec::new();
    let mut errors = Vec::new();
    for result in [written, extra_written, aiter_written] {
        match result {
            Ok(p) => paths.extend(p),
            Err(e) => errors.push(format!("{e:#}")),
        }
    }
    let verb = if args.check { "up to date" } else { "written" };
    if errors.is_empty() {
        for f in &paths {
            let _ = writeln!(text, "{verb}: {}", display_path(f));
        }
        let _ = writeln!(text, "total {:.2} s", started.elapsed().as_secs_f64());
    }
    emit(&text)?;
    if !errors.is_empty() {
        let hint = if args.check {
            "\nregenerate with `cargo run --release -- run` (same options) and commit the result"
        } else {
            ""
        };
        bail!("{}{hint}", errors.join("\n"));
    }
    Ok(())
}

/// Writes `text` to stdout; a closed pipe (`synth run | head`) is not an error.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(anyhow::anyhow!("cannot write to stdout: {e}")),
        _ => Ok(()),
    }
}

/// A short outline of a rule: conditions in C++ syntax, leaves as `#id BMxBNxBK vP, splitK s`.
pub fn rule_outline(rule: &Rule, catalog: &Catalog) -> String {
    fn leaf_text(leaf: &crate::rule::Leaf, catalog: &Catalog) -> String {
        let tile = catalog.legacy_by_id(leaf.kernel_id).map_or_else(String::new, |inst| {
            let (bm, bn, bk) = inst.tile();
            let v = inst.legacy_params().map_or(String::new(), |p| format!(" v{}", p.pipeline));
            format!(" {bm}x{bn}x{bk}{v}")
        });
        format!("#{}{tile}, splitK {}", leaf.kernel_id, leaf.split_k)
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

/// The command that regenerates the outputs (non-default options only; never --check/--curve/--out).
pub fn command_line(args: &RunArgs) -> String {
    let mut cmd = String::from("cargo run --release -- run");
    if let Some(d) = &args.dataset {
        cmd += &format!(" --dataset {}", display_path(d));
    }
    if let Some(spec) = &args.spec {
        cmd += &format!(" --spec {}", display_path(spec));
    } else if args.model != "qwen3-32b" {
        cmd += &format!(" --model {}", args.model);
    }
    if args.tp != 2 {
        cmd += &format!(" --tp {}", args.tp);
    }
    if args.train_all {
        cmd += " --train-all";
    } else {
        if args.sample_m != 10 {
            cmd += &format!(" --sample-m {}", args.sample_m);
        }
        if args.seed != 0 {
            cmd += &format!(" --seed {}", args.seed);
        }
    }
    if args.max_depth != 6 {
        cmd += &format!(" --max-depth {}", args.max_depth);
    }
    if args.max_leaves != 8 {
        cmd += &format!(" --max-leaves {}", args.max_leaves);
    }
    if let Some(k) = args.max_instances {
        cmd += &format!(" --max-instances {k}");
    }
    if args.weight != Weighting::Uniform {
        cmd += &format!(" --weight {}", format!("{:?}", args.weight).to_lowercase());
    }
    if args.features != FeatureSet::Machine {
        cmd += &format!(" --features {}", format!("{:?}", args.features).to_lowercase());
    }
    if args.no_refine {
        cmd += " --no-refine";
    }
    if let Some(d) = args.exact_depth {
        cmd += &format!(" --exact-depth {d}");
    }
    if args.no_split_k_guards {
        cmd += " --no-split-k-guards";
    }
    if let Some(t) = &args.tuned {
        cmd += &format!(" --tuned {}", display_path(t));
        if args.tuned_any_device {
            cmd += " --tuned-any-device";
        }
    }
    for r in &args.rule {
        cmd += &format!(" --rule {}", display_path(r));
    }
    cmd
}
