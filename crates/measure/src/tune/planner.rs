//! Which cells each round of a tune measures.
//!
//! Round 1, per layer: the prior's picks over the layer's M values and their close competitors (CK: the
//! split-K levels next to each pick's; Triton: the prior's candidate set, the kept configs) on
//! [`TuneSpec::first_ms`] M values spread over the layer's range; the held-out M values (seeded) over the
//! whole candidate set: every candidate of every layer so far and every leaf of the prior.
//!
//! Later rounds, from what the earlier ones measured:
//! - every shape's measured best joins its layer's candidates (measured on every training M of the layer);
//! - a new M halfway (by index in the layer's M list) between two neighbouring training M whose best
//!   differs, or where the best differs from the prior's pick ([`TuneSpec::refine_ms`] per layer at most);
//! - where the best differs from the prior's pick, its competitors there: CK, every candidate the prior's
//!   rule returns anywhere and the split-K levels next to the best's; Triton, at every training shape, the
//!   configs of the tuner's space one field away from the shape's best (which could beat the kept set).
//!
//! Every choice depends only on the measured cells, so a rerun over the same answers plans the same rounds.

use std::collections::{BTreeMap, BTreeSet};

use rand::seq::SliceRandom;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{CellId, Family, State, TuneSpec};
use synth_core::catalog::triton::{tuner_space, TritonConfig};
use synth_core::catalog::{Candidate, Libtype};
use synth_core::table::Shape;

/// `count` indices spread evenly over `0..n`, the first and the last included (all of them when
/// `count >= n`).
pub fn spread(n: usize, count: usize) -> Vec<usize> {
    if n == 0 || count == 0 {
        return Vec::new();
    }
    if count >= n {
        return (0..n).collect();
    }
    if count == 1 {
        return vec![(n - 1) / 2];
    }
    let mut out: Vec<usize> = (0..count).map(|i| (i * (n - 1) + (count - 1) / 2) / (count - 1)).collect();
    out.dedup();
    out
}

/// The held-out M indices of a layer: `count` seeded picks among the indices not in `taken`.
pub fn held_out_indices(n: usize, taken: &[usize], count: usize, seed: u64, layer: (u32, u32)) -> Vec<usize> {
    let mut free: Vec<usize> = (0..n).filter(|i| !taken.contains(i)).collect();
    let mixed = seed ^ (u64::from(layer.0) << 32) ^ u64::from(layer.1);
    free.shuffle(&mut ChaCha8Rng::seed_from_u64(mixed));
    free.truncate(count);
    free.sort_unstable();
    free
}

/// The state before round 1: training and held-out M values, and each layer's first candidates.
pub fn initial(spec: &TuneSpec) -> State {
    let mut st = State::default();
    for (&(n, k), ms) in &spec.layers {
        // The held-out M first (never the smallest or the largest: the range is trained end to end), then
        // the training M spread over the rest.
        let n_ms = ms.len();
        let held = if n_ms > 2 {
            held_out_indices(n_ms, &[0, n_ms - 1], spec.method.held_out.min(n_ms - 2), spec.method.seed, (n, k))
        } else {
            Vec::new()
        };
        let rest: Vec<usize> = (0..n_ms).filter(|i| !held.contains(i)).collect();
        let first: Vec<usize> = spread(rest.len(), spec.method.first_ms).into_iter().map(|j| rest[j]).collect();
        st.sampled.insert((n, k), first.iter().map(|&i| ms[i]).collect());
        st.held_out.extend(held.iter().map(|&i| Shape::new(ms[i], n, k)));
        st.active.insert((n, k), first_candidates(spec, (n, k), ms));
    }
    st
}

/// A layer's first candidates: the prior's pick at each of its M, their competitors, the prior's set.
pub fn first_candidates(spec: &TuneSpec, (n, k): (u32, u32), ms: &[u32]) -> BTreeSet<Candidate> {
    let mut out: BTreeSet<Candidate> = ms.iter().map(|&m| spec.method.prior.rule.eval(m, n, k).candidate()).collect();
    if spec.method.family == Family::Ck {
        let picks: Vec<Candidate> = out.iter().copied().collect();
        out.extend(picks.iter().flat_map(|&c| split_neighbours(c)));
    }
    out.extend(spec.method.prior.candidates.iter().copied());
    out
}

/// The split-K levels next to a CK candidate's (level 0 has one neighbour).
pub fn split_neighbours(c: Candidate) -> Vec<Candidate> {
    let mut out = vec![Candidate { split_k: c.split_k + 1, ..c }];
    if c.split_k > 0 {
        out.push(Candidate { split_k: c.split_k - 1, ..c });
    }
    out
}

/// The configs of the tuner's space one field away from a triton candidate (none for another backend).
pub fn triton_neighbours(c: Candidate) -> Vec<Candidate> {
    let Ok(base) = TritonConfig::from_kernel_id(i64::from(c.kernel_id)) else {
        return Vec::new();
    };
    if c.backend != Libtype::Triton {
        return Vec::new();
    }
    tuner_space()
        .into_iter()
        .filter(|o| base.values().iter().zip(o.values()).filter(|(a, b)| *a != b).count() == 1)
        .map(|o| Candidate::of(Libtype::Triton, o.kernel_id(), 0))
        .collect()
}

/// The fastest known usable candidate of a shape.
pub fn best_known(st: &State, shape: Shape) -> Option<Candidate> {
    let lo = (shape, Candidate::of(Libtype::Ck, i32::MIN, 0));
    let mut best: Option<(f64, Candidate)> = None;
    for ((s, c), cell) in st.known.range(lo..) {
        if *s != shape {
            break;
        }
        if let Some(t) = cell.us() {
            if best.is_none_or(|(b, _)| t < b) {
                best = Some((t, *c));
            }
        }
    }
    best.map(|(_, c)| c)
}

/// Plans the next round (updating the training M values and candidates from what is known) and returns
/// its cells that `universe` allows, not yet known, in (N, K, M) order.
pub fn plan_round(spec: &TuneSpec, st: &mut State, universe: &dyn Fn(Shape) -> Vec<Candidate>) -> Vec<CellId> {
    let mut explore: BTreeSet<CellId> = BTreeSet::new();
    if st.round > 0 {
        for (&nk, ms) in &spec.layers {
            adopt_winners(st, nk);
            explore.extend(competitors(spec, st, nk));
            refine_ms(spec, st, nk, ms);
        }
    }
    st.round += 1;
    let mut cells: BTreeSet<CellId> = explore;
    let every: BTreeSet<Candidate> = st.active.values().flatten().copied().collect();
    for (&(n, k), ms) in &st.sampled {
        for &m in ms {
            let s = Shape::new(m, n, k);
            cells.extend(st.active[&(n, k)].iter().map(|&c| (s, c)));
        }
    }
    let prior_leaves = spec.method.prior.rule.leaves().into_iter().map(|l| l.candidate());
    let whole: BTreeSet<Candidate> = every.into_iter().chain(prior_leaves).collect();
    for &s in &st.held_out {
        cells.extend(whole.iter().map(|&c| (s, c)));
    }
    let mut allowed: BTreeMap<Shape, BTreeSet<Candidate>> = BTreeMap::new();
    let mut out: Vec<CellId> = cells
        .into_iter()
        .filter(|cell| !st.known.contains_key(cell))
        .filter(|(s, c)| allowed.entry(*s).or_insert_with(|| universe(*s).into_iter().collect()).contains(c))
        .collect();
    out.sort_by_key(|(s, c)| (s.n, s.k, s.m, *c));
    out
}

/// Every measured best of a layer's shapes (training and held-out) joins the layer's candidates.
fn adopt_winners(st: &mut State, (n, k): (u32, u32)) {
    let shapes: Vec<Shape> = st.sampled[&(n, k)]
        .iter()
        .map(|&m| Shape::new(m, n, k))
        .chain(st.held_out.iter().copied().filter(|s| (s.n, s.k) == (n, k)))
        .collect();
    let winners: Vec<Candidate> = shapes.iter().filter_map(|&s| best_known(st, s)).collect();
    st.active.get_mut(&(n, k)).expect("every layer has candidates").extend(winners);
}

/// The competitors measured next to a layer's winners (see the module documentation).
fn competitors(spec: &TuneSpec, st: &State, (n, k): (u32, u32)) -> Vec<CellId> {
    let mut out = Vec::new();
    let prior_leaves: BTreeSet<Candidate> = spec.method.prior.rule.leaves().iter().map(|l| l.candidate()).collect();
    for &m in &st.sampled[&(n, k)] {
        let s = Shape::new(m, n, k);
        let Some(best) = best_known(st, s) else { continue };
        let prior_pick = spec.method.prior.rule.eval(m, n, k).candidate();
        match spec.method.family {
            Family::Ck if best != prior_pick => {
                out.extend(prior_leaves.iter().chain(split_neighbours(best).iter()).map(|&c| (s, c)));
            }
            Family::Ck => {}
            Family::Triton => out.extend(triton_neighbours(best).into_iter().map(|c| (s, c))),
        }
    }
    out
}

/// New training M values of a layer: halfway between neighbouring training M whose best differs (or
/// differs from the prior's pick), never a held-out M; at most [`TuneSpec::refine_ms`].
fn refine_ms(spec: &TuneSpec, st: &mut State, (n, k): (u32, u32), ms: &[u32]) {
    let held: BTreeSet<u32> = st.held_out.iter().filter(|s| (s.n, s.k) == (n, k)).map(|s| s.m).collect();
    let idx: Vec<usize> = st.sampled[&(n, k)].iter().filter_map(|m| ms.iter().position(|x| x == m)).collect();
    let settled = |m: u32| {
        let best = best_known(st, Shape::new(m, n, k));
        (best, best.is_none_or(|b| b == spec.method.prior.rule.eval(m, n, k).candidate()))
    };
    let mut new: Vec<u32> = Vec::new();
    for w in idx.windows(2) {
        let (a, b) = (w[0], w[1]);
        let ((ba, oka), (bb, okb)) = (settled(ms[a]), settled(ms[b]));
        if ba == bb && oka && okb {
            continue;
        }
        if let Some(mid) = free_between(a, b, |i| !held.contains(&ms[i])) {
            new.push(ms[mid]);
        }
        if new.len() >= spec.method.refine_ms {
            break;
        }
    }
    st.sampled.get_mut(&(n, k)).expect("every layer has M values").extend(new);
}

/// The index nearest the middle of `a..b` (exclusive) that `ok` allows.
fn free_between(a: usize, b: usize, ok: impl Fn(usize) -> bool) -> Option<usize> {
    let mid = (a + b) / 2;
    let mut cand: Vec<usize> = (a + 1..b).collect();
    cand.sort_by_key(|&i| (i.abs_diff(mid), i));
    cand.into_iter().find(|&i| ok(i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::{Method, Prior, Stop};
    use synth_core::rule::{Leaf, Node, Rule};
    use synth_core::table::Cell;

    fn spec(family: Family, rule: Rule, ms: Vec<u32>, prior: Vec<Candidate>) -> TuneSpec {
        let method = Method {
            family,
            prior: Prior { rule, candidates: prior },
            limits: synth_core::synthesize::Limits::default(),
            weight: synth_core::synthesize::Weighting::Log,
            first_ms: 3,
            refine_ms: 4,
            held_out: 1,
            seed: 0,
        };
        let stop = Stop { tolerance: 0.0, gpu_seconds: None, max_rounds: 10 };
        TuneSpec { method, layers: BTreeMap::from([((512, 1024), ms)]), stop }
    }

    #[test]
    fn spread_takes_both_ends_and_the_middle() {
        assert_eq!(spread(9, 3), vec![0, 4, 8]);
        assert_eq!(spread(10, 4), vec![0, 3, 6, 9]);
        assert_eq!(spread(3, 5), vec![0, 1, 2]);
        assert_eq!(spread(7, 1), vec![3]);
        assert!(spread(0, 3).is_empty());
    }

    #[test]
    fn ck_first_round_is_the_picks_and_their_split_neighbours() {
        let rule = Rule::new(Node::Leaf(Leaf::new(7, 1)));
        let ms: Vec<u32> = (0..9).map(|i| 1 << i).collect();
        let sp = spec(Family::Ck, rule, ms, Vec::new());
        let mut st = initial(&sp);
        let sampled = st.sampled[&(512, 1024)].clone();
        assert_eq!(sampled.len(), 3);
        assert!(sampled.contains(&1) && sampled.contains(&256), "both ends train: {sampled:?}");
        let want: BTreeSet<Candidate> = [Candidate::new(7, 0), Candidate::new(7, 1), Candidate::new(7, 2)].into();
        assert_eq!(st.active[&(512, 1024)], want);
        assert_eq!(st.held_out.len(), 1);
        let held = *st.held_out.iter().next().unwrap();
        assert!(!sampled.contains(&held.m) && held.m != 1 && held.m != 256);
        // Universe: kernels 7 and 8 at levels 0..=1 (level 2 not measurable here).
        let uni =
            |_: Shape| vec![Candidate::new(7, 0), Candidate::new(7, 1), Candidate::new(8, 0), Candidate::new(8, 1)];
        let plan = plan_round(&sp, &mut st, &uni);
        // 3 training shapes x 2 measurable candidates + the held-out shape's same 2 (the whole set so far).
        let _ = &sampled;
        assert_eq!(plan.len(), 3 * 2 + 2);
        assert!(plan.contains(&(held, Candidate::new(7, 1))));
        assert!(!plan.iter().any(|(_, c)| c.kernel_id == 8));
        assert!(!plan.iter().any(|(s, c)| *c == Candidate::new(8, 0) && *s != held));
    }

    /// Answers every cell of `plan`: split 2 of kernel 7 fastest at M = 256, split 1 next there, the
    /// rest slower.
    fn answer(st: &mut State, plan: Vec<CellId>) {
        for (s, c) in plan {
            let t = match (c.kernel_id, c.split_k, s.m) {
                (7, 2, 256) => 1.0,
                (7, 1, 256) => 1.5,
                _ => 2.0,
            };
            st.known.insert((s, c), Cell::Ok(t));
        }
    }

    #[test]
    fn a_changing_best_adds_the_middle_m_and_its_competitors() {
        let rule = Rule::new(Node::Leaf(Leaf::new(7, 0)));
        let ms: Vec<u32> = (0..9).map(|i| 1 << i).collect();
        let sp = spec(Family::Ck, rule, ms, Vec::new());
        let mut st = initial(&sp);
        let uni =
            |_: Shape| vec![Candidate::new(7, 0), Candidate::new(7, 1), Candidate::new(7, 2), Candidate::new(8, 0)];
        let plan = plan_round(&sp, &mut st, &uni);
        assert!(!plan.iter().any(|(_, c)| c.split_k == 2 || c.kernel_id == 8), "{plan:?}");
        let first_sampled = st.sampled[&(512, 1024)].clone();
        answer(&mut st, plan);
        let plan = plan_round(&sp, &mut st, &uni);
        // The training M next below 256 and 256 differ: an M strictly between them joins, never the held-out.
        let held = st.held_out.iter().next().unwrap().m;
        let before: Vec<u32> = first_sampled.iter().copied().filter(|&m| m < 256).collect();
        let below = *before.last().unwrap();
        let sampled = &st.sampled[&(512, 1024)];
        let new: Vec<u32> = sampled.difference(&first_sampled).copied().collect();
        assert!(new.iter().any(|&m| m > below && m < 256) || below * 2 == 256, "{first_sampled:?} -> {sampled:?}");
        assert!(!sampled.contains(&held));
        // The prior is wrong at M = 256 (split 1 wins): the split level next to the winner is tried there
        // only; kernel 8 (no pick, no prior leaf, no neighbour) never is.
        let s256 = Shape::new(256, 512, 1024);
        assert!(plan.contains(&(s256, Candidate::new(7, 2))));
        assert!(!plan.iter().any(|(s, c)| c.split_k == 2 && *s != s256), "{plan:?}");
        assert!(!plan.iter().any(|(_, c)| c.kernel_id == 8));
        answer(&mut st, plan);
        // Split 2 won at M = 256: it joins the layer and is measured at every training M.
        let plan = plan_round(&sp, &mut st, &uni);
        assert!(st.active[&(512, 1024)].contains(&Candidate::new(7, 2)));
        for &m in first_sampled.iter().filter(|&&m| m != 256) {
            assert!(plan.contains(&(Shape::new(m, 512, 1024), Candidate::new(7, 2))), "M={m}");
        }
    }

    #[test]
    fn triton_neighbours_change_one_field() {
        let base = synth_core::catalog::triton::VLLM_DEFAULT;
        let c = Candidate::of(Libtype::Triton, base.kernel_id(), 0);
        let nb = triton_neighbours(c);
        // BM 4 others, BN 3, BK 1, G 3, W 1, S 3.
        assert_eq!(nb.len(), 4 + 3 + 1 + 3 + 1 + 3);
        assert!(!nb.contains(&c));
        assert!(triton_neighbours(Candidate::new(7, 0)).is_empty());
    }
}
