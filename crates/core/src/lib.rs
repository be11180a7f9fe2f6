//! gemm-synth stages: kernel catalog, model shapes, latency tables, the rule IR, synthesis, scoring, code generation, runtime files.

pub mod aiter;
pub mod catalog;
pub mod compare;
pub mod compress;
pub mod drift;
pub mod export;
pub mod manifest;
pub mod render;
pub mod rule;
pub mod shapes;
pub mod synthesize;
pub mod table;
pub mod tuned;

pub use catalog::{Candidate, Catalog, Instance};
pub use table::{LatencyMatrix, Shape};
