//! Split-K guards: a split-K leaf returns its split only where the bench measures that split.
//!
//! `synth bench` measures split-K level `s >= 1` of an instance with tile `BM × BN × BK` on a shape only
//! where (see `measure::plan::split_levels`)
//!
//! ```text
//! cdiv(M, BM) · cdiv(N, BN) · 2^(s-1) < CU   and   K / BK >= 2^s      (cond(s))
//! ```
//!
//! (up to level 3; `--split-k aiter` measures AITER's tuner's levels, up to `catalog::MAX_SPLIT_K` = 5, and
//! each of them satisfies cond(s) too: AITER's grid condition `tiles · 2^s <= CU` is the stricter one, and
//! the harness needs the same whole KPerBLOCK step per split). Both halves are monotone in `s` (cond(s)
//! implies cond(s') for every s' < s), and level 0 is always measured. A leaf that picks instance `i` with split-K `s > 0` becomes the chain
//!
//! ```text
//! if (cond(s)) { i, s } else if (cond(s'))  { i, s' } ... else { i, 0 }
//! ```
//!
//! over `s` and those lower levels `s'` that some probe shape routed to the leaf would use (probes: the
//! training layers' (N, K) over a dense range of M). Whatever the intermediate levels, the chain only
//! returns a split where cond holds, so on any shape — of any model — the leaf returns a cell the bench
//! measures. The condition is written in the rule IR (cdiv, mul, comparisons), so the interpreter, the
//! C++ and the Rust dispatchers all keep it.
//!
//! The training shapes of a split-K leaf were usable there, so cond(s) holds on them and the guard never
//! changes a training choice. A guard costs at least one leaf and one level of depth; where even one level
//! of depth is not left, the leaf falls back to its instance without split-K (safe, but it may lose time).

use std::collections::BTreeSet;

use crate::catalog::{Candidate, Catalog};
use crate::rule::{BinOp, CmpOp, Cond, Expr, Leaf, Node, Var};
use crate::table::{LatencyMatrix, Shape};

use super::features::tiles_expr;

/// What the guards need to know: the catalog tiles, the CU count, probes and the depth limit.
pub struct Guards<'a> {
    catalog: &'a Catalog,
    cu_num: u32,
    probes: Vec<Shape>,
    max_depth: usize,
}

/// Probe M values: every M up to 1024, then every 8th to 4096, every 64th to 65536.
fn probe_ms() -> Vec<u32> {
    (1..=1024).chain((1032..=4096).step_by(8)).chain((4160..=65536).step_by(64)).collect()
}

/// The bench's measurement condition for split-K level `s >= 1` of a `bm × bn × bk` tile, as a rule
/// condition: `cdiv(M, bm) * cdiv(N, bn) * 2^(s-1) < cu && K >= bk * 2^s`.
pub fn measured_cond(bm: u32, bn: u32, bk: u32, s: u32, cu_num: u32) -> Cond {
    let scale = 1i64 << (s.clamp(1, 16) - 1);
    Cond::And(vec![
        Cond::cmp(CmpOp::Lt, grid(bm, bn, s), Expr::Lit(i64::from(cu_num.max(1)))),
        Cond::cmp(CmpOp::Ge, Expr::Var(Var::K), Expr::Lit(i64::from(bk) * (scale * 2))),
    ])
}

/// The grid a guard of level `s >= 1` compares with the CU count: `cdiv(M, bm) * cdiv(N, bn) * 2^(s-1)`.
fn grid(bm: u32, bn: u32, s: u32) -> Expr {
    let scale = 1i64 << (s.clamp(1, 16) - 1);
    if scale == 1 {
        tiles_expr(bm, bn)
    } else {
        Expr::bin(BinOp::Mul, tiles_expr(bm, bn), Expr::Lit(scale))
    }
}

/// Every grid the guards of `candidates` may compare (each split-K candidate's tile at its level and every
/// lower one), each once: the terms a rule with guards compares besides the variables and features.
pub fn guard_terms(candidates: &[Candidate], catalog: &Catalog) -> Vec<Expr> {
    let mut out: Vec<Expr> = Vec::new();
    for c in candidates.iter().filter(|c| c.split_k > 0 && c.backend.is_ck()) {
        let Some((bm, bn, _)) = catalog.legacy_by_id(c.kernel_id).map(|i| i.tile()) else { continue };
        for s in 1..=c.split_k {
            let g = grid(bm, bn, s);
            if !out.contains(&g) {
                out.push(g);
            }
        }
    }
    out
}

/// Whether the bench measures split-K level `s` of a `bm × bn × bk` tile on `shape` (level 0: always).
pub fn measured(shape: &Shape, bm: u32, bn: u32, bk: u32, s: u32, cu_num: u32) -> bool {
    s == 0 || measured_cond(bm, bn, bk, s, cu_num).eval(shape.m, shape.n, shape.k)
}

impl<'a> Guards<'a> {
    /// Guards for `matrix`'s CU count, probing the (N, K) of its `train` shapes, within `max_depth`.
    pub fn new(matrix: &'a LatencyMatrix, catalog: &'a Catalog, train: &[usize], max_depth: usize) -> Guards<'a> {
        let layers: BTreeSet<(u32, u32)> = train.iter().map(|&s| (matrix.shapes[s].n, matrix.shapes[s].k)).collect();
        let ms = probe_ms();
        let probes = layers.iter().flat_map(|&(n, k)| ms.iter().map(move |&m| Shape::new(m, n, k))).collect();
        Guards { catalog, cu_num: matrix.cu_num, probes, max_depth }
    }

    /// `node` with every split-K leaf guarded; returns the node and the number of guarded leaves.
    pub fn apply(&self, node: &Node) -> (Node, usize) {
        let all: Vec<usize> = (0..self.probes.len()).collect();
        let mut added = 0;
        let out = self.walk(node, &all, 0, &mut added);
        (out, added)
    }

    fn walk(&self, node: &Node, reach: &[usize], depth: usize, added: &mut usize) -> Node {
        match node {
            Node::Leaf(leaf) => self.guard_leaf(*leaf, reach, depth, added),
            Node::Chain { branches, otherwise } => {
                let mut rest: Vec<usize> = reach.to_vec();
                let mut out = Vec::with_capacity(branches.len());
                for (j, (cond, child)) in branches.iter().enumerate() {
                    let (take, keep): (Vec<usize>, Vec<usize>) = rest.iter().partition(|&&p| {
                        let s = &self.probes[p];
                        cond.eval(s.m, s.n, s.k)
                    });
                    out.push((cond.clone(), self.walk(child, &take, depth + j + 1, added)));
                    rest = keep;
                }
                let other = self.walk(otherwise, &rest, depth + branches.len(), added);
                Node::Chain { branches: out, otherwise: Box::new(other) }
            }
        }
    }

    fn guard_leaf(&self, leaf: Leaf, reach: &[usize], depth: usize, added: &mut usize) -> Node {
        if leaf.split_k == 0 {
            return Node::Leaf(leaf);
        }
        let Some(inst) = self.catalog.legacy_by_id(leaf.kernel_id).filter(|_| leaf.is_ck()) else {
            // Not a catalog instance: no tile to guard with; never measured with a split either.
            return Node::Leaf(leaf.with_split(0));
        };
        let (bm, bn, bk) = inst.tile();
        let cu = self.cu_num;
        *added += 1;
        if depth + 1 > self.max_depth {
            return Node::Leaf(leaf.with_split(0));
        }
        // The top level, then each lower level that a probe failing every higher level would use.
        let mut levels = vec![leaf.split_k];
        let mut rest: Vec<&Shape> =
            reach.iter().map(|&p| &self.probes[p]).filter(|s| !measured(s, bm, bn, bk, leaf.split_k, cu)).collect();
        for s in (1..leaf.split_k).rev() {
            if depth + levels.len() + 1 > self.max_depth {
                break;
            }
            let (hit, miss): (Vec<&Shape>, Vec<&Shape>) =
                rest.into_iter().partition(|p| measured(p, bm, bn, bk, s, cu));
            if !hit.is_empty() {
                levels.push(s);
            }
            rest = miss;
        }
        Node::Chain {
            branches: levels
                .into_iter()
                .map(|s| (measured_cond(bm, bn, bk, s, cu), Node::Leaf(leaf.with_split(s))))
                .collect(),
            otherwise: Box::new(Node::Leaf(leaf.with_split(0))),
        }
    }
}
