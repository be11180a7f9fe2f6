//! Crate-root helpers of gemm-synth: diagnostics, capped input, sanitizing, paths, subprocesses, closed-stream-safe printing.

// First, so that its `out!` / `outln!` / `err!` / `errln!` macros are in scope in every module below.
#[macro_use]
pub mod stdout;
pub mod diag;
pub mod input;
pub mod logfile;
pub mod paths;
pub mod process;
pub mod sanitize;
pub mod textable;
