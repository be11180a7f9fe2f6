//! Command-line interface: one subcommand per stage, each defined next to the stage it drives.

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "synth",
    version,
    about = "Synthesize FP8 blockscale GEMM kernel-selection heuristics from measured latency"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Main job: load a latency table, synthesize a rule on a training sample, write generated/, compare.
    Run(crate::synthesize::pipeline::RunArgs),
    /// List the CK instance catalog.
    Instances(crate::catalog::cmd::InstancesArgs),
    /// Derive a model's GEMM shapes (N, K per layer at a TP) and M sets.
    Shapes(crate::shapes::cmd::ShapesArgs),
    /// Load and summarize an AITER tuned/profile CSV (or a gemm-synth measurement file).
    Import(crate::table::cmd::ImportArgs),
    /// Measure every instance on a shape grid with the GPU harness (CUDA or ROCm), resumable.
    Bench(crate::measure::cmd::BenchArgs),
    /// Parse and validate a rule file (C++, Rust or JSON) and print it in every form.
    Check(crate::rule::cmd::CheckArgs),
    /// Score policies (default, tuned, nearest-M, rule files, oracle) on a latency table.
    Compare(crate::compare::cmd::CompareArgs),
    /// Agent loop over selection rules (built-in, external command, or OpenAI-compatible proposers).
    Search(crate::agent::cmd::SearchArgs),
    /// Agent loop over a kernel source file (GEAK-style rewrite: build, run, measure, reflect).
    Rewrite(crate::agent::rewrite::cmd::RewriteArgs),
    /// Re-check a committed rule against new measurements (new driver / ROCm release); non-zero exit on drift.
    Drift(crate::drift::DriftArgs),
    /// AITER main: write the heuristic patch for a rule, apply/check it on a checkout, or write its check kit.
    Aiter(crate::aiter::AiterArgs),
}

pub fn main_entry() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(a) => crate::synthesize::pipeline::run(a),
        Command::Instances(a) => crate::catalog::cmd::run(a),
        Command::Shapes(a) => crate::shapes::cmd::run(a),
        Command::Import(a) => crate::table::cmd::run(a),
        Command::Bench(a) => crate::measure::cmd::run(a),
        Command::Check(a) => crate::rule::cmd::run(a),
        Command::Compare(a) => crate::compare::cmd::run(a),
        Command::Search(a) => crate::agent::cmd::run(a),
        Command::Rewrite(a) => crate::agent::rewrite::cmd::run(a),
        Command::Drift(a) => crate::drift::run(a),
        Command::Aiter(a) => crate::aiter::run(a),
    }
}
