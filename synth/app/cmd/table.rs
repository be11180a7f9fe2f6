//! `synth import`: load an AITER tuned/profile CSV (or a measurement file in the same format), validate every
//! row, and summarize it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use synth_core::catalog::Catalog;

use synth_core::table::matrix::{median, recheck_pairs, LatencyMatrix};
use synth_core::table::{read_aiter_csv, AiterRow};
use synth_summary::summary::{frame_to_csv, frame_to_json, frame_to_table, try_summarize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImportFormat {
    Table,
    Csv,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// AITER-format CSV (tuned table, profile file, or `synth bench` output).
    pub file: PathBuf,
    /// Output format: table (overview + per-layer table), csv (per-layer table), json (everything).
    #[arg(long, value_enum, default_value = "table")]
    pub format: ImportFormat,
    /// Catalog directory to check kernel names against instead of the built-in one.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
}

/// Whole-file figures of an import.
#[derive(Debug, Clone, Serialize)]
pub struct Overview {
    pub file: String,
    pub rows: usize,
    pub recheck_rows: usize,
    /// Rows validated but outside the latency matrix, by libtype (with CK legacy rows in a file the
    /// matrix holds those; without, every backend's rows are in it).
    pub outside_matrix_rows: std::collections::BTreeMap<String, usize>,
    pub gfx: String,
    pub cu_num: u32,
    pub device: Option<String>,
    pub shapes: usize,
    pub m_values: usize,
    pub m_min: u32,
    pub m_max: u32,
    pub layers: Vec<String>,
    pub candidates: Vec<String>,
    pub cells_ok: usize,
    pub cells_invalid: usize,
    pub cells_missing: usize,
    /// Median time over all Ok cells.
    pub median_us: Option<f64>,
    /// Median over shapes of the fastest Ok time.
    pub median_best_us: Option<f64>,
    /// Median recheck/original time ratio over rechecked cells with both times Ok.
    pub median_recheck_ratio: Option<f64>,
}

/// Builds the matrix and the overview of the whole file: the matrix of the CK legacy rows where there are
/// any (an AITER profile's CK-tile rows stay outside it, as the CK rules use them), else of every backend's
/// rows (a `bench --family triton` journal, a vendor reference file).
pub fn overview(file: &Path, rows: &[AiterRow]) -> anyhow::Result<(Overview, LatencyMatrix)> {
    use synth_core::catalog::{Backends, Libtype};
    let measured = |r: &&AiterRow| !r.is_recheck();
    let has_ck = rows.iter().filter(measured).any(|r| r.libtype == Libtype::Ck);
    let (used, backends): (Vec<AiterRow>, Option<Backends>) = if has_ck {
        (rows.iter().filter(|r| r.libtype == Libtype::Ck).cloned().collect(), None)
    } else {
        let present: std::collections::BTreeSet<Libtype> = rows.iter().map(|r| r.libtype).collect();
        let list: Vec<Libtype> = present.into_iter().collect();
        (rows.to_vec(), Backends::new(&list).ok())
    };
    if !rows.iter().any(|r| !r.is_recheck()) {
        anyhow::bail!("{}: no measurement rows ({} recheck rows only)", file.display(), rows.len());
    }
    let mut outside_matrix_rows = std::collections::BTreeMap::new();
    if has_ck {
        for r in rows.iter().filter(|r| r.libtype != Libtype::Ck) {
            *outside_matrix_rows.entry(r.libtype.to_string()).or_insert(0) += 1;
        }
    }
    let ck = used;
    let matrix = LatencyMatrix::from_rows_for(&ck, backends.as_ref()).map_err(|mut e| {
        e.file = file.display().to_string();
        e
    })?;
    let (ok, invalid, missing) = matrix.counts();
    let ms = matrix.m_values();
    let best: Vec<f64> = (0..matrix.shapes.len()).filter_map(|s| matrix.best(s).map(|b| b.1)).collect();
    let ratios: Vec<f64> = recheck_pairs(&ck).iter().filter_map(|p| p.ratio()).collect();
    let ov = Overview {
        file: file.display().to_string(),
        rows: rows.len(),
        recheck_rows: rows.iter().filter(|r| r.is_recheck()).count(),
        outside_matrix_rows,
        gfx: matrix.gfx.clone(),
        cu_num: matrix.cu_num,
        device: matrix.device.clone(),
        shapes: matrix.shapes.len(),
        m_values: ms.len(),
        m_min: ms.first().copied().unwrap_or(0),
        m_max: ms.last().copied().unwrap_or(0),
        layers: matrix.layers().iter().map(|(n, k)| format!("{n}x{k}")).collect(),
        candidates: matrix.candidates.iter().map(|c| c.to_string()).collect(),
        cells_ok: ok,
        cells_invalid: invalid,
        cells_missing: missing,
        median_us: median(matrix.cells.iter().filter_map(|c| c.us()).collect()),
        median_best_us: median(best),
        median_recheck_ratio: median(ratios),
    };
    Ok((ov, matrix))
}

fn overview_text(o: &Overview) -> String {
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3}"));
    let mut s = String::new();
    let mut kv = |k: &str, v: String| s.push_str(&format!("{k:<16}{v}\n"));
    kv("file", synth_base::sanitize::shown(&o.file));
    let outside: Vec<String> =
        o.outside_matrix_rows.iter().map(|(l, n)| format!(", {n} {l} outside the matrix")).collect();
    kv("rows", format!("{} ({} recheck{})", o.rows, o.recheck_rows, outside.concat()));
    kv(
        "device",
        format!(
            "{}, {} CUs{}",
            synth_base::sanitize::shown(&o.gfx),
            o.cu_num,
            o.device.as_ref().map(|d| format!(", {}", synth_base::sanitize::shown(d))).unwrap_or_default()
        ),
    );
    kv(
        "shapes",
        format!("{} ({} M values in {}..={}, {} layers)", o.shapes, o.m_values, o.m_min, o.m_max, o.layers.len()),
    );
    kv("layers (NxK)", o.layers.join(" "));
    kv("candidates", format!("{} measured: {}", o.candidates.len(), o.candidates.join(" ")));
    kv("cells", format!("{} ok, {} invalid, {} missing", o.cells_ok, o.cells_invalid, o.cells_missing));
    kv("median us", format!("{} (all ok cells), {} (best per shape)", opt(o.median_us), opt(o.median_best_us)));
    if o.recheck_rows > 0 {
        kv("recheck ratio", format!("{} (median recheck/original)", opt(o.median_recheck_ratio)));
    }
    s
}

pub fn run(args: ImportArgs) -> anyhow::Result<()> {
    let catalog = match &args.catalog {
        Some(dir) => Catalog::load_dir(dir)?,
        None => Catalog::embedded(),
    };
    let rows = read_aiter_csv(&args.file, &catalog)?;
    let (ov, matrix) = overview(&args.file, &rows)?;
    let per_layer = try_summarize(&matrix)?;
    let text = match args.format {
        ImportFormat::Table => format!(
            "{}\n{}\nwinners per M band:\n{}",
            overview_text(&ov),
            frame_to_table(&per_layer)?,
            frame_to_table(&synth_summary::bands::band_winners(&matrix)?)?
        ),
        ImportFormat::Csv => frame_to_csv(&per_layer)?,
        ImportFormat::Json => {
            let mut v = serde_json::to_value(&ov)?;
            v["per_layer"] = frame_to_json(&per_layer)?;
            v["per_m_band"] = frame_to_json(&synth_summary::bands::band_winners(&matrix)?)?;
            serde_json::to_string_pretty(&v)? + "\n"
        }
    };
    out!("{text}");
    Ok(())
}
