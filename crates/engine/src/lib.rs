//! gemm-synth loop engine (propose, check, measure, reflect) and kernel rewriting; nothing GEMM-specific.

#[macro_use]
extern crate synth_base;
pub mod engine;
pub mod rewrite;
