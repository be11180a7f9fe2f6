//! Text forms of a [`Report`]: the terminal table and the per-shape CSV. Both are deterministic (fixed
//! decimal places, no timestamps), so they can be committed and checked for freshness.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Report, Summary};

/// Layer names by (N, K); shapes of other (N, K) are named `N=..,K=..`.
pub type LayerNames = BTreeMap<(u32, u32), String>;

/// The name of the (N, K) layer.
pub fn layer_name(names: &LayerNames, n: u32, k: u32) -> String {
    names.get(&(n, k)).cloned().unwrap_or_else(|| format!("N={n},K={k}"))
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.digits$}"))
}

/// `rows[0]` as the header (first column left-aligned, the others right-aligned) and a rule under it.
fn pad_table(rows: &[Vec<String>]) -> String {
    use synth_base::textable::{left, right, TextTable};
    let Some((header, body)) = rows.split_first() else { return String::new() };
    let columns = header.iter().enumerate().map(|(c, h)| if c == 0 { left(h) } else { right(h) }).collect();
    let mut t = TextTable::new(columns).rule();
    for r in body {
        t.row(r.iter().cloned());
    }
    t.render()
}

/// Candidates picked, most used first: `#8:12 #14/sk1:3`.
fn picks_text(s: &Summary) -> String {
    let mut v: Vec<_> = s.picks.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    v.iter().map(|(c, n)| format!("{c}:{n}")).collect::<Vec<_>>().join(" ")
}

/// The overall table (one row per policy) followed by a per-layer table of geomean speed-up against the
/// default and fraction of the oracle.
pub fn table(report: &Report, names: &LayerNames) -> String {
    let mut out = table_preamble(report);
    out.push_str(&overall_table(report));
    let layers = report.layers();
    if layers.len() > 1 {
        out.push('\n');
        let mut rows = vec![std::iter::once("x default (geo) / of oracle".to_string())
            .chain(layers.keys().map(|&(n, k)| layer_name(names, n, k)))
            .collect::<Vec<_>>()];
        for (pi, p) in report.policies.iter().enumerate() {
            let mut r = vec![synth_base::sanitize::shown(&p.name)];
            for idx in layers.values() {
                let s = report.summarize(pi, idx);
                r.push(format!("{:.3} / {:.3}", s.geomean_vs_default, s.of_oracle));
            }
            rows.push(r);
        }
        out.push_str(&pad_table(&rows));
    }
    out.push('\n');
    write_picks(&mut out, report);
    // Policy names are file names and manifest names: no escape sequence reaches the terminal.
    synth_base::sanitize::shown_with(&out, true)
}

/// The lines before the table: what was scored and how, and a note when the default's cells are unusable.
fn table_preamble(report: &Report) -> String {
    let mut out = String::new();
    let tuned = report.tuned.as_ref().map(|(n, _)| n.as_str()).unwrap_or("-");
    let _ = writeln!(
        out,
        "{} shapes scored{}; \"x default\" is the default's time / the policy's time, \"x tuned\" the same against \
         the tuned table ({tuned}); fallbacks are picks of Missing/Invalid cells, charged the default's time",
        report.shapes.len(),
        if report.unscorable.is_empty() {
            String::new()
        } else {
            format!(", {} unscorable (no usable cell)", report.unscorable.len())
        },
    );
    if report.default_unusable > 0 {
        let _ = writeln!(
            out,
            "note: the default kernel's cell is not usable on {} of the shapes; there every fallback is charged the \
             slowest usable time of the shape (a sparse table, such as a tuned CSV, makes these figures meaningless)",
            report.default_unusable
        );
    }
    out
}

/// One row per policy: totals and geomeans against the default and the tuned table, fallbacks, kernels.
fn overall_table(report: &Report) -> String {
    let mut rows = vec![vec![
        "policy".to_string(),
        "total ms".into(),
        "x default (total)".into(),
        "x default (geo)".into(),
        "x tuned (total)".into(),
        "x tuned (geo)".into(),
        "of oracle".into(),
        "fallbacks".into(),
        "kernels".into(),
    ]];
    for p in &report.policies {
        let s = &p.summary;
        rows.push(vec![
            synth_base::sanitize::shown(&p.name),
            format!("{:.3}", s.total_us / 1000.0),
            format!("{:.3}", s.total_vs_default),
            format!("{:.3}", s.geomean_vs_default),
            opt(s.total_vs_tuned, 3),
            opt(s.geomean_vs_tuned, 3),
            format!("{:.3}", s.of_oracle),
            format!("{}", s.missing + s.invalid),
            format!("{}", s.picks.keys().map(|c| c.kernel()).collect::<std::collections::BTreeSet<_>>().len()),
        ]);
    }
    pad_table(&rows)
}

/// Each policy's picks, after a line saying how to read them.
fn write_picks(out: &mut String, report: &Report) {
    let _ = writeln!(
        out,
        "picks: #id:count is kernelId id on count shapes; #id/skS uses splitK S = log2 of KBatch (2^S K splits)"
    );
    let w = report.policies.iter().map(|p| synth_base::sanitize::shown(&p.name).len()).max().unwrap_or(0);
    for p in &report.policies {
        let _ = writeln!(out, "{:<w$}  picks: {}", synth_base::sanitize::shown(&p.name), picks_text(&p.summary));
    }
}

/// Quotes a CSV field when needed.
/// Header of [`csv`].
pub const CSV_COLUMNS: &str = "layer,M,N,K,policy,kernelId,splitK,lookup,status,us,default_us,tuned_us,oracle_us,speedup_vs_default,speedup_vs_tuned,of_oracle";

/// One row per (scored shape, policy), shapes in report order, policies in report order.
pub fn csv(report: &Report, names: &LayerNames) -> String {
    csv_rows(report, names, None)
}

/// [`csv`] with one more column, `oracle_over_vendor`: the oracle's time over the vendor reference's
/// (e.g. cuBLAS's own blockwise FP8 GEMM) where the reference measured the shape, else empty.
pub fn csv_with_vendor(report: &Report, names: &LayerNames, vendor: &crate::table::multi::VendorTimes) -> String {
    csv_rows(report, names, Some(vendor))
}

fn csv_rows(report: &Report, names: &LayerNames, vendor: Option<&crate::table::multi::VendorTimes>) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut put = |record: &[String]| w.write_record(record).expect("writing CSV to memory cannot fail");
    let mut header: Vec<String> = CSV_COLUMNS.split(',').map(str::to_string).collect();
    if vendor.is_some() {
        header.push("oracle_over_vendor".into());
    }
    put(&header);
    for (i, shape) in report.shape_list.iter().enumerate() {
        let tuned = report.tuned.as_ref().map(|(_, t)| t[i]);
        let reference = vendor.map(|v| {
            v.get(shape)
                .and_then(crate::table::Cell::us)
                .map_or(String::new(), |t| format!("{:.4}", report.oracle_us[i] / t))
        });
        for p in &report.policies {
            let o = &p.outcomes[i];
            let lookup = o.pick.lookup.map_or(String::new(), |k| format!("{k:?}").to_lowercase());
            let mut record = vec![
                layer_name(names, shape.n, shape.k),
                shape.m.to_string(),
                shape.n.to_string(),
                shape.k.to_string(),
                p.name.clone(),
                match o.pick.candidate.backend {
                    crate::catalog::Libtype::Ck => o.pick.candidate.kernel_id.to_string(),
                    b => format!("{b}:{}", o.pick.candidate.kernel_id),
                },
                o.pick.candidate.split_k.to_string(),
                lookup,
                o.status.as_str().to_string(),
                format!("{:.4}", o.us),
                format!("{:.4}", report.default_us[i]),
                opt(tuned, 4),
                format!("{:.4}", report.oracle_us[i]),
                format!("{:.4}", report.default_us[i] / o.us),
                opt(tuned.map(|t| t / o.us), 4),
                format!("{:.4}", report.oracle_us[i] / o.us),
            ];
            record.extend(reference.clone());
            put(&record);
        }
    }
    String::from_utf8(w.into_inner().expect("an in-memory CSV flushes")).expect("CSV of UTF-8 fields is UTF-8")
}
