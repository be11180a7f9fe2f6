//! Rule IR. All arithmetic is on i64 with the semantics below, so the interpreter, the generated C++
//! and the generated Rust agree bit for bit:
//! - `Div` truncates toward zero (C++ and Rust integer division); division by zero yields 0 in every
//!   backend (the renderers emit a guarded helper);
//! - `CeilDiv(a, b)` = (a + b - 1) / b for b > 0, 0 when b <= 0;
//! - variables M, N, K are the GEMM dimensions (non-negative).
//!
//! Overflow: `+`, `-`, `*` and the `a + b - 1` inside `CeilDiv` wrap (two's complement, like Rust's
//! `wrapping_*`), and `i64::MIN / -1` wraps to `i64::MIN`; nothing ever panics. A C++ backend must
//! therefore do these operations in `uint64_t` and cast back (signed overflow is undefined in C++), and
//! a Rust backend must use `wrapping_add` / `wrapping_sub` / `wrapping_mul` / `wrapping_div`.
//! The reference implementation is [`crate::rule::interp`].

use serde::{Deserialize, Serialize};

pub use crate::catalog::Libtype;

/// A GEMM dimension the rule may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Var {
    M,
    N,
    K,
}

/// Integer operators of [`Expr::Bin`]; `CeilDiv`, `Min`, `Max` are written as calls
/// (`cdiv(a, b)`, `min(a, b)`, `max(a, b)`) in rule text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    CeilDiv,
    Min,
    Max,
}

/// An i64-valued expression over M, N, K.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Expr {
    Var(Var),
    Lit(i64),
    Bin { op: BinOp, lhs: Box<Expr>, rhs: Box<Expr> },
}

/// Comparison operators (`<`, `<=`, `>`, `>=`, `==`, `!=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// A boolean condition. `And(vec![])` is true and `Or(vec![])` is false; the text forms write
/// `And`/`Or` with at least two operands (see [`Cond::canonical`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Cond {
    Cmp { op: CmpOp, lhs: Expr, rhs: Expr },
    And(Vec<Cond>),
    Or(Vec<Cond>),
    Not(Box<Cond>),
    Const(bool),
}

/// What a rule returns: a backend (CK legacy unless said otherwise: a rule over CK only reads and writes
/// exactly as before backends existed), its kernel (for CK a catalog legacy instance, kernelId 0..18; the
/// default alias -1 is resolved to its target when parsed) and split-K (log2 of KBatch; 0 when the rule
/// text gives none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Leaf {
    #[serde(default, skip_serializing_if = "Libtype::is_ck")]
    pub backend: Libtype,
    pub kernel_id: i32,
    #[serde(default)]
    pub split_k: u32,
}

/// A node: a leaf, or an if / else-if / else chain whose branches are nodes (so trees nest).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Node {
    Leaf(Leaf),
    Chain { branches: Vec<(Cond, Node)>, otherwise: Box<Node> },
}

/// A whole rule with optional provenance text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub root: Node,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Deepest nesting of JSON arrays/objects a rule's serde form may have: the JSON reader (and so
/// every stored rule) stops there. Parsers reject deeper rules; see [`Rule::json_depth`].
pub const MAX_JSON_DEPTH: usize = 127;

impl Var {
    /// All variables, in M, N, K order.
    pub const ALL: [Var; 3] = [Var::M, Var::N, Var::K];

    /// Upper-case name as written in C++ rule text.
    pub fn upper(self) -> &'static str {
        match self {
            Var::M => "M",
            Var::N => "N",
            Var::K => "K",
        }
    }

    /// Lower-case name as written in Rust rule text.
    pub fn lower(self) -> &'static str {
        match self {
            Var::M => "m",
            Var::N => "n",
            Var::K => "k",
        }
    }

    /// The variable named `name` (`M`/`m`, `N`/`n`, `K`/`k`), if any.
    pub fn from_name(name: &str) -> Option<Var> {
        match name {
            "M" | "m" => Some(Var::M),
            "N" | "n" => Some(Var::N),
            "K" | "k" => Some(Var::K),
            _ => None,
        }
    }
}

/// The variables `collect` gathers (the one walk of [`Expr::vars_used`] and [`Cond::vars_used`]).
fn collected_vars(collect: impl FnOnce(&mut std::collections::BTreeSet<Var>)) -> std::collections::BTreeSet<Var> {
    let mut out = std::collections::BTreeSet::new();
    collect(&mut out);
    out
}

impl Expr {
    /// A binary expression.
    pub fn bin(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
        Expr::Bin { op, lhs: Box::new(lhs), rhs: Box::new(rhs) }
    }

    /// Variables the expression reads.
    pub fn vars_used(&self) -> std::collections::BTreeSet<Var> {
        collected_vars(|out| self.collect_vars(out))
    }

    fn collect_vars(&self, out: &mut std::collections::BTreeSet<Var>) {
        match self {
            Expr::Var(v) => {
                out.insert(*v);
            }
            Expr::Lit(_) => {}
            Expr::Bin { lhs, rhs, .. } => {
                lhs.collect_vars(out);
                rhs.collect_vars(out);
            }
        }
    }

    /// Nesting of arrays/objects in the serde JSON form (`{"var": "M"}` is 1, each `bin` adds 2).
    pub fn json_depth(&self) -> usize {
        match self {
            Expr::Var(_) | Expr::Lit(_) => 1,
            Expr::Bin { lhs, rhs, .. } => 2 + lhs.json_depth().max(rhs.json_depth()),
        }
    }

    /// The value of an expression that reads no variable; `None` if it reads one.
    pub fn constant_value(&self) -> Option<i64> {
        if self.vars_used().is_empty() {
            Some(self.eval(0, 0, 0))
        } else {
            None
        }
    }
}

impl BinOp {
    /// Every operator, in declaration order.
    pub const ALL: [BinOp; 7] =
        [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::CeilDiv, BinOp::Min, BinOp::Max];

    /// The infix symbol of `+ - * /` as rule text writes it; None for the operators written as calls.
    pub fn infix(self) -> Option<&'static str> {
        match self {
            BinOp::Add => Some("+"),
            BinOp::Sub => Some("-"),
            BinOp::Mul => Some("*"),
            BinOp::Div => Some("/"),
            BinOp::CeilDiv | BinOp::Min | BinOp::Max => None,
        }
    }

    /// The call name of `cdiv`, `min`, `max` as rule text writes it; None for the infix operators.
    pub fn call_name(self) -> Option<&'static str> {
        match self {
            BinOp::CeilDiv => Some("cdiv"),
            BinOp::Min => Some("min"),
            BinOp::Max => Some("max"),
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => None,
        }
    }
}

impl CmpOp {
    /// Every comparison, in declaration order.
    pub const ALL: [CmpOp; 6] = [CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge, CmpOp::Eq, CmpOp::Ne];

    /// The comparison that holds exactly when `self` does not.
    pub fn negated(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Ge,
            CmpOp::Le => CmpOp::Gt,
            CmpOp::Gt => CmpOp::Le,
            CmpOp::Ge => CmpOp::Lt,
            CmpOp::Eq => CmpOp::Ne,
            CmpOp::Ne => CmpOp::Eq,
        }
    }

    /// The comparison with its operands swapped (`a < b` ⇔ `b > a`).
    pub fn swapped(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            CmpOp::Eq => CmpOp::Eq,
            CmpOp::Ne => CmpOp::Ne,
        }
    }

    /// The operator as written in C++ and Rust.
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
        }
    }
}

impl Cond {
    /// A comparison.
    pub fn cmp(op: CmpOp, lhs: Expr, rhs: Expr) -> Cond {
        Cond::Cmp { op, lhs, rhs }
    }

    /// Variables the condition reads.
    pub fn vars_used(&self) -> std::collections::BTreeSet<Var> {
        collected_vars(|out| self.collect_vars(out))
    }

    fn collect_vars(&self, out: &mut std::collections::BTreeSet<Var>) {
        match self {
            Cond::Cmp { lhs, rhs, .. } => {
                lhs.collect_vars(out);
                rhs.collect_vars(out);
            }
            Cond::And(cs) | Cond::Or(cs) => cs.iter().for_each(|c| c.collect_vars(out)),
            Cond::Not(c) => c.collect_vars(out),
            Cond::Const(_) => {}
        }
    }

    /// Nesting of arrays/objects in the serde JSON form.
    pub fn json_depth(&self) -> usize {
        match self {
            Cond::Const(_) => 1,
            Cond::Cmp { lhs, rhs, .. } => 2 + lhs.json_depth().max(rhs.json_depth()),
            Cond::And(cs) | Cond::Or(cs) => 2 + cs.iter().map(Cond::json_depth).max().unwrap_or(0),
            Cond::Not(c) => 1 + c.json_depth(),
        }
    }

    /// The same condition in the shape the text forms write: `And`/`Or` with no operand become
    /// `Const(true)`/`Const(false)` and with one operand become that operand. Evaluation is unchanged.
    pub fn canonical(&self) -> Cond {
        match self {
            Cond::And(cs) | Cond::Or(cs) => {
                let is_and = matches!(self, Cond::And(_));
                match cs.len() {
                    0 => Cond::Const(is_and),
                    1 => cs[0].canonical(),
                    _ => {
                        let inner = cs.iter().map(Cond::canonical).collect();
                        if is_and {
                            Cond::And(inner)
                        } else {
                            Cond::Or(inner)
                        }
                    }
                }
            }
            Cond::Not(c) => Cond::Not(Box::new(c.canonical())),
            Cond::Cmp { .. } | Cond::Const(_) => self.clone(),
        }
    }
}

impl Leaf {
    /// A leaf selecting legacy `kernel_id` with `split_k` (log2 of KBatch).
    pub fn new(kernel_id: i32, split_k: u32) -> Leaf {
        Leaf { backend: Libtype::Ck, kernel_id, split_k }
    }

    /// A leaf selecting `kernel_id` of `backend` with `split_k`.
    pub fn of(backend: Libtype, kernel_id: i32, split_k: u32) -> Leaf {
        Leaf { backend, kernel_id, split_k }
    }

    /// The leaf returning candidate `c`.
    pub fn from_candidate(c: crate::catalog::Candidate) -> Leaf {
        Leaf { backend: c.backend, kernel_id: c.kernel_id, split_k: c.split_k }
    }

    /// The candidate this leaf returns (the same backend, kernel and split).
    pub fn candidate(&self) -> crate::catalog::Candidate {
        crate::catalog::Candidate::of(self.backend, self.kernel_id, self.split_k)
    }

    /// The kernel of this leaf (backend and id, without the split).
    pub fn kernel(&self) -> crate::catalog::KernelRef {
        crate::catalog::KernelRef { backend: self.backend, id: self.kernel_id }
    }

    /// The same kernel with another split-K.
    pub fn with_split(&self, split_k: u32) -> Leaf {
        Leaf { split_k, ..*self }
    }

    /// Whether the leaf is a CK legacy instance (the only kind AITER's C++ dispatcher can return).
    pub fn is_ck(&self) -> bool {
        self.backend.is_ck()
    }
}

impl Node {
    /// Leaves in source order (first branch first, `otherwise` last), duplicates kept.
    pub fn leaves(&self) -> Vec<Leaf> {
        let mut out = Vec::new();
        self.collect_leaves(&mut out);
        out
    }

    fn collect_leaves(&self, out: &mut Vec<Leaf>) {
        match self {
            Node::Leaf(l) => out.push(*l),
            Node::Chain { branches, otherwise } => {
                branches.iter().for_each(|(_, n)| n.collect_leaves(out));
                otherwise.collect_leaves(out);
            }
        }
    }

    /// Decision depth: the largest number of conditions tested on the way to a leaf. A leaf has
    /// depth 0; the i-th branch (0-based) of a chain sits below i + 1 tests and its `otherwise`
    /// below one test per branch. `if a .. else if b .. else ..` and the nested form
    /// `if a .. else { if b .. else .. }` therefore have the same depth (2).
    pub fn depth(&self) -> usize {
        match self {
            Node::Leaf(_) => 0,
            Node::Chain { branches, otherwise } => {
                let in_branches = branches.iter().enumerate().map(|(i, (_, n))| i + 1 + n.depth());
                in_branches.chain(std::iter::once(branches.len() + otherwise.depth())).max().unwrap_or(0)
            }
        }
    }

    /// Nesting of arrays/objects in the serde JSON form (a leaf is 2; a chain puts its branches 4
    /// levels down and its `otherwise` 2 levels down).
    pub fn json_depth(&self) -> usize {
        match self {
            Node::Leaf(_) => 2,
            Node::Chain { branches, otherwise } => {
                let in_branches =
                    branches.iter().map(|(c, n)| 4 + c.json_depth().max(n.json_depth())).max().unwrap_or(3);
                in_branches.max(2 + otherwise.json_depth())
            }
        }
    }

    /// Variables read by any condition.
    pub fn vars_used(&self) -> std::collections::BTreeSet<Var> {
        let mut out = std::collections::BTreeSet::new();
        self.visit_conds(&mut |c| c.collect_vars(&mut out));
        out
    }

    /// Calls `f` on every condition, in source order.
    pub fn visit_conds(&self, f: &mut dyn FnMut(&Cond)) {
        if let Node::Chain { branches, otherwise } = self {
            for (c, n) in branches {
                f(c);
                n.visit_conds(f);
            }
            otherwise.visit_conds(f);
        }
    }

    /// The same node with every condition in [`Cond::canonical`] shape and chains without branches
    /// replaced by their `otherwise`.
    pub fn canonical(&self) -> Node {
        match self {
            Node::Leaf(l) => Node::Leaf(*l),
            Node::Chain { branches, otherwise } if branches.is_empty() => otherwise.canonical(),
            Node::Chain { branches, otherwise } => Node::Chain {
                branches: branches.iter().map(|(c, n)| (c.canonical(), n.canonical())).collect(),
                otherwise: Box::new(otherwise.canonical()),
            },
        }
    }
}

impl Rule {
    /// A rule with no note.
    pub fn new(root: Node) -> Rule {
        Rule { root, note: None }
    }

    /// Leaves in source order, duplicates kept.
    pub fn leaves(&self) -> Vec<Leaf> {
        self.root.leaves()
    }

    /// Number of leaves (return statements), duplicates counted.
    pub fn num_leaves(&self) -> usize {
        self.leaves().len()
    }

    /// Decision depth, see [`Node::depth`].
    pub fn depth(&self) -> usize {
        self.root.depth()
    }

    /// Distinct (kernel, split-K) pairs the rule can return.
    pub fn instances_used(&self) -> std::collections::BTreeSet<Leaf> {
        self.leaves().into_iter().collect()
    }

    /// Variables read by any condition.
    pub fn vars_used(&self) -> std::collections::BTreeSet<Var> {
        self.root.vars_used()
    }

    /// Nesting of arrays/objects in the serde JSON form; at most [`MAX_JSON_DEPTH`] can be read back.
    pub fn json_depth(&self) -> usize {
        1 + self.root.json_depth()
    }

    /// The same rule in canonical shape ([`Node::canonical`]): what the text forms read back after
    /// printing it.
    pub fn canonical(&self) -> Rule {
        Rule { root: self.root.canonical(), note: self.note.clone() }
    }
}

/// Short constructors for writing rules in Rust (the synthesizer's features, tests).
pub mod build {
    use super::{BinOp, Expr, Var};

    /// The variable M.
    pub fn m() -> Expr {
        Expr::Var(Var::M)
    }
    /// The variable N.
    pub fn n() -> Expr {
        Expr::Var(Var::N)
    }
    /// The variable K.
    pub fn k() -> Expr {
        Expr::Var(Var::K)
    }
    /// A variable.
    pub fn var(v: Var) -> Expr {
        Expr::Var(v)
    }
    /// A literal.
    pub fn lit(v: i64) -> Expr {
        Expr::Lit(v)
    }
    /// `cdiv(a, b)`.
    pub fn cdiv(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::CeilDiv, a, b)
    }
    /// `a * b`.
    pub fn mul(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Mul, a, b)
    }
}
