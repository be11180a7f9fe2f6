//! Drift: what changed when a committed rule meets new measurements (a new driver, ROCm or CUDA release,
//! or another GPU). The commands are `app/drift.rs` (the rule re-scored on new tables) and
//! `app/drift_remeasure.rs` (a sample of the baseline measured again); this stage holds what they compute
//! and write:
//! - [`remeasure`]: the seeded sample of cells to measure again and their comparison with the baseline,
//!   within tolerances drawn from the baseline's own recheck noise;
//! - [`remeasure_report`]: that comparison's JSON report and markdown summary;
//! - [`report`]: the plain check's JSON report and markdown summary.

pub mod remeasure;
pub mod remeasure_report;
pub mod report;
