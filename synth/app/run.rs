//! `synth run`: its arguments and the choice of job. The data mode ([`super::resolve::data_mode`]) picks
//! one of three jobs, each declared in its own module with its own defaults:
//!
//! - the multi-model job ([`super::multi`]; no `--dataset`/`--model`/`--spec`, or `--manifest`), which
//!   writes the committed `generated/` when every setting is at its default;
//! - the single-dataset job ([`super::single`]; `--dataset`, `--model` or `--spec`);
//! - training on AITER tuned tables ([`super::tuned`]; `--train-tuned`).

use super::args::{Effort, STANDARD_LIMITS};
use super::invocation::Invocation;
use super::resolve::{data_mode, reject_unused, DataMode, DataOptions, Fallback};

use super::args::RunArgs;
/// Runs `synth run`: the job its data options choose.
pub fn run(args: RunArgs, invocation: &Invocation) -> anyhow::Result<()> {
    super::tuned::check_flags(&args.tuned_train, invocation, super::tuned::RUN_FLAGS)?;
    if args.no_split_k_guards && args.limits.split_k_fallback.is_some() {
        anyhow::bail!(
            "--split-k-fallback charges a split-K leaf what its guard runs, and --no-split-k-guards drops the \
             guards: give one of them"
        );
    }
    let mode = data_mode(DataOptions {
        data: &args.data,
        manifest: args.manifest.as_deref(),
        train_tuned: &args.tuned_train.train_tuned,
        fallback: Fallback::DefaultManifest,
        manifest_backends: true,
    })?;
    if args.no_folds && !matches!(mode, DataMode::Manifest(_)) {
        anyhow::bail!(
            "--no-folds leaves out the multi-model job's leave-one-model-out evaluation: it belongs to that job \
             (--manifest, or no --dataset/--model/--spec/--train-tuned)"
        );
    }
    match mode {
        DataMode::Tuned => {
            let job = super::tuned::TunedJob {
                tables: args.tuned_train.clone(),
                limits: args.limits.resolve(STANDARD_LIMITS)?,
                effort: Effort::new(args.exact_depth, args.no_refine, args.no_split_k_guards),
                out: args.out.clone(),
            };
            super::tuned::run(&job, &super::tuned::run_line(&job))
        }
        DataMode::Manifest(manifest) => {
            reject_unused(
                invocation,
                &["--tp", "--train-all", "--tuned", "--tuned-any-device", "--rule", "--curve"],
                "the multi-model job",
                "they belong to the single-dataset job: add --dataset FILE or --model NAME (the multi-model job, \
                 without them, reads --manifest)",
            )?;
            let effort = Effort::new(args.exact_depth, args.no_refine, args.no_split_k_guards);
            let mut job = super::multi::MultiJob::resolve(&args.limits, &args.sample, effort, &manifest)?
                .with_backends(args.data.backends.backends.clone());
            if args.no_folds {
                job = job.without_folds();
            }
            if job.is_main() {
                return super::ship::run(args.out.as_deref(), args.check);
            }
            super::multi::run(&job, args.out.as_deref(), args.check)
        }
        DataMode::Single => super::single::run(&args),
    }
}
