//! Candidate split features: integer expressions over M, N, K (rule [`Expr`]s, so a split renders to
//! C++ and Rust and the interpreter evaluates it exactly as the generated code does).
//!
//! Besides the raw dimensions, the machine-fill features describe how a shape occupies the device for
//! each distinct output tile `BM × BN` of the candidate instances:
//! - `tiles(BM×BN)  = cdiv(M, BM) * cdiv(N, BN)` — workgroups of one K pass;
//! - `waves(BM×BN)  = cdiv(tiles, CU)` — rounds of workgroups over the `CU` compute units;
//! - `steps(BM×BN)  = waves * cdiv(K, BK)` — K-loop iterations the busiest compute unit runs
//!   (`BK` the tile's KPerBlock), a latency estimate that is comparable across layers;
//! - for each split-K `s` present: `waves(BM×BN, sk s) = cdiv(tiles * 2^s, CU)` and
//!   `steps(BM×BN, sk s) = cdiv(tiles * 2^s, CU) * cdiv(cdiv(K, 2^s), BK)` — the same with K cut in 2^s parts.
//!
//! plus `M*N` (output size) and `M*N*K` (work).

use std::collections::BTreeSet;

use crate::catalog::{Candidate, Catalog};
use crate::rule::ir::build::{cdiv, lit, mul, var};
use crate::rule::{BinOp, Expr, Var};

/// A named split feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feature {
    /// Short human-readable name (e.g. `waves(16x64)`).
    pub name: String,
    /// The expression a split compares against an integer threshold.
    pub expr: Expr,
}

impl Feature {
    fn new(name: impl Into<String>, expr: Expr) -> Feature {
        Feature { name: name.into(), expr }
    }

    /// Value at (M, N, K), with the rule interpreter's semantics.
    pub fn eval(&self, m: u32, n: u32, k: u32) -> i64 {
        self.expr.eval(m, n, k)
    }
}

/// Which features the synthesizer may split on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum FeatureSet {
    /// M, N and K only.
    Raw,
    /// M, N, K, M*N, M*N*K and the machine-fill features of every tile and split-K.
    #[default]
    Machine,
    /// The machine features plus, for every pair of distinct tiles `a`, `b`, `waves(a) - waves(b)`: which
    /// tile fills the compute units in fewer rounds, a comparison that carries over between layers.
    Contrast,
}

/// The raw dimensions: M, N, K.
pub fn raw() -> Vec<Feature> {
    vec![Feature::new("M", var(Var::M)), Feature::new("N", var(Var::N)), Feature::new("K", var(Var::K))]
}

/// Output tiles of a shape for a `bm × bn` tile: `cdiv(M, bm) * cdiv(N, bn)`.
pub fn tiles_expr(bm: u32, bn: u32) -> Expr {
    mul(cdiv(var(Var::M), lit(bm.into())), cdiv(var(Var::N), lit(bn.into())))
}

/// Machine-fill features for the given tiles `(BM, BN, BK)`, split-K values and compute-unit count.
///
/// Order (it is the preference order among features that split the training shapes identically):
/// M, N, K, then per tile `waves`, per tile and split-K `waves(.., sk s)`, `steps`, then `tiles`, then
/// `M*N` and `M*N*K`. Duplicate tiles are skipped; split-K 0 is implied.
pub fn machine(tiles: &[(u32, u32, u32)], split_ks: &[u32], cu_num: u32) -> Vec<Feature> {
    let cu = lit(i64::from(cu_num.max(1)));
    let split_ks: Vec<u32> =
        split_ks.iter().copied().filter(|&s| s > 0 && s < 16).collect::<BTreeSet<_>>().into_iter().collect();
    let mut mn: Vec<(u32, u32)> = Vec::new();
    let mut mnk: Vec<(u32, u32, u32)> = Vec::new();
    for &(bm, bn, bk) in tiles {
        if !mn.contains(&(bm, bn)) {
            mn.push((bm, bn));
        }
        if !mnk.contains(&(bm, bn, bk)) {
            mnk.push((bm, bn, bk));
        }
    }
    let waves = |bm: u32, bn: u32, s: u32| cdiv(mul(tiles_expr(bm, bn), lit(1i64 << s)), cu.clone());
    let waves0 = |bm: u32, bn: u32| cdiv(tiles_expr(bm, bn), cu.clone());
    let mut out = raw();
    for &(bm, bn) in &mn {
        out.push(Feature::new(format!("waves({bm}x{bn})"), waves0(bm, bn)));
    }
    for &s in &split_ks {
        for &(bm, bn) in &mn {
            out.push(Feature::new(format!("waves({bm}x{bn}, sk{s})"), waves(bm, bn, s)));
        }
    }
    for &(bm, bn, bk) in &mnk {
        let k_steps = cdiv(var(Var::K), lit(bk.into()));
        out.push(Feature::new(format!("steps({bm}x{bn}x{bk})"), mul(waves0(bm, bn), k_steps)));
        for &s in &split_ks {
            let k_steps = cdiv(cdiv(var(Var::K), lit(1i64 << s)), lit(bk.into()));
            out.push(Feature::new(format!("steps({bm}x{bn}x{bk}, sk{s})"), mul(waves(bm, bn, s), k_steps)));
        }
    }
    for &(bm, bn) in &mn {
        out.push(Feature::new(format!("tiles({bm}x{bn})"), tiles_expr(bm, bn)));
    }
    out.push(Feature::new("M*N", mul(var(Var::M), var(Var::N))));
    out.push(Feature::new("M*N*K", mul(mul(var(Var::M), var(Var::N)), var(Var::K))));
    out
}

/// The feature set for a latency matrix's candidates: tiles of their catalog instances (candidates the
/// catalog does not know are skipped; they contribute no tile), the matrix's split-K values and `cu_num`.
pub fn for_candidates(set: FeatureSet, candidates: &[Candidate], catalog: &Catalog, cu_num: u32) -> Vec<Feature> {
    match set {
        FeatureSet::Raw => raw(),
        FeatureSet::Machine | FeatureSet::Contrast => {
            let mut tiles = Vec::new();
            let mut kernels = BTreeSet::new();
            for c in candidates {
                if kernels.insert(c.kernel_id) {
                    if let Some(inst) = catalog.legacy_by_id(c.kernel_id).filter(|_| c.backend.is_ck()) {
                        tiles.push(inst.tile());
                    }
                }
            }
            let split_ks: Vec<u32> =
                candidates.iter().map(|c| c.split_k).collect::<BTreeSet<_>>().into_iter().collect();
            let mut out = machine(&tiles, &split_ks, cu_num);
            if set == FeatureSet::Contrast {
                out.extend(wave_contrasts(&tiles, cu_num));
            }
            out
        }
    }
}

/// `waves(a) - waves(b)` for every pair of distinct output tiles `a` before `b` (in the order given).
pub fn wave_contrasts(tiles: &[(u32, u32, u32)], cu_num: u32) -> Vec<Feature> {
    let cu = lit(i64::from(cu_num.max(1)));
    let mut mn: Vec<(u32, u32)> = Vec::new();
    for &(bm, bn, _) in tiles {
        if !mn.contains(&(bm, bn)) {
            mn.push((bm, bn));
        }
    }
    let waves = |(bm, bn): (u32, u32)| cdiv(tiles_expr(bm, bn), cu.clone());
    let mut out = Vec::new();
    for (i, &a) in mn.iter().enumerate() {
        for &b in &mn[i + 1..] {
            out.push(Feature::new(
                format!("waves({}x{}) - waves({}x{})", a.0, a.1, b.0, b.1),
                Expr::bin(BinOp::Sub, waves(a), waves(b)),
            ));
        }
    }
    out
}
