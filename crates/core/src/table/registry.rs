//! The candidate registry a synthesized rule may choose from: CK legacy instances only.
//!
//! The C++ dispatcher gemm-synth writes (`a8w8_blockscale_heuristic_dispatch`) is called by AITER's
//! `gemm_a8w8_blockscale` CK entry point, which AITER uses for every shape its tuned CSV does not list, and
//! returns instance templates of the legacy registry. CK-tile kernels are reached only through AITER's
//! separate `gemm_a8w8_blockscale_cktile` entry point, chosen per shape in Python from a tuned CSV row with
//! `libtype` cktile. A rule that returned a CK-tile instance would need that routing inside the C++
//! dispatcher, which AITER does not have; so tables with CK-tile rows (an AITER profile measured with
//! `--libtype both`) are filtered to their legacy rows before synthesis, comparison and drift checks, with a
//! message that says what was left out and how much faster CK-tile was where it won.

use std::collections::{BTreeMap, BTreeSet};

use super::{AiterRow, Cell, Shape};

/// What the legacy filter removed from a table.
#[derive(Debug, Clone, PartialEq)]
pub struct CkTileLeftOut {
    /// CK-tile rows removed (rechecks included).
    pub rows: usize,
    /// Distinct CK-tile kernels (kernelId, splitK) among them.
    pub kernels: usize,
    /// Shapes on which the fastest valid CK-tile cell beats the fastest valid legacy cell, with the
    /// legacy/CK-tile time ratio (> 1).
    pub faster: Vec<(Shape, f64)>,
}

impl CkTileLeftOut {
    /// The message printed when a table is loaded.
    pub fn message(&self, file: &str) -> String {
        let mut msg = format!(
            "{file}: {} CK-tile rows ({} kernel/split-K candidates) left out: the C++ dispatcher chooses among CK \
             legacy instances (AITER's gemm_a8w8_blockscale entry point); CK-tile kernels run only through AITER's \
             gemm_a8w8_blockscale_cktile entry point, selected per shape by a tuned CSV row",
            self.rows, self.kernels
        );
        if self.faster.is_empty() {
            msg.push_str("; no shape has a CK-tile kernel faster than the best legacy one");
        } else {
            let (worst, ratio) = self.faster.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1)).expect("non-empty");
            msg.push_str(&format!(
                "; on {} shapes a CK-tile kernel is faster than every legacy one (up to {:.1}% at {worst}): list those \
                 shapes in AITER's tuned CSV with libtype cktile",
                self.faster.len(),
                (ratio - 1.0) * 100.0
            ));
        }
        msg
    }
}

/// Splits rows into the legacy rows and a summary of the CK-tile rows (None when there are none).
pub fn legacy_rows(rows: Vec<AiterRow>) -> (Vec<AiterRow>, Option<CkTileLeftOut>) {
    let (legacy, cktile): (Vec<AiterRow>, Vec<AiterRow>) =
        rows.into_iter().partition(|r| r.libtype == crate::catalog::Libtype::Ck);
    if cktile.is_empty() {
        return (legacy, None);
    }
    let best = |rows: &[AiterRow]| {
        let mut m: BTreeMap<Shape, f64> = BTreeMap::new();
        for r in rows.iter().filter(|r| !r.is_recheck()) {
            if let Cell::Ok(us) = Cell::from_row(r) {
                let e = m.entry(r.shape()).or_insert(us);
                *e = e.min(us);
            }
        }
        m
    };
    let (best_ck, best_tile) = (best(&legacy), best(&cktile));
    let faster =
        best_tile.iter().filter_map(|(s, &t)| best_ck.get(s).filter(|&&c| c > t).map(|&c| (*s, c / t))).collect();
    let kernels = cktile.iter().map(|r| (r.kernel_id, r.split_k)).collect::<BTreeSet<_>>().len();
    (legacy, Some(CkTileLeftOut { rows: cktile.len(), kernels, faster }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    #[test]
    fn splits_and_summarizes_cktile_rows() {
        let cat = Catalog::embedded();
        let ck = |id: i32| cat.legacy_by_id(id).unwrap().name.clone();
        let tile = |id: i32| cat.cktile_by_id("gfx942", id).unwrap().name.clone();
        let text = format!(
            "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio\n\
             gfx942,304,1,5120,5120,ck,0,0,10.0,{},1,1,0\n\
             gfx942,304,1,5120,5120,ck,8,0,8.0,{},1,1,0\n\
             gfx942,304,1,5120,5120,cktile,1,0,6.0,{},1,1,0\n\
             gfx942,304,64,5120,5120,ck,0,0,12.0,{},1,1,0\n\
             gfx942,304,64,5120,5120,cktile,1,0,13.0,{},1,1,0\n\
             gfx942,304,64,5120,5120,cktile,1,1,5.0,{},1,1,0.5\n",
            ck(0),
            ck(8),
            tile(1),
            ck(0),
            tile(1),
            tile(1)
        );
        let rows = crate::table::parse_aiter_csv(text.as_bytes(), "t.csv", &cat).unwrap();
        let (legacy, left) = legacy_rows(rows);
        assert_eq!(legacy.len(), 3);
        let left = left.unwrap();
        assert_eq!((left.rows, left.kernels), (3, 2));
        // M=1: 8.0 / 6.0; M=64: the only faster CK-tile cell is invalid (errRatio 0.5), so not counted.
        assert_eq!(left.faster, vec![(Shape::new(1, 5120, 5120), 8.0 / 6.0)]);
        let msg = left.message("t.csv");
        assert!(msg.contains("3 CK-tile rows (2 kernel/split-K candidates) left out"), "{msg}");
        assert!(
            msg.contains("on 1 shapes a CK-tile kernel is faster than every legacy one (up to 33.3% at 1x5120x5120)")
        );
        assert!(super::super::LatencyMatrix::from_rows(&legacy).is_ok());
    }
}
