//! gemm-synth: kernel-selection heuristics for FP8 blockscale GEMMs, synthesized from measured latency.
//!
//! Stages (see ARCHITECTURE.md): catalog → shapes → measure → table → rule → synthesize/agent → render →
//! compare/drift. Each stage is one module; data flows between them through the types re-exported here.

pub mod agent;
pub mod aiter;
pub mod catalog;
pub mod cli;
pub mod compare;
pub mod drift;
pub mod measure;
pub mod render;
pub mod rule;
pub mod shapes;
pub mod synthesize;
pub mod table;

pub use catalog::{Candidate, Catalog, Instance};
pub use table::{LatencyMatrix, Shape};
