//! The M bands the summaries and the tuned-table weights group shapes by (the winners per band:
//! `synth_summary::bands`).

/// Upper bounds of the M bands (the last band is open).
pub const BAND_EDGES: [u32; 5] = [64, 256, 1024, 4096, 16384];

/// Name of the band of `m`, e.g. `257-1024` or `>16384`.
pub fn band_of(m: u32) -> String {
    let mut lo = 1;
    for hi in BAND_EDGES {
        if m <= hi {
            return format!("{lo}-{hi}");
        }
        lo = hi + 1;
    }
    format!(">{}", BAND_EDGES[BAND_EDGES.len() - 1])
}
