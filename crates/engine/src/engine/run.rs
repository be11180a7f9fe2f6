//! The loop engine: propose → evaluate → reflect → select, generic over a [`Task`].
//!
//! Roles:
//! - **generator**: the [`Proposer`]s; offspring slot `s` uses `proposers[s % proposers.len()]`;
//! - **evaluator**: [`Task::evaluate`];
//! - **reflector**: a [`Reflector`] turns each evaluated attempt (a failure or a regret) into guidance for
//!   the next proposal built on it ([`DefaultReflector`] unless the task supplies its own);
//! - **optimizer / selection**: the best attempt is kept; each iteration every slot either repairs its
//!   lineage's failed head, or continues from a parent drawn from the top of the history (slot 0 always
//!   from the best).
//!
//! Lineages: slot `s` owns one lineage at a time (initially lineage `s + 1`; the baseline is lineage 0).
//! A failed attempt is repaired in the next iteration (`parent` = the failure, guidance = its reflection).
//! When the first failure and then `repair_limit` repairs in a row have all failed, the lineage is
//! dropped (the "debugging trap"): the slot starts a new lineage with `parent: None` and guidance asking
//! for a different strategy.
//!
//! Each iteration proposes and evaluates its `offspring` candidates in parallel (rayon). Proposals of
//! iteration `t` only see attempts of iterations `< t`, and parent choice uses an RNG seeded from
//! `(seed, t, slot)`, so a run is deterministic when its proposers are. Every attempt is appended to the
//! JSONL trace as soon as it is evaluated; `resume` re-reads the trace, replays the same plan and only
//! runs the slots the trace does not hold.

use super::trace::{read_trace, TraceWriter};
use super::{Attempt, Evaluation, Proposal, ProposalRequest, ProposeError, Proposer, Task};
use anyhow::{bail, Context};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Loop settings.
#[derive(Debug, Clone)]
pub struct LoopConfig {
    /// Number of iterations (the baseline, if any, is iteration 0 and not counted).
    pub iterations: usize,
    /// Candidates proposed and evaluated per iteration (one per slot).
    pub offspring: usize,
    /// Failed repairs tolerated per lineage before it is dropped (K).
    pub repair_limit: usize,
    /// Seed of parent selection (and handed to nothing else: proposers derive their own randomness from
    /// the request).
    pub seed: u64,
    /// JSONL trace of every attempt. None: no trace (and no resume).
    pub trace: Option<PathBuf>,
    /// Continue the run recorded in `trace` (a missing trace file starts a new run).
    pub resume: bool,
    /// Parents are drawn from this many best successful attempts.
    pub parent_pool: usize,
    /// Successful attempts (best first) handed to proposers in `history`.
    pub history_successes: usize,
    /// Most recent failed attempts handed to proposers after the successes.
    pub history_failures: usize,
    /// Worker threads for proposing and evaluating; 0 uses rayon's global pool.
    pub threads: usize,
    /// Stop early once the best score is at or below this.
    pub target_score: Option<f64>,
    /// Stop early after this many iterations without a new best.
    pub patience: Option<usize>,
    /// Print one progress line per iteration to stderr.
    pub verbose: bool,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            iterations: 10,
            offspring: 4,
            repair_limit: 2,
            seed: 0,
            trace: None,
            resume: false,
            parent_pool: 4,
            history_successes: 24,
            history_failures: 8,
            threads: 0,
            target_score: None,
            patience: None,
            verbose: false,
        }
    }
}

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// All configured iterations ran.
    Iterations,
    /// The best score reached [`LoopConfig::target_score`].
    Target,
    /// [`LoopConfig::patience`] iterations passed without improvement.
    Patience,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct LoopOutcome {
    /// The best successful attempt (lowest score; ties go to the earlier attempt).
    pub best: Option<Attempt>,
    /// Every attempt of the run (including those read back on resume), ordered by id.
    pub attempts: Vec<Attempt>,
    /// Iterations completed in total (resumed ones included).
    pub iterations_run: usize,
    /// Wall time of this invocation.
    pub elapsed: Duration,
    /// Candidates evaluated by this invocation (reused duplicates and resumed attempts excluded).
    pub evaluations: usize,
    /// Attempts read back from the trace.
    pub resumed: usize,
    /// Why the loop ended.
    pub stop: StopReason,
}

/// Reflector role: turns an evaluated attempt into guidance for the proposal that builds on it.
pub trait Reflector: Sync {
    /// Guidance for a proposal continuing from `attempt` (a repair when it failed, an improvement
    /// otherwise). `best` is the best successful attempt before this one's iteration.
    fn reflect(&self, attempt: &Attempt, best: Option<&Attempt>) -> String;

    /// Guidance for the fresh proposal that replaces a dropped lineage whose last attempt was `last`.
    fn new_strategy(&self, last: &Attempt, repair_limit: usize) -> String {
        format!(
            "Lineage {} was dropped: the candidate failed and {} repair attempt(s) in a row failed too \
             (last error: {}). Do not repair it again. Start over with a new strategy: propose a \
             different candidate from scratch.",
            last.lineage,
            repair_limit,
            first_line(&last.eval.feedback, 300)
        )
    }

    /// Guidance for a proposal with no parent while nothing has succeeded yet.
    fn initial(&self) -> String {
        "No candidate has been evaluated successfully yet: propose a first complete candidate.".to_string()
    }
}

/// Generic reflection: failures repeat the error and ask for a fix that keeps what worked; successes
/// state the score relative to the best and repeat the task's feedback.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultReflector;

impl Reflector for DefaultReflector {
    fn reflect(&self, attempt: &Attempt, best: Option<&Attempt>) -> String {
        match attempt.eval.score {
            None => format!(
                "The candidate failed: {}\nFix exactly this problem and keep the rest of the candidate.",
                clip(&attempt.eval.feedback, 2000)
            ),
            Some(score) => {
                let rel = match best.and_then(|b| b.eval.score.map(|s| (b.id, s))) {
                    Some((id, b)) if score < b => {
                        format!("New best: score {score:.6} beats the previous best {b:.6} (attempt {id}).")
                    }
                    Some((id, b)) if b > 0.0 => format!(
                        "Score {score:.6} is {:.2}% worse than the best {b:.6} (attempt {id}).",
                        (score / b - 1.0) * 100.0
                    ),
                    Some((id, b)) => format!("Score {score:.6}; best so far {b:.6} (attempt {id})."),
                    None => format!("Score {score:.6}; the first successful candidate."),
                };
                format!("{rel}\n{}\nImprove where it loses the most.", clip(&attempt.eval.feedback, 2000))
            }
        }
    }
}

/// Runs the loop with the [`DefaultReflector`].
pub fn run_loop(task: &dyn Task, proposers: &[Box<dyn Proposer>], cfg: &LoopConfig) -> anyhow::Result<LoopOutcome> {
    run_loop_with(task, proposers, &DefaultReflector, cfg)
}

/// Per-slot lineage state, rebuilt identically on resume by replaying attempts in plan order.
#[derive(Debug, Clone)]
struct SlotState {
    lineage: usize,
    head: Option<usize>,
    failures_in_a_row: usize,
}

/// What one slot will do in an iteration.
#[derive(Debug, Clone)]
struct Plan {
    id: usize,
    slot: usize,
    lineage: usize,
    parent: Option<usize>,
    guidance: String,
}

/// Runs the loop with a task-specific reflector. Errors only on configuration or trace I/O problems;
/// proposer and evaluator failures become failed attempts.
pub fn run_loop_with(
    task: &dyn Task,
    proposers: &[Box<dyn Proposer>],
    reflector: &dyn Reflector,
    cfg: &LoopConfig,
) -> anyhow::Result<LoopOutcome> {
    let start = Instant::now();
    check_config(proposers, cfg)?;
    let (mut loaded, writer) = open_trace(task, cfg)?;
    let resumed = loaded.len();
    let pool = worker_pool(cfg)?;
    let roles = Roles { task, proposers, reflector, context: task.context(), writer: writer.as_ref() };

    let mut state = LoopState::new(cfg);
    if let Some((a, evaluated)) = roles.baseline(&mut loaded)? {
        state.evaluations += evaluated as usize;
        state.seen.entry(a.candidate.clone()).or_insert(a.id);
        state.attempts.insert(0, a);
    }
    state.best_id = best_of(&state.attempts);

    let mut iterations_run = 0usize;
    let mut stop = StopReason::Iterations;
    for t in 1..=cfg.iterations {
        let view = IterationView::new(t, &state, cfg);
        let plans = plan_iteration(t, cfg, &mut state.slots, &mut state.next_lineage, &state.attempts, reflector);
        let (done, todo) = split_replayed(t, plans, &mut loaded)?;
        let iteration_started = Instant::now();
        let fresh = roles.run_slots(&view.with(&state), &todo, pool.as_ref())?;
        state.record(done, fresh);
        iterations_run = t;
        state.update_best();
        if cfg.verbose {
            report_iteration(t, cfg, &state, iteration_started.elapsed());
        }
        if let Some(reason) = early_stop(cfg, &state) {
            stop = reason;
            break;
        }
    }

    let best = state.best_id.and_then(|id| state.attempts.get(&id)).cloned();
    Ok(LoopOutcome {
        best,
        attempts: state.attempts.into_values().collect(),
        iterations_run,
        elapsed: start.elapsed(),
        evaluations: state.evaluations,
        resumed,
        stop,
    })
}

/// The settings the loop cannot run with.
fn check_config(proposers: &[Box<dyn Proposer>], cfg: &LoopConfig) -> anyhow::Result<()> {
    if proposers.is_empty() {
        bail!("the loop needs at least one proposer");
    }
    if cfg.offspring == 0 {
        bail!("offspring must be at least 1");
    }
    if cfg.resume && cfg.trace.is_none() {
        bail!("resume needs a trace file");
    }
    Ok(())
}

/// Attempts read back from a trace, by id, not yet replayed.
type Loaded = BTreeMap<usize, Attempt>;

/// Loads (resume) or creates the trace: the attempts it holds and the writer that appends to it.
fn open_trace(task: &dyn Task, cfg: &LoopConfig) -> anyhow::Result<(Loaded, Option<TraceWriter>)> {
    match &cfg.trace {
        None => Ok((Loaded::new(), None)),
        Some(path) if cfg.resume && path.exists() => resume_trace(task, cfg, path),
        Some(path) => {
            // A trace of an earlier run holds its attempts (agents' answers, perhaps paid for): it is
            // continued with --resume or kept, never silently started over.
            if std::fs::metadata(path).is_ok_and(|m| m.len() > 0) {
                bail!(
                    "{} holds the attempts of an earlier run; pass --resume to continue it, or another --out \
                     (or move the trace away) to start over (nothing was changed)",
                    path.display()
                );
            }
            Ok((Loaded::new(), Some(TraceWriter::create(path)?)))
        }
    }
}

/// Reads the trace of the run to continue, checks each attempt against this run's settings (and, for a
/// deterministic task, its score), and opens it for appending after its last whole line.
fn resume_trace(task: &dyn Task, cfg: &LoopConfig, path: &Path) -> anyhow::Result<(Loaded, Option<TraceWriter>)> {
    let contents = read_trace(path)?;
    if let Some(tail) = &contents.dropped_tail {
        if cfg.verbose {
            errln!(
                "trace {}: dropping a truncated last line ({}...)",
                path.display(),
                synth_base::sanitize::shown(&clip(tail, 60))
            );
        }
    }
    let mut loaded = Loaded::new();
    for a in contents.attempts {
        check_trace_attempt(&a, cfg, path)?;
        loaded.insert(a.id, a);
    }
    if task.deterministic() {
        check_replayed_scores(task, &loaded, path)?;
    }
    Ok((loaded, Some(TraceWriter::append_after(path, contents.valid_len)?)))
}

/// A trace attempt's slot and id must be those this run's offspring count gives it.
fn check_trace_attempt(a: &Attempt, cfg: &LoopConfig, path: &Path) -> anyhow::Result<()> {
    if a.iteration > 0 && a.slot >= cfg.offspring {
        bail!(
            "{}: attempt {} used offspring slot {} but this run has --offspring {}; resume with the original \
             offspring count",
            path.display(),
            a.id,
            a.slot,
            cfg.offspring
        );
    }
    if a.id != attempt_id(a.iteration, a.slot, cfg.offspring) {
        bail!(
            "{}: attempt id {} does not match iteration {} slot {} with offspring {}; the trace comes from a run \
             with a different configuration",
            path.display(),
            a.id,
            a.iteration,
            a.slot,
            cfg.offspring
        );
    }
    Ok(())
}

/// The run's own worker pool, when `threads` asks for one.
fn worker_pool(cfg: &LoopConfig) -> anyhow::Result<Option<rayon::ThreadPool>> {
    if cfg.threads == 0 {
        return Ok(None);
    }
    let pool =
        rayon::ThreadPoolBuilder::new().num_threads(cfg.threads).build().context("cannot start the worker pool")?;
    Ok(Some(pool))
}

/// Splits an iteration's plans into the attempts the trace already holds (each checked against its plan)
/// and the plans still to run.
fn split_replayed(t: usize, plans: Vec<Plan>, loaded: &mut Loaded) -> anyhow::Result<(Vec<Attempt>, Vec<Plan>)> {
    let mut done: Vec<Attempt> = Vec::new();
    let mut todo: Vec<Plan> = Vec::new();
    for p in plans {
        match loaded.remove(&p.id) {
            Some(a) => {
                if a.lineage != p.lineage || a.parent_id != p.parent {
                    bail!(
                        "trace attempt {} (iteration {}, slot {}) has lineage {} / parent {:?} but replaying the \
                         run gives lineage {} / parent {:?}: the trace was written with a different seed, repair \
                         limit or proposers; resume with the original settings",
                        a.id,
                        t,
                        p.slot,
                        a.lineage,
                        a.parent_id,
                        p.lineage,
                        p.parent
                    );
                }
                done.push(a)
            }
            None => todo.push(p),
        }
    }
    Ok((done, todo))
}

/// The loop's state between iterations.
struct LoopState {
    attempts: BTreeMap<usize, Attempt>,
    /// Candidate text → the first attempt that evaluated it.
    seen: HashMap<String, usize>,
    slots: Vec<SlotState>,
    next_lineage: usize,
    best_id: Option<usize>,
    since_improvement: usize,
    /// Candidates evaluated by this invocation.
    evaluations: usize,
}

impl LoopState {
    fn new(cfg: &LoopConfig) -> LoopState {
        LoopState {
            attempts: BTreeMap::new(),
            seen: HashMap::new(),
            slots: (0..cfg.offspring).map(|s| SlotState { lineage: s + 1, head: None, failures_in_a_row: 0 }).collect(),
            next_lineage: cfg.offspring + 1,
            best_id: None,
            since_improvement: 0,
            evaluations: 0,
        }
    }

    /// Adds an iteration's attempts (replayed and fresh, the latter with whether they were evaluated) in id
    /// order, moving each slot's head and failure count.
    fn record(&mut self, mut done: Vec<Attempt>, fresh: Vec<(Attempt, bool)>) {
        for (a, evaluated) in fresh {
            self.evaluations += evaluated as usize;
            done.push(a);
        }
        done.sort_by_key(|a| a.id);
        for a in done {
            let st = &mut self.slots[a.slot];
            st.head = Some(a.id);
            if a.eval.score.is_some() {
                st.failures_in_a_row = 0;
            } else {
                st.failures_in_a_row += 1;
            }
            if a.duplicate_of.is_none() {
                self.seen.entry(a.candidate.clone()).or_insert(a.id);
            }
            self.attempts.insert(a.id, a);
        }
    }

    /// Takes the best attempt again and counts the iterations since it last improved.
    fn update_best(&mut self) {
        let new_best = best_of(&self.attempts);
        let improved = score_of(&self.attempts, new_best) < score_of(&self.attempts, self.best_id);
        self.best_id = new_best;
        self.since_improvement = if improved { 0 } else { self.since_improvement + 1 };
    }
}

/// What the proposals of iteration `t` see: the history and best of the iterations before it.
struct IterationView {
    t: usize,
    history: Vec<Attempt>,
    best_before: Option<Attempt>,
}

impl IterationView {
    fn new(t: usize, state: &LoopState, cfg: &LoopConfig) -> IterationView {
        IterationView {
            t,
            history: history_for(&state.attempts, cfg),
            best_before: state.best_id.and_then(|id| state.attempts.get(&id)).cloned(),
        }
    }

    /// The view with the state's attempts and seen candidates (unchanged while the iteration runs).
    fn with<'a>(&'a self, state: &'a LoopState) -> Iteration<'a> {
        Iteration { view: self, attempts: &state.attempts, seen: &state.seen }
    }
}

/// An iteration in progress: its view and the attempts of the iterations before it.
struct Iteration<'a> {
    view: &'a IterationView,
    attempts: &'a BTreeMap<usize, Attempt>,
    seen: &'a HashMap<String, usize>,
}

/// The roles of a run and where its attempts are written.
struct Roles<'a> {
    task: &'a dyn Task,
    proposers: &'a [Box<dyn Proposer>],
    reflector: &'a dyn Reflector,
    context: serde_json::Value,
    writer: Option<&'a TraceWriter>,
}

/// A proposal's candidate and its evaluation (reused from `duplicate_of` when the text was seen before).
struct Judged {
    candidate: String,
    eval: Evaluation,
    duplicate_of: Option<usize>,
    /// Whether the task evaluated it now.
    evaluated: bool,
}

impl Roles<'_> {
    /// The baseline attempt (iteration 0), read back from the trace or evaluated (then `true`); None when
    /// the task has no starting point.
    fn baseline(&self, loaded: &mut Loaded) -> anyhow::Result<Option<(Attempt, bool)>> {
        let Some(base) = self.task.baseline() else {
            return Ok(None);
        };
        match loaded.remove(&0) {
            Some(a) if a.candidate != base => bail!(
                "the trace's baseline (attempt 0) differs from this task's starting point: the trace belongs to \
                 another task or input; pass another --trace or start without --resume"
            ),
            Some(a) => Ok(Some((a, false))),
            None => {
                let eval = guarded_eval(self.task, &base);
                let mut a = Attempt::new(0, 0, "baseline", base, eval);
                a.reflection = self.reflector.reflect(&a, None);
                self.write(&a)?;
                Ok(Some((a, true)))
            }
        }
    }

    /// Runs the plans of an iteration in parallel (on `pool` when given).
    fn run_slots(
        &self,
        it: &Iteration,
        todo: &[Plan],
        pool: Option<&rayon::ThreadPool>,
    ) -> anyhow::Result<Vec<(Attempt, bool)>> {
        let run_one = |p: &Plan| self.run_slot(it, p);
        let results: Vec<anyhow::Result<(Attempt, bool)>> = match pool {
            Some(pool) => pool.install(|| todo.par_iter().map(run_one).collect()),
            None => todo.par_iter().map(run_one).collect(),
        };
        results.into_iter().collect()
    }

    /// One slot's attempt: proposed, evaluated (or its duplicate's evaluation reused), reflected on and
    /// written to the trace; with whether the task evaluated it.
    fn run_slot(&self, it: &Iteration, p: &Plan) -> anyhow::Result<(Attempt, bool)> {
        let proposer = &self.proposers[p.slot % self.proposers.len()];
        let req = ProposalRequest {
            task_context: self.context.clone(),
            history: it.view.history.clone(),
            parent: p.parent.and_then(|id| it.attempts.get(&id)).cloned(),
            guidance: p.guidance.clone(),
            iteration: it.view.t,
            offspring_index: p.slot,
        };
        let asked = Instant::now();
        let proposal = match catch_unwind(AssertUnwindSafe(|| proposer.propose_traced(&req))) {
            Ok(p) => p,
            Err(panic) => {
                Proposal::from(Err(ProposeError::Failed(format!("proposer panicked: {}", panic_text(&panic)))))
            }
        };
        let agent = agent_record(proposal.meta, asked.elapsed());
        let judged = self.judge(proposer.as_ref(), proposal.result, it);
        let mut a = Attempt {
            lineage: p.lineage,
            slot: p.slot,
            parent_id: p.parent,
            guidance: p.guidance.clone(),
            duplicate_of: judged.duplicate_of,
            raw: proposal.raw,
            agent,
            ..Attempt::new(p.id, it.view.t, proposer.name(), judged.candidate, judged.eval)
        };
        a.reflection = self.reflector.reflect(&a, it.view.best_before.as_ref());
        if let Some(prev) = a.duplicate_of {
            a.reflection =
                format!("This candidate repeats attempt {prev}; propose something different.\n{}", a.reflection);
        }
        // Written as soon as it is known, so an interruption loses only candidates in flight.
        self.write(&a)?;
        Ok((a, judged.evaluated))
    }

    /// The candidate of a proposal and its evaluation: a proposer's failure is a failed attempt, a text
    /// seen before reuses that attempt's evaluation, anything else is evaluated by the task.
    fn judge(&self, proposer: &dyn Proposer, proposed: Result<String, ProposeError>, it: &Iteration) -> Judged {
        match proposed {
            Err(msg) => Judged {
                candidate: String::new(),
                eval: Evaluation {
                    score: None,
                    feedback: format!("proposer {} failed: {msg}", proposer.name()),
                    details: serde_json::json!({ "stage": "propose" }),
                },
                duplicate_of: None,
                evaluated: false,
            },
            Ok(text) => match it.seen.get(&text).and_then(|id| it.attempts.get(id)) {
                Some(prev) => {
                    Judged { candidate: text, eval: prev.eval.clone(), duplicate_of: Some(prev.id), evaluated: false }
                }
                None => {
                    let eval = guarded_eval(self.task, &text);
                    Judged { candidate: text, eval, duplicate_of: None, evaluated: true }
                }
            },
        }
    }

    fn write(&self, a: &Attempt) -> anyhow::Result<()> {
        match self.writer {
            Some(w) => w.append(a),
            None => Ok(()),
        }
    }
}

/// The progress line of iteration `t` (stderr).
fn report_iteration(t: usize, cfg: &LoopConfig, state: &LoopState, took: Duration) {
    let failed = state.attempts.values().filter(|a| a.iteration == t && a.eval.score.is_none()).count();
    let best_txt = state
        .best_id
        .and_then(|id| state.attempts.get(&id))
        .and_then(|a| a.eval.score.map(|s| format!("{s:.4} (attempt {})", a.id)))
        .unwrap_or_else(|| "none".into());
    errln!(
        "iteration {t}/{}: {} candidates, {failed} failed, best {best_txt} ({:.1} s)",
        cfg.iterations,
        cfg.offspring,
        took.as_secs_f64()
    );
}

/// Why the loop stops after this iteration, if it does: the target score reached, or patience spent.
fn early_stop(cfg: &LoopConfig, state: &LoopState) -> Option<StopReason> {
    if let (Some(target), Some(best)) = (cfg.target_score, score_of(&state.attempts, state.best_id)) {
        if best <= target {
            return Some(StopReason::Target);
        }
    }
    match cfg.patience {
        Some(p) if state.since_improvement >= p => Some(StopReason::Patience),
        _ => None,
    }
}

/// The attempt's `agent` record: the proposer's details (an object, else kept under `details`) with the
/// seconds the proposal took as `propose_s`. Null when the proposer reports nothing (the built-in and
/// replay proposers), so their attempts stay a function of the run's settings.
fn agent_record(meta: serde_json::Value, took: Duration) -> serde_json::Value {
    let mut record = match meta {
        serde_json::Value::Object(m) => m,
        serde_json::Value::Null => return serde_json::Value::Null,
        other => {
            let mut m = serde_json::Map::new();
            m.insert("details".into(), other);
            m
        }
    };
    record.insert("propose_s".into(), serde_json::json!((took.as_secs_f64() * 1000.0).round() / 1000.0));
    serde_json::Value::Object(record)
}

/// Stable attempt id: 0 for the baseline, then `1 + (iteration - 1) * offspring + slot`.
pub fn attempt_id(iteration: usize, slot: usize, offspring: usize) -> usize {
    if iteration == 0 {
        0
    } else {
        1 + (iteration - 1) * offspring + slot
    }
}

/// Decides each slot's parent and guidance for iteration `t`, updating lineage state (drops).
fn plan_iteration(
    t: usize,
    cfg: &LoopConfig,
    slots: &mut [SlotState],
    next_lineage: &mut usize,
    attempts: &BTreeMap<usize, Attempt>,
    reflector: &dyn Reflector,
) -> Vec<Plan> {
    let ranked = ranked_successes(attempts);
    let pool = ranked.len().min(cfg.parent_pool.max(1));
    let mut plans = Vec::with_capacity(slots.len());
    for (s, st) in slots.iter_mut().enumerate() {
        let id = attempt_id(t, s, cfg.offspring);
        let head = st.head.and_then(|h| attempts.get(&h));
        let (parent, guidance) = match head {
            Some(h) if h.eval.score.is_none() => {
                if st.failures_in_a_row > cfg.repair_limit {
                    let guidance = reflector.new_strategy(h, cfg.repair_limit);
                    st.lineage = *next_lineage;
                    *next_lineage += 1;
                    st.failures_in_a_row = 0;
                    st.head = None;
                    (None, guidance)
                } else {
                    let repair = st.failures_in_a_row;
                    let note = format!("Repair attempt {repair} of {} for this lineage.\n", cfg.repair_limit);
                    (Some(h.id), format!("{note}{}", h.reflection))
                }
            }
            _ if pool == 0 => (None, reflector.initial()),
            _ => {
                let rank = if s == 0 { 0 } else { pick_rank(cfg.seed, t, s, pool) };
                let p = ranked[rank];
                (Some(p.id), p.reflection.clone())
            }
        };
        plans.push(Plan { id, slot: s, lineage: st.lineage, parent, guidance });
    }
    plans
}

/// Rank in `0..pool`, weight 1/(rank+1), from an RNG seeded by (seed, iteration, slot).
fn pick_rank(seed: u64, t: usize, s: usize, pool: usize) -> usize {
    let mix = seed ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (s as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    let mut rng = ChaCha8Rng::seed_from_u64(mix);
    let weights: Vec<f64> = (0..pool).map(|r| 1.0 / (r as f64 + 1.0)).collect();
    let total: f64 = weights.iter().sum();
    let mut x = rng.gen::<f64>() * total;
    for (r, w) in weights.iter().enumerate() {
        if x < *w {
            return r;
        }
        x -= w;
    }
    pool - 1
}

/// Successful, non-duplicate attempts by score ascending (ties: earlier first).
fn ranked_successes(attempts: &BTreeMap<usize, Attempt>) -> Vec<&Attempt> {
    let mut v: Vec<&Attempt> =
        attempts.values().filter(|a| a.eval.score.is_some() && a.duplicate_of.is_none()).collect();
    v.sort_by(|a, b| {
        let (x, y) = (a.eval.score.unwrap_or(f64::INFINITY), b.eval.score.unwrap_or(f64::INFINITY));
        x.total_cmp(&y).then(a.id.cmp(&b.id))
    });
    v
}

/// The history handed to proposers: best successes first (ascending score), then recent failures.
fn history_for(attempts: &BTreeMap<usize, Attempt>, cfg: &LoopConfig) -> Vec<Attempt> {
    let mut out: Vec<Attempt> = ranked_successes(attempts).into_iter().take(cfg.history_successes).cloned().collect();
    let failures: Vec<&Attempt> =
        attempts.values().filter(|a| a.eval.score.is_none() && a.duplicate_of.is_none()).collect();
    let skip = failures.len().saturating_sub(cfg.history_failures);
    out.extend(failures.into_iter().skip(skip).cloned());
    out
}

fn best_of(attempts: &BTreeMap<usize, Attempt>) -> Option<usize> {
    ranked_successes(attempts).first().map(|a| a.id)
}

fn score_of(attempts: &BTreeMap<usize, Attempt>, id: Option<usize>) -> Option<f64> {
    id.and_then(|id| attempts.get(&id)).and_then(|a| a.eval.score)
}

/// Evaluates, turning a panic inside the task into a failed evaluation.
/// A deterministic task's resumed attempts are evaluated again: a trace whose candidate text no longer
/// gives its recorded score (edited, or written for other data) is refused before anything is appended.
fn check_replayed_scores(
    task: &dyn Task,
    loaded: &BTreeMap<usize, Attempt>,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    let same = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1e-300),
        _ => false,
    };
    for a in loaded.values() {
        let now = guarded_eval(task, &a.candidate).score;
        if !same(now, a.eval.score) {
            let shown = |s: Option<f64>| s.map_or("a failure".to_string(), |v| format!("score {v}"));
            bail!(
                "{}: attempt {} records {}, but its candidate evaluates to {} now: the trace was edited or written \
                 for other data; start a new run (another --trace, or no --resume) (nothing was changed)",
                path.display(),
                a.id,
                shown(a.eval.score),
                shown(now)
            );
        }
    }
    Ok(())
}

fn guarded_eval(task: &dyn Task, candidate: &str) -> Evaluation {
    match catch_unwind(AssertUnwindSafe(|| task.evaluate(candidate))) {
        Ok(mut e) => {
            if e.score.is_some_and(|s| !s.is_finite()) {
                e.feedback = format!("evaluation produced a non-finite score; treated as a failure.\n{}", e.feedback);
                e.score = None;
            }
            e
        }
        Err(p) => Evaluation {
            score: None,
            feedback: format!("the evaluator panicked: {}", panic_text(&p)),
            details: serde_json::json!({ "stage": "evaluate" }),
        },
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// The first line of `s`, at most `max` characters.
pub fn first_line(s: &str, max: usize) -> String {
    clip(s.lines().next().unwrap_or(""), max)
}

/// Every non-empty line of `s`, trimmed and joined with " / ", cut to `max` characters: a multi-line
/// reason ("no code block ... is a valid candidate:" and the blocks' errors) read on one line.
pub fn joined_lines(s: &str, max: usize) -> String {
    let joined: Vec<&str> = s.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    clip(&joined.join(" / "), max)
}

/// `s` cut to at most `max` characters (marked with "…" when cut).
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max).collect();
        out.push('…');
        out
    }
}
