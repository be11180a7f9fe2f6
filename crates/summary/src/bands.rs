//! Winners per M band and (N, K): which candidates win where, for tables with one winner per shape (AITER's
//! tuned CSVs) and full latency tables alike (the winner is the fastest usable candidate of each shape).

use polars::prelude::*;

use synth_core::table::bands::{band_of, BAND_EDGES};
use synth_core::table::LatencyMatrix;

use crate::summary::best_frame;

/// Frame `band, N, K, shapes, distinct, winners` (winners as `candidate:wins` by decreasing wins), sorted
/// by band then (N, K); a first block with N = K = 0 is every layer of the band together.
pub fn band_winners(m: &LatencyMatrix) -> PolarsResult<DataFrame> {
    let best = best_frame(m)?;
    let band_lo: Vec<u32> = best
        .column("M")?
        .u32()?
        .into_iter()
        .map(|v| {
            let v = v.unwrap_or(0);
            let mut lo = 1;
            for hi in BAND_EDGES {
                if v <= hi {
                    return lo;
                }
                lo = hi + 1;
            }
            lo
        })
        .collect();
    let mut best = best;
    best.with_column(Column::new("band_lo".into(), band_lo))?;
    let all = best
        .clone()
        .lazy()
        .with_columns([lit(0u32).cast(DataType::UInt32).alias("N"), lit(0u32).cast(DataType::UInt32).alias("K")])
        .collect()?;
    let both = best.vstack(&all)?;
    let counts = both
        .lazy()
        .group_by([col("band_lo"), col("N"), col("K"), col("winner")])
        .agg([len().alias("wins")])
        .sort_by_exprs(
            [col("band_lo"), col("N"), col("K"), col("wins"), col("winner")],
            SortMultipleOptions::default().with_order_descending_multi([false, false, false, true, false]),
        )
        .collect()?;
    let (b, n, k, w, c) = (
        counts.column("band_lo")?.u32()?,
        counts.column("N")?.u32()?,
        counts.column("K")?.u32()?,
        counts.column("winner")?.str()?,
        counts.column("wins")?.u32()?,
    );
    let (mut bands, mut ns, mut ks, mut shapes, mut distinct, mut winners) = (
        Vec::<String>::new(),
        Vec::<u32>::new(),
        Vec::<u32>::new(),
        Vec::<u32>::new(),
        Vec::<u32>::new(),
        Vec::<String>::new(),
    );
    let mut last: Option<(u32, u32, u32)> = None;
    for i in 0..counts.height() {
        let key = (b.get(i).unwrap_or(0), n.get(i).unwrap_or(0), k.get(i).unwrap_or(0));
        let entry = format!("{}:{}", w.get(i).unwrap_or(""), c.get(i).unwrap_or(0));
        if last == Some(key) {
            let j = winners.len() - 1;
            winners[j].push(' ');
            winners[j].push_str(&entry);
            shapes[j] += c.get(i).unwrap_or(0);
            distinct[j] += 1;
        } else {
            bands.push(band_of(key.0));
            ns.push(key.1);
            ks.push(key.2);
            shapes.push(c.get(i).unwrap_or(0));
            distinct.push(1);
            winners.push(entry);
            last = Some(key);
        }
    }
    let n_text: Vec<String> = ns.iter().map(|&v| if v == 0 { "all".to_string() } else { v.to_string() }).collect();
    let k_text: Vec<String> = ks.iter().map(|&v| if v == 0 { "all".to_string() } else { v.to_string() }).collect();
    df!("M band" => bands, "N" => n_text, "K" => k_text, "shapes" => shapes, "winners" => distinct, "wins" => winners)
}

#[cfg(test)]
mod tests {
    use super::*;
    use synth_core::catalog::Candidate;
    use synth_core::table::{Cell, Shape};

    #[test]
    fn bands_count_winners_per_layer_and_overall() {
        assert_eq!(
            (band_of(1), band_of(64), band_of(65), band_of(1024), band_of(16385)),
            (
                "1-64".to_string(),
                "1-64".to_string(),
                "65-256".to_string(),
                "257-1024".to_string(),
                ">16384".to_string()
            )
        );
        let shapes = vec![
            Shape::new(16, 512, 512),
            Shape::new(32, 512, 512),
            Shape::new(16, 1024, 512),
            Shape::new(2048, 512, 512),
        ];
        let cands = vec![Candidate::new(0, 0), Candidate::new(8, 0)];
        let mut m = LatencyMatrix::new("gfx942", 304, None, shapes, cands);
        m.set(0, 1, Cell::Ok(1.0));
        m.set(1, 1, Cell::Ok(1.0));
        m.set(2, 0, Cell::Ok(1.0));
        m.set(3, 0, Cell::Ok(1.0));
        let df = band_winners(&m).unwrap();
        let (_, rows) = super::super::summary::frame_strings(&df).unwrap();
        let rows: Vec<String> = rows.iter().map(|r| r.join("|")).collect();
        assert_eq!(
            rows,
            vec![
                "1-64|all|all|3|2|#8:2 #0:1",
                "1-64|512|512|2|1|#8:2",
                "1-64|1024|512|1|1|#0:1",
                "1025-4096|all|all|1|1|#0:1",
                "1025-4096|512|512|1|1|#0:1",
            ]
        );
    }
}
