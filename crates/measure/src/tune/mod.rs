//! Adaptive tuning (`synth tune`): from a prior (a shipped rule and its candidate set) to a rule for the
//! device at hand, measuring in rounds only the cells that can change the rule, retraining after each
//! round, until a budget is spent or the rule's estimated loss is below a tolerance.
//!
//! - [`planner`]: which cells each round measures (the prior's picks and their close competitors on a few M
//!   values per layer first; more M where picks change between neighbours or the measured best differs
//!   from the prior's; for the Triton family, neighbours of the winners in the tuner's 1,280-config space;
//!   a held-out sample measured over the whole candidate set, on which the estimate is computed);
//! - [`Measurer`]: what answers a "measure": [`replay::Replay`] from a fully measured matrix (the
//!   simulation), [`live::Live`] through the measurement stage's harness driver and journal;
//! - [`tune`]: the round loop (deterministic given the answers, so a rerun over the same journal replays
//!   the finished rounds without measuring and goes on where the last run stopped);
//! - [`sim`]: the simulation on committed data (quality against the share of cells measured);
//! - [`report`]: the report's text.
//!
//! Training is the multi-model job's: [`synth_core::synthesize::synthesize_budgets`] with the limits and the
//! weighting the command passes (those of the prior's job).

pub mod live;
pub mod planner;
pub mod replay;
pub mod report;
pub mod sim;

use std::collections::{BTreeMap, BTreeSet};

use synth_core::catalog::{Candidate, Catalog};
use synth_core::compare::{self, Policy};
use synth_core::rule::Rule;
use synth_core::synthesize::{synthesize_budgets, Limits, Weighting};
use synth_core::table::{Cell, LatencyMatrix, Shape};

/// One cell: a shape and a candidate.
pub type CellId = (Shape, Candidate);

/// The family a tune measures: the runtime's backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// CK legacy instances with split-K (AITER).
    Ck,
    /// The block-FP8 Triton family (vLLM, SGLang).
    Triton,
}

/// What answers the tuner's "measure".
pub trait Measurer {
    /// The candidates that can be measured on `shape` (CK: every instance at every split-K level the plan
    /// measures there; Triton: the kept set and the tuner's space).
    fn universe(&self, shape: Shape) -> Vec<Candidate>;
    /// Measures `cells` (each asked once per tune) and returns one cell per entry, in order.
    fn measure(&mut self, cells: &[CellId]) -> anyhow::Result<Vec<Cell>>;
    /// GPU seconds spent measuring so far.
    fn gpu_seconds(&self) -> f64;
    /// The device's architecture name and CU/SM count (the synthesizer's features read the count).
    fn device(&self) -> (String, u32);
}

/// The starting point: a rule and the candidates it was chosen among (the Triton kept set; for CK the
/// rule's own leaves are its candidates).
#[derive(Debug, Clone)]
pub struct Prior {
    pub rule: Rule,
    pub candidates: Vec<Candidate>,
}

/// When a tune stops.
#[derive(Debug, Clone, PartialEq)]
pub struct Stop {
    /// Stop once the estimated loss (1 - the estimate) is below this (0.005: 0.5%).
    pub tolerance: f64,
    /// Stop before a round that would start past this many GPU seconds.
    pub gpu_seconds: Option<f64>,
    /// Most rounds.
    pub max_rounds: usize,
}

/// What to tune.
#[derive(Debug, Clone)]
pub struct TuneSpec {
    pub method: Method,
    /// Each layer (N, K) and the M values to tune it for, ascending.
    pub layers: BTreeMap<(u32, u32), Vec<u32>>,
    pub stop: Stop,
}

/// How a tune chooses its cells and trains its rule, whatever it measures on: what a live tune
/// ([`TuneSpec`]) and a simulation ([`sim::SimSpec`]) share.
#[derive(Debug, Clone)]
pub struct Method {
    pub family: Family,
    pub prior: Prior,
    pub limits: Limits,
    pub weight: Weighting,
    /// M values per layer of the first round.
    pub first_ms: usize,
    /// New M values per layer a round adds at most.
    pub refine_ms: usize,
    /// Held-out M values per layer (the estimate's sample).
    pub held_out: usize,
    pub seed: u64,
}

/// The tune's state: what is known and what the planner has chosen so far.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// Every cell measured (or read back from the journal).
    pub known: BTreeMap<CellId, Cell>,
    /// Training M values per layer.
    pub sampled: BTreeMap<(u32, u32), BTreeSet<u32>>,
    /// Candidates measured on every training M of a layer.
    pub active: BTreeMap<(u32, u32), BTreeSet<Candidate>>,
    /// The held-out shapes (never trained on).
    pub held_out: BTreeSet<Shape>,
    /// Rounds planned so far.
    pub round: usize,
}

/// The estimate on the held-out sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Geometric mean over the held-out shapes of (best measured time / the rule's time).
    pub of_best: f64,
    pub shapes: usize,
    pub cells: usize,
}

/// One finished round.
#[derive(Debug, Clone)]
pub struct RoundLog {
    pub round: usize,
    /// Cells the round planned that were not known before (measured now).
    pub measured: usize,
    /// Cells known after the round.
    pub known: usize,
    pub gpu_seconds: f64,
    /// The estimate of the rule trained without the held-out shapes.
    pub estimate: Option<Estimate>,
    /// The rule the round ships: trained on every measured shape, the held-out ones included.
    pub rule: Rule,
}

/// A finished tune.
#[derive(Debug, Clone)]
pub struct Tuned {
    pub rule: Rule,
    pub rounds: Vec<RoundLog>,
    pub state: State,
    /// Why it stopped.
    pub stopped: String,
    /// The device measured on: architecture and CU/SM count.
    pub device: (String, u32),
}

/// Why a round of `next` new cells is not started: at this run's GPU seconds per measured cell (`spent` over
/// `done`, compiles included), it would end past `limit`. `None` before anything is measured.
fn past_budget(limit: f64, spent: f64, done: usize, next: usize) -> Option<String> {
    if done == 0 || next == 0 {
        return None;
    }
    let rate = spent / done as f64;
    let predicted = rate * next as f64;
    (spent + predicted > limit).then(|| {
        format!(
            "the budget ({limit:.0} GPU seconds): the next round's {next} cells would take about {predicted:.0} s \
             more at this run's {rate:.3} s per cell"
        )
    })
}

/// Runs the rounds: plan, measure what is not known, retrain, estimate; `on_round` sees each finished
/// round. A resumed run starts from round 1 too: the measurer answers the cells its journal holds without
/// measuring them, so the finished rounds are replayed as they ran (the loop is deterministic given the
/// answers) and only the cells of later rounds reach the GPU.
pub fn tune(
    spec: &TuneSpec,
    catalog: &Catalog,
    measurer: &mut dyn Measurer,
    mut on_round: impl FnMut(&RoundLog),
) -> anyhow::Result<Tuned> {
    check_spec(spec)?;
    let mut st = planner::initial(spec);
    let mut rounds: Vec<RoundLog> = Vec::new();
    let mut measured = 0usize;
    let stopped = loop {
        if st.round >= spec.stop.max_rounds {
            break format!("the round limit ({})", spec.stop.max_rounds);
        }
        if let Some(limit) = spec.stop.gpu_seconds {
            if measurer.gpu_seconds() >= limit {
                break format!("the budget ({limit:.0} GPU seconds)");
            }
        }
        let plan = planner::plan_round(spec, &mut st, &|s| measurer.universe(s));
        if plan.is_empty() && !rounds.is_empty() {
            break "no cell left that can change the rule".to_string();
        }
        let todo: Vec<CellId> = plan.into_iter().filter(|c| !st.known.contains_key(c)).collect();
        if let Some(why) =
            spec.stop.gpu_seconds.and_then(|l| past_budget(l, measurer.gpu_seconds(), measured, todo.len()))
        {
            break why;
        }
        let cells = measurer.measure(&todo)?;
        measured += todo.len();
        anyhow::ensure!(cells.len() == todo.len(), "the measurer answered {} of {} cells", cells.len(), todo.len());
        st.known.extend(todo.iter().copied().zip(cells));
        let (gfx, cu_num) = measurer.device();
        let universe = |s: Shape| measurer.universe(s);
        let trained = train(spec, catalog, &st, &universe, (&gfx, cu_num), false)?;
        let estimate = estimate(catalog, &st, &trained, &gfx, cu_num);
        let rule = train(spec, catalog, &st, &universe, (&gfx, cu_num), true)?;
        let log = RoundLog {
            round: st.round,
            measured: todo.len(),
            known: st.known.len(),
            gpu_seconds: measurer.gpu_seconds(),
            estimate,
            rule,
        };
        on_round(&log);
        let done = estimate.is_some_and(|e| 1.0 - e.of_best < spec.stop.tolerance);
        rounds.push(log);
        if done {
            break format!("the estimated loss is below the tolerance ({:.2}%)", spec.stop.tolerance * 100.0);
        }
    };
    let rule = rounds.last().map(|r| r.rule.clone()).unwrap_or_else(|| spec.method.prior.rule.clone());
    Ok(Tuned { rule, rounds, state: st, stopped, device: measurer.device() })
}

/// The one clear error for a spec the loop cannot run.
pub fn check_spec(spec: &TuneSpec) -> anyhow::Result<()> {
    if spec.layers.is_empty() {
        anyhow::bail!("nothing to tune: no layer (give a model and --tp, or --shapes N:K,...)");
    }
    if let Some(((n, k), _)) = spec.layers.iter().find(|(_, ms)| ms.is_empty()) {
        anyhow::bail!("layer N={n} K={k} has no M value to tune for");
    }
    if spec.method.first_ms == 0 {
        anyhow::bail!("the first round needs at least one M value per layer");
    }
    if !(0.0..1.0).contains(&spec.stop.tolerance) {
        anyhow::bail!("--tolerance {} is outside [0, 1): it is a loss, e.g. 0.005 for 0.5%", spec.stop.tolerance);
    }
    Ok(())
}

/// A matrix of `shapes` over every candidate known on one of them, from the known cells.
pub fn known_matrix(st: &State, shapes: &[Shape], gfx: &str, cu_num: u32) -> LatencyMatrix {
    let mut shapes = shapes.to_vec();
    shapes.sort_by_key(|s| (s.n, s.k, s.m));
    let set: BTreeSet<Shape> = shapes.iter().copied().collect();
    let cands: BTreeSet<Candidate> = st.known.keys().filter(|(s, _)| set.contains(s)).map(|&(_, c)| c).collect();
    let cands: Vec<Candidate> = cands.into_iter().collect();
    let mut m = LatencyMatrix::new(gfx, cu_num, None, shapes.clone(), cands.clone());
    for (si, s) in shapes.iter().enumerate() {
        for (ci, c) in cands.iter().enumerate() {
            if let Some(cell) = st.known.get(&(*s, *c)) {
                m.set(si, ci, cell.clone());
            }
        }
    }
    m
}

/// The training shapes: every sampled M of every layer.
pub fn training_shapes(st: &State) -> Vec<Shape> {
    st.sampled.iter().flat_map(|(&(n, k), ms)| ms.iter().map(move |&m| Shape::new(m, n, k))).collect()
}

/// The training matrix: every M of every layer but the held-out ones; a training M with its measured
/// cells, any other M with those of the nearest training M of its layer (by log M), for the candidates the
/// universe allows there. The objective is the geometric-mean fraction of the best (only ratios count), so
/// a filled shape stands for the M range its measured neighbour represents, and the tree places its
/// thresholds among the layer's M values as the rule trained on every cell does.
///
/// With `with_held_out`, the held-out shapes train too (with their own cells): the rule a round ships,
/// once the estimate has been made with the rule trained without them.
pub fn training_matrix(
    spec: &TuneSpec,
    st: &State,
    universe: &dyn Fn(Shape) -> Vec<Candidate>,
    (gfx, cu_num): (&str, u32),
    with_held_out: bool,
) -> LatencyMatrix {
    let mut own = training_shapes(st);
    if with_held_out {
        own.extend(st.held_out.iter().copied());
    }
    let sampled = known_matrix(st, &own, gfx, cu_num);
    let mut shapes: Vec<(Shape, Shape)> = Vec::new();
    for (&(n, k), ms) in &spec.layers {
        let Some(train_ms) = st.sampled.get(&(n, k)).filter(|t| !t.is_empty()) else { continue };
        for &m in ms {
            let s = Shape::new(m, n, k);
            if st.held_out.contains(&s) {
                if with_held_out {
                    shapes.push((s, s));
                }
                continue;
            }
            let near = train_ms
                .iter()
                .copied()
                .min_by(|a, b| log_gap(*a, m).total_cmp(&log_gap(*b, m)).then(a.cmp(b)))
                .expect("a layer with training M");
            shapes.push((s, Shape::new(near, n, k)));
        }
    }
    let mut m = LatencyMatrix::new(gfx, cu_num, None, shapes.iter().map(|p| p.0).collect(), sampled.candidates.clone());
    for (i, (s, from)) in shapes.iter().enumerate() {
        let allowed: BTreeSet<Candidate> = if s == from { BTreeSet::new() } else { universe(*s).into_iter().collect() };
        for (c, cand) in sampled.candidates.iter().enumerate() {
            if s != from && !allowed.contains(cand) {
                continue;
            }
            if let Some(cell) = st.known.get(&(*from, *cand)) {
                m.set(i, c, cell.clone());
            }
        }
        if s != from {
            prefer_prior(&mut m, i, spec.method.prior.rule.eval(s.m, s.n, s.k).candidate());
        }
    }
    m
}

/// Near ties at a filled M go to the prior's pick there: within [`PRIOR_TIE`] of the row's best, it is
/// charged the best's time (the measurements say nothing closer about an M they did not measure).
fn prefer_prior(m: &mut LatencyMatrix, row: usize, pick: Candidate) {
    let (Some(c), Some((_, best))) = (m.candidate_index(&pick), m.best(row)) else { return };
    if m.us(row, c).is_some_and(|t| t <= best * PRIOR_TIE) {
        m.set(row, c, Cell::Ok(best));
    }
}

/// How close to a filled row's best the prior's pick must be to take it ([`prefer_prior`]).
pub const PRIOR_TIE: f64 = 1.03;

fn log_gap(a: u32, b: u32) -> f64 {
    (f64::from(a.max(1)).ln() - f64::from(b.max(1)).ln()).abs()
}

/// The rule trained on [`training_matrix`] (the prior where no shape has a usable cell).
fn train(
    spec: &TuneSpec,
    catalog: &Catalog,
    st: &State,
    universe: &dyn Fn(Shape) -> Vec<Candidate>,
    device: (&str, u32),
    with_held_out: bool,
) -> anyhow::Result<Rule> {
    let matrix = training_matrix(spec, st, universe, device, with_held_out);
    let train: Vec<usize> = (0..matrix.shapes.len()).filter(|&s| matrix.best(s).is_some()).collect();
    if train.is_empty() || matrix.candidates.is_empty() {
        return Ok(spec.method.prior.rule.clone());
    }
    let weights = spec.method.weight.weights(&matrix, &train);
    let limits = Limits { log_ratio: spec.method.weight.log_ratio(), ..spec.method.limits.clone() };
    let mut out = synthesize_budgets(&matrix, catalog, &train, weights.as_deref(), &limits, &[limits.max_leaves])
        .map_err(|e| anyhow::anyhow!("training on the measured cells: {e}"))?;
    Ok(out.pop().expect("one budget asked, one rule").rule)
}

/// The rule's fraction of the best measured time on the held-out shapes (geometric mean); `None` before
/// any of them has a usable cell.
pub fn estimate(catalog: &Catalog, st: &State, rule: &Rule, gfx: &str, cu_num: u32) -> Option<Estimate> {
    let shapes: Vec<Shape> = st.held_out.iter().copied().collect();
    let matrix = known_matrix(st, &shapes, gfx, cu_num);
    let idx: Vec<usize> = (0..matrix.shapes.len()).filter(|&s| matrix.best(s).is_some()).collect();
    if idx.is_empty() {
        return None;
    }
    let of_best = of_oracle(&matrix, catalog, rule, &idx);
    let cells = st.known.keys().filter(|(s, _)| st.held_out.contains(s)).count();
    Some(Estimate { of_best, shapes: idx.len(), cells })
}

/// The rule's geometric-mean fraction of the oracle on `shapes` of `matrix`, scored by the one scorer.
pub fn of_oracle(matrix: &LatencyMatrix, catalog: &Catalog, rule: &Rule, shapes: &[usize]) -> f64 {
    let policy = Policy::Rule { name: "rule".to_string(), rule: rule.clone() };
    compare::evaluate(matrix, catalog, &[policy], shapes).policies[0].summary.of_oracle
}

#[cfg(test)]
mod tests {
    use super::past_budget;

    #[test]
    fn a_round_that_would_end_past_the_budget_is_not_started() {
        // 100 cells in 50 s: 0.5 s per cell; 60 more cells would take 30 s, ending at 80 s.
        assert!(past_budget(80.0, 50.0, 100, 60).is_none());
        let why = past_budget(79.0, 50.0, 100, 60).expect("80 s is past 79 s");
        assert!(why.contains("60 cells") && why.contains("about 30 s"), "{why}");
        // Nothing measured yet (or nothing to measure): no rate, no refusal.
        assert!(past_budget(1.0, 0.0, 0, 1000).is_none());
        assert!(past_budget(1.0, 5.0, 10, 0).is_none());
    }
}
