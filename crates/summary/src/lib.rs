//! gemm-synth summaries of latency tables as polars frames (`synth import`); the one crate that builds polars.

pub mod bands;
pub mod summary;
