//! Threshold refinement: where, between training shapes, a split changes its mind.
//!
//! The search sees only the training rows, so a split is defined by the partition it makes of them; many
//! (feature, threshold) pairs make the same partition and differ only on shapes between the training
//! ones. The search keeps the first feature in preference order, with the threshold halfway between the
//! neighbouring values. This pass revisits every split, top down, and among all pairs that make exactly
//! the same partition of the rows reaching it picks the one that best agrees with the nearest-neighbour
//! reading of the training data on probe shapes (the training layers' (N, K) × a log-dense M range): a
//! probe belongs with the training row of its layer nearest in M (ties → the smaller M), the way a
//! nearest-M lookup would read the same measurements. Ties go to the threshold nearest the midpoint, then
//! to the earlier feature. Training rows are routed exactly as before, so the training cost is unchanged.

use std::collections::BTreeSet;

use crate::table::Shape;

use super::features::Feature;
use super::tree::{Problem, Tree};

/// Probe M values: every M up to 64, then 32 per doubling up to 65536.
fn probe_ms() -> Vec<u32> {
    let mut out: Vec<u32> = (1..=64).collect();
    let step = 2f64.powf(1.0 / 32.0);
    let mut x = 64.0 * step;
    while x <= 65536.0 {
        let m = x.round() as u32;
        if out.last() != Some(&m) {
            out.push(m);
        }
        x *= step;
    }
    out
}

/// Refines the splits of trees over one problem.
pub struct Refiner<'a> {
    problem: &'a Problem,
    rows: &'a [Shape],
    probes: Vec<Shape>,
    /// `probe_values[f][p]`: feature `f` on probe `p`.
    probe_values: Vec<Vec<i64>>,
}

impl<'a> Refiner<'a> {
    /// `rows[r]` is the shape of problem row `r`; `features` are the problem's features, in order.
    pub fn new(problem: &'a Problem, rows: &'a [Shape], features: &[Feature]) -> Refiner<'a> {
        let layers: BTreeSet<(u32, u32)> = rows.iter().map(|s| (s.n, s.k)).collect();
        let ms = probe_ms();
        let probes: Vec<Shape> =
            layers.iter().flat_map(|&(n, k)| ms.iter().map(move |&m| Shape::new(m, n, k))).collect();
        let probe_values = features.iter().map(|f| probes.iter().map(|p| f.eval(p.m, p.n, p.k)).collect()).collect();
        Refiner { problem, rows, probes, probe_values }
    }

    /// The tree with every split refined.
    pub fn refine(&self, tree: &Tree) -> Tree {
        let rows: Vec<usize> = (0..self.rows.len()).collect();
        let probes: Vec<usize> = (0..self.probes.len()).collect();
        self.go(tree, &rows, &probes)
    }

    fn go(&self, tree: &Tree, rows: &[usize], probes: &[usize]) -> Tree {
        let Tree::Split { feature, threshold, left, right } = tree else {
            return tree.clone();
        };
        let p = self.problem;
        let (l_rows, r_rows): (Vec<usize>, Vec<usize>) =
            rows.iter().partition(|&&r| p.feature(*feature, r) <= *threshold);
        let (f, t) = if l_rows.is_empty() || r_rows.is_empty() {
            (*feature, *threshold)
        } else {
            self.best(rows, &l_rows, &r_rows, probes).unwrap_or((*feature, *threshold))
        };
        let (l_probes, r_probes): (Vec<usize>, Vec<usize>) =
            probes.iter().partition(|&&q| self.probe_values[f][q] <= t);
        Tree::Split {
            feature: f,
            threshold: t,
            left: Box::new(self.go(left, &l_rows, &l_probes)),
            right: Box::new(self.go(right, &r_rows, &r_probes)),
        }
    }

    /// Side (true = left) of each probe by its nearest row of the same layer among `rows`; None when the
    /// layer has no row here.
    fn labels(&self, rows: &[usize], left: &BTreeSet<usize>, probes: &[usize]) -> Vec<Option<bool>> {
        probes
            .iter()
            .map(|&q| {
                let ps = self.probes[q];
                let mut best: Option<(u32, u32, usize)> = None;
                for &r in rows {
                    let s = self.rows[r];
                    if s.n != ps.n || s.k != ps.k {
                        continue;
                    }
                    let d = s.m.abs_diff(ps.m);
                    if best.is_none_or(|(bd, bm, _)| d < bd || (d == bd && s.m < bm)) {
                        best = Some((d, s.m, r));
                    }
                }
                best.map(|(_, _, r)| left.contains(&r))
            })
            .collect()
    }

    /// The (feature, threshold) making the partition (`l_rows`, `r_rows`) of `rows` that agrees best with
    /// the probes' nearest-neighbour sides.
    fn best(&self, rows: &[usize], l_rows: &[usize], r_rows: &[usize], probes: &[usize]) -> Option<(usize, i64)> {
        let p = self.problem;
        let left: BTreeSet<usize> = l_rows.iter().copied().collect();
        let labels = self.labels(rows, &left, probes);
        let labelled: Vec<(usize, bool)> = probes.iter().zip(&labels).filter_map(|(&q, l)| l.map(|l| (q, l))).collect();
        let total_right = labelled.iter().filter(|(_, l)| !l).count();
        // Per feature: the most agreeing threshold (nearest the midpoint among equals); across features the
        // most agreeing one, the earlier feature on ties.
        let mut best: Option<(usize, usize, i64)> = None;
        for f in 0..p.num_features() {
            let lo = l_rows.iter().map(|&r| p.feature(f, r)).max()?;
            let hi = r_rows.iter().map(|&r| p.feature(f, r)).min()?;
            if lo >= hi {
                continue;
            }
            let mid = lo + (hi - lo) / 2;
            let mut vals: Vec<(i64, bool)> = labelled.iter().map(|&(q, l)| (self.probe_values[f][q], l)).collect();
            vals.sort_unstable();
            // Candidate thresholds: the midpoint, lo, and every probe value in [lo, hi).
            let mut cands: Vec<i64> = vec![lo, mid];
            cands.extend(vals.iter().map(|v| v.0).filter(|&v| v >= lo && v < hi));
            cands.sort_unstable();
            cands.dedup();
            let mut i = 0;
            let (mut left_ok, mut right_wrong) = (0usize, 0usize);
            let mut mine: Option<(usize, i64, i64)> = None;
            for t in cands {
                while i < vals.len() && vals[i].0 <= t {
                    if vals[i].1 {
                        left_ok += 1;
                    } else {
                        right_wrong += 1;
                    }
                    i += 1;
                }
                let agree = left_ok + (total_right - right_wrong);
                let dist = (t - mid).abs();
                if mine.is_none_or(|(ba, bd, _)| agree > ba || (agree == ba && dist < bd)) {
                    mine = Some((agree, dist, t));
                }
            }
            if let Some((agree, _, t)) = mine {
                if best.is_none_or(|(ba, _, _)| agree > ba) {
                    best = Some((agree, f, t));
                }
            }
        }
        best.map(|(_, f, t)| (f, t))
    }
}
