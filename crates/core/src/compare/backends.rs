//! Policies over several backends (`--backends`): each backend alone at its best (its oracle), the
//! union oracle (the plain [`Policy::Oracle`] over a matrix holding every backend's candidates), and the
//! threshold policy serving stacks use today — one backend's default below an M threshold, another's from
//! it on (AITER PR #5586: Triton from M ≥ 384 on gfx950; vLLM PR #56812; GEAK issue #304: CK up to
//! M = 256) — with the threshold chosen on training shapes.

use crate::catalog::triton::VLLM_DEFAULT;
use crate::catalog::{Backends, Candidate, Catalog, Libtype};
use crate::table::LatencyMatrix;

use super::{fallback_us, Policy};

/// An error when `rule` returns leaves of a backend the scoring cannot call: without `backends`, vendor
/// leaves (vendor rows are a reference only) and CK-tile leaves (no matrix holds CK-tile candidates without
/// `--backends`); with `backends`, every leaf of a backend it does not name. Such picks would be charged
/// the default's time on every shape they cover, which reads as drift or as a slow rule. The message names
/// the `--backends` list that covers the rule.
pub fn check_callable(rule: &crate::rule::Rule, backends: Option<&Backends>) -> Result<(), String> {
    let used: std::collections::BTreeSet<Libtype> = rule.leaves().iter().map(|l| l.backend).collect();
    let callable = |b: Libtype| match backends {
        Some(list) => list.contains(b),
        None => matches!(b, Libtype::Ck | Libtype::Triton),
    };
    let outside: Vec<String> = used.iter().filter(|&&b| !callable(b)).map(|b| b.to_string()).collect();
    if outside.is_empty() {
        return Ok(());
    }
    let all: Vec<String> = used.iter().map(|b| b.to_string()).collect();
    Err(format!(
        "the rule returns {} leaves, which {}: add --backends {} and give the journals that measure them as \
         --dataset (repeatable)",
        outside.join(" and "),
        match backends {
            Some(b) => format!("--backends {b} does not name"),
            None => "are not candidates without --backends (vendor rows are a reference only)".to_string(),
        },
        all.join(",")
    ))
}

/// `Err` naming the backends whose leaves `rule` returns but of which `matrix` holds no candidate at all
/// (a rule over the triton family scored on CK journals): every such pick is unusable there and charged the
/// default's time, so the figures say nothing of the rule.
pub fn check_measured(rule: &crate::rule::Rule, matrix: &LatencyMatrix) -> Result<(), String> {
    let used: std::collections::BTreeSet<Libtype> = rule.leaves().iter().map(|l| l.backend).collect();
    let present: std::collections::BTreeSet<Libtype> = matrix.candidates.iter().map(|c| c.backend).collect();
    let missing: Vec<String> = used.iter().filter(|b| !present.contains(b)).map(|b| b.to_string()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the rule returns {} leaves, and the data holds no {} rows: every such pick is unusable there; give the \
         journals that measure them as --dataset",
        missing.join(" and "),
        missing.join(" or ")
    ))
}

/// `Err` naming the first backend of `backends` of which `matrix` holds no usable row on `shapes`, and
/// `data` (the dataset and its scope, or a manifest's configuration), ending with `fix`: a backend with no
/// row there has no oracle, no default and no pick to score, so its `oracle[B]` would print the default
/// kernel's figures and every rule leaf of it would be charged the default's time. The one check of every
/// job that reads data for `--backends` (`run` and `compare` on one dataset, the multi-model job per
/// configuration).
pub fn check_rows(
    matrix: &LatencyMatrix,
    backends: &Backends,
    shapes: &[usize],
    data: &str,
    fix: &str,
) -> Result<(), String> {
    let usable = |b: Libtype| {
        let cols: Vec<usize> = (0..matrix.candidates.len()).filter(|&c| matrix.candidates[c].backend == b).collect();
        shapes.iter().any(|&s| cols.iter().any(|&c| matrix.us(s, c).is_some()))
    };
    match backends.iter().find(|&b| !usable(b)) {
        Some(b) => Err(format!("{data} has no usable {b} row, and --backends names {b}: {fix}")),
        None => Ok(()),
    }
}

/// The kernel a backend runs where nothing chose one: CK's legacy default (the alias of kernelId -1),
/// the vendor GEMM, vLLM's default Triton config. CK-tile's default depends on the architecture and
/// none of its rows run on the devices measured here: `None`.
pub fn backend_default(backend: Libtype, catalog: &Catalog) -> Option<Candidate> {
    match backend {
        Libtype::Ck => Some(Candidate::new(catalog.default_alias, 0)),
        Libtype::Vendor => Some(Candidate::vendor()),
        Libtype::Triton => Some(Candidate::of(Libtype::Triton, VLLM_DEFAULT.kernel_id(), 0)),
        Libtype::Cktile => None,
    }
}

/// The kernel "the default" is on `matrix`: where nothing chose a kernel, the runtime runs its backend's
/// default. CK's legacy default (AITER's untuned kernel) when the matrix holds a CK legacy candidate (every
/// table before backends existed) or none of a backend with a default; else, in this order, vLLM's default
/// Triton config (a triton-only matrix: what vLLM runs on a layer without a tuned file) or the vendor GEMM.
/// Every policy's fallback is charged this kernel's time ([`super::evaluate`]).
pub fn matrix_default(matrix: &LatencyMatrix, catalog: &Catalog) -> Candidate {
    let present = matrix.backends();
    [Libtype::Ck, Libtype::Triton, Libtype::Vendor]
        .into_iter()
        .find(|b| present.contains(b))
        .and_then(|b| backend_default(b, catalog))
        .unwrap_or_else(|| Candidate::new(catalog.default_alias, 0))
}

/// Name of a backend's oracle policy (`oracle[vendor]`).
pub fn oracle_name(backend: Libtype) -> String {
    format!("oracle[{backend}]")
}

/// Each backend's oracle, in backend order.
pub fn oracle_policies(backends: &Backends) -> Vec<Policy> {
    backends.iter().map(|backend| Policy::OracleOf { name: oracle_name(backend), backend }).collect()
}

/// The fitted threshold policy and what it says in words.
#[derive(Debug, Clone)]
pub struct ThresholdFit {
    /// `Policy::Threshold` named `threshold`.
    pub policy: Policy,
    /// `ck #7 for M < 256, vendor from M = 256 (training geomean 1.234 of the oracle)`.
    pub text: String,
}

/// The best threshold policy on `train` (matrix shape indices): over every ordered pair of the
/// backends' defaults (`a` below, `b` from the threshold on) and every threshold among the training M
/// values (plus "always `b`", M ≥ 0, and "always `a`", M ≥ u32::MAX), the one with the smallest sum of
/// ln(charged time) — the geomean objective of [`super::evaluate`], a pick of an unusable cell charged
/// [`fallback_us`]. Among equal sums the one with fewer unusable picks wins, then the first in (pair,
/// threshold) order. `None` with fewer than two
/// backends that have a default, or no training shape with a usable cell.
pub fn fit_threshold(
    matrix: &LatencyMatrix,
    catalog: &Catalog,
    backends: &Backends,
    train: &[usize],
) -> Option<ThresholdFit> {
    let defaults: Vec<(Libtype, Candidate)> =
        backends.iter().filter_map(|b| backend_default(b, catalog).map(|c| (b, c))).collect();
    let scored: Vec<usize> = train.iter().copied().filter(|&s| matrix.best(s).is_some()).collect();
    if defaults.len() < 2 || scored.is_empty() {
        return None;
    }
    let default_col = matrix.candidate_index(&matrix_default(matrix, catalog));
    // (charged time, whether the pick is unusable there)
    let charged = |s: usize, c: &Candidate| match matrix.candidate_index(c).and_then(|col| matrix.us(s, col)) {
        Some(t) => (t, 0usize),
        None => (fallback_us(matrix, s, default_col), 1),
    };
    let mut thresholds: Vec<u32> = scored.iter().map(|&s| matrix.shapes[s].m).collect();
    thresholds.push(0);
    thresholds.push(u32::MAX);
    thresholds.sort_unstable();
    thresholds.dedup();
    let mut best: Option<(f64, usize, Candidate, Candidate, u32)> = None;
    for (a, ca) in &defaults {
        for (b, cb) in &defaults {
            if a == b {
                continue;
            }
            for &t in &thresholds {
                let (mut cost, mut unusable) = (0.0, 0);
                for &s in &scored {
                    let (us, bad) = charged(s, if matrix.shapes[s].m < t { ca } else { cb });
                    cost += us.ln();
                    unusable += bad;
                }
                // Equal cost (a fallback charged the default's time): fewer unusable picks first.
                if best.is_none_or(|(c, u, ..)| cost < c || (cost == c && unusable < u)) {
                    best = Some((cost, unusable, *ca, *cb, t));
                }
            }
        }
    }
    let (cost, _, below, above, m) = best?;
    let oracle: f64 = scored.iter().map(|&s| matrix.best(s).map_or(0.0, |(_, t)| t.ln())).sum();
    let of_oracle = ((oracle - cost) / scored.len() as f64).exp();
    let text = match m {
        0 => format!("{above} for every M"),
        u32::MAX => format!("{below} for every M"),
        _ => format!("{below} for M < {m}, {above} from M = {m}"),
    };
    Some(ThresholdFit {
        policy: Policy::Threshold { name: "threshold".into(), below, above, m },
        text: format!("{text} ({:.3} of the oracle on the {} training shapes)", of_oracle, scored.len()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{Cell, Shape};

    /// CK default (#7) fast at small M, vendor fast at large M: the crossing is between M = 64 and 256.
    fn matrix() -> LatencyMatrix {
        let shapes: Vec<Shape> = [16, 64, 256, 1024].iter().map(|&m| Shape::new(m, 512, 512)).collect();
        let cands = vec![Candidate::new(3, 0), Candidate::new(7, 0), Candidate::vendor()];
        let mut m = LatencyMatrix::new("sm_90", 132, None, shapes, cands);
        // (ck #3, ck #7, vendor) per M.
        let t = [[9.0, 10.0, 20.0], [12.0, 11.0, 15.0], [30.0, 40.0, 20.0], [100.0, 120.0, 60.0]];
        for (s, row) in t.iter().enumerate() {
            for (c, &us) in row.iter().enumerate() {
                m.set(s, c, Cell::Ok(us));
            }
        }
        m
    }

    #[test]
    fn the_threshold_is_fitted_by_hand_computed_cost() {
        let m = matrix();
        let cat = Catalog::embedded();
        let b = Backends::parse("ck,vendor").unwrap();
        let fit = fit_threshold(&m, &cat, &b, &[0, 1, 2, 3]).unwrap();
        // ck #7 below 256, vendor from 256: 10 * 11 * 20 * 60; every other split is worse (e.g. below 64:
        // 10 * 15 * 20 * 60; always vendor: 20 * 15 * 20 * 60).
        match &fit.policy {
            Policy::Threshold { below, above, m, .. } => {
                assert_eq!((*below, *above, *m), (Candidate::new(7, 0), Candidate::vendor(), 256));
            }
            p => panic!("{p:?}"),
        }
        let oracle = 9.0f64 * 11.0 * 20.0 * 60.0;
        let want = (oracle / (10.0 * 11.0 * 20.0 * 60.0)).powf(0.25);
        assert!(fit.text.starts_with("#7 for M < 256, vendor from M = 256"), "{}", fit.text);
        assert!(fit.text.contains(&format!("{want:.3} of the oracle on the 4 training shapes")), "{}", fit.text);
        // Fitted on the two small shapes only, CK everywhere is best (ties go to the first threshold).
        let small = fit_threshold(&m, &cat, &b, &[0, 1]).unwrap();
        assert!(small.text.starts_with("#7 for every M"), "{}", small.text);
        assert!(fit_threshold(&m, &cat, &Backends::parse("ck").unwrap(), &[0]).is_none());
    }

    #[test]
    fn a_backend_oracle_picks_within_its_backend() {
        let m = matrix();
        let cat = Catalog::embedded();
        let pols = oracle_policies(&Backends::parse("vendor,ck").unwrap());
        let names: Vec<&str> = pols.iter().map(Policy::name).collect();
        assert_eq!(names, ["oracle[ck]", "oracle[vendor]"]);
        let r = super::super::evaluate(&m, &cat, &pols, &[0, 1, 2, 3]);
        let us = |p: usize| r.policies[p].outcomes.iter().map(|o| o.us).collect::<Vec<_>>();
        assert_eq!(us(0), [9.0, 11.0, 30.0, 100.0]);
        assert_eq!(us(1), [20.0, 15.0, 20.0, 60.0]);
    }
}
