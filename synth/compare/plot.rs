//! SVG plot of a [`Report`]: per-shape speed-ups against the default and against the tuned baseline,
//! one row of panels per (N, K) layer, M on a log axis, one colour per policy (the synthesized rule in
//! red, on top; the oracle in grey, underneath). The output is a string
//! with no timestamps, so it can be committed and checked for freshness.

use plotters::prelude::*;

use super::report::{layer_name, LayerNames};
use super::{PolicyKind, Report};

/// Colours of rule policies, in order; a rule named `synthesized` is red and drawn last and thicker.
const RULE_COLOURS: [RGBColor; 5] = [
    RGBColor(148, 103, 189),
    RGBColor(44, 160, 44),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
];
const SYNTHESIZED: RGBColor = RGBColor(214, 39, 40);

/// Colour, line width and drawing order (lower first) of each policy.
fn styles(report: &Report) -> Vec<(RGBColor, u32, u8)> {
    let mut rules = 0;
    report
        .policies
        .iter()
        .map(|p| match p.kind {
            PolicyKind::Default => (RGBColor(0, 0, 0), 2, 1),
            PolicyKind::Tuned => (RGBColor(31, 119, 180), 2, 1),
            PolicyKind::NearestM => (RGBColor(255, 127, 14), 2, 1),
            PolicyKind::Oracle => (RGBColor(160, 160, 160), 1, 0),
            PolicyKind::Rule if p.name == "synthesized" => (SYNTHESIZED, 3, 2),
            PolicyKind::Rule => {
                rules += 1;
                (RULE_COLOURS[(rules - 1) % RULE_COLOURS.len()], 2, 1)
            }
        })
        .collect()
}

/// The plot as SVG text, `title` on top.
pub fn speedup_svg(report: &Report, names: &LayerNames, title: &str) -> anyhow::Result<String> {
    let layers = report.layers();
    let style = styles(report);
    let baselines: Vec<(&str, &[f64])> = std::iter::once(("default", report.default_us.as_slice()))
        .chain(report.tuned.as_ref().map(|(n, t)| (n.as_str(), t.as_slice())))
        .collect();
    let cols = baselines.len();
    let rows = layers.len().max(1);
    let (w, h) = (560 * cols as u32, 280 * rows as u32 + 40);
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (w, h)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 20))?;
        let panels = root.split_evenly((rows, cols));
        for (li, (&(n, k), idx)) in layers.iter().enumerate() {
            for (bi, &(base_name, base)) in baselines.iter().enumerate() {
                let area = &panels[li * cols + bi];
                let mut series: Vec<(usize, Vec<(f64, f64)>)> = report
                    .policies
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.name != base_name && !(bi == 0 && p.kind == PolicyKind::Default))
                    .map(|(pi, p)| {
                        let pts = idx
                            .iter()
                            .map(|&i| (f64::from(report.shape_list[i].m), base[i] / p.outcomes[i].us))
                            .collect();
                        (pi, pts)
                    })
                    .collect();
                series.sort_by_key(|(pi, _)| (style[*pi].2, *pi));
                let xs = idx.iter().map(|&i| f64::from(report.shape_list[i].m.max(1)));
                let xmin = xs.clone().fold(f64::INFINITY, f64::min);
                let mut xmax = xs.fold(0.0, f64::max);
                if xmax <= xmin {
                    xmax = xmin * 2.0;
                }
                let ys = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.1));
                let ymin = ys.clone().fold(1.0, f64::min) * 0.95;
                let ymax = ys.fold(1.0, f64::max) * 1.05;
                let mut chart = ChartBuilder::on(area)
                    .caption(
                        format!("{} (N={n}, K={k}): speed-up vs {base_name}", layer_name(names, n, k)),
                        ("sans-serif", 14),
                    )
                    .margin(8)
                    .x_label_area_size(30)
                    .y_label_area_size(46)
                    .build_cartesian_2d((xmin..xmax).log_scale(), ymin..ymax)?;
                chart
                    .configure_mesh()
                    .x_desc("M")
                    .y_desc(format!("{base_name} time / policy time"))
                    .x_labels(8)
                    .y_labels(6)
                    .max_light_lines(0)
                    .x_label_formatter(&|x| format!("{}", x.round() as u64))
                    .y_label_formatter(&|y| format!("{y:.2}"))
                    .draw()?;
                chart.draw_series(LineSeries::new(vec![(xmin, 1.0), (xmax, 1.0)], BLACK.mix(0.6)))?;
                for (pi, pts) in series {
                    let (color, width, _) = style[pi];
                    chart
                        .draw_series(LineSeries::new(pts, color.stroke_width(width)))?
                        .label(report.policies[pi].name.clone())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(width)));
                }
                if li == 0 {
                    chart
                        .configure_series_labels()
                        .background_style(WHITE.mix(0.85))
                        .border_style(BLACK.mix(0.4))
                        .position(SeriesLabelPosition::UpperLeft)
                        .draw()?;
                }
            }
        }
        root.present()?;
    }
    Ok(buf)
}

/// Fraction of the oracle per group of shapes (e.g. one (model, TP) configuration per panel), two panels
/// a row: for each policy but the oracle, the geomean of oracle time / policy time over the group's shapes
/// of each M, M on a log axis. `groups` holds (title, positions in [`Report::shapes`]).
pub fn groups_svg(report: &Report, groups: &[(String, Vec<usize>)], title: &str) -> anyhow::Result<String> {
    let style = styles(report);
    let cols = 2usize;
    let rows = groups.len().div_ceil(cols).max(1);
    let (w, h) = (560 * cols as u32, 280 * rows as u32 + 40);
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (w, h)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 20))?;
        let panels = root.split_evenly((rows, cols));
        for (gi, (name, idx)) in groups.iter().enumerate() {
            let mut by_m: std::collections::BTreeMap<u32, Vec<usize>> = std::collections::BTreeMap::new();
            for &i in idx {
                by_m.entry(report.shape_list[i].m).or_default().push(i);
            }
            let mut series: Vec<(usize, Vec<(f64, f64)>)> = report
                .policies
                .iter()
                .enumerate()
                .filter(|(_, p)| p.kind != PolicyKind::Oracle)
                .map(|(pi, p)| {
                    let pts = by_m
                        .iter()
                        .map(|(&m, is)| {
                            let log: f64 =
                                is.iter().map(|&i| (report.oracle_us[i] / p.outcomes[i].us).ln()).sum::<f64>();
                            (f64::from(m.max(1)), (log / is.len() as f64).exp())
                        })
                        .collect();
                    (pi, pts)
                })
                .collect();
            series.sort_by_key(|(pi, _)| (style[*pi].2, *pi));
            let xmin = by_m.keys().next().map_or(1.0, |&m| f64::from(m.max(1)));
            let mut xmax = by_m.keys().next_back().map_or(2.0, |&m| f64::from(m.max(1)));
            if xmax <= xmin {
                xmax = xmin * 2.0;
            }
            let ymin = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.1)).fold(1.0, f64::min) * 0.95;
            let mut chart = ChartBuilder::on(&panels[gi])
                .caption(format!("{name} ({} shapes): fraction of the oracle", idx.len()), ("sans-serif", 14))
                .margin(8)
                .x_label_area_size(30)
                .y_label_area_size(46)
                .build_cartesian_2d((xmin..xmax).log_scale(), ymin..1.02)?;
            chart
                .configure_mesh()
                .x_desc("M")
                .y_desc("oracle time / policy time")
                .x_labels(8)
                .y_labels(6)
                .max_light_lines(0)
                .x_label_formatter(&|x| format!("{}", x.round() as u64))
                .y_label_formatter(&|y| format!("{y:.2}"))
                .draw()?;
            for (pi, pts) in series {
                let (color, width, _) = style[pi];
                chart
                    .draw_series(LineSeries::new(pts, color.stroke_width(width)))?
                    .label(report.policies[pi].name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(width)));
            }
            if gi == 0 {
                chart
                    .configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK.mix(0.4))
                    .position(SeriesLabelPosition::LowerRight)
                    .draw()?;
            }
        }
        root.present()?;
    }
    Ok(buf)
}
