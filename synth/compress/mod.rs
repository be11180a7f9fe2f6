//! Lossless compression of a tuned table into a rule plus a residual table.
//!
//! AITER looks a shape up in its tuned table by exact M, then M padded fine, then M padded coarse
//! ([`TunedTable::lookup_aiter`]), and runs its default kernel on a miss. The compressed form is a subset
//! of the rows (the residual) looked up the same way, with a rule evaluated on a miss instead of the
//! default. It is lossless when, for every (N, K) of the table and every M from 1 to the table's largest
//! M, both return the same (kernel, splitK) ([`prove`] checks exactly that, exhaustively).
//!
//! Removing a row changes where other M values pad to: the queries whose padding chain (M, fine(M),
//! coarse(M)) contains the row fall through to the next row of their chain, or to the rule. [`compress`]
//! therefore removes rows greedily, one at a time, keeping a removal only when every query whose chain
//! contains the row still gets its full-table answer, and repeats passes until no row can go (a removal
//! can make an earlier one possible: its queries then reach the rule instead of a disagreeing row). It
//! runs two orders per (N, K) — coarse-padding targets (powers of two, and 8192 for N > 4096) last, and
//! first — and keeps the smaller residual. Layers are independent (a lookup never leaves its (N, K)).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rayon::prelude::*;

use crate::catalog::{Candidate, Catalog};
use crate::compare::{pad_coarse, pad_fine, TunedEntry, TunedTable};
use crate::rule::Rule;
use crate::table::Shape;
use crate::tuned::leaf_candidate;

/// A lookup's answer: the kernel and split-K, and whether it is a CK legacy kernel.
pub type Choice = (Candidate, bool);

fn choice(e: TunedEntry) -> Choice {
    (e.candidate, e.legacy)
}

/// AITER's answer on the full table: its row after padding, else the default kernel.
pub fn full_choice(table: &TunedTable, default: Candidate, m: u32, n: u32, k: u32) -> Choice {
    table.lookup_aiter(m, n, k).map_or((default, true), |(e, _)| choice(e))
}

/// The compressed answer: the residual's row after padding, else the rule.
pub fn compressed_choice(residual: &TunedTable, rule: &Rule, catalog: &Catalog, m: u32, n: u32, k: u32) -> Choice {
    residual
        .lookup_aiter(m, n, k)
        .map_or_else(|| (leaf_candidate(&rule.eval(m, n, k), catalog), true), |(e, _)| choice(e))
}

/// One query where the compressed form differs from the full table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mismatch {
    pub shape: Shape,
    pub full: Choice,
    pub compressed: Choice,
}

/// The result of an exhaustive check.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Proof {
    /// (N, K) pairs of the full table.
    pub layers: usize,
    /// Largest M of the full table (every M in 1..=max_m is checked).
    pub max_m: u32,
    /// Lookups compared (layers × max_m).
    pub lookups: u64,
    /// Queries that differ, and the first few of them (ascending (N, K, M)).
    pub mismatches: u64,
    pub first_mismatches: Vec<Mismatch>,
}

impl Proof {
    /// Whether every lookup agreed.
    pub fn holds(&self) -> bool {
        self.mismatches == 0
    }
}

/// (N, K) pairs of a table and its largest M.
fn layers_and_max_m(table: &TunedTable) -> (Vec<(u32, u32)>, u32) {
    let layers: BTreeSet<(u32, u32)> = table.shapes().map(|s| (s.n, s.k)).collect();
    let max_m = table.shapes().map(|s| s.m).max().unwrap_or(0);
    (layers.into_iter().collect(), max_m)
}

/// Compares AITER's lookup on `full` with the compressed lookup (`residual`, then `rule`) for every (N, K)
/// of `full` and every M from 1 to its largest M.
pub fn prove(full: &TunedTable, residual: &TunedTable, rule: &Rule, catalog: &Catalog) -> Proof {
    let (layers, max_m) = layers_and_max_m(full);
    let default = Candidate::new(catalog.default_alias, 0);
    let per_layer: Vec<(u64, Vec<Mismatch>)> = layers
        .par_iter()
        .map(|&(n, k)| {
            let (mut count, mut first) = (0u64, Vec::new());
            for m in 1..=max_m {
                let f = full_choice(full, default, m, n, k);
                let c = compressed_choice(residual, rule, catalog, m, n, k);
                if f != c {
                    count += 1;
                    if first.len() < 10 {
                        first.push(Mismatch { shape: Shape::new(m, n, k), full: f, compressed: c });
                    }
                }
            }
            (count, first)
        })
        .collect();
    let mismatches = per_layer.iter().map(|(c, _)| c).sum();
    let first_mismatches = per_layer.into_iter().flat_map(|(_, f)| f).take(10).collect();
    Proof { layers: layers.len(), max_m, lookups: layers.len() as u64 * u64::from(max_m), mismatches, first_mismatches }
}

/// The rows (shapes) of `full` to keep so that the residual with `rule` is lossless (see the module
/// documentation). Every row the rule cannot reproduce on a query that needs it stays.
pub fn compress(full: &TunedTable, rule: &Rule, catalog: &Catalog) -> BTreeSet<Shape> {
    let (layers, max_m) = layers_and_max_m(full);
    let default = Candidate::new(catalog.default_alias, 0);
    let kept: Vec<Vec<Shape>> = layers
        .par_iter()
        .map(|&(n, k)| {
            let mut layer = TunedTable::new(&full.source);
            let mut rows: Vec<u32> = Vec::new();
            for s in full.shapes().filter(|s| s.n == n && s.k == k) {
                layer.insert(s, full.get(s.m, n, k).expect("a shape of the table"));
                rows.push(s.m);
            }
            let target: Vec<Choice> = (0..=max_m).map(|m| full_choice(full, default, m.max(1), n, k)).collect();
            let rule_at: Vec<Choice> =
                (0..=max_m).map(|m| (leaf_candidate(&rule.eval(m.max(1), n, k), catalog), true)).collect();
            // Queries whose padding chain contains each row.
            let mut deps: HashMap<u32, Vec<u32>> = HashMap::new();
            for q in 1..=max_m {
                let mut chain = [q, pad_fine(q), pad_coarse(q, n)];
                chain.sort_unstable();
                let mut last = 0;
                for key in chain {
                    if key != last && layer.get(key, n, k).is_some() {
                        deps.entry(key).or_default().push(q);
                    }
                    last = key;
                }
            }
            let coarse: BTreeSet<u32> = (1..=max_m).map(|q| pad_coarse(q, n)).collect();
            let (targets, late): (Vec<u32>, Vec<u32>) = rows.iter().partition(|m| coarse.contains(m));
            let orders = [
                late.iter().chain(&targets).copied().collect::<Vec<u32>>(),
                targets.iter().chain(&late).copied().collect::<Vec<u32>>(),
            ];
            let mut best: Option<Vec<u32>> = None;
            for order in &orders {
                let kept = greedy(&layer, order, &deps, n, k, &target, &rule_at);
                if best.as_ref().is_none_or(|b| kept.len() < b.len()) {
                    best = Some(kept);
                }
            }
            best.unwrap_or_default().into_iter().map(|m| Shape::new(m, n, k)).collect()
        })
        .collect();
    kept.into_iter().flatten().collect()
}

/// Greedy removal over `order` until a pass removes nothing; returns the M values kept.
fn greedy(
    layer: &TunedTable,
    order: &[u32],
    deps: &HashMap<u32, Vec<u32>>,
    n: u32,
    k: u32,
    target: &[Choice],
    rule_at: &[Choice],
) -> Vec<u32> {
    let mut res = layer.clone();
    let answer = |res: &TunedTable, q: u32| res.lookup_aiter(q, n, k).map_or(rule_at[q as usize], |(e, _)| choice(e));
    loop {
        let mut changed = false;
        for &m in order {
            let Some(e) = res.remove(Shape::new(m, n, k)) else { continue };
            let ok = deps.get(&m).is_none_or(|qs| qs.iter().all(|&q| answer(&res, q) == target[q as usize]));
            if ok {
                changed = true;
            } else {
                res.insert(Shape::new(m, n, k), e);
            }
        }
        if !changed {
            break;
        }
    }
    res.shapes().map(|s| s.m).collect()
}

/// The full table's answers as training rows for a compression rule: for every (N, K) and every M that
/// AITER's fine padding produces from 1 up to the table's largest M, AITER's answer on the full table (its
/// row, or the default kernel where the table misses). On a table that holds every fine-padding M these are
/// exactly its rows; where it has gaps, the rule also learns the default kernel AITER runs there, without
/// which no residual is lossless. A row's `us` is its weight for [`crate::tuned::AgreeWeight::Time`]: 1 where
/// the table has a row, and the number of fine-padding M values (an upper bound on the residual rows one
/// wrong answer elsewhere can cost) where it misses, since a rule that differs there can never be made
/// lossless by any residual.
pub fn target_rows(full: &TunedTable, catalog: &Catalog) -> Vec<crate::tuned::TunedRow> {
    let (layers, max_m) = layers_and_max_m(full);
    let default = Candidate::new(catalog.default_alias, 0);
    let grid: BTreeSet<u32> = (1..=max_m).map(pad_fine).collect();
    let mut out = Vec::new();
    for (n, k) in layers {
        for &m in &grid {
            let (candidate, legacy) = full_choice(full, default, m, n, k);
            let miss = full.lookup_aiter(m, n, k).is_none();
            out.push(crate::tuned::TunedRow {
                shape: Shape::new(m, n, k),
                entry: TunedEntry { candidate, legacy },
                us: if miss { grid.len() as f64 } else { 1.0 },
                line: 0,
            });
        }
    }
    out
}

/// Residual rows per (N, K): (rows of the layer, rows kept).
pub fn per_layer_counts(full: &TunedTable, kept: &BTreeSet<Shape>) -> BTreeMap<(u32, u32), (usize, usize)> {
    let mut out: BTreeMap<(u32, u32), (usize, usize)> = BTreeMap::new();
    for s in full.shapes() {
        let e = out.entry((s.n, s.k)).or_default();
        e.0 += 1;
        e.1 += usize::from(kept.contains(&s));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kid: i32) -> TunedEntry {
        TunedEntry { candidate: Candidate::new(kid, 0), legacy: true }
    }

    fn rule(text: &str) -> Rule {
        crate::rule::parse_any(text, &Catalog::embedded()).unwrap()
    }

    /// A hand-made table of one layer (N = 512, K = 512, so coarse padding is the next power of two) with
    /// rows M = 16, 32, 48, 64, 128: 16 → #8, 32 → #8, 48 → #3, 64 → #0, 128 → #0. Rule: M <= 32 → #8,
    /// else #0. Queries M = 1..=128.
    ///
    /// By hand: row 16 (#8) and 32 (#8) agree with the rule on their queries (1..=16 pad to 16, 17..=32 to
    /// 32); if 16 goes, M = 1..=15 pad coarse to 1, 2, 4, 8, 16 — absent — and reach the rule (#8), and M = 16
    /// likewise: fine. Row 64 and 128 (#0) agree with the rule on 49..=64 and 65..=128 (fine padding: 16s up
    /// to 256). Row 48 (#3) must stay: its queries 33..=48 would fall to coarse 64 (#0 while 64 is kept,
    /// the rule's #0 otherwise), never #3. Residual: exactly {48}.
    #[test]
    fn hand_made_table_keeps_only_the_row_the_rule_misses() {
        let cat = Catalog::embedded();
        let mut full = TunedTable::new("hand");
        for (m, kid) in [(16, 8), (32, 8), (48, 3), (64, 0), (128, 0)] {
            full.insert(Shape::new(m, 512, 512), entry(kid));
        }
        let r = rule("if (M <= 32) { return kernel(8); } return kernel(0);");
        let kept = compress(&full, &r, &cat);
        assert_eq!(kept.into_iter().collect::<Vec<_>>(), vec![Shape::new(48, 512, 512)]);
        let mut residual = TunedTable::new("residual");
        residual.insert(Shape::new(48, 512, 512), entry(3));
        let p = prove(&full, &residual, &r, &cat);
        assert!(p.holds(), "{p:?}");
        assert_eq!((p.layers, p.max_m, p.lookups), (1, 128, 128));
    }

    /// The padding chain matters: with rule "always #0", row 64 (#8) serves M = 49..=64 by fine padding and,
    /// once row 48 (#8) is gone, also M = 33..=48 by coarse padding (next power of two: 64). Row 16 (#0)
    /// and 32 (#0) go (the rule gives #0), row 48 can go because 64 is kept, and 64 must stay.
    #[test]
    fn rows_that_padding_reaches_serve_removed_neighbours() {
        let cat = Catalog::embedded();
        let mut full = TunedTable::new("hand");
        for (m, kid) in [(16, 0), (32, 0), (48, 8), (64, 8)] {
            full.insert(Shape::new(m, 512, 512), entry(kid));
        }
        let r = rule("return kernel(0);");
        let kept = compress(&full, &r, &cat);
        assert_eq!(kept.into_iter().collect::<Vec<_>>(), vec![Shape::new(64, 512, 512)]);
        let mut residual = TunedTable::new("residual");
        residual.insert(Shape::new(64, 512, 512), entry(8));
        assert!(prove(&full, &residual, &r, &cat).holds());
        // Without row 64 the proof fails on exactly M = 33..=64 (16 + 16 queries) and names the first.
        let empty = TunedTable::new("empty");
        let p = prove(&full, &empty, &r, &cat);
        assert_eq!(p.mismatches, 32);
        assert_eq!(p.first_mismatches[0].shape, Shape::new(33, 512, 512));
        assert_eq!(p.first_mismatches[0].full, (Candidate::new(8, 0), true));
        assert_eq!(p.first_mismatches[0].compressed, (Candidate::new(0, 0), true));
    }

    /// M beyond every row with N <= 4096 pads coarse to a power of two that is not a row: the full table
    /// misses and AITER runs its default kernel, so the rule must return the default there, or the proof
    /// fails.
    #[test]
    fn a_full_table_miss_means_the_default_kernel() {
        let cat = Catalog::embedded();
        let mut full = TunedTable::new("hand");
        full.insert(Shape::new(16, 512, 512), entry(0));
        full.insert(Shape::new(48, 512, 512), entry(0));
        // M = 33..=48: fine → 48. M = 17..=32: fine 32 absent, coarse 32 absent → default (#7 via the alias).
        let default = Candidate::new(cat.default_alias, 0);
        assert_eq!(full_choice(&full, default, 20, 512, 512), (default, true));
        let r = rule("return kernel(0);");
        let p = prove(&full, &full, &r, &cat);
        assert_eq!(p.mismatches, 16, "{p:?}");
        let r2 = rule("if (M <= 16) { return kernel(0); } if (M <= 32) { return kernel(-1); } return kernel(0);");
        let kept = compress(&full, &r2, &cat);
        assert!(kept.is_empty());
        assert!(prove(&full, &TunedTable::new("empty"), &r2, &cat).holds());
    }
}
