//! `synth search`: the agent loop over selection rules. Loads the latency table and the training sample
//! as `synth run` does, runs propose → evaluate → reflect → select with the chosen proposers (built-in,
//! an external command, an OpenAI-compatible endpoint), then validates the winner, renders it into the
//! output directory and compares it with the other policies on the held-out shapes.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use synth_core::catalog::Catalog;
use synth_core::compare::{self, report::LayerNames};
use synth_core::render::{self, writer::GeneratedFile, Provenance};
use synth_core::rule::validate::{validate, Severity};
use synth_core::rule::Rule;
use synth_engine::engine::proposers::command::CommandProposer;
use synth_engine::engine::proposers::constrain::{Constraint, Mode};
use synth_engine::engine::proposers::Checker;
use synth_engine::engine::{run_loop_with, Attempt, LoopConfig, LoopOutcome, Proposer, Rejection};
use synth_search::search::builtin::BuiltinProposer;
use synth_search::search::task::{kernels_used, RuleReflector, RuleSetup, RuleTask};

use super::args::{agent_timeout, DataArgs, EndpointArgs, LimitArgs, ResolvedLimits, SampleArgs, STANDARD_LIMITS};
use super::invocation::Invocation;
use super::line::{canonical_path, CommandLine};
use super::manifest::DEFAULT_MANIFEST;
use super::multi_eval;
use super::resolve::{data_mode, reject_unused, DataMode, DataOptions, Fallback};
use super::session::{summary_figure, Sample, Scope, Session, DEFAULT_MODEL};
use super::shared::{of_oracle, shown, summary_table, COMPARE_CSV, EVALUATIONS_CSV};
use synth_base::paths::display_path;
use synth_core::manifest::MultiData;

/// Output directory (under the working directory) when `--out` is not given.
pub const DEFAULT_OUT: &str = "gemm-synth-out/search";
/// Trace file name inside the output directory when `--trace` is not given.
pub const TRACE_FILE: &str = "trace.jsonl";
/// Name of the search's winner in the comparison.
pub const WINNER_NAME: &str = "search";

#[derive(Debug, Clone, clap::Args)]
pub struct SearchArgs {
    /// Proposer: `builtin`, `cmd:<shell command>` (request JSON on stdin, rule on stdout) or `openai`.
    /// Repeat to mix proposers; offspring slot i uses the (i mod count)-th.
    #[arg(long = "agent", default_value = "builtin")]
    pub agents: Vec<String>,
    /// Seconds an agent command or HTTP request may take before it is killed / abandoned.
    #[arg(long, default_value_t = 300.0)]
    pub agent_timeout: f64,
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    /// How `--agent openai` constrains the model's answer to the rule language: `grammar` (a GBNF grammar
    /// of the C++ form, llama.cpp's `grammar` field), `json-schema` (the schema of the rule's JSON form, as
    /// `response_format`), `none`, or `auto`: what the server honours, probed once (a refusal falls back
    /// with one line saying so).
    #[arg(long, value_name = "HOW", default_value = "auto", value_parser = Mode::parse)]
    pub constrain: Mode,
    /// Print the GBNF grammar of the rule language over the data's kernels, split-K levels and features,
    /// and exit.
    #[arg(long, conflicts_with = "print_schema")]
    pub print_grammar: bool,
    /// Print the JSON schema of the rule's JSON form over the data's kernels, split-K levels and features,
    /// and exit.
    #[arg(long)]
    pub print_schema: bool,
    /// Iterations of the loop.
    #[arg(long, default_value_t = 8)]
    pub iterations: usize,
    /// Candidates proposed and evaluated per iteration.
    #[arg(long, default_value_t = 4)]
    pub offspring: usize,
    /// Failed repairs of a lineage before it is dropped for a new strategy.
    #[arg(long, default_value_t = 2)]
    pub repair_limit: usize,
    /// Stop after this many iterations without a better rule.
    #[arg(long)]
    pub patience: Option<usize>,
    /// JSONL trace of every candidate [default: <out>/trace.jsonl].
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Continue the run recorded in the trace.
    #[arg(long)]
    pub resume: bool,
    /// Worker threads for proposals and evaluations, at most 256 (0: one per core).
    #[arg(long, default_value_t = 0, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=256))]
    pub jobs: usize,
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub sample: SampleArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Output directory [default: ./gemm-synth-out/search].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No per-iteration progress lines.
    #[arg(long)]
    pub quiet: bool,
    #[command(flatten)]
    pub tuned_train: super::args::TunedTrainArgs,
}

/// What a rule of `setup` may name: its candidates' kernels and split-K levels, its features and the
/// split-K guards' grids, and its depth limit.
pub fn rule_vocabulary(setup: &RuleSetup) -> synth_core::rule::grammar::Vocabulary {
    let features = setup.features.iter().map(|f| (f.name.clone(), f.expr.clone())).collect();
    let guards = synth_core::synthesize::guard::guard_terms(&setup.matrix.candidates, &setup.catalog);
    synth_core::rule::grammar::Vocabulary::new(&setup.matrix.candidates, features)
        .with_terms(guards)
        .with_max_depth(setup.limits.max_depth)
}

/// The rule language over `setup`'s candidates and features, as a decoding constraint.
pub fn rule_constraint(setup: &RuleSetup) -> Constraint {
    use synth_core::rule::grammar;
    let vocab = rule_vocabulary(setup);
    let example = json_example(&vocab);
    let depth = vocab.max_depth;
    Constraint {
        gbnf: grammar::gbnf(&vocab, &setup.catalog),
        schema: grammar::json_schema(&vocab),
        from_json: None,
        grammar_reply: Some(format!(
            "Reply with exactly one complete rule in the C++ form, nothing else (no prose, no fence): if / else if \
             / else at most {depth} conditions deep ending in a final else, each condition one of the features \
             compared with an integer (at most two joined by &&), every leaf `return {{kernel(ID), splitK}};`."
        )),
        json_reply: Some(format!(
            "Reply with exactly one rule in its JSON form, nothing else, e.g. {example} (comparisons: Lt Le Gt Ge \
             Eq Ne; the left side one of the features, the right side {{\"lit\": INTEGER}})."
        )),
    }
}

/// A two-leaf rule of the vocabulary's first and last kernels, in compact JSON (the prompt's example).
fn json_example(vocab: &synth_core::rule::grammar::Vocabulary) -> String {
    use synth_core::rule::ir::{build, CmpOp, Cond, Leaf, Node};
    let (first, last) = match (vocab.kernels.first(), vocab.kernels.last()) {
        (Some(a), Some(b)) => (*a, *b),
        _ => return String::new(),
    };
    let split = vocab.split_ks.first().copied().unwrap_or(0);
    let leaf = |k: synth_core::catalog::KernelRef| Box::new(Node::Leaf(Leaf::of(k.backend, k.id, split)));
    let cond = Cond::cmp(CmpOp::Le, build::m(), build::lit(64));
    let rule = Rule::new(Node::Chain { branches: vec![(cond, *leaf(first))], otherwise: leaf(last) });
    serde_json::to_string(&rule).unwrap_or_default()
}

/// With `--print-grammar` or `--print-schema`: prints it and says so (the command then stops).
fn print_language(args: &SearchArgs, setup: &RuleSetup) -> bool {
    if args.print_grammar {
        out!("{}", rule_constraint(setup).gbnf);
    } else if args.print_schema {
        outln!("{}", serde_json::to_string_pretty(&rule_constraint(setup).schema).unwrap_or_default());
    }
    args.print_grammar || args.print_schema
}

/// The syntax check that picks a rule among the code blocks of an agent's reply.
pub fn rule_checker(catalog: Catalog) -> Checker {
    Arc::new(move |text: &str| {
        synth_core::rule::parse_any(text, &catalog).map(|_| ()).map_err(|e| Rejection(e.to_string()))
    })
}

/// Builds the proposers named by `--agent`.
pub fn build_proposers(args: &SearchArgs, setup: &Arc<RuleSetup>) -> anyhow::Result<Vec<Box<dyn Proposer>>> {
    let timeout = agent_timeout(args.agent_timeout)?;
    let mut out: Vec<Box<dyn Proposer>> = Vec::new();
    for spec in &args.agents {
        let spec = spec.trim();
        if spec == "builtin" {
            out.push(Box::new(BuiltinProposer::new(setup.clone(), args.sample.seed)));
        } else if let Some(command) = spec.strip_prefix("cmd:") {
            if command.trim().is_empty() {
                bail!("--agent cmd: needs a command after `cmd:`, e.g. --agent 'cmd:python3 my_agent.py'");
            }
            out.push(Box::new(CommandProposer::new(command, timeout, rule_checker(setup.catalog.clone()))));
        } else if spec == "openai" {
            let mut p = args.endpoint.openai(timeout, rule_checker(setup.catalog.clone()))?;
            p.constraint = Some(rule_constraint(setup));
            p.constrain = args.constrain;
            out.push(Box::new(p));
        } else {
            bail!("unknown --agent {spec:?}: expected `builtin`, `cmd:<command>` or `openai`");
        }
    }
    Ok(out)
}

/// Runs `synth search`: the loop on the data its options choose.
pub fn run(args: SearchArgs, invocation: &Invocation) -> anyhow::Result<()> {
    super::tuned::check_flags(&args.tuned_train, invocation, super::tuned::SEARCH_FLAGS)?;
    let started = Instant::now();
    if args.iterations == 0 || args.offspring == 0 {
        bail!("--iterations and --offspring must be at least 1");
    }
    let limits = args.limits.resolve(STANDARD_LIMITS)?;
    let mode = data_mode(DataOptions {
        data: &args.data,
        manifest: None,
        train_tuned: &args.tuned_train.train_tuned,
        fallback: Fallback::Single,
        manifest_backends: false,
    })?;
    if args.sample.sample_m == 0 && mode != DataMode::Tuned {
        bail!("--sample-m must be at least 1");
    }
    check_paths(&args)?;
    match mode {
        DataMode::Tuned => run_tuned(&args, &limits),
        DataMode::Manifest(manifest) => {
            let hint = "every configuration of a manifest has its own TP; leave it out";
            reject_unused(invocation, &["--tp"], "a search on a manifest", hint)?;
            run_manifest(&args, &manifest, &limits, started)
        }
        DataMode::Single => run_single(&args, &limits, started),
    }
}

/// Refuses, before the loop runs, a search whose outputs would replace one of its inputs or its trace (the
/// files it writes in --out: the generated sources, compare.csv, evaluations.csv, the trace), or whose
/// trace is one of its inputs.
fn check_paths(args: &SearchArgs) -> anyhow::Result<()> {
    let out_dir = super::outputs::out_dir(args.out.as_deref(), false, "search")?.dir;
    let trace = args.trace.clone().unwrap_or_else(|| out_dir.join(TRACE_FILE));
    let mut inputs: Vec<(&str, std::path::PathBuf)> =
        args.data.dataset.iter().map(|p| ("--dataset", p.clone())).collect();
    inputs.extend(args.data.model.input_files());
    inputs.extend(args.tuned_train.train_tuned.iter().map(|p| ("--train-tuned", p.clone())));
    let names = [
        render::CPP_HEADER,
        render::INSTANCES_CSV,
        render::NO_INSTANCES_NOTE,
        render::RUST_MODULE,
        super::shared::RULE_JSON,
        COMPARE_CSV,
        EVALUATIONS_CSV,
        super::tuned::LOTO_CSV,
    ];
    // The trace against the inputs and, whether they exist yet or not, the files written beside it.
    let mut outputs = vec![
        ("--trace".to_string(), trace.clone()),
        (format!("the settings record of --trace {}", trace.display()), settings_path(&trace)),
    ];
    outputs.extend(names.iter().map(|n| (format!("--out {} (its {n})", out_dir.display()), out_dir.join(n))));
    super::outputs::check_distinct(&inputs, &outputs)?;
    inputs.push(("--trace", trace));
    let files: Vec<GeneratedFile> = names.iter().map(|n| GeneratedFile::new(*n, "")).collect();
    super::outputs::check_out_dir(&out_dir, &files, &inputs)
}

/// The line of a search: the loop's settings, then the data's (`data`), then the sample and the limits.
fn search_line(args: &SearchArgs, limits: &ResolvedLimits, data: impl FnOnce(&mut CommandLine)) -> CommandLine {
    let mut l = CommandLine::new("search");
    if args.agents != ["builtin"] {
        for a in &args.agents {
            l.always("--agent", a);
        }
    }
    l.value("--agent-timeout", args.agent_timeout, 300.0);
    args.endpoint.write_line(&mut l);
    if args.constrain != Mode::Auto {
        l.always("--constrain", args.constrain.as_str());
    }
    l.value("--iterations", args.iterations, 8).value("--offspring", args.offspring, 4);
    l.value("--repair-limit", args.repair_limit, 2);
    if let Some(p) = args.patience {
        l.always("--patience", p);
    }
    data(&mut l);
    args.sample.write_line(&mut l);
    limits.write_line(&mut l);
    l
}

/// `synth search` on a single dataset (or several merged).
fn run_single(args: &SearchArgs, limits: &ResolvedLimits, started: Instant) -> anyhow::Result<()> {
    let session = Session::open(&args.data, Scope::DefaultModel)?;
    let sample = session.sample(&args.sample);
    if sample.heldout.is_empty() {
        bail!("every shape is in the training sample: nothing is held out; lower --sample-m");
    }
    let (catalog, matrix) = (&session.catalog, &session.matrix);
    let weights = limits.weight.weights(matrix, &sample.train);
    let setup =
        Arc::new(RuleSetup::new(catalog.clone(), matrix.clone(), sample.train.clone(), weights, limits.limits())?);
    if print_language(args, &setup) {
        return Ok(());
    }
    let out_dir = super::outputs::out_dir(args.out.as_deref(), false, "search")?.dir;
    let trace = args.trace.clone().unwrap_or_else(|| out_dir.join(TRACE_FILE));
    outln!(
        "dataset:  {} ({} shapes × {} candidates)",
        session.dataset.display(),
        matrix.shapes.len(),
        matrix.candidates.len()
    );
    outln!(
        "training: {} shapes of {}: M in {:?} × {} layers; {} held out",
        sample.train.len(),
        session.what,
        sample.picked,
        session.layers.len(),
        sample.heldout.len()
    );
    let outcome = search_loop(args, limits, &setup, &trace)?;
    let line = search_line(args, limits, |l| {
        if session.dataset_args != [super::data::DEFAULT_DATASET] {
            for d in &session.dataset_args {
                l.always("--dataset", d);
            }
        }
        super::resolve::write_model_line(&args.data.model, l, DEFAULT_MODEL);
        l.value("--tp", args.data.tp, 2);
        args.data.backends.write_line(l);
    });
    let paths = Paths { out_dir: &out_dir, trace: &trace };
    report_and_render(args, &line, &session, &setup, &outcome, &sample, paths, started)
}

/// `synth search --train-tuned`: the agent loop over rules scored on the classification cost matrix of
/// the tables, then the winner's agreement with each table and the same files as `run --train-tuned`.
fn run_tuned(args: &SearchArgs, limits: &ResolvedLimits) -> anyhow::Result<()> {
    let Some(out) = args.out.as_deref() else {
        bail!("--train-tuned writes its rule into --out DIR (generated/ holds the H200 rule); pass --out");
    };
    let search = super::tuned::search_setup(&args.tuned_train, limits)?;
    if print_language(args, &search.setup) {
        return Ok(());
    }
    let trace = args.trace.clone().unwrap_or_else(|| out.join(TRACE_FILE));
    let proposers = build_proposers(args, &search.setup)?;
    let cfg = loop_config(args, &trace);
    let outcome = run_loop_with(&RuleTask::new(search.setup.clone()), &proposers, &RuleReflector, &cfg)?;
    let line = search_line(args, limits, |l| args.tuned_train.write_line(l));
    super::tuned::finish_search(&search, &args.tuned_train, &outcome, &line, out)
}

/// The loop's settings from `args`, traced to `trace`.
fn loop_config(args: &SearchArgs, trace: &Path) -> LoopConfig {
    LoopConfig {
        iterations: args.iterations,
        offspring: args.offspring,
        repair_limit: args.repair_limit,
        seed: args.sample.seed,
        trace: Some(trace.to_path_buf()),
        resume: args.resume,
        threads: args.jobs,
        patience: args.patience,
        verbose: !args.quiet,
        ..LoopConfig::default()
    }
}

/// The agent loop of `args` over `setup`'s training shapes, traced to `trace`.
fn search_loop(
    args: &SearchArgs,
    limits: &ResolvedLimits,
    setup: &Arc<RuleSetup>,
    trace: &Path,
) -> anyhow::Result<LoopOutcome> {
    let proposers = build_proposers(args, setup)?;
    check_trace_settings(args, limits, setup, trace)?;
    let cfg = loop_config(args, trace);
    outln!("agents:   {}", proposers.iter().map(|p| p.name()).collect::<Vec<_>>().join(", "));
    let task = RuleTask::new(setup.clone());
    let outcome = run_loop_with(&task, &proposers, &RuleReflector, &cfg)?;
    for s in synth_engine::engine::stats::proposer_stats(&outcome.attempts) {
        outln!("proposer: {s}");
    }
    Ok(outcome)
}

/// Where `synth search` writes.
struct Paths<'a> {
    out_dir: &'a Path,
    trace: &'a Path,
}

#[allow(clippy::too_many_arguments)]
fn report_and_render(
    args: &SearchArgs,
    line: &CommandLine,
    session: &Session,
    setup: &RuleSetup,
    outcome: &LoopOutcome,
    sample: &Sample,
    paths: Paths,
    started: Instant,
) -> anyhow::Result<()> {
    let names: &LayerNames = &session.names;
    let (out_dir, trace) = (paths.out_dir, paths.trace);
    let catalog = &setup.catalog;
    let matrix = &setup.matrix;
    let (rule, best) = winner(outcome, catalog)?;
    let d = &best.eval.details;
    let num = |k: &str| d.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);

    // Held-out comparison, as `synth run` does it.
    let train = &setup.train;
    let policies = session.standard_policies(train, Vec::new(), (WINNER_NAME, &rule))?;
    let report = compare::evaluate(matrix, catalog, &policies, &sample.heldout);
    let s = &report.policies[report.policy_index(WINNER_NAME).expect("winner scored")].summary;
    outln!("comparison on {} held-out shapes:", report.shapes.len());
    outln!("{}", compare::report::table(&report, names));

    let figures = vec![winner_figure(&rule, outcome, args, best), summary_figure("held-out", &report, WINNER_NAME)?];
    let provenance = Provenance {
        dataset: session.dataset_text(),
        training: format!("{} shapes of {}: M in {:?}", train.len(), session.what, sample.picked),
        figures,
        command: line.text(),
    };
    let mut files = render::generated_files(&rule, catalog, matrix, &provenance)?;
    files.push(GeneratedFile::new(COMPARE_CSV, compare::report::csv(&report, names)));
    let written = render::writer::write_files(out_dir, &files, false)?;
    for f in &written {
        outln!("written:  {}", super::outputs::real_path(f));
    }
    outln!("trace:    {}", super::outputs::real_path(trace));
    outln!(
        "summary:  {} iterations, {} evaluations, {:.2} s; training {:.4} of oracle (total); held-out {:.4} of oracle (geomean) with {} leaves",
        outcome.iterations_run,
        outcome.evaluations,
        started.elapsed().as_secs_f64(),
        num("of_oracle_total"),
        s.of_oracle,
        rule.num_leaves()
    );
    Ok(())
}

/// The provenance line of the winner.
fn winner_figure(rule: &Rule, outcome: &LoopOutcome, args: &SearchArgs, best: &Attempt) -> String {
    format!(
        "{} leaves, depth {}, {} instances: {:?}; found by the agent loop ({} iterations × {} offspring, attempt {} by {})",
        rule.num_leaves(),
        rule.depth(),
        kernels_used(rule).len(),
        kernels_used(rule),
        outcome.iterations_run,
        args.offspring,
        best.id,
        best.proposer
    )
}

/// The loop's winner, parsed and validated (warnings printed), with its attempt; an error when no
/// proposal was usable.
fn winner<'a>(outcome: &'a LoopOutcome, catalog: &Catalog) -> anyhow::Result<(Rule, &'a Attempt)> {
    let failed = outcome.attempts.iter().filter(|a| a.eval.score.is_none()).count();
    outln!(
        "loop:     {} iterations ({} resumed attempts), {} evaluations this run, {} failed candidates in total, {:.2} s",
        outcome.iterations_run,
        outcome.resumed,
        outcome.evaluations,
        failed,
        outcome.elapsed.as_secs_f64()
    );
    let Some(best) = &outcome.best else {
        let last: Vec<String> = outcome
            .attempts
            .iter()
            .rev()
            .take(3)
            .map(|a| format!("attempt {}: {}", a.id, synth_engine::engine::joined_lines(&a.eval.feedback, 300)))
            .collect();
        bail!("no candidate was evaluated successfully; last feedback:\n  {}", last.join("\n  "));
    };
    let proposals: Vec<_> = outcome.attempts.iter().filter(|a| a.id != 0).collect();
    if !proposals.is_empty() && proposals.iter().all(|a| a.eval.score.is_none()) {
        // Writing the baseline as "the result" would hide that no agent ever produced a usable rule.
        let last: Vec<String> = proposals
            .iter()
            .rev()
            .take(3)
            .map(|a| {
                let feedback = synth_engine::engine::joined_lines(&a.eval.feedback, 400);
                format!("attempt {} ({}): {}", a.id, a.proposer, synth_base::sanitize::shown(&feedback))
            })
            .collect();
        bail!(
            "every one of the {} proposals failed, so there is no result (no rule was written; the attempts are in \
             the trace); last failures:\n  {}",
            proposals.len(),
            last.join("\n  ")
        );
    }
    let rule = synth_core::rule::parse_any(&best.candidate, catalog)
        .map_err(|e| anyhow::anyhow!("the winning rule no longer parses: {e}"))?;
    let issues = validate(&rule, catalog);
    if issues.iter().any(|i| i.severity == Severity::Error) {
        bail!("the winning rule is invalid: {}", issues.iter().map(|i| i.to_string()).collect::<Vec<_>>().join("; "));
    }
    for i in &issues {
        outln!("warning:  {i}");
    }
    let d = &best.eval.details;
    let num = |k: &str| d.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
    outln!(
        "best:     attempt {} (iteration {}, {}): training total {:.2} us, oracle {:.2} us = {:.4} of oracle by total, {:.4} geomean",
        best.id,
        best.iteration,
        best.proposer,
        num("total_us"),
        num("oracle_us"),
        num("of_oracle_total"),
        num("of_oracle_geomean")
    );
    outln!("\n{}", synth_core::rule::text::rule_to_cpp_text(&rule, catalog));
    Ok((rule, best))
}

/// `synth search --dataset MANIFEST.toml`: the loop over the multi-model objective — the training sample
/// of the main job (`--sample-m` M values × the layers of each training configuration of the manifest) —
/// and the winner evaluated as the main job evaluates its rule ([`report_manifest`]).
fn run_manifest(args: &SearchArgs, manifest: &Path, limits: &ResolvedLimits, started: Instant) -> anyhow::Result<()> {
    let data = super::manifest::open(manifest)?;
    let configs = data.training_configs(None);
    let train = data.sample(&configs, &Default::default(), args.sample.sample_m, args.sample.seed);
    if train.is_empty() {
        bail!("{}: the training sample is empty", manifest.display());
    }
    let (catalog, matrix) = (&data.catalog, &data.matrix);
    let weights = limits.weight.weights(matrix, &train);
    let setup = Arc::new(RuleSetup::new(catalog.clone(), matrix.clone(), train.clone(), weights, limits.limits())?);
    if print_language(args, &setup) {
        return Ok(());
    }
    let out_dir = super::outputs::out_dir(args.out.as_deref(), false, "search")?.dir;
    let trace = args.trace.clone().unwrap_or_else(|| out_dir.join(TRACE_FILE));
    let config_names: Vec<String> = configs.iter().map(|&c| shown(&data.configs[c].name)).collect();
    let default_manifest = manifest == Path::new(DEFAULT_MANIFEST);
    let name = if default_manifest { DEFAULT_MANIFEST.to_string() } else { canonical_path(manifest) };
    outln!(
        "dataset:  {name} ({} configurations; {} shapes × {} candidates)",
        data.configs.len(),
        matrix.shapes.len(),
        matrix.candidates.len()
    );
    let training = format!(
        "{} grid shapes of {}: {} M values per configuration (stratified over its grid M, seed {}) × its layers",
        train.len(),
        config_names.join(", "),
        args.sample.sample_m,
        args.sample.seed
    );
    outln!("training: {training}");
    let outcome = search_loop(args, limits, &setup, &trace)?;
    let line = search_line(args, limits, |l| {
        l.always("--dataset", &name);
    });
    let provenance = Provenance {
        dataset: format!(
            "{name} ({} journals; {}, {} CUs; {} configurations)",
            data.journals.len(),
            matrix.gfx,
            matrix.cu_num,
            data.configs.len()
        ),
        training,
        figures: Vec::new(),
        command: line.text(),
    };
    let (configs, paths) = ((configs.as_slice(), train.as_slice()), Paths { out_dir: &out_dir, trace: &trace });
    report_manifest(args, &data, configs, &outcome, provenance, paths, started)
}

/// The winner of a manifest search evaluated as the main job evaluates its rule: held-out grid and
/// off-grid shapes of the training configurations, every configuration on its own, every shape without a
/// tuned row; written with the evaluations CSV.
fn report_manifest(
    args: &SearchArgs,
    data: &MultiData,
    (configs, train): (&[usize], &[usize]),
    outcome: &LoopOutcome,
    mut provenance: Provenance,
    paths: Paths,
    started: Instant,
) -> anyhow::Result<()> {
    let (catalog, matrix) = (&data.catalog, &data.matrix);
    let (rule, best) = winner(outcome, catalog)?;
    let policies = multi_eval::policies_named(data, train, &rule, WINNER_NAME)?;
    let evals = multi_eval::evaluations(data, configs, train, &policies);
    for e in evals.iter().filter(|e| e.evaluation != "config") {
        let title = match e.evaluation {
            "heldout-grid" => "held-out grid shapes of the training configurations",
            "off-grid" => "off-grid M of the training configurations",
            _ => "every shape without a tuned row (tuned table: the training shapes)",
        };
        if e.report.shapes.is_empty() {
            outln!("\n{title}: no shapes");
            continue;
        }
        outln!("\n{title} ({} shapes):", e.report.shapes.len());
        out!("{}", summary_table(&e.report));
    }
    outln!("\nper configuration, every shape (fraction of the oracle; the training configurations include their training shapes):");
    out!("{}", multi_eval::per_config_table(&evals, WINNER_NAME));
    let (worst, worst_f) = multi_eval::worst_config(&evals, WINNER_NAME).unwrap_or(("-", f64::NAN));
    let worst = shown(worst);
    let held = &evals[0].report;
    provenance.figures = vec![
        winner_figure(&rule, outcome, args, best),
        format!(
            "held-out grid shapes of the training configurations ({}): {:.3} of oracle",
            held.shapes.len(),
            of_oracle(held, WINNER_NAME)
        ),
        format!("per configuration, {} configurations: min {worst_f:.3} of oracle ({worst})", data.configs.len()),
    ];
    let all = compare::evaluate(matrix, catalog, &policies, &data.all_shapes());
    let mut files = render::generated_files(&rule, catalog, matrix, &provenance)?;
    files.push(GeneratedFile::new(COMPARE_CSV, compare::report::csv_with_vendor(&all, &data.names(), &data.vendor)));
    files.push(GeneratedFile::new(EVALUATIONS_CSV, multi_eval::evaluations_csv(&evals)));
    let written = render::writer::write_files(paths.out_dir, &files, false)?;
    for f in &written {
        outln!("written:  {}", super::outputs::real_path(f));
    }
    outln!("trace:    {}", super::outputs::real_path(paths.trace));
    outln!(
        "summary:  {} iterations, {} evaluations, {:.2} s; held-out grid {:.4} of oracle, worst configuration {worst} {worst_f:.4}, {} leaves",
        outcome.iterations_run,
        outcome.evaluations,
        started.elapsed().as_secs_f64(),
        of_oracle(held, WINNER_NAME),
        rule.num_leaves()
    );
    Ok(())
}

/// The settings a trace belongs to: everything that decides what the attempts in it mean. `--iterations`
/// is left out (a resumed run may go further).
fn trace_settings(args: &SearchArgs, limits: &ResolvedLimits, setup: &RuleSetup) -> serde_json::Value {
    serde_json::json!({
        "training_data": training_fingerprint(setup),
        "agents": args.agents,
        "offspring": args.offspring,
        "repair_limit": args.repair_limit,
        "dataset": args.data.dataset.iter().map(|d| display_path(d)).collect::<Vec<_>>(),
        "spec": args.data.model.spec.as_ref().map(|d| display_path(d)),
        "model": args.data.model.name,
        "tp": args.data.tp,
        "sample_m": args.sample.sample_m,
        "seed": args.sample.seed,
        "max_depth": limits.max_depth,
        "max_leaves": limits.max_leaves,
        "max_instances": limits.max_instances,
        "weight": format!("{:?}", limits.weight).to_lowercase(),
        "features": format!("{:?}", limits.features).to_lowercase(),
    })
}

/// A fingerprint (64-bit FNV-1a, hex) of what the loop scores against: every training shape, every
/// candidate and every measured time of them. A trace's scores are reused on --resume only when the data
/// they were computed on is the same, not merely the same path.
fn training_fingerprint(setup: &RuleSetup) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    let m = &setup.matrix;
    for c in &m.candidates {
        eat(c.to_string().as_bytes());
    }
    for &s in &setup.train {
        let shape = &m.shapes[s];
        for v in [shape.m, shape.n, shape.k] {
            eat(&v.to_le_bytes());
        }
        for c in 0..m.candidates.len() {
            eat(&m.us(s, c).map_or(u64::MAX, f64::to_bits).to_le_bytes());
        }
    }
    format!("{h:016x}")
}

/// The settings record kept beside a trace: `<trace>.settings.json`.
pub fn settings_path(trace: &std::path::Path) -> PathBuf {
    let mut name = trace.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".settings.json");
    trace.with_file_name(name)
}

/// Whether the file at `trace` starts with an attempt line (a JSON object with a `candidate`), as every
/// trace `synth search` writes does.
fn looks_like_trace(trace: &Path) -> bool {
    use std::io::{BufRead, Read};
    let Ok(f) = std::fs::File::open(trace) else { return false };
    let mut first = String::new();
    let _ = std::io::BufReader::new(f.take(1 << 20)).read_line(&mut first);
    serde_json::from_str::<serde_json::Value>(first.trim()).is_ok_and(|v| v.get("candidate").is_some())
}

/// With `--resume`: the trace must hold attempts and have been written with the same settings (else one
/// error naming each differing setting). Without: records this run's settings beside the trace.
fn check_trace_settings(
    args: &SearchArgs,
    limits: &ResolvedLimits,
    setup: &RuleSetup,
    trace: &Path,
) -> anyhow::Result<()> {
    let now = trace_settings(args, limits, setup);
    if args.resume && trace.exists() {
        check_resumed_settings(trace, &now)
    } else {
        record_settings(args, trace, &now)
    }
}

/// A resumed trace: it holds attempts, and its settings record equals `now`.
fn check_resumed_settings(trace: &Path, now: &serde_json::Value) -> anyhow::Result<()> {
    let path = settings_path(trace);
    let contents = synth_engine::engine::trace::read_trace(trace)?;
    if contents.attempts.is_empty() {
        if let Some(tail) = &contents.dropped_tail {
            bail!(
                "{}: the trace holds no attempt, only an unreadable line ({}); delete it or run without --resume",
                trace.display(),
                synth_base::sanitize::shown(tail)
            );
        }
    }
    let recorded = synth_base::input::read_text_capped(&path, synth_base::input::MAX_SPEC_BYTES, "settings record")
        .with_context(|| {
            format!(
                "cannot read {}, the settings the trace {} was written with; resume only a trace written by \
                 `synth search` (or run without --resume)",
                path.display(),
                trace.display()
            )
        })?;
    let recorded: serde_json::Value =
        serde_json::from_str(&recorded).with_context(|| format!("{}: not a settings record", path.display()))?;
    let mut differ = Vec::new();
    for (key, value) in now.as_object().expect("an object") {
        let old = recorded.get(key).unwrap_or(&serde_json::Value::Null);
        if old != value {
            differ.push(format!("{key}: trace {old}, now {value}"));
        }
    }
    if !differ.is_empty() {
        bail!(
            "the trace {} was written by a search with other settings ({}); resume with those settings, or \
             start a new run (another --trace or no --resume)",
            trace.display(),
            differ.join("; ")
        );
    }
    Ok(())
}

/// A new trace: refused when something other than an empty trace is there; then `now` is written as its
/// settings record (only an earlier record is replaced).
fn record_settings(args: &SearchArgs, trace: &Path, now: &serde_json::Value) -> anyhow::Result<()> {
    let path = settings_path(trace);
    if args.resume {
        errln!("note:     --resume: no trace at {} yet; this run starts it", synth_base::sanitize::shown_path(trace));
    }
    // Refused here, before the settings record is written (the loop refuses it too): a refused run
    // must leave the earlier run's record as it was, or a later --resume would mix two runs.
    match std::fs::metadata(trace) {
        Ok(m) if m.is_dir() => {
            bail!("--trace {} is a directory; name a file (nothing was changed)", trace.display())
        }
        Ok(m) if m.len() > 0 && !looks_like_trace(trace) => bail!(
            "--trace {} is a file that is not a trace of attempts (its first line is no attempt); name another \
             --trace, or move that file away (nothing was changed)",
            trace.display()
        ),
        Ok(m) if m.len() > 0 => bail!(
            "{} holds the attempts of an earlier run; pass --resume to continue it, or another --out (or move \
             the trace away) to start over (nothing was changed)",
            trace.display()
        ),
        _ => {}
    }
    // Only a settings record (of an earlier run whose trace is empty or gone) is replaced.
    if let Ok(m) = std::fs::symlink_metadata(&path) {
        let record = m.is_file()
            && synth_base::input::read_text_capped(&path, synth_base::input::MAX_SPEC_BYTES, "settings record")
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .is_some_and(|v| v.get("agents").is_some() && v.get("training_data").is_some());
        if !record {
            bail!(
                "{} is in the way: the trace's settings record goes there, and it holds something else (not a \
                 record `synth search` wrote); move it away or pass another --trace (nothing was changed)",
                path.display()
            );
        }
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(now)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
