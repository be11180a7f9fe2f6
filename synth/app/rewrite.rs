//! `synth rewrite`: runs the agent loop over a kernel source file described by a task spec (`--task`),
//! or over every task spec of a directory (`--suite`), and writes the winner and a report to an output
//! directory (never over the original).
//!
//! Output directory contents for one task: `<target file name>` (the winner), `report.json`,
//! `report.txt`, `trace.jsonl` (every attempt, for `--resume`), `candidates/<id>-<source>.<ext>` (every
//! distinct candidate text) and `work/cand-NNN/` (working copies kept by the spec's `workdir.keep`). A
//! suite writes that for each task under `<out>/<task name>/`, then `suite.md`, `suite.json` and
//! `suite.svg` (see [`synth_engine::rewrite::suite`]).

use anyhow::{bail, Context};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use synth_base::input::US_RANGE;
use synth_core::render::writer::GeneratedFile;
use synth_engine::engine::proposers::command::CommandProposer;
use synth_engine::engine::proposers::knobs::KnobProposer;
use synth_engine::engine::proposers::Checker;
use synth_engine::engine::{run_loop, Attempt, LoopConfig, Proposer, Rejection};
use synth_engine::rewrite::replay::ReplayProposer;
use synth_engine::rewrite::report::{ratio, render_text, rows, status_of, Report, Winner};
use synth_engine::rewrite::spec::{load_spec, RewriteSpec};
use synth_engine::rewrite::suite::{render_markdown, render_svg, suite_specs, summarize, task_row};
use synth_engine::rewrite::task::RewriteTask;
use synth_measure::measure::journal::{lock_exclusive, JournalLock, LockWords};

use super::args::{agent_timeout, EndpointArgs};

/// Arguments of `synth rewrite`.
#[derive(Debug, clap::Args)]
pub struct RewriteArgs {
    /// Task spec (TOML): target file, build and test commands, timeouts, result line.
    #[arg(long, required_unless_present = "suite", conflicts_with = "suite")]
    pub task: Option<PathBuf>,
    /// A directory of task specs (`*.toml`): runs the loop on each (into `<out>/<task name>/`) and
    /// writes the suite's summary (`suite.md`, `suite.json`, `suite.svg`).
    #[arg(long)]
    pub suite: Option<PathBuf>,
    /// Tasks of a suite run at the same time (their builds overlap; test runs stay one at a time
    /// across all tasks unless a spec sets `test.exclusive = false`).
    #[arg(
        long,
        default_value_t = 1,
        requires = "suite",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64)
    )]
    pub jobs: usize,
    /// Proposer: `knobs` (or `builtin`: local search over the `// synth:knob` values the target
    /// declares, no model needed), `replay:DIR` (pre-written rewrites, in file-name order),
    /// `cmd:<shell command>` (the request as JSON on stdin, the rewritten file on stdout) or `openai`
    /// (an OpenAI-compatible chat endpoint). Repeat for several; offspring slot s uses agent s % count.
    #[arg(long = "agent", required = true)]
    pub agents: Vec<String>,
    /// Seconds an agent command or HTTP request may take before it is killed / abandoned.
    #[arg(long, default_value_t = 600.0)]
    pub agent_timeout: f64,
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    /// How `--agent openai` constrains the model's answer: `grammar` (GBNF: the target file with each
    /// `// synth:knob` definition one of its declared values, or without knobs a whole file in one fenced
    /// block), `json-schema` (an object of knob values, or `{"source": FILE}`), `none`, or `auto`: what
    /// the server honours, probed once (a refusal falls back with one line saying so).
    #[arg(long, value_name = "HOW", default_value = "auto", value_parser = synth_engine::engine::proposers::constrain::Mode::parse)]
    pub constrain: synth_engine::engine::proposers::constrain::Mode,
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
    /// Worker threads for building candidates, at most 256 (0: one per core). Test runs are serialized unless the
    /// spec sets `test.exclusive = false`.
    #[arg(long, default_value_t = 0, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=256))]
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

/// The loop's proposers, and the replay and knob proposers among them (to name their candidates in the
/// report).
pub struct Proposers {
    pub all: Vec<Box<dyn Proposer>>,
    pub replays: Vec<ReplayProposer>,
    pub knobs: Option<KnobProposer>,
}

/// Builds the proposers named by `--agent` values for `task` (the knob proposer reads the target's
/// knobs; a declaration error names the target's file and line).
pub fn make_proposers(args: &RewriteArgs, task: &RewriteTask) -> anyhow::Result<Proposers> {
    let timeout = agent_timeout(args.agent_timeout)?;
    let mut proposers: Vec<Box<dyn Proposer>> = Vec::new();
    let mut replays = Vec::new();
    let mut knobs = None;
    for (i, a) in args.agents.iter().enumerate() {
        let a = a.trim();
        if a == "knobs" || a == "builtin" {
            let k = KnobProposer::new(task.original())
                .map_err(|e| anyhow::anyhow!("{}", e.located(&task.spec().target.display().to_string())))
                .with_context(|| format!("--agent {a} searches the knobs the target declares"))?;
            knobs = Some(k.clone());
            proposers.push(Box::new(k));
        } else if let Some(dir) = a.strip_prefix("replay:") {
            let r = ReplayProposer::from_dir(Path::new(dir), args.offspring, i, args.agents.len())?;
            replays.push(r.clone());
            proposers.push(Box::new(r));
        } else if let Some(command) = a.strip_prefix("cmd:") {
            if command.trim().is_empty() {
                bail!("--agent cmd: needs a command after `cmd:`, e.g. --agent 'cmd:python3 my_agent.py'");
            }
            proposers.push(Box::new(CommandProposer::new(command, timeout, rewrite_checker())));
        } else if a == "openai" {
            let mut p = args.endpoint.openai(timeout, rewrite_checker())?;
            p.constraint = Some(synth_engine::engine::proposers::constrain::for_source(task.original()));
            p.constrain = args.constrain;
            proposers.push(Box::new(p));
        } else {
            bail!("--agent {a}: expected knobs (or builtin), replay:DIR, cmd:<command> or openai");
        }
    }
    Ok(Proposers { all: proposers, replays, knobs })
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

/// Refuses output directories that could overwrite or pollute the task; returns the resolved path.
/// Creates nothing (a suite checks every task before any directory is made).
fn check_out_dir(out: &Path, task: &RewriteTask, spec_file: &Path) -> anyhow::Result<PathBuf> {
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
    // The task's spec is an input too: no file of the run's end may land on it.
    if let Ok(spec) = std::fs::canonicalize(spec_file) {
        let winner = winner_file_name(&task.spec().target_file_name());
        for name in output_names(&winner) {
            if std::fs::canonicalize(resolved.join(&name)).is_ok_and(|p| p == spec) {
                bail!(
                    "--out {} would write its {name} over the task spec {}; choose another --out (nothing was written)",
                    out.display(),
                    spec_file.display()
                );
            }
        }
    }
    Ok(resolved)
}

/// File-name-safe label.
fn slug(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' { c } else { '_' })
        .take(60)
        .collect();
    // `.` and `..` (or nothing) name no directory of their own: a task so named would write into the
    // suite's output directory or its parent.
    if t.chars().all(|c| c == '.') {
        format!("task{}", "_".repeat(t.len()))
    } else {
        t
    }
}

/// The files a rewrite writes in its output directory besides the winner.
const REWRITE_OUTPUTS: [&str; 5] = ["report.json", "report.txt", "trace.jsonl", "candidates", "work"];

/// Every entry a rewrite writes in its output directory, the winner `winner` included.
fn output_names(winner: &str) -> Vec<String> {
    let trace_files = ["trace.jsonl.settings.json", "trace.jsonl.lock"];
    REWRITE_OUTPUTS.iter().chain(&trace_files).map(|n| n.to_string()).chain([winner.to_string()]).collect()
}

/// The summary files a suite writes in its output directory.
const SUITE_OUTPUTS: [&str; 3] = ["suite.json", "suite.md", "suite.svg"];

/// What a rewrite's trace lock says in its messages.
const TRACE_LOCK: LockWords = LockWords { what: "rewrite trace", run: "synth rewrite", writer: "synth rewrite" };

/// Locks the trace of the output directory `out` (through `<out>/trace.jsonl.lock`, created with the
/// directory when missing): a second rewrite into the same directory is refused, naming the first, rather
/// than both appending to one trace.
fn lock_out(out: &Path) -> anyhow::Result<JournalLock> {
    lock_exclusive(&out.join("trace.jsonl"), &TRACE_LOCK)
}

/// The winner's file name: the target's, unless that is one of [`REWRITE_OUTPUTS`] (or a trace's
/// settings record), which it must not replace: then `winner-` before it.
fn winner_file_name(target: &str) -> String {
    if REWRITE_OUTPUTS.contains(&target) || target.starts_with("trace.jsonl") {
        format!("winner-{target}")
    } else {
        target.to_string()
    }
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

/// Refuses a spec whose build or test program is missing, before anything runs.
fn check_programs(spec: &RewriteSpec, file: &Path) -> anyhow::Result<()> {
    for (what, step) in [("build", spec.build.as_ref()), ("test", Some(&spec.test))] {
        if let Some(program) = step.and_then(|s| missing_program(&s.command)) {
            bail!(
                "the {what} command of {} runs `{program}`, which is not on PATH; install it or run on a machine \
                 that has it (the command: {})",
                file.display(),
                step.map_or("", |s| s.command.as_str())
            );
        }
    }
    Ok(())
}

/// A task ready for the loop: spec read, programs and output directory checked, proposers built.
struct Prepared {
    spec_file: PathBuf,
    task: RewriteTask,
    out: PathBuf,
    proposers: Proposers,
}

/// Reads `spec_file` and prepares its task; `out` is the task's output directory, or with `suite` set
/// the suite's, under which the task gets `<task name>/`. `lock` serializes test runs across tasks.
fn prepare(
    args: &RewriteArgs,
    spec_file: &Path,
    out: &Path,
    suite: bool,
    lock: Option<Arc<Mutex<()>>>,
) -> anyhow::Result<Prepared> {
    let spec = load_spec(spec_file)?;
    check_programs(&spec, spec_file)?;
    let out = if suite { out.join(slug(&spec.name)) } else { out.to_path_buf() };
    let mut task = RewriteTask::new(spec)?;
    if let Some(lock) = lock {
        task = task.with_test_lock(lock);
    }
    let out = check_out_dir(&out, &task, spec_file)?;
    let task = task.with_keep_dir(out.join("work"));
    let proposers = make_proposers(args, &task)?;
    Ok(Prepared { spec_file: spec_file.to_path_buf(), task, out, proposers })
}

/// The files and directories task `p` reads (resolved), each with what it is.
fn task_inputs(p: &Prepared) -> anyhow::Result<[(PathBuf, &'static str); 3]> {
    let resolve =
        |path: &Path| std::fs::canonicalize(path).with_context(|| format!("cannot resolve {}", path.display()));
    Ok([
        (resolve(&p.spec_file)?, "task spec"),
        (resolve(&p.task.spec().workdir.root)?, "task directory"),
        (resolve(&p.task.spec().target)?, "target"),
    ])
}

/// Refuses a suite in which a task's output would land on what any task of the suite reads: every
/// task's output directory against every task's spec, task directory and target (a task named like
/// another's directory would otherwise replace that task's original with its winner), and the suite's
/// summary files against the same. Runs before anything is created or run.
fn check_suite_outputs(prepared: &[Prepared], suite_out: &Path) -> anyhow::Result<()> {
    let suite_out = resolve_future(suite_out)?;
    for a in prepared {
        for (input, what) in task_inputs(a)? {
            for b in prepared {
                let clash = (what == "task directory" && b.out.starts_with(&input)) || input.starts_with(&b.out);
                if clash {
                    bail!(
                        "task \"{}\" ({}) would write into {}, which is, holds or lies in the {what} {} of task \"{}\" ({}); \
                         give one task another `name` or choose another --out (nothing was run or written)",
                        b.task.spec().name,
                        b.spec_file.display(),
                        b.out.display(),
                        input.display(),
                        a.task.spec().name,
                        a.spec_file.display()
                    );
                }
            }
            if let Some(f) = SUITE_OUTPUTS.iter().map(|n| suite_out.join(n)).find(|f| input.starts_with(f)) {
                bail!(
                    "the suite's summary {} would be written over the {what} {} (or a directory holding it) of task \
                     \"{}\" ({}); choose another --out (nothing was run or written)",
                    f.display(),
                    input.display(),
                    a.task.spec().name,
                    a.spec_file.display()
                );
            }
        }
    }
    Ok(())
}

/// Every score of a run (those a resumed trace holds included) is a latency in [`US_RANGE`]: a trace
/// edited by hand or written by another tool is refused where its numbers enter, before any report.
fn check_scores(attempts: &[Attempt], trace: &Path) -> anyhow::Result<()> {
    for a in attempts {
        if let Some(s) = a.eval.score.filter(|s| !US_RANGE.contains(s)) {
            bail!(
                "{}: attempt {} has the latency {s:e} us, outside {:e} to {:e} us (the range a latency may take); the \
                 trace was edited or written by another tool: start without --resume or pass another --out",
                trace.display(),
                a.id,
                US_RANGE.start(),
                US_RANGE.end()
            );
        }
    }
    Ok(())
}

/// The loop's settings from the options, its trace in `out`; the knob search (`knobs`) reads the whole
/// history to avoid every setting already tried.
fn loop_config(args: &RewriteArgs, out: &Path, knobs: bool) -> LoopConfig {
    let (history_successes, history_failures) = if knobs { (usize::MAX, usize::MAX) } else { (24, 8) };
    LoopConfig {
        iterations: args.iterations,
        offspring: args.offspring,
        repair_limit: args.repair_limit,
        seed: args.seed,
        trace: Some(out.join("trace.jsonl")),
        resume: args.resume,
        threads: args.threads,
        patience: args.patience,
        verbose: !args.quiet,
        history_successes,
        history_failures,
        ..LoopConfig::default()
    }
}

/// The distinct candidate texts as files `candidates/NNN-<source>.<ext>`.
fn candidate_files(attempts: &[Attempt], source: &dyn Fn(&Attempt) -> String, ext: &str) -> Vec<GeneratedFile> {
    let mut files = Vec::new();
    let mut written = BTreeSet::new();
    for a in attempts {
        if a.candidate.is_empty() || a.duplicate_of.is_some() || !written.insert(a.id) {
            continue;
        }
        let label = slug(&source(a));
        let label = label.strip_suffix(&format!(".{ext}")).unwrap_or(&label);
        files.push(GeneratedFile::new(format!("candidates/{:03}-{label}.{ext}", a.id), a.candidate.clone()));
    }
    files
}

/// Runs the loop on a prepared task and writes its output directory; returns its report.
fn run_task(args: &RewriteArgs, p: Prepared) -> anyhow::Result<Report> {
    let Prepared { spec_file, task, out, proposers } = p;
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create the output directory {}", out.display()))?;
    let outcome = run_loop(&task, &proposers.all, &loop_config(args, &out, proposers.knobs.is_some()))?;
    check_scores(&outcome.attempts, &out.join("trace.jsonl"))?;
    if !args.quiet {
        for s in synth_engine::engine::stats::proposer_stats(&outcome.attempts) {
            errln!("proposer: {s}");
        }
    }

    let original = task.original();
    let source = |a: &Attempt| -> String {
        if a.candidate == original {
            return "original".into();
        }
        for r in &proposers.replays {
            if let Some((name, _)) = r.files().iter().find(|(_, t)| *t == a.candidate) {
                return name.clone();
            }
        }
        if let Some(s) = proposers.knobs.as_ref().and_then(|k| k.setting_of(&a.candidate).map(|s| (k, s))) {
            return s.0.space().describe(&s.1);
        }
        if a.candidate.is_empty() {
            return format!("({})", a.proposer);
        }
        a.proposer.clone()
    };
    let base = outcome.attempts.iter().find(|a| a.id == 0 && a.iteration == 0);
    let baseline_latency_us = base.and_then(|a| a.eval.score);
    let ext = task.spec().target.extension().map(|e| e.to_string_lossy().into_owned()).unwrap_or_else(|| "txt".into());

    // Every file of the run's end, written all or nothing: the distinct candidate texts, the winner and the
    // two reports.
    let mut files = candidate_files(&outcome.attempts, &source, &ext);

    let winner = match &outcome.best {
        Some(b) => {
            let name = winner_file_name(&task.spec().target_file_name());
            files.push(GeneratedFile::new(name.clone(), synth_engine::rewrite::task::unfence(&b.candidate)));
            Some(Winner {
                id: b.id,
                source: source(b),
                latency_us: b.eval.score.unwrap_or(f64::NAN),
                speedup: baseline_latency_us.zip(b.eval.score).and_then(|(x, y)| ratio(x, y)),
                path: out.join(name).display().to_string(),
            })
        }
        None => None,
    };
    let command: Vec<String> = std::env::args().collect();
    let report = Report {
        task: task.spec().name.clone(),
        spec: spec_file.display().to_string(),
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
    files.push(GeneratedFile::new("report.json", serde_json::to_string_pretty(&report)? + "\n"));
    files.push(GeneratedFile::new("report.txt", render_text(&report)));
    synth_core::render::outdir::write_all(&out, &files)?;
    Ok(report)
}

/// Runs `synth rewrite`.
pub fn run(args: RewriteArgs) -> anyhow::Result<()> {
    if args.suite.is_none() && args.jobs != 1 {
        bail!("--jobs runs the tasks of a suite at the same time and applies to --suite DIR only; drop it for --task");
    }
    if let Some(dir) = &args.suite {
        return run_suite(&args, dir);
    }
    let Some(spec_file) = args.task.clone() else { bail!("give --task SPEC.toml or --suite DIR") };
    let prepared = prepare(&args, &spec_file, &args.out, false, None)?;
    let out = prepared.out.clone();
    let _lock = lock_out(&out)?;
    let report = run_task(&args, prepared)?;
    out!("{}", render_text(&report));
    if report.winner.is_none() {
        bail!(
            "no candidate was correct (the original's status: {}); see {}",
            report.baseline_status,
            out.join("report.txt").display()
        );
    }
    let proposals: Vec<_> = report.candidates.iter().filter(|c| c.id != 0).collect();
    if !proposals.is_empty() && proposals.iter().all(|c| c.latency_us.is_none()) {
        // The original "wins" only because no agent produced anything that ran: a broken agent or build
        // must not read as success in CI.
        bail!(
            "every one of the {} proposals failed, so the original is the result only by default; the \
             failures are in {}",
            proposals.len(),
            out.join("report.txt").display()
        );
    }
    Ok(())
}

/// Reads and checks every task of a suite (its spec, programs and output directory, and every task's
/// output against every task's inputs) before anything runs, so a bad one costs no task's time.
fn prepare_suite(args: &RewriteArgs, specs: &[PathBuf]) -> anyhow::Result<Vec<Prepared>> {
    let lock = Arc::new(Mutex::new(()));
    let mut ready = Vec::new();
    let mut names: HashMap<String, PathBuf> = HashMap::new();
    for f in specs {
        let p = prepare(args, f, &args.out, true, Some(lock.clone()))?;
        let key = slug(&p.task.spec().name);
        if let Some(first) = names.insert(key.clone(), f.clone()) {
            bail!(
                "{} and {} both name the task \"{key}\" (their output directory); give one a different `name`",
                first.display(),
                f.display()
            );
        }
        ready.push(p);
    }
    check_suite_outputs(&ready, &args.out)?;
    Ok(ready)
}

/// `synth rewrite --suite DIR`: every task spec of `dir`, `--jobs` at a time, then the summary.
fn run_suite(args: &RewriteArgs, dir: &Path) -> anyhow::Result<()> {
    if args.jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    let specs = suite_specs(dir)?;
    let ready = prepare_suite(args, &specs)?;
    let _locks = lock_all(&ready)?;
    let prepared: Vec<Mutex<Option<Prepared>>> = ready.into_iter().map(|p| Mutex::new(Some(p))).collect();
    let start = std::time::Instant::now();
    let results: Vec<Mutex<Option<anyhow::Result<Report>>>> = prepared.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..args.jobs.min(prepared.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(slot) = prepared.get(i) else { break };
                let Some(p) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() else { continue };
                let name = p.task.spec().name.clone();
                if !args.quiet {
                    errln!("== task {name} ({} of {})", i + 1, prepared.len());
                }
                let r = run_task(args, p);
                if !args.quiet {
                    match &r {
                        Ok(rep) => errln!("== task {name}: {}", task_line(rep)),
                        Err(e) => errln!("== task {name}: failed: {e:#}"),
                    }
                }
                *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for (f, r) in specs.iter().zip(results) {
        match r.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(Ok(rep)) => {
                if rep.winner.is_none() {
                    problems.push(format!(
                        "{}: no candidate was correct (original: {})",
                        f.display(),
                        rep.baseline_status
                    ));
                }
                rows.push(task_row(&rep));
            }
            Some(Err(e)) => problems.push(format!("{}: {e:#}", f.display())),
            None => problems.push(format!("{}: did not run", f.display())),
        }
    }
    let command: Vec<String> = std::env::args().collect();
    let elapsed = start.elapsed().as_secs_f64();
    let summary = summarize(&dir.display().to_string(), &command.join(" "), &args.agents, rows, elapsed);
    let md = render_markdown(&summary);
    let files = [
        ("suite.json", serde_json::to_string_pretty(&summary)? + "\n"),
        ("suite.md", md.clone()),
        ("suite.svg", render_svg(&summary)?),
    ];
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create the output directory {}", args.out.display()))?;
    for (name, text) in files {
        let p = args.out.join(name);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?;
    }
    out!("{md}");
    if !problems.is_empty() {
        bail!("{} of {} task(s) have no correct candidate:\n  {}", problems.len(), specs.len(), problems.join("\n  "));
    }
    Ok(())
}

/// Locks every task's output directory ([`lock_out`]) before any task runs; when one is held by another
/// run, the locks taken so far are given back (with the lock files and directories they created).
fn lock_all(prepared: &[Prepared]) -> anyhow::Result<Vec<JournalLock>> {
    let mut locks = Vec::new();
    for p in prepared {
        match lock_out(&p.out) {
            Ok(l) => locks.push(l),
            Err(e) => {
                locks.into_iter().for_each(JournalLock::release_unused);
                return Err(e);
            }
        }
    }
    Ok(locks)
}

/// One line on a finished task.
fn task_line(r: &Report) -> String {
    match &r.winner {
        Some(w) => format!(
            "best #{} {} at {:.2} us ({})",
            w.id,
            w.source,
            w.latency_us,
            w.speedup.map(|s| format!("{s:.2}x the original")).unwrap_or_else(|| "no baseline".into())
        ),
        None => format!("no correct candidate (original: {})", r.baseline_status),
    }
}
