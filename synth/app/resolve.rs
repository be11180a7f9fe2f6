//! The data mode of a command, decided once from its options: a single dataset (or several merged) with a
//! model's layers, a dataset manifest of (model, TP) configurations, or AITER tuned tables. `run`,
//! `compare`, `search` and `drift` take the mode as a value instead of each branching on its own flags; options
//! that the chosen mode does not read are one error naming them, never silently ignored (and never in
//! the "Regenerate with" line).

use std::path::{Path, PathBuf};

use anyhow::bail;

use super::args::DataArgs;
use super::invocation::Invocation;

/// Where a data command's latency data comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataMode {
    /// `--dataset` (files, embedded names, directories), `--model`/`--spec`, `--tp`.
    Single,
    /// A dataset manifest (`.toml`): `--manifest`, or `--dataset` naming one manifest.
    Manifest(PathBuf),
    /// AITER tuned tables (`--train-tuned`).
    Tuned,
}

/// What a command falls back to when no data option is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// The single-dataset job on the embedded default dataset (`compare`, `search`).
    Single,
    /// The multi-model job on the default manifest (`run`).
    DefaultManifest,
}

/// The data options of a command, as given.
#[derive(Debug, Clone, Copy)]
pub struct DataOptions<'a> {
    pub data: &'a DataArgs,
    /// `--manifest` (only `run` has it).
    pub manifest: Option<&'a Path>,
    /// `--train-tuned` tables (only `run` and `search` have them).
    pub train_tuned: &'a [PathBuf],
    pub fallback: Fallback,
    /// Whether the command's manifest job reads `--backends` (`run`'s multi-model job).
    pub manifest_backends: bool,
}

/// The manifest named by `--dataset`, when it names one: a single `.toml` file (on disk, or the embedded
/// default manifest by its name).
pub fn manifest_of(datasets: &[PathBuf]) -> Option<PathBuf> {
    match datasets {
        [one] if one.extension().is_some_and(|e| e == "toml") => Some(one.clone()),
        _ => None,
    }
}

/// The data mode of `opts`; an error when the options name two modes at once.
pub fn data_mode(opts: DataOptions) -> anyhow::Result<DataMode> {
    let mode = data_mode_of(opts)?;
    match (&opts.data.backends.backends, &mode) {
        (Some(_), DataMode::Manifest(_)) if opts.manifest_backends => {}
        (Some(b), DataMode::Manifest(_) | DataMode::Tuned) => bail!(
            "--backends {b} is read on a single dataset (--dataset FILE, repeated for several journals, with \
             --model/--tp){}: this job scores CK legacy candidates only",
            if opts.manifest_backends { "" } else { " and by `run`'s multi-model job" }
        ),
        _ => {}
    }
    Ok(mode)
}

fn data_mode_of(opts: DataOptions) -> anyhow::Result<DataMode> {
    let d = opts.data;
    if !opts.train_tuned.is_empty() {
        return Ok(DataMode::Tuned);
    }
    if let Some(manifest) = manifest_of(&d.dataset) {
        if d.model.given() || opts.manifest.is_some() {
            bail!(
                "--dataset {} is a manifest of (model, TP) configurations: leave out --model, --spec, --hf-config and \
                 --manifest",
                manifest.display()
            );
        }
        return Ok(DataMode::Manifest(manifest));
    }
    let single = !d.dataset.is_empty() || d.model.given();
    if let Some(manifest) = opts.manifest {
        if single {
            bail!("--manifest is read by the multi-model job: leave out --dataset, --model, --spec and --hf-config");
        }
        return Ok(DataMode::Manifest(manifest.to_path_buf()));
    }
    Ok(match (single, opts.fallback) {
        (false, Fallback::DefaultManifest) => DataMode::Manifest(PathBuf::from(super::manifest::DEFAULT_MANIFEST)),
        _ => DataMode::Single,
    })
}

/// The data mode of a command whose only data option is one `--dataset` path (`drift`, and its
/// `--baseline`): the manifest when it names one, else the single-dataset table; the same decision
/// [`data_mode`] makes for that `--dataset` alone.
pub fn dataset_mode(dataset: &Path) -> anyhow::Result<DataMode> {
    let data = DataArgs { dataset: vec![dataset.to_path_buf()], ..DataArgs::default() };
    data_mode(DataOptions {
        data: &data,
        manifest: None,
        train_tuned: &[],
        fallback: Fallback::Single,
        manifest_backends: false,
    })
}

/// Writes the model option a job used to its "Regenerate with" line: `--hf-config FILE`, `--spec FILE`, or
/// `--model NAME` unless it is the job's `default`.
pub fn write_model_line(model: &crate::app::model_args::ModelArgs, l: &mut super::line::CommandLine, default: &str) {
    match (&model.name, &model.spec, &model.hf_config) {
        (_, _, Some(path)) => l.path("--hf-config", path),
        (_, Some(path), None) => l.path("--spec", path),
        (name, None, None) => l.value("--model", name.as_deref().unwrap_or(default), default),
    };
}

/// One error naming the options of `unused` that were given, which the `job` does not read (`hint` says
/// what to do instead).
pub fn reject_unused(invocation: &Invocation, unused: &[&str], job: &str, hint: &str) -> anyhow::Result<()> {
    let given: Vec<String> = invocation.given_flags().into_iter().filter(|f| unused.contains(&f.as_str())).collect();
    if given.is_empty() {
        return Ok(());
    }
    let verb = if given.len() == 1 { "is" } else { "are" };
    bail!("{} {verb} not read by {job}: {hint}", given.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::model_args::ModelArgs;

    fn mode(data: DataArgs, manifest: Option<&str>, fallback: Fallback) -> anyhow::Result<DataMode> {
        let manifest = manifest.map(Path::new);
        data_mode(DataOptions { data: &data, manifest, train_tuned: &[], fallback, manifest_backends: false })
    }

    #[test]
    fn one_mode_from_the_options() {
        let none = DataArgs::default();
        assert_eq!(
            mode(none.clone(), None, Fallback::DefaultManifest).unwrap(),
            DataMode::Manifest(PathBuf::from("measurements/h200/datasets.toml"))
        );
        assert_eq!(mode(none.clone(), None, Fallback::Single).unwrap(), DataMode::Single);
        let toml = DataArgs { dataset: vec!["m.toml".into()], ..DataArgs::default() };
        assert_eq!(mode(toml.clone(), None, Fallback::Single).unwrap(), DataMode::Manifest("m.toml".into()));
        let both = DataArgs { model: ModelArgs::builtin("qwen3-32b"), ..toml };
        assert!(mode(both, None, Fallback::Single).unwrap_err().to_string().contains("leave out --model"));
        let model = DataArgs { model: ModelArgs::builtin("qwen3-32b"), ..DataArgs::default() };
        assert_eq!(mode(model.clone(), None, Fallback::DefaultManifest).unwrap(), DataMode::Single);
        let e = mode(model, Some("m.toml"), Fallback::DefaultManifest).unwrap_err().to_string();
        assert!(e.contains("--manifest is read by the multi-model job"), "{e}");
        assert_eq!(mode(none, Some("m.toml"), Fallback::DefaultManifest).unwrap(), DataMode::Manifest("m.toml".into()));
    }

    #[test]
    fn one_dataset_path_is_a_manifest_or_a_table() {
        let m = dataset_mode(Path::new("measurements/h200/datasets.toml")).unwrap();
        assert_eq!(m, DataMode::Manifest("measurements/h200/datasets.toml".into()));
        for table in ["measurements/h200/qwen3-32b-tp2.csv", "new", "dir/", "a.toml.csv"] {
            assert_eq!(dataset_mode(Path::new(table)).unwrap(), DataMode::Single, "{table}");
        }
    }
}
