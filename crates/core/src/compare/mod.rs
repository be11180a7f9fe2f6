//! Policies (default, offline-tuned, nearest-tuned-M, rule files, oracle) scored on a latency matrix.
//!
//! Scoring rules:
//! - a shape is scored when at least one of its cells is usable (Ok); shapes without any are listed as
//!   unscorable and left out of every figure;
//! - a policy that picks a Missing or Invalid cell (or a kernel that is not a column of the matrix, such
//!   as a CK-tile row of a tuned table) is counted as a fallback and charged the default kernel's time on
//!   that shape — what AITER runs when a chosen kernel cannot be used — or, when the default's own cell is
//!   not usable either, the slowest usable time of the shape. The default is CK's legacy default on every
//!   matrix with a CK candidate, vLLM's default Triton config on a triton-only one
//!   ([`backends::matrix_default`]);
//! - per policy: total time and its ratio to the default's and the tuned baseline's totals (total-time
//!   speed-up), geometric-mean speed-up against both, and the fraction of the oracle (geomean of
//!   oracle time / policy time, 1.0 = always the fastest kernel). The tuned baseline is the first
//!   [`Policy::Tuned`] in the list.

pub mod backends;
pub mod plot;
pub mod policy;
pub mod raster;
pub mod report;

use std::collections::BTreeMap;

use crate::catalog::{Candidate, Catalog};
use crate::table::{Cell, LatencyMatrix, Shape};

pub use policy::{pad_coarse, pad_fine, LookupKind, Pick, Policy, TunedEntry, TunedTable};

/// Whether a pick could be used on its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// The cell is measured and usable.
    Ok,
    /// The cell was not measured (or the kernel is not a column of the matrix).
    Missing,
    /// The cell was measured and is unusable (failed run, wrong results).
    Invalid,
}

impl Status {
    /// Lower-case name for tables and CSV.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Missing => "missing",
            Status::Invalid => "invalid",
        }
    }
}

/// One policy on one shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    pub pick: Pick,
    pub status: Status,
    /// The time charged: the pick's own time when usable, else the fallback time.
    pub us: f64,
}

/// Figures of one policy over a set of shapes.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Shapes scored.
    pub shapes: usize,
    /// Total charged time (us).
    pub total_us: f64,
    /// default total / policy total.
    pub total_vs_default: f64,
    /// tuned total / policy total (when there is a tuned baseline).
    pub total_vs_tuned: Option<f64>,
    /// Geometric mean of default time / policy time.
    pub geomean_vs_default: f64,
    /// Geometric mean of tuned time / policy time.
    pub geomean_vs_tuned: Option<f64>,
    /// Geometric mean of oracle time / policy time.
    pub of_oracle: f64,
    /// Picks of Missing cells (fallbacks).
    pub missing: usize,
    /// Picks of Invalid cells (fallbacks).
    pub invalid: usize,
    /// How often each candidate was picked.
    pub picks: BTreeMap<Candidate, usize>,
    /// How table lookups resolved (tuned and nearest-M policies).
    pub lookups: BTreeMap<LookupKind, usize>,
}

/// The kind of a [`Policy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyKind {
    Default,
    Tuned,
    NearestM,
    /// A rule, or another policy drawn like one (one candidate, a backend's oracle, a threshold, a runtime's
    /// config files): each gets a colour of its own in the plot.
    Rule,
    Oracle,
}

impl Policy {
    /// The kind of this policy.
    pub fn kind(&self) -> PolicyKind {
        match self {
            Policy::Default => PolicyKind::Default,
            Policy::Tuned { .. } => PolicyKind::Tuned,
            Policy::NearestM { .. } => PolicyKind::NearestM,
            Policy::Rule { .. }
            | Policy::TunedRule { .. }
            | Policy::Fixed { .. }
            | Policy::OracleOf { .. }
            | Policy::Threshold { .. }
            | Policy::RuntimeFiles { .. } => PolicyKind::Rule,
            Policy::Oracle => PolicyKind::Oracle,
        }
    }
}

/// One policy's outcomes (aligned with [`Report::shapes`]) and overall summary.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyResult {
    pub name: String,
    /// Which kind of policy it is.
    pub kind: PolicyKind,
    pub outcomes: Vec<Outcome>,
    pub summary: Summary,
}

/// Every policy scored on the same shapes.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Scored shapes (matrix indices), in the order given.
    pub shapes: Vec<usize>,
    /// The scored shapes themselves.
    pub shape_list: Vec<Shape>,
    /// Shapes left out because none of their cells is usable.
    pub unscorable: Vec<Shape>,
    /// Default's charged time per scored shape.
    pub default_us: Vec<f64>,
    /// Scored shapes where the default's own cell is not usable (its time there is the slowest usable one).
    pub default_unusable: usize,
    /// Oracle time per scored shape.
    pub oracle_us: Vec<f64>,
    /// Tuned baseline's charged time per scored shape, and its policy name.
    pub tuned: Option<(String, Vec<f64>)>,
    pub policies: Vec<PolicyResult>,
}

/// The charged outcome of `pick` on shape `s`.
fn outcome(matrix: &LatencyMatrix, s: usize, pick: Pick, fallback: f64) -> Outcome {
    let col = if pick.legacy { matrix.candidate_index(&pick.candidate) } else { None };
    let (status, us) = match col.map(|c| matrix.cell(s, c)) {
        Some(Cell::Ok(t)) => (Status::Ok, *t),
        Some(Cell::Invalid(_)) => (Status::Invalid, fallback),
        Some(Cell::Missing) | None => (Status::Missing, fallback),
    };
    Outcome { pick, status, us }
}

/// Geometric mean of `num[i] / den[i]` over `idx` (1.0 for no shapes).
fn geomean_ratio(num: &[f64], den: &[f64], idx: &[usize]) -> f64 {
    if idx.is_empty() {
        return 1.0;
    }
    (idx.iter().map(|&i| (num[i] / den[i]).ln()).sum::<f64>() / idx.len() as f64).exp()
}

impl Report {
    /// Summary of policy `p` over the scored positions `idx` (indices into [`Report::shapes`]).
    pub fn summarize(&self, p: usize, idx: &[usize]) -> Summary {
        let res = &self.policies[p];
        let us: Vec<f64> = res.outcomes.iter().map(|o| o.us).collect();
        let total = |v: &[f64]| idx.iter().map(|&i| v[i]).sum::<f64>();
        let total_us = total(&us);
        let mut s = Summary {
            shapes: idx.len(),
            total_us,
            total_vs_default: total(&self.default_us) / total_us,
            total_vs_tuned: self.tuned.as_ref().map(|(_, t)| total(t) / total_us),
            geomean_vs_default: geomean_ratio(&self.default_us, &us, idx),
            geomean_vs_tuned: self.tuned.as_ref().map(|(_, t)| geomean_ratio(t, &us, idx)),
            of_oracle: geomean_ratio(&self.oracle_us, &us, idx),
            missing: 0,
            invalid: 0,
            picks: BTreeMap::new(),
            lookups: BTreeMap::new(),
        };
        for &i in idx {
            let o = &res.outcomes[i];
            match o.status {
                Status::Ok => {}
                Status::Missing => s.missing += 1,
                Status::Invalid => s.invalid += 1,
            }
            *s.picks.entry(o.pick.candidate).or_default() += 1;
            if let Some(k) = o.pick.lookup {
                *s.lookups.entry(k).or_default() += 1;
            }
        }
        s
    }

    /// Positions (into [`Report::shapes`]) of each (N, K) layer, ascending by (N, K).
    pub fn layers(&self) -> BTreeMap<(u32, u32), Vec<usize>> {
        let mut out: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
        for (i, s) in self.shape_list.iter().enumerate() {
            out.entry((s.n, s.k)).or_default().push(i);
        }
        out
    }

    /// Index of the policy named `name`.
    pub fn policy_index(&self, name: &str) -> Option<usize> {
        self.policies.iter().position(|p| p.name == name)
    }
}

/// The time charged on shape `s` to a pick that cannot be used: the default's (column `default_col`), or,
/// when the default's own cell is not usable either, the slowest usable time of the shape.
pub fn fallback_us(matrix: &LatencyMatrix, s: usize, default_col: Option<usize>) -> f64 {
    default_col
        .and_then(|c| matrix.us(s, c))
        .unwrap_or_else(|| (0..matrix.candidates.len()).filter_map(|c| matrix.us(s, c)).fold(0.0, f64::max))
}

/// Scores `policies` on the `shapes` of `matrix` (indices; duplicates are scored twice). See the module
/// documentation for the rules.
pub fn evaluate(matrix: &LatencyMatrix, catalog: &Catalog, policies: &[Policy], shapes: &[usize]) -> Report {
    let default = backends::matrix_default(matrix, catalog);
    let mut scored = Vec::new();
    let mut unscorable = Vec::new();
    for &s in shapes {
        if matrix.best(s).is_some() {
            scored.push(s);
        } else {
            unscorable.push(matrix.shapes[s]);
        }
    }
    let default_col = matrix.candidate_index(&default);
    let default_unusable = scored.iter().filter(|&&s| default_col.and_then(|c| matrix.us(s, c)).is_none()).count();
    let fallback: Vec<f64> = scored.iter().map(|&s| fallback_us(matrix, s, default_col)).collect();
    let oracle_us: Vec<f64> =
        scored.iter().map(|&s| matrix.best(s).expect("scored shapes have a usable cell").1).collect();
    let outcomes: Vec<Vec<Outcome>> = policies
        .iter()
        .map(|p| {
            scored.iter().zip(&fallback).map(|(&s, &fb)| outcome(matrix, s, p.pick(matrix, s, default), fb)).collect()
        })
        .collect();
    let default_us = fallback.clone();
    let tuned = policies
        .iter()
        .position(|p| matches!(p, Policy::Tuned { .. }))
        .map(|i| (policies[i].name().to_string(), outcomes[i].iter().map(|o| o.us).collect()));
    let mut report = Report {
        shape_list: scored.iter().map(|&s| matrix.shapes[s]).collect(),
        shapes: scored,
        unscorable,
        default_us,
        default_unusable,
        oracle_us,
        tuned,
        policies: Vec::new(),
    };
    let all: Vec<usize> = (0..report.shapes.len()).collect();
    for (p, outs) in policies.iter().zip(outcomes) {
        report.policies.push(PolicyResult {
            name: p.name().to_string(),
            kind: p.kind(),
            outcomes: outs,
            summary: Summary {
                shapes: 0,
                total_us: 0.0,
                total_vs_default: 1.0,
                total_vs_tuned: None,
                geomean_vs_default: 1.0,
                geomean_vs_tuned: None,
                of_oracle: 1.0,
                missing: 0,
                invalid: 0,
                picks: BTreeMap::new(),
                lookups: BTreeMap::new(),
            },
        });
        let i = report.policies.len() - 1;
        report.policies[i].summary = report.summarize(i, &all);
    }
    report
}
