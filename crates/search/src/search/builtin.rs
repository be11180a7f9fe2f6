//! Built-in rule proposer: the synthesizer under varied limits / features / weights / training subsets,
//! and local search around the best rules so far.
//!
//! Modes, by offspring slot (`offspring_index % 4`):
//! - no usable parent (none given, the baseline, a failure or unparsable text), or slot 3: a synthesizer
//!   variant (cycling through [`variants`]: the search's limits, per-FLOP weights, raw features, fewer
//!   leaves, shallower trees, fewer instances, then bootstrap subsets of the training shapes);
//! - slot 0: best-improvement local search from the parent;
//! - slots 1 and 2: iterated local search: a random move first, then local search.
//!
//! Moves (each yields a valid rule within the limits, or is discarded): move a threshold to a
//! neighbouring observed value of its expression (arithmetic and geometric midpoints), set a leaf to one
//! of the best candidates for the training shapes reaching it, drop a branch (its shapes fall through),
//! collapse a chain into its best single leaf (merge), split a leaf on the best feature threshold, and
//! refit every leaf after a structural move. Moves are ranked by the training objective computed with
//! the same charging as the evaluator (an unusable cell costs the default kernel's time). Local search
//! only moves to rules that are safe between the training shapes: a split-K leaf gets the synthesizer's
//! guard (its region stops where the training shapes show its cell stops being measured), and a move
//! whose guard would not fit the limits is skipped. The returned rule is never one already in the history
//! when any other neighbour exists.

use super::task::{charged_fallback, limit_violations, RuleSetup};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;
use std::sync::Arc;
use synth_core::rule::edit::{chain_paths, leaf_path, leaf_paths, node_at, replace_at, simplify};
use synth_core::rule::source::NodePath;
use synth_core::rule::text::rule_to_cpp_text;
use synth_core::rule::{parse_any, CmpOp, Cond, Expr, Leaf, Node, Rule};
use synth_core::synthesize::guard::Guards;
use synth_core::synthesize::{try_synthesize, FeatureSet, Limits, Weighting};
use synth_engine::engine::{ProposalRequest, ProposeError, Proposer};

/// One synthesizer configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    pub label: String,
    pub limits: Limits,
    pub weighting: Weighting,
    /// Seed of a bootstrap subset (4 of every 5 training shapes); None = all shapes.
    pub subset: Option<u64>,
}

/// The synthesizer variant number `i` (unbounded: past the fixed list, bootstrap subsets).
pub fn variants(base: &Limits, i: usize) -> Variant {
    let v = |label: &str, limits: Limits, weighting: Weighting| Variant {
        label: label.into(),
        limits,
        weighting,
        subset: None,
    };
    let other_features = match base.features {
        FeatureSet::Machine | FeatureSet::Contrast => FeatureSet::Raw,
        FeatureSet::Raw => FeatureSet::Machine,
    };
    let fixed = [
        v("as configured", base.clone(), Weighting::Uniform),
        v("per-FLOP weights", base.clone(), Weighting::Flops),
        v("other features", Limits { features: other_features, ..base.clone() }, Weighting::Uniform),
        v(
            "fewer leaves",
            Limits { max_leaves: base.max_leaves.saturating_sub(2).max(1), ..base.clone() },
            Weighting::Uniform,
        ),
        v("shallower", Limits { max_depth: base.max_depth.clamp(1, 4), ..base.clone() }, Weighting::Uniform),
        v(
            "fewer instances",
            Limits { max_instances: Some(base.max_instances.unwrap_or(4).clamp(1, 4)), ..base.clone() },
            Weighting::Uniform,
        ),
        v("half the leaves", Limits { max_leaves: (base.max_leaves / 2).max(1), ..base.clone() }, Weighting::Uniform),
    ];
    if i < fixed.len() {
        return fixed[i].clone();
    }
    let seed = (i - fixed.len()) as u64 + 1;
    let weighting = if seed.is_multiple_of(2) { Weighting::Flops } else { Weighting::Uniform };
    Variant { label: format!("bootstrap subset {seed}"), limits: base.clone(), weighting, subset: Some(seed) }
}

/// The built-in proposer (see the module documentation).
pub struct BuiltinProposer {
    setup: Arc<RuleSetup>,
    /// cost[i][c]: weighted charged µs of candidate column c on training shape i.
    cost: Vec<Vec<f64>>,
    /// Dimensions of each training shape.
    dims: Vec<(u32, u32, u32)>,
    /// Seed mixed into every random choice.
    pub seed: u64,
    /// Share of the neighbourhood sampled per local-search step in the randomized modes.
    pub sample: f64,
    /// Most local-search steps per proposal.
    pub steps: usize,
}

impl BuiltinProposer {
    /// A proposer over `setup`.
    pub fn new(setup: Arc<RuleSetup>, seed: u64) -> BuiltinProposer {
        let m = &setup.matrix;
        let default_col = m.candidate_index(&setup.default_candidate());
        let cost = setup
            .train
            .iter()
            .map(|&s| {
                let w = setup.weight_of(s);
                let fb = charged_fallback(&setup, s, default_col);
                (0..m.candidates.len()).map(|c| w * m.us(s, c).unwrap_or(fb)).collect()
            })
            .collect();
        let dims = setup.train.iter().map(|&s| (m.shapes[s].m, m.shapes[s].n, m.shapes[s].k)).collect();
        BuiltinProposer { setup, cost, dims, seed, sample: 0.5, steps: 12 }
    }

    fn fallback_cost(&self, i: usize) -> f64 {
        let m = &self.setup.matrix;
        let s = self.setup.train[i];
        let w = self.setup.weight_of(s);
        w * charged_fallback(&self.setup, s, m.candidate_index(&self.setup.default_candidate()))
    }

    /// Cost of returning `leaf` on training shape `i`.
    fn leaf_cost(&self, i: usize, leaf: Leaf) -> f64 {
        match self.setup.matrix.candidate_index(&leaf.candidate()) {
            Some(c) => self.cost[i][c],
            None => self.fallback_cost(i),
        }
    }

    /// The training objective of `rule` (Σ weight × charged µs), as the evaluator computes it.
    pub fn objective(&self, rule: &Rule) -> f64 {
        self.dims.iter().enumerate().map(|(i, &(m, n, k))| self.leaf_cost(i, rule.eval(m, n, k))).sum()
    }

    /// Best candidates (by total cost, ascending) for the training shapes `shapes`.
    fn best_for(&self, shapes: &[usize], top: usize) -> Vec<(Leaf, f64)> {
        let cands = &self.setup.matrix.candidates;
        let mut all: Vec<(Leaf, f64)> = cands
            .iter()
            .enumerate()
            .map(|(c, cand)| (Leaf::from_candidate(*cand), shapes.iter().map(|&i| self.cost[i][c]).sum()))
            .collect();
        all.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        all.truncate(top);
        all
    }

    /// Training shapes (positions) reaching each leaf path.
    fn shapes_by_leaf(&self, rule: &Rule) -> Vec<(NodePath, Vec<usize>)> {
        let mut out: Vec<(NodePath, Vec<usize>)> =
            leaf_paths(&rule.root).into_iter().map(|p| (p, Vec::new())).collect();
        for (i, &(m, n, k)) in self.dims.iter().enumerate() {
            let p = leaf_path(&rule.root, m, n, k);
            if let Some(e) = out.iter_mut().find(|(q, _)| *q == p) {
                e.1.push(i);
            }
        }
        out
    }

    /// Every leaf set to the best candidate for its shapes (leaves no shape reaches keep theirs).
    fn refit(&self, rule: &Rule) -> Rule {
        let mut root = rule.root.clone();
        for (path, shapes) in self.shapes_by_leaf(rule) {
            if let Some((leaf, _)) = self.best_for(&shapes, 1).first().filter(|_| !shapes.is_empty()) {
                root = replace_at(&root, &path, Node::Leaf(*leaf));
            }
        }
        Rule::new(root)
    }

    /// Whether a rule may be proposed: within the limits and only known candidates.
    fn admissible(&self, rule: &Rule) -> bool {
        limit_violations(rule, &self.setup.limits).is_empty()
            && rule.leaves().iter().all(|l| self.setup.catalog.legacy_by_id(l.kernel_id).is_some() && l.split_k <= 3)
    }

    /// The neighbourhood of `rule` (see the module documentation), admissible rules only, deduplicated.
    pub fn neighbours(&self, rule: &Rule) -> Vec<Rule> {
        let mut out: Vec<Rule> = Vec::new();
        let push = |r: Rule, out: &mut Vec<Rule>| {
            let r = Rule::new(simplify(&r.root));
            if r != *rule && self.admissible(&r) && !out.contains(&r) {
                out.push(r);
            }
        };
        let by_leaf = self.shapes_by_leaf(rule);
        // Leaf relabels.
        for (path, shapes) in &by_leaf {
            if shapes.is_empty() {
                continue;
            }
            for (leaf, _) in self.best_for(shapes, 3) {
                push(Rule::new(replace_at(&rule.root, path, Node::Leaf(leaf))), &mut out);
            }
        }
        push(self.refit(rule), &mut out);
        // Threshold moves.
        for (chain, branch, idx, new) in self.threshold_moves(rule) {
            let r = Rule::new(replace_cmp(&rule.root, &chain, branch, idx, &new));
            push(r.clone(), &mut out);
            push(self.refit(&r), &mut out);
        }
        // Drop a branch / collapse a chain.
        for chain in chain_paths(&rule.root) {
            if let Some(Node::Chain { branches, otherwise }) = node_at(&rule.root, &chain) {
                for i in 0..branches.len() {
                    let mut b = branches.clone();
                    b.remove(i);
                    let node = if b.is_empty() {
                        (**otherwise).clone()
                    } else {
                        Node::Chain { branches: b, otherwise: otherwise.clone() }
                    };
                    let r = Rule::new(replace_at(&rule.root, &chain, node));
                    push(r.clone(), &mut out);
                    push(self.refit(&r), &mut out);
                }
                let shapes: Vec<usize> =
                    by_leaf.iter().filter(|(p, _)| p.starts_with(&chain)).flat_map(|(_, s)| s.clone()).collect();
                if let Some((leaf, _)) = self.best_for(&shapes, 1).first() {
                    push(Rule::new(replace_at(&rule.root, &chain, Node::Leaf(*leaf))), &mut out);
                }
            }
        }
        // Leaf splits.
        if rule.num_leaves() < self.setup.limits.max_leaves {
            for (path, shapes) in &by_leaf {
                for node in self.best_splits(shapes, 2) {
                    push(Rule::new(replace_at(&rule.root, path, node)), &mut out);
                }
            }
        }
        out
    }

    /// Up to `top` best single-threshold splits of a leaf's shapes into two best-candidate leaves.
    fn best_splits(&self, shapes: &[usize], top: usize) -> Vec<Node> {
        if shapes.len() < 2 {
            return Vec::new();
        }
        let nc = self.setup.matrix.candidates.len();
        let mut found: Vec<(f64, usize, i64)> = Vec::new();
        for (fi, f) in self.setup.features.iter().enumerate() {
            let mut vals: Vec<(i64, usize)> =
                shapes.iter().map(|&i| (f.expr.eval(self.dims[i].0, self.dims[i].1, self.dims[i].2), i)).collect();
            vals.sort();
            let mut left = vec![0.0; nc];
            let mut right = vec![0.0; nc];
            for &(_, i) in &vals {
                for (r, x) in right.iter_mut().zip(&self.cost[i]) {
                    *r += x;
                }
            }
            for j in 0..vals.len() - 1 {
                let i = vals[j].1;
                for c in 0..nc {
                    left[c] += self.cost[i][c];
                    right[c] -= self.cost[i][c];
                }
                if vals[j].0 == vals[j + 1].0 {
                    continue;
                }
                let l = left.iter().cloned().fold(f64::INFINITY, f64::min);
                let r = right.iter().cloned().fold(f64::INFINITY, f64::min);
                found.push((l + r, fi, midpoint(vals[j].0, vals[j + 1].0)));
            }
        }
        found.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        found
            .into_iter()
            .take(top)
            .map(|(_, fi, t)| {
                let f = &self.setup.features[fi];
                let (l, r): (Vec<usize>, Vec<usize>) =
                    shapes.iter().partition(|&&i| f.expr.eval(self.dims[i].0, self.dims[i].1, self.dims[i].2) <= t);
                let bl = self.best_for(&l, 1)[0].0;
                let br = self.best_for(&r, 1)[0].0;
                Node::Chain {
                    branches: vec![(Cond::cmp(CmpOp::Le, f.expr.clone(), Expr::Lit(t)), Node::Leaf(bl))],
                    otherwise: Box::new(Node::Leaf(br)),
                }
            })
            .collect()
    }

    /// Threshold moves: (chain path, branch, comparison index, new comparison).
    fn threshold_moves(&self, rule: &Rule) -> Vec<(NodePath, usize, usize, Cond)> {
        let mut out = Vec::new();
        for chain in chain_paths(&rule.root) {
            let Some(Node::Chain { branches, .. }) = node_at(&rule.root, &chain) else { continue };
            for (b, (cond, _)) in branches.iter().enumerate() {
                let mut cmps = Vec::new();
                collect_cmps(cond, &mut cmps);
                for (idx, (op, lhs, rhs)) in cmps.into_iter().enumerate() {
                    // Normalize to `expr OP constant`.
                    let (op, expr, t) = match (lhs.constant_value(), rhs.constant_value()) {
                        (None, Some(t)) => (op, lhs, t),
                        (Some(t), None) => (op.swapped(), rhs, t),
                        _ => continue,
                    };
                    let mut vals: Vec<i64> = self.dims.iter().map(|&(m, n, k)| expr.eval(m, n, k)).collect();
                    vals.sort();
                    vals.dedup();
                    for nt in neighbour_thresholds(op, t, &vals) {
                        out.push((chain.clone(), b, idx, Cond::cmp(op, expr.clone(), Expr::Lit(nt))));
                    }
                }
            }
        }
        out
    }

    /// Local search from `start`: repeatedly take the best safe neighbour (see [`Self::safe`]; of a
    /// random sample of the neighbourhood when `sample < 1`) while it improves the objective.
    fn local_search(&self, guards: &Guards, start: Rule, rng: &mut ChaCha8Rng, sample: f64) -> (Rule, f64) {
        let mut cur = start;
        let mut cost = self.objective(&cur);
        for _ in 0..self.steps {
            let mut nb = self.neighbours(&cur);
            if sample < 1.0 {
                nb.shuffle(rng);
                nb.truncate(((nb.len() as f64) * sample).ceil() as usize);
            }
            let mut scored: Vec<(f64, Rule)> = nb.into_iter().map(|r| (self.objective(&r), r)).collect();
            scored.sort_by(|a, b| a.0.total_cmp(&b.0));
            let next = scored
                .into_iter()
                .take_while(|(c, _)| *c < cost - 1e-9)
                .find_map(|(c, r)| self.safe(guards, &r).map(|r| (c, r)));
            match next {
                Some((c, r)) => {
                    cur = r;
                    cost = c;
                }
                None => break,
            }
        }
        (cur, cost)
    }

    /// `rule` made safe for shapes between the training ones: split-K leaves get the synthesizer's
    /// guards ([`Guards`]: a split-K leaf stops where the training shapes show its cell stops being
    /// measured; training picks are unchanged). None when a guard is needed but does not fit the limits.
    pub fn safe(&self, guards: &Guards, rule: &Rule) -> Option<Rule> {
        let (node, added) = guards.apply(&rule.root);
        if added == 0 {
            return Some(rule.clone());
        }
        let out = Rule::new(node);
        self.admissible(&out).then_some(out)
    }

    fn synthesize_variant(&self, index: usize) -> Result<Rule, String> {
        let v = variants(&self.setup.limits, index);
        let train: Vec<usize> = match v.subset {
            None => self.setup.train.clone(),
            Some(seed) => {
                let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ seed.wrapping_mul(0x2545_F491_4F6C_DD1D));
                let mut t = self.setup.train.clone();
                t.shuffle(&mut rng);
                t.truncate((t.len() * 4).div_ceil(5).max(1));
                t.sort();
                t
            }
        };
        let weights = v.weighting.weights(&self.setup.matrix, &train);
        let s = try_synthesize(&self.setup.matrix, &self.setup.catalog, &train, weights.as_deref(), &v.limits)
            .map_err(|e| format!("synthesizer ({}) failed: {e}", v.label))?;
        Ok(s.rule)
    }
}

/// The steps of one proposal.
impl BuiltinProposer {
    /// The proposal's random stream, seeded from the proposer's seed, the iteration, the slot and the parent.
    fn proposal_rng(&self, req: &ProposalRequest) -> ChaCha8Rng {
        let mix = self.seed
            ^ (req.iteration as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ (req.offspring_index as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9)
            ^ req.parent.as_ref().map(|p| p.id as u64).unwrap_or(0).wrapping_mul(0x94D0_49BB_1331_11EB);
        ChaCha8Rng::seed_from_u64(mix)
    }

    /// A synthesizer variant's rule, skipping variants whose rule is already in the history (`seen`).
    fn fresh_variant(&self, req: &ProposalRequest, seen: &HashSet<String>) -> Result<String, ProposeError> {
        let start = req.iteration.saturating_sub(1) * 4 + req.offspring_index;
        let mut last_err = String::new();
        for i in start..start + 16 {
            match self.synthesize_variant(i) {
                Ok(rule) => {
                    let text = rule_to_cpp_text(&rule, &self.setup.catalog);
                    if !seen.contains(&text) {
                        return Ok(text);
                    }
                }
                Err(e) => last_err = e,
            }
        }
        if last_err.is_empty() {
            return Err(ProposeError::Exhausted(
                "every synthesizer variant tried reproduces a rule already in the history".into(),
            ));
        }
        Err(ProposeError::Failed(last_err))
    }

    /// Neighbours of a rule, cheapest first; made safe lazily by the caller (guards are the costly part).
    fn sorted_neighbours(&self, r: &Rule) -> Vec<(f64, Rule)> {
        let mut nb: Vec<(f64, Rule)> = self.neighbours(r).into_iter().map(|r| (self.objective(&r), r)).collect();
        nb.sort_by(|a, b| a.0.total_cmp(&b.0));
        nb
    }

    /// Local search from the parent (slot mode 0), or iterated local search: a random move among the 12
    /// best safe neighbours, then local search. Returns the rule reached and its objective.
    fn improve(
        &self,
        guards: &Guards,
        parent: Rule,
        parent_cost: f64,
        slot_mode: usize,
        rng: &mut ChaCha8Rng,
    ) -> (Rule, f64) {
        if slot_mode == 0 {
            return self.local_search(guards, parent, rng, 1.0);
        }
        let mut nb: Vec<(f64, Rule)> = self
            .sorted_neighbours(&parent)
            .into_iter()
            .filter_map(|(c, r)| self.safe(guards, &r).map(|r| (c, r)))
            .take(12)
            .collect();
        if nb.is_empty() {
            return (parent, parent_cost);
        }
        let k = rng.gen_range(0..nb.len());
        let start = nb.swap_remove(k).1;
        self.local_search(guards, start, rng, self.sample)
    }

    /// One of the best safe neighbours of `rule` not yet in the history, so a stuck lineage keeps
    /// exploring; None when there is none.
    fn unseen_neighbour(
        &self,
        guards: &Guards,
        rule: &Rule,
        seen: &HashSet<String>,
        rng: &mut ChaCha8Rng,
    ) -> Option<String> {
        let fresh: Vec<String> = self
            .sorted_neighbours(rule)
            .into_iter()
            .filter_map(|(_, r)| self.safe(guards, &r))
            .map(|r| rule_to_cpp_text(&r, &self.setup.catalog))
            .filter(|t| !seen.contains(t))
            .take(4)
            .collect();
        match fresh.len() {
            0 => None,
            n => Some(fresh[rng.gen_range(0..n)].clone()),
        }
    }
}

impl Proposer for BuiltinProposer {
    fn name(&self) -> String {
        "builtin".into()
    }

    fn propose(&self, req: &ProposalRequest) -> Result<String, ProposeError> {
        let catalog = &self.setup.catalog;
        let seen: HashSet<String> = req.history.iter().map(|a| a.candidate.clone()).collect();
        let parent_rule = req
            .parent
            .as_ref()
            .filter(|p| p.eval.score.is_some() && p.iteration > 0)
            .and_then(|p| parse_any(&p.candidate, catalog).ok());
        let mut rng = self.proposal_rng(req);
        let slot_mode = req.offspring_index % 4;
        let parent_rule = match parent_rule {
            Some(r) if slot_mode != 3 => r,
            _ => return self.fresh_variant(req, &seen),
        };
        let parent_cost = self.objective(&parent_rule);
        let st = &self.setup;
        let guards = Guards::new(&st.matrix, &st.catalog, &st.train, st.limits.max_depth);
        let (rule, cost) = self.improve(&guards, parent_rule, parent_cost, slot_mode, &mut rng);
        let text = rule_to_cpp_text(&rule, catalog);
        if cost < parent_cost - 1e-9 && !seen.contains(&text) {
            return Ok(text);
        }
        // Stuck: return one of the best neighbours not yet in the history, so the lineage keeps exploring.
        Ok(self.unseen_neighbour(&guards, &rule, &seen, &mut rng).unwrap_or(text))
    }
}

/// Threshold between two consecutive observed values `a < b`: geometric midpoint when both are
/// positive and far apart (M-like features), else the arithmetic one; always in `[a, b - 1]`.
fn midpoint(a: i64, b: i64) -> i64 {
    let t = if a > 0 && b > 2 * a { ((a as f64) * (b as f64)).sqrt().floor() as i64 } else { a + (b - a - 1) / 2 };
    t.clamp(a, b - 1)
}

/// New constants for `expr OP t` that move the split by one or two observed values either way.
fn neighbour_thresholds(op: CmpOp, t: i64, vals: &[i64]) -> Vec<i64> {
    if vals.len() < 2 {
        return Vec::new();
    }
    // Boundary j separates vals[..=j] from vals[j+1..]; `x <= c` with c in [vals[j], vals[j+1]-1].
    let le_const = |j: usize| midpoint(vals[j], vals[j + 1]);
    let mut out = Vec::new();
    match op {
        CmpOp::Le | CmpOp::Gt | CmpOp::Lt | CmpOp::Ge => {
            // Current boundary: number of values on the lower side.
            let lower = match op {
                CmpOp::Le | CmpOp::Gt => vals.iter().filter(|&&v| v <= t).count(),
                _ => vals.iter().filter(|&&v| v < t).count(),
            };
            for d in [-2i64, -1, 1, 2] {
                let n = lower as i64 + d;
                if n < 1 || n as usize >= vals.len() {
                    continue;
                }
                let c = le_const(n as usize - 1);
                // `x < c'` equals `x <= c' - 1`.
                out.push(if matches!(op, CmpOp::Lt | CmpOp::Ge) { c + 1 } else { c });
            }
        }
        CmpOp::Eq | CmpOp::Ne => {
            let pos = vals.iter().position(|&v| v >= t).unwrap_or(vals.len() - 1);
            for d in [-1i64, 1] {
                let j = pos as i64 + d;
                if j >= 0 && (j as usize) < vals.len() {
                    out.push(vals[j as usize]);
                }
            }
        }
    }
    out.retain(|&c| c != t);
    out.sort();
    out.dedup();
    out
}

fn collect_cmps<'a>(c: &'a Cond, out: &mut Vec<(CmpOp, &'a Expr, &'a Expr)>) {
    match c {
        Cond::Cmp { op, lhs, rhs } => out.push((*op, lhs, rhs)),
        Cond::And(cs) | Cond::Or(cs) => cs.iter().for_each(|c| collect_cmps(c, out)),
        Cond::Not(c) => collect_cmps(c, out),
        Cond::Const(_) => {}
    }
}

/// `c` with its `idx`-th comparison (pre-order) replaced by `new`.
fn replace_nth_cmp(c: &Cond, idx: usize, new: &Cond, seen: &mut usize) -> Cond {
    match c {
        Cond::Cmp { .. } => {
            let me = *seen;
            *seen += 1;
            if me == idx {
                new.clone()
            } else {
                c.clone()
            }
        }
        Cond::And(cs) => Cond::And(cs.iter().map(|x| replace_nth_cmp(x, idx, new, seen)).collect()),
        Cond::Or(cs) => Cond::Or(cs.iter().map(|x| replace_nth_cmp(x, idx, new, seen)).collect()),
        Cond::Not(x) => Cond::Not(Box::new(replace_nth_cmp(x, idx, new, seen))),
        Cond::Const(_) => c.clone(),
    }
}

fn replace_cmp(root: &Node, chain: &[usize], branch: usize, idx: usize, new: &Cond) -> Node {
    match node_at(root, chain) {
        Some(Node::Chain { branches, otherwise }) => {
            let mut b = branches.clone();
            b[branch].0 = replace_nth_cmp(&b[branch].0, idx, new, &mut 0);
            replace_at(root, chain, Node::Chain { branches: b, otherwise: otherwise.clone() })
        }
        _ => root.clone(),
    }
}
