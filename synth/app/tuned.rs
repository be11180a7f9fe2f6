//! `synth run --train-tuned FILE...`: learn a rule from AITER's tuned tables, evaluate it
//! leave-one-table-out, and write the header, instance list, Rust module and rule JSON into `--out`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::bail;

use super::args::TunedTrainArgs;
use super::args::{Effort, ResolvedLimits};
use super::line::{canonical_path, CommandLine};
use super::shared::rule_outline;
use synth_core::catalog::Catalog;
use synth_core::render::{writer::GeneratedFile, Provenance};
use synth_core::synthesize::Limits;
use synth_core::table::LatencyMatrix;
use synth_engine::engine::LoopOutcome;
use synth_search::search::task::RuleSetup;

use synth_core::tuned::{
    leave_one_out, loto_csv, loto_table, parse_device, rule_agreement, train, AgreeWeight, TunedSet,
};

/// Leave-one-table-out figures written into the output directory.
pub const LOTO_CSV: &str = "leave_one_table_out.csv";

/// A training on tuned tables as it runs: the tables, the resolved limits and effort, and where it writes.
#[derive(Debug, Clone)]
pub struct TunedJob {
    pub tables: TunedTrainArgs,
    pub limits: ResolvedLimits,
    pub effort: Effort,
    pub out: Option<std::path::PathBuf>,
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
        set.source = canonical_path(path);
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
        .filter(|r| {
            r.libtype == synth_core::catalog::Libtype::Ck && seen.insert((r.m, r.n, r.k, r.kernel_id, r.split_k))
        })
        .cloned()
        .collect();
    LatencyMatrix::from_rows(&rows).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Runs the tuned-table training of `job`; `line` is the "Regenerate with" line of the command.
pub fn run(job: &TunedJob, line: &CommandLine) -> anyhow::Result<()> {
    let Some(out) = job.out.as_deref() else {
        bail!("--train-tuned writes its rule into --out DIR (generated/ holds the H200 rule); pass --out");
    };
    let catalog = Catalog::embedded();
    let sets = load_sets(&job.tables, &catalog)?;
    let limits = job.effort.apply(job.limits.limits());
    let agree = job.tables.agree_weight;
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
        for r in rows.iter().filter(|r| r.objective == agree) {
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
    let synth = train(&all, &catalog, &limits, agree)?;
    let _ = writeln!(
        text,
        "\nrule trained on every table ({} objective): {} leaves, depth {}, instances {:?}",
        agree.as_str(),
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
            agree.as_str()
        ),
        figures,
        command: line.text(),
    };
    let written = write_outputs(&synth.rule, &catalog, &sets, &provenance, out, files)?;
    for f in &written {
        let _ = writeln!(text, "written: {}", canonical_path(f));
    }
    super::shared::emit(&text)
}

/// The line of `synth run --train-tuned`: the tables, the limits and the effort the training used.
pub fn run_line(job: &TunedJob) -> CommandLine {
    let mut l = CommandLine::new("run");
    job.tables.write_line(&mut l);
    job.limits.write_line(&mut l);
    job.effort.write_line(&mut l);
    l
}

/// What the agent loop over tuned tables searches: the tables and the classification task built from them.
pub struct TunedSearch {
    pub sets: Vec<TunedSet>,
    pub setup: std::sync::Arc<RuleSetup>,
    pub catalog: Catalog,
}

/// The setup of `synth search --train-tuned`: the rules are scored on the classification cost matrix of the
/// tables (its "latency" is the summed disagreement cost, so the loop's best rule is the one that agrees
/// most).
pub fn search_setup(tables: &TunedTrainArgs, limits: &ResolvedLimits) -> anyhow::Result<TunedSearch> {
    let catalog = Catalog::embedded();
    let sets = load_sets(tables, &catalog)?;
    let all: Vec<&TunedSet> = sets.iter().collect();
    let matrix = synth_core::tuned::class_matrix(&all, &catalog, tables.agree_weight)?;
    let limits = synth_core::tuned::class_limits(&Limits { ..limits.limits() });
    let train_idx: Vec<usize> = (0..matrix.shapes.len()).collect();
    let setup = std::sync::Arc::new(RuleSetup::new(catalog.clone(), matrix, train_idx, None, limits)?);
    Ok(TunedSearch { sets, setup, catalog })
}

/// The end of `synth search --train-tuned`: the winner's agreement with each table and the same files as
/// `run --train-tuned`, into `out`.
pub fn finish_search(
    search: &TunedSearch,
    tables: &TunedTrainArgs,
    outcome: &LoopOutcome,
    line: &CommandLine,
    out: &Path,
) -> anyhow::Result<()> {
    let (sets, catalog) = (&search.sets, &search.catalog);
    let Some(best) = &outcome.best else { bail!("no candidate was evaluated successfully") };
    let rule = synth_core::rule::parse_any(&best.candidate, catalog)
        .map_err(|e| anyhow::anyhow!("the winning rule no longer parses: {e}"))?;
    let mut text = format!(
        "search over {} tuned tables ({} objective): {} iterations, best attempt {} by {}\n",
        sets.len(),
        tables.agree_weight.as_str(),
        outcome.iterations_run,
        best.id,
        best.proposer
    );
    text.push_str(&rule_outline(&rule, catalog));
    let mut figures = Vec::new();
    agreement_lines(&rule, sets, catalog, &mut text, &mut figures);
    let provenance = Provenance {
        dataset: tables_text(sets, sets.iter().map(|s| s.source.clone())),
        training:
            "agent loop scored by agreement with the tuned (kernel, splitK) of every row; agreement is not latency"
                .to_string(),
        figures,
        command: line.text(),
    };
    let written = write_outputs(&rule, catalog, sets, &provenance, out, Vec::new())?;
    for f in &written {
        let _ = writeln!(text, "written: {}", canonical_path(f));
    }
    super::shared::emit(&text)
}

/// Writes a tuned-table rule's outputs into `out`, as `run` writes an H200 rule's: the header, instance
/// list and Rust module, `rule.json` and `extra` all or nothing, then the AITER patch under `aiter/`.
fn write_outputs(
    rule: &synth_core::rule::Rule,
    catalog: &Catalog,
    sets: &[TunedSet],
    provenance: &Provenance,
    out: &Path,
    mut extra: Vec<GeneratedFile>,
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let files = super::outputs::rule_files(rule, catalog, &rows_matrix(sets)?, provenance, std::mem::take(&mut extra))?;
    let inputs: Vec<(&str, std::path::PathBuf)> =
        sets.iter().map(|s| ("--train-tuned", std::path::PathBuf::from(&s.source))).collect();
    super::outputs::check_out_dir(out, &files, &inputs)?;
    super::outputs::write_files(out, &files, false)
}

/// One line per table: the rule's in-sample agreement with it, to the terminal and the provenance figures.
fn agreement_lines(
    rule: &synth_core::rule::Rule,
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
