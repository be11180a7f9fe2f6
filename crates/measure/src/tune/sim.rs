//! The simulation on committed data: `tune` replayed against a fully measured matrix (every "measure"
//! answered from it), scored after each round against the rule trained on every cell and against the
//! per-shape oracle, as a function of the share of cells measured.

use std::collections::BTreeMap;

use super::replay::Replay;
use super::{of_oracle, tune, Family, Method, Stop, TuneSpec};
use synth_core::catalog::{Candidate, Catalog};
use synth_core::rule::Rule;
use synth_core::synthesize::{synthesize_budgets, Limits};
use synth_core::table::LatencyMatrix;

/// One point of a curve: the state after a round.
#[derive(Debug, Clone, PartialEq)]
pub struct SimPoint {
    pub round: usize,
    /// Cells measured so far (the held-out sample's included).
    pub cells: usize,
    /// `cells` over the matrix's measured cells.
    pub share: f64,
    /// `cells` over the exhaustive tuner's cells for the same layers (Triton: 1,280 configs x 18 M).
    pub share_of_tuner: Option<f64>,
    /// The tuned rule's fraction of the oracle on every shape of the matrix.
    pub of_oracle: f64,
    /// `of_oracle` over the full-data rule's.
    pub of_full: f64,
    /// The estimate the tune computed on its held-out sample.
    pub estimate: Option<f64>,
}

/// A simulated configuration.
#[derive(Debug, Clone)]
pub struct SimResult {
    /// The full-data rule's fraction of the oracle.
    pub full: f64,
    /// The prior's fraction of the oracle.
    pub prior: f64,
    pub total_cells: usize,
    pub points: Vec<SimPoint>,
}

/// How a simulation runs.
#[derive(Debug, Clone)]
pub struct SimSpec {
    pub method: Method,
    pub max_rounds: usize,
    /// Candidates of the full-data rule: those within this factor of some shape's best (the synthesizer's
    /// instance search on 1,280 candidates is pruned to the ones that can be a leaf worth its place).
    pub full_within: Option<f64>,
}

/// The rule trained on every shape and candidate of `matrix`.
pub fn full_rule(matrix: &LatencyMatrix, catalog: &Catalog, spec: &SimSpec) -> anyhow::Result<Rule> {
    let m = match spec.full_within {
        None => matrix.clone(),
        Some(f) => {
            let keep: std::collections::BTreeSet<Candidate> = (0..matrix.shapes.len())
                .flat_map(|s| {
                    let best = matrix.best(s).map_or(0.0, |(_, t)| t);
                    (0..matrix.candidates.len())
                        .filter(move |&c| matrix.us(s, c).is_some_and(|t| t <= best * f))
                        .map(|c| matrix.candidates[c])
                })
                .collect();
            matrix.select_candidates(|c| keep.contains(c))
        }
    };
    let train: Vec<usize> = (0..m.shapes.len()).filter(|&s| m.best(s).is_some()).collect();
    let weights = spec.method.weight.weights(&m, &train);
    let limits = Limits { log_ratio: spec.method.weight.log_ratio(), ..spec.method.limits.clone() };
    let mut out = synthesize_budgets(&m, catalog, &train, weights.as_deref(), &limits, &[limits.max_leaves])
        .map_err(|e| anyhow::anyhow!("the full-data rule: {e}"))?;
    Ok(out.pop().expect("one budget, one rule").rule)
}

/// Replays a tune on `matrix` and scores each round.
pub fn simulate(matrix: &LatencyMatrix, catalog: &Catalog, spec: &SimSpec) -> anyhow::Result<SimResult> {
    let all: Vec<usize> = (0..matrix.shapes.len()).filter(|&s| matrix.best(s).is_some()).collect();
    let full = of_oracle(matrix, catalog, &full_rule(matrix, catalog, spec)?, &all);
    let prior = of_oracle(matrix, catalog, &spec.method.prior.rule, &all);
    let mut layers: BTreeMap<(u32, u32), Vec<u32>> = BTreeMap::new();
    for &s in &all {
        let sh = matrix.shapes[s];
        layers.entry((sh.n, sh.k)).or_default().push(sh.m);
    }
    layers.values_mut().for_each(|ms| {
        ms.sort_unstable();
        ms.dedup();
    });
    let tuner_cells = (spec.method.family == Family::Triton).then(|| 1280 * 18 * layers.len());
    let tspec = TuneSpec {
        method: spec.method.clone(),
        layers,
        stop: Stop { tolerance: 0.0, gpu_seconds: None, max_rounds: spec.max_rounds },
    };
    let mut replay = Replay::new(matrix);
    let total = replay.total_cells();
    let mut points = Vec::new();
    tune(&tspec, catalog, &mut replay, |r| {
        let q = of_oracle(matrix, catalog, &r.rule, &all);
        points.push(SimPoint {
            round: r.round,
            cells: r.known,
            share: r.known as f64 / total.max(1) as f64,
            share_of_tuner: tuner_cells.map(|t| r.known as f64 / t as f64),
            of_oracle: q,
            of_full: q / full,
            estimate: r.estimate.map(|e| e.of_best),
        });
    })?;
    Ok(SimResult { full, prior, total_cells: total, points })
}

/// The best point (of the full-data rule) among those at or under `share` of the cells: the figure "at <= share".
pub fn at_share(points: &[SimPoint], share: f64) -> Option<&SimPoint> {
    points.iter().filter(|p| p.share <= share).max_by(|a, b| a.of_full.total_cmp(&b.of_full))
}

/// The CSV of curves: one row per (configuration, round).
pub const CSV_HEADER: &str = "family,card,prior,config,round,cells,share,share_of_tuner,of_oracle,of_full,estimate";

/// One CSV row.
pub fn csv_row(family: &str, card: &str, prior: &str, config: &str, p: &SimPoint) -> String {
    let opt = |v: Option<f64>| v.map(|x| format!("{x:.5}")).unwrap_or_default();
    format!(
        "{family},{card},{prior},{config},{},{},{:.5},{},{:.5},{:.5},{}",
        p.round,
        p.cells,
        p.share,
        opt(p.share_of_tuner),
        p.of_oracle,
        p.of_full,
        opt(p.estimate)
    )
}
