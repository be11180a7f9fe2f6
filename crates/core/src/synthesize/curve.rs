//! Leaves-versus-quality curves: how a rule's held-out quality grows with its leaf budget, trained on a
//! sample of shapes, and on the full grid with k-fold cross-validation over M.

use crate::catalog::Catalog;
use crate::compare::{evaluate, Policy, TunedTable};
use crate::table::LatencyMatrix;

use super::{synthesize_budgets, Limits, SynthError, Synthesized, Weighting};

/// Quality of the rules of one leaf budget.
#[derive(Debug, Clone, PartialEq)]
pub struct CurvePoint {
    /// Which training setting (`sample` or `cv5`).
    pub setting: String,
    /// Leaf budget.
    pub budget: usize,
    /// Leaves the rule(s) actually use (mean over folds).
    pub leaves: f64,
    /// Geomean of oracle / rule time on the training shapes (in-sample; mean over folds).
    pub train_of_oracle: f64,
    /// Geomean of oracle / rule time on the held-out shapes.
    pub heldout_of_oracle: f64,
    /// Geomean of default / rule time on the held-out shapes.
    pub heldout_vs_default: f64,
    /// Geomean of tuned / rule time on the held-out shapes, the tuned table built from the same training
    /// shapes with AITER's lookup.
    pub heldout_vs_tuned: f64,
}

/// Sums of log ratios over scored shapes.
#[derive(Default, Clone)]
struct Acc {
    leaves: f64,
    train_log: f64,
    folds: usize,
    oracle_log: f64,
    default_log: f64,
    tuned_log: f64,
    shapes: usize,
}

/// Scores `rules` (one per budget) trained on `train` on the `test` shapes, adding to `acc`.
fn score_fold(
    matrix: &LatencyMatrix,
    catalog: &Catalog,
    train: &[usize],
    test: &[usize],
    rules: &[Synthesized],
    acc: &mut [Acc],
) {
    let tuned = TunedTable::from_matrix(matrix, train, "training shapes");
    let mut policies = vec![Policy::Tuned { name: "tuned".into(), table: tuned }];
    policies
        .extend(rules.iter().enumerate().map(|(i, r)| Policy::Rule { name: format!("rule{i}"), rule: r.rule.clone() }));
    let held = evaluate(matrix, catalog, &policies, test);
    let seen = evaluate(matrix, catalog, &policies, train);
    let tuned_us = &held.tuned.as_ref().expect("a tuned policy is scored").1;
    for (i, r) in rules.iter().enumerate() {
        let a = &mut acc[i];
        a.leaves += r.leaves as f64;
        a.train_log += seen.policies[i + 1].summary.of_oracle.ln();
        a.folds += 1;
        for (j, o) in held.policies[i + 1].outcomes.iter().enumerate() {
            a.oracle_log += (held.oracle_us[j] / o.us).ln();
            a.default_log += (held.default_us[j] / o.us).ln();
            a.tuned_log += (tuned_us[j] / o.us).ln();
            a.shapes += 1;
        }
    }
}

fn points(setting: &str, budgets: &[usize], acc: Vec<Acc>) -> Vec<CurvePoint> {
    budgets
        .iter()
        .zip(acc)
        .map(|(&budget, a)| {
            let per_shape = |x: f64| {
                if a.shapes == 0 {
                    1.0
                } else {
                    (x / a.shapes as f64).exp()
                }
            };
            CurvePoint {
                setting: setting.to_string(),
                budget,
                leaves: a.leaves / a.folds.max(1) as f64,
                train_of_oracle: (a.train_log / a.folds.max(1) as f64).exp(),
                heldout_of_oracle: per_shape(a.oracle_log),
                heldout_vs_default: per_shape(a.default_log),
                heldout_vs_tuned: per_shape(a.tuned_log),
            }
        })
        .collect()
}

/// The curve of rules already synthesized on `train` (one per entry of `budgets`), scored on `heldout`, under
/// a setting name (`sample`; `lomo:CONFIG` for the rules of one leave-one-model-out fold), its points in
/// ascending budget order.
pub fn sample_curve(
    setting: &str,
    matrix: &LatencyMatrix,
    catalog: &Catalog,
    train: &[usize],
    heldout: &[usize],
    rules: &[Synthesized],
    budgets: &[usize],
) -> Vec<CurvePoint> {
    let mut acc = vec![Acc::default(); budgets.len()];
    score_fold(matrix, catalog, train, heldout, rules, &mut acc);
    let mut out = points(setting, budgets, acc);
    out.sort_by_key(|p| p.budget);
    out
}

/// The fold (0..folds) of each of `shapes`: distinct M values in ascending order are dealt to folds in
/// turn, so every fold spans the whole M range and holds every layer's shapes of its M values.
pub fn m_folds(matrix: &LatencyMatrix, shapes: &[usize], folds: usize) -> Vec<usize> {
    let ms: Vec<u32> =
        shapes.iter().map(|&s| matrix.shapes[s].m).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    shapes.iter().map(|&s| ms.binary_search(&matrix.shapes[s].m).expect("M collected above") % folds.max(1)).collect()
}

/// `folds`-fold cross-validation over M on `shapes`: each fold's M values are held out in turn, the rule
/// trained on the other folds' shapes.
pub fn cv_curve(
    matrix: &LatencyMatrix,
    catalog: &Catalog,
    shapes: &[usize],
    folds: usize,
    weighting: Weighting,
    limits: &Limits,
    budgets: &[usize],
) -> Result<Vec<CurvePoint>, SynthError> {
    let fold_of = m_folds(matrix, shapes, folds);
    let mut acc = vec![Acc::default(); budgets.len()];
    for f in 0..folds {
        let (test, train): (Vec<usize>, Vec<usize>) = (0..shapes.len()).partition(|&i| fold_of[i] == f);
        let test: Vec<usize> = test.into_iter().map(|i| shapes[i]).collect();
        let train: Vec<usize> = train.into_iter().map(|i| shapes[i]).collect();
        if train.is_empty() || test.is_empty() {
            continue;
        }
        let weights = weighting.weights(matrix, &train);
        let rules = synthesize_budgets(matrix, catalog, &train, weights.as_deref(), limits, budgets)?;
        score_fold(matrix, catalog, &train, &test, &rules, &mut acc);
    }
    Ok(points(&format!("cv{folds}"), budgets, acc))
}

/// Header of [`curve_csv`].
pub const CURVE_COLUMNS: &str =
    "setting,budget,leaves,train_of_oracle,heldout_of_oracle,heldout_vs_default,heldout_vs_tuned";

/// A point's fields: figures to `digits` decimals, the mean leaf count to two fewer.
fn point_cells(p: &CurvePoint, digits: usize) -> Vec<String> {
    let f = |x: f64| format!("{x:.digits$}");
    vec![
        p.setting.clone(),
        p.budget.to_string(),
        format!("{:.*}", digits - 2, p.leaves),
        f(p.train_of_oracle),
        f(p.heldout_of_oracle),
        f(p.heldout_vs_default),
        f(p.heldout_vs_tuned),
    ]
}

/// The curve as CSV (fixed decimals).
pub fn curve_csv(points: &[CurvePoint]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut put = |record: &[String]| w.write_record(record).expect("writing CSV to memory cannot fail");
    put(&CURVE_COLUMNS.split(',').map(str::to_string).collect::<Vec<_>>());
    for p in points {
        put(&point_cells(p, 4));
    }
    String::from_utf8(w.into_inner().expect("an in-memory CSV flushes")).expect("CSV of UTF-8 fields is UTF-8")
}

/// The curve as a terminal table.
pub fn curve_table(points: &[CurvePoint]) -> String {
    use synth_base::textable::{left, right, TextTable};
    let titles = ["budget", "leaves", "train of oracle", "held-out of oracle", "x default (geo)", "x tuned (geo)"];
    let mut t = TextTable::new([left("setting")].into_iter().chain(titles.map(right)).collect());
    for p in points {
        t.row(point_cells(p, 3));
    }
    t.render()
}
