//! SVG plot of a [`Report`]: how far each policy is from the per-shape oracle, where, and against AITER's
//! default and tuned table. One panel per group of shapes ([`Panel`]; [`speedup_svg`] makes one per
//! (N, K) layer, and a caller may group by (model, TP, layer) the same way), two panels a row, 900 px
//! wide. In each panel M is on a log axis and every scored shape is a marker at its measured M
//! (no line bridges the M values that were not scored); y is the oracle's time / the policy's time
//! (1.0 = the fastest kernel of that shape). Each policy has its own marker and colour, and the legend
//! gives its geomean over the panel's shapes. The output is a string with no timestamps, so it can be
//! committed and checked for freshness.

use plotters::prelude::*;

use super::report::{layer_name, LayerNames};
use super::{PolicyKind, Report};

/// Width of the picture in pixels (readable at this width, e.g. in a README).
pub const WIDTH: u32 = 900;
/// Height of one row of panels.
const ROW_HEIGHT: u32 = 380;
/// Panels per row.
const COLUMNS: usize = 2;
/// Top of the y axis (a fraction of the oracle is at most 1.0; a point above is drawn at the top).
const YMAX: f64 = 1.02;

/// Colours of rule policies other than the synthesized one, in order.
const RULE_COLOURS: [RGBColor; 5] = [
    RGBColor(148, 103, 189),
    RGBColor(44, 160, 44),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
];
const SYNTHESIZED: RGBColor = RGBColor(214, 39, 40);

/// A group of scored shapes drawn as one panel.
#[derive(Debug, Clone)]
pub struct Panel {
    pub title: String,
    /// Indices into the report's scored shapes.
    pub shapes: Vec<usize>,
}

/// Marker shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    Cross,
    Triangle,
    Square,
    Diamond,
    Disc,
}

/// Colour, marker and drawing order (lower first) of each policy; `None` for the oracle (the 1.0 line).
fn styles(report: &Report) -> Vec<Option<(RGBColor, Mark, u8)>> {
    let mut rules = 0;
    report
        .policies
        .iter()
        .map(|p| match p.kind {
            PolicyKind::Default => Some((RGBColor(0, 0, 0), Mark::Cross, 1)),
            PolicyKind::Tuned => Some((RGBColor(31, 119, 180), Mark::Triangle, 1)),
            PolicyKind::NearestM => Some((RGBColor(255, 127, 14), Mark::Square, 1)),
            PolicyKind::Oracle => None,
            PolicyKind::Rule if p.name == "synthesized" => Some((SYNTHESIZED, Mark::Disc, 2)),
            PolicyKind::Rule => {
                rules += 1;
                Some((RULE_COLOURS[(rules - 1) % RULE_COLOURS.len()], Mark::Diamond, 1))
            }
        })
        .collect()
}

/// The plot with one panel per (N, K) layer, `title` on top.
pub fn speedup_svg(report: &Report, names: &LayerNames, title: &str) -> anyhow::Result<String> {
    let panels: Vec<Panel> = report
        .layers()
        .into_iter()
        .map(|((n, k), shapes)| Panel { title: format!("{} (N={n}, K={k})", layer_name(names, n, k)), shapes })
        .collect();
    panels_svg(report, &panels, title)
}

/// The plot of the given panels, `title` on top.
pub fn panels_svg(report: &Report, panels: &[Panel], title: &str) -> anyhow::Result<String> {
    let style = styles(report);
    let rows = panels.len().div_ceil(COLUMNS).max(1) as u32;
    let (w, h) = (WIDTH, ROW_HEIGHT * rows + 70);
    let mut order: Vec<usize> = (0..report.policies.len()).filter(|&p| style[p].is_some()).collect();
    order.sort_by_key(|&p| (style[p].map_or(0, |s| s.2), p));
    let plotted = Plotted { report, style: &style, order: &order };
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (w, h)).into_drawing_area();
        root.fill(&WHITE)?;
        // Names come from file names and manifests: a control character is not even valid XML, so every
        // text drawn from data shows its hazards as code points.
        let root = root.titled(&synth_base::sanitize::shown(title), ("sans-serif", 24))?;
        let (subtitle, body) = root.split_vertically(30);
        subtitle.draw(&Text::new(
            "y: oracle time / policy time per scored shape (1.0 = the fastest kernel of that shape); legend: geomean",
            (8, 4),
            ("sans-serif", 17),
        ))?;
        let cells = body.split_evenly((rows as usize, COLUMNS));
        for (panel, area) in panels.iter().zip(cells.iter()) {
            plotted.draw_panel(panel, area)?;
        }
        root.present()?;
    }
    Ok(buf)
}

/// A panel's chart: M on a log axis, the fraction of the oracle up to [`YMAX`].
type PanelChart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::combinators::LogCoord<f64>, plotters::coord::types::RangedCoordf64>,
>;

/// What every panel draws: the report, each policy's style (None: not drawn) and the drawing order.
struct Plotted<'a> {
    report: &'a Report,
    style: &'a [Option<(RGBColor, Mark, u8)>],
    order: &'a [usize],
}

impl Plotted<'_> {
    /// Policy `p`'s fraction of the oracle on shape `i`.
    fn fraction(&self, p: usize, i: usize) -> f64 {
        self.report.oracle_us[i] / self.report.policies[p].outcomes[i].us
    }

    /// One panel: its axes (M range and lowest fraction of its shapes), the 1.0 line, each policy's points
    /// and the legend.
    fn draw_panel(&self, panel: &Panel, area: &DrawingArea<SVGBackend, plotters::coord::Shift>) -> anyhow::Result<()> {
        let report = self.report;
        let ms = panel.shapes.iter().map(|&i| f64::from(report.shape_list[i].m.max(1)));
        let xmin = ms.clone().fold(f64::INFINITY, f64::min).min(1.0e9) / 1.3;
        let xmax = (ms.fold(0.0, f64::max) * 1.3).max(xmin * 2.0);
        let lowest = self
            .order
            .iter()
            .flat_map(|&p| panel.shapes.iter().map(move |&i| (p, i)))
            .map(|(p, i)| self.fraction(p, i))
            .filter(|f| f.is_finite())
            .fold(1.0, f64::min);
        let ymin = (lowest - 0.05).max(0.0);
        let mut chart = ChartBuilder::on(area)
            .caption(synth_base::sanitize::shown(&panel.title), ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(52)
            .build_cartesian_2d((xmin..xmax).log_scale(), ymin..YMAX)?;
        chart
            .configure_mesh()
            .x_desc("M")
            .y_desc("fraction of oracle")
            .x_labels(6)
            .y_labels(6)
            .max_light_lines(0)
            .label_style(("sans-serif", 17))
            .axis_desc_style(("sans-serif", 17))
            .x_label_formatter(&|x| format!("{}", x.round() as u64))
            .y_label_formatter(&|y| format!("{y:.2}"))
            .draw()?;
        chart.draw_series(LineSeries::new(vec![(xmin, 1.0), (xmax, 1.0)], RGBColor(120, 120, 120).stroke_width(1)))?;
        for &p in self.order {
            let Some((color, mark, _)) = self.style[p] else { continue };
            let (pts, label) = self.series(panel, p);
            draw_marks(&mut chart, &pts, label, color, mark)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .label_font(("sans-serif", 16))
            .position(SeriesLabelPosition::LowerRight)
            .draw()?;
        Ok(())
    }

    /// Policy `p`'s points on a panel (each inside the axes: finite, at most [`YMAX`]) and its legend
    /// label with the geomean of its fractions.
    fn series(&self, panel: &Panel, p: usize) -> (Vec<(f64, f64)>, String) {
        let report = self.report;
        let pts: Vec<(f64, f64)> = panel
            .shapes
            .iter()
            .map(|&i| (f64::from(report.shape_list[i].m.max(1)), self.fraction(p, i)))
            .filter(|q| q.1.is_finite() && q.1 >= 0.0)
            .collect();
        let logs: f64 = pts.iter().map(|q| q.1.ln()).sum();
        let geomean = (logs / pts.len() as f64).exp();
        let geomean = if geomean.is_finite() { format!("{geomean:.3}") } else { "-".to_string() };
        let label = format!("{} {geomean}", synth_base::sanitize::shown(&report.policies[p].name));
        // Every point inside the axes: each coordinate written is a finite number of the panel.
        let pts = pts.into_iter().map(|(x, y)| (x, y.min(YMAX))).collect();
        (pts, label)
    }
}

/// A policy's points as `mark`s of `color`, with its legend entry.
fn draw_marks<'a, 'b: 'a>(
    chart: &mut PanelChart<'a, 'b>,
    pts: &[(f64, f64)],
    label: String,
    color: RGBColor,
    mark: Mark,
) -> anyhow::Result<()> {
    // Each marker is an element at the point's pixel, offset in pixels.
    macro_rules! draw {
        ($elem:expr) => {{
            chart
                .draw_series(pts.iter().map(|&q| EmptyElement::at(q) + $elem))?
                .label(label)
                .legend(move |(x, y)| EmptyElement::at((x + 8, y)) + $elem);
        }};
    }
    const S: i32 = 5;
    match mark {
        Mark::Cross => draw!(PathElement::new(vec![(-S, -S), (S, S), (0, 0), (-S, S), (S, -S)], color.stroke_width(2))),
        Mark::Triangle => {
            draw!(PathElement::new(vec![(0, -S - 1), (S + 1, S), (-S - 1, S), (0, -S - 1)], color.stroke_width(2)))
        }
        Mark::Square => draw!(Rectangle::new([(-S + 1, -S + 1), (S - 1, S - 1)], color.stroke_width(2))),
        Mark::Diamond => draw!(Polygon::new(vec![(0, -S - 1), (S + 1, 0), (0, S + 1), (-S - 1, 0)], color.filled())),
        Mark::Disc => draw!(Circle::new((0, 0), 4, color.filled())),
    }
    Ok(())
}

/// Fraction of the oracle per group of shapes (e.g. one (model, TP) configuration per panel), drawn by
/// [`panels_svg`] with the group names as panel titles.
pub fn groups_svg(report: &Report, groups: &[(String, Vec<usize>)], title: &str) -> anyhow::Result<String> {
    let panels: Vec<Panel> = groups
        .iter()
        .map(|(name, shapes)| Panel { title: format!("{name} ({} shapes)", shapes.len()), shapes: shapes.clone() })
        .collect();
    panels_svg(report, &panels, title)
}
