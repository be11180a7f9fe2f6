//! gemm-synth: kernel-selection heuristics for FP8 blockscale GEMMs, synthesized from measured latency.
//!
//! Stages (see ARCHITECTURE.md): catalog → shapes → measure → table → rule → synthesize / search (on the
//! loop engine) → render → compare; `rewrite` is the engine's other task. Each stage is one module; data
//! flows between them through the types re-exported here. `app` wires stages into commands and is
//! imported by no stage.

// First, so that its `out!` / `outln!` macros are in scope in every module below.
#[macro_use]
pub mod stdout;

pub mod aiter;
pub mod app;
pub mod catalog;
pub mod cli;
pub mod compare;
pub mod compress;
pub(crate) mod diag;
pub mod drift;
pub mod engine;
pub mod export;
pub(crate) mod input;
pub(crate) mod logfile;
pub mod manifest;
pub mod measure;
pub mod paths;
pub mod process;
pub mod render;
pub mod rewrite;
pub mod rule;
pub mod sanitize;
pub mod search;
pub mod shapes;
pub mod synthesize;
pub mod table;
pub(crate) mod textable;
pub mod tune;
pub mod tuned;

pub use catalog::{Candidate, Catalog, Instance};
pub use table::{LatencyMatrix, Shape};
