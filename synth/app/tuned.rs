//! `synth run --train-tuned FILE...`: learn a rule from AITER's tuned tables, evaluate it
//! leave-one-table-out, and write the header, instance list, Rust module and rule JSON into `--out`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::bail;

use super::run::{rule_outline, RULE_JSON};
use super::session::display_path;
use crate::catalog::Catalog;
use crate::render::{self, writer::GeneratedFile, Provenance};
use crate::synthesize::{FeatureSet, Limits};
use crate::table::LatencyMatrix;

use crate::tuned::{leave_one_out, loto_csv, loto_table, parse_device, rule_agreement, train, AgreeWeight, TunedSet};

/// Leave-one-table-out figures written into the output directory.
pub const LOTO_CSV: &str = "leave_one_table_out.csv";

/// Training on tuned tables (flattened into `synth run` and `synth search`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TunedTrainArgs {
    /// AITER tuned CSVs to train on instead of a latency table (repeat for several): classification
    /// against each row's tuned (kernel, splitK). Needs --out.
    #[arg(long = "train-tuned")]
    pub train_tuned: Vec<PathBuf>,
    /// Device whose rows of the --train-tuned tables are used (GFX:CU).
    #[arg(long, default_value = "gfx942:304")]
    pub train_device: String,
    /// Agreement objective of the written rule: every row once, each row by its tuned time, or every M band
    /// weighing the same (band).
    #[arg(long, value_enum, default_value_t = AgreeWeight::Uniform)]
    pub agree_weight: AgreeWeight,
}

/// The shared budgets of a tuned-table training (from the `run`/`search` flags).
#[derive(Debug, Clone)]
pub struct Budgets {
    pub max_depth: usize,
    pub max_leaves: usize,
    pub max_instances: Option<usize>,
    pub features: FeatureSet,
    pub exact_depth: Option<usize>,
    pub refine: bool,
    pub prune_from: Option<usize>,
}

/// The flags `run` and `search` share that apply to a --train-tuned training (the tables and the budgets).
const TUNED_FLAGS: &[&str] = &[
    "--train-tuned",
    "--train-device",
    "--agree-weight",
    "--max-depth",
    "--max-leaves",
    "--max-instances",
    "--features",
    "--prune-from",
    "--out",
];

/// `run`'s own flags that apply to a --train-tuned training, besides [`TUNED_FLAGS`]; any other given with
/// tables is an error rather than silently ignored.
pub const RUN_FLAGS: &[&str] = &["--exact-depth", "--no-refine"];

/// `search`'s own flags that apply to a --train-tuned training, besides [`TUNED_FLAGS`]: the agent loop's.
pub const SEARCH_FLAGS: &[&str] = &[
    "--agent",
    "--agent-timeout",
    "--base-url",
    "--chat-model",
    "--api-key-env",
    "--temperature",
    "--iterations",
    "--offspring",
    "--repair-limit",
    "--patience",
    "--trace",
    "--resume",
    "--jobs",
    "--seed",
    "--quiet",
];

/// With tables (`args.train_tuned`), one error naming the given flags in neither [`TUNED_FLAGS`] nor
/// `applies` (the command's own flags that apply); without, one error when a tuned-table-only flag is given.
pub fn check_flags(
    args: &TunedTrainArgs,
    invocation: &super::invocation::Invocation,
    applies: &[&str],
) -> anyhow::Result<()> {
    let given = invocation.given_flags();
    if args.train_tuned.is_empty() {
        let tuned: Vec<&String> =
            given.iter().filter(|f| ["--agree-weight", "--train-device"].contains(&f.as_str())).collect();
        if !tuned.is_empty() {
            let list = tuned.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
            let (verb, pron) = if tuned.len() == 1 { ("applies", "it") } else { ("apply", "them") };
            bail!("{list} {verb} to a training on tuned tables only: add --train-tuned FILE, or leave {pron} out");
        }
        return Ok(());
    }
    let other: Vec<&str> =
        given.iter().map(String::as_str).filter(|f| !TUNED_FLAGS.contains(f) && !applies.contains(f)).collect();
    if !other.is_empty() {
        bail!(
            "{} {} not apply to a training on tuned tables (--train-tuned): leave {} out, or drop --train-tuned \
             to run on latency measurements",
            other.join(", "),
            if other.len() == 1 { "does" } else { "do" },
            if other.len() == 1 { "it" } else { "them" }
        );
    }
    Ok(())
}

/// Loads the tables named by `args`.
pub fn load_sets(args: &TunedTrainArgs, catalog: &Catalog) -> anyhow::Result<Vec<TunedSet>> {
    let (gfx, cu) = parse_device(&args.train_device)?;
    let mut sets: Vec<TunedSet> = Vec::new();
    for path in &args.train_tuned {
        let mut set = TunedSet::load(path, catalog, (&gfx, cu))?;
        set.source = display_path(path);
        if let Some(prev) = sets.iter().find(|s| s.name == set.name) {
            bail!("{} and {} have the same name {}; rename one", prev.source, set.source, set.name);
        }
        sets.push(set);
    }
    Ok(sets)
}

/// The sparse latency matrix of every tuned row (one Ok cell per shape and table; a shape tuned by several
/// tables keeps its first table's row), for the instance list's measured times.
pub fn rows_matrix(sets: &[TunedSet]) -> anyhow::Result<LatencyMatrix> {
    let mut seen = std::collections::BTreeSet::new();
    let rows: Vec<_> = sets
        .iter()
        .flat_map(|s| &s.raw)
        .filter(|r| r.libtype == crate::catalog::Libtype::Ck && seen.insert((r.m, r.n, r.k, r.kernel_id, r.split_k)))
        .cloned()
        .collect();
    LatencyMatrix::from_rows(&rows).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Runs the tuned-table training; `command` is the command line for the provenance.
pub fn run(args: &TunedTrainArgs, budgets: &Budgets, out: Option<&Path>, command: &str) -> anyhow::Result<()> {
    let Some(out) = out else {
        bail!("--train-tuned writes its rule into --out DIR (generated/ holds the H200 rule); pass --out");
    };
    if budgets.max_leaves == 0 || budgets.max_instances == Some(0) || budgets.max_depth == 0 {
        bail!("--max-leaves, --max-depth and --max-instances must be at least 1");
    }
    super::session::check_prune_from(budgets.prune_from, budgets.max_leaves)?;
    let catalog = Catalog::embedded();
    let sets = load_sets(args, &catalog)?;
    let limits = Limits {
        max_depth: budgets.max_depth,
        max_leaves: budgets.max_leaves,
        max_instances: budgets.max_instances,
        features: budgets.features,
        exact_depth: budgets.exact_depth,
        refine_thresholds: budgets.refine,
        prune_from: budgets.prune_from,
        ..Limits::default()
    };
    let mut text = String::new();
    let total: usize = sets.iter().map(|s| s.rows.len()).sum();
    let _ = writeln!(text, "tuned tables ({} of {}:{}):", total, sets[0].gfx, sets[0].cu_num);
    for s in &sets {
        let _ = writeln!(
            text,
            "  {:<44} {:>5} rows ({} rows of other devices left out)",
            s.name,
            s.rows.len(),
            s.other_device
        );
    }
    let mut figures = Vec::new();
    let mut files = Vec::new();
    if sets.len() >= 2 {
        let rows = leave_one_out(&sets, &catalog, &limits, &AgreeWeight::ALL)?;
        let _ = writeln!(
            text,
            "\nleave-one-table-out agreement with the held-out table's tuned (kernel, splitK) (rule(t): share of tuned time; default = kernelId -1, kernel0 = #0; ceiling: rows whose tuned choice is among the training tables' candidates; in-table: a rule of the same size trained on the held-out table alone, scored on it):"
        );
        text.push_str(&loto_table(&rows));
        for r in rows.iter().filter(|r| r.objective == args.agree_weight) {
            figures.push(format!(
                "leave-one-table-out, held out {}: agreement {:.4} (M <= 1024: {:.4}); always-default {:.4}, always-kernel-0 {:.4}; ceiling {:.4}",
                r.held_out,
                r.rule_agreement.overall(),
                r.rule_agreement.small(),
                r.default_agreement.overall(),
                r.kernel0_agreement.overall(),
                r.ceiling.overall()
            ));
        }
        files.push(GeneratedFile::new(LOTO_CSV, loto_csv(&rows)?));
    }
    let all: Vec<&TunedSet> = sets.iter().collect();
    let synth = train(&all, &catalog, &limits, args.agree_weight)?;
    let _ = writeln!(
        text,
        "\nrule trained on every table ({} objective): {} leaves, depth {}, instances {:?}",
        args.agree_weight.as_str(),
        synth.leaves,
        synth.depth,
        synth.instances
    );
    text.push_str(&rule_outline(&synth.rule, &catalog));
    agreement_lines(&synth.rule, &sets, &catalog, &mut text, &mut figures);
    let provenance = Provenance {
        dataset: tables_text(&sets, sets.iter().map(|s| format!("{} ({} rows)", s.source, s.rows.len()))),
        training: format!(
            "classification against the tuned (kernel, splitK) of all {total} rows, {} agreement objective; agreement is not latency",
            args.agree_weight.as_str()
        ),
        figures,
        command: command.to_string(),
    };
    let written = write_outputs(&synth.rule, &catalog, &sets, &provenance, out, files)?;
    for f in &written {
        let _ = writeln!(text, "written: {}", display_path(f));
    }
    super::session::emit(&text)
}

/// `synth run` with `--train-tuned`: the run flags that apply (budgets, features, --out).
pub fn run_from_run(args: &super::run::RunArgs) -> anyhow::Result<()> {
    let budgets = Budgets {
        max_depth: args.limits.max_depth,
        max_leaves: args.limits.max_leaves,
        max_instances: args.limits.max_instances,
        features: args.limits.features,
        exact_depth: args.exact_depth,
        refine: !args.no_refine,
        prune_from: args.limits.prune_from,
    };
    let mut command = String::from("cargo run --release -- run");
    for p in &args.tuned_train.train_tuned {
        command.push_str(&format!(" --train-tuned {}", display_path(p)));
    }
    if args.tuned_train.train_device != "gfx942:304" {
        command.push_str(&format!(" --train-device {}", args.tuned_train.train_device));
    }
    if args.tuned_train.agree_weight != AgreeWeight::Uniform {
        command.push_str(&format!(" --agree-weight {}", args.tuned_train.agree_weight.as_str()));
    }
    command.push_str(&format!(" --max-leaves {} --max-depth {}", args.limits.max_leaves, args.limits.max_depth));
    if let Some(k) = args.limits.max_instances {
        command.push_str(&format!(" --max-instances {k}"));
    }
    if let Some(p) = args.limits.prune_from {
        command.push_str(&format!(" --prune-from {p}"));
    }
    if let Some(v) = clap::ValueEnum::to_possible_value(&args.limits.features) {
        if args.limits.features != FeatureSet::Machine {
            command.push_str(&format!(" --features {}", v.get_name()));
        }
    }
    if let Some(out) = &args.out {
        command.push_str(&format!(" --out {}", display_path(out)));
    }
    run(&args.tuned_train, &budgets, args.out.as_deref(), &command)
}

/// `synth search` with `--train-tuned`: the agent loop over rules, scored on the classification cost
/// matrix of the tables (its "latency" is the summed disagreement cost, so the loop's best rule is the one
/// that agrees most), then the rule's agreement with each table and the same files as `run --train-tuned`.
pub fn run_search(args: &super::search::SearchArgs) -> anyhow::Result<()> {
    use super::search::build_proposers;
    use crate::engine::{run_loop_with, LoopConfig};
    use crate::search::task::{RuleReflector, RuleSetup, RuleTask};
    use std::sync::Arc;

    let Some(out) = args.out.as_deref() else {
        bail!("--train-tuned writes its rule into --out DIR (generated/ holds the H200 rule); pass --out");
    };
    if args.iterations == 0 || args.offspring == 0 {
        bail!("--iterations and --offspring must be at least 1");
    }
    if args.limits.max_leaves == 0 || args.limits.max_instances == Some(0) || args.limits.max_depth == 0 {
        bail!("--max-leaves, --max-depth and --max-instances must be at least 1");
    }
    super::session::check_prune_from(args.limits.prune_from, args.limits.max_leaves)?;
    let catalog = Catalog::embedded();
    let sets = load_sets(&args.tuned_train, &catalog)?;
    let all: Vec<&TunedSet> = sets.iter().collect();
    let matrix = crate::tuned::class_matrix(&all, &catalog, args.tuned_train.agree_weight)?;
    let limits = crate::tuned::class_limits(&Limits {
        max_depth: args.limits.max_depth,
        max_leaves: args.limits.max_leaves,
        max_instances: args.limits.max_instances,
        features: args.limits.features,
        prune_from: args.limits.prune_from,
        ..Limits::default()
    });
    let train_idx: Vec<usize> = (0..matrix.shapes.len()).collect();
    let setup = Arc::new(RuleSetup::new(catalog.clone(), matrix, train_idx, None, limits)?);
    let proposers = build_proposers(args, &setup)?;
    let trace = args.trace.clone().unwrap_or_else(|| out.join(super::search::TRACE_FILE));
    let cfg = LoopConfig {
        iterations: args.iterations,
        offspring: args.offspring,
        repair_limit: args.repair_limit,
        seed: args.sample.seed,
        trace: Some(trace),
        resume: args.resume,
        threads: args.jobs,
        patience: args.patience,
        verbose: !args.quiet,
        ..LoopConfig::default()
    };
    let outcome = run_loop_with(&RuleTask::new(setup.clone()), &proposers, &RuleReflector, &cfg)?;
    let Some(best) = &outcome.best else { bail!("no candidate was evaluated successfully") };
    let rule = crate::rule::parse_any(&best.candidate, &catalog)
        .map_err(|e| anyhow::anyhow!("the winning rule no longer parses: {e}"))?;
    let mut text = format!(
        "search over {} tuned tables ({} objective): {} iterations, best attempt {} by {}\n",
        sets.len(),
        args.tuned_train.agree_weight.as_str(),
        outcome.iterations_run,
        best.id,
        best.proposer
    );
    text.push_str(&rule_outline(&rule, &catalog));
    let mut figures = Vec::new();
    agreement_lines(&rule, &sets, &catalog, &mut text, &mut figures);
    let provenance = Provenance {
        dataset: tables_text(&sets, sets.iter().map(|s| s.source.clone())),
        training:
            "agent loop scored by agreement with the tuned (kernel, splitK) of every row; agreement is not latency"
                .to_string(),
        figures,
        command: format!(
            "cargo run --release -- search{} --out {}",
            sets.iter().map(|s| format!(" --train-tuned {}", s.source)).collect::<String>(),
            display_path(out)
        ),
    };
    let written = write_outputs(&rule, &catalog, &sets, &provenance, out, Vec::new())?;
    for f in &written {
        let _ = writeln!(text, "written: {}", display_path(f));
    }
    super::session::emit(&text)
}

/// Writes a tuned-table rule's outputs into `out`, as `run` writes an H200 rule's: the header, instance
/// list and Rust module, `rule.json` and `extra` all or nothing, then the AITER patch under `aiter/`.
fn write_outputs(
    rule: &crate::rule::Rule,
    catalog: &Catalog,
    sets: &[TunedSet],
    provenance: &Provenance,
    out: &Path,
    mut extra: Vec<GeneratedFile>,
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut json = crate::rule::to_json(rule);
    json.push('\n');
    extra.push(GeneratedFile::new(RULE_JSON, json));
    let patch = GeneratedFile::new(crate::aiter::PATCH_FILE, crate::aiter::render_patch(rule, catalog, provenance)?);
    let rendered = render::generated_files(rule, catalog, &rows_matrix(sets)?, provenance);
    super::outputs::write_run_files(out, rendered, extra, patch, false)
}

/// One line per table: the rule's in-sample agreement with it, to the terminal and the provenance figures.
fn agreement_lines(
    rule: &crate::rule::Rule,
    sets: &[TunedSet],
    catalog: &Catalog,
    text: &mut String,
    figures: &mut Vec<String>,
) {
    for s in sets {
        let a = rule_agreement(rule, s, catalog);
        let line = format!(
            "in-sample agreement with {}: {:.4} (M <= 1024: {:.4}, time-weighted {:.4})",
            s.name,
            a.overall(),
            a.small(),
            a.time_weighted()
        );
        let _ = writeln!(text, "{line}");
        figures.push(line);
    }
}

/// The provenance's dataset line: the device of the tables and one entry per table.
fn tables_text(sets: &[TunedSet], entries: impl Iterator<Item = String>) -> String {
    format!(
        "AITER tuned tables, trained on {} tables ({} of {} CUs): {}",
        sets[0].gfx,
        sets[0].gfx,
        sets[0].cu_num,
        entries.collect::<Vec<_>>().join(", ")
    )
}
