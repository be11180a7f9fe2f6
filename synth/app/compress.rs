//! `synth compress --tuned FILE [--rule FILE] --out DIR`: a rule plus a residual tuned CSV that AITER's
//! lookup turns into exactly the full table's choices, proved exhaustively on the written files.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use super::run::{rule_outline, RULE_JSON};
use super::session::display_path;
use super::tuned::rows_matrix;
use crate::catalog::Catalog;
use crate::render::{self, writer::GeneratedFile, Provenance};
use crate::rule::Rule;
use crate::synthesize::{FeatureSet, Limits};
use crate::table::{read_aiter_csv, AiterRow, Shape};
use crate::tuned::{parse_device, AgreeWeight, TunedSet};

use crate::compress::{compress, per_layer_counts, prove};

#[derive(Debug, Clone, clap::Args)]
pub struct CompressArgs {
    /// The AITER tuned CSV to compress.
    #[arg(long)]
    pub tuned: PathBuf,
    /// Rule (C++, Rust or JSON) used on a residual miss; default: one trained on the table itself
    /// (agreement with its tuned choices, --max-leaves leaves).
    #[arg(long)]
    pub rule: Option<PathBuf>,
    /// Output directory: the residual CSV (named after the input), the rule's header, instance list, Rust
    /// module and JSON.
    #[arg(long)]
    pub out: PathBuf,
    /// Device whose rows are compressed (GFX:CU); rows of other devices are kept unchanged. Default: the
    /// file's only device.
    #[arg(long)]
    pub device: Option<String>,
    /// Most leaves of the trained rule.
    #[arg(long, default_value_t = 16)]
    pub max_leaves: usize,
    /// Most conditions on the way to a leaf of the trained rule.
    #[arg(long, default_value_t = 6)]
    pub max_depth: usize,
    /// Most distinct instances of the trained rule.
    #[arg(long)]
    pub max_instances: Option<usize>,
}

/// The residual file's name for an input file.
pub fn residual_name(input: &Path) -> String {
    let stem = input.file_stem().map_or_else(|| "tuned".to_string(), |s| s.to_string_lossy().into_owned());
    format!("{stem}.residual.csv")
}

/// Writes the records of `input` (header and field text as they are) whose row is of another device or
/// whose shape is in `kept`.
pub fn write_residual(
    input: &Path,
    output: &Path,
    device: (&str, u32),
    kept: &BTreeSet<Shape>,
) -> anyhow::Result<usize> {
    let bytes = std::fs::read(input).with_context(|| format!("cannot read {}", input.display()))?;
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).from_reader(bytes.as_slice());
    let header = rdr.headers()?.clone();
    let col = |name: &str| {
        header.iter().position(|h| h == name).ok_or_else(|| anyhow::anyhow!("{}: no column {name}", input.display()))
    };
    let (gi, ci, mi, ni, ki) = (col("gfx")?, col("cu_num")?, col("M")?, col("N")?, col("K")?);
    let mut w = csv::Writer::from_path(output).with_context(|| format!("cannot write {}", output.display()))?;
    w.write_record(&header)?;
    let mut written = 0;
    for rec in rdr.records() {
        let rec = rec.with_context(|| format!("cannot read {}", input.display()))?;
        let num = |i: usize| -> anyhow::Result<u32> {
            let v = rec.get(i).unwrap_or("");
            v.parse().with_context(|| format!("{}: value \"{v}\" is not a positive integer", input.display()))
        };
        let same_device = rec.get(gi) == Some(device.0) && num(ci)? == device.1;
        if !same_device || kept.contains(&Shape::new(num(mi)?, num(ni)?, num(ki)?)) {
            w.write_record(&rec)?;
            written += 1;
        }
    }
    w.flush()?;
    Ok(written)
}

fn pick_device(rows: &[AiterRow], given: Option<&str>, file: &Path) -> anyhow::Result<(String, u32)> {
    if let Some(d) = given {
        return parse_device(d);
    }
    let devices: BTreeSet<(String, u32)> = rows.iter().map(|r| (r.gfx.clone(), r.cu_num)).collect();
    match devices.len() {
        1 => Ok(devices.into_iter().next().expect("one device")),
        0 => bail!("{}: the file has no rows", file.display()),
        _ => bail!(
            "{}: rows of several devices ({}); pick one with --device GFX:CU",
            file.display(),
            devices.iter().map(|(g, c)| format!("{g}:{c}")).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Runs `synth compress`.
pub fn run(args: CompressArgs) -> anyhow::Result<()> {
    if args.max_leaves == 0 || args.max_depth == 0 || args.max_instances == Some(0) {
        bail!("--max-leaves, --max-depth and --max-instances must be at least 1");
    }
    let catalog = Catalog::embedded();
    let rows = read_aiter_csv(&args.tuned, &catalog).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (gfx, cu) = pick_device(&rows, args.device.as_deref(), &args.tuned)?;
    let set = TunedSet::from_rows(
        &args.tuned.file_stem().map_or_else(String::new, |s| s.to_string_lossy().into_owned()),
        &display_path(&args.tuned),
        &rows,
        &catalog,
        (&gfx, cu),
    )?;
    let full = set.table();
    let (rule, rule_text): (Rule, String) = match &args.rule {
        Some(p) => (crate::rule::load(p, &catalog).map_err(|e| anyhow::anyhow!("{e}"))?, display_path(p)),
        None => {
            let limits = Limits {
                max_depth: args.max_depth,
                max_leaves: args.max_leaves,
                max_instances: args.max_instances,
                features: FeatureSet::Machine,
                ..Limits::default()
            };
            let targets = TunedSet { rows: crate::compress::target_rows(&full, &catalog), ..set.clone() };
            let s = crate::tuned::train(&[&targets], &catalog, &limits, AgreeWeight::Time)?;
            (s.rule, format!("trained on the table's lookup answers ({} leaves at most)", args.max_leaves))
        }
    };
    let kept = compress(&full, &rule, &catalog);
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let residual_path = args.out.join(residual_name(&args.tuned));
    let written = write_residual(&args.tuned, &residual_path, (&gfx, cu), &kept)?;

    // The proof runs on the written file, read back as AITER would read it.
    let back = read_aiter_csv(&residual_path, &catalog).map_err(|e| anyhow::anyhow!("{e}"))?;
    let residual = crate::compare::TunedTable::from_rows(&back, &catalog, Some((&gfx, cu)), "residual").0;
    let proof = prove(&full, &residual, &rule, &catalog);

    let mut text = String::new();
    let _ = writeln!(
        text,
        "table:    {} ({} rows of {gfx}:{cu}, {} of other devices kept as they are)",
        display_path(&args.tuned),
        set.rows.len(),
        set.other_device
    );
    let _ = writeln!(text, "rule:     {rule_text}: {} leaves, depth {}", rule.num_leaves(), rule.depth());
    text.push_str(&rule_outline(&rule, &catalog));
    let share = residual.len() as f64 / set.rows.len() as f64;
    let _ = writeln!(
        text,
        "residual: {} of {} rows ({:.2}%), {} lines written to {}",
        residual.len(),
        set.rows.len(),
        100.0 * share,
        written,
        display_path(&residual_path)
    );
    let layers: BTreeMap<(u32, u32), (usize, usize)> = per_layer_counts(&full, &kept);
    for ((n, k), (all, keep)) in &layers {
        let _ = writeln!(text, "  N={n:<6} K={k:<6} {keep:>4} of {all:>4} rows kept");
    }
    let _ = writeln!(
        text,
        "proof:    {} lookups ({} (N, K) x M = 1..={}), residual + rule vs full table: {} mismatches",
        proof.lookups, proof.layers, proof.max_m, proof.mismatches
    );
    let provenance = Provenance {
        dataset: format!("AITER tuned table {} ({gfx}, {cu} CUs, {} rows)", display_path(&args.tuned), set.rows.len()),
        training: format!("rule used on a miss of the residual table ({rule_text})"),
        figures: vec![format!(
            "residual {} of {} rows; lossless: {} lookups (every (N, K) x M = 1..={}) match AITER's lookup on the full table",
            residual.len(),
            set.rows.len(),
            proof.lookups,
            proof.max_m
        )],
        command: format!("cargo run --release -- compress --tuned {} --out {}", display_path(&args.tuned), display_path(&args.out)),
    };
    let matrix = rows_matrix(std::slice::from_ref(&set))?;
    let mut files = render::write_generated(&rule, &catalog, &matrix, &provenance, &args.out, false)?;
    let mut json = crate::rule::to_json(&rule);
    json.push('\n');
    files.extend(render::writer::write_files(&args.out, &[GeneratedFile::new(RULE_JSON, json)], false)?);
    for f in &files {
        let _ = writeln!(text, "written:  {}", display_path(f));
    }
    super::session::emit(&text)?;
    if !proof.holds() {
        let first: Vec<String> = proof
            .first_mismatches
            .iter()
            .map(|m| format!("{}: full {} vs compressed {}", m.shape, m.full.0, m.compressed.0))
            .collect();
        bail!(
            "the compressed table is not lossless: {} mismatches, first {}; where the full table misses (AITER runs \
             its default kernel) no residual row can help, the rule must return the default there: allow more \
             leaves (--max-leaves) or pass a --rule that does",
            proof.mismatches,
            first.join("; ")
        );
    }
    Ok(())
}
