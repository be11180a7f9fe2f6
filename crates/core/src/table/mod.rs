//! Latency tables: AITER's tuned/profile CSV format (strict reader/writer), the dense shape × candidate
//! matrix the rest of the tool works on, and polars summaries.

pub mod aiter_csv;
pub mod aiter_profile;
pub mod aiter_record;
pub mod bands;
pub mod matrix;
pub mod multi;
pub mod registry;

use serde::{Deserialize, Serialize};

pub use aiter_csv::{
    parse_aiter_csv, read_aiter_csv, write_aiter_csv, AiterRow, RowStatus, TableError, AITER_COLUMNS, VENDOR_LIBTYPE,
};
pub use aiter_record::{AiterRecord, Numbers};
pub use matrix::{recheck_pairs, Cell, LatencyMatrix, RecheckPair};

/// One GEMM problem: Y[M,N] = X[M,K] · W[N,K]^T.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Shape {
    pub m: u32,
    pub n: u32,
    pub k: u32,
}

impl Shape {
    pub fn new(m: u32, n: u32, k: u32) -> Self {
        Shape { m, n, k }
    }
    /// 2·M·N·K.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}x{}", self.m, self.n, self.k)
    }
}
