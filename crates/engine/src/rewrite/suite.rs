//! A suite of rewrite tasks: every task spec (`*.toml`) of one directory, each run by the loop into its
//! own output directory, summarized the way kernel-agent papers count: per task whether the candidates
//! built, whether a correct one exists, the best speedup over the original, and the wall time; overall
//! the counts, the geometric-mean speedup and the fraction of tasks made at least 5% faster. The summary
//! is written as markdown, JSON and an SVG bar chart (no timestamps: the same results give the same
//! bytes).

use super::report::{fixed, Report};
use anyhow::{bail, Context};
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A task counts as faster when its best correct candidate beats the original by this factor.
pub const FASTER: f64 = 1.05;

/// Largest speedup the plot draws to scale: the ratio of the longest latency a result line may report
/// to the shortest ([`synth_base::input::US_RANGE`]). A larger or non-finite value (which no checked run
/// produces) is drawn at this height, so every coordinate of the plot is a finite number.
pub const MAX_DRAWN_SPEEDUP: f64 = 1e18;

/// A speedup that counts: finite and positive.
fn usable(speedup: Option<f64>) -> Option<f64> {
    speedup.filter(|s| s.is_finite() && *s > 0.0)
}

/// The task specs of a suite directory: its `*.toml` files, sorted by name (not recursive).
pub fn suite_specs(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).with_context(|| {
        format!("cannot list the suite directory {}; --suite names a directory of task specs", dir.display())
    })?;
    let mut specs = Vec::new();
    for e in entries {
        let e = e.with_context(|| format!("cannot list the suite directory {}", dir.display()))?;
        let p = e.path();
        if p.extension().is_some_and(|x| x == "toml") {
            // A spec that cannot be read as a file is one error, not a task quietly left out of the suite.
            match std::fs::metadata(&p) {
                Ok(m) if m.is_file() => specs.push(p),
                Ok(m) => bail!(
                    "{} in the suite directory is {}, not a task spec file; move it away or replace it with the spec",
                    p.display(),
                    synth_base::paths::file_kind(&m)
                ),
                Err(e) => bail!(
                    "{} in the suite directory cannot be read ({e}; a dangling link?); fix it or move it away",
                    p.display()
                ),
            }
        }
    }
    specs.sort();
    if specs.is_empty() {
        bail!("the suite directory {} holds no task specs (*.toml files)", dir.display());
    }
    Ok(specs)
}

/// One task's line of the summary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskRow {
    pub task: String,
    pub spec: String,
    /// Distinct candidates evaluated (the original included; reused duplicates and proposals that
    /// produced nothing excluded).
    pub candidates: usize,
    /// Candidates that built (the build step succeeded, or the task has none).
    pub built: usize,
    /// Candidates that passed the test.
    pub correct: usize,
    /// Status of the original.
    pub original_status: String,
    pub original_us: Option<f64>,
    /// The fastest correct candidate.
    pub best_us: Option<f64>,
    pub best_id: Option<usize>,
    /// The winner's knob setting or source, as the task report names it.
    pub best_source: Option<String>,
    /// original_us / best_us.
    pub speedup: Option<f64>,
    pub wall_s: f64,
}

/// The whole suite's summary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SuiteSummary {
    pub suite: String,
    pub command: String,
    pub agents: Vec<String>,
    pub tasks: Vec<TaskRow>,
    /// Tasks whose original built and of which at least one candidate built.
    pub tasks_built: usize,
    /// Tasks with a correct candidate.
    pub tasks_correct: usize,
    /// Tasks whose best correct candidate is at least [`FASTER`] times the original.
    pub tasks_faster: usize,
    /// tasks_faster / tasks.
    pub fraction_faster: f64,
    /// Geometric mean of the speedups of the tasks that have one.
    pub geomean_speedup: Option<f64>,
    pub candidates: usize,
    pub candidates_built: usize,
    pub candidates_correct: usize,
    /// Wall time of the tasks, summed (tasks run with `--jobs` overlap, so this can exceed the suite's).
    pub wall_s: f64,
    /// Wall time of the whole suite run.
    #[serde(default)]
    pub suite_wall_s: f64,
}

fn built_status(s: &str) -> bool {
    !matches!(s, "build_error" | "build_timeout" | "setup_error" | "empty" | "propose_error")
}

/// The summary line of one task report.
pub fn task_row(r: &Report) -> TaskRow {
    let distinct: Vec<_> =
        r.candidates.iter().filter(|c| c.duplicate_of.is_none() && c.status != "propose_error").collect();
    let winner = r.winner.as_ref();
    TaskRow {
        task: r.task.clone(),
        spec: r.spec.clone(),
        candidates: distinct.len(),
        built: distinct.iter().filter(|c| built_status(&c.status)).count(),
        correct: distinct.iter().filter(|c| c.status == "ok").count(),
        original_status: r.baseline_status.clone(),
        original_us: r.baseline_latency_us,
        best_us: winner.map(|w| w.latency_us),
        best_id: winner.map(|w| w.id),
        best_source: winner.map(|w| w.source.clone()),
        speedup: winner.and_then(|w| w.speedup),
        wall_s: r.elapsed_s,
    }
}

/// Totals over the rows.
pub fn summarize(
    suite: &str,
    command: &str,
    agents: &[String],
    tasks: Vec<TaskRow>,
    suite_wall_s: f64,
) -> SuiteSummary {
    let speedups: Vec<f64> = tasks.iter().filter_map(|t| usable(t.speedup)).collect();
    let geomean =
        (!speedups.is_empty()).then(|| (speedups.iter().map(|s| s.ln()).sum::<f64>() / speedups.len() as f64).exp());
    let faster = tasks.iter().filter(|t| usable(t.speedup).is_some_and(|s| s >= FASTER)).count();
    SuiteSummary {
        suite: suite.to_string(),
        command: command.to_string(),
        agents: agents.to_vec(),
        tasks_built: tasks.iter().filter(|t| built_status(&t.original_status) && t.built > 0).count(),
        tasks_correct: tasks.iter().filter(|t| t.correct > 0).count(),
        tasks_faster: faster,
        fraction_faster: if tasks.is_empty() { 0.0 } else { faster as f64 / tasks.len() as f64 },
        geomean_speedup: geomean,
        candidates: tasks.iter().map(|t| t.candidates).sum(),
        candidates_built: tasks.iter().map(|t| t.built).sum(),
        candidates_correct: tasks.iter().map(|t| t.correct).sum(),
        wall_s: tasks.iter().map(|t| t.wall_s).sum(),
        suite_wall_s,
        tasks,
    }
}

fn us(x: Option<f64>) -> String {
    x.filter(|v| v.is_finite()).map(|v| fixed(v, 2)).unwrap_or_else(|| "—".into())
}

/// Markdown (`|` and line breaks in names escaped).
pub fn render_markdown(s: &SuiteSummary) -> String {
    // Names come from task specs: control, bidi and invisible characters are shown as code points.
    let cell = |t: &str| synth_base::sanitize::shown(t).replace('|', "\\|");
    let mut o = String::new();
    let _ = writeln!(o, "# Rewrite suite `{}`\n", cell(&s.suite));
    let _ = writeln!(o, "Command: `{}`\n", cell(&s.command));
    let _ =
        writeln!(o, "Agents: {}\n", s.agents.iter().map(|a| format!("`{}`", cell(a))).collect::<Vec<_>>().join(", "));
    let _ = writeln!(o, "| task | candidates | built | correct | original | original µs | best µs | speedup | best candidate | wall s |");
    let _ = writeln!(o, "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: |");
    for t in &s.tasks {
        let sp = usable(t.speedup).map(|x| format!("{}×", fixed(x, 2))).unwrap_or_else(|| "—".into());
        let best = match (&t.best_id, &t.best_source) {
            (Some(id), Some(src)) => format!("#{id} {}", cell(src)),
            _ => "—".into(),
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {sp} | {best} | {} |",
            cell(&t.task),
            t.candidates,
            t.built,
            t.correct,
            cell(&t.original_status),
            us(t.original_us),
            us(t.best_us),
            fixed(t.wall_s, 1)
        );
    }
    let n = s.tasks.len();
    let gm = usable(s.geomean_speedup).map(|g| format!("{}×", fixed(g, 3))).unwrap_or_else(|| "—".into());
    let _ = writeln!(o, "\n| overall | |\n| --- | --- |");
    let _ = writeln!(o, "| tasks built | {} of {n} |", s.tasks_built);
    let _ = writeln!(o, "| tasks with a correct candidate | {} of {n} |", s.tasks_correct);
    let _ = writeln!(o, "| geomean speedup over the original | {gm} |");
    let _ = writeln!(
        o,
        "| tasks ≥ {:.0}% faster | {} of {n} ({}%) |",
        (FASTER - 1.0) * 100.0,
        s.tasks_faster,
        fixed(s.fraction_faster * 100.0, 0)
    );
    let _ = writeln!(
        o,
        "| candidates built / correct | {} / {} of {} |",
        s.candidates_built, s.candidates_correct, s.candidates
    );
    let _ = writeln!(o, "| wall time of the suite | {} s |", fixed(s.suite_wall_s, 1));
    let _ = writeln!(o, "| wall time (sum over tasks) | {} s |", fixed(s.wall_s, 1));
    o
}

/// The height a speedup is drawn at: within `0 ..= MAX_DRAWN_SPEEDUP` (a non-finite one at the top).
fn drawn(speedup: f64) -> f64 {
    if speedup.is_nan() {
        MAX_DRAWN_SPEEDUP
    } else {
        speedup.clamp(0.0, MAX_DRAWN_SPEEDUP)
    }
}

/// Bar chart of the per-task speedups (a dashed line at 1.0 and one at the geomean). Every height is
/// drawn through [`drawn`], so the axis and the bars are finite whatever the summary holds.
pub fn render_svg(s: &SuiteSummary) -> anyhow::Result<String> {
    let n = s.tasks.len().max(1);
    let top = s.tasks.iter().filter_map(|t| t.speedup).map(drawn).fold(1.0f64, f64::max) * 1.15;
    let (w, h) = (160 + 70 * n as u32, 460);
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (w, h)).into_drawing_area();
        root.fill(&WHITE)?;
        let gm = usable(s.geomean_speedup).map(|g| format!("{}x", fixed(g, 2))).unwrap_or_else(|| "-".into());
        let title = format!(
            "{}: speedup over the original (geomean {gm}, {} of {} tasks >= {:.0}% faster)",
            synth_base::sanitize::shown(&s.suite),
            s.tasks_faster,
            s.tasks.len(),
            (FASTER - 1.0) * 100.0
        );
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(120)
            .y_label_area_size(56)
            .build_cartesian_2d((0..n).into_segmented(), 0.0..top)?;
        let names: Vec<String> = s.tasks.iter().map(|t| synth_base::sanitize::shown(&t.task)).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .y_desc("original µs / best µs")
            .label_style(("sans-serif", 14))
            .x_label_style(("sans-serif", 14).into_font().transform(FontTransform::Rotate90))
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_label_formatter(&|y| format!("{y:.1}"))
            .draw()?;
        let bar = RGBColor(31, 119, 180);
        chart.draw_series(s.tasks.iter().enumerate().filter_map(|(i, t)| {
            let sp = drawn(t.speedup?);
            let color = if sp >= FASTER { bar } else { RGBColor(160, 160, 160) };
            let mut r =
                Rectangle::new([(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), sp)], color.filled());
            r.set_margin(0, 0, 8, 8);
            Some(r)
        }))?;
        chart.draw_series(s.tasks.iter().enumerate().filter(|(_, t)| t.speedup.is_none()).map(|(i, _)| {
            Text::new("no correct candidate", (SegmentValue::CenterOf(i), top * 0.02), ("sans-serif", 12))
        }))?;
        let line = |y: f64, color: RGBColor| {
            LineSeries::new(vec![(SegmentValue::Exact(0), y), (SegmentValue::Exact(n), y)], color.stroke_width(1))
        };
        chart.draw_series(line(1.0, RGBColor(0, 0, 0)))?;
        if let Some(g) = usable(s.geomean_speedup) {
            chart.draw_series(line(drawn(g), RGBColor(214, 39, 40)))?.label(format!("geomean {}x", fixed(g, 2)));
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .label_font(("sans-serif", 14))
                .position(SeriesLabelPosition::UpperRight)
                .draw()?;
        }
        root.present()?;
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, sp: Option<f64>, built: usize, correct: usize) -> TaskRow {
        TaskRow {
            task: name.into(),
            spec: format!("{name}.toml"),
            candidates: 4,
            built,
            correct,
            original_status: if correct > 0 { "ok".into() } else { "build_error".into() },
            original_us: sp.map(|_| 10.0),
            best_us: sp.map(|s| 10.0 / s),
            best_id: sp.map(|_| 3),
            best_source: sp.map(|_| "BLOCK=256".into()),
            speedup: sp,
            wall_s: 1.5,
        }
    }

    #[test]
    fn totals_geomean_and_faster_fraction() {
        let s = summarize(
            "t",
            "synth rewrite",
            &["knobs".into()],
            vec![
                row("a", Some(4.0), 4, 3),
                row("b", Some(1.0), 4, 2),
                row("c", Some(1.04), 3, 1),
                row("d", None, 0, 0),
            ],
            2.5,
        );
        // (4 * 1 * 1.04)^(1/3)
        assert!((s.geomean_speedup.unwrap() - (4.16f64).powf(1.0 / 3.0)).abs() < 1e-12);
        assert_eq!((s.tasks_built, s.tasks_correct, s.tasks_faster), (3, 3, 1));
        assert_eq!(s.fraction_faster, 0.25);
        assert_eq!((s.candidates, s.candidates_built, s.candidates_correct), (16, 11, 6));
        assert_eq!(s.wall_s, 6.0);
        let md = render_markdown(&s);
        assert!(md.contains("| a | 4 | 4 | 3 | ok | 10.00 | 2.50 | 4.00× | #3 BLOCK=256 | 1.5 |"), "{md}");
        assert!(md.contains("| tasks ≥ 5% faster | 1 of 4 (25%) |"), "{md}");
        assert!(md.contains("| wall time of the suite | 2.5 s |\n| wall time (sum over tasks) | 6.0 s |"), "{md}");
        assert!(md.contains("| d | 4 | 0 | 0 | build_error | — | — | — | — | 1.5 |"), "{md}");
        let svg = render_svg(&s).unwrap();
        assert_eq!(svg, render_svg(&s).unwrap(), "the plot is deterministic");
        assert!(svg.contains("geomean 1.61x") && svg.contains("no correct candidate"), "{svg}");
    }

    #[test]
    fn markdown_escapes_names() {
        let s = summarize("x|y", "c", &[], vec![row("a|b\nc", Some(2.0), 1, 1)], 1.0);
        let md = render_markdown(&s);
        assert!(md.contains("| a\\|b<U+000A>c |"), "{md}");
    }
}
