//! Cost-sensitive decision-tree synthesis over a latency matrix.
//!
//! The synthesizer picks, for a set of measured training shapes, a decision tree over integer feature
//! expressions ([`features`]) whose leaves name (instance, split-K) candidates, minimizing the total
//! (optionally weighted) latency of the chosen candidates over the training shapes:
//! - cost of candidate `c` on training shape `s` = `w_s · us(s, c)`; a Missing or Invalid cell costs a
//!   penalty larger than the whole finite cost of the training set, so fewer unusable choices always win
//!   and a leaf never picks a candidate that is unusable on one of its shapes when a candidate usable on
//!   all of them is allowed;
//! - splits compare one feature with an integer threshold between consecutive observed values (halfway in
//!   the search; then moved by [`refine`] to where a nearest-M reading of the training data puts the
//!   change, which leaves the training routing as it is);
//! - split-K leaves are guarded ([`guard`]) by the bench's measurement condition, so on any shape they
//!   return only a split the bench measures;
//! - limits: depth, leaves (guards included), and distinct instances (kernels compiled into AITER — all
//!   split-K values of an instance count once); see [`Limits`].
//!
//! The search itself is in [`tree`]; this module builds the cost problem from a [`LatencyMatrix`], turns
//! trees into [`Rule`]s, and enforces the instance limit by searching within chosen instance subsets.

pub mod curve;
pub mod features;
pub mod guard;
pub mod refine;
pub mod tree;

use std::collections::BTreeSet;

use crate::catalog::{Candidate, Catalog, KernelRef, Libtype};
use crate::rule::{CmpOp, Cond, Expr, Leaf, Node, Rule};
use crate::table::{Cell, LatencyMatrix, Shape};

pub use features::{Feature, FeatureSet};
use tree::{Problem, SearchConfig, Solution, Tree};

/// Limits and effort of a synthesis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Most conditions tested on the way to a leaf (as [`Node::depth`] counts them).
    pub max_depth: usize,
    /// Most leaves (return statements).
    pub max_leaves: usize,
    /// Most distinct instances (kernel ids) the rule may return; `None` = no limit beyond the leaves.
    pub max_instances: Option<usize>,
    /// Features the splits may test.
    pub features: FeatureSet,
    /// Depth of the exact (optimal) search phase; `None` picks it from the training-set size
    /// (3 up to 64 shapes, 2 up to 160, else 1).
    pub exact_depth: Option<usize>,
    /// Look-ahead depth (1 or 2) of the best-first growth; `None`: 2 up to 160 shapes, else 1.
    pub lookahead: Option<usize>,
    /// Grow each tree to this many leaves and prune it back to the leaf budget as well (the cheapest
    /// pruning joins the candidates; a larger tree's later splits can make an earlier split pay);
    /// `None` grows to the budget only.
    pub prune_from: Option<usize>,
    /// Guard split-K leaves with the tile-count boundary seen on the training shapes ([`guard`]); the
    /// guards count against the leaf and depth limits.
    pub split_k_guards: bool,
    /// Move each split, among the (feature, threshold) pairs that route the training rows identically,
    /// to the one that best agrees with a nearest-M reading of the training data ([`refine`]).
    pub refine_thresholds: bool,
    /// Cost of a candidate on a shape: `ln(t / t_best)` (times the shape's weight) instead of its time, so
    /// the objective is the geometric-mean fraction of the oracle and every shape counts by its ratio.
    pub log_ratio: bool,
    /// With guards, also search with split-K cells charged where their level is not measured
    /// ([`GuardedCells`]): the time of the level the guard falls back to, plus this margin in basis points
    /// (1/100 %) of it; each budget keeps the cheaper rule of the two searches. `None`: one search, an
    /// unmeasured cell at the penalty.
    pub split_k_fallback_bp: Option<u32>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 6,
            max_leaves: 8,
            max_instances: None,
            features: FeatureSet::Machine,
            exact_depth: None,
            lookahead: None,
            prune_from: None,
            split_k_guards: true,
            refine_thresholds: true,
            log_ratio: false,
            split_k_fallback_bp: None,
        }
    }
}

/// Why a synthesis could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SynthError {
    #[error("no training shapes: pick at least one shape of the matrix to train on")]
    EmptyTraining,
    #[error("training shape index {index} is out of range: the matrix has {shapes} shapes")]
    BadShapeIndex { index: usize, shapes: usize },
    #[error("{got} weights given for {train} training shapes: give one weight per training shape")]
    WeightCount { got: usize, train: usize },
    #[error("weight {value} of training shape {shape} is not a positive finite number")]
    BadWeight { shape: String, value: f64 },
    #[error("the matrix has no candidates")]
    NoCandidates,
    #[error(
        "limits must allow at least one leaf and one instance (max_leaves = {leaves}, max_instances = {instances:?})"
    )]
    BadLimits { leaves: usize, instances: Option<usize> },
}

/// One synthesized rule and its in-sample figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Synthesized {
    /// The rule (a nested if/else tree).
    pub rule: Rule,
    /// Unweighted total time of the rule's choices over the training shapes (us), usable choices only.
    pub train_us: f64,
    /// Weighted objective (us × weight), usable choices only.
    pub train_cost: f64,
    /// Training shapes where the rule picks a Missing or Invalid cell.
    pub unusable: usize,
    /// Leaves of the rule.
    pub leaves: usize,
    /// Depth of the rule (conditions on the longest path).
    pub depth: usize,
    /// Distinct instances (kernel ids) the rule returns.
    pub instances: BTreeSet<KernelRef>,
    /// Split-K guards among the leaves ([`guard`]).
    pub guards: usize,
}

impl Synthesized {
    /// `N leaves, depth D, K instances: [..]`, the figure line of the generated files' provenance.
    pub fn shape_line(&self) -> String {
        format!(
            "{} leaves, depth {}, {} instances: {:?}",
            self.leaves,
            self.depth,
            self.instances.len(),
            self.instances
        )
    }
}

/// Synthesizes a rule with the embedded catalog and `limits`.
///
/// `train` indexes `matrix.shapes`; `weights` (if given) has one positive weight per entry of `train`.
///
/// # Panics
/// On the argument errors [`try_synthesize`] reports (empty or out-of-range training set, wrong weights,
/// zero limits); call [`try_synthesize`] to handle them.
pub fn synthesize(matrix: &LatencyMatrix, train: &[usize], weights: Option<&[f64]>, limits: &Limits) -> Rule {
    match try_synthesize(matrix, &Catalog::embedded(), train, weights, limits) {
        Ok(s) => s.rule,
        Err(e) => panic!("synthesize: {e}"),
    }
}

/// Synthesizes a rule; see the module documentation for the objective.
pub fn try_synthesize(
    matrix: &LatencyMatrix,
    catalog: &Catalog,
    train: &[usize],
    weights: Option<&[f64]>,
    limits: &Limits,
) -> Result<Synthesized, SynthError> {
    let mut all = synthesize_budgets(matrix, catalog, train, weights, limits, &[limits.max_leaves])?;
    Ok(all.pop().expect("one budget asked, one result"))
}

/// One search, reported for several leaf budgets (each capped by nothing but itself; `limits.max_leaves`
/// is ignored). Results follow `budgets` in order. Within one call, a larger budget never yields a rule
/// with a higher training objective than a smaller one.
pub fn synthesize_budgets(
    matrix: &LatencyMatrix,
    catalog: &Catalog,
    train: &[usize],
    weights: Option<&[f64]>,
    limits: &Limits,
    budgets: &[usize],
) -> Result<Vec<Synthesized>, SynthError> {
    let max_budget = budgets.iter().copied().max().unwrap_or(limits.max_leaves);
    if max_budget == 0 || budgets.contains(&0) || limits.max_instances == Some(0) {
        return Err(SynthError::BadLimits {
            leaves: budgets.iter().copied().min().unwrap_or(0),
            instances: limits.max_instances,
        });
    }
    // With split-K guards and a fallback margin, two cost models: the measured cells only, and the
    // guarded cells ([`GuardedCells`]); each gives a front of trees, and each budget takes the cheapest rule
    // of both by the guarded objective (what the rule runs on the training shapes).
    let mut builts = vec![Built::new(matrix, catalog, train, weights, limits, None)?];
    if let (true, Some(bp)) = (limits.split_k_guards, limits.split_k_fallback_bp) {
        builts.push(Built::new(matrix, catalog, train, weights, limits, Some(bp))?);
    }
    let guards = limits.split_k_guards.then(|| guard::Guards::new(matrix, catalog, train, limits.max_depth));
    let mut searches: Vec<Search> =
        builts.iter().map(|built| Search::new(built, limits, max_budget, guards.as_ref())).collect();
    let built = &builts[0];
    let mut out = Vec::with_capacity(budgets.len());
    for &b in budgets {
        // The cheapest front entry whose rule (guards included) fits the budget (on a tie, the larger, and
        // the measured cells' front); the single leaf of the smallest entry, without split-K when
        // guarded, when none does.
        let mut pick: Option<(f64, Node, usize)> = None;
        for search in &mut searches {
            if let Some((cost, node, g)) = search.cheapest(b) {
                if pick.as_ref().is_none_or(|(c, _, _)| cost < *c) {
                    pick = Some((cost, node, g));
                }
            }
        }
        out.push(match pick {
            Some((_, node, g)) => built.finish(node, g),
            None => {
                let mut node = built.node(&searches[0].front[0].tree);
                if let (Some(_), Node::Leaf(l)) = (&guards, &node) {
                    node = Node::Leaf(l.with_split(0));
                }
                built.finish(node, 0)
            }
        });
    }
    Ok(out)
}

/// One cost model's front of trees, turned into rules (refined and guarded when asked) as first needed.
struct Search<'b, 'm> {
    built: &'b Built<'m>,
    front: Vec<Solution>,
    max_instances: Option<usize>,
    refiner: Option<refine::Refiner<'b>>,
    guards: Option<&'b guard::Guards<'b>>,
    rules: Vec<Option<(Node, usize)>>,
    /// Objective of each front entry's rule (guards included): demoting a split-K leaf that has no depth
    /// left for its guard can cost, so the cheapest fitting entry is taken, not merely the largest.
    objective: Vec<Option<f64>>,
}

impl<'b, 'm> Search<'b, 'm> {
    fn new(
        built: &'b Built<'m>,
        limits: &Limits,
        max_budget: usize,
        guards: Option<&'b guard::Guards<'b>>,
    ) -> Search<'b, 'm> {
        let cfg = built.config(limits, max_budget);
        let all_cols: Vec<usize> = (0..built.matrix.candidates.len()).collect();
        let mut front = tree::search(&built.problem, &all_cols, &cfg);
        if let Some(k) = limits.max_instances {
            if built.kernels.len() > k {
                front = built.limit_instances(front, k, &cfg);
            }
        }
        let refiner =
            limits.refine_thresholds.then(|| refine::Refiner::new(&built.problem, &built.row_shapes, &built.features));
        let n = front.len();
        Search {
            built,
            front,
            max_instances: limits.max_instances,
            refiner,
            guards,
            rules: vec![None; n],
            objective: vec![None; n],
        }
    }

    fn rule(&mut self, i: usize) -> (Node, usize) {
        let (built, front, refiner, guards, max_instances) =
            (self.built, &self.front, &self.refiner, self.guards, self.max_instances);
        self.rules[i]
            .get_or_insert_with(|| {
                let mut t = built.repair(&front[i].tree, max_instances).simplified();
                if let Some(r) = refiner {
                    t = r.refine(&t);
                }
                let node = built.node(&t);
                match guards {
                    Some(g) => g.apply(&node),
                    None => (node, 0),
                }
            })
            .clone()
    }

    /// The cheapest entry whose rule fits `budget` leaves (on a tie, the larger): (objective, rule, guards).
    fn cheapest(&mut self, budget: usize) -> Option<(f64, Node, usize)> {
        let mut pick: Option<(f64, Node, usize)> = None;
        for i in (0..budget.min(self.front.len())).rev() {
            let (node, g) = self.rule(i);
            if node.leaves().len() > budget {
                continue;
            }
            let built = self.built;
            let cost = *self.objective[i].get_or_insert_with(|| built.objective(&node));
            if pick.as_ref().is_none_or(|(c, _, _)| cost < *c) {
                pick = Some((cost, node, g));
            }
        }
        pick
    }
}

/// A split-K column's time where a guarded leaf runs another level: with split-K guards, a leaf with
/// instance `i` at level `s` runs, on a shape where the bench's condition for `s` fails (so the cell was
/// never measured), the deepest lower level whose condition holds ([`guard`]). Its training cost there is
/// that level's time plus a margin, not the penalty of an unmeasured cell, so one split-K leaf can serve M
/// ranges over which the grid-filling level changes. The margin keeps a leaf that would win only by
/// another level's time from displacing a measured choice: the guard may run a shallower level than the
/// training cost assumes (its chain is cut at the depth limit and holds the levels the probes use). A
/// missing cell where the condition holds, and an invalid one, stay unusable.
struct GuardedCells<'m> {
    matrix: &'m LatencyMatrix,
    /// 1 + the margin.
    factor: f64,
    /// Per column: a CK split-K candidate's tile and level, and its instance's columns by level.
    split: Vec<Option<SplitColumn>>,
}

/// A CK split-K column: its tile (BM, BN, BK), its level, and the column of each lower level (None: no such
/// column in the matrix).
struct SplitColumn {
    tile: (u32, u32, u32),
    level: u32,
    lower: Vec<Option<usize>>,
}

impl<'m> GuardedCells<'m> {
    fn new(matrix: &'m LatencyMatrix, catalog: &Catalog, margin_bp: u32) -> GuardedCells<'m> {
        let split = matrix
            .candidates
            .iter()
            .map(|c| {
                if c.split_k == 0 || c.backend != Libtype::Ck {
                    return None;
                }
                let inst = catalog.legacy_by_id(c.kernel_id)?;
                let lower = (0..c.split_k).map(|s| matrix.candidate_index(&Candidate::new(c.kernel_id, s))).collect();
                Some(SplitColumn { tile: inst.tile(), level: c.split_k, lower })
            })
            .collect();
        GuardedCells { matrix, factor: 1.0 + f64::from(margin_bp) / 10_000.0, split }
    }

    /// The time a guarded leaf naming column `c` takes on shape `s` (None = unusable).
    fn us(&self, s: usize, c: usize) -> Option<f64> {
        let Some(SplitColumn { tile: (bm, bn, bk), level: top, lower }) = &self.split[c] else {
            return self.matrix.us(s, c);
        };
        let (shape, cu) = (&self.matrix.shapes[s], self.matrix.cu_num);
        if guard::measured(shape, *bm, *bn, *bk, *top, cu) || !matches!(self.matrix.cell(s, c), Cell::Missing) {
            return self.matrix.us(s, c);
        }
        let level = (0..*top).rev().find(|&l| guard::measured(shape, *bm, *bn, *bk, l, cu))?;
        lower[level as usize].and_then(|col| self.matrix.us(s, col)).map(|t| t * self.factor)
    }
}

/// One training row: a shape, its weight and the time of every candidate column (None = unusable).
#[derive(Debug, Clone, PartialEq)]
struct Row {
    shape: Shape,
    weight: f64,
    us: Vec<Option<f64>>,
}

/// The cost problem of one synthesis, with the maps back to the matrix.
struct Built<'m> {
    matrix: &'m LatencyMatrix,
    train: Vec<usize>,
    weights: Vec<f64>,
    /// The rows of the cost problem, one per training shape.
    rows: Vec<Row>,
    problem: Problem,
    /// Feature of each problem feature column (all of the feature set; the search uses the useful ones).
    features: Vec<Feature>,
    /// Distinct kernel ids of the matrix's candidates, ascending.
    kernels: Vec<KernelRef>,
    /// The shape of each row.
    row_shapes: Vec<Shape>,
}

impl<'m> Built<'m> {
    fn new(
        matrix: &'m LatencyMatrix,
        catalog: &Catalog,
        train: &[usize],
        weights: Option<&[f64]>,
        limits: &Limits,
        fallback_bp: Option<u32>,
    ) -> Result<Built<'m>, SynthError> {
        if train.is_empty() {
            return Err(SynthError::EmptyTraining);
        }
        if matrix.candidates.is_empty() {
            return Err(SynthError::NoCandidates);
        }
        if let Some(&bad) = train.iter().find(|&&s| s >= matrix.shapes.len()) {
            return Err(SynthError::BadShapeIndex { index: bad, shapes: matrix.shapes.len() });
        }
        let weights: Vec<f64> = match weights {
            None => vec![1.0; train.len()],
            Some(w) if w.len() != train.len() => {
                return Err(SynthError::WeightCount { got: w.len(), train: train.len() })
            }
            Some(w) => {
                if let Some((i, v)) = w.iter().enumerate().find(|(_, v)| !(v.is_finite() && **v > 0.0)) {
                    return Err(SynthError::BadWeight { shape: matrix.shapes[train[i]].to_string(), value: *v });
                }
                w.to_vec()
            }
        };
        let nc = matrix.candidates.len();
        let guarded = fallback_bp.map(|bp| GuardedCells::new(matrix, catalog, bp));
        let rows: Vec<Row> = train
            .iter()
            .zip(&weights)
            .map(|(&s, &w)| {
                let us = (0..nc)
                    .map(|c| match &guarded {
                        Some(g) => g.us(s, c),
                        None => matrix.us(s, c),
                    })
                    .collect();
                Row { shape: matrix.shapes[s], weight: w, us }
            })
            .collect();
        // Penalty: more than the whole finite cost of the training rows.
        let finite_total: f64 =
            rows.iter().map(|r| r.weight * r.us.iter().flatten().fold(0.0, |a: f64, &b| a.max(b))).sum();
        let penalty = 1.0 + 2.0 * finite_total;
        let mut cost = Vec::with_capacity(rows.len() * nc);
        if limits.log_ratio {
            // ln(t / best) ≥ 0; the penalty exceeds the whole finite cost as above.
            let ratio = |r: &Row, t: f64| {
                let best = r.us.iter().flatten().fold(f64::INFINITY, |a: f64, &b| a.min(b));
                r.weight * (t / best).ln()
            };
            let finite: f64 =
                rows.iter().map(|r| r.us.iter().flatten().map(|&t| ratio(r, t)).fold(0.0, f64::max)).sum();
            let penalty = 1.0 + 2.0 * finite;
            for r in &rows {
                cost.extend(r.us.iter().map(|t| t.map_or(penalty, |t| ratio(r, t))));
            }
        } else {
            for r in &rows {
                cost.extend(r.us.iter().map(|t| t.map_or(penalty, |t| r.weight * t)));
            }
        }
        let all_features = features::for_candidates(limits.features, &matrix.candidates, catalog, matrix.cu_num);
        let values: Vec<Vec<i64>> = all_features
            .iter()
            .map(|f| rows.iter().map(|r| f.eval(r.shape.m, r.shape.n, r.shape.k)).collect())
            .collect();
        let problem = Problem::new(rows.len(), nc, cost, values);
        let features = all_features;
        let kernels = matrix.candidates.iter().map(|c| c.kernel()).collect::<BTreeSet<_>>().into_iter().collect();
        let row_shapes = rows.iter().map(|r| r.shape).collect();
        Ok(Built { matrix, train: train.to_vec(), weights, rows, problem, features, kernels, row_shapes })
    }

    fn config(&self, limits: &Limits, max_leaves: usize) -> SearchConfig {
        let n = self.rows.len();
        let exact_depth = limits.exact_depth.unwrap_or(if n <= 64 {
            3
        } else if n <= 160 {
            2
        } else {
            1
        });
        let lookahead = limits.lookahead.unwrap_or(if n <= 160 { 2 } else { 1 });
        let grow_leaves = limits.prune_from.unwrap_or(max_leaves).max(max_leaves);
        SearchConfig { max_depth: limits.max_depth, max_leaves, exact_depth, lookahead, grow_leaves }
    }

    fn usable(&self, row: usize, col: usize) -> bool {
        self.rows[row].us[col].is_some()
    }

    fn cols_of(&self, kernels: &[KernelRef]) -> Vec<usize> {
        (0..self.matrix.candidates.len()).filter(|&c| kernels.contains(&self.matrix.candidates[c].kernel())).collect()
    }

    /// Enforces the instance limit: searches within instance subsets (greedy facility location with
    /// swaps, and the unrestricted trees' own instances thinned one at a time), and re-labels the
    /// unrestricted trees within each subset; per budget, the cheapest result.
    fn limit_instances(&self, front: Vec<Solution>, k: usize, cfg: &SearchConfig) -> Vec<Solution> {
        let p = &self.problem;
        let mut subsets: Vec<Vec<KernelRef>> = vec![self.greedy_subset(k)];
        let widest = &front[front.len() - 1].tree;
        let thinned = self.thin_subset(widest, k);
        if !subsets.contains(&thinned) {
            subsets.push(thinned);
        }
        let mut pool: Vec<Solution> =
            front.iter().filter(|s| leaf_kernels(&s.tree, self.matrix).len() <= k).cloned().collect();
        for kernels in &subsets {
            let cols = self.cols_of(kernels);
            for sol in &front {
                let t = sol.tree.relabeled(p, &cols);
                pool.push(Solution { cost: t.cost(p), tree: t });
            }
            pool.extend(tree::search(p, &cols, cfg));
        }
        tree::frontier(pool, cfg.max_leaves)
    }

    /// Sum over training shapes of the cheapest candidate among `cols`.
    fn oracle_cost(&self, cols: &[usize]) -> f64 {
        let p = &self.problem;
        (0..p.shapes()).map(|s| cols.iter().map(|&c| p.cost(s, c)).fold(f64::INFINITY, f64::min)).sum()
    }

    /// Greedy forward selection of `k` instances minimizing the per-shape best cost, then single swaps
    /// while they help.
    fn greedy_subset(&self, k: usize) -> Vec<KernelRef> {
        let eval = |set: &[KernelRef]| self.oracle_cost(&self.cols_of(set));
        let mut chosen: Vec<KernelRef> = Vec::new();
        while chosen.len() < k.min(self.kernels.len()) {
            let mut best: Option<(f64, KernelRef)> = None;
            for &kid in &self.kernels {
                if chosen.contains(&kid) {
                    continue;
                }
                let mut trial = chosen.clone();
                trial.push(kid);
                let c = eval(&trial);
                if best.is_none_or(|(b, _)| c < b) {
                    best = Some((c, kid));
                }
            }
            chosen.push(best.expect("a kernel is left").1);
        }
        let mut current = eval(&chosen);
        loop {
            let mut improved = false;
            for i in 0..chosen.len() {
                for &kid in &self.kernels {
                    if chosen.contains(&kid) {
                        continue;
                    }
                    let mut trial = chosen.clone();
                    trial[i] = kid;
                    let c = eval(&trial);
                    if c < current - 1e-9 * current.abs() {
                        chosen = trial;
                        current = c;
                        improved = true;
                    }
                }
            }
            if !improved {
                break;
            }
        }
        chosen.sort_unstable();
        chosen
    }

    /// The instances of `tree`, dropping one at a time the one whose loss (tree re-labelled without it)
    /// costs least, until `k` remain.
    fn thin_subset(&self, t: &Tree, k: usize) -> Vec<KernelRef> {
        let p = &self.problem;
        let mut kernels: Vec<KernelRef> = t
            .leaf_candidates()
            .iter()
            .map(|&c| self.matrix.candidates[c].kernel())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        while kernels.len() > k {
            let mut best: Option<(f64, usize)> = None;
            for i in 0..kernels.len() {
                let mut trial = kernels.clone();
                trial.remove(i);
                let c = t.relabeled(p, &self.cols_of(&trial)).cost(p);
                if best.is_none_or(|(b, _)| c < b) {
                    best = Some((c, i));
                }
            }
            kernels.remove(best.expect("more than k kernels").1);
        }
        kernels
    }

    /// Re-labels any leaf that picks an unusable cell on one of its training shapes with the cheapest
    /// candidate usable on all of them, when one exists and the instance limit still holds.
    fn repair(&self, t: &Tree, max_instances: Option<usize>) -> Tree {
        let mut t = t.clone();
        let all = tree::Bits::full(self.problem.shapes());
        let mut leaves: Vec<(tree::Bits, usize)> = Vec::new();
        collect_leaf_sets(&t, &self.problem, all, &mut leaves);
        for (i, (set, col)) in leaves.iter().enumerate() {
            let rows = set.members();
            if rows.iter().all(|&r| self.usable(r, *col)) {
                continue;
            }
            let used: BTreeSet<KernelRef> = leaf_kernels(&t, self.matrix);
            let mut best: Option<(f64, usize)> = None;
            for c in 0..self.matrix.candidates.len() {
                if !rows.iter().all(|&r| self.usable(r, c)) {
                    continue;
                }
                let kid = self.matrix.candidates[c].kernel();
                let count = used.len() + usize::from(!used.contains(&kid));
                if max_instances.is_some_and(|k| count > k) {
                    continue;
                }
                let cost: f64 = rows.iter().map(|&r| self.problem.cost(r, c)).sum();
                if best.is_none_or(|(b, _)| cost < b) {
                    best = Some((cost, c));
                }
            }
            if let Some((_, c)) = best {
                set_leaf(&mut t, i, c);
            }
        }
        t
    }

    /// The search objective of a rule node on the training rows (unusable picks at the penalty).
    fn objective(&self, root: &Node) -> f64 {
        let p = &self.problem;
        (0..self.rows.len())
            .map(|r| {
                let sh = self.rows[r].shape;
                let leaf = root.eval(sh.m, sh.n, sh.k);
                match self.matrix.candidate_index(&leaf.candidate()) {
                    Some(c) => p.cost(r, c),
                    None => p.cost(r, 0).max(1.0) * 1e12,
                }
            })
            .sum()
    }

    /// The rule and its figures on the training shapes (evaluated with the rule interpreter).
    fn finish(&self, root: Node, guards: usize) -> Synthesized {
        let (mut train_us, mut train_cost, mut unusable) = (0.0, 0.0, 0);
        for (row, &s) in self.train.iter().enumerate() {
            let sh = self.matrix.shapes[s];
            let leaf = root.eval(sh.m, sh.n, sh.k);
            match self.matrix.candidate_index(&leaf.candidate()).and_then(|c| self.matrix.us(s, c)) {
                Some(us) => {
                    train_us += us;
                    train_cost += us * self.weights[row];
                }
                None => unusable += 1,
            }
        }
        let rule = Rule { root, note: None };
        let instances = rule.root.leaves().iter().map(|l| l.kernel()).collect();
        Synthesized {
            leaves: rule.root.leaves().len(),
            depth: rule.root.depth(),
            rule,
            train_us,
            train_cost,
            unusable,
            instances,
            guards,
        }
    }

    /// The rule node of a tree: a split is `if (feature <= threshold) { left } else { right }`, with an
    /// `else` that is itself a chain flattened into `else if` branches.
    fn node(&self, t: &Tree) -> Node {
        match t {
            Tree::Leaf(c) => {
                let cand: Candidate = self.matrix.candidates[*c];
                Node::Leaf(Leaf::from_candidate(cand))
            }
            Tree::Split { feature, threshold, left, right } => {
                let cond = Cond::cmp(CmpOp::Le, self.features[*feature].expr.clone(), Expr::Lit(*threshold));
                let mut branches = vec![(cond, self.node(left))];
                let otherwise = match self.node(right) {
                    Node::Chain { branches: more, otherwise } => {
                        branches.extend(more);
                        otherwise
                    }
                    leaf => Box::new(leaf),
                };
                Node::Chain { branches, otherwise }
            }
        }
    }
}

fn collect_leaf_sets(t: &Tree, p: &Problem, set: tree::Bits, out: &mut Vec<(tree::Bits, usize)>) {
    match t {
        Tree::Leaf(c) => out.push((set, *c)),
        Tree::Split { feature, threshold, left, right } => {
            let (l, r) = set.split(p, *feature, *threshold);
            collect_leaf_sets(left, p, l, out);
            collect_leaf_sets(right, p, r, out);
        }
    }
}

fn leaf_kernels(t: &Tree, m: &LatencyMatrix) -> BTreeSet<KernelRef> {
    t.leaf_candidates().iter().map(|&c| m.candidates[c].kernel()).collect()
}

fn set_leaf(t: &mut Tree, target: usize, col: usize) {
    fn walk(t: &mut Tree, target: usize, k: &mut usize, col: usize) {
        match t {
            Tree::Leaf(c) => {
                if *k == target {
                    *c = col;
                }
                *k += 1;
            }
            Tree::Split { left, right, .. } => {
                walk(left, target, k, col);
                walk(right, target, k, col);
            }
        }
    }
    walk(t, target, &mut 0, col);
}

/// Per-shape weights for the objective.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Weighting {
    /// Every shape's latency counts as measured: the objective is the total time of running each shape once.
    #[default]
    Uniform,
    /// Each shape's latency divided by its work (2·M·N·K, normalized to mean 1 over the training shapes):
    /// the objective is time per unit of work, so decode-sized shapes weigh as much as prefill-sized ones.
    Flops,
    /// Each shape's latency divided by its fastest measured latency: the objective is the summed slowdown
    /// against the per-shape best, every shape counting by its ratio (a first-order stand-in for the
    /// geometric-mean fraction of the oracle).
    Oracle,
    /// Cost ln(t / t_best) per shape: the objective is exactly the geometric-mean fraction of the oracle.
    Log,
}

impl Weighting {
    /// Whether this weighting is the log-ratio objective.
    pub fn log_ratio(self) -> bool {
        self == Weighting::Log
    }

    /// Weights for the training shapes `train` of `matrix` (`None` for uniform).
    pub fn weights(self, matrix: &LatencyMatrix, train: &[usize]) -> Option<Vec<f64>> {
        match self {
            Weighting::Uniform | Weighting::Log => None,
            Weighting::Flops => {
                let inv: Vec<f64> = train.iter().map(|&s| 1.0 / matrix.shapes[s].flops().max(1.0)).collect();
                let mean = inv.iter().sum::<f64>() / inv.len().max(1) as f64;
                Some(inv.iter().map(|w| w / mean).collect())
            }
            Weighting::Oracle => {
                let inv: Vec<f64> = train.iter().map(|&s| matrix.best(s).map_or(1.0, |(_, t)| 1.0 / t)).collect();
                let mean = inv.iter().sum::<f64>() / inv.len().max(1) as f64;
                Some(inv.iter().map(|w| w / mean).collect())
            }
        }
    }
}
