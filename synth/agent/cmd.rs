//! `synth search`: the agent loop over selection rules. Loads the latency table and the training sample
//! as `synth run` does, runs propose → evaluate → reflect → select with the chosen proposers (built-in,
//! an external command, an OpenAI-compatible endpoint), then validates the winner, renders it into the
//! output directory and compares it with the other policies on the held-out shapes.

use super::engine::{run_loop_with, LoopConfig, LoopOutcome};
use super::proposers::builtin::BuiltinProposer;
use super::proposers::command::CommandProposer;
use super::proposers::openai::OpenAiProposer;
use super::proposers::Checker;
use super::rule_task::{kernels_used, RuleReflector, RuleSetup, RuleTask};
use super::Proposer;
use crate::catalog::Catalog;
use crate::compare::{self, Policy, TunedTable};
use crate::render::{self, writer::GeneratedFile, Provenance};
use crate::rule::validate::{validate, Severity};
use crate::synthesize::pipeline::{
    crate_root, display_path, layer_names, load_matrix, model_layers, published_rule, shapes_of_layers,
    training_sample, DEFAULT_DATASET, PUBLISHED_RULE_NAME,
};
use crate::synthesize::{FeatureSet, Limits, Weighting};
use anyhow::{bail, Context};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Output directory (relative to the crate root) when `--out` is not given.
pub const DEFAULT_OUT: &str = "generated/search";
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
    /// Base URL of the OpenAI-compatible API (for `--agent openai`), e.g. https://api.openai.com/v1.
    #[arg(long)]
    pub base_url: Option<String>,
    /// Chat model name (for `--agent openai`).
    #[arg(long)]
    pub model: Option<String>,
    /// Environment variable holding the API key (for `--agent openai`).
    #[arg(long, default_value = "OPENAI_API_KEY")]
    pub api_key_env: String,
    /// Sampling temperature sent to the chat model.
    #[arg(long)]
    pub temperature: Option<f64>,
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
    /// Worker threads for proposals and evaluations (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub jobs: usize,
    /// Latency table [default: measurements/h200/qwen3-32b-tp2.csv of the crate].
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Built-in model whose GEMM layers to keep (qwen3-32b, llama-3.1-8b, llama-3.1-70b, qwen2.5-72b).
    #[arg(long, default_value = "qwen3-32b", conflicts_with = "spec")]
    pub gemm_model: String,
    /// Model spec TOML file instead of a built-in model.
    #[arg(long)]
    pub spec: Option<PathBuf>,
    /// Tensor-parallel degree of the model's layers.
    #[arg(long, default_value_t = 2)]
    pub tp: u32,
    /// Number of M values in the training sample (stratified in log2 M).
    #[arg(long, default_value_t = 10)]
    pub sample_m: usize,
    /// Seed of the training sample and of the loop.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Most conditions on the way to a leaf.
    #[arg(long, default_value_t = 6)]
    pub max_depth: usize,
    /// Most leaves (return statements).
    #[arg(long, default_value_t = 8)]
    pub max_leaves: usize,
    /// Most distinct instances the rule may return.
    #[arg(long)]
    pub max_instances: Option<usize>,
    /// Per-shape weight of the objective.
    #[arg(long, value_enum, default_value_t = Weighting::Uniform)]
    pub weight: Weighting,
    /// Features the built-in proposer splits on (and lists for agents).
    #[arg(long, value_enum, default_value_t = FeatureSet::Machine)]
    pub features: FeatureSet,
    /// Output directory [default: generated/search of the crate].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No per-iteration progress lines.
    #[arg(long)]
    pub quiet: bool,
    #[command(flatten)]
    pub tuned_train: crate::tuned::cmd::TunedTrainArgs,
}

/// The syntax check that picks a rule among the code blocks of an agent's reply.
pub fn rule_checker(catalog: Catalog) -> Checker {
    Arc::new(move |text: &str| crate::rule::parse_any(text, &catalog).map(|_| ()).map_err(|e| e.to_string()))
}

/// Builds the proposers named by `--agent`.
pub fn build_proposers(args: &SearchArgs, setup: &Arc<RuleSetup>) -> anyhow::Result<Vec<Box<dyn Proposer>>> {
    if !(args.agent_timeout.is_finite() && args.agent_timeout > 0.0) {
        bail!("--agent-timeout must be a positive number of seconds, got {}", args.agent_timeout);
    }
    let timeout = Duration::from_secs_f64(args.agent_timeout);
    let mut out: Vec<Box<dyn Proposer>> = Vec::new();
    for spec in &args.agents {
        let spec = spec.trim();
        if spec == "builtin" {
            out.push(Box::new(BuiltinProposer::new(setup.clone(), args.seed)));
        } else if let Some(command) = spec.strip_prefix("cmd:") {
            if command.trim().is_empty() {
                bail!("--agent cmd: needs a command after `cmd:`, e.g. --agent 'cmd:python3 my_agent.py'");
            }
            out.push(Box::new(CommandProposer::new(command, timeout, rule_checker(setup.catalog.clone()))));
        } else if spec == "openai" {
            let base = args
                .base_url
                .as_deref()
                .context("--agent openai needs --base-url URL (e.g. https://api.openai.com/v1)")?;
            let model = args.model.as_deref().context("--agent openai needs --model NAME")?;
            let mut p =
                OpenAiProposer::new(base, model, &args.api_key_env, timeout, rule_checker(setup.catalog.clone()));
            p.temperature = args.temperature;
            out.push(Box::new(p));
        } else {
            bail!("unknown --agent {spec:?}: expected `builtin`, `cmd:<command>` or `openai`");
        }
    }
    Ok(out)
}

/// Runs `synth search`.
pub fn run(args: SearchArgs) -> anyhow::Result<()> {
    if !args.tuned_train.train_tuned.is_empty() {
        return crate::tuned::cmd::run_search(&args);
    }
    let started = Instant::now();
    if args.iterations == 0 || args.offspring == 0 {
        bail!("--iterations and --offspring must be at least 1");
    }
    if args.max_leaves == 0 || args.max_instances == Some(0) || args.max_depth == 0 {
        bail!("--max-leaves, --max-depth and --max-instances must be at least 1");
    }
    let catalog = Catalog::embedded();
    let dataset = args.dataset.clone().unwrap_or_else(|| crate_root().join(DEFAULT_DATASET));
    let matrix = load_matrix(&dataset, &catalog)?;
    let (model, layers) = model_layers(&args.gemm_model, args.spec.as_deref(), args.tp)?;
    let what = format!("{model} TP={}", args.tp);
    let names = layer_names(&layers);
    let shapes = shapes_of_layers(&matrix, &layers, &what)?;
    if args.sample_m == 0 {
        bail!("--sample-m must be at least 1");
    }
    let (train, heldout, picked) = training_sample(&matrix, &shapes, args.sample_m, args.seed);
    if heldout.is_empty() {
        bail!("every shape is in the training sample: nothing is held out; lower --sample-m");
    }
    let limits = Limits {
        max_depth: args.max_depth,
        max_leaves: args.max_leaves,
        max_instances: args.max_instances,
        features: args.features,
        ..Limits::default()
    };
    let weights = args.weight.weights(&matrix, &train);
    let setup = Arc::new(RuleSetup::new(catalog.clone(), matrix.clone(), train.clone(), weights, limits)?);
    let proposers = build_proposers(&args, &setup)?;
    let out_dir = args.out.clone().unwrap_or_else(|| crate_root().join(DEFAULT_OUT));
    let trace = args.trace.clone().unwrap_or_else(|| out_dir.join(TRACE_FILE));
    let cfg = LoopConfig {
        iterations: args.iterations,
        offspring: args.offspring,
        repair_limit: args.repair_limit,
        seed: args.seed,
        trace: Some(trace.clone()),
        resume: args.resume,
        threads: args.jobs,
        patience: args.patience,
        verbose: !args.quiet,
        ..LoopConfig::default()
    };
    println!(
        "dataset:  {} ({} shapes × {} candidates)",
        display_path(&dataset),
        matrix.shapes.len(),
        matrix.candidates.len()
    );
    println!(
        "training: {} shapes of {what}: M in {picked:?} × {} layers; {} held out",
        train.len(),
        layers.len(),
        heldout.len()
    );
    println!("agents:   {}", proposers.iter().map(|p| p.name()).collect::<Vec<_>>().join(", "));
    let task = RuleTask::new(setup.clone());
    let outcome = run_loop_with(&task, &proposers, &RuleReflector, &cfg)?;
    report_and_render(&args, &setup, &outcome, &heldout, &names, &what, &dataset, &picked, &out_dir, &trace, started)
}

#[allow(clippy::too_many_arguments)]
fn report_and_render(
    args: &SearchArgs,
    setup: &RuleSetup,
    outcome: &LoopOutcome,
    heldout: &[usize],
    names: &compare::report::LayerNames,
    what: &str,
    dataset: &std::path::Path,
    picked: &[u32],
    out_dir: &std::path::Path,
    trace: &std::path::Path,
    started: Instant,
) -> anyhow::Result<()> {
    let catalog = &setup.catalog;
    let matrix = &setup.matrix;
    let failed = outcome.attempts.iter().filter(|a| a.eval.score.is_none()).count();
    println!(
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
            .map(|a| format!("attempt {}: {}", a.id, super::engine::first_line(&a.eval.feedback, 200)))
            .collect();
        bail!("no candidate was evaluated successfully; last feedback:\n  {}", last.join("\n  "));
    };
    let rule = crate::rule::parse_any(&best.candidate, catalog)
        .map_err(|e| anyhow::anyhow!("the winning rule no longer parses: {e}"))?;
    let issues = validate(&rule, catalog);
    if issues.iter().any(|i| i.severity == Severity::Error) {
        bail!("the winning rule is invalid: {}", issues.iter().map(|i| i.to_string()).collect::<Vec<_>>().join("; "));
    }
    for i in &issues {
        println!("warning:  {i}");
    }
    let d = &best.eval.details;
    let num = |k: &str| d.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
    println!(
        "best:     attempt {} (iteration {}, {}): training total {:.2} us, oracle {:.2} us = {:.4} of oracle by total, {:.4} geomean",
        best.id,
        best.iteration,
        best.proposer,
        num("total_us"),
        num("oracle_us"),
        num("of_oracle_total"),
        num("of_oracle_geomean")
    );
    println!("\n{}", crate::rule::text::rule_to_cpp_text(&rule, catalog));

    // Held-out comparison, as `synth run` does it.
    let train = &setup.train;
    let tuned = TunedTable::from_matrix(matrix, train, &format!("best of {} training shapes", train.len()));
    let policies = vec![
        Policy::Default,
        Policy::Tuned { name: "tuned".into(), table: tuned.clone() },
        Policy::NearestM { name: "nearest-M".into(), table: tuned },
        Policy::Rule { name: PUBLISHED_RULE_NAME.into(), rule: published_rule(catalog)? },
        Policy::Rule { name: WINNER_NAME.into(), rule: rule.clone() },
        Policy::Oracle,
    ];
    let report = compare::evaluate(matrix, catalog, &policies, heldout);
    let s = &report.policies[report.policy_index(WINNER_NAME).expect("winner scored")].summary;
    println!("comparison on {} held-out shapes:", report.shapes.len());
    println!("{}", compare::report::table(&report, names));

    let figures = vec![
        format!(
            "{} leaves, depth {}, {} instances: {:?}; found by the agent loop ({} iterations × {} offspring, attempt {} by {})",
            rule.num_leaves(),
            rule.depth(),
            kernels_used(&rule).len(),
            kernels_used(&rule),
            outcome.iterations_run,
            args.offspring,
            best.id,
            best.proposer
        ),
        format!(
            "held-out ({} shapes): {:.3}x default (geomean), {:.3}x default (total time), {:.3}x tuned (geomean), {:.3} of oracle",
            report.shapes.len(),
            s.geomean_vs_default,
            s.total_vs_default,
            s.geomean_vs_tuned.unwrap_or(f64::NAN),
            s.of_oracle
        ),
    ];
    let provenance = Provenance {
        dataset: format!("{} ({}, {} CUs)", display_path(dataset), matrix.gfx, matrix.cu_num),
        training: format!("{} shapes of {what}: M in {picked:?}", train.len()),
        figures,
        command: command_line(args),
    };
    let mut written = render::write_generated(&rule, catalog, matrix, &provenance, out_dir, false)?;
    written.extend(render::writer::write_files(
        out_dir,
        &[GeneratedFile::new("compare.csv", compare::report::csv(&report, names))],
        false,
    )?);
    for f in &written {
        println!("written:  {}", display_path(f));
    }
    println!("trace:    {}", display_path(trace));
    println!(
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

/// The command that repeats the search (non-default options only).
pub fn command_line(args: &SearchArgs) -> String {
    let mut cmd = String::from("cargo run --release -- search");
    for a in &args.agents {
        if a != "builtin" || args.agents.len() > 1 {
            cmd += &format!(" --agent '{a}'");
        }
    }
    if let Some(u) = &args.base_url {
        cmd += &format!(" --base-url {u}");
    }
    if let Some(m) = &args.model {
        cmd += &format!(" --model {m}");
    }
    if args.iterations != 8 {
        cmd += &format!(" --iterations {}", args.iterations);
    }
    if args.offspring != 4 {
        cmd += &format!(" --offspring {}", args.offspring);
    }
    if args.repair_limit != 2 {
        cmd += &format!(" --repair-limit {}", args.repair_limit);
    }
    if let Some(p) = args.patience {
        cmd += &format!(" --patience {p}");
    }
    if let Some(d) = &args.dataset {
        cmd += &format!(" --dataset {}", display_path(d));
    }
    if let Some(s) = &args.spec {
        cmd += &format!(" --spec {}", display_path(s));
    } else if args.gemm_model != "qwen3-32b" {
        cmd += &format!(" --gemm-model {}", args.gemm_model);
    }
    if args.tp != 2 {
        cmd += &format!(" --tp {}", args.tp);
    }
    if args.sample_m != 10 {
        cmd += &format!(" --sample-m {}", args.sample_m);
    }
    if args.seed != 0 {
        cmd += &format!(" --seed {}", args.seed);
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
    if let Some(o) = &args.out {
        cmd += &format!(" --out {}", display_path(o));
    }
    cmd
}
