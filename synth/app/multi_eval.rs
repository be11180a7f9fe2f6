//! Evaluations of rules on the multi-model data of a dataset manifest (`measurements/h200/datasets.toml`),
//! shared by the main job and by `compare`, `search` and `drift` when their `--dataset` is a manifest:
//!
//! - (a) held-out grid shapes and (b) off-grid M of the training configurations;
//! - per configuration: every shape of each (model, TP) configuration, one row each;
//! - (d) every shape without a tuned row (AITER's lookup-then-fallback path).
//!
//! Scoring is [`compare::evaluate`]'s everywhere (a pick of a missing or invalid cell is charged the
//! default's time), so a rule's figure for a configuration is the same in every command.

use std::collections::BTreeSet;

use synth_core::compare::{self, Policy, Report, TunedTable};

use super::shared::{published_rule, shown, EVALUATIONS_COLUMNS, PUBLISHED_RULE_NAME};
use synth_core::manifest::MultiData;

use super::shared::{of_oracle, unusable};

/// The policies of every evaluation: default, tuned (AITER: lookup, miss → default), nearest-M, tuned→rule,
/// the published rule, the rule under `name`, the oracle; tables built from `train`.
pub fn policies_named(
    data: &MultiData,
    train: &[usize],
    rule: &synth_core::rule::Rule,
    name: &str,
) -> anyhow::Result<Vec<Policy>> {
    let tuned = TunedTable::from_matrix(&data.matrix, train, &format!("best of {} training shapes", train.len()));
    Ok(vec![
        Policy::Default,
        Policy::Tuned { name: "tuned".into(), table: tuned.clone() },
        Policy::NearestM { name: "nearest-M".into(), table: tuned.clone() },
        Policy::TunedRule { name: "tuned→rule".into(), table: tuned, rule: rule.clone() },
        Policy::Rule { name: PUBLISHED_RULE_NAME.into(), rule: published_rule(&data.catalog)? },
        Policy::Rule { name: name.into(), rule: rule.clone() },
        Policy::Oracle,
    ])
}

/// One evaluation: its name (`heldout-grid`, `off-grid`, `config`, `untuned`), the configuration it is
/// about (`training`, a configuration name, `all`) and the report.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub evaluation: &'static str,
    pub config: String,
    pub report: Report,
}

/// Held-out grid shapes and off-grid shapes of `configs`, given the training shapes `train`.
pub fn training_splits(data: &MultiData, configs: &[usize], train: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let in_train: BTreeSet<usize> = train.iter().copied().collect();
    let grid_held: BTreeSet<usize> =
        configs.iter().flat_map(|&c| data.configs[c].grid.iter().copied()).filter(|s| !in_train.contains(s)).collect();
    let off: BTreeSet<usize> = configs.iter().flat_map(|&c| data.configs[c].off_grid.iter().copied()).collect();
    (grid_held.into_iter().collect(), off.into_iter().collect())
}

/// Every configuration's shapes scored with `policies`, one evaluation per configuration.
pub fn per_config(data: &MultiData, policies: &[Policy]) -> Vec<Evaluation> {
    use rayon::prelude::*;
    data.configs
        .par_iter()
        .map(|c| Evaluation {
            evaluation: "config",
            config: c.name.clone(),
            report: compare::evaluate(&data.matrix, &data.catalog, policies, &c.shapes()),
        })
        .collect()
}

/// The evaluations of a rule trained on `train` (drawn from `configs`): (a), (b), one per configuration,
/// and (d) on every shape without a tuned row of the training shapes.
pub fn evaluations(data: &MultiData, configs: &[usize], train: &[usize], policies: &[Policy]) -> Vec<Evaluation> {
    let (grid_held, off) = training_splits(data, configs, train);
    let tuned: BTreeSet<usize> = train.iter().copied().collect();
    let untuned: Vec<usize> = data.all_shapes().into_iter().filter(|s| !tuned.contains(s)).collect();
    let (m, cat) = (&data.matrix, &data.catalog);
    let mut out = vec![
        Evaluation {
            evaluation: "heldout-grid",
            config: "training".into(),
            report: compare::evaluate(m, cat, policies, &grid_held),
        },
        Evaluation {
            evaluation: "off-grid",
            config: "training".into(),
            report: compare::evaluate(m, cat, policies, &off),
        },
    ];
    out.extend(per_config(data, policies));
    out.push(Evaluation {
        evaluation: "untuned",
        config: "all".into(),
        report: compare::evaluate(m, cat, policies, &untuned),
    });
    out
}

/// `report`'s policy rows as records of the evaluations CSV ([`EVALUATIONS_COLUMNS`]); none for a report
/// over no shape (a summary of nothing is no figure).
pub fn put_rows(w: &mut csv::Writer<Vec<u8>>, evaluation: &str, config: &str, report: &Report) {
    if report.shapes.is_empty() {
        return;
    }
    for p in &report.policies {
        let s = &p.summary;
        w.write_record([
            evaluation.to_string(),
            config.to_string(),
            p.name.clone(),
            s.shapes.to_string(),
            format!("{:.4}", s.geomean_vs_default),
            format!("{:.4}", s.total_vs_default),
            format!("{:.4}", s.of_oracle),
            s.missing.to_string(),
            s.invalid.to_string(),
        ])
        .expect("writing CSV to memory cannot fail");
    }
}

/// The evaluations CSV of `evals`.
pub fn evaluations_csv(evals: &[Evaluation]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(EVALUATIONS_COLUMNS.split(',')).expect("writing CSV to memory cannot fail");
    for e in evals {
        put_rows(&mut w, e.evaluation, &e.config, &e.report);
    }
    String::from_utf8(w.into_inner().expect("an in-memory CSV flushes")).expect("UTF-8")
}

/// One row per configuration: shapes, each policy's geomean fraction of the oracle, and the picks of
/// unusable cells by `focus`.
pub fn per_config_table(evals: &[Evaluation], focus: &str) -> String {
    use synth_base::textable::{left, right, TextTable};
    let rows: Vec<&Evaluation> = evals.iter().filter(|e| e.evaluation == "config").collect();
    let Some(first) = rows.first() else { return String::new() };
    let names: Vec<&str> = first.report.policies.iter().map(|p| p.name.as_str()).collect();
    let mut columns = vec![left("configuration").min(18), right("shapes").min(6)];
    columns.extend(names.iter().map(|n| right(n).min(9)));
    columns.push(right("unusable").min(9));
    let mut t = TextTable::new(columns).gap(1).indent("  ");
    for e in rows {
        let mut cells = vec![shown(&e.config), e.report.shapes.len().to_string()];
        cells.extend(names.iter().map(|n| format!("{:.3}", of_oracle(&e.report, n))));
        cells.push(unusable(&e.report, focus).to_string());
        t.row(cells);
    }
    t.render()
}

/// The lowest fraction of the oracle of `policy` over the per-configuration evaluations, with its
/// configuration.
pub fn worst_config<'a>(evals: &'a [Evaluation], policy: &str) -> Option<(&'a str, f64)> {
    evals
        .iter()
        .filter(|e| e.evaluation == "config")
        .map(|e| (e.config.as_str(), of_oracle(&e.report, policy)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}
