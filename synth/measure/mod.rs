//! Drives the GPU harness (harness/) as a subprocess: plan → stream of measured cells → append-only
//! journal in AITER CSV form, resumable after an interruption.
pub mod cmd;
