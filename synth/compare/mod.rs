//! Policies (default, offline-tuned, nearest-tuned-M, rule files, oracle) scored on a latency matrix.
pub mod cmd;
