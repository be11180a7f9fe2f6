//! The commands that read one stage: `synth instances`, `synth shapes`, `synth import`, `synth check`.

pub mod catalog;
pub mod rule;
pub mod shapes;
pub mod table;
