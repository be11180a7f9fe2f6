//! gemm-synth measurement: plans, journals, the harness driver and worker pool, adaptive tuning.

#[macro_use]
extern crate synth_base;
pub mod measure;
pub mod tune;
