//! (in progress)
pub mod cmd;
