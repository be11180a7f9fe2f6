//! Rule search: the loop engine's task over GEMM selection rules ([`task`]) and the built-in proposer
//! (synthesizer variants and local search over rules, [`builtin`]).

pub mod builtin;
pub mod task;
