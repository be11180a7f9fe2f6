//! The application layer: the commands that wire stages together. Only this layer (and `cli`) knows the
//! command line; stages never import it.
//!
//! Shared by the commands (they depend on these, never the other way round): `args` (the flattened
//! argument groups and the one `LimitArgs` → `Limits` conversion), `line` (the "Regenerate with" line),
//! `resolve` (the data mode), `shared` (file names, outlines, tables), `data` (embedded datasets),
//! `session` (a single dataset opened), `manifest` (a dataset manifest opened), `multi_eval` (the
//! evaluations on a manifest), `outputs` (where and how output directories are written).

pub(crate) mod aiter;
pub(crate) mod aiter_args;
pub(crate) mod aiter_bench;
pub mod args;
pub(crate) mod bench;
pub(crate) mod bench_args;
pub(crate) mod book;
pub mod cmd;
pub(crate) mod compare;
pub(crate) mod compress;
pub mod configs;
pub(crate) mod data;
pub mod drift;
pub mod drift_args;
pub mod drift_remeasure;
pub mod export;
pub(crate) mod help;
pub(crate) mod invocation;
pub mod line;
pub mod manifest;
pub(crate) mod merge;
pub mod model_args;
pub mod multi;
pub(crate) mod multi_eval;
pub(crate) mod outputs;
#[cfg(test)]
mod report_figures;
pub(crate) mod resolve;
pub(crate) mod rewrite;
pub(crate) mod run;
pub mod search;
pub mod session;
pub mod shared;
pub mod ship;
pub(crate) mod single;
pub mod tune;
pub(crate) mod tuned;
