//! `synth compare`: score policies on a latency table and write the per-shape CSV and SVG plot.

use std::path::{Path, PathBuf};

use anyhow::bail;

use synth_core::compare::{evaluate, Policy, TunedTable};
use synth_core::manifest::MultiData;

use super::args::{DataArgs, RuntimeArgs, SampleArgs};
use super::line::canonical_path;
use super::multi_eval;
use super::resolve::{data_mode, DataMode, DataOptions, Fallback};
use super::session::{Scope, Session};
use super::shared::{emit, published_rule, summary_table, PUBLISHED_RULE_NAME};
use synth_base::paths::display_path;

#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub data: DataArgs,
    /// Rule files (C++, Rust or JSON) to score; each is named after its path.
    #[arg(long)]
    pub rule: Vec<PathBuf>,
    /// Also score the published rule (GEAK-HIP write-up).
    #[arg(long)]
    pub published: bool,
    /// AITER tuned CSVs to score with AITER's lookup (the first is the tuned baseline and feeds nearest-M).
    #[arg(long)]
    pub tuned: Vec<PathBuf>,
    /// Apply the --tuned rows whatever device they were tuned on (AITER would ignore them).
    #[arg(long)]
    pub tuned_any_device: bool,
    /// Also build a tuned table from the training sample (best kernel of each sampled shape), as AITER's
    /// tuner would from the same measurements.
    #[arg(long)]
    pub tuned_sample: bool,
    /// The runtimes' own choices over the triton family (--backends with triton).
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// The training sample (for --tuned-sample and --held-out).
    #[command(flatten)]
    pub sample: SampleArgs,
    /// Score only the shapes outside the training sample.
    #[arg(long)]
    pub held_out: bool,
    /// Score only the shapes where every backend of --backends has a usable row: journals of backends
    /// measured on different M sets, read as one table, compared on the shapes they share.
    #[arg(long)]
    pub common_shapes: bool,
    /// Write the per-shape × policy CSV here.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write the speed-up plot (SVG) here, and its PNG beside it (same stem, `.png`).
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// Runs `synth compare`.
pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    let args = &args;
    check_paths(args)?;
    let opts = DataOptions {
        data: &args.data,
        manifest: None,
        train_tuned: &[],
        fallback: Fallback::Single,
        manifest_backends: false,
    };
    if let DataMode::Manifest(manifest) = data_mode(opts)? {
        return run_manifest(args, &manifest);
    }
    // Checked before the data is read: a missing --backends triton or --device-name is named at once.
    let (runtime_policies, runtime_notes) =
        super::export::runtime_policies(&args.runtime, args.data.backends.backends.as_ref())?;
    let session = Session::open(&args.data, Scope::EveryShape)?;
    session.check_backend_rows()?;
    let (catalog, matrix, names) = (&session.catalog, &session.matrix, &session.names);
    let sample = session.sample(&args.sample);
    let (scored, common_note) =
        scored_shapes(args, &session, if args.held_out { &sample.heldout } else { &session.shapes })?;
    let mut tables: Vec<(String, TunedTable)> = Vec::new();
    for path in &args.tuned {
        tables.push(session.tuned_file(path, args.tuned_any_device)?);
    }
    if args.tuned_sample {
        let train = &sample.train;
        let t = TunedTable::from_matrix(matrix, train, &format!("best of {} sampled shapes", train.len()));
        tables.push(("tuned".to_string(), t));
    }
    let mut policies = vec![Policy::Default];
    policies.extend(table_policies(&tables));
    if args.published {
        policies.push(session.published_policy()?);
    }
    let (backend_policies, backend_notes) = session.backend_policies(&sample.train);
    policies.extend(backend_policies);
    policies.extend(runtime_policies);
    policies.extend(session.rule_policies(&args.rule)?);
    policies.push(Policy::Oracle);
    let report = evaluate(matrix, catalog, &policies, &scored);
    if report.shapes.is_empty() {
        bail!(
            "none of the {} selected shapes can be scored: no cell of any of them is a valid measurement ({} \
             unscorable); measure them again or pick other shapes",
            scored.len(),
            report.unscorable.len()
        );
    }
    let held_out =
        if args.held_out { format!(" (held out from the sample M = {:?})", sample.picked) } else { String::new() };
    let mut text = format!(
        "dataset: {} ({}, {} CUs); {}; {} shapes scored{held_out}{common_note}\n",
        session.dataset.display(),
        matrix.gfx,
        matrix.cu_num,
        session.what,
        report.shapes.len(),
    );
    text.push_str(&synth_core::compare::report::table(&report, names));
    text.push_str(&notes(args, &session, &backend_notes, &runtime_notes));
    text.push_str(&synth_core::tuned::agreement_text(matrix, catalog, &policies, &report.shapes));
    if args.rule.is_empty() && tables.is_empty() && !args.published && args.runtime.is_empty() {
        text.push_str(
            "hint: only the default and the oracle were scored; add --rule FILE, --tuned FILE, --tuned-sample or \
             --published to score more, and --held-out to score outside the training sample\n",
        );
    }
    write_all(&mut text, single_files(args, &session, &report)?)?;
    emit(&text)
}

/// The `--csv` (per shape and policy, with the vendor's times when the data has them) and `--svg` files.
fn single_files(
    args: &CompareArgs,
    session: &Session,
    report: &synth_core::compare::Report,
) -> anyhow::Result<Vec<(PathBuf, Vec<u8>, &'static str)>> {
    let (matrix, names) = (&session.matrix, &session.names);
    let mut files = Vec::new();
    if let Some(path) = &args.csv {
        let csv = if session.vendor.is_empty() {
            synth_core::compare::report::csv(report, names)
        } else {
            synth_core::compare::report::csv_with_vendor(report, names, &session.vendor)
        };
        files.push((path.clone(), csv.into_bytes(), ""));
    }
    if let Some(path) = &args.svg {
        let title = format!("{} on {}", session.what, matrix.device.as_deref().unwrap_or(&matrix.gfx));
        plot_files(&mut files, path, synth_core::compare::plot::speedup_svg(report, names, &title)?)?;
    }
    Ok(files)
}

/// The shapes scored: `candidates` (every shape, or the held-out ones), with `--common-shapes` those where
/// every backend has a usable row; and the note saying how many that kept.
fn scored_shapes(args: &CompareArgs, session: &Session, candidates: &[usize]) -> anyhow::Result<(Vec<usize>, String)> {
    let mut scored = candidates.to_vec();
    if scored.is_empty() {
        bail!("no shape to score (every shape is in the training sample); drop --held-out or lower --sample-m");
    }
    if !args.common_shapes {
        return Ok((scored, String::new()));
    }
    let Some(backends) = &session.backends else {
        bail!("--common-shapes keeps the shapes every backend of --backends has a usable row of: add --backends");
    };
    let before = scored.len();
    scored.retain(|&s| backends.iter().all(|b| session.matrix.best_of(s, b).is_some()));
    if scored.is_empty() {
        bail!(
            "--common-shapes: none of the {before} selected shapes has a usable row of every backend of \
             --backends {backends}; measure the backends on the same shapes or name fewer"
        );
    }
    let note = format!(" (--common-shapes: {} of {before} have a usable row of every backend)", scored.len());
    Ok((scored, note))
}

/// What the backends' and the runtimes' policies are, under the table.
fn notes(args: &CompareArgs, session: &Session, backend_notes: &[String], runtime_notes: &[String]) -> String {
    let mut text = String::new();
    if let Some(b) = &session.backends {
        text.push_str(&format!(
            "backends {b}: `oracle[B]` is backend B alone at its best, `oracle` the union oracle; the threshold is \
             fitted on the training sample (--sample-m {}, --seed {})\n",
            args.sample.sample_m, args.sample.seed
        ));
        for n in backend_notes {
            text.push_str(&format!("  {n}\n"));
        }
    }
    if !runtime_notes.is_empty() {
        text.push_str("runtime policies (a pick of a config without a usable row counts as a fallback):\n");
        for n in runtime_notes {
            text.push_str(&format!("  {n}\n"));
        }
    }
    text
}

/// The plot at `svg` and its PNG beside it, as files to write.
fn plot_files(files: &mut Vec<(PathBuf, Vec<u8>, &str)>, svg_path: &Path, svg: String) -> anyhow::Result<()> {
    let png_path = png_beside(svg_path)?;
    let png = synth_core::compare::raster::svg_to_png(&svg)?;
    files.push((svg_path.to_path_buf(), svg.into_bytes(), ""));
    files.push((png_path, png, ""));
    Ok(())
}

/// Refuses outputs (`--csv`, `--svg` and the PNG beside it) that name an input or each other.
fn check_paths(args: &CompareArgs) -> anyhow::Result<()> {
    let mut inputs: Vec<(&str, PathBuf)> = args.data.dataset.iter().map(|p| ("--dataset", p.clone())).collect();
    inputs.extend(args.data.model.input_files());
    inputs.extend(args.rule.iter().map(|p| ("--rule", p.clone())));
    inputs.extend(args.tuned.iter().map(|p| ("--tuned", p.clone())));
    inputs.extend(args.runtime.runtime_tuned.iter().map(|(_, p)| ("--runtime-tuned", p.clone())));
    let mut outputs: Vec<(String, PathBuf)> = args.csv.iter().map(|p| ("--csv".to_string(), p.clone())).collect();
    if let Some(svg) = &args.svg {
        outputs.push(("--svg".to_string(), svg.clone()));
        outputs.push((format!("the PNG beside --svg {}", svg.display()), png_beside(svg)?));
    }
    super::outputs::check_distinct(&inputs, &outputs)
}

/// Writes `files` all or nothing ([`super::outputs::write_named_files`]) and lists them in `text`.
fn write_all(text: &mut String, files: Vec<(PathBuf, Vec<u8>, &str)>) -> anyhow::Result<()> {
    let notes: Vec<(PathBuf, &str)> = files.iter().map(|(p, _, n)| (p.clone(), *n)).collect();
    super::outputs::write_named_files(&files.into_iter().map(|(p, b, _)| (p, b)).collect::<Vec<_>>())?;
    for (p, note) in notes {
        text.push_str(&format!("written: {}{note}\n", super::outputs::real_path(&p)));
    }
    Ok(())
}

/// `synth compare --dataset MANIFEST.toml`: the policies scored on every (model, TP) configuration of the
/// manifest, one row per configuration, and on every shape; `--tuned-sample` builds the tuned table from
/// the main job's training sample (`--sample-m` M values × the layers of each training configuration).
fn run_manifest(args: &CompareArgs, manifest: &Path) -> anyhow::Result<()> {
    if !args.runtime.is_empty() {
        bail!(
            "--runtime-default, --runtime-tuned and --device-name score triton configs on a single dataset (with \
             --backends naming triton); a manifest ({}) holds CK configurations",
            manifest.display()
        );
    }
    if args.data.model.given() || args.held_out || args.common_shapes {
        bail!(
            "--dataset {} is a manifest of (model, TP) configurations: leave out --model, --spec, --hf-config, --held-out and \
             --common-shapes (every configuration is scored on its own)",
            manifest.display()
        );
    }
    let data = super::manifest::open(manifest)?;
    let (catalog, matrix) = (&data.catalog, &data.matrix);
    let (policies, no_tables) = manifest_policies(args, &data)?;
    let focus = policies.iter().rev().nth(1).map(Policy::name).unwrap_or("default").to_string();
    let evals = multi_eval::per_config(&data, &policies);
    let all = evaluate(matrix, catalog, &policies, &data.all_shapes());
    let mut text = format!(
        "dataset: {} ({} configurations; {}, {} CUs); {} shapes scored\n",
        display_path(manifest),
        data.configs.len(),
        matrix.gfx,
        matrix.cu_num,
        all.shapes.len()
    );
    text.push_str(
        "per configuration (geomean fraction of the oracle; unusable: picks of unmeasured or failed cells by ",
    );
    text.push_str(&focus);
    text.push_str("):\n");
    text.push_str(&multi_eval::per_config_table(&evals, &focus));
    text.push_str(&format!("every shape ({}):\n", all.shapes.len()));
    text.push_str(&summary_table(&all));
    if args.rule.is_empty() && no_tables && !args.published {
        text.push_str("hint: only the default and the oracle were scored; add --rule FILE, --tuned FILE, --tuned-sample or --published\n");
    }
    write_all(&mut text, manifest_files(args, &data, manifest, evals, &all)?)?;
    emit(&text)
}

/// The policies scored on a manifest (default, tuned tables, the published rule, `--rule` files, oracle),
/// and whether no tuned table was given.
fn manifest_policies(args: &CompareArgs, data: &MultiData) -> anyhow::Result<(Vec<Policy>, bool)> {
    let (catalog, matrix) = (&data.catalog, &data.matrix);
    let mut policies = vec![Policy::Default];
    let mut tables: Vec<(String, TunedTable)> = Vec::new();
    for path in &args.tuned {
        let table = super::session::load_tuned(path, catalog, matrix, args.tuned_any_device)?;
        tables.push((format!("tuned:{}", canonical_path(path)), table));
    }
    if args.tuned_sample {
        let train =
            data.sample(&data.training_configs(None), &Default::default(), args.sample.sample_m, args.sample.seed);
        tables.push((
            "tuned".into(),
            TunedTable::from_matrix(matrix, &train, &format!("best of {} training shapes", train.len())),
        ));
    }
    policies.extend(table_policies(&tables));
    if args.published {
        policies.push(Policy::Rule { name: PUBLISHED_RULE_NAME.into(), rule: published_rule(catalog)? });
    }
    for path in &args.rule {
        let rule = synth_core::rule::load_checked(path, catalog)?;
        super::session::note_uncallable(path, &rule, None, matrix);
        policies.push(Policy::Rule { name: canonical_path(path), rule });
    }
    policies.push(Policy::Oracle);
    Ok((policies, tables.is_empty()))
}

/// The `--csv` (one row per configuration and policy) and `--svg` (one group per configuration) files of a
/// manifest.
fn manifest_files(
    args: &CompareArgs,
    data: &MultiData,
    manifest: &Path,
    evals: Vec<multi_eval::Evaluation>,
    all: &synth_core::compare::Report,
) -> anyhow::Result<Vec<(PathBuf, Vec<u8>, &'static str)>> {
    let matrix = &data.matrix;
    let mut files = Vec::new();
    if let Some(path) = &args.csv {
        let mut evals = evals;
        evals.push(multi_eval::Evaluation { evaluation: "all", config: "all".into(), report: all.clone() });
        let csv = multi_eval::evaluations_csv(&evals);
        files.push((path.clone(), csv.into_bytes(), " (one row per configuration and policy)"));
    }
    if let Some(path) = &args.svg {
        let groups: Vec<(String, Vec<usize>)> = data
            .configs
            .iter()
            .map(|c| {
                let set: std::collections::BTreeSet<usize> = c.shapes().into_iter().collect();
                (c.name.clone(), (0..all.shapes.len()).filter(|&i| set.contains(&all.shapes[i])).collect())
            })
            .collect();
        let title = format!("{} on {}", canonical_path(manifest), matrix.device.as_deref().unwrap_or(&matrix.gfx));
        plot_files(&mut files, path, synth_core::compare::plot::groups_svg(all, &groups, &title)?)?;
    }
    Ok(files)
}

/// The tuned tables as AITER's lookup (one policy each) and the first one as nearest-M.
fn table_policies(tables: &[(String, TunedTable)]) -> Vec<Policy> {
    let mut out: Vec<Policy> =
        tables.iter().map(|(name, table)| Policy::Tuned { name: name.clone(), table: table.clone() }).collect();
    if let Some((name, table)) = tables.first() {
        let nearest =
            name.strip_prefix("tuned").map_or_else(|| format!("nearest-M:{name}"), |rest| format!("nearest-M{rest}"));
        out.push(Policy::NearestM { name: nearest, table: table.clone() });
    }
    out
}

/// Where the PNG of the plot at `svg` goes: beside it, same stem, `.png` (`cmp.svg` → `cmp.png`).
fn png_beside(svg: &Path) -> anyhow::Result<PathBuf> {
    if svg.file_name().is_none() || svg.extension().is_some_and(|e| e.eq_ignore_ascii_case("png")) {
        bail!(
            "--svg {}: the plot's PNG goes beside the SVG with the same stem and `.png`, so the SVG path must be a \
             file name not ending in .png (e.g. --svg plot.svg)",
            svg.display()
        );
    }
    Ok(svg.with_extension("png"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_png_goes_beside_the_svg() {
        assert_eq!(png_beside(Path::new("out/cmp.svg")).unwrap(), Path::new("out/cmp.png"));
        assert_eq!(png_beside(Path::new("plot")).unwrap(), Path::new("plot.png"));
        let err = png_beside(Path::new("plot.png")).unwrap_err().to_string();
        assert!(err.contains("--svg plot.png") && err.contains("not ending in .png"), "{err}");
        assert!(png_beside(Path::new("Plot.PNG")).is_err() && png_beside(Path::new("..")).is_err());
    }
}
