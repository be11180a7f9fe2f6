//! Split-K guards: keep a split-K leaf from reaching shapes whose grid already fills the machine.
//!
//! Split-K helps only while the output tiles leave compute units idle, and latency tables measure it only
//! there (elsewhere the cells are Missing). A leaf that picks instance `i` with split-K `s > 0` was
//! chosen on training shapes where that cell is usable, but its region may extend to shapes between the
//! training ones where the grid is already full. The training shapes themselves show where the cell
//! stops being usable along the instance's tile count `tiles = cdiv(M, BM) · cdiv(N, BN)`: between the
//! largest count where it is usable and the next larger count where it is not. When shapes on the far
//! side of that boundary can reach the leaf (probed over the training layers' (N, K) and a dense range of
//! M), the leaf becomes
//!
//! ```text
//! if (cdiv(tiles * 2^(s-1), CU) <= w) { i with split-K s } else { i without split-K }
//! ```
//!
//! with `w` the whole number of waves that falls in the gap (or `tiles <= midpoint` when none does).
//!
//! Training shapes of the leaf all lie below the boundary, so the guard never changes a training choice
//! it was fitted on; it costs one leaf and one level of depth, and is only added within the limits.

use std::collections::BTreeSet;

use crate::catalog::{Candidate, Catalog};
use crate::rule::{BinOp, CmpOp, Cond, Expr, Leaf, Node};
use crate::table::{LatencyMatrix, Shape};

use super::features::tiles_expr;

/// What the guards need to know about the training set.
pub struct Guards<'a> {
    matrix: &'a LatencyMatrix,
    catalog: &'a Catalog,
    train: &'a [usize],
    probes: Vec<Shape>,
    max_depth: usize,
}

/// Probe M values: every M up to 1024, then every 8th to 4096, every 64th to 65536.
fn probe_ms() -> Vec<u32> {
    (1..=1024).chain((1032..=4096).step_by(8)).chain((4160..=65536).step_by(64)).collect()
}

impl<'a> Guards<'a> {
    /// Guards fitted on the `train` shapes of `matrix`, within `max_depth`.
    pub fn new(matrix: &'a LatencyMatrix, catalog: &'a Catalog, train: &'a [usize], max_depth: usize) -> Guards<'a> {
        let layers: BTreeSet<(u32, u32)> = train.iter().map(|&s| (matrix.shapes[s].n, matrix.shapes[s].k)).collect();
        let ms = probe_ms();
        let probes = layers.iter().flat_map(|&(n, k)| ms.iter().map(move |&m| Shape::new(m, n, k))).collect();
        Guards { matrix, catalog, train, probes, max_depth }
    }

    fn tiles(bm: u32, bn: u32, s: &Shape) -> i64 {
        i64::from(s.m.div_ceil(bm)) * i64::from(s.n.div_ceil(bn))
    }

    /// The guard condition of `leaf`, from its usability on the training shapes along the instance's
    /// tile count: the boundary lies between the largest count where the cell is usable and the smallest
    /// larger count where it is not. When a whole number of waves of the split grid,
    /// `cdiv(tiles · 2^(s-1), CU) <= w`, falls in that gap, the guard is that (split-K pays while the
    /// grid leaves compute units idle); otherwise `tiles <= midpoint`.
    fn boundary(&self, leaf: Leaf) -> Option<Cond> {
        let col = self.matrix.candidate_index(&Candidate::new(leaf.kernel_id, leaf.split_k))?;
        self.matrix.candidate_index(&Candidate::new(leaf.kernel_id, 0))?;
        let (bm, bn, _) = self.catalog.legacy_by_id(leaf.kernel_id)?.tile();
        let tiles = |s: usize| Self::tiles(bm, bn, &self.matrix.shapes[s]);
        let usable_max = self.train.iter().filter(|&&s| self.matrix.us(s, col).is_some()).map(|&s| tiles(s)).max()?;
        let unusable_above = self
            .train
            .iter()
            .filter(|&&s| self.matrix.us(s, col).is_none())
            .map(|&s| tiles(s))
            .filter(|&t| t > usable_max)
            .min()?;
        let scale = 1i64 << (leaf.split_k.min(16) - 1);
        let cu = i64::from(self.matrix.cu_num.max(1));
        let waves = (usable_max * scale + cu - 1) / cu;
        if waves * cu < unusable_above * scale {
            let grid = Expr::bin(BinOp::Mul, tiles_expr(bm, bn), Expr::Lit(scale));
            let expr = if scale == 1 { tiles_expr(bm, bn) } else { grid };
            return Some(Cond::cmp(CmpOp::Le, Expr::bin(BinOp::CeilDiv, expr, Expr::Lit(cu)), Expr::Lit(waves)));
        }
        Some(Cond::cmp(CmpOp::Le, tiles_expr(bm, bn), Expr::Lit(usable_max + (unusable_above - usable_max) / 2)))
    }

    /// `node` with guards added; returns the node and the number of guards.
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
        if leaf.split_k == 0 || depth + 1 > self.max_depth {
            return Node::Leaf(leaf);
        }
        let Some(cond) = self.boundary(leaf) else {
            return Node::Leaf(leaf);
        };
        if reach.iter().all(|&p| {
            let s = &self.probes[p];
            cond.eval(s.m, s.n, s.k)
        }) {
            return Node::Leaf(leaf);
        }
        *added += 1;
        Node::Chain {
            branches: vec![(cond, Node::Leaf(leaf))],
            otherwise: Box::new(Node::Leaf(Leaf::new(leaf.kernel_id, 0))),
        }
    }
}
