//! The dense latency matrix: one row per shape, one column per candidate (kernel id, split-K), every cell
//! explicitly measured (Ok), measured-but-unusable (Invalid) or not measured (Missing).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::catalog::{Backends, Candidate, Catalog, Libtype};

use super::aiter_csv::{read_aiter_csv, AiterRow, RowStatus, TableError, ERR_RATIO_LIMIT};
use super::Shape;

/// One (shape, candidate) measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Cell {
    /// Not measured.
    Missing,
    /// Measured but unusable (run failed, or too many wrong output elements); the reason.
    Invalid(String),
    /// Kernel time in microseconds.
    Ok(f64),
}

impl Cell {
    /// The time, for Ok cells.
    pub fn us(&self) -> Option<f64> {
        match self {
            Cell::Ok(t) => Some(*t),
            _ => None,
        }
    }

    /// The cell a row stands for: failed status → Invalid, errRatio above [`ERR_RATIO_LIMIT`] → Invalid,
    /// otherwise Ok(us).
    pub fn from_row(row: &AiterRow) -> Cell {
        if let RowStatus::Fail(reason) = row.status() {
            return Cell::Invalid(format!("run failed: {reason}"));
        }
        if let Some(e) = row.err_ratio.filter(|e| *e > ERR_RATIO_LIMIT) {
            return Cell::Invalid(format!("errRatio {e} > {ERR_RATIO_LIMIT}"));
        }
        match row.us {
            Some(t) if t.is_finite() && t > 0.0 => Cell::Ok(t),
            other => Cell::Invalid(format!("no usable time ({other:?})")),
        }
    }
}

/// Latency of every candidate on every shape of one device.
///
/// `cells` is row-major: (shape s, candidate c) → `cells[s * candidates.len() + c]`. Built from rows, shapes
/// are sorted by layer then M ((N, K, M) order) and candidates by (kernel id, split-K).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyMatrix {
    pub gfx: String,
    pub cu_num: u32,
    pub device: Option<String>,
    pub shapes: Vec<Shape>,
    pub candidates: Vec<Candidate>,
    pub cells: Vec<Cell>,
}

/// A deliberate re-measurement (row with `recheck` = 1) next to the original measurement of the same
/// (shape, candidate), if the file has one.
#[derive(Debug, Clone, PartialEq)]
pub struct RecheckPair {
    pub shape: Shape,
    pub candidate: Candidate,
    /// Line of the original row and its cell (None when the file has no original row).
    pub original: Option<(usize, Cell)>,
    /// Line of the recheck row and its cell.
    pub recheck: (usize, Cell),
}

impl RecheckPair {
    /// recheck time / original time, when both are Ok.
    pub fn ratio(&self) -> Option<f64> {
        Some(self.recheck.1.us()? / self.original.as_ref()?.1.us()?)
    }
}

/// The median of `v` (the mean of the two middle values for an even count); `None` for no values.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Pairs every recheck row with the original row of the same device, shape and candidate (in file order).
pub fn recheck_pairs(rows: &[AiterRow]) -> Vec<RecheckPair> {
    type Key = (String, u32, crate::catalog::Libtype, Shape, Candidate);
    let key = |r: &AiterRow| -> Key { (r.gfx.clone(), r.cu_num, r.libtype, r.shape(), r.candidate()) };
    let originals: HashMap<Key, &AiterRow> = rows.iter().filter(|r| !r.is_recheck()).map(|r| (key(r), r)).collect();
    rows.iter()
        .filter(|r| r.is_recheck())
        .map(|r| RecheckPair {
            shape: r.shape(),
            candidate: r.candidate(),
            original: originals.get(&key(r)).map(|o| (o.line, Cell::from_row(o))),
            recheck: (r.line, Cell::from_row(r)),
        })
        .collect()
}

/// A row of [`LatencyMatrix::from_rows_for`] must be of a backend of `backends` (without backends, of the
/// family of the `first` row) and of its device.
fn check_row(r: &AiterRow, first: &AiterRow, backends: Option<&Backends>) -> Result<(), TableError> {
    if let Some(b) = backends {
        if !b.contains(r.libtype) {
            return Err(TableError::at_line(
                Some(r.line),
                format!(
                    "libtype {} row ({}): {} is not among --backends {b}; add it to --backends if the runtime can \
                     call it, or leave its file out",
                    r.libtype, r.kernel_name, r.libtype
                ),
            ));
        }
    }
    // Without backends, one family per matrix: CK legacy instances, or configs of the triton family.
    let family = matches!(first.libtype, crate::catalog::Libtype::Ck | crate::catalog::Libtype::Triton);
    if backends.is_none() && (r.libtype != first.libtype || !family) {
        return Err(TableError::at_line(
            Some(r.line),
            format!(
                "libtype {} row ({}): the latency matrix holds CK legacy candidates only, or triton configs only \
                 (this table starts with libtype {} on line {}); keep CK-tile rows in a separate file",
                r.libtype, r.kernel_name, first.libtype, first.line
            ),
        ));
    }
    if r.gfx != first.gfx || r.cu_num != first.cu_num {
        return Err(TableError::at_line(
            Some(r.line),
            format!(
                "device {}/{} CUs differs from {}/{} CUs on line {}: one matrix holds one device",
                r.gfx, r.cu_num, first.gfx, first.cu_num, first.line
            ),
        ));
    }
    Ok(())
}

fn layer_order(s: &Shape) -> (u32, u32, u32) {
    (s.n, s.k, s.m)
}

impl LatencyMatrix {
    /// A matrix with every cell Missing.
    pub fn new(gfx: &str, cu_num: u32, device: Option<String>, shapes: Vec<Shape>, candidates: Vec<Candidate>) -> Self {
        let cells = vec![Cell::Missing; shapes.len() * candidates.len()];
        LatencyMatrix { gfx: gfx.to_string(), cu_num, device, shapes, candidates, cells }
    }

    /// Builds the matrix from CK legacy rows of one device. Vendor reference rows are not candidates and
    /// are left out (see [`super::multi::vendor_times`]). Recheck rows are left out (see
    /// [`recheck_pairs`]); CK-tile rows, rows of several devices and repeated (shape, candidate) rows are
    /// errors naming the row's line.
    pub fn from_rows(rows: &[AiterRow]) -> Result<Self, TableError> {
        LatencyMatrix::from_rows_for(rows, None)
    }

    /// [`LatencyMatrix::from_rows`] for a runtime that can call `backends`: every row of a named backend is
    /// a candidate (several families in one matrix, vendor rows too when `vendor` is named); vendor rows
    /// of a set without `vendor` stay a reference (left out, as without backends); a row of another
    /// backend is an error naming its line. `None` keeps the rule of [`LatencyMatrix::from_rows`].
    pub fn from_rows_for(rows: &[AiterRow], backends: Option<&Backends>) -> Result<Self, TableError> {
        let vendor_is_candidate = backends.is_some_and(|b| b.contains(Libtype::Vendor));
        let used: Vec<&AiterRow> = rows
            .iter()
            .filter(|r| !r.is_recheck() && (r.libtype != super::aiter_csv::VENDOR_LIBTYPE || vendor_is_candidate))
            .collect();
        let first =
            *used.first().ok_or_else(|| TableError::at_line(None, "no measurement rows (recheck rows aside)"))?;
        let mut device: Option<&str> = None;
        for r in &used {
            check_row(r, first, backends)?;
            if let Some(d) = r.device() {
                match device {
                    Some(prev) if prev != d => {
                        return Err(TableError::at_line(
                            Some(r.line),
                            format!("device \"{d}\" differs from \"{prev}\" on earlier rows"),
                        ))
                    }
                    _ => device = Some(d),
                }
            }
        }
        let shapes: Vec<Shape> = {
            let mut v: Vec<Shape> = used.iter().map(|r| r.shape()).collect::<BTreeSet<_>>().into_iter().collect();
            v.sort_by_key(layer_order);
            v
        };
        let candidates: Vec<Candidate> =
            used.iter().map(|r| r.candidate()).collect::<BTreeSet<_>>().into_iter().collect();
        let mut m = LatencyMatrix::new(&first.gfx, first.cu_num, device.map(str::to_string), shapes, candidates);
        m.fill(&used)?;
        Ok(m)
    }

    /// Sets the cell of each row (whose shape and candidate the matrix has); a second row of a cell is an
    /// error naming its line.
    fn fill(&mut self, used: &[&AiterRow]) -> Result<(), TableError> {
        let mut line_of: HashMap<usize, usize> = HashMap::new();
        for r in used {
            let s = self.shape_index(&r.shape()).expect("shape collected above");
            let c = self.candidate_index(&r.candidate()).expect("candidate collected above");
            let at = s * self.candidates.len() + c;
            if let Some(prev) = line_of.insert(at, r.line) {
                return Err(TableError::at_line(
                    Some(r.line),
                    format!(
                        "shape {} candidate {} already has a row (line {prev}); mark re-measurements with recheck=1",
                        r.shape(),
                        r.candidate()
                    ),
                ));
            }
            self.cells[at] = Cell::from_row(r);
        }
        Ok(())
    }

    /// Reads an AITER-format file (validated against `catalog`) and builds the matrix.
    pub fn load(path: &Path, catalog: &Catalog) -> Result<Self, TableError> {
        let rows = read_aiter_csv(path, catalog)?;
        LatencyMatrix::from_rows(&rows).map_err(|mut e| {
            e.file = path.display().to_string();
            e
        })
    }

    /// The cell of shape `s`, candidate `c`.
    pub fn cell(&self, s: usize, c: usize) -> &Cell {
        &self.cells[s * self.candidates.len() + c]
    }

    /// Sets the cell of shape `s`, candidate `c`.
    pub fn set(&mut self, s: usize, c: usize, cell: Cell) {
        let n = self.candidates.len();
        self.cells[s * n + c] = cell;
    }

    /// Fastest Ok candidate of shape `s` among those of `backend` (index, time); ties to the lower index.
    pub fn best_of(&self, s: usize, backend: Libtype) -> Option<(usize, f64)> {
        let mut best: Option<(usize, f64)> = None;
        for c in (0..self.candidates.len()).filter(|&c| self.candidates[c].backend == backend) {
            if let Some(t) = self.us(s, c) {
                if best.is_none_or(|(_, b)| t < b) {
                    best = Some((c, t));
                }
            }
        }
        best
    }

    /// The backends of the candidates, in order.
    pub fn backends(&self) -> Vec<Libtype> {
        self.candidates.iter().map(|c| c.backend).collect::<BTreeSet<_>>().into_iter().collect()
    }

    /// A matrix with only the candidates `keep` says yes to (shapes and their order kept).
    pub fn select_candidates(&self, keep: impl Fn(&Candidate) -> bool) -> Self {
        let cols: Vec<usize> = (0..self.candidates.len()).filter(|&c| keep(&self.candidates[c])).collect();
        LatencyMatrix {
            gfx: self.gfx.clone(),
            cu_num: self.cu_num,
            device: self.device.clone(),
            shapes: self.shapes.clone(),
            candidates: cols.iter().map(|&c| self.candidates[c]).collect(),
            cells: (0..self.shapes.len()).flat_map(|s| cols.iter().map(move |&c| self.cell(s, c).clone())).collect(),
        }
    }

    /// Time of shape `s`, candidate `c`, if that cell is Ok.
    pub fn us(&self, s: usize, c: usize) -> Option<f64> {
        self.cell(s, c).us()
    }

    /// Fastest Ok candidate of shape `s` (index, time); ties go to the lower candidate index.
    pub fn best(&self, s: usize) -> Option<(usize, f64)> {
        let mut best: Option<(usize, f64)> = None;
        for c in 0..self.candidates.len() {
            if let Some(t) = self.us(s, c) {
                if best.is_none_or(|(_, b)| t < b) {
                    best = Some((c, t));
                }
            }
        }
        best
    }

    /// Index of a shape.
    pub fn shape_index(&self, shape: &Shape) -> Option<usize> {
        // Matrices built from rows are in (N, K, M) order; others (e.g. after select_shapes) may not be.
        if let Ok(i) = self.shapes.binary_search_by_key(&layer_order(shape), layer_order) {
            if self.shapes[i] == *shape {
                return Some(i);
            }
        }
        self.shapes.iter().position(|s| s == shape)
    }

    /// Index of a candidate.
    pub fn candidate_index(&self, cand: &Candidate) -> Option<usize> {
        self.candidates.iter().position(|c| c == cand)
    }

    /// A matrix with only the given shapes (in the given order), all candidates kept.
    pub fn select_shapes(&self, idx: &[usize]) -> Self {
        let n = self.candidates.len();
        LatencyMatrix {
            gfx: self.gfx.clone(),
            cu_num: self.cu_num,
            device: self.device.clone(),
            shapes: idx.iter().map(|&s| self.shapes[s]).collect(),
            candidates: self.candidates.clone(),
            cells: idx.iter().flat_map(|&s| self.cells[s * n..(s + 1) * n].iter().cloned()).collect(),
        }
    }

    /// Distinct M values, ascending.
    pub fn m_values(&self) -> Vec<u32> {
        self.shapes.iter().map(|s| s.m).collect::<BTreeSet<_>>().into_iter().collect()
    }

    /// Distinct (N, K) pairs, ascending.
    pub fn layers(&self) -> Vec<(u32, u32)> {
        self.shapes.iter().map(|s| (s.n, s.k)).collect::<BTreeSet<_>>().into_iter().collect()
    }

    /// Indices of the shapes of one (N, K) layer, in matrix order.
    pub fn shapes_of_layer(&self, n: u32, k: u32) -> Vec<usize> {
        (0..self.shapes.len()).filter(|&s| self.shapes[s].n == n && self.shapes[s].k == k).collect()
    }

    /// (Ok, Invalid, Missing) cell counts.
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for cell in &self.cells {
            match cell {
                Cell::Ok(_) => c.0 += 1,
                Cell::Invalid(_) => c.1 += 1,
                Cell::Missing => c.2 += 1,
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m() -> LatencyMatrix {
        let shapes = vec![Shape::new(16, 128, 256), Shape::new(32, 128, 256)];
        let cands = vec![Candidate::new(0, 0), Candidate::new(3, 0), Candidate::new(3, 1)];
        let mut m = LatencyMatrix::new("gfx942", 304, None, shapes, cands);
        m.set(0, 0, Cell::Ok(5.0));
        m.set(0, 1, Cell::Ok(4.0));
        m.set(0, 2, Cell::Ok(4.0));
        m.set(1, 1, Cell::Invalid("x".into()));
        m
    }

    #[test]
    fn best_prefers_lowest_index_on_ties_and_skips_non_ok() {
        let m = m();
        assert_eq!(m.best(0), Some((1, 4.0)));
        assert_eq!(m.best(1), None);
        assert_eq!(m.counts(), (3, 1, 2));
    }

    #[test]
    fn select_shapes_reorders_rows() {
        let m = m();
        let s = m.select_shapes(&[1, 0]);
        assert_eq!(s.shapes[0], m.shapes[1]);
        assert_eq!(s.cell(1, 0), &Cell::Ok(5.0));
        assert_eq!(s.shape_index(&m.shapes[0]), Some(1));
    }
}
