//! The replay measurer: every "measure" answered from a fully measured matrix (committed journals), for
//! the simulation and `synth tune --replay`. A cell the matrix does not hold is not in the universe.

use std::collections::{BTreeMap, HashMap};

use super::{CellId, Measurer};
use synth_core::catalog::Candidate;
use synth_core::table::{Cell, LatencyMatrix, Shape};

/// Answers from `matrix`; counts the cells asked.
pub struct Replay<'m> {
    matrix: &'m LatencyMatrix,
    shapes: HashMap<Shape, usize>,
    cols: HashMap<Candidate, usize>,
    universe: BTreeMap<Shape, Vec<Candidate>>,
    /// Cells answered so far.
    pub asked: usize,
    /// Sum of the answered cells' times (us), a stand-in for GPU time.
    pub us: f64,
}

impl<'m> Replay<'m> {
    pub fn new(matrix: &'m LatencyMatrix) -> Replay<'m> {
        let shapes: HashMap<Shape, usize> = matrix.shapes.iter().enumerate().map(|(i, s)| (*s, i)).collect();
        let cols: HashMap<Candidate, usize> = matrix.candidates.iter().enumerate().map(|(i, c)| (*c, i)).collect();
        let universe = matrix
            .shapes
            .iter()
            .enumerate()
            .map(|(s, shape)| {
                let cands = (0..matrix.candidates.len())
                    .filter(|&c| !matches!(matrix.cell(s, c), Cell::Missing))
                    .map(|c| matrix.candidates[c])
                    .collect();
                (*shape, cands)
            })
            .collect();
        Replay { matrix, shapes, cols, universe, asked: 0, us: 0.0 }
    }

    /// Cells of the matrix that were measured (usable or not): what an exhaustive run measured.
    pub fn total_cells(&self) -> usize {
        let (ok, invalid, _) = self.matrix.counts();
        ok + invalid
    }
}

impl Measurer for Replay<'_> {
    fn universe(&self, shape: Shape) -> Vec<Candidate> {
        self.universe.get(&shape).cloned().unwrap_or_default()
    }

    fn measure(&mut self, cells: &[CellId]) -> anyhow::Result<Vec<Cell>> {
        let mut out = Vec::with_capacity(cells.len());
        for (shape, cand) in cells {
            let cell = match (self.shapes.get(shape), self.cols.get(cand)) {
                (Some(&s), Some(&c)) => self.matrix.cell(s, c).clone(),
                _ => Cell::Missing,
            };
            anyhow::ensure!(
                !matches!(cell, Cell::Missing),
                "the replayed journals hold no cell M={} N={} K={} {:?}: the planner asked for a cell outside the universe",
                shape.m,
                shape.n,
                shape.k,
                cand
            );
            self.us += cell.us().unwrap_or(0.0);
            out.push(cell);
        }
        self.asked += cells.len();
        Ok(out)
    }

    fn gpu_seconds(&self) -> f64 {
        self.us * 1e-6
    }

    fn device(&self) -> (String, u32) {
        (self.matrix.gfx.clone(), self.matrix.cu_num)
    }
}

/// The rows of a replayed journal: an AITER-form CSV journal (gzip-compressed or not, as every table is
/// read), or the harness's result lines (`.jsonl`, `.jsonl.gz`: one JSON object per cell, as the harness
/// streams them), each read through the table reader's checks. With `screened`, a result line timed as a
/// screening estimate (`timing` "estimate": the harness found the cell slower than twice the shape's best
/// so far) stands for a cell of that time, which a simulation may take (such a cell cannot win); without
/// it the reader refuses the row, as every table reader does.
pub fn read_rows(
    path: &std::path::Path,
    catalog: &synth_core::catalog::Catalog,
    screened: bool,
) -> anyhow::Result<Vec<synth_core::table::AiterRow>> {
    let shown = synth_base::sanitize::shown_path(path);
    let bytes = synth_base::input::read_table_capped(path, synth_base::input::MAX_TABLE_BYTES, "journal")
        .map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let text = if name.ends_with(".jsonl") || name.ends_with(".jsonl.gz") {
        result_lines_as_csv(&bytes, &shown, screened)?
    } else {
        bytes
    };
    Ok(synth_core::table::aiter_csv::parse_aiter_csv(&text, &shown, catalog)?)
}

/// Harness result lines as the journal's CSV text (header and one record per line).
fn result_lines_as_csv(bytes: &[u8], shown: &str, screened: bool) -> anyhow::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(crate::measure::journal::columns())?;
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let mut row: crate::measure::CellResult = serde_json::from_slice(line)
            .map_err(|e| anyhow::anyhow!("{shown}:{}: not a harness result line: {e}", i + 1))?;
        if screened && row.timing == "estimate" {
            row.timing = "screened".to_string();
        }
        w.write_record(row.to_record())?;
    }
    w.into_inner().map_err(|e| anyhow::anyhow!("{shown}: {e}"))
}

/// Several replayed journals as one matrix (one device; a cell in two files is an error), with
/// `backends` naming which rows are candidates (`None`: CK legacy); `screened` as [`read_rows`].
pub fn load_matrix(
    paths: &[std::path::PathBuf],
    backends: Option<&synth_core::catalog::Backends>,
    catalog: &synth_core::catalog::Catalog,
    screened: bool,
) -> anyhow::Result<LatencyMatrix> {
    let mut tables = Vec::with_capacity(paths.len());
    for p in paths {
        tables.push((p.clone(), read_rows(p, catalog, screened)?));
    }
    Ok(synth_core::table::multi::merge_tables_for(&tables, backends)?.0)
}
