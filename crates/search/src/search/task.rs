//! Task 1 of the agent loop: GEMM selection rules.
//!
//! A candidate is rule text in the C++, Rust or JSON form. Evaluation = parse (errors with line:col),
//! validation against the catalog, the search's limits (leaves, depth, distinct instances), then the
//! latency of the rule's picks on the training shapes, scored by [`synth_core::compare::evaluate`] (a pick of
//! a Missing or Invalid cell is charged the default kernel's time, as the comparison charges it). The
//! score is the total training time in µs (weighted when the search uses per-shape weights); feedback
//! gives the totals, the fraction of the oracle, the worst shapes with their regret, and per-leaf advice.

use anyhow::bail;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use synth_core::catalog::{Candidate, Catalog, InstanceParams};
use synth_core::compare::{self, Policy, Status};
use synth_core::rule::edit::{leaf_at, leaf_path};
use synth_core::rule::source::NodePath;
use synth_core::rule::text::rule_to_cpp_text;
use synth_core::rule::validate::{validate_with_source, Severity};
use synth_core::rule::{parse_any_with_source, Leaf, Node, Rule, RuleError};
use synth_core::synthesize::features::{for_candidates, Feature};
use synth_core::synthesize::Limits;
use synth_core::table::{LatencyMatrix, Shape};
use synth_engine::engine::{clip, Attempt, Evaluation, Reflector, Task};

/// Everything a rule is evaluated against.
#[derive(Debug, Clone)]
pub struct RuleSetup {
    pub catalog: Catalog,
    pub matrix: LatencyMatrix,
    /// Training shapes (indices into `matrix.shapes`).
    pub train: Vec<usize>,
    /// One positive weight per training shape (None: every shape counts once).
    pub weights: Option<Vec<f64>>,
    /// Limits a candidate must respect (`features` is what the built-in proposers split on).
    pub limits: Limits,
    /// Split features offered to proposers (from `limits.features` and the matrix's candidates).
    pub features: Vec<Feature>,
}

impl RuleSetup {
    /// Checks the training set and weights and derives the feature list.
    pub fn new(
        catalog: Catalog,
        matrix: LatencyMatrix,
        train: Vec<usize>,
        weights: Option<Vec<f64>>,
        limits: Limits,
    ) -> anyhow::Result<RuleSetup> {
        if train.is_empty() {
            bail!("the rule search needs at least one training shape");
        }
        if let Some(&bad) = train.iter().find(|&&s| s >= matrix.shapes.len()) {
            bail!("training shape index {bad} is out of range: the matrix has {} shapes", matrix.shapes.len());
        }
        if let Some(w) = &weights {
            if w.len() != train.len() {
                bail!("{} weights given for {} training shapes", w.len(), train.len());
            }
            if let Some(x) = w.iter().find(|x| !(x.is_finite() && **x > 0.0)) {
                bail!("weight {x} is not a positive finite number");
            }
        }
        if limits.max_leaves == 0 || limits.max_instances == Some(0) {
            bail!("limits must allow at least one leaf and one instance");
        }
        if matrix.candidates.is_empty() {
            bail!("the latency matrix has no candidates");
        }
        let features = for_candidates(limits.features, &matrix.candidates, &catalog, matrix.cu_num);
        Ok(RuleSetup { catalog, matrix, train, weights, limits, features })
    }

    /// The default kernel as a candidate (split-K 0): CK's on a matrix with CK candidates, else its
    /// backend's ([`synth_core::compare::backends::matrix_default`]).
    pub fn default_candidate(&self) -> Candidate {
        synth_core::compare::backends::matrix_default(&self.matrix, &self.catalog)
    }

    /// Weight of training shape `s` (a matrix index).
    pub fn weight_of(&self, s: usize) -> f64 {
        match &self.weights {
            None => 1.0,
            Some(w) => self.train.iter().position(|&t| t == s).map(|i| w[i]).unwrap_or(1.0),
        }
    }

    /// The rule that always returns the default kernel (AITER's behaviour without a tuned table).
    pub fn default_rule(&self) -> Rule {
        Rule::new(Node::Leaf(Leaf::from_candidate(self.default_candidate())))
    }
}

/// One training shape under a rule.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapeOutcome {
    /// Matrix index of the shape.
    pub index: usize,
    pub shape: Shape,
    /// What the rule picks.
    pub pick: Candidate,
    pub status: Status,
    /// Time charged for the pick (its own time, or the default's when the cell is unusable).
    pub us: f64,
    /// The fastest usable candidate and its time.
    pub best: Candidate,
    pub best_us: f64,
    /// Path of the leaf the shape reaches.
    pub leaf: NodePath,
    pub weight: f64,
}

impl ShapeOutcome {
    /// µs lost against the fastest candidate.
    pub fn regret_us(&self) -> f64 {
        self.us - self.best_us
    }
}

/// A rule scored on the training shapes.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleScore {
    /// The objective: Σ weight × charged µs (lower is better).
    pub objective: f64,
    /// Unweighted total charged µs.
    pub total_us: f64,
    /// Σ fastest µs (the oracle).
    pub oracle_us: f64,
    /// Σ default kernel µs.
    pub default_us: f64,
    /// Geometric mean of oracle / charged time (1.0 = always the fastest).
    pub of_oracle: f64,
    /// Picks of Missing or Invalid cells.
    pub fallbacks: usize,
    /// Scored shapes, in training order.
    pub shapes: Vec<ShapeOutcome>,
    /// Training shapes with no usable cell at all (not scored).
    pub unscorable: Vec<Shape>,
}

/// Scores `rule` on the training shapes with [`compare::evaluate`].
pub fn score_rule(setup: &RuleSetup, rule: &Rule) -> RuleScore {
    let policies = [Policy::Rule { name: "candidate".into(), rule: rule.clone() }];
    let report = compare::evaluate(&setup.matrix, &setup.catalog, &policies, &setup.train);
    let res = &report.policies[0];
    let mut shapes = Vec::with_capacity(report.shapes.len());
    for (i, &s) in report.shapes.iter().enumerate() {
        let o = &res.outcomes[i];
        let (bc, bus) = setup.matrix.best(s).expect("scored shapes have a usable cell");
        let sh = setup.matrix.shapes[s];
        shapes.push(ShapeOutcome {
            index: s,
            shape: sh,
            pick: o.pick.candidate,
            status: o.status,
            us: o.us,
            best: setup.matrix.candidates[bc],
            best_us: bus,
            leaf: leaf_path(&rule.root, sh.m, sh.n, sh.k),
            weight: setup.weight_of(s),
        });
    }
    let objective = shapes.iter().map(|o| o.weight * o.us).sum();
    RuleScore {
        objective,
        total_us: res.summary.total_us,
        oracle_us: report.oracle_us.iter().sum(),
        default_us: report.default_us.iter().sum(),
        of_oracle: res.summary.of_oracle,
        fallbacks: res.summary.missing + res.summary.invalid,
        shapes,
        unscorable: report.unscorable.clone(),
    }
}

/// Distinct kernel ids a rule returns (all split-K values of a kernel count once, as AITER compiles it once).
pub fn kernels_used(rule: &Rule) -> BTreeSet<i32> {
    rule.leaves().iter().map(|l| l.kernel_id).collect()
}

/// Violations of `limits` (leaves, depth, distinct instances); empty when the rule fits.
pub fn limit_violations(rule: &Rule, limits: &Limits) -> Vec<String> {
    let mut out = Vec::new();
    let leaves = rule.num_leaves();
    if leaves > limits.max_leaves {
        out.push(format!(
            "the rule has {leaves} leaves (return statements) but at most {} are allowed: merge leaves that \
             return the same instance or drop branches whose shapes another leaf serves nearly as well",
            limits.max_leaves
        ));
    }
    let depth = rule.depth();
    if depth > limits.max_depth {
        out.push(format!(
            "the rule tests up to {depth} conditions on the way to a leaf but at most {} are allowed: use \
             fewer else-if branches or combine conditions",
            limits.max_depth
        ));
    }
    if let Some(k) = limits.max_instances {
        let used = kernels_used(rule);
        if used.len() > k {
            out.push(format!(
                "the rule returns {} distinct instances {:?} but at most {k} may be compiled: reuse instances",
                used.len(),
                used
            ));
        }
    }
    out
}

/// The search task over selection rules.
#[derive(Debug, Clone)]
pub struct RuleTask {
    pub setup: std::sync::Arc<RuleSetup>,
    /// How many worst shapes the feedback lists.
    pub worst: usize,
    /// The baseline candidate (None: the default rule).
    pub baseline: Option<String>,
}

impl RuleTask {
    /// A task over `setup` with the default rule as baseline and 6 worst shapes in feedback.
    pub fn new(setup: std::sync::Arc<RuleSetup>) -> RuleTask {
        RuleTask { setup, worst: 6, baseline: None }
    }

    /// Parses, validates and checks limits; on failure, the feedback and details of the failure.
    pub fn check(
        &self,
        text: &str,
    ) -> Result<(Rule, synth_core::rule::SourceMap, Vec<String>), (String, serde_json::Value)> {
        let parsed = parse_any_with_source(text, &self.setup.catalog).map_err(|e| parse_failure(text, &e))?;
        let issues = validate_with_source(&parsed.rule, &self.setup.catalog, &parsed.source);
        let (errors, warnings): (Vec<_>, Vec<_>) = issues.iter().partition(|i| i.severity == Severity::Error);
        let warnings: Vec<String> = warnings.iter().map(|i| i.to_string()).collect();
        if !errors.is_empty() {
            let list: Vec<String> = errors.iter().map(|i| i.to_string()).collect();
            let feedback = format!("the rule parses but is invalid:\n  {}", list.join("\n  "));
            let details = json!({
                "stage": "validate",
                "errors": errors.iter().map(|i| json!({ "line": i.line, "message": i.message })).collect::<Vec<_>>(),
            });
            return Err((feedback, details));
        }
        let violations = limit_violations(&parsed.rule, &self.setup.limits);
        if !violations.is_empty() {
            let feedback = format!("the rule exceeds the limits:\n  {}", violations.join("\n  "));
            return Err((feedback, json!({ "stage": "limits", "errors": violations })));
        }
        Ok((parsed.rule, parsed.source, warnings))
    }
}

/// Feedback for a parse error: position, message, and the offending line with a caret.
fn parse_failure(text: &str, e: &RuleError) -> (String, serde_json::Value) {
    let mut fb = format!("parse error at {e}");
    if let Some(line) = (e.line > 0).then(|| text.lines().nth(e.line - 1)).flatten() {
        let _ = write!(fb, "\n  {}\n  {}^", line, " ".repeat(e.column.saturating_sub(1)));
    }
    (fb, json!({ "stage": "parse", "line": e.line, "column": e.column, "message": e.message }))
}

/// Per-leaf advice: shapes reaching each leaf, their charged time, and the best single candidate for them.
fn leaf_advice(setup: &RuleSetup, score: &RuleScore, rule: &Rule) -> Vec<LeafAdvice> {
    let mut by_leaf: BTreeMap<NodePath, Vec<&ShapeOutcome>> = BTreeMap::new();
    for o in &score.shapes {
        by_leaf.entry(o.leaf.clone()).or_default().push(o);
    }
    let default_col = setup.matrix.candidate_index(&setup.default_candidate());
    let mut out = Vec::new();
    for (path, shapes) in by_leaf {
        let current: f64 = shapes.iter().map(|o| o.weight * o.us).sum();
        let mut best: Option<(Candidate, f64)> = None;
        for (c, cand) in setup.matrix.candidates.iter().enumerate() {
            let cost: f64 = shapes
                .iter()
                .map(|o| {
                    let t =
                        setup.matrix.us(o.index, c).unwrap_or_else(|| charged_fallback(setup, o.index, default_col));
                    o.weight * t
                })
                .sum();
            if best.is_none_or(|(_, b)| cost < b) {
                best = Some((*cand, cost));
            }
        }
        let leaf = leaf_at(&rule.root, &path);
        if let (Some((cand, cost)), Some(leaf)) = (best, leaf) {
            out.push(LeafAdvice { path, leaf, shapes: shapes.len(), current, best: cand, best_cost: cost });
        }
    }
    out
}

/// What the comparison charges on shape `s` for an unusable pick ([`compare::fallback_us`]).
pub fn charged_fallback(setup: &RuleSetup, s: usize, default_col: Option<usize>) -> f64 {
    compare::fallback_us(&setup.matrix, s, default_col)
}

struct LeafAdvice {
    path: NodePath,
    leaf: Leaf,
    shapes: usize,
    current: f64,
    best: Candidate,
    best_cost: f64,
}

fn cand_str(c: Candidate) -> String {
    c.to_string()
}

/// The feedback's first lines on a scored rule: its totals against the oracle and the default, its size,
/// and the picks that were charged or could not be scored.
fn summary_feedback(setup: &RuleSetup, score: &RuleScore, rule: &Rule) -> String {
    let mut fb = String::new();
    let _ = writeln!(
        fb,
        "training shapes: {}; total {:.2} us; oracle {:.2} us; default {:.2} us",
        score.shapes.len(),
        score.total_us,
        score.oracle_us,
        score.default_us
    );
    let _ = writeln!(
        fb,
        "fraction of oracle: {:.4} by total time, {:.4} geomean; {:.3}x faster than the default (total)",
        score.oracle_us / score.total_us,
        score.of_oracle,
        score.default_us / score.total_us
    );
    if setup.weights.is_some() {
        let _ = writeln!(fb, "weighted objective: {:.4}", score.objective);
    }
    let _ = writeln!(
        fb,
        "rule: {} leaves, depth {}, {} distinct instances",
        rule.num_leaves(),
        rule.depth(),
        kernels_used(rule).len()
    );
    if score.fallbacks > 0 {
        let _ = writeln!(
            fb,
            "{} pick(s) of unmeasured or failed cells, charged the default kernel's time",
            score.fallbacks
        );
    }
    if !score.unscorable.is_empty() {
        let list: Vec<String> = score.unscorable.iter().map(|s| s.to_string()).collect();
        let _ = writeln!(fb, "not scored (no usable measurement): {}", list.join(", "));
    }
    fb
}

/// The `limit` shapes of largest regret, written to the feedback (with their leaf's line) and returned as
/// the details' `worst` entries.
fn worst_shapes(
    fb: &mut String,
    score: &RuleScore,
    source: &synth_core::rule::SourceMap,
    limit: usize,
) -> Vec<serde_json::Value> {
    let mut worst: Vec<&ShapeOutcome> = score.shapes.iter().filter(|o| o.regret_us() > 1e-9).collect();
    worst.sort_by(|a, b| b.regret_us().total_cmp(&a.regret_us()).then(a.index.cmp(&b.index)));
    worst.truncate(limit);
    if worst.is_empty() {
        let _ = writeln!(fb, "every training shape gets its fastest candidate");
    } else {
        let _ = writeln!(fb, "worst shapes by regret:");
    }
    let mut worst_json = Vec::new();
    for o in &worst {
        let line = source.leaf_line(&o.leaf);
        let status =
            if o.status == Status::Ok { String::new() } else { format!(" ({}, charged default)", o.status.as_str()) };
        let at = line.map(|l| format!(" [leaf at line {l}]")).unwrap_or_default();
        let _ = writeln!(
            fb,
            "  M={} N={} K={}: picks {}{status} {:.2} us, best {} {:.2} us: +{:.2} us (+{:.1}%){at}",
            o.shape.m,
            o.shape.n,
            o.shape.k,
            cand_str(o.pick),
            o.us,
            cand_str(o.best),
            o.best_us,
            o.regret_us(),
            100.0 * o.regret_us() / o.best_us
        );
        worst_json.push(json!({
            "m": o.shape.m, "n": o.shape.n, "k": o.shape.k,
            "pick": cand_str(o.pick), "pick_us": o.us, "status": o.status.as_str(),
            "best": cand_str(o.best), "best_us": o.best_us,
            "regret_us": o.regret_us(), "regret_pct": 100.0 * o.regret_us() / o.best_us,
            "leaf_line": line,
        }));
    }
    worst_json
}

/// Each leaf whose shapes another candidate serves cheaper, written to the feedback; every leaf's advice
/// returned as the details' `leaf_advice` entries.
fn advice_feedback(
    fb: &mut String,
    advice: &[LeafAdvice],
    source: &synth_core::rule::SourceMap,
) -> Vec<serde_json::Value> {
    let mut advice_json = Vec::new();
    for a in advice {
        let saving = a.current - a.best_cost;
        let current = a.leaf.candidate();
        if saving > 1e-9 && a.best != current {
            let at = source
                .leaf_line(&a.path)
                .map(|l| format!("leaf at line {l}"))
                .unwrap_or_else(|| format!("leaf {:?}", a.path));
            let _ = writeln!(
                fb,
                "{at} ({} shapes, returns {}): returning {} there instead saves {:.2} us",
                a.shapes,
                cand_str(current),
                cand_str(a.best),
                saving
            );
        }
        advice_json.push(json!({
            "path": a.path, "line": source.leaf_line(&a.path), "shapes": a.shapes,
            "returns": cand_str(a.leaf.candidate()),
            "cost": a.current, "best": cand_str(a.best), "best_cost": a.best_cost,
        }));
    }
    advice_json
}

impl Task for RuleTask {
    fn kind(&self) -> &'static str {
        "rule"
    }

    fn deterministic(&self) -> bool {
        true
    }

    fn context(&self) -> serde_json::Value {
        rule_context(&self.setup)
    }

    fn evaluate(&self, candidate: &str) -> Evaluation {
        if candidate.trim().is_empty() {
            return Evaluation {
                score: None,
                feedback: "the candidate is empty: reply with a complete rule".into(),
                details: json!({ "stage": "parse", "line": 0, "column": 0, "message": "empty" }),
            };
        }
        let (rule, source, warnings) = match self.check(candidate) {
            Ok(x) => x,
            Err((feedback, details)) => return Evaluation { score: None, feedback, details },
        };
        let setup = &self.setup;
        let score = score_rule(setup, &rule);
        let mut fb = summary_feedback(setup, &score, &rule);
        let worst_json = worst_shapes(&mut fb, &score, &source, self.worst);
        let advice_json = advice_feedback(&mut fb, &leaf_advice(setup, &score, &rule), &source);
        for w in &warnings {
            let _ = writeln!(fb, "{w}");
        }
        Evaluation {
            score: Some(score.objective),
            feedback: fb.trim_end().to_string(),
            details: json!({
                "stage": "scored",
                "objective": score.objective,
                "total_us": score.total_us,
                "oracle_us": score.oracle_us,
                "default_us": score.default_us,
                "of_oracle_total": score.oracle_us / score.total_us,
                "of_oracle_geomean": score.of_oracle,
                "fallbacks": score.fallbacks,
                "leaves": rule.num_leaves(),
                "depth": rule.depth(),
                "instances": kernels_used(&rule),
                "worst": worst_json,
                "leaf_advice": advice_json,
                "warnings": warnings,
            }),
        }
    }

    fn baseline(&self) -> Option<String> {
        Some(self.baseline.clone().unwrap_or_else(|| rule_to_cpp_text(&self.setup.default_rule(), &self.setup.catalog)))
    }
}

/// Reflection for rules: parse errors with their position and what to fix; for scored rules the
/// fraction of the oracle, the worst shapes with their regret, and which leaves to change.
#[derive(Debug, Clone, Copy, Default)]
pub struct RuleReflector;

impl Reflector for RuleReflector {
    fn reflect(&self, attempt: &Attempt, best: Option<&Attempt>) -> String {
        let d = &attempt.eval.details;
        let stage = d.get("stage").and_then(|s| s.as_str()).unwrap_or("");
        match (attempt.eval.score, stage) {
            (None, "parse") => format!(
                "The rule does not parse: {}\nFix the syntax at that position. Write only if / else if / else \
                 with conditions over M, N, K and `return {{instance_name<DDataType, EDataType>, splitK}};` \
                 leaves (or the Rust form); end every chain with a final else.",
                clip(&attempt.eval.feedback, 1200)
            ),
            (None, "validate") => format!(
                "{}\nUse only instance names from the instance list and split-K 0..3; remove branches that \
                 can never be reached.",
                clip(&attempt.eval.feedback, 1200)
            ),
            (None, "limits") => format!("{}\nKeep the rule within the limits.", clip(&attempt.eval.feedback, 1200)),
            (None, "propose") => format!(
                "No rule was received: {}\nReply with one fenced code block holding one complete rule.",
                clip(&attempt.eval.feedback, 1200)
            ),
            (None, _) => format!("The candidate failed: {}", clip(&attempt.eval.feedback, 1200)),
            (Some(score), _) => {
                let mut out = score_reflection(score, d, best);
                write_largest_regrets(&mut out, d);
                write_leaf_fixes(&mut out, d);
                out
            }
        }
    }
}

/// A scored rule's score, its fractions of the oracle, and how it compares with the best so far.
fn score_reflection(score: f64, d: &serde_json::Value, best: Option<&Attempt>) -> String {
    let mut out = String::new();
    let of_total = d.get("of_oracle_total").and_then(|x| x.as_f64()).unwrap_or(f64::NAN);
    let of_geo = d.get("of_oracle_geomean").and_then(|x| x.as_f64()).unwrap_or(f64::NAN);
    let _ = write!(
        out,
        "Score {score:.2} ({:.1}% of oracle by total time, {:.1}% geomean).",
        100.0 * of_total,
        100.0 * of_geo
    );
    if let Some((bid, bs)) = best.and_then(|b| b.eval.score.map(|s| (b.id, s))) {
        if score < bs {
            let _ = write!(out, " New best (previous {bs:.2}, attempt {bid}).");
        } else {
            let _ = write!(out, " The best so far is {bs:.2} (attempt {bid}); this one loses {:.2}.", score - bs);
        }
    }
    out
}

/// The four largest regrets of the details' `worst` entries.
fn write_largest_regrets(out: &mut String, d: &serde_json::Value) {
    let Some(worst) = d.get("worst").and_then(|w| w.as_array()).filter(|w| !w.is_empty()) else {
        return;
    };
    out.push_str("\nLargest regrets:");
    for w in worst.iter().take(4) {
        let _ = write!(
            out,
            "\n  M={} N={} K={}: {} costs +{:.2} us (+{:.1}%) over {}",
            w["m"],
            w["n"],
            w["k"],
            w["pick"].as_str().unwrap_or("?"),
            w["regret_us"].as_f64().unwrap_or(0.0),
            w["regret_pct"].as_f64().unwrap_or(0.0),
            w["best"].as_str().unwrap_or("?")
        );
    }
}

/// The three leaf changes of the details' `leaf_advice` that save the most.
fn write_leaf_fixes(out: &mut String, d: &serde_json::Value) {
    let saving = |x: &serde_json::Value| x["cost"].as_f64().unwrap_or(0.0) - x["best_cost"].as_f64().unwrap_or(0.0);
    let mut fixes: Vec<&serde_json::Value> = d
        .get("leaf_advice")
        .and_then(|a| a.as_array())
        .map(|a| a.iter().filter(|x| saving(x) > 1e-9).collect())
        .unwrap_or_default();
    fixes.sort_by(|a, b| saving(b).total_cmp(&saving(a)));
    for f in fixes.iter().take(3) {
        let at = f["line"]
            .as_u64()
            .map(|l| format!("the leaf at line {l}"))
            .unwrap_or_else(|| format!("leaf {}", f["path"]));
        let _ = write!(
            out,
            "\nAt {at} ({} shapes) return {} instead of {} (saves {:.2}), or split it where its shapes disagree.",
            f["shapes"],
            f["best"].as_str().unwrap_or("?"),
            f["returns"].as_str().unwrap_or("?"),
            saving(f)
        );
    }
}

/// The static context handed to proposers: device, rule language, limits, instances, candidates,
/// features, training shapes with their latencies, and a rendered prompt (`prompt.system`,
/// `prompt.user`, `prompt.reply`) for chat models.
pub fn rule_context(setup: &RuleSetup) -> serde_json::Value {
    let m = &setup.matrix;
    let cat = &setup.catalog;
    let kernels: BTreeSet<i32> = m.candidates.iter().map(|c| c.kernel_id).collect();
    let instances: Vec<serde_json::Value> = kernels
        .iter()
        .filter_map(|&id| cat.legacy_by_id(id))
        .map(|inst| {
            let (bm, bn, bk) = inst.tile();
            let (block, pipeline) = match &inst.params {
                InstanceParams::Ck(p) => (p.block_size, p.pipeline),
                InstanceParams::Cktile(_) => (0, 0),
            };
            json!({ "id": inst.id, "name": inst.name, "tile_m": bm, "tile_n": bn, "tile_k": bk,
                    "block_size": block, "pipeline": pipeline })
        })
        .collect();
    let default = setup.default_candidate();
    let default_col = m.candidate_index(&default);
    let shapes: Vec<serde_json::Value> = setup
        .train
        .iter()
        .map(|&s| {
            let sh = m.shapes[s];
            let lat: BTreeMap<String, Option<f64>> =
                m.candidates.iter().enumerate().map(|(c, cand)| (cand_str(*cand), m.us(s, c))).collect();
            let best = m.best(s).map(|(c, us)| json!({ "candidate": cand_str(m.candidates[c]), "us": us }));
            json!({ "m": sh.m, "n": sh.n, "k": sh.k, "weight": setup.weight_of(s), "best": best,
                    "default_us": default_col.and_then(|c| m.us(s, c)), "us": lat })
        })
        .collect();
    let features: Vec<serde_json::Value> = setup
        .features
        .iter()
        .map(|f| json!({ "name": f.name, "expr": synth_core::rule::text::expr_to_cpp(&f.expr) }))
        .collect();
    let limits = json!({
        "max_leaves": setup.limits.max_leaves,
        "max_depth": setup.limits.max_depth,
        "max_instances": setup.limits.max_instances,
    });
    let example = rule_to_cpp_text(&setup.default_rule(), cat);
    let (system, user, table) = rule_prompt(setup, &format!("return {{kernel({}), 0}};\n", cat.default_alias));
    json!({
        "task": "gemm-selection-rule",
        "device": { "gfx": m.gfx, "cu_num": m.cu_num, "device": m.device },
        "default_candidate": cand_str(default),
        "candidate_notation": "#ID is kernelId ID with split-K 0; #ID/skS is kernelId ID with split-K S (KBatch = 2^S)",
        "limits": limits,
        "instances": instances,
        "candidates": m.candidates.iter().map(|c| cand_str(*c)).collect::<Vec<_>>(),
        "features": features,
        "training_shapes": shapes,
        "objective": "minimize the total latency (us) of the rule's picks over the training shapes; a pick of an unmeasured or failed cell is charged the default kernel's time",
        "forms": { "cpp": example, "rust": synth_core::rule::text::rule_to_rust_text(&setup.default_rule(), cat) },
        "prompt": { "system": system, "user": user, "table": table, "reply": REPLY_FORMAT },
    })
}

/// How a proposer must answer.
pub const REPLY_FORMAT: &str = "Reply with exactly one complete rule in a fenced code block (```cpp ... ```), \
     in the C++ form: nested if / else if / else over M, N, K ending in a final else, every leaf \
     `return {kernel(ID), splitK};` with ID an instance id from the list (the instance's full name may stand \
     for kernel(ID)). Integer arithmetic (+ - * /, cdiv(a, b), min(a, b), max(a, b)), comparisons and \
     && || ! are allowed in conditions. No function, no main(), no includes: only the if / else chain.";

fn rule_prompt(setup: &RuleSetup, example: &str) -> (String, String, serde_json::Value) {
    let m = &setup.matrix;
    let cat = &setup.catalog;
    let system = format!(
        "You write kernel-selection rules for FP8 block-scaled GEMMs (Y[M,N] = X[M,K] * W[N,K]^T) on {} \
         ({} compute units). A rule maps the GEMM dimensions M, N, K to one kernel instance and a split-K \
         (log2 of the K split). Rules are judged by the measured latency of their picks. The reply format \
         closes the user message.",
        m.device.as_deref().unwrap_or(&m.gfx),
        m.cu_num
    );
    let mut u = String::new();
    let _ = writeln!(
        u,
        "Limits: at most {} leaves, at most {} conditions on any path{}.",
        setup.limits.max_leaves,
        setup.limits.max_depth,
        setup.limits.max_instances.map(|k| format!(", at most {k} distinct instances")).unwrap_or_default()
    );
    let _ = writeln!(u, "\nInstances (id: tile MxNxK, pipeline; a leaf returns kernel(ID)):");
    let kernels: BTreeSet<i32> = m.candidates.iter().map(|c| c.kernel_id).collect();
    for id in kernels {
        if let Some(inst) = cat.legacy_by_id(id) {
            let (bm, bn, bk) = inst.tile();
            let pipeline = match &inst.params {
                InstanceParams::Ck(p) => format!(", v{}", p.pipeline),
                InstanceParams::Cktile(_) => String::new(),
            };
            let _ = writeln!(u, "  #{id}: {bm}x{bn}x{bk}{pipeline}");
        }
    }
    let split_ks: BTreeSet<u32> = m.candidates.iter().map(|c| c.split_k).collect();
    let _ = writeln!(u, "Measured split-K values: {:?}. #ID/skS below means instance ID with split-K S.", split_ks);
    let _ = writeln!(u, "\nUseful features (integer expressions you may compare with thresholds):");
    for f in setup.features.iter().take(24) {
        let _ = writeln!(u, "  {} = {}", f.name, synth_core::rule::text::expr_to_cpp(&f.expr));
    }
    // The second example's kernels: the smallest and the largest tile in M (a shape of the rule, not advice).
    let mut by_tile_m: Vec<(u32, i32)> = m
        .candidates
        .iter()
        .map(|c| c.kernel_id)
        .collect::<BTreeSet<i32>>()
        .into_iter()
        .filter_map(|id| cat.legacy_by_id(id).map(|inst| (inst.tile().0, id)))
        .collect();
    by_tile_m.sort();
    let _ = writeln!(
        u,
        "\nExamples of the form: the default kernel everywhere (what AITER runs untuned), and two leaves:\n\
         ```cpp\n{example}```\n```cpp\nif (M <= 64) {{\n    return {{kernel({small}), 1}};\n}} else {{\n    \
         return {{kernel({large}), 0}};\n}}\n```",
        small = by_tile_m.first().map(|x| x.1).unwrap_or(cat.default_alias),
        large = by_tile_m.last().map(|x| x.1).unwrap_or(cat.default_alias),
    );
    (system, u, training_table(setup))
}

/// The training shapes' latencies as the prompt's table (`prompt.table`): one row per shape in training
/// order, and the order rows are kept in when the prompt must be cut ([`keep_order`]).
fn training_table(setup: &RuleSetup) -> serde_json::Value {
    let m = &setup.matrix;
    let default = setup.default_candidate();
    let default_col = m.candidate_index(&default);
    let mut rows = Vec::with_capacity(setup.train.len());
    for &s in &setup.train {
        let sh = m.shapes[s];
        let mut row: Vec<(Candidate, f64)> =
            m.candidates.iter().enumerate().filter_map(|(c, cand)| m.us(s, c).map(|t| (*cand, t))).collect();
        row.sort_by(|a, b| a.1.total_cmp(&b.1));
        let top: Vec<String> = row.iter().take(6).map(|(c, t)| format!("{} {t:.2}", cand_str(*c))).collect();
        let def = default_col.and_then(|c| m.us(s, c)).map(|t| format!("{t:.2}")).unwrap_or_else(|| "n/a".into());
        rows.push(format!("  M={} N={} K={}: default {def}; {}", sh.m, sh.n, sh.k, top.join(", ")));
    }
    let shapes: Vec<Shape> = setup.train.iter().map(|&s| m.shapes[s]).collect();
    json!({
        "title": format!("Training shapes with their fastest candidates (us; default is {}):", cand_str(default)),
        "rows": rows,
        "keep_order": keep_order(&shapes),
    })
}

/// The order in which training rows are kept when not all fit: layer by layer in turn (each (N, K) once
/// per round), and within a layer its M values spread out — the middle, then the ends, then the middles of
/// the halves, and so on — so any prefix covers every layer and the range of M.
pub fn keep_order(shapes: &[Shape]) -> Vec<usize> {
    let mut layers: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
    for (i, s) in shapes.iter().enumerate() {
        layers.entry((s.n, s.k)).or_default().push(i);
    }
    let spread: Vec<Vec<usize>> = layers
        .into_values()
        .map(|mut idx| {
            idx.sort_by_key(|&i| (shapes[i].m, i));
            spread_order(idx.len()).into_iter().map(|j| idx[j]).collect()
        })
        .collect();
    let mut out = Vec::with_capacity(shapes.len());
    for round in 0..spread.iter().map(Vec::len).max().unwrap_or(0) {
        out.extend(spread.iter().filter_map(|l| l.get(round).copied()));
    }
    out
}

/// `0..n` with the middle first, then both ends, then the midpoints of the gaps left (breadth first).
fn spread_order(n: usize) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    let mut seen = vec![false; n];
    let mut out = Vec::with_capacity(n);
    let mut take = |i: usize, out: &mut Vec<usize>| {
        if !seen[i] {
            seen[i] = true;
            out.push(i);
        }
    };
    take((n - 1) / 2, &mut out);
    take(0, &mut out);
    take(n - 1, &mut out);
    let mut gaps = std::collections::VecDeque::from([(0, (n - 1) / 2), ((n - 1) / 2, n - 1)]);
    while let Some((a, b)) = gaps.pop_front() {
        if b > a + 1 {
            let mid = (a + b) / 2;
            take(mid, &mut out);
            gaps.push_back((a, mid));
            gaps.push_back((mid, b));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_order_covers_every_layer_and_the_range_of_m_first() {
        let ms = [1u32, 2, 4, 16, 32, 96, 288, 768, 1408, 3968, 13312];
        let layers = [(5120u32, 4096u32), (5120, 5120), (25600, 5120)];
        let shapes: Vec<Shape> =
            layers.iter().flat_map(|&(n, k)| ms.iter().map(move |&m| Shape::new(m, n, k))).collect();
        let order = keep_order(&shapes);
        // A permutation of the rows.
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, (0..shapes.len()).collect::<Vec<_>>());
        // The first round has one row of each layer (its middle M), the next two rounds the smallest and
        // largest M of each.
        let layer_of = |i: usize| (shapes[i].n, shapes[i].k);
        let first: BTreeSet<(u32, u32)> = order[..3].iter().map(|&i| layer_of(i)).collect();
        assert_eq!(first.len(), 3);
        assert!(order[..3].iter().all(|&i| shapes[i].m == 96));
        let ends: BTreeSet<u32> = order[3..9].iter().map(|&i| shapes[i].m).collect();
        assert_eq!(ends, BTreeSet::from([1, 13312]));
        assert_eq!(spread_order(1), vec![0]);
        assert_eq!(spread_order(5), vec![2, 0, 4, 1, 3]);
        assert!(keep_order(&[]).is_empty());
    }
}
