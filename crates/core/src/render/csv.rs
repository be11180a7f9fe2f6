//! The instance list for AITER's kernel generator: the kernels a rule returns, as rows of AITER's tuned CSV
//! (`gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio`). AITER compiles only the
//! instances named in that file (plus its default), so the rule's file builds exactly what it can return.
//!
//! Each (kernel, splitK) leaf gets one row at a measured shape: the one where that candidate is fastest
//! relative to the best other candidate (smallest ratio; the first such shape on ties), with its measured
//! time. The default kernel gets a row too when no leaf uses it and the matrix measures it (AITER builds
//! its default in any case).

use crate::catalog::{Candidate, Catalog};
use crate::rule::{Leaf, Rule};
use crate::table::{write_aiter_csv, AiterRecord, AiterRow, LatencyMatrix, Shape};

use super::{leaf_instance, resolved};

/// The row chosen for one candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstanceRow {
    /// The candidate (kernelId, splitK).
    pub candidate: Candidate,
    /// Index of the chosen shape in the matrix.
    pub shape: usize,
    /// Its measured time (us).
    pub us: f64,
    /// Its time divided by the best other candidate's at that shape (1.0 when no other is valid there).
    pub ratio: f64,
}

/// The shape where `candidate` is fastest relative to the best other candidate, or `None` when the matrix
/// holds no valid measurement of it.
pub fn representative_shape(matrix: &LatencyMatrix, candidate: &Candidate) -> Option<InstanceRow> {
    let c = matrix.candidate_index(candidate)?;
    let mut best: Option<InstanceRow> = None;
    for s in 0..matrix.shapes.len() {
        let Some(us) = matrix.us(s, c) else { continue };
        let others = (0..matrix.candidates.len()).filter(|&o| o != c).filter_map(|o| matrix.us(s, o)).reduce(f64::min);
        let ratio = others.map_or(1.0, |o| us / o);
        if best.is_none_or(|b| ratio < b.ratio) {
            best = Some(InstanceRow { candidate: *candidate, shape: s, us, ratio });
        }
    }
    best
}

/// The rows [`render_instances_csv`] writes: one per distinct leaf (in (kernelId, splitK) order), then the
/// default kernel's when no leaf uses it.
pub fn instance_rows(rule: &Rule, catalog: &Catalog, matrix: &LatencyMatrix) -> anyhow::Result<Vec<InstanceRow>> {
    let mut rows = Vec::new();
    // AITER's generator builds CK kernels: the leaves of other backends (which the AITER patch's Python
    // side routes, see crate::aiter) have no row here.
    let leaves: Vec<Leaf> = resolved(rule, catalog)?.instances_used().into_iter().filter(Leaf::is_ck).collect();
    for leaf in &leaves {
        let inst = leaf_instance(catalog, leaf)?;
        let cand = Candidate::new(inst.id, leaf.split_k);
        rows.push(representative_shape(matrix, &cand).ok_or_else(|| unmeasured(matrix, &cand, "the rule returns it"))?);
    }
    let default = catalog.default_instance().id;
    if !leaves.iter().any(|l| l.kernel_id == default) {
        // AITER always compiles its default kernel; prefer its row without split-K.
        let mut cands: Vec<Candidate> = matrix.candidates.iter().copied().filter(|c| c.kernel_id == default).collect();
        cands.sort_by_key(|c| c.split_k);
        // A table without a usable row of it (a tuned table whose shapes all have other winners) gets no
        // row: AITER builds its default whatever the file lists.
        if let Some(row) = cands.iter().find_map(|c| representative_shape(matrix, c)) {
            rows.push(row);
        }
    }
    Ok(rows)
}

fn unmeasured(matrix: &LatencyMatrix, cand: &Candidate, why: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "candidate {cand} has no valid measurement in the latency matrix ({} shapes, {} {} CUs) but {why}: \
         its instance-CSV row needs a measured shape; measure it (synth bench) or use a table that has it",
        matrix.shapes.len(),
        matrix.gfx,
        matrix.cu_num
    )
}

/// Renders the rule's instance list in AITER's tuned-CSV shape (see the module docs), through
/// [`write_aiter_csv`]. `tflops` is 2·M·N·K/us/1e6 and `bw` the GB/s moved reading fp8 X and W and writing
/// 16-bit Y, both rounded to two decimals as AITER writes them; `errRatio` is 0 (the matrix keeps only
/// cells that passed AITER's 0.05 error check).
pub fn render_instances_csv(rule: &Rule, catalog: &Catalog, matrix: &LatencyMatrix) -> anyhow::Result<String> {
    let mut rows = Vec::new();
    for row in instance_rows(rule, catalog, matrix)? {
        let inst = leaf_instance(catalog, &Leaf::from_candidate(row.candidate))?;
        let shape: Shape = matrix.shapes[row.shape];
        let (m, n, k) = (f64::from(shape.m), f64::from(shape.n), f64::from(shape.k));
        let round2 = |x: f64| (x * 100.0).round() / 100.0;
        let record = AiterRecord {
            gfx: matrix.gfx.clone(),
            cu_num: matrix.cu_num,
            m: shape.m,
            n: shape.n,
            k: shape.k,
            libtype: inst.libtype(),
            kernel_id: inst.id,
            split_k: row.candidate.split_k,
            us: Some(row.us),
            kernel_name: inst.name.clone(),
            tflops: Some(round2(2.0 * m * n * k / row.us / 1e6)),
            bw: Some(round2((m * k + n * k + 2.0 * m * n) / row.us / 1e3)),
            err_ratio: Some(0.0),
        };
        rows.push(AiterRow { line: 0, record, extra: Default::default() });
    }
    let mut out = Vec::new();
    write_aiter_csv(&mut out, &rows).map_err(|e| anyhow::anyhow!("writing the instance CSV failed: {e}"))?;
    Ok(String::from_utf8(out)?)
}
