//! Cost-sensitive decision-tree synthesis over a latency matrix.
pub mod pipeline;
