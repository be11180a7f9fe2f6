//! The live measurer: the cells a round asks for, measured with the GPU harness through the measurement
//! stage (`measure::plan` cells, `measure::driver::Harness::run`, the append-only `measure::Journal`), as
//! `synth bench` measures them. The journal is the tune's state: a rerun reads it back and measures only
//! what it does not hold.

use std::collections::HashMap;
use std::time::Instant;

use super::{CellId, Family, Measurer};
use crate::measure::plan::{build_plan, PlanSpec, SplitKMode};
use crate::measure::{CellKey, CellResult, Harness, Journal, PlanCell};
use synth_core::catalog::triton::TritonConfig;
use synth_core::catalog::{Candidate, Catalog, Libtype};
use synth_core::table::aiter_csv::ERR_RATIO_LIMIT;
use synth_core::table::{Cell, Shape};

/// Measures with `harness` into `journal`.
pub struct Live<'a> {
    pub harness: &'a Harness,
    pub journal: &'a mut Journal,
    pub catalog: &'a Catalog,
    pub family: Family,
    /// The device as the harness's probe reported it: architecture and CU/SM count.
    pub gfx: String,
    pub cu_num: u32,
    /// The triton configs a tune may measure (the kept set and the tuner's space).
    pub triton: Vec<TritonConfig>,
    /// Where the harness's log lines go.
    pub log: fn(&str),
    /// Seconds the harness ran in this process.
    pub spent: f64,
    /// Answer from the journal only: a cell it lacks is an error, the harness never runs (the files of a
    /// finished tune rebuilt without a GPU).
    pub offline: bool,
}

/// The cells a CK tune may measure on `shape`: every legacy instance at the split-K levels the bench's
/// `auto` rule measures there.
pub fn ck_plan(catalog: &Catalog, shape: Shape, cu_num: u32) -> anyhow::Result<Vec<PlanCell>> {
    let spec = PlanSpec {
        shapes: vec![shape],
        instances: catalog.legacy_candidates().iter().collect(),
        split_k: SplitKMode::Auto,
        cu_num,
        recheck_fraction: 0.0,
        seed: 0,
    };
    Ok(build_plan(&spec)?)
}

/// The journal cell a harness row stands for, by the table's rule: a failed run or an errRatio above the
/// limit is Invalid, else the time.
pub fn cell_of(row: &CellResult) -> Cell {
    if !row.is_ok() {
        return Cell::Invalid(format!("run failed: {}", row.status));
    }
    match (row.err_ratio, row.us) {
        (Some(e), _) if e > ERR_RATIO_LIMIT => Cell::Invalid(format!("errRatio {e} > {ERR_RATIO_LIMIT}")),
        (_, Some(t)) if t.is_finite() && t > 0.0 => Cell::Ok(t),
        (_, other) => Cell::Invalid(format!("no usable time ({other:?})")),
    }
}

/// The key of a tune cell in the journal.
pub fn key_of((s, c): &CellId) -> CellKey {
    CellKey::new(*s, c.backend, c.kernel_id, c.split_k, false)
}

impl Live<'_> {
    fn plan_cell(&self, (s, c): &CellId) -> anyhow::Result<PlanCell> {
        match c.backend {
            Libtype::Triton => {
                let config = TritonConfig::from_kernel_id(i64::from(c.kernel_id))
                    .map_err(|e| anyhow::anyhow!("triton kernelId {}: {e}", c.kernel_id))?;
                Ok(PlanCell::triton(*s, config))
            }
            _ => ck_plan(self.catalog, *s, self.cu_num)?
                .into_iter()
                .find(|p| p.kernel_id == c.kernel_id && p.split_k == c.split_k)
                .ok_or_else(|| anyhow::anyhow!("no plan cell for {c:?} on M={} N={} K={}", s.m, s.n, s.k)),
        }
    }
}

impl Measurer for Live<'_> {
    fn universe(&self, shape: Shape) -> Vec<Candidate> {
        match self.family {
            Family::Ck => ck_plan(self.catalog, shape, self.cu_num)
                .map(|p| p.iter().map(|c| Candidate::new(c.kernel_id, c.split_k)).collect())
                .unwrap_or_default(),
            Family::Triton => self.triton.iter().map(|c| Candidate::of(Libtype::Triton, c.kernel_id(), 0)).collect(),
        }
    }

    fn measure(&mut self, cells: &[CellId]) -> anyhow::Result<Vec<Cell>> {
        let todo: Vec<PlanCell> = cells
            .iter()
            .filter(|c| !self.journal.is_done(&key_of(c)))
            .map(|c| self.plan_cell(c))
            .collect::<anyhow::Result<_>>()?;
        if let (true, Some(first)) = (self.offline, todo.first()) {
            anyhow::bail!(
                "the journal lacks {} cells of this round (first: M={} N={} K={} {}): the tune has rounds left to \
                 measure; run it on the GPU host without --from-journal",
                todo.len(),
                first.m,
                first.n,
                first.k,
                first.kernel_name
            );
        }
        if !todo.is_empty() {
            let plan_file = crate::measure::auxfile::plan_file()?;
            let started = Instant::now();
            let log = self.log;
            let result = self.harness.run(&todo, plan_file.path(), self.journal, |_| {}, log);
            self.spent += started.elapsed().as_secs_f64();
            result?;
        }
        let rows: HashMap<CellKey, &CellResult> = self.journal.rows().iter().map(|r| (r.key(), r)).collect();
        cells
            .iter()
            .map(|c| {
                rows.get(&key_of(c)).map(|r| cell_of(r)).ok_or_else(|| {
                    anyhow::anyhow!("the harness returned no row for M={} N={} K={} {:?}", c.0.m, c.0.n, c.0.k, c.1)
                })
            })
            .collect()
    }

    fn gpu_seconds(&self) -> f64 {
        self.spent
    }

    fn device(&self) -> (String, u32) {
        (self.gfx.clone(), self.cu_num)
    }
}
