//! Drives the GPU harness (harness/) as a subprocess: plan → stream of measured cells → append-only
//! journal in AITER CSV form, resumable after an interruption.
//!
//! - [`plan`]: the cells to measure (split-K rule, order, seeded rechecks);
//! - [`journal`]: the output CSV, read back on start so finished cells are skipped;
//! - [`auxfile`]: the run's auxiliary files, opened without following links;
//! - [`driver`]: the harness subprocess protocol (JSON lines in both directions, exit codes);
//! - [`cmd`]: `synth bench`.

pub mod auxfile;
pub(crate) mod driver;
pub(crate) mod journal;
pub mod plan;

pub use driver::{DeviceInfo, Harness};
pub use journal::{read_journal, recheck_noise, CellResult, Journal};
pub use plan::{build_plan, split_levels, CellKey, PlanCell, PlanSpec, SplitKMode};

/// Cells of `plan` that the journal does not hold yet, in plan order.
pub fn remaining(plan: &[PlanCell], journal: &Journal) -> Vec<PlanCell> {
    plan.iter().filter(|c| !journal.is_done(&c.key())).cloned().collect()
}
