//! Polars summaries of a latency matrix (per-layer cell counts, winners, median times) and plain-text,
//! CSV and JSON renderings of small data frames.

use polars::prelude::*;

use synth_core::table::matrix::{Cell, LatencyMatrix};

/// Long frame of every cell: `N, K, M, candidate, status` (ok/invalid/missing), `us` (null unless ok).
pub fn cells_frame(m: &LatencyMatrix) -> PolarsResult<DataFrame> {
    let total = m.cells.len();
    let (mut ns, mut ks, mut ms) = (Vec::with_capacity(total), Vec::with_capacity(total), Vec::with_capacity(total));
    let (mut cands, mut status, mut us) =
        (Vec::with_capacity(total), Vec::with_capacity(total), Vec::with_capacity(total));
    for (s, shape) in m.shapes.iter().enumerate() {
        for (c, cand) in m.candidates.iter().enumerate() {
            ns.push(shape.n);
            ks.push(shape.k);
            ms.push(shape.m);
            cands.push(cand.to_string());
            let cell = m.cell(s, c);
            status.push(match cell {
                Cell::Ok(_) => "ok",
                Cell::Invalid(_) => "invalid",
                Cell::Missing => "missing",
            });
            us.push(cell.us());
        }
    }
    df!("N" => ns, "K" => ks, "M" => ms, "candidate" => cands, "status" => status, "us" => us)
}

/// Frame of each shape's fastest Ok candidate: `N, K, M, winner, best_us` (shapes with no Ok cell are left out).
pub fn best_frame(m: &LatencyMatrix) -> PolarsResult<DataFrame> {
    let (mut ns, mut ks, mut ms, mut win, mut us) = (vec![], vec![], vec![], vec![], vec![]);
    for (s, shape) in m.shapes.iter().enumerate() {
        if let Some((c, t)) = m.best(s) {
            ns.push(shape.n);
            ks.push(shape.k);
            ms.push(shape.m);
            win.push(m.candidates[c].to_string());
            us.push(t);
        }
    }
    df!("N" => ns, "K" => ks, "M" => ms, "winner" => win, "best_us" => us)
}

/// How often each candidate wins, per layer: `N, K, winner, wins`, sorted by layer then wins (descending).
pub fn winner_counts(m: &LatencyMatrix) -> PolarsResult<DataFrame> {
    best_frame(m)?
        .lazy()
        .group_by([col("N"), col("K"), col("winner")])
        .agg([len().alias("wins")])
        .sort_by_exprs(
            [col("N"), col("K"), col("wins"), col("winner")],
            SortMultipleOptions::default().with_order_descending_multi([false, false, true, false]),
        )
        .collect()
}

/// Per-layer summary: `N, K, M_values, ok, invalid, missing, median_best_us, winners` where `winners` lists
/// `candidate:wins` by decreasing wins. One row per (N, K), ascending.
pub fn summarize(m: &LatencyMatrix) -> DataFrame {
    // The frames are built here with fixed column names and types, so the queries cannot fail on any matrix.
    try_summarize(m).expect("per-layer summary queries run on frames of known schema")
}

/// [`summarize`], returning polars errors instead of panicking.
pub fn try_summarize(m: &LatencyMatrix) -> PolarsResult<DataFrame> {
    let keys = [col("N"), col("K")];
    let counts = cells_frame(m)?.lazy().group_by(keys.clone()).agg([
        col("M").n_unique().alias("M_values"),
        col("status").eq(lit("ok")).sum().alias("ok"),
        col("status").eq(lit("invalid")).sum().alias("invalid"),
        col("status").eq(lit("missing")).sum().alias("missing"),
    ]);
    let medians = best_frame(m)?.lazy().group_by(keys.clone()).agg([col("best_us").median().alias("median_best_us")]);
    let wins = winner_counts(m)?;
    let (mut wn, mut wk, mut text): (Vec<u32>, Vec<u32>, Vec<String>) = (vec![], vec![], vec![]);
    let (n_col, k_col, w_col, c_col) = (
        wins.column("N")?.u32()?,
        wins.column("K")?.u32()?,
        wins.column("winner")?.str()?,
        wins.column("wins")?.u32()?,
    );
    for i in 0..wins.height() {
        let (n, k) = (n_col.get(i).unwrap_or(0), k_col.get(i).unwrap_or(0));
        let entry = format!("{}:{}", w_col.get(i).unwrap_or(""), c_col.get(i).unwrap_or(0));
        if wn.last() == Some(&n) && wk.last() == Some(&k) {
            let last = text.last_mut().expect("pushed with the layer");
            last.push(' ');
            last.push_str(&entry);
        } else {
            wn.push(n);
            wk.push(k);
            text.push(entry);
        }
    }
    let winners = df!("N" => wn, "K" => wk, "winners" => text)?.lazy();
    let args = || JoinArgs::new(JoinType::Left);
    counts
        .join(medians, keys.clone(), keys.clone(), args())
        .join(winners, keys.clone(), keys, args())
        .sort(["N", "K"], SortMultipleOptions::default())
        .collect()
}

fn cell_text(v: &AnyValue) -> String {
    match v {
        AnyValue::Null => String::new(),
        AnyValue::Float64(x) => format!("{x:.3}"),
        AnyValue::Float32(x) => format!("{x:.3}"),
        AnyValue::String(s) => s.to_string(),
        AnyValue::StringOwned(s) => s.to_string(),
        other => other.to_string(),
    }
}

/// Header and rows of a frame as display strings (floats with 3 decimals, nulls empty).
pub fn frame_strings(df: &DataFrame) -> PolarsResult<(Vec<String>, Vec<Vec<String>>)> {
    let header: Vec<String> = df.get_column_names().iter().map(|s| s.to_string()).collect();
    let mut rows = vec![Vec::with_capacity(header.len()); df.height()];
    for column in df.get_columns() {
        let series = column.as_materialized_series();
        for (i, row) in rows.iter_mut().enumerate() {
            row.push(cell_text(&series.get(i)?));
        }
    }
    Ok((header, rows))
}

/// The frame as an aligned text table (text left-aligned, numbers right-aligned).
pub fn frame_to_table(df: &DataFrame) -> PolarsResult<String> {
    let (header, rows) = frame_strings(df)?;
    let columns = header
        .iter()
        .zip(df.get_columns())
        .map(|(h, c)| {
            if c.dtype().is_primitive_numeric() {
                synth_base::textable::right(h)
            } else {
                synth_base::textable::left(h)
            }
        })
        .collect();
    let mut t = synth_base::textable::TextTable::new(columns);
    for r in rows {
        t.row(r);
    }
    Ok(t.render())
}

/// The frame as CSV text.
pub fn frame_to_csv(df: &DataFrame) -> anyhow::Result<String> {
    let (header, rows) = frame_strings(df)?;
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&header)?;
    for r in &rows {
        w.write_record(r)?;
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}

/// The frame as a JSON array of objects (numbers stay numbers).
pub fn frame_to_json(df: &DataFrame) -> PolarsResult<serde_json::Value> {
    let names = df.get_column_names();
    let mut out = vec![serde_json::Map::new(); df.height()];
    for (name, column) in names.iter().zip(df.get_columns()) {
        let series = column.as_materialized_series();
        for (i, obj) in out.iter_mut().enumerate() {
            let v = series.get(i)?;
            let json = match &v {
                AnyValue::Null => serde_json::Value::Null,
                AnyValue::Float64(x) => serde_json::json!(x),
                AnyValue::Float32(x) => serde_json::json!(x),
                AnyValue::UInt32(x) => serde_json::json!(x),
                AnyValue::UInt64(x) => serde_json::json!(x),
                AnyValue::Int32(x) => serde_json::json!(x),
                AnyValue::Int64(x) => serde_json::json!(x),
                other => serde_json::Value::String(cell_text(other)),
            };
            obj.insert(name.to_string(), json);
        }
    }
    Ok(serde_json::Value::Array(out.into_iter().map(serde_json::Value::Object).collect()))
}
