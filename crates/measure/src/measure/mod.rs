//! Drives the GPU harness (harness/) as a subprocess: plan → stream of measured cells → append-only
//! journal in AITER CSV form, resumable after an interruption.
//!
//! - [`plan`]: the cells to measure (split-K rule, order, seeded rechecks);
//! - [`journal`]: the output CSV, read back on start so finished cells are skipped;
//! - [`auxfile`]: the run's auxiliary files, opened without following links;
//! - [`driver`]: the harness subprocess protocol (JSON lines in both directions, exit codes);
//! - [`pool`]: one harness worker per GPU of a host, results streamed to the one journal writer;
//! - [`shard`]: the plan split by shape (over hosts with `--shard I/N`, over a host's GPUs);
//! - [`merge`]: journals of one device merged into one (`synth merge`).

pub mod aiter_journal;
pub mod aiter_tuner;
pub mod auxfile;
pub mod driver;
pub mod journal;
pub mod merge;
pub mod plan;
pub mod pool;
pub mod shard;

pub use driver::{DeviceInfo, Harness};
pub use journal::{read_journal, recheck_noise, CellResult, Journal};
pub use plan::{build_plan, build_triton_plan, split_levels, CellKey, PlanCell, PlanSpec, SplitKMode, TritonPlanSpec};

/// Cells of `plan` that the journal does not hold yet, in plan order.
pub fn remaining(plan: &[PlanCell], journal: &Journal) -> Vec<PlanCell> {
    plan.iter().filter(|c| !journal.is_done(&c.key())).cloned().collect()
}
