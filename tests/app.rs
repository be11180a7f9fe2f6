//! The application layer: drift and compare score a rule the same way (one scorer), and the session's
//! helpers keep the dataset's shapes of a model.

use gemm_synth::app::args::DataArgs;
use gemm_synth::app::drift::score_rule;
use gemm_synth::app::session::{training_sample, Scope, Session};
use synth_core::catalog::{Candidate, Catalog};
use synth_core::compare::{evaluate, Policy};
use synth_core::rule::{CmpOp, Cond, Expr, Leaf, Node, Rule, Var};
use synth_core::table::{Cell, LatencyMatrix, Shape};

/// M <= 16 → #2, else → #4.
fn two_leaf_rule() -> Rule {
    Rule {
        root: Node::Chain {
            branches: vec![(Cond::cmp(CmpOp::Le, Expr::Var(Var::M), Expr::Lit(16)), Node::Leaf(Leaf::new(2, 0)))],
            otherwise: Box::new(Node::Leaf(Leaf::new(4, 0))),
        },
        note: None,
    }
}

/// Two shapes × (#7 default, #2, #4). The rule's pick on the second shape (#4) failed its check.
fn matrix_with_invalid_pick() -> LatencyMatrix {
    let shapes = vec![Shape::new(16, 5120, 5120), Shape::new(64, 5120, 5120)];
    let cands = vec![Candidate::new(7, 0), Candidate::new(2, 0), Candidate::new(4, 0)];
    let mut m = LatencyMatrix::new("gfx942", 304, None, shapes, cands);
    for (c, us) in [40.0, 10.0, 20.0].into_iter().enumerate() {
        m.set(0, c, Cell::Ok(us));
    }
    m.set(1, 0, Cell::Ok(300.0));
    m.set(1, 1, Cell::Ok(100.0));
    m.set(1, 2, Cell::Invalid("errRatio 0.2 > 0.05".into()));
    m
}

#[test]
fn drift_charges_an_unusable_pick_the_default_time() {
    let catalog = Catalog::embedded();
    let m = matrix_with_invalid_pick();
    let score = score_rule(&two_leaf_rule(), &m, &catalog, 0.25);
    // Shape 0: 10 us = oracle (ratio 1); shape 1: the pick is invalid, charged the default's 300 us against
    // the oracle's 100 us (ratio 1/3). Geomean: sqrt(1/3).
    assert!((score.fraction_of_oracle - (1.0f64 / 3.0).sqrt()).abs() < 1e-12, "{}", score.fraction_of_oracle);
    assert_eq!(score.shapes, 2);
    assert_eq!(score.unusable, vec![(1, Candidate::new(4, 0), "errRatio 0.2 > 0.05".to_string())]);
    assert!(score.regressions.is_empty(), "{:?}", score.regressions);
}

#[test]
fn drift_and_compare_agree() {
    let catalog = Catalog::embedded();
    for m in [matrix_with_invalid_pick(), embedded_dataset(&catalog)] {
        let rule = two_leaf_rule();
        let all: Vec<usize> = (0..m.shapes.len()).collect();
        let report = evaluate(&m, &catalog, &[Policy::Rule { name: "r".into(), rule: rule.clone() }], &all);
        let s = &report.policies[0].summary;
        let drift = score_rule(&rule, &m, &catalog, 0.25);
        assert_eq!(drift.fraction_of_oracle, s.of_oracle);
        assert_eq!(drift.shapes, report.shapes.len());
        assert_eq!(drift.unusable.len(), s.missing + s.invalid);
    }
}

fn embedded_dataset(catalog: &Catalog) -> LatencyMatrix {
    let path = synth_base::paths::crate_root().join(gemm_synth::app::session::DEFAULT_DATASET);
    LatencyMatrix::load(&path, catalog).unwrap()
}

#[test]
fn committed_rule_scores_the_same_in_drift_and_compare() {
    let catalog = Catalog::embedded();
    let m = embedded_dataset(&catalog);
    let path = synth_base::paths::crate_root().join("generated/rule.json");
    let rule = synth_core::rule::load(&path, &catalog).unwrap();
    let all: Vec<usize> = (0..m.shapes.len()).collect();
    let report = evaluate(&m, &catalog, &[Policy::Rule { name: "r".into(), rule: rule.clone() }], &all);
    assert_eq!(score_rule(&rule, &m, &catalog, 0.25).fraction_of_oracle, report.policies[0].summary.of_oracle);
}

#[test]
fn session_keeps_the_model_shapes() {
    let s = Session::open(&DataArgs { tp: 2, ..DataArgs::default() }, Scope::DefaultModel).unwrap();
    assert_eq!(s.what, "qwen3-32b TP=2");
    assert_eq!(s.layers.len(), 4);
    // 4 layers × 80 M values.
    assert_eq!(s.shapes.len(), 320);
    let every = Session::open(&DataArgs { tp: 2, ..DataArgs::default() }, Scope::EveryShape).unwrap();
    assert_eq!(every.what, "every layer");
    assert_eq!(every.shapes.len(), every.matrix.shapes.len());
    // The sample the main job trains on: 10 M values × 4 layers, the rest held out.
    let (train, held, picked) = training_sample(&s.matrix, &s.shapes, 10, 0);
    assert_eq!(picked, vec![2, 4, 16, 32, 96, 288, 768, 1408, 3968, 13312]);
    assert_eq!((train.len(), held.len()), (40, 280));
}

#[test]
fn unknown_model_names_the_flag() {
    let data =
        DataArgs { model: gemm_synth::app::model_args::ModelArgs::builtin("gpt-4o"), tp: 2, ..DataArgs::default() };
    let e = Session::open(&data, Scope::DefaultModel).unwrap_err();
    assert!(format!("{e:#}").contains("--model names the GEMM model"), "{e:#}");
}
