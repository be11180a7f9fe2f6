//! The cells `drift --remeasure` measures again (a seeded sample of the baseline) and their comparison with
//! the baseline.
//!
//! Noise model: a recheck pair's ratio and a re-measured/baseline ratio are both ratios of two
//! measurements of one cell, so they share a distribution; with `med` the baseline's median |ratio - 1|,
//! the ratio's standard deviation is `sigma = med / 0.6745`. A cell has moved when its ratio leaves
//! `1 ± max(cell, k * sigma)`; the rule's picks have slowed when their geometric-mean ratio exceeds
//! `1 + max(aggregate, k * sigma / sqrt(n))` ([`Tolerances`]: `--cell-tolerance`, `--noise-k`,
//! `--aggregate-tolerance`).

use std::collections::{BTreeMap, BTreeSet};

use rand::seq::SliceRandom;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::catalog::Candidate;
use crate::rule::Rule;
use crate::table::{Cell, LatencyMatrix, Shape};

/// The sampled cells of one shape and the roles each plays.
pub type Sample = Vec<(Shape, BTreeMap<Candidate, Roles>)>;

/// Roles a re-measured cell plays on its shape.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Roles {
    pub rule: bool,
    pub oracle: bool,
    pub default: bool,
}

/// One re-measured cell next to its baseline.
#[derive(Debug, Clone, Serialize)]
pub struct CellCompare {
    pub shape: Shape,
    pub candidate: String,
    pub roles: Roles,
    pub baseline_us: Option<f64>,
    pub new_us: Option<f64>,
    /// new / baseline, when both ran.
    pub ratio: Option<f64>,
    /// `slower`, `faster`, `now-fails`, `now-runs`, `same`, `new-cell` or `not-remeasured`.
    pub verdict: String,
    /// Why the new cell is unusable, if it is.
    pub reason: Option<String>,
}

/// A shape whose re-measured oracle is another kernel, faster than the baseline oracle by the threshold.
#[derive(Debug, Clone, Serialize)]
pub struct NewOracle {
    pub shape: Shape,
    pub old_oracle: String,
    pub new_oracle: String,
    pub old_oracle_new_us: Option<f64>,
    pub new_oracle_us: f64,
    /// 1 - new oracle / old oracle (re-measured; the baseline time when the old oracle now fails).
    pub gain: f64,
}

/// The cells to re-measure: per sampled shape the rule's pick, the oracle, the default and `others` seeded
/// further candidates of the baseline. Shapes are a seeded sample of those with a valid cell.
pub fn sample_cells(
    base: &LatencyMatrix,
    rule: &Rule,
    default: Candidate,
    shapes: usize,
    others: usize,
    seed: u64,
) -> Sample {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut idx: Vec<usize> = (0..base.shapes.len()).filter(|&s| base.best(s).is_some()).collect();
    idx.shuffle(&mut rng);
    idx.truncate(shapes);
    idx.sort_by_key(|&s| (base.shapes[s].n, base.shapes[s].k, base.shapes[s].m));
    idx.into_iter()
        .map(|s| {
            let shape = base.shapes[s];
            let mut cells: BTreeMap<Candidate, Roles> = BTreeMap::new();
            let leaf = rule.eval(shape.m, shape.n, shape.k);
            cells.entry(leaf.candidate()).or_default().rule = true;
            let (oc, _) = base.best(s).expect("filtered above");
            cells.entry(base.candidates[oc]).or_default().oracle = true;
            cells.entry(default).or_default().default = true;
            let mut rest: Vec<Candidate> = (0..base.candidates.len())
                .filter(|&c| base.us(s, c).is_some() && !cells.contains_key(&base.candidates[c]))
                .map(|c| base.candidates[c])
                .collect();
            rest.shuffle(&mut rng);
            for c in rest.into_iter().take(others) {
                cells.entry(c).or_default();
            }
            (shape, cells)
        })
        .collect()
}

fn cell_of(m: &LatencyMatrix, shape: &Shape, c: &Candidate) -> Cell {
    match (m.shape_index(shape), m.candidate_index(c)) {
        (Some(s), Some(ci)) => m.cell(s, ci).clone(),
        _ => Cell::Missing,
    }
}

/// A cell's verdict (see [`CellCompare::verdict`]), its new/baseline ratio when both ran, and why the new
/// cell is unusable.
fn verdict(b: &Cell, n: &Cell, tol: f64) -> (&'static str, Option<f64>, Option<String>) {
    match (b, n) {
        (_, Cell::Missing) => ("not-remeasured", None, None),
        (Cell::Ok(bu), Cell::Ok(nu)) => {
            let q = nu / bu;
            let v = if q > 1.0 + tol {
                "slower"
            } else if q < 1.0 - tol {
                "faster"
            } else {
                "same"
            };
            (v, Some(q), None)
        }
        (Cell::Ok(_), Cell::Invalid(why)) => ("now-fails", None, Some(why.clone())),
        (Cell::Invalid(_), Cell::Ok(_)) => ("now-runs", None, None),
        (Cell::Invalid(_), Cell::Invalid(why)) => ("same", None, Some(why.clone())),
        (Cell::Missing, Cell::Invalid(why)) => ("new-cell", None, Some(why.clone())),
        (Cell::Missing, Cell::Ok(_)) => ("new-cell", None, None),
    }
}

/// What the shapes contribute to the aggregates, summed by [`compare`].
#[derive(Default)]
struct Totals {
    /// ln(new / baseline) of the rule's picks that ran both times.
    rule_logs: Vec<f64>,
    /// Rule picks that now fail.
    rule_failing: usize,
    /// Sums of ln(oracle / rule) on the baseline and re-measured, and how many shapes.
    frac_base: f64,
    frac_new: f64,
    n_frac: usize,
}

/// The cells of one re-measured shape (`ns` in `new`) against the baseline: every sampled cell and every
/// cell the re-measurement holds (the tuner measures them all).
fn compare_cells(
    base: &LatencyMatrix,
    new: &LatencyMatrix,
    (shape, ns): (&Shape, usize),
    roles: &BTreeMap<Candidate, Roles>,
    tol: f64,
    totals: &mut Totals,
) -> Vec<CellCompare> {
    let mut listed: BTreeMap<Candidate, Roles> = roles.clone();
    for (ci, c) in new.candidates.iter().enumerate() {
        if !matches!(new.cell(ns, ci), Cell::Missing) {
            listed.entry(*c).or_default();
        }
    }
    let mut cells = Vec::new();
    for (c, r) in &listed {
        let b = cell_of(base, shape, c);
        let n = cell_of(new, shape, c);
        let (verdict, ratio, reason) = verdict(&b, &n, tol);
        if r.rule {
            if let Some(q) = ratio {
                totals.rule_logs.push(q.ln());
            }
            if matches!(n, Cell::Invalid(_)) {
                totals.rule_failing += 1;
            }
        }
        cells.push(CellCompare {
            shape: *shape,
            candidate: c.to_string(),
            roles: r.clone(),
            baseline_us: b.us(),
            new_us: n.us(),
            ratio,
            verdict: verdict.to_string(),
            reason,
        });
    }
    cells
}

/// The rule against the oracle of one shape, on the baseline and re-measured (when its pick ran both
/// times), and a kernel that became the shape's oracle by at least `threshold`.
fn score_shape(
    base: &LatencyMatrix,
    new: &LatencyMatrix,
    (shape, ns): (&Shape, usize),
    rule: &Rule,
    threshold: f64,
    totals: &mut Totals,
) -> Option<NewOracle> {
    let leaf = rule.eval(shape.m, shape.n, shape.k);
    let rc = leaf.candidate();
    let bs = base.shape_index(shape).expect("sampled from the baseline");
    let (boc, base_best) = base.best(bs).expect("sampled shapes have a valid cell");
    if let (Some(rule_base), Some((_, new_best)), Some(rule_new)) =
        (cell_of(base, shape, &rc).us(), new.best(ns), cell_of(new, shape, &rc).us())
    {
        totals.frac_base += (base_best / rule_base).ln();
        totals.frac_new += (new_best / rule_new).ln();
        totals.n_frac += 1;
    }
    let old = base.candidates[boc];
    let (nbc, new_best) = new.best(ns)?;
    let cand = new.candidates[nbc];
    let old_new = cell_of(new, shape, &old).us();
    let gain = 1.0 - new_best / old_new.unwrap_or(base_best);
    (cand != old && gain >= threshold).then(|| NewOracle {
        shape: *shape,
        old_oracle: old.to_string(),
        new_oracle: cand.to_string(),
        old_oracle_new_us: old_new,
        new_oracle_us: new_best,
        gain,
    })
}

/// The tolerances of [`compare`] (the module doc says how they combine with the noise).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerances {
    /// Smallest relative change of one cell that counts as a move.
    pub cell: f64,
    /// Noise multiplier of the tolerances.
    pub noise_k: f64,
    /// Smallest geometric-mean slowdown of the rule's picks that counts as drift.
    pub aggregate: f64,
    /// A kernel that became a shape's oracle is reported when it beats the baseline oracle by this share.
    pub new_oracle: f64,
    /// Largest drop of the rule's fraction of the oracle on the sample (`--max-drop`).
    pub max_drop: f64,
}

/// Compares the re-measured matrix with the baseline on the sampled cells. Pure: the tests call it on
/// hand-built matrices.
pub fn compare(
    base: &LatencyMatrix,
    new: &LatencyMatrix,
    sample: &[(Shape, BTreeMap<Candidate, Roles>)],
    rule: &Rule,
    noise_median: f64,
    tolerances: &Tolerances,
) -> (Vec<CellCompare>, Vec<NewOracle>, Summary) {
    let (args, max_drop) = (tolerances, tolerances.max_drop);
    let sigma = noise_median / 0.6745;
    let tol = args.cell.max(args.noise_k * sigma);
    let mut cells = Vec::new();
    let mut new_oracles = Vec::new();
    let mut totals = Totals::default();
    let mut measured_shapes = BTreeSet::new();
    for (shape, roles) in sample {
        let Some(ns) = new.shape_index(shape) else { continue };
        measured_shapes.insert(*shape);
        cells.extend(compare_cells(base, new, (shape, ns), roles, tol, &mut totals));
        new_oracles.extend(score_shape(base, new, (shape, ns), rule, args.new_oracle, &mut totals));
    }
    let n = totals.rule_logs.len();
    let geo = (n > 0).then(|| (totals.rule_logs.iter().sum::<f64>() / n as f64).exp());
    let agg_tol = if n > 0 { args.aggregate.max(args.noise_k * sigma / (n as f64).sqrt()) } else { 0.0 };
    let (fb, fnew) = if totals.n_frac > 0 {
        let k = totals.n_frac as f64;
        ((totals.frac_base / k).exp(), (totals.frac_new / k).exp())
    } else {
        (0.0, 0.0)
    };
    let mut problems = Vec::new();
    if let Some(g) = geo.filter(|g| *g > 1.0 + agg_tol) {
        problems.push(format!(
            "the rule's picks are {:.1}% slower (geomean over {n} cells), beyond the {:.1}% tolerance",
            (g - 1.0) * 100.0,
            agg_tol * 100.0
        ));
    }
    if totals.rule_failing > 0 {
        problems.push(format!("{} of the rule's picks now fail (run error or correctness check)", totals.rule_failing));
    }
    if !new_oracles.is_empty() {
        problems.push(format!(
            "on {} shapes another kernel is now the oracle, faster by at least {:.0}%",
            new_oracles.len(),
            args.new_oracle * 100.0
        ));
    }
    if totals.n_frac > 0 && fb - fnew > max_drop {
        problems.push(format!(
            "the rule's fraction of oracle on the sample fell from {fb:.3} to {fnew:.3}, more than --max-drop {max_drop}"
        ));
    }
    let summary = Summary {
        sigma,
        tol,
        rule_cells: n,
        rule_geo: geo,
        agg_tol,
        frac_base: fb,
        frac_new: fnew,
        shapes_measured: measured_shapes.len(),
        problems,
    };
    (cells, new_oracles, summary)
}

/// Aggregates of [`compare`].
#[derive(Debug, Clone)]
pub struct Summary {
    pub sigma: f64,
    pub tol: f64,
    pub rule_cells: usize,
    pub rule_geo: Option<f64>,
    pub agg_tol: f64,
    pub frac_base: f64,
    pub frac_new: f64,
    pub shapes_measured: usize,
    pub problems: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    fn matrix(cells: &[(u32, i32, f64)]) -> LatencyMatrix {
        let shapes: Vec<Shape> =
            cells.iter().map(|c| Shape::new(c.0, 5120, 5120)).collect::<BTreeSet<_>>().into_iter().collect();
        let cands: Vec<Candidate> =
            cells.iter().map(|c| Candidate::new(c.1, 0)).collect::<BTreeSet<_>>().into_iter().collect();
        let mut m = LatencyMatrix::new("gfx942", 304, None, shapes, cands);
        for &(mv, id, us) in cells {
            let s = m.shape_index(&Shape::new(mv, 5120, 5120)).unwrap();
            let c = m.candidate_index(&Candidate::new(id, 0)).unwrap();
            m.set(s, c, if us > 0.0 { Cell::Ok(us) } else { Cell::Invalid("errRatio".into()) });
        }
        m
    }

    #[test]
    fn tolerances_from_noise_hand_computed() {
        let cat = crate::catalog::Catalog::embedded();
        let rule = crate::rule::parse_any(r#"{"root": {"leaf": {"kernel_id": 8}}}"#, &cat).unwrap();
        // The defaults of `drift --remeasure`.
        let args = Tolerances { cell: 0.05, noise_k: 5.0, aggregate: 0.03, new_oracle: 0.10, max_drop: 0.05 };
        let base = matrix(&[(1, 0, 10.0), (1, 8, 20.0), (2, 0, 10.0), (2, 8, 20.0), (2, 7, 30.0)]);
        // noise 1%: sigma = 0.01 / 0.6745 = 0.014826; per-cell tolerance max(0.05, 5 sigma) = 0.07413.
        // Rule cells (kernel 8): 1.07 (same) and 1.08 (slower); geomean sqrt(1.07 * 1.08) = 1.07499 >
        // 1 + max(0.03, 5 sigma / sqrt 2 = 0.05242).
        let new = matrix(&[(1, 0, 10.0), (1, 8, 21.4), (2, 0, 8.5), (2, 8, 21.6), (2, 7, -1.0)]);
        let sample = sample_cells(&base, &rule, Candidate::new(7, 0), 2, 5, 0);
        assert_eq!(sample.len(), 2);
        let (cells, oracles, sum) = compare(&base, &new, &sample, &rule, 0.01, &args);
        assert!((sum.tol - 0.074130).abs() < 1e-5, "{}", sum.tol);
        assert!((sum.agg_tol - 0.052418).abs() < 1e-5, "{}", sum.agg_tol);
        assert!((sum.rule_geo.unwrap() - (1.07f64 * 1.08).sqrt()).abs() < 1e-9);
        let v = |m: u32, c: &str| cells.iter().find(|x| x.shape.m == m && x.candidate == c).unwrap().verdict.clone();
        assert_eq!(v(1, "#8"), "same");
        assert_eq!(v(2, "#8"), "slower");
        assert_eq!(v(2, "#0"), "faster");
        assert_eq!(v(2, "#7"), "now-fails");
        // The oracle stays kernel 0 (8.5 us): no new oracle.
        assert!(oracles.is_empty());
        assert!(sum.problems.iter().any(|p| p.contains("7.5% slower")), "{:?}", sum.problems);
        // Fraction of oracle: baseline 10/20 on both shapes = 0.5; new sqrt(10/21.4 * 8.5/21.6).
        assert!((sum.frac_base - 0.5).abs() < 1e-9);
        assert!((sum.frac_new - (10.0f64 / 21.4 * 8.5 / 21.6).sqrt()).abs() < 1e-9);
    }
}
