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

use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;

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

/// The largest M of a table that [`compress`], [`prove`] and [`target_rows`] accept: they check every M
/// from 1 to the table's largest, one at a time (time grows with it, memory does not), and the rule is
/// trained on one row per fine-padding step up to it. AITER's own tuned tables stop at M = 80000.
pub const MAX_M: u32 = 1 << 20;

/// Refuses rows whose M is above [`MAX_M`], naming the first one (file and line).
pub fn check_max_m(rows: &[crate::tuned::TunedRow], file: &str) -> anyhow::Result<()> {
    match rows.iter().filter(|r| r.shape.m > MAX_M).min_by_key(|r| r.line) {
        None => Ok(()),
        Some(r) => anyhow::bail!(
            "{}:{}: M = {} is above {MAX_M}, the largest M compression proves: every M from 1 to the table's \
             largest is checked (AITER's tuned tables stop at 80000); leave the row out or split it into its own table",
            synth_base::sanitize::shown(file),
            r.line,
            r.shape.m
        ),
    }
}

/// (N, K) pairs of a table and its largest M.
fn layers_and_max_m(table: &TunedTable) -> (Vec<(u32, u32)>, u32) {
    let layers: BTreeSet<(u32, u32)> = table.shapes().map(|s| (s.n, s.k)).collect();
    let max_m = table.shapes().map(|s| s.m).max().unwrap_or(0);
    (layers.into_iter().collect(), max_m)
}

/// Compares AITER's lookup on `full` with the compressed lookup (`residual`, then `rule`) for every (N, K)
/// of `full` and every M from 1 to its largest M, one M at a time (nothing is kept per M).
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

/// The queries `q` in `1..=max_m` with `f(q) == r`, for a non-decreasing `f` (both paddings are): one range
/// of M, or none.
fn preimage(f: impl Fn(u32) -> u32, r: u32, max_m: u32) -> Option<RangeInclusive<u32>> {
    // The first q in 1..=max_m with pred(q), or max_m + 1 (pred is false, then true, along q).
    let first = |pred: &dyn Fn(u32) -> bool| {
        let (mut lo, mut hi) = (1u64, u64::from(max_m) + 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(mid as u32) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    };
    let lo = first(&|q| f(q) >= r);
    let hi = first(&|q| f(q) > r) - 1;
    (lo <= hi && f(lo as u32) == r).then_some(lo as u32..=hi as u32)
}

/// One (N, K) of the full table, the lookups [`compress`] compares, computed per query (no per-M table).
struct Layer<'a> {
    n: u32,
    k: u32,
    max_m: u32,
    /// The full table's rows of this (N, K).
    rows: TunedTable,
    rule: &'a Rule,
    catalog: &'a Catalog,
    default: Candidate,
}

impl Layer<'_> {
    /// AITER's answer on the full table.
    fn target(&self, q: u32) -> Choice {
        full_choice(&self.rows, self.default, q, self.n, self.k)
    }

    /// The compressed answer with `residual` (the rule on a miss).
    fn answer(&self, residual: &TunedTable, q: u32) -> Choice {
        compressed_choice(residual, self.rule, self.catalog, q, self.n, self.k)
    }

    /// The queries whose padding chain (M, fine(M), coarse(M)) contains the row at `m`: at most three
    /// ranges of M, disjoint and ascending.
    fn dependents(&self, m: u32) -> Vec<RangeInclusive<u32>> {
        let n = self.n;
        let mut ranges: Vec<RangeInclusive<u32>> = [Some(m..=m), preimage(pad_fine, m, self.max_m)]
            .into_iter()
            .chain([preimage(|q| pad_coarse(q, n), m, self.max_m)])
            .flatten()
            .collect();
        ranges.sort_by_key(|r| *r.start());
        let mut merged: Vec<RangeInclusive<u32>> = Vec::new();
        for r in ranges {
            match merged.last_mut() {
                Some(last) if *r.start() <= last.end().saturating_add(1) => {
                    *last = *last.start()..=(*last.end()).max(*r.end());
                }
                _ => merged.push(r),
            }
        }
        merged
    }

    /// Whether some query pads coarse to `m` (a power of two, or 8192 for N > 4096).
    fn is_coarse_target(&self, m: u32) -> bool {
        preimage(|q| pad_coarse(q, self.n), m, self.max_m).is_some()
    }
}

/// The rows (shapes) of `full` to keep so that the residual with `rule` is lossless (see the module
/// documentation). Every row the rule cannot reproduce on a query that needs it stays. Memory is
/// proportional to the rows; time to the rows times the M values their padding serves.
pub fn compress(full: &TunedTable, rule: &Rule, catalog: &Catalog) -> BTreeSet<Shape> {
    let (layers, max_m) = layers_and_max_m(full);
    let default = Candidate::new(catalog.default_alias, 0);
    let kept: Vec<Vec<Shape>> = layers
        .par_iter()
        .map(|&(n, k)| {
            let mut rows = TunedTable::new(&full.source);
            let mut ms: Vec<u32> = Vec::new();
            for s in full.shapes().filter(|s| s.n == n && s.k == k) {
                rows.insert(s, full.get(s.m, n, k).expect("a shape of the table"));
                ms.push(s.m);
            }
            let layer = Layer { n, k, max_m, rows, rule, catalog, default };
            let (targets, late): (Vec<u32>, Vec<u32>) = ms.iter().partition(|&&m| layer.is_coarse_target(m));
            let orders = [
                late.iter().chain(&targets).copied().collect::<Vec<u32>>(),
                targets.iter().chain(&late).copied().collect::<Vec<u32>>(),
            ];
            let mut best: Option<Vec<u32>> = None;
            for order in &orders {
                let kept = greedy(&layer, order);
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
fn greedy(layer: &Layer, order: &[u32]) -> Vec<u32> {
    let (n, k) = (layer.n, layer.k);
    let mut res = layer.rows.clone();
    loop {
        let mut changed = false;
        for &m in order {
            let Some(e) = res.remove(Shape::new(m, n, k)) else { continue };
            let ok = layer.dependents(m).into_iter().flatten().all(|q| layer.answer(&res, q) == layer.target(q));
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

/// The M values AITER's fine padding produces from 1 up to `max_m`, ascending (each once).
fn fine_grid(max_m: u32) -> Vec<u32> {
    let mut grid = Vec::new();
    let mut m = 0;
    while m < max_m {
        // Every q in m+1..=pad_fine(m+1) pads to pad_fine(m+1).
        m = pad_fine(m + 1);
        grid.push(m);
    }
    grid
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
    let grid = fine_grid(max_m);
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

    /// The ranges of M each row serves are exactly the queries whose padding chain holds it, counted one
    /// M at a time (both coarse rules: N <= 4096 and N > 4096, where M > 8192 pads to 8192).
    #[test]
    fn dependents_are_the_queries_whose_chain_holds_the_row() {
        let cat = Catalog::embedded();
        let r = rule("return kernel(0);");
        for (n, max_m) in [(512u32, 300u32), (512, 1), (512, 1025), (5120, 20000), (5120, 8192), (4096, 9000)] {
            let layer = Layer {
                n,
                k: 512,
                max_m,
                rows: TunedTable::new("t"),
                rule: &r,
                catalog: &cat,
                default: Candidate::new(cat.default_alias, 0),
            };
            let rows = [1u32, 2, 16, 17, 48, 256, 288, 300, 1024, 1088, 4096, 8192, 8193, 16384, 20000];
            for m in rows.into_iter().filter(|&m| m <= max_m) {
                let brute: Vec<u32> =
                    (1..=max_m).filter(|&q| q == m || pad_fine(q) == m || pad_coarse(q, n) == m).collect();
                let ranges: Vec<u32> = layer.dependents(m).into_iter().flatten().collect();
                assert_eq!(ranges, brute, "N={n} max M={max_m} row {m}");
                let coarse = (1..=max_m).any(|q| pad_coarse(q, n) == m);
                assert_eq!(layer.is_coarse_target(m), coarse, "N={n} max M={max_m} row {m}");
            }
        }
    }

    #[test]
    fn fine_grid_is_every_fine_padding_once() {
        for max_m in [0u32, 1, 15, 16, 17, 256, 257, 1024, 1025, 4096, 4097, 20000] {
            let brute: Vec<u32> = (1..=max_m).map(pad_fine).collect::<BTreeSet<_>>().into_iter().collect();
            assert_eq!(fine_grid(max_m), brute, "max M {max_m}");
        }
    }

    #[test]
    fn an_m_above_the_limit_is_refused_naming_its_line() {
        let row = |m: u32, line: usize| crate::tuned::TunedRow {
            shape: Shape::new(m, 512, 512),
            entry: entry(0),
            us: 1.0,
            line,
        };
        assert!(check_max_m(&[row(MAX_M, 2)], "t.csv").is_ok());
        let err = check_max_m(&[row(16, 2), row(MAX_M + 1, 9), row(1 << 24, 4)], "t.csv").unwrap_err().to_string();
        assert!(err.starts_with("t.csv:4: M = 16777216 is above 1048576"), "{err}");
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
