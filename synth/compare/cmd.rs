//! `synth compare`: score policies on a latency table and write the per-shape CSV and SVG plot.

use std::path::PathBuf;

use anyhow::bail;

use crate::catalog::Catalog;
use crate::synthesize::pipeline::{
    crate_root, display_path, layer_names, load_matrix, load_tuned, model_layers, published_rule, shapes_of_layers,
    training_sample, DEFAULT_DATASET, PUBLISHED_RULE_NAME,
};

use super::report::LayerNames;
use super::{evaluate, Policy, TunedTable};

#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// Latency table: a gemm-synth measurement CSV or an AITER tuned/profile CSV
    /// [default: measurements/h200/qwen3-32b-tp2.csv of the crate]
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Keep only this built-in model's layers (qwen3-32b, llama-3.1-8b, ...); default: every shape.
    #[arg(long)]
    pub model: Option<String>,
    /// Model spec TOML file instead of a built-in model.
    #[arg(long, conflicts_with = "model")]
    pub spec: Option<PathBuf>,
    /// Tensor-parallel degree of the model's layers.
    #[arg(long, default_value_t = 2)]
    pub tp: u32,
    /// Rule files (C++, Rust or JSON) to score; each is named after its path.
    #[arg(long)]
    pub rule: Vec<PathBuf>,
    /// Also score the published rule (GEAK-HIP write-up).
    #[arg(long)]
    pub published: bool,
    /// AITER tuned CSVs to score with AITER's lookup (the first is the tuned baseline and feeds nearest-M).
    #[arg(long)]
    pub tuned: Vec<PathBuf>,
    /// Apply the --tuned rows whatever device they were tuned on (AITER would ignore them).
    #[arg(long)]
    pub tuned_any_device: bool,
    /// Also build a tuned table from the training sample (best kernel of each sampled shape), as AITER's
    /// tuner would from the same measurements.
    #[arg(long)]
    pub tuned_sample: bool,
    /// Number of M values of the training sample (for --tuned-sample and --held-out).
    #[arg(long, default_value_t = 10)]
    pub sample_m: usize,
    /// Seed of the training sample.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Score only the shapes outside the training sample.
    #[arg(long)]
    pub held_out: bool,
    /// Write the per-shape × policy CSV here.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write the speed-up plot (SVG) here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// Runs `synth compare`.
pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    let catalog = Catalog::embedded();
    let dataset = args.dataset.clone().unwrap_or_else(|| crate_root().join(DEFAULT_DATASET));
    let matrix = load_matrix(&dataset, &catalog)?;
    let (what, names, shapes): (String, LayerNames, Vec<usize>) = if args.model.is_some() || args.spec.is_some() {
        let (model, layers) = model_layers(args.model.as_deref().unwrap_or(""), args.spec.as_deref(), args.tp)?;
        let what = format!("{model} TP={}", args.tp);
        let shapes = shapes_of_layers(&matrix, &layers, &what)?;
        (what, layer_names(&layers), shapes)
    } else {
        ("every layer".to_string(), LayerNames::new(), (0..matrix.shapes.len()).collect())
    };
    let (train, heldout, picked) = training_sample(&matrix, &shapes, args.sample_m, args.seed);
    let scored = if args.held_out { heldout } else { shapes.clone() };
    if scored.is_empty() {
        bail!("no shape to score (every shape is in the training sample); drop --held-out or lower --sample-m");
    }
    let mut tables: Vec<(String, TunedTable)> = Vec::new();
    for path in &args.tuned {
        tables.push((
            format!("tuned:{}", display_path(path)),
            load_tuned(path, &catalog, &matrix, args.tuned_any_device)?,
        ));
    }
    if args.tuned_sample {
        let t = TunedTable::from_matrix(&matrix, &train, &format!("best of {} sampled shapes", train.len()));
        tables.push(("tuned".to_string(), t));
    }
    let mut policies = vec![Policy::Default];
    for (name, table) in &tables {
        policies.push(Policy::Tuned { name: name.clone(), table: table.clone() });
    }
    if let Some((name, table)) = tables.first() {
        let nearest =
            name.strip_prefix("tuned").map_or_else(|| format!("nearest-M:{name}"), |rest| format!("nearest-M{rest}"));
        policies.push(Policy::NearestM { name: nearest, table: table.clone() });
    }
    if args.published {
        policies.push(Policy::Rule { name: PUBLISHED_RULE_NAME.into(), rule: published_rule(&catalog)? });
    }
    for path in &args.rule {
        let rule = crate::rule::load(path, &catalog).map_err(|e| anyhow::anyhow!("{e}"))?;
        policies.push(Policy::Rule { name: display_path(path), rule });
    }
    policies.push(Policy::Oracle);
    let report = evaluate(&matrix, &catalog, &policies, &scored);
    let mut text = format!(
        "dataset: {} ({}, {} CUs); {what}; {} shapes scored{}\n",
        display_path(&dataset),
        matrix.gfx,
        matrix.cu_num,
        report.shapes.len(),
        if args.held_out { format!(" (held out from the sample M = {picked:?})") } else { String::new() }
    );
    text.push_str(&super::report::table(&report, &names));
    text.push_str(&crate::tuned::agreement_text(&matrix, &catalog, &policies, &report.shapes));
    if let Some(path) = &args.csv {
        std::fs::write(path, super::report::csv(&report, &names))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        text.push_str(&format!("written: {}\n", path.display()));
    }
    if let Some(path) = &args.svg {
        let title = format!("{what} on {}", matrix.device.as_deref().unwrap_or(&matrix.gfx));
        std::fs::write(path, super::plot::speedup_svg(&report, &names, &title)?)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        text.push_str(&format!("written: {}\n", path.display()));
    }
    crate::synthesize::pipeline::emit(&text)
}
