//! `synth book [--root DIR] [--out DIR] [--check]`: the documentation book's result tables, rendered from
//! the committed result CSVs (`synth_core::render::book`: which CSVs, which layout) into markdown pages the
//! chapters of `docs/src/` include. With `--check` it writes nothing and fails naming every page that
//! rendering again would change (CI).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use synth_core::render::book::{render_pages, Source, TableSpec, SOURCE_DIRS, TABLES};

/// The examples at the end of `synth book --help`.
pub const HELP: &str = "\
Examples:
  synth book                                  # docs/src/generated/ of the checkout from its generated/*.csv
  synth book --check                          # CI: fail when a page would change
  synth book --root ~/gemm-synth --out /tmp/tables";

#[derive(Debug, clap::Args)]
pub struct BookArgs {
    /// The checkout whose committed results are rendered [default: the gemm-synth checkout containing the
    /// working directory].
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Where the pages are written [default: docs/src/generated of the checkout].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Compare with the pages in the output directory and write nothing; fail naming each page that is
    /// missing or differs.
    #[arg(long)]
    pub check: bool,
}

pub fn run(args: BookArgs) -> Result<()> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let root = match &args.root {
        Some(root) => cwd.join(root),
        None => super::outputs::checkout_containing(&cwd).with_context(|| {
            format!(
                "{} is not inside a gemm-synth checkout: run `synth book` in one, or name it with --root",
                synth_base::sanitize::shown_path(&cwd)
            )
        })?,
    };
    let out = args.out.as_ref().map_or_else(|| root.join("docs/src/generated"), |o| cwd.join(o));
    let texts = read_sources(&root)?;
    if texts.is_empty() {
        anyhow::bail!(
            "no result CSV ({}) in {} of {}: is it a gemm-synth checkout?",
            TABLES.iter().map(|t| t.csv).collect::<Vec<_>>().join(", "),
            SOURCE_DIRS.join(", "),
            synth_base::sanitize::shown_path(&root)
        );
    }
    let sources: Vec<Source<'_>> = texts.iter().map(|(dir, spec, _, text)| Source { dir, spec: *spec, text }).collect();
    let files = render_pages(&sources)?;
    let mut inputs: Vec<(String, PathBuf)> =
        SOURCE_DIRS.iter().map(|d| (format!("--root's {d}"), root.join(d))).filter(|(_, p)| p.is_dir()).collect();
    inputs.extend(texts.iter().map(|(_, _, path, _)| ("--root's results".to_string(), path.clone())));
    super::outputs::check_out_dir(&out, &files, &inputs)?;
    let paths = super::outputs::write_files(&out, &files, args.check)?;
    for (path, (dir, spec, _, _)) in paths.iter().zip(&texts) {
        let verb = if args.check { "fresh" } else { "wrote" };
        outln!("{verb} {} (from {dir}/{})", synth_base::sanitize::shown_path(path), spec.csv);
    }
    Ok(())
}

/// Every CSV of [`TABLES`] found in a directory of [`SOURCE_DIRS`] under `root`, in that order: the
/// directory, the spec, the file's path and its text (read through the capped reader).
fn read_sources(root: &Path) -> Result<Vec<(&'static str, TableSpec, PathBuf, String)>> {
    let mut found = Vec::new();
    for &dir in SOURCE_DIRS {
        for spec in TABLES {
            let path = root.join(dir).join(spec.csv);
            match std::fs::symlink_metadata(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => anyhow::bail!("cannot read {}: {e}", synth_base::sanitize::shown_path(&path)),
                Ok(_) => {}
            }
            let text = synth_base::input::read_text_capped(&path, synth_base::input::MAX_TABLE_BYTES, "result table")
                .with_context(|| format!("cannot read {}", synth_base::sanitize::shown_path(&path)))?;
            found.push((dir, *spec, path, text));
        }
    }
    Ok(found)
}
