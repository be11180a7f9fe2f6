//! `synth compare`: score policies on a latency table and write the per-shape CSV and SVG plot.

use std::path::PathBuf;

use anyhow::bail;

use crate::compare::{evaluate, Policy, TunedTable};

use super::session::{display_path, emit, DataArgs, SampleArgs, Scope, Session};

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
    /// The training sample (for --tuned-sample and --held-out).
    #[command(flatten)]
    pub sample: SampleArgs,
    /// Score only the shapes outside the training sample.
    #[arg(long)]
    pub held_out: bool,
    /// Write the per-shape × policy CSV here.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write the speed-up plot (SVG) here, and its PNG beside it (same stem, `.png`).
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// Runs `synth compare`.
pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    let session = Session::open(&args.data, Scope::EveryShape)?;
    let (catalog, matrix, what, names) = (&session.catalog, &session.matrix, &session.what, &session.names);
    let shapes = &session.shapes;
    let sample = session.sample(&args.sample);
    let (train, heldout, picked) = (sample.train, sample.heldout, sample.picked);
    let scored = if args.held_out { heldout } else { shapes.clone() };
    if scored.is_empty() {
        bail!("no shape to score (every shape is in the training sample); drop --held-out or lower --sample-m");
    }
    let mut tables: Vec<(String, TunedTable)> = Vec::new();
    for path in &args.tuned {
        tables.push(session.tuned_file(path, args.tuned_any_device)?);
    }
    if args.tuned_sample {
        let t = TunedTable::from_matrix(matrix, &train, &format!("best of {} sampled shapes", train.len()));
        tables.push(("tuned".to_string(), t));
    }
    let mut policies = vec![Policy::Default];
    for (name, table) in &tables {
        policies.push(Policy::Tuned { name: name.clone(), table: table.clone() });
    }
    if let Some((name, table)) = tables.first() {
        let nearest =
            name.strip_prefix("tuned").map_or_else(|| format!("nearest-M:{name}"), |rest| format!("nearest-M{rest}"));
        policies.push(Policy::NearestM { name: nearest, table: table.clone() });
    }
    if args.published {
        policies.push(session.published_policy()?);
    }
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
    let mut text = format!(
        "dataset: {} ({}, {} CUs); {what}; {} shapes scored{}\n",
        display_path(&session.dataset),
        matrix.gfx,
        matrix.cu_num,
        report.shapes.len(),
        if args.held_out { format!(" (held out from the sample M = {picked:?})") } else { String::new() }
    );
    text.push_str(&crate::compare::report::table(&report, names));
    text.push_str(&crate::tuned::agreement_text(matrix, catalog, &policies, &report.shapes));
    if args.rule.is_empty() && tables.is_empty() && !args.published {
        text.push_str(
            "hint: only the default and the oracle were scored; add --rule FILE, --tuned FILE, --tuned-sample or \
             --published to score more, and --held-out to score outside the training sample\n",
        );
    }
    if let Some(path) = &args.csv {
        let csv = if session.vendor.is_empty() {
            crate::compare::report::csv(&report, names)
        } else {
            crate::compare::report::csv_with_vendor(&report, names, &session.vendor)
        };
        std::fs::write(path, csv).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        text.push_str(&format!("written: {}\n", super::outputs::real_path(path)));
    }
    if let Some(path) = &args.svg {
        let png_path = png_beside(path)?;
        let title = format!("{what} on {}", matrix.device.as_deref().unwrap_or(&matrix.gfx));
        let svg = crate::compare::plot::speedup_svg(&report, names, &title)?;
        let png = crate::compare::raster::svg_to_png(&svg)?;
        for (p, bytes) in [(path, svg.as_bytes()), (&png_path, &png[..])] {
            std::fs::write(p, bytes).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?;
            text.push_str(&format!("written: {}\n", super::outputs::real_path(p)));
        }
    }
    emit(&text)
}

/// Where the PNG of the plot at `svg` goes: beside it, same stem, `.png` (`cmp.svg` → `cmp.png`).
fn png_beside(svg: &std::path::Path) -> anyhow::Result<PathBuf> {
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
