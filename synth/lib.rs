//! The `synth` command: the command line (`cli`) and the commands (`app`) that wire the stages of the
//! workspace's crates together (see ARCHITECTURE.md): `synth-base` (crate-root helpers), `synth-core`
//! (catalog, shapes, tables, the rule IR, synthesis, scoring, code generation, runtime files),
//! `synth-summary` (polars summaries), `synth-measure` (plans, journals, the harness, tuning),
//! `synth-engine` (the loop engine and kernel rewriting) and `synth-search` (the rule search). No stage
//! crate depends on this one.

#[macro_use]
extern crate synth_base;

pub mod app;
pub mod cli;
