//! GEAK-style kernel rewriting: candidates are whole rewrites of one source file of a task directory.
//! Each candidate is built and tested in its own copy of the directory, the test prints a structured
//! result line (correctness and latency), and the loop engine keeps the fastest correct rewrite.
//!
//! - [`spec`]: the TOML task spec (target, build/test commands, timeouts, working-copy policy, result line);
//! - [`result`]: the `GEMMSYNTH_RESULT {json}` line;
//! - [`workcopy`], [`process`], [`diag`]: copying the task, running steps with timeouts, trimming build logs;
//! - [`task`]: the evaluator ([`crate::engine::Task`]);
//! - [`replay`]: a proposer replaying pre-written rewrites;
//! - [`report`]: the per-candidate report and the winner;
//! - [`suite`]: a directory of task specs and its summary (markdown, JSON, SVG);
//! - [`cmd`]: `synth rewrite`.

pub mod diag;
pub mod replay;
pub mod report;
pub mod result;
pub mod spec;
pub mod suite;
pub mod task;
pub mod workcopy;

pub use replay::ReplayProposer;
pub use result::{extract_result, ResultLine, ResultLineError};
pub use spec::{load_spec, parse_spec, RewriteSpec, SpecError};
pub use task::{RewriteTask, Status};
