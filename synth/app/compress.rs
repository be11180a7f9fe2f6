//! `synth compress --tuned FILE [--rule FILE] --out DIR`: a rule plus a residual tuned CSV that AITER's
//! lookup turns into exactly the full table's choices, proved exhaustively on the written files.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};

use super::shared::{rule_outline, RULE_JSON};
use super::tuned::rows_matrix;
use synth_base::paths::display_path;
use synth_base::sanitize::shell_word;
use synth_core::catalog::Catalog;
use synth_core::compare::TunedTable;
use synth_core::compress::{compress, per_layer_counts, prove, Proof};
use synth_core::render::{self, writer::GeneratedFile, Provenance};
use synth_core::rule::Rule;
use synth_core::synthesize::{FeatureSet, Limits};
use synth_core::table::{parse_aiter_csv, AiterRow, Shape};
use synth_core::tuned::{parse_device, AgreeWeight, TunedSet};

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
    /// Most leaves of the trained rule, at most 2001 (a rule holds at most 2000 branches in every form).
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

/// The records of `input` (the bytes of the file `file`; header and field text as they are) whose row is
/// of another device or whose shape is in `kept`, as CSV text, and how many records it holds.
pub fn residual_csv(
    input: &[u8],
    file: &Path,
    device: (&str, u32),
    kept: &BTreeSet<Shape>,
) -> anyhow::Result<(String, usize)> {
    let shown = || synth_base::sanitize::shown(&file.display().to_string());
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).from_reader(input);
    let header = rdr.headers().with_context(|| format!("cannot read {}", shown()))?.clone();
    let col =
        |name: &str| header.iter().position(|h| h == name).ok_or_else(|| anyhow!("{}: no column {name}", shown()));
    let (gi, ci, mi, ni, ki) = (col("gfx")?, col("cu_num")?, col("M")?, col("N")?, col("K")?);
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&header)?;
    let mut written = 0;
    for rec in rdr.records() {
        let rec = rec.with_context(|| format!("cannot read {}", shown()))?;
        let num = |i: usize| -> anyhow::Result<u32> {
            let v = rec.get(i).unwrap_or("");
            v.parse().with_context(|| {
                format!("{}: value \"{}\" is not a positive integer", shown(), synth_base::sanitize::shown(v))
            })
        };
        let same_device = rec.get(gi) == Some(device.0) && num(ci)? == device.1;
        if !same_device || kept.contains(&Shape::new(num(mi)?, num(ni)?, num(ki)?)) {
            w.write_record(&rec)?;
            written += 1;
        }
    }
    let bytes = w.into_inner().map_err(|e| anyhow!("cannot write the residual table: {e}"))?;
    Ok((String::from_utf8(bytes).context("the residual table is not UTF-8")?, written))
}

fn pick_device(rows: &[AiterRow], given: Option<&str>, file: &str) -> anyhow::Result<(String, u32)> {
    if let Some(d) = given {
        return parse_device(d);
    }
    let devices: BTreeSet<(String, u32)> = rows.iter().map(|r| (r.gfx.clone(), r.cu_num)).collect();
    match devices.len() {
        1 => Ok(devices.into_iter().next().expect("one device")),
        0 => bail!("{file}: the file has no rows"),
        _ => bail!(
            "{file}: rows of several devices ({}); pick one with --device GFX:CU",
            devices
                .iter()
                .map(|(g, c)| format!("{}:{c}", synth_base::sanitize::shown(g)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A path as the outputs name it: relative to the crate root when under it, else absolute, so that the
/// Regenerate line and the provenance do not depend on the working directory.
fn shown_path(path: &Path) -> String {
    display_path(&std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()))
}

/// The command that reproduces the outputs (with `--out`): every option the result depends on, with the
/// value this run used (the device it compressed, the trained rule's limits), each a shell word.
pub fn regenerate_line(args: &CompressArgs, device: (&str, u32)) -> String {
    let mut line = format!("cargo run --release -- compress --tuned {}", shell_word(&shown_path(&args.tuned)));
    match &args.rule {
        Some(rule) => line += &format!(" --rule {}", shell_word(&shown_path(rule))),
        None => {
            line += &format!(" --max-leaves {} --max-depth {}", args.max_leaves, args.max_depth);
            if let Some(i) = args.max_instances {
                line += &format!(" --max-instances {i}");
            }
        }
    }
    line + &format!(" --device {}", shell_word(&format!("{}:{}", device.0, device.1)))
}

/// The rule used on a residual miss: `--rule` (validated as every command validates a rule file), or one
/// trained on the full table's lookup answers; and how the outputs describe it.
fn rule_of(
    args: &CompressArgs,
    set: &TunedSet,
    full: &TunedTable,
    catalog: &Catalog,
) -> anyhow::Result<(Rule, String)> {
    if let Some(p) = &args.rule {
        let rule = synth_core::rule::load_checked(p, catalog).with_context(|| {
            format!("cannot use the rule {}", synth_base::sanitize::shown(&p.display().to_string()))
        })?;
        return Ok((rule, shown_path(p)));
    }
    let limits = Limits {
        max_depth: args.max_depth,
        max_leaves: args.max_leaves,
        max_instances: args.max_instances,
        features: FeatureSet::Machine,
        ..Limits::default()
    };
    let targets = TunedSet { rows: synth_core::compress::target_rows(full, catalog), ..set.clone() };
    let s = synth_core::tuned::train(&[&targets], catalog, &limits, AgreeWeight::Time)?;
    Ok((s.rule, format!("trained on the table's lookup answers ({} leaves at most)", args.max_leaves)))
}

/// What a compression found, for the terminal and the provenance.
struct Outcome {
    set: TunedSet,
    device: (String, u32),
    rule: Rule,
    rule_text: String,
    kept: BTreeSet<Shape>,
    residual_rows: usize,
    /// The residual file's text and its record count.
    residual: (String, usize),
    proof: Proof,
}

/// Reads the table, picks or trains the rule, compresses, and proves the residual as AITER reads it.
fn compress_table(args: &CompressArgs, catalog: &Catalog) -> anyhow::Result<Outcome> {
    let file = synth_base::sanitize::shown(&args.tuned.display().to_string());
    let bytes = synth_base::input::read_table_capped(&args.tuned, synth_base::input::MAX_TABLE_BYTES, "tuned table")
        .with_context(|| format!("cannot read {file}"))?;
    let rows = parse_aiter_csv(&bytes, &args.tuned.display().to_string(), catalog).map_err(|e| anyhow!("{e}"))?;
    let (gfx, cu) = pick_device(&rows, args.device.as_deref(), &file)?;
    let name = args.tuned.file_stem().map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let set = TunedSet::from_rows(&name, &shown_path(&args.tuned), &rows, catalog, (&gfx, cu))?;
    synth_core::compress::check_max_m(&set.rows, &args.tuned.display().to_string())?;
    let full = set.table();
    let (rule, rule_text) = rule_of(args, &set, &full, catalog)?;
    let kept = compress(&full, &rule, catalog);
    let residual = residual_csv(&bytes, &args.tuned, (&gfx, cu), &kept)?;
    // The proof runs on the residual file's text, read back as AITER would read it.
    let back =
        parse_aiter_csv(residual.0.as_bytes(), &residual_name(&args.tuned), catalog).map_err(|e| anyhow!("{e}"))?;
    let table = TunedTable::from_rows(&back, catalog, Some((&gfx, cu)), "residual").0;
    let proof = prove(&full, &table, &rule, catalog);
    Ok(Outcome { set, device: (gfx, cu), rule, rule_text, kept, residual_rows: table.len(), residual, proof })
}

/// The terminal report of a compression (without the written files).
fn report(args: &CompressArgs, o: &Outcome, catalog: &Catalog) -> String {
    let (gfx, cu) = (&o.device.0, o.device.1);
    let rows = o.set.rows.len();
    let mut text = String::new();
    let _ = writeln!(
        text,
        "table:    {} ({rows} rows of {gfx}:{cu}, {} of other devices kept as they are)",
        shown_path(&args.tuned),
        o.set.other_device
    );
    let _ = writeln!(text, "rule:     {}: {} leaves, depth {}", o.rule_text, o.rule.num_leaves(), o.rule.depth());
    text.push_str(&rule_outline(&o.rule, catalog));
    let _ = writeln!(
        text,
        "residual: {} of {rows} rows ({:.2}%), {} lines in {}",
        o.residual_rows,
        100.0 * o.residual_rows as f64 / rows as f64,
        o.residual.1,
        residual_name(&args.tuned)
    );
    let layers: BTreeMap<(u32, u32), (usize, usize)> = per_layer_counts(&o.set.table(), &o.kept);
    for ((n, k), (all, keep)) in &layers {
        let _ = writeln!(text, "  N={n:<6} K={k:<6} {keep:>4} of {all:>4} rows kept");
    }
    let p = &o.proof;
    let _ = writeln!(
        text,
        "proof:    {} lookups ({} (N, K) x M = 1..={}), residual + rule vs full table: {} mismatches",
        p.lookups, p.layers, p.max_m, p.mismatches
    );
    text
}

/// Every output file: the residual, the rule's header, instance list and Rust module, and its JSON.
fn output_files(args: &CompressArgs, o: &Outcome, catalog: &Catalog) -> anyhow::Result<Vec<GeneratedFile>> {
    let (gfx, cu) = (&o.device.0, o.device.1);
    let rows = o.set.rows.len();
    let provenance = Provenance {
        dataset: format!("AITER tuned table {} ({gfx}, {cu} CUs, {rows} rows)", shown_path(&args.tuned)),
        training: format!("rule used on a miss of the residual table ({})", o.rule_text),
        figures: vec![format!(
            "residual {} of {rows} rows; lossless: {} lookups (every (N, K) x M = 1..={}) match AITER's lookup on the full table",
            o.residual_rows, o.proof.lookups, o.proof.max_m
        )],
        command: regenerate_line(args, (gfx, cu)),
    };
    let matrix = rows_matrix(std::slice::from_ref(&o.set))?;
    let mut files = vec![GeneratedFile::new(residual_name(&args.tuned), o.residual.0.clone())];
    files.extend(render::generated_files(&o.rule, catalog, &matrix, &provenance)?);
    let mut json = synth_core::rule::to_json(&o.rule);
    json.push('\n');
    files.push(GeneratedFile::new(RULE_JSON, json));
    Ok(files)
}

/// Runs `synth compress`: the outputs are written all or nothing, and only when the proof holds.
pub fn run(args: CompressArgs) -> anyhow::Result<()> {
    super::args::check_budgets(args.max_leaves, args.max_depth, args.max_instances)?;
    let catalog = Catalog::embedded();
    let outcome = compress_table(&args, &catalog)?;
    let mut text = report(&args, &outcome, &catalog);
    let proof = &outcome.proof;
    if !proof.holds() {
        super::shared::emit(&text)?;
        let first: Vec<String> = proof
            .first_mismatches
            .iter()
            .map(|m| format!("{}: full {} vs compressed {}", m.shape, m.full.0, m.compressed.0))
            .collect();
        bail!(
            "the compressed table is not lossless: {} mismatches, first {}; nothing was written to {}. Where the full \
             table misses (AITER runs its default kernel) no residual row can help, the rule must return the default \
             there: allow more leaves (--max-leaves) or pass a --rule that does",
            proof.mismatches,
            first.join("; "),
            synth_base::sanitize::shown(&args.out.display().to_string())
        );
    }
    let files = output_files(&args, &outcome, &catalog)?;
    let mut inputs = vec![("--tuned", args.tuned.clone())];
    inputs.extend(args.rule.iter().map(|p| ("--rule", p.clone())));
    super::outputs::check_out_dir(&args.out, &files, &inputs)?;
    for f in super::outputs::write_files(&args.out, &files, false)? {
        let _ = writeln!(text, "written:  {}", display_path(&f));
    }
    super::shared::emit(&text)
}
