//! Checks of a parsed rule against the catalog: unknown instances, split-K out of range, constant
//! division by zero, and branches (or final `else`s) that can never be taken.
//!
//! Reachability is exact for conditions built from comparisons of one variable against a constant
//! expression (`M <= 128`, `cdiv(4096, 2) < N`, ...) combined with `&&`, `||`, `!` and `true`/`false`:
//! the set of shapes reaching a branch is kept as a union of boxes over M, N, K in `1..=u32::MAX`.
//! Any other comparison is treated as "may hold, may fail", so a branch is only reported when it is
//! certainly unreachable.
//!
//! Missing final `else` and unknown variables are reported by the parsers (they are syntax errors in
//! this rule language).

use std::fmt;

use super::interp::compare;
use super::ir::{BinOp, CmpOp, Cond, Expr, Leaf, Node, Rule, Var};
use super::source::{NodePath, SourceMap};
use crate::catalog::Catalog;

/// Largest split-K (log2 of KBatch) a leaf may return: the deepest level the bench measures.
pub use crate::catalog::MAX_SPLIT_K;

/// How bad an issue is: errors make the rule unusable, warnings point at dead or suspicious code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Warning,
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// One finding. `path` addresses the node concerned (see [`crate::rule::source`]); `line` is its
/// source line when the rule was parsed from text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub severity: Severity,
    pub line: Option<usize>,
    pub path: NodePath,
    pub message: String,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}: {}", self.severity, self.message),
            None => write!(f, "{}: {}", self.severity, self.message),
        }
    }
}

/// Most branches (conditions) a rule may hold in any form: the Rust form's limit on `if`s.
pub const MAX_BRANCHES: usize = super::parse_rust::MAX_RUST_IFS;

fn count_branches(node: &Node) -> usize {
    let mut total = 0;
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if let Node::Chain { branches, otherwise } = n {
            total += branches.len();
            stack.extend(branches.iter().map(|(_, b)| b));
            stack.push(otherwise);
        }
    }
    total
}

/// Whether any issue is an error.
pub fn has_errors(issues: &[Issue]) -> bool {
    issues.iter().any(|i| i.severity == Severity::Error)
}

/// Validates a rule that has no source positions (e.g. built in memory or read from JSON).
pub fn validate(rule: &Rule, catalog: &Catalog) -> Vec<Issue> {
    validate_with_source(rule, catalog, &SourceMap::default())
}

/// Validates a rule, attaching the source lines recorded by the parser.
pub fn validate_with_source(rule: &Rule, catalog: &Catalog, source: &SourceMap) -> Vec<Issue> {
    let mut v = Validator { catalog, source, issues: Vec::new() };
    let branches = count_branches(&rule.root);
    if branches > MAX_BRANCHES {
        v.push(
            Severity::Error,
            None,
            &[],
            format!(
                "the rule has {branches} branches; at most {MAX_BRANCHES} are allowed in any form (the Rust \
                 form's limit, so every rule can be printed and read back as C++, Rust and JSON); simplify it"
            ),
        );
        return v.issues;
    }
    let mut path = Vec::new();
    v.node(&rule.root, &mut path, Some(Region::all()));
    if !v.issues.iter().any(|i| i.severity == Severity::Error) {
        if let Some(why) = unprintable(rule, catalog) {
            v.push(Severity::Error, None, &[], why);
        }
    }
    v.issues
}

/// Bracket levels the generated files wrap a rule's text in (namespace, function, block), kept free when
/// a rule is checked against the readers' limits.
const WRAPPER_DEPTH: usize = 4;

/// Why the rule cannot be written in every text form so that it reads back (its nesting or a condition's
/// length past what the C++ and Rust readers accept), or `None`. A rule from JSON or an agent is held to
/// the same limits as one read from text, so every valid rule renders to files `synth check` reads.
fn unprintable(rule: &Rule, catalog: &Catalog) -> Option<String> {
    type Reader = fn(&str, &Catalog) -> Result<Rule, super::RuleError>;
    let forms: [(&str, String, Reader); 2] = [
        ("C++", super::text::rule_to_cpp_text(rule, catalog), super::parse_cpp::parse_cpp),
        ("Rust", super::text::rule_to_rust_text(rule, catalog), super::parse_rust::parse_rust),
    ];
    for (form, text, parse) in forms {
        let limited = super::source::check_text_limits_within(&text, super::source::MAX_BRACKET_DEPTH - WRAPPER_DEPTH);
        if let Err(e) = limited.and_then(|()| parse(&text, catalog).map(|_| ())) {
            return Some(format!(
                "the rule's {form} form would not read back ({}); flatten the nesting or simplify the conditions",
                e.message
            ));
        }
    }
    None
}

struct Validator<'a> {
    catalog: &'a Catalog,
    source: &'a SourceMap,
    issues: Vec<Issue>,
}

impl Validator<'_> {
    fn push(&mut self, severity: Severity, line: Option<usize>, path: &[usize], message: String) {
        self.issues.push(Issue { severity, line, path: path.to_vec(), message });
    }

    /// `region`: over-approximation of the shapes reaching this node (None: not tracked any more).
    fn node(&mut self, node: &Node, path: &mut NodePath, region: Option<Region>) {
        match node {
            Node::Leaf(leaf) => self.leaf(leaf, path),
            Node::Chain { branches, otherwise } => {
                let mut remaining = region;
                for (i, (cond, child)) in branches.iter().enumerate() {
                    path.push(i);
                    let line = self.source.guard_line(path);
                    self.cond_checks(cond, line, path);
                    let (holds, fails) = regions(cond);
                    let reaching = remaining.as_ref().and_then(|r| r.intersect(&holds));
                    if reaching.as_ref().is_some_and(Region::is_empty) {
                        let why = if branches[..i].iter().any(|(c, _)| matches!(c, Cond::Const(true))) {
                            "an earlier condition is always true".to_string()
                        } else {
                            "no shape (M, N, K >= 1) satisfies it after the earlier conditions".to_string()
                        };
                        let message = format!("branch {} (`if ({cond})`) is never taken: {why}", i + 1);
                        self.push(Severity::Warning, line, path, message);
                        // Still check its leaves; reachability inside a dead branch is moot.
                        self.node(child, path, None);
                    } else {
                        self.node(child, path, reaching);
                    }
                    remaining = remaining.and_then(|r| r.intersect(&fails));
                    path.pop();
                }
                path.push(branches.len());
                if remaining.as_ref().is_some_and(Region::is_empty) {
                    let line = self.source.guard_line(path);
                    let message =
                        "the final `else` is never taken: the conditions before it cover every shape".to_string();
                    self.push(Severity::Warning, line, path, message);
                    self.node(otherwise, path, None);
                } else {
                    self.node(otherwise, path, remaining);
                }
                path.pop();
            }
        }
    }

    fn leaf(&mut self, leaf: &Leaf, path: &[usize]) {
        let line = self.source.leaf_line(path);
        if !leaf.is_ck() {
            if let Some(message) = other_backend_issue(leaf) {
                self.push(Severity::Error, line, path, message);
            }
            return;
        }
        let known = leaf.kernel_id >= 0 && self.catalog.legacy_candidates().iter().any(|i| i.id == leaf.kernel_id);
        if leaf.kernel_id == -1 {
            let message =
                format!("kernelId -1 is the default alias; write its target kernelId {}", self.catalog.default_alias);
            self.push(Severity::Error, line, path, message);
        } else if !known {
            let ids: Vec<i32> = self.catalog.legacy_candidates().iter().map(|i| i.id).collect();
            let range = match (ids.iter().min(), ids.iter().max()) {
                (Some(lo), Some(hi)) => format!("{lo}..{hi}"),
                _ => "none".to_string(),
            };
            let message = format!(
                "unknown instance: kernelId {} is not a legacy candidate (the catalog has {range})",
                leaf.kernel_id
            );
            self.push(Severity::Error, line, path, message);
        }
        if leaf.split_k > MAX_SPLIT_K {
            let message = format!(
                "split-K {} is out of range: expected 0..={MAX_SPLIT_K} (log2 of KBatch, so at most {} K splits)",
                leaf.split_k,
                1u32 << MAX_SPLIT_K
            );
            self.push(Severity::Error, line, path, message);
        }
    }

    /// Warnings inside one condition: division or cdiv by a constant that is zero (or negative).
    fn cond_checks(&mut self, cond: &Cond, line: Option<usize>, path: &[usize]) {
        let mut found = Vec::new();
        visit_exprs(cond, &mut |e| {
            if let Expr::Bin { op: op @ (BinOp::Div | BinOp::CeilDiv), rhs, .. } = e {
                if let Some(v) = rhs.constant_value() {
                    if v == 0 || (*op == BinOp::CeilDiv && v < 0) {
                        found.push(format!("`{e}` divides by {v}, which always evaluates to 0"));
                    }
                }
            }
        });
        for message in found {
            self.push(Severity::Warning, line, path, message);
        }
    }
}

fn visit_exprs(cond: &Cond, f: &mut dyn FnMut(&Expr)) {
    fn walk(e: &Expr, f: &mut dyn FnMut(&Expr)) {
        f(e);
        if let Expr::Bin { lhs, rhs, .. } = e {
            walk(lhs, f);
            walk(rhs, f);
        }
    }
    match cond {
        Cond::Cmp { lhs, rhs, .. } => {
            walk(lhs, f);
            walk(rhs, f);
        }
        Cond::And(cs) | Cond::Or(cs) => cs.iter().for_each(|c| visit_exprs(c, f)),
        Cond::Not(c) => visit_exprs(c, f),
        Cond::Const(_) => {}
    }
}

// ---- shape regions --------------------------------------------------------------------------

/// Smallest and largest value of every variable (M, N, K are u32 dimensions, at least 1).
const LO: i64 = 1;
const HI: i64 = u32::MAX as i64;

/// Most boxes a region may hold before the analysis stops tracking it (then: "may be reachable").
const MAX_BOXES: usize = 4096;

/// Inclusive bounds `[lo, hi]` per variable (M, N, K).
type Bounds = [(i64, i64); 3];

/// A union of boxes of shapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    boxes: Vec<Bounds>,
}

impl Region {
    fn all() -> Region {
        Region { boxes: vec![[(LO, HI); 3]] }
    }

    fn none() -> Region {
        Region { boxes: Vec::new() }
    }

    fn is_empty(&self) -> bool {
        self.boxes.is_empty()
    }

    fn var_range(var: Var, lo: i64, hi: i64) -> Region {
        let mut b = [(LO, HI); 3];
        let i = var_index(var);
        b[i] = (lo.max(LO), hi.min(HI));
        if b[i].0 > b[i].1 {
            Region::none()
        } else {
            Region { boxes: vec![b] }
        }
    }

    /// The intersection; None when it would hold too many boxes to track.
    fn intersect(&self, other: &Region) -> Option<Region> {
        if self.boxes.len().saturating_mul(other.boxes.len()) > MAX_BOXES * 16 {
            return None;
        }
        let mut seen = std::collections::HashSet::new();
        let mut boxes = Vec::new();
        for a in &self.boxes {
            for b in &other.boxes {
                let mut c = *a;
                let mut empty = false;
                for i in 0..3 {
                    c[i] = (a[i].0.max(b[i].0), a[i].1.min(b[i].1));
                    empty |= c[i].0 > c[i].1;
                }
                if !empty && seen.insert(c) {
                    boxes.push(c);
                }
            }
        }
        Region { boxes }.capped()
    }

    /// The union; None when it would hold too many boxes to track.
    fn union(mut self, other: Region) -> Option<Region> {
        if self.boxes.len() + other.boxes.len() > MAX_BOXES * 2 {
            return None;
        }
        let mut seen: std::collections::HashSet<Bounds> = self.boxes.iter().copied().collect();
        for b in other.boxes {
            if seen.insert(b) {
                self.boxes.push(b);
            }
        }
        self.capped()
    }

    /// None when the region grew too large to track.
    fn capped(self) -> Option<Region> {
        (self.boxes.len() <= MAX_BOXES).then_some(self)
    }
}

fn var_index(v: Var) -> usize {
    match v {
        Var::M => 0,
        Var::N => 1,
        Var::K => 2,
    }
}

/// Over-approximations of where `cond` holds and where it fails. Exact for the analysable forms
/// described in the module docs; [`Region::all`] for the parts that are not.
pub fn regions(cond: &Cond) -> (Region, Region) {
    let (holds, fails) = regions_inner(cond);
    (holds.unwrap_or_else(Region::all), fails.unwrap_or_else(Region::all))
}

/// Like [`regions`] with None for "too large to track" (treated as every shape).
fn regions_inner(cond: &Cond) -> (Option<Region>, Option<Region>) {
    match cond {
        Cond::Const(true) => (Some(Region::all()), Some(Region::none())),
        Cond::Const(false) => (Some(Region::none()), Some(Region::all())),
        Cond::Not(c) => {
            let (h, f) = regions_inner(c);
            (f, h)
        }
        Cond::Cmp { op, lhs, rhs } => match cmp_region(*op, lhs, rhs) {
            Some((h, f)) => (Some(h), Some(f)),
            None => (Some(Region::all()), Some(Region::all())),
        },
        Cond::And(cs) | Cond::Or(cs) => {
            let is_and = matches!(cond, Cond::And(_));
            // And: holds = ∩ holds_i, fails = ∪ fails_i; Or: the dual.
            let (mut meet, mut join) = (Some(Region::all()), Some(Region::none()));
            for c in cs {
                let (h, f) = regions_inner(c);
                let (m, j) = if is_and { (h, f) } else { (f, h) };
                meet = match (meet, m) {
                    (Some(a), Some(b)) => a.intersect(&b),
                    (Some(a), None) => Some(a),
                    (None, Some(b)) => Some(b),
                    (None, None) => None,
                };
                join = match (join, j) {
                    (Some(a), Some(b)) => a.union(b),
                    _ => None,
                };
            }
            if is_and {
                (meet, join)
            } else {
                (join, meet)
            }
        }
    }
}

/// Regions where `lhs op rhs` holds / fails, when one side is a variable and the other constant
/// (or both are constant).
fn cmp_region(op: CmpOp, lhs: &Expr, rhs: &Expr) -> Option<(Region, Region)> {
    if let (Some(a), Some(b)) = (lhs.constant_value(), rhs.constant_value()) {
        return Some(if compare(op, a, b) { (Region::all(), Region::none()) } else { (Region::none(), Region::all()) });
    }
    let (var, op, c) = match (lhs, rhs.constant_value(), rhs, lhs.constant_value()) {
        (Expr::Var(v), Some(c), _, _) => (*v, op, c),
        (_, _, Expr::Var(v), Some(c)) => (*v, op.swapped(), c),
        _ => return None,
    };
    let holds = var_cmp(var, op, c);
    let fails = var_cmp(var, op.negated(), c);
    Some((holds, fails))
}

/// Region where `var op c` holds.
fn var_cmp(var: Var, op: CmpOp, c: i64) -> Region {
    match op {
        CmpOp::Lt => Region::var_range(var, i64::MIN, c.saturating_sub(1)),
        CmpOp::Le => Region::var_range(var, i64::MIN, c),
        CmpOp::Gt => Region::var_range(var, c.saturating_add(1), i64::MAX),
        CmpOp::Ge => Region::var_range(var, c, i64::MAX),
        CmpOp::Eq => Region::var_range(var, c, c),
        CmpOp::Ne => {
            let below = Region::var_range(var, i64::MIN, c.saturating_sub(1));
            below.union(Region::var_range(var, c.saturating_add(1), i64::MAX)).unwrap_or_else(Region::all)
        }
    }
}
/// What is wrong with a leaf of a backend other than CK legacy, if anything: a triton leaf must name a
/// config of the family ([`crate::catalog::triton`]) with split-K 0 (its configs have none), the vendor
/// leaf is kernel 0 with split-K 0, a CK-tile leaf a kernelId of at least 0 and a split-K in range.
pub fn other_backend_issue(leaf: &Leaf) -> Option<String> {
    use crate::catalog::Libtype;
    match leaf.backend {
        Libtype::Ck => None,
        Libtype::Triton => match crate::catalog::triton::TritonConfig::from_kernel_id(i64::from(leaf.kernel_id)) {
            Err(e) => Some(format!("triton leaf: {e}")),
            Ok(_) if leaf.split_k != 0 => {
                Some(format!("triton leaf with split-K {}: a triton config has no split-K (write 0)", leaf.split_k))
            }
            Ok(_) => None,
        },
        Libtype::Vendor if leaf.kernel_id != 0 || leaf.split_k != 0 => Some(format!(
            "vendor leaf ({}, {}): the vendor GEMM is one kernel, kernelId 0 with split-K 0",
            leaf.kernel_id, leaf.split_k
        )),
        Libtype::Vendor => None,
        Libtype::Cktile if leaf.kernel_id < 0 => {
            Some(format!("cktile leaf: kernelId {} is not a CK-tile candidate id (expected 0 or more)", leaf.kernel_id))
        }
        Libtype::Cktile if leaf.split_k > MAX_SPLIT_K => {
            Some(format!("cktile leaf: split-K {} is out of range: expected 0..={MAX_SPLIT_K}", leaf.split_k))
        }
        Libtype::Cktile => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `if (3 * (3 * ... (3 * M)) <= 1)` nested `depth` deep, else kernel 2.
    fn nested(depth: usize) -> Rule {
        let mut e = Expr::Var(Var::M);
        for _ in 0..depth {
            e = Expr::bin(BinOp::Mul, Expr::Lit(3), e);
        }
        let cond = Cond::Cmp { op: CmpOp::Le, lhs: e, rhs: Expr::Lit(1) };
        Rule::new(Node::Chain {
            branches: vec![(cond, Node::Leaf(Leaf::new(1, 0)))],
            otherwise: Box::new(Node::Leaf(Leaf::new(2, 0))),
        })
    }

    /// A rule (from JSON or an agent) nested past what the C++ and Rust readers take is invalid, so every
    /// valid rule prints to text that `synth check` reads back; a shallower one is valid and reads back.
    #[test]
    fn every_valid_rule_reads_back_from_its_text_forms() {
        let catalog = Catalog::embedded();
        let deep = validate(&nested(50), &catalog);
        assert!(has_errors(&deep), "{deep:?}");
        assert!(deep.iter().any(|i| i.message.contains("would not read back")), "{deep:?}");
        let shallow = nested(20);
        assert!(!has_errors(&validate(&shallow, &catalog)));
        let cpp = crate::rule::text::rule_to_cpp_text(&shallow, &catalog);
        let rust = crate::rule::text::rule_to_rust_text(&shallow, &catalog);
        assert_eq!(crate::rule::parse_cpp::parse_cpp(&cpp, &catalog).unwrap().canonical(), shallow.canonical());
        assert_eq!(crate::rule::parse_rust::parse_rust(&rust, &catalog).unwrap().canonical(), shallow.canonical());
    }
}
