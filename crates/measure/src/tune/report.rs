//! The report of a tune: cells measured, GPU seconds, the estimate and how it was made, and the
//! exhaustive tuner's cell count for the same layers.

use std::fmt::Write as _;

use super::{Family, TuneSpec, Tuned};

/// The exhaustive tuner's cells for the same layers: vLLM's and SGLang's tuner measures 1,280 configs at
/// 18 M per (N, K); AITER's, every instance at every split-K level on every shape (`ck_cells`, counted
/// from the universe by the caller).
pub fn exhaustive_cells(family: Family, layers: usize, ck_cells: usize) -> usize {
    match family {
        Family::Triton => 1280 * 18 * layers,
        Family::Ck => ck_cells,
    }
}

/// The report as markdown.
pub fn markdown(spec: &TuneSpec, tuned: &Tuned, exhaustive: usize, what: &str) -> String {
    let cells = tuned.state.known.len();
    let mut t = String::new();
    let _ = writeln!(t, "# synth tune report\n");
    let _ = writeln!(t, "{what}\n");
    let _ = writeln!(t, "- layers: {}", spec.layers.len());
    let _ = writeln!(
        t,
        "- cells measured: {cells} ({:.2}% of the exhaustive tuner's {exhaustive} for the same layers)",
        100.0 * cells as f64 / exhaustive.max(1) as f64
    );
    let secs = tuned.rounds.last().map_or(0.0, |r| r.gpu_seconds);
    let _ = writeln!(t, "- GPU seconds: {secs:.1}");
    let _ = writeln!(t, "- rounds: {}; stopped at {}", tuned.rounds.len(), tuned.stopped);
    match tuned.rounds.last().and_then(|r| r.estimate) {
        Some(e) => {
            let _ = writeln!(
                t,
                "- estimate: the rule reaches {:.4} of the best measured time (geometric mean; loss {:.2}%) on {} \
                 held-out shapes ({} M per layer never trained on, {} cells measured over the whole candidate set)",
                e.of_best,
                100.0 * (1.0 - e.of_best),
                e.shapes,
                spec.method.held_out,
                e.cells
            );
        }
        None => {
            let _ = writeln!(t, "- estimate: none (no held-out shape has a usable cell)");
        }
    }
    let _ = writeln!(t, "\n| round | new cells | cells | GPU s | estimate |\n|---|---|---|---|---|");
    for r in &tuned.rounds {
        let est = r.estimate.map_or("-".to_string(), |e| format!("{:.4}", e.of_best));
        let _ = writeln!(t, "| {} | {} | {} | {:.1} | {est} |", r.round, r.measured, r.known, r.gpu_seconds);
    }
    t
}
