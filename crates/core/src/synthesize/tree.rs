//! Cost-sensitive decision-tree search over a dense (shape × candidate) cost matrix.
//!
//! The problem: every training shape `s` has a cost `cost[s][c]` for every candidate column `c` (weighted
//! latency, or a large penalty where the candidate is missing or invalid) and integer feature values
//! `x[f][s]`. A tree tests `x[f] <= threshold` at each internal node (true → left) and names one
//! candidate at each leaf; its cost is the sum, over the shapes, of the cost of the candidate at the leaf
//! each shape reaches. Every leaf is labelled with the candidate of least summed cost over the shapes that
//! reach it (ties → the lower column index).
//!
//! Search, all of it deterministic (parallel parts reduce in a fixed order):
//! - **exact**: the optimal tree of depth ≤ `d` for every leaf budget `l ≤ 2^d`, by dynamic programming
//!   over the subsets of shapes that splits produce (memoized on the subset bitset, shared across rayon
//!   workers). Depth 1 is a sweep over each feature's sorted order with running cost sums.
//! - **growth**: best-first refinement of a tree, one split at a time, choosing the leaf and split whose
//!   optimal depth-≤2 replacement saves the most cost per added leaf (look-ahead), so every leaf count
//!   has a snapshot and a larger budget only ever extends a smaller one's sequence.
//!
//! [`search`] pools the exact fronts and the growth snapshots and returns, for each leaf budget, the
//! cheapest tree found with at most that many leaves; the result is therefore non-increasing in the
//! budget, and the pool for a budget contains the pool of every smaller budget.

use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Dense training problem.
#[derive(Debug, Clone)]
pub struct Problem {
    n: usize,
    c: usize,
    cost: Vec<f64>,
    features: Vec<Vec<i64>>,
    order: Vec<Vec<u32>>,
    /// Features the search splits on ([`useful_features`]); the others make no split these do not.
    active: Vec<usize>,
}

impl Problem {
    /// `cost` is row-major `n × c` (finite, non-negative); `features[f][s]` is feature `f` of shape `s`.
    /// The search splits on the [`useful_features`]; trees may name any feature.
    ///
    /// # Panics
    /// If the lengths disagree or a cost is not finite and non-negative (a programming error: callers
    /// build costs from validated matrices).
    pub fn new(n: usize, c: usize, cost: Vec<f64>, features: Vec<Vec<i64>>) -> Problem {
        assert_eq!(cost.len(), n * c, "cost matrix must be n × c");
        assert!(cost.iter().all(|v| v.is_finite() && *v >= 0.0), "costs must be finite and non-negative");
        for f in &features {
            assert_eq!(f.len(), n, "every feature needs one value per shape");
        }
        let order = features
            .iter()
            .map(|vals| {
                let mut idx: Vec<u32> = (0..n as u32).collect();
                idx.sort_by_key(|&s| (vals[s as usize], s));
                idx
            })
            .collect();
        let active = useful_features(&features);
        Problem { n, c, cost, features, order, active }
    }

    /// Number of shapes.
    pub fn shapes(&self) -> usize {
        self.n
    }

    /// Number of candidate columns.
    pub fn candidates(&self) -> usize {
        self.c
    }

    /// Number of features.
    pub fn num_features(&self) -> usize {
        self.features.len()
    }

    /// Cost of candidate `c` on shape `s`.
    pub fn cost(&self, s: usize, c: usize) -> f64 {
        self.cost[s * self.c + c]
    }

    /// Features the search splits on, in preference order.
    pub fn active_features(&self) -> &[usize] {
        &self.active
    }

    /// Value of feature `f` on shape `s`.
    pub fn feature(&self, f: usize, s: usize) -> i64 {
        self.features[f][s]
    }
}

/// Indices of the features worth searching, in order: a feature is dropped when every split it makes of
/// the shapes is already made by an earlier kept feature (it could never win, since earlier features win
/// ties). `values[f][s]` is feature `f` of shape `s`.
pub fn useful_features(values: &[Vec<i64>]) -> Vec<usize> {
    let n = values.first().map_or(0, Vec::len);
    let mut seen: HashSet<Bits> = HashSet::new();
    let mut keep = Vec::new();
    for (f, vals) in values.iter().enumerate() {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&s| (vals[s], s));
        let mut left = Bits(vec![0; n.div_ceil(64)]);
        let mut new = false;
        for w in order.windows(2) {
            left.insert(w[0]);
            if vals[w[0]] != vals[w[1]] && seen.insert(left.clone()) {
                new = true;
            }
        }
        if new {
            keep.push(f);
        }
    }
    keep
}

/// A decision tree over a [`Problem`]: leaves hold candidate columns; `x[feature] <= threshold` goes left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tree {
    Leaf(usize),
    Split { feature: usize, threshold: i64, left: Box<Tree>, right: Box<Tree> },
}

impl Tree {
    /// Number of leaves.
    pub fn leaves(&self) -> usize {
        match self {
            Tree::Leaf(_) => 1,
            Tree::Split { left, right, .. } => left.leaves() + right.leaves(),
        }
    }

    /// Number of tests on the longest root-to-leaf path.
    pub fn depth(&self) -> usize {
        match self {
            Tree::Leaf(_) => 0,
            Tree::Split { left, right, .. } => 1 + left.depth().max(right.depth()),
        }
    }

    /// Leaf candidates, left to right.
    pub fn leaf_candidates(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect(&self, out: &mut Vec<usize>) {
        match self {
            Tree::Leaf(c) => out.push(*c),
            Tree::Split { left, right, .. } => {
                left.collect(out);
                right.collect(out);
            }
        }
    }

    /// The candidate the tree picks for shape `s` of `p`.
    pub fn route(&self, p: &Problem, s: usize) -> usize {
        let mut node = self;
        loop {
            match node {
                Tree::Leaf(c) => return *c,
                Tree::Split { feature, threshold, left, right } => {
                    node = if p.feature(*feature, s) <= *threshold { left } else { right };
                }
            }
        }
    }

    /// Total cost of the tree on `p` (summed in shape order).
    pub fn cost(&self, p: &Problem) -> f64 {
        (0..p.n).map(|s| p.cost(s, self.route(p, s))).sum()
    }

    /// The same tree with every split whose two sides are the same single leaf replaced by that leaf.
    pub fn simplified(self) -> Tree {
        match self {
            Tree::Leaf(c) => Tree::Leaf(c),
            Tree::Split { feature, threshold, left, right } => {
                let (l, r) = (left.simplified(), right.simplified());
                match (&l, &r) {
                    (Tree::Leaf(a), Tree::Leaf(b)) if a == b => Tree::Leaf(*a),
                    _ => Tree::Split { feature, threshold, left: Box::new(l), right: Box::new(r) },
                }
            }
        }
    }

    /// Re-labels every leaf with the best column among `allowed` for the shapes of `p` reaching it.
    pub fn relabeled(&self, p: &Problem, allowed: &[usize]) -> Tree {
        let all = Bits::full(p.n);
        self.relabel_in(p, allowed, &all)
    }

    fn relabel_in(&self, p: &Problem, allowed: &[usize], set: &Bits) -> Tree {
        match self {
            Tree::Leaf(_) => {
                let totals = column_totals(p, allowed, set);
                let (j, _) = argmin(&totals);
                Tree::Leaf(allowed[j])
            }
            Tree::Split { feature, threshold, left, right } => {
                let (l, r) = set.split(p, *feature, *threshold);
                Tree::Split {
                    feature: *feature,
                    threshold: *threshold,
                    left: Box::new(left.relabel_in(p, allowed, &l)),
                    right: Box::new(right.relabel_in(p, allowed, &r)),
                }
            }
        }
    }
}

/// A tree with its cost.
#[derive(Debug, Clone)]
pub struct Solution {
    pub cost: f64,
    pub tree: Tree,
}

/// Search limits and effort.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchConfig {
    /// Largest number of tests on a root-to-leaf path.
    pub max_depth: usize,
    /// Largest leaf budget to report.
    pub max_leaves: usize,
    /// Depth of the exact (optimal) phase; capped by `max_depth`.
    pub exact_depth: usize,
    /// Depth of the look-ahead used to pick each growth step (1 or 2).
    pub lookahead: usize,
    /// Grow to this many leaves (when above `max_leaves`) and prune back: the cheapest pruning of the
    /// larger tree for each budget joins the pool ([`Searcher::prune`]). Equal to `max_leaves`: no pruning.
    pub grow_leaves: usize,
}

/// `true` when `a` is lower than `b` by more than rounding noise.
fn better(a: f64, b: f64) -> bool {
    a < b - 1e-9 * b.abs()
}

/// Index and value of the smallest entry (first one on ties).
fn argmin(v: &[f64]) -> (usize, f64) {
    let mut best = (0, f64::INFINITY);
    for (i, &x) in v.iter().enumerate() {
        if x < best.1 {
            best = (i, x);
        }
    }
    best
}

/// Smallest entry, written so that it vectorizes.
fn min_of(v: &[f64]) -> f64 {
    let mut acc = [f64::INFINITY; 4];
    let chunks = v.chunks_exact(4);
    let rest = chunks.remainder();
    for ch in chunks {
        for i in 0..4 {
            if ch[i] < acc[i] {
                acc[i] = ch[i];
            }
        }
    }
    let mut m = acc[0].min(acc[1]).min(acc[2].min(acc[3]));
    for &x in rest {
        if x < m {
            m = x;
        }
    }
    m
}

/// Smallest entry of `total - prefix`, written so that it vectorizes.
fn min_of_diff(total: &[f64], prefix: &[f64]) -> f64 {
    let mut acc = [f64::INFINITY; 4];
    let n4 = total.len() / 4 * 4;
    let mut i = 0;
    while i < n4 {
        for j in 0..4 {
            let d = total[i + j] - prefix[i + j];
            if d < acc[j] {
                acc[j] = d;
            }
        }
        i += 4;
    }
    let mut m = acc[0].min(acc[1]).min(acc[2].min(acc[3]));
    for j in n4..total.len() {
        let d = total[j] - prefix[j];
        if d < m {
            m = d;
        }
    }
    m
}

/// A set of shapes as a bitset.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bits(Vec<u64>);

impl Bits {
    /// All `n` shapes.
    pub fn full(n: usize) -> Bits {
        let mut w = vec![u64::MAX; n.div_ceil(64)];
        if !n.is_multiple_of(64) {
            if let Some(last) = w.last_mut() {
                *last = (1u64 << (n % 64)) - 1;
            }
        }
        Bits(w)
    }

    /// The given shapes out of `n`.
    pub fn from_members(n: usize, members: &[usize]) -> Bits {
        let mut b = Bits(vec![0; n.div_ceil(64)]);
        for &s in members {
            b.0[s / 64] |= 1 << (s % 64);
        }
        b
    }

    fn empty_like(&self) -> Bits {
        Bits(vec![0; self.0.len()])
    }

    /// Whether shape `s` is in the set.
    pub fn contains(&self, s: usize) -> bool {
        self.0[s / 64] >> (s % 64) & 1 == 1
    }

    fn insert(&mut self, s: usize) {
        self.0[s / 64] |= 1 << (s % 64);
    }

    /// Number of shapes in the set.
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    /// Members in ascending order.
    pub fn members(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.len());
        for (wi, &w) in self.0.iter().enumerate() {
            let mut w = w;
            while w != 0 {
                let b = w.trailing_zeros() as usize;
                out.push(wi * 64 + b);
                w &= w - 1;
            }
        }
        out
    }

    fn minus(&self, other: &Bits) -> Bits {
        Bits(self.0.iter().zip(&other.0).map(|(a, b)| a & !b).collect())
    }

    /// (members with `x[feature] <= threshold`, the others).
    pub fn split(&self, p: &Problem, feature: usize, threshold: i64) -> (Bits, Bits) {
        let mut left = self.empty_like();
        for s in self.members() {
            if p.feature(feature, s) <= threshold {
                left.insert(s);
            }
        }
        let right = self.minus(&left);
        (left, right)
    }
}

/// Summed cost of each allowed column over the set (summed in ascending shape order).
fn column_totals(p: &Problem, allowed: &[usize], set: &Bits) -> Vec<f64> {
    let mut t = vec![0.0; allowed.len()];
    for s in set.members() {
        let row = &p.cost[s * p.c..(s + 1) * p.c];
        for (j, &c) in allowed.iter().enumerate() {
            t[j] += row[c];
        }
    }
    t
}

/// Best tree for each leaf budget: entry `l - 1` is the cheapest tree found with at most `l` leaves.
type Front = Vec<Solution>;

/// A candidate split of a set: feature, threshold and the left side.
struct SplitCand {
    feature: usize,
    threshold: i64,
    left: Bits,
}

/// The search over one [`Problem`] with the leaves restricted to `allowed` columns.
pub struct Searcher<'a> {
    p: &'a Problem,
    allowed: Vec<usize>,
    /// Costs restricted to the allowed columns, row-major `n × allowed.len()`.
    cost: Vec<f64>,
    memo: Mutex<HashMap<(Bits, usize), Arc<Front>>>,
}

impl<'a> Searcher<'a> {
    /// A searcher whose leaves may only use the `allowed` columns (non-empty, each `< p.candidates()`).
    ///
    /// # Panics
    /// If `allowed` is empty or names a column outside the problem.
    pub fn new(p: &'a Problem, allowed: Vec<usize>) -> Searcher<'a> {
        assert!(!allowed.is_empty(), "at least one candidate column must be allowed");
        assert!(allowed.iter().all(|&c| c < p.c), "allowed column out of range");
        let ca = allowed.len();
        let mut cost = vec![0.0; p.n * ca];
        for s in 0..p.n {
            for (j, &c) in allowed.iter().enumerate() {
                cost[s * ca + j] = p.cost(s, c);
            }
        }
        Searcher { p, allowed, cost, memo: Mutex::new(HashMap::new()) }
    }

    fn ca(&self) -> usize {
        self.allowed.len()
    }

    fn row(&self, s: usize) -> &[f64] {
        let ca = self.ca();
        &self.cost[s * ca..(s + 1) * ca]
    }

    fn totals(&self, set: &Bits) -> Vec<f64> {
        let mut t = vec![0.0; self.ca()];
        for s in set.members() {
            for (a, b) in t.iter_mut().zip(self.row(s)) {
                *a += *b;
            }
        }
        t
    }

    fn leaf(&self, totals: &[f64]) -> Solution {
        let (j, cost) = argmin(totals);
        Solution { cost, tree: Tree::Leaf(self.allowed[j]) }
    }

    /// The cheapest single split of `set` (depth-1 tree with two leaves), if any split separates it.
    fn best_split(&self, set: &Bits, totals: &[f64]) -> Option<Solution> {
        let ca = self.ca();
        let mut prefix = vec![0.0; ca];
        let mut best: Option<(f64, usize, i64)> = None;
        for &f in &self.p.active {
            prefix.iter_mut().for_each(|x| *x = 0.0);
            self.walk_feature(set, f, |s, boundary| {
                if let Some(threshold) = boundary {
                    let score = min_of(&prefix) + min_of_diff(totals, &prefix);
                    if best.is_none_or(|(b, _, _)| better(score, b)) {
                        best = Some((score, f, threshold));
                    }
                }
                for (a, b) in prefix.iter_mut().zip(self.row(s)) {
                    *a += *b;
                }
            });
        }
        let (_, f, t) = best?;
        let (l, r) = set.split(self.p, f, t);
        let (ls, rs) = (self.leaf(&self.totals(&l)), self.leaf(&self.totals(&r)));
        Some(Solution {
            cost: ls.cost + rs.cost,
            tree: Tree::Split { feature: f, threshold: t, left: Box::new(ls.tree), right: Box::new(rs.tree) },
        })
    }

    /// Every distinct way to split `set` in two non-empty parts with one test (first occurrence kept, in
    /// feature order then threshold order).
    fn splits(&self, set: &Bits) -> Vec<SplitCand> {
        let mut seen: HashSet<Bits> = HashSet::new();
        let mut out = Vec::new();
        let total = set.len();
        for &f in &self.p.active {
            let mut left = set.empty_like();
            let mut count = 0;
            self.walk_feature(set, f, |s, boundary| {
                if let Some(threshold) = boundary {
                    if count < total && seen.insert(left.clone()) {
                        out.push(SplitCand { feature: f, threshold, left: left.clone() });
                    }
                }
                left.insert(s);
                count += 1;
            });
        }
        out
    }

    /// Visits the members of `set` in feature `f`'s ascending order: `visit(s, boundary)` with `boundary`
    /// the threshold between the previous member's value and this one's (their midpoint) when the value
    /// changes there, None at the first member and within a run of equal values.
    fn walk_feature(&self, set: &Bits, f: usize, mut visit: impl FnMut(usize, Option<i64>)) {
        let vals = &self.p.features[f];
        let mut prev: Option<i64> = None;
        for &s in &self.p.order[f] {
            let s = s as usize;
            if !set.contains(s) {
                continue;
            }
            let v = vals[s];
            let boundary = prev.filter(|&pv| pv != v).map(|pv| pv + (v - pv) / 2);
            visit(s, boundary);
            prev = Some(v);
        }
    }

    /// Optimal trees of depth ≤ `depth` over `set` for every leaf budget up to `2^depth`.
    pub fn solve(&self, set: &Bits, depth: usize) -> Arc<Front> {
        let key = (set.clone(), depth);
        if depth > 0 {
            if let Some(hit) = self.memo.lock().expect("memo lock").get(&key) {
                return Arc::clone(hit);
            }
        }
        let totals = self.totals(set);
        let leaf = self.leaf(&totals);
        if depth == 0 || set.len() < 2 {
            return Arc::new(vec![leaf]);
        }
        if depth == 1 {
            let mut front = vec![leaf.clone()];
            match self.best_split(set, &totals) {
                Some(sol) if better(sol.cost, leaf.cost) => front.push(sol),
                _ => front.push(leaf),
            }
            let front = Arc::new(front);
            self.memo.lock().expect("memo lock").insert(key, Arc::clone(&front));
            return front;
        }
        let cap = 1usize << depth.min(16);
        let splits = self.splits(set);
        let combine = |sp: &SplitCand| -> Front {
            let right = set.minus(&sp.left);
            let (lf, rf) = (self.solve(&sp.left, depth - 1), self.solve(&right, depth - 1));
            let mut out: Front = Vec::with_capacity(lf.len() + rf.len());
            for l in 2..=(lf.len() + rf.len()) {
                let mut best: Option<(f64, usize, usize)> = None;
                for l1 in 1..l {
                    let l2 = l - l1;
                    if l1 > lf.len() || l2 > rf.len() {
                        continue;
                    }
                    let c = lf[l1 - 1].cost + rf[l2 - 1].cost;
                    if best.is_none_or(|(b, _, _)| better(c, b)) {
                        best = Some((c, l1, l2));
                    }
                }
                if let Some((c, l1, l2)) = best {
                    out.push(Solution {
                        cost: c,
                        tree: Tree::Split {
                            feature: sp.feature,
                            threshold: sp.threshold,
                            left: Box::new(lf[l1 - 1].tree.clone()),
                            right: Box::new(rf[l2 - 1].tree.clone()),
                        },
                    });
                }
            }
            out
        };
        // Each split yields trees with 2..=cap leaves (index l - 2); merge in split order.
        let per_split: Vec<Front> = if set.len() >= 24 {
            splits.par_iter().map(combine).collect()
        } else {
            splits.iter().map(combine).collect()
        };
        let mut front: Front = vec![leaf; cap];
        for cand in per_split {
            for (i, sol) in cand.into_iter().enumerate() {
                let l = i + 2;
                if l <= cap && better(sol.cost, front[l - 1].cost) {
                    front[l - 1] = sol;
                }
            }
        }
        for l in 1..cap {
            if !better(front[l].cost, front[l - 1].cost) {
                front[l] = front[l - 1].clone();
            }
        }
        let front = Arc::new(front);
        self.memo.lock().expect("memo lock").insert(key, Arc::clone(&front));
        front
    }

    /// Best-first growth from `start` (which must respect `max_depth`): each step replaces one leaf by
    /// a split, chosen by the largest saving per added leaf of the leaf's optimal depth-≤`lookahead`
    /// subtree; the split's two sides become leaves with their own best candidates. Returns the
    /// snapshots, the start first, one per added leaf, up to `max_leaves` leaves or until no leaf can
    /// be improved.
    pub fn grow(&self, start: Tree, max_depth: usize, max_leaves: usize, lookahead: usize) -> Vec<Solution> {
        struct Slot {
            set: Bits,
            depth: usize,
            cost: f64,
            /// (score, feature, threshold) of the best expansion, if any improves the leaf.
            option: Option<(f64, usize, i64)>,
        }
        let mut tree = start;
        let mut slots: Vec<Slot> = Vec::new();
        self.collect_slots(&tree, Bits::full(self.p.n), 0, &mut |set, depth| {
            slots.push(Slot { set, depth, cost: 0.0, option: None })
        });
        let evaluate = |slot: &mut Slot| {
            let totals = self.totals(&slot.set);
            slot.cost = self.leaf(&totals).cost;
            slot.option = None;
            if slot.depth >= max_depth || slot.set.len() < 2 {
                return;
            }
            let front = self.solve(&slot.set, lookahead.min(max_depth - slot.depth).max(1));
            for (i, sol) in front.iter().enumerate().skip(1) {
                let gain = slot.cost - sol.cost;
                if !better(sol.cost, slot.cost) {
                    continue;
                }
                let score = gain / i as f64;
                if let Tree::Split { feature, threshold, .. } = sol.tree {
                    if slot.option.is_none_or(|(b, _, _)| score > b) {
                        slot.option = Some((score, feature, threshold));
                    }
                }
            }
        };
        slots.par_iter_mut().for_each(evaluate);
        let mut out = vec![Solution { cost: slots.iter().map(|s| s.cost).sum(), tree: tree.clone() }];
        while tree.leaves() < max_leaves {
            let mut pick: Option<(usize, f64)> = None;
            for (i, s) in slots.iter().enumerate() {
                if let Some((score, _, _)) = s.option {
                    if pick.is_none_or(|(_, b)| score > b) {
                        pick = Some((i, score));
                    }
                }
            }
            let Some((i, _)) = pick else { break };
            let (_, feature, threshold) = slots[i].option.expect("picked slot has an option");
            let (l, r) = slots[i].set.split(self.p, feature, threshold);
            let depth = slots[i].depth + 1;
            let mut new =
                [Slot { set: l, depth, cost: 0.0, option: None }, Slot { set: r, depth, cost: 0.0, option: None }];
            new.par_iter_mut().for_each(evaluate);
            let [ls, rs] = new;
            let (lt, rt) = (self.leaf(&self.totals(&ls.set)).tree, self.leaf(&self.totals(&rs.set)).tree);
            let mut k = 0;
            replace_leaf(&mut tree, i, &mut k, feature, threshold, lt, rt);
            slots.splice(i..=i, [ls, rs]);
            out.push(Solution { cost: slots.iter().map(|s| s.cost).sum(), tree: tree.clone() });
        }
        out
    }

    /// The cheapest prunings of `tree` over the rows `set`: entry `l - 1` is the cheapest tree with at
    /// most `l` leaves (`l` in `1..=max_leaves`) obtained by replacing subtrees of `tree` with the best
    /// single leaf of their rows (the root itself may become a leaf). Exact over prunings, by dynamic
    /// programming on the tree: a split with budget `l` takes the best `a + b = l` of its sides.
    pub fn prune(&self, tree: &Tree, set: &Bits, max_leaves: usize) -> Vec<Solution> {
        let max_leaves = max_leaves.max(1);
        let leaf = self.leaf(&self.totals(set));
        let mut best = vec![leaf; max_leaves];
        let Tree::Split { feature, threshold, left, right } = tree else { return best };
        if max_leaves >= 2 {
            let (l, r) = set.split(self.p, *feature, *threshold);
            let lb = self.prune(left, &l, max_leaves - 1);
            let rb = self.prune(right, &r, max_leaves - 1);
            for a in 1..max_leaves {
                for b in 1..=(max_leaves - a) {
                    let cost = lb[a - 1].cost + rb[b - 1].cost;
                    if better(cost, best[a + b - 1].cost) {
                        best[a + b - 1] = Solution {
                            cost,
                            tree: Tree::Split {
                                feature: *feature,
                                threshold: *threshold,
                                left: Box::new(lb[a - 1].tree.clone()),
                                right: Box::new(rb[b - 1].tree.clone()),
                            },
                        };
                    }
                }
            }
            for l in 1..max_leaves {
                if !better(best[l].cost, best[l - 1].cost) {
                    best[l] = best[l - 1].clone();
                }
            }
        }
        best
    }

    fn collect_slots(&self, tree: &Tree, set: Bits, depth: usize, f: &mut dyn FnMut(Bits, usize)) {
        match tree {
            Tree::Leaf(_) => f(set, depth),
            Tree::Split { feature, threshold, left, right } => {
                let (l, r) = set.split(self.p, *feature, *threshold);
                self.collect_slots(left, l, depth + 1, f);
                self.collect_slots(right, r, depth + 1, f);
            }
        }
    }
}

/// Replaces the `target`-th leaf (left to right) by a split with the given leaves.
fn replace_leaf(
    tree: &mut Tree,
    target: usize,
    k: &mut usize,
    feature: usize,
    threshold: i64,
    l: Tree,
    r: Tree,
) -> bool {
    match tree {
        Tree::Leaf(_) => {
            if *k == target {
                *tree = Tree::Split { feature, threshold, left: Box::new(l), right: Box::new(r) };
                true
            } else {
                *k += 1;
                false
            }
        }
        Tree::Split { left, right, .. } => {
            replace_leaf(left, target, k, feature, threshold, l.clone(), r.clone())
                || replace_leaf(right, target, k, feature, threshold, l, r)
        }
    }
}

/// The full search: exact fronts up to `exact_depth`, growth from a single leaf and from the deepest
/// exact tree, pooled. Entry `l - 1` of the result is the cheapest tree found with at most `l` leaves,
/// for `l` in `1..=cfg.max_leaves`; every tree respects `cfg.max_depth` and uses only `allowed` columns.
pub fn search(p: &Problem, allowed: &[usize], cfg: &SearchConfig) -> Vec<Solution> {
    let s = Searcher::new(p, allowed.to_vec());
    let all = Bits::full(p.n);
    let exact_depth = cfg.exact_depth.min(cfg.max_depth);
    let lookahead = cfg.lookahead.clamp(1, 2);
    let mut pool: Vec<Solution> = Vec::new();
    let exact = s.solve(&all, exact_depth);
    pool.extend(exact.iter().cloned());
    let root = exact[0].tree.clone();
    let grow_leaves = cfg.grow_leaves.max(cfg.max_leaves);
    let grow = |start: Tree, pool: &mut Vec<Solution>| {
        let grown = s.grow(start, cfg.max_depth, grow_leaves, lookahead);
        if grow_leaves > cfg.max_leaves {
            if let Some(last) = grown.last() {
                pool.extend(s.prune(&last.tree, &all, cfg.max_leaves));
            }
        }
        pool.extend(grown);
    };
    grow(root, &mut pool);
    let deepest = exact[exact.len().min(cfg.max_leaves) - 1].tree.clone();
    if deepest.leaves() > 1 {
        grow(deepest, &mut pool);
    }
    frontier(pool, cfg.max_leaves)
}

/// For each budget `1..=max_leaves`, the cheapest tree of the pool with at most that many leaves (after
/// removing splits whose sides agree); earlier pool entries win ties.
pub fn frontier(pool: Vec<Solution>, max_leaves: usize) -> Vec<Solution> {
    let mut best: Vec<Option<Solution>> = vec![None; max_leaves.max(1)];
    for sol in pool {
        let tree = sol.tree.simplified();
        let l = tree.leaves();
        if l > max_leaves.max(1) {
            continue;
        }
        let slot = &mut best[l - 1];
        if slot.as_ref().is_none_or(|b| better(sol.cost, b.cost)) {
            *slot = Some(Solution { cost: sol.cost, tree });
        }
    }
    let mut out: Vec<Solution> = Vec::with_capacity(best.len());
    for cand in best {
        let keep_prev = match (&cand, out.last()) {
            (Some(c), Some(prev)) => !better(c.cost, prev.cost),
            (None, Some(_)) => true,
            _ => false,
        };
        if keep_prev {
            let prev = out.last().expect("checked").clone();
            out.push(prev);
        } else if let Some(c) = cand {
            out.push(c);
        }
    }
    out
}
