//! gemm-synth rule search: the rule task over the loop engine.

pub mod search;
