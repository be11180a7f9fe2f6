//! Every report and plot the tool draws, drawn from hostile numbers (0, subnormals, 1e308, NaN, ±inf):
//! each finishes and writes finite numbers only (before, an infinite speedup made drawing `suite.svg`
//! spin forever, and reports printed `NaN` and `inf`).
//!
//! The reports are the stages' (`drift`, `compare`, `rewrite`), so the test is the command layer's, which
//! may import them all.

use std::time::Duration;
use synth_core::catalog::Candidate;
use synth_core::compare::{Outcome, Pick, PolicyKind, PolicyResult, Report, Status, Summary};
use synth_core::drift::report::*;
use synth_core::table::Shape;
use synth_engine::rewrite::report::{render_text, CandidateRow, Report as RewriteReport, Winner};
use synth_engine::rewrite::suite::{render_markdown, render_svg, summarize, TaskRow};

/// The hostile values every figure is drawn from.
const HOSTILE: [f64; 9] = [0.0, 5e-324, 1e-320, 1e-300, 1.0, 1e308, f64::MAX, f64::INFINITY, f64::NAN];

/// Runs `draw` on a thread and fails when it does not finish within a minute.
fn finishes<T: Send + 'static>(what: &str, draw: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(draw());
    });
    rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| panic!("{what}: did not finish in 60 s"))
}

/// No word of a non-finite number in `text`.
fn no_nonfinite_words(what: &str, text: &str) {
    let words = regex::Regex::new(r"(?i)\b(nan|inf|infinity)\b").unwrap();
    assert!(!words.is_match(text), "{what}: {:?} in {text}", words.find(text).map(|m| m.as_str()));
}

/// Every coordinate of an SVG (attributes and path data) is a finite number of at most a million.
fn finite_svg(what: &str, svg: &str) {
    no_nonfinite_words(what, svg);
    let attr = regex::Regex::new(r#"\b(x|y|x1|x2|y1|y2|cx|cy|r|width|height|points|d)="([^"]*)""#).unwrap();
    let number = regex::Regex::new(r"[-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?").unwrap();
    let mut seen = 0;
    for c in attr.captures_iter(svg) {
        for n in number.find_iter(&c[2]) {
            let v: f64 = n.as_str().parse().unwrap();
            assert!(v.is_finite() && v.abs() <= 1e6, "{what}: {}={:?} holds {v}", &c[1], &c[2]);
            seen += 1;
        }
    }
    assert!(seen > 10, "{what}: no coordinates found");
}

fn task_row(i: usize, x: f64) -> TaskRow {
    TaskRow {
        task: format!("t{i}"),
        spec: format!("t{i}.toml"),
        candidates: 3,
        built: 2,
        correct: 1,
        original_status: "ok".into(),
        original_us: Some(x),
        best_us: Some(x),
        best_id: Some(1),
        best_source: Some("V=2".into()),
        speedup: Some(x),
        wall_s: x,
    }
}

#[test]
fn rewrite_suite_and_report_are_finite_for_hostile_values() {
    let mut rows: Vec<TaskRow> = HOSTILE.iter().enumerate().map(|(i, &x)| task_row(i, x)).collect();
    rows.push(TaskRow { speedup: None, ..task_row(99, 2.0) });
    for sets in [rows, vec![task_row(0, f64::INFINITY)], vec![task_row(0, 1e308), task_row(1, 1e308)]] {
        let s = summarize("suite", "synth rewrite", &["knobs".into()], sets, f64::NAN);
        assert!(s.geomean_speedup.is_none_or(f64::is_finite), "{:?}", s.geomean_speedup);
        no_nonfinite_words("suite.md", &render_markdown(&s));
        let svg = finishes("suite.svg", move || render_svg(&s).unwrap());
        finite_svg("suite.svg", &svg);
    }
    let row = |id: usize, x: f64| CandidateRow {
        id,
        iteration: 1,
        slot: 0,
        lineage: 1,
        proposer: "knobs".into(),
        source: "V=2".into(),
        status: "ok".into(),
        latency_us: Some(x),
        speedup: Some(x),
        duplicate_of: None,
        result: None,
        feedback: String::new(),
    };
    for &x in &HOSTILE {
        let r = RewriteReport {
            task: "t".into(),
            spec: "t.toml".into(),
            target: "k.cu".into(),
            command: "synth rewrite".into(),
            baseline_latency_us: Some(x),
            baseline_status: "ok".into(),
            winner: Some(Winner { id: 1, source: "V=2".into(), latency_us: x, speedup: Some(x), path: "o".into() }),
            iterations_run: 1,
            evaluations: 2,
            elapsed_s: x,
            candidates: vec![row(0, x), row(1, x)],
        };
        no_nonfinite_words("report.txt", &render_text(&r));
    }
}

/// A compare report over one layer whose times are the hostile values, in every pairing.
fn compare_report() -> Report {
    let n = HOSTILE.len();
    let shapes: Vec<Shape> = (0..n * n).map(|i| Shape::new([0, 1, 7, u32::MAX][i % 4], 512, 7168)).collect();
    let oracle: Vec<f64> = (0..n * n).map(|i| HOSTILE[i / n]).collect();
    let us: Vec<f64> = (0..n * n).map(|i| HOSTILE[i % n]).collect();
    let summary = Summary {
        shapes: n * n,
        total_us: f64::INFINITY,
        total_vs_default: f64::NAN,
        total_vs_tuned: None,
        geomean_vs_default: f64::NAN,
        geomean_vs_tuned: None,
        of_oracle: f64::NAN,
        missing: 0,
        invalid: 0,
        picks: Default::default(),
        lookups: Default::default(),
    };
    let pick = Pick { candidate: Candidate::new(7, 0), legacy: true, lookup: None };
    let policy = |name: &str, kind: PolicyKind, times: &[f64]| PolicyResult {
        name: name.into(),
        kind,
        outcomes: times.iter().map(|&us| Outcome { pick, status: Status::Ok, us }).collect(),
        summary: summary.clone(),
    };
    Report {
        shapes: (0..n * n).collect(),
        shape_list: shapes,
        unscorable: vec![],
        default_us: us.clone(),
        default_unusable: 0,
        oracle_us: oracle.clone(),
        tuned: None,
        policies: vec![
            policy("default", PolicyKind::Default, &us),
            policy("synthesized", PolicyKind::Rule, &us),
            policy("other", PolicyKind::Rule, &oracle),
            policy("oracle", PolicyKind::Oracle, &oracle),
            policy("none scored", PolicyKind::NearestM, &[f64::NAN; HOSTILE.len() * HOSTILE.len()]),
        ],
    }
}

#[test]
fn compare_plots_and_their_png_are_finite_for_hostile_values() {
    let report = compare_report();
    let names = Default::default();
    let (svg, groups) = finishes("compare plot", move || {
        let svg = synth_core::compare::plot::speedup_svg(&report, &names, "hostile").unwrap();
        let all: Vec<usize> = (0..report.shapes.len()).collect();
        (svg, synth_core::compare::plot::groups_svg(&report, &[("all".into(), all)], "hostile").unwrap())
    });
    finite_svg("speedup plot", &svg);
    finite_svg("groups plot", &groups);
    let png = finishes("compare png", move || synth_core::compare::raster::svg_to_png(&svg).unwrap());
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
}

#[test]
fn the_drift_summary_is_finite_for_hostile_values() {
    for &x in &HOSTILE {
        let r = PlainReport {
            verdict: "drift".into(),
            problems: vec!["p".into()],
            fix: "f".into(),
            ok_line: String::new(),
            rule: "r".into(),
            dataset: "d".into(),
            baseline: Some("b".into()),
            min_fraction: x,
            max_drop: x,
            shape_regret: x,
            configs: vec![ConfigScore {
                config: "all".into(),
                shapes: 1,
                fraction_of_oracle: x,
                baseline_fraction_of_oracle: Some(x),
                unusable: 0,
            }],
            slower: HOSTILE
                .iter()
                .map(|&o| SlowShape { shape: Shape::new(1, 2, 3), pick: "7".into(), us: x, oracle_us: o })
                .collect(),
            unusable: vec![],
            notes: vec![],
        };
        no_nonfinite_words("drift markdown", &markdown(&r));
        let json = serde_json::to_string(&r).unwrap();
        no_nonfinite_words("drift json", &json);
    }
}
