//! `synth rewrite`: runs the agent loop over a kernel source file described by a task spec and writes
//! the winner and a report to an output directory (never over the original).
//!
//! Output directory contents: `<target file name>` (the winner), `report.json`, `report.txt`,
//! `trace.jsonl` (every attempt, for `--resume`), `candidates/<id>-<source>.<ext>` (every distinct
//! candidate text) and `work/cand-NNN/` (working copies kept by the spec's `workdir.keep`).

use crate::engine::proposers::command::CommandProposer;
use crate::engine::proposers::Checker;
use crate::engine::{run_loop, Attempt, LoopConfig, Proposer, Rejection};
use crate::rewrite::replay::ReplayProposer;
use crate::rewrite::report::{render_text, rows, status_of, Report, Winner};
use crate::rewrite::spec::load_spec;
use crate::rewrite::task::RewriteTask;
use anyhow::{bail, Context};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::session::{agent_timeout, EndpointArgs};

/// Arguments of `synth rewrite`.
#[derive(Debug, clap::Args)]
pub struct RewriteArgs {
    /// Task spec (TOML): target file, build and test commands, timeouts, result line.
    #[arg(long)]
    pub task: PathBuf,
    /// Proposer: `replay:DIR` (pre-written rewrites, in file-name order), `cmd:<shell command>` (the
    /// request as JSON on stdin, the rewritten file on stdout) or `openai` (an OpenAI-compatible chat
    /// endpoint). Repeat for several; offspring slot s uses agent s % count.
    #[arg(long = "agent", required = true)]
    pub agents: Vec<String>,
    /// Seconds an agent command or HTTP request may take before it is killed / abandoned.
    #[arg(long, default_value_t = 600.0)]
    pub agent_timeout: f64,
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    /// Loop iterations (the original is evaluated first, before iteration 1).
    #[arg(long, default_value_t = 3)]
    pub iterations: usize,
    /// Candidates per iteration.
    #[arg(long, default_value_t = 2)]
    pub offspring: usize,
    /// Output directory for the winner, the reports and the trace (must not be inside the task's
    /// working-copy root).
    #[arg(long)]
    pub out: PathBuf,
    /// Failed repairs tolerated per lineage before it is dropped.
    #[arg(long, default_value_t = 2)]
    pub repair_limit: usize,
    /// Seed of parent selection.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Stop after this many iterations without a new best.
    #[arg(long)]
    pub patience: Option<usize>,
    /// Continue the run recorded in `<out>/trace.jsonl`.
    #[arg(long)]
    pub resume: bool,
    /// Worker threads for building candidates (0: one per core). Test runs are serialized unless the
    /// spec sets `test.exclusive = false`.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// No per-iteration progress lines.
    #[arg(long)]
    pub quiet: bool,
}

/// Accepts any non-blank code block as a rewrite (the build is the real check).
fn rewrite_checker() -> Checker {
    Arc::new(|text: &str| {
        if text.trim().is_empty() {
            Err(Rejection("the code block is empty; reply with the whole rewritten file".to_string()))
        } else {
            Ok(())
        }
    })
}

/// The loop's proposers, and the replay proposers among them (to name their candidates in the report).
pub type Proposers = (Vec<Box<dyn Proposer>>, Vec<ReplayProposer>);

/// Builds the proposers named by `--agent` values.
pub fn make_proposers(args: &RewriteArgs) -> anyhow::Result<Proposers> {
    let timeout = agent_timeout(args.agent_timeout)?;
    let mut proposers: Vec<Box<dyn Proposer>> = Vec::new();
    let mut replays = Vec::new();
    for (i, a) in args.agents.iter().enumerate() {
        let a = a.trim();
        if let Some(dir) = a.strip_prefix("replay:") {
            let r = ReplayProposer::from_dir(Path::new(dir), args.offspring, i, args.agents.len())?;
            replays.push(r.clone());
            proposers.push(Box::new(r));
        } else if let Some(command) = a.strip_prefix("cmd:") {
            if command.trim().is_empty() {
                bail!("--agent cmd: needs a command after `cmd:`, e.g. --agent 'cmd:python3 my_agent.py'");
            }
            proposers.push(Box::new(CommandProposer::new(command, timeout, rewrite_checker())));
        } else if a == "openai" {
            proposers.push(Box::new(args.endpoint.openai(timeout, rewrite_checker())?));
        } else {
            bail!("--agent {a}: expected replay:DIR, cmd:<command> or openai");
        }
    }
    Ok((proposers, replays))
}

/// `path` made absolute with its longest existing prefix resolved (links, `..`), so a directory that
/// does not exist yet can be compared with existing ones.
fn resolve_future(path: &Path) -> anyhow::Result<PathBuf> {
    let abs = std::path::absolute(path).with_context(|| format!("cannot resolve {}", path.display()))?;
    let mut existing = abs.as_path();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => break,
        }
    }
    let mut out = std::fs::canonicalize(existing).with_context(|| format!("cannot resolve {}", existing.display()))?;
    for name in rest.into_iter().rev() {
        out.push(name);
    }
    Ok(out)
}

/// Refuses output directories that could overwrite or pollute the task (checked before anything is
/// created), then creates the directory.
fn check_out_dir(out: &Path, task: &RewriteTask) -> anyhow::Result<PathBuf> {
    let resolved = resolve_future(out)?;
    let root = std::fs::canonicalize(&task.spec().workdir.root)?;
    if resolved.starts_with(&root) {
        bail!(
            "--out {} is inside the task directory {} that is copied for every candidate; choose a directory \
             outside it",
            out.display(),
            root.display()
        );
    }
    let target = std::fs::canonicalize(&task.spec().target)?;
    if resolved.join(task.spec().target_file_name()) == target {
        bail!("--out {} would write the winner over the original {}", out.display(), target.display());
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create the output directory {}", out.display()))?;
    std::fs::canonicalize(out).with_context(|| format!("cannot resolve {}", out.display()))
}

/// File-name-safe label.
fn slug(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' { c } else { '_' })
        .collect();
    t.chars().take(60).collect()
}

/// The program a shell command starts, when it is a bare name (not a path, a builtin or an assignment)
/// that is not on `PATH`.
pub fn missing_program(command: &str) -> Option<String> {
    const BUILTINS: [&str; 14] =
        ["cd", "export", "set", "true", "false", "test", "[", "echo", "exec", "if", "for", "env", "(", "{"];
    let word = command.split_whitespace().find(|w| !w.contains('='))?;
    if word.contains('/') || BUILTINS.contains(&word) || word.starts_with(['(', '{', '$', '\'', '"']) {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    let found = std::env::split_paths(&path).any(|d| d.join(word).is_file());
    (!found).then(|| word.to_string())
}

/// Runs `synth rewrite`.
pub fn run(args: RewriteArgs) -> anyhow::Result<()> {
    let spec = load_spec(&args.task)?;
    for (what, step) in [("build", spec.build.as_ref()), ("test", Some(&spec.test))] {
        if let Some(program) = step.and_then(|s| missing_program(&s.command)) {
            bail!(
                "the {what} command of {} runs `{program}`, which is not on PATH; install it or run on a machine \
                 that has it (the command: {})",
                args.task.display(),
                step.map_or("", |s| s.command.as_str())
            );
        }
    }
    let task = RewriteTask::new(spec)?;
    let out = check_out_dir(&args.out, &task)?;
    let task = task.with_keep_dir(out.join("work"));
    let (proposers, replays) = make_proposers(&args)?;

    let cfg = LoopConfig {
        iterations: args.iterations,
        offspring: args.offspring,
        repair_limit: args.repair_limit,
        seed: args.seed,
        trace: Some(out.join("trace.jsonl")),
        resume: args.resume,
        threads: args.threads,
        patience: args.patience,
        verbose: !args.quiet,
        ..LoopConfig::default()
    };
    let outcome = run_loop(&task, &proposers, &cfg)?;

    let original = task.original().to_string();
    let source = |a: &Attempt| -> String {
        if a.candidate == original {
            return "original".into();
        }
        for r in &replays {
            if let Some((name, _)) = r.files().iter().find(|(_, t)| *t == a.candidate) {
                return name.clone();
            }
        }
        if a.candidate.is_empty() {
            return format!("({})", a.proposer);
        }
        a.proposer.clone()
    };
    let base = outcome.attempts.iter().find(|a| a.id == 0 && a.iteration == 0);
    let baseline_latency_us = base.and_then(|a| a.eval.score);
    let ext = task.spec().target.extension().map(|e| e.to_string_lossy().into_owned()).unwrap_or_else(|| "txt".into());

    // Every distinct candidate text.
    let cand_dir = out.join("candidates");
    std::fs::create_dir_all(&cand_dir).with_context(|| format!("cannot create {}", cand_dir.display()))?;
    let mut written = BTreeSet::new();
    for a in &outcome.attempts {
        if a.candidate.is_empty() || a.duplicate_of.is_some() || !written.insert(a.id) {
            continue;
        }
        let label = slug(&source(a));
        let label = label.strip_suffix(&format!(".{ext}")).unwrap_or(&label);
        let p = cand_dir.join(format!("{:03}-{label}.{ext}", a.id));
        std::fs::write(&p, &a.candidate).with_context(|| format!("cannot write {}", p.display()))?;
    }

    let winner = match &outcome.best {
        Some(b) => {
            let path = out.join(task.spec().target_file_name());
            std::fs::write(&path, crate::rewrite::task::unfence(&b.candidate))
                .with_context(|| format!("cannot write the winner to {}", path.display()))?;
            Some(Winner {
                id: b.id,
                source: source(b),
                latency_us: b.eval.score.unwrap_or(f64::NAN),
                speedup: baseline_latency_us.zip(b.eval.score).map(|(x, y)| x / y),
                path: path.display().to_string(),
            })
        }
        None => None,
    };
    let command: Vec<String> = std::env::args().collect();
    let report = Report {
        task: task.spec().name.clone(),
        spec: args.task.display().to_string(),
        target: task.spec().target_in_root().display().to_string(),
        command: command.join(" "),
        baseline_latency_us,
        baseline_status: base.map(status_of).unwrap_or_else(|| "not evaluated".into()),
        winner,
        iterations_run: outcome.iterations_run,
        evaluations: outcome.evaluations,
        elapsed_s: outcome.elapsed.as_secs_f64(),
        candidates: rows(&outcome.attempts, baseline_latency_us, &source),
    };
    let json_path = out.join("report.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    let text = render_text(&report);
    let txt_path = out.join("report.txt");
    std::fs::write(&txt_path, &text).with_context(|| format!("cannot write {}", txt_path.display()))?;
    print!("{text}");
    if report.winner.is_none() {
        bail!(
            "no candidate was correct (the original's status: {}); see {}",
            report.baseline_status,
            txt_path.display()
        );
    }
    Ok(())
}
