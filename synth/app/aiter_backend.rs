//! The AITER measurement backend under one name for `drift --remeasure`: its options
//! ([`super::aiter_args`]), the tuner subprocess and profile import ([`super::aiter_tuner`]; the profile
//! reader itself is [`crate::table::aiter_profile`]) and the work directory of `synth bench --backend
//! aiter` ([`super::aiter_bench`]).

pub use super::aiter_args::{AiterArgs, Backend};
pub use super::aiter_bench::work_dir;
pub use super::aiter_tuner::{import_profile, RowMeta, RunFiles, Tuner};
