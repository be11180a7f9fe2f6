//! Command-line interface: one subcommand per stage, each defined next to the stage it drives.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

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
    #[command(after_long_help = crate::app::help::RUN)]
    Run(crate::app::args::RunArgs),
    /// List the CK instance catalog.
    #[command(after_long_help = crate::app::help::INSTANCES)]
    Instances(crate::app::cmd::catalog::InstancesArgs),
    /// Derive a model's GEMM shapes (N, K per layer at a TP) and M sets.
    #[command(after_long_help = crate::app::help::SHAPES)]
    Shapes(crate::app::cmd::shapes::ShapesArgs),
    /// Load and summarize an AITER tuned/profile CSV (or a gemm-synth measurement file).
    #[command(after_long_help = crate::app::help::IMPORT)]
    Import(crate::app::cmd::table::ImportArgs),
    /// Measure every instance on a shape grid with the GPU harness (CUDA or ROCm), resumable.
    #[command(after_long_help = crate::app::help::BENCH)]
    Bench(crate::app::bench_args::BenchArgs),
    /// Parse and validate a rule file (C++, Rust or JSON) and print it in one form (--format: C++, Rust or JSON).
    #[command(after_long_help = crate::app::help::CHECK)]
    Check(crate::app::cmd::rule::CheckArgs),
    /// Score policies (default, tuned, nearest-M, rule files, oracle) on a latency table.
    #[command(after_long_help = crate::app::help::COMPARE)]
    Compare(crate::app::compare::CompareArgs),
    /// Agent loop over selection rules (built-in, external command, or OpenAI-compatible proposers).
    #[command(after_long_help = crate::app::help::SEARCH)]
    Search(crate::app::search::SearchArgs),
    /// Agent loop over a kernel source file (GEAK-style rewrite: build, run, measure, reflect).
    #[command(after_long_help = crate::app::help::REWRITE)]
    Rewrite(crate::app::rewrite::RewriteArgs),
    /// Re-check a committed rule against new measurements (new driver / ROCm release); non-zero exit on drift.
    #[command(after_long_help = crate::app::help::DRIFT)]
    Drift(crate::app::drift_args::DriftArgs),
    /// Compress an AITER tuned table losslessly into a rule plus a residual table (proved exhaustively).
    #[command(after_long_help = crate::app::help::COMPRESS)]
    Compress(crate::app::compress::CompressArgs),
    /// AITER main: write the heuristic patch for a rule, apply/check it on a checkout, or write its check kit.
    #[command(after_long_help = crate::app::help::AITER)]
    Aiter(crate::app::aiter::AiterPatchArgs),
    /// Merge journals of one device (e.g. the shards of `bench --shard I/N`) into one, refusing conflicts.
    #[command(after_long_help = crate::app::help::MERGE)]
    Merge(crate::app::merge::MergeArgs),
    /// Write a rule over the triton family as vLLM's or SGLang's block-FP8 config files (proved at every M).
    #[command(after_long_help = crate::app::help::EXPORT)]
    Export(crate::app::export::ExportArgs),
    /// Render the documentation book's result tables (docs/src/generated/) from the committed result CSVs.
    #[command(after_long_help = crate::app::book::HELP)]
    Book(crate::app::book::BookArgs),
    /// A model's runtime files with no GPU: vLLM/SGLang Triton configs or the AITER patch, from the shipped rules.
    #[command(after_long_help = crate::app::help::CONFIGS)]
    Configs(crate::app::configs::ConfigsArgs),
    /// Tune a model's layers on this GPU from the shipped rule, measuring only the cells that can change it.
    #[command(after_long_help = crate::app::tune::HELP)]
    Tune(crate::app::tune::TuneArgs),
}

pub fn main_entry() -> anyhow::Result<()> {
    let definition = Cli::command();
    let matches = definition.clone().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let invocation = crate::app::invocation::Invocation::from_matches(&definition, &matches);
    match cli.command {
        Command::Run(a) => crate::app::run::run(a, &invocation),
        Command::Instances(a) => crate::app::cmd::catalog::run(a),
        Command::Shapes(a) => crate::app::cmd::shapes::run(a),
        Command::Import(a) => crate::app::cmd::table::run(a),
        Command::Bench(a) => crate::app::bench::run(a),
        Command::Check(a) => crate::app::cmd::rule::run(a),
        Command::Compare(a) => crate::app::compare::run(a),
        Command::Search(a) => crate::app::search::run(a, &invocation),
        Command::Rewrite(a) => crate::app::rewrite::run(a),
        Command::Drift(a) => crate::app::drift::run(a, &invocation),
        Command::Compress(a) => crate::app::compress::run(a),
        Command::Aiter(a) => crate::app::aiter::run(a),
        Command::Export(a) => crate::app::export::run(a),
        Command::Configs(a) => crate::app::configs::run(a),
        Command::Tune(a) => crate::app::tune::run(a),
        Command::Merge(a) => crate::app::merge::run(a),
        Command::Book(a) => crate::app::book::run(a),
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use crate::app::invocation::Invocation;
    use clap::CommandFactory;

    // Here rather than in `app::invocation`: the command-line definition is `cli`'s, and `app` never imports
    // `cli` (the layering test checks that).
    #[test]
    fn given_flags_in_definition_order() {
        let cli = Cli::command();
        let inv = Invocation::parse(&cli, &["run", "--max-leaves", "8", "--tp", "2", "--no-refine"]).unwrap();
        assert_eq!(inv.given_flags(), ["--tp", "--max-leaves", "--no-refine"]);
        assert!(inv.given("max_leaves") && !inv.given("seed"));
        assert!(Invocation::defaults("run").given_flags().is_empty());
    }
}
