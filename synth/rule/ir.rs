//! Rule IR. All arithmetic is on i64 with the semantics below, so the interpreter, the generated C++
//! and the generated Rust agree bit for bit:
//! - `Div` truncates toward zero (C++ and Rust integer division); division by zero yields 0 in every
//!   backend (the renderers emit a guarded helper);
//! - `CeilDiv(a, b)` = (a + b - 1) / b for b > 0, 0 when b <= 0;
//! - variables M, N, K are the GEMM dimensions (non-negative).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Var {
    M,
    N,
    K,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    CeilDiv,
    Min,
    Max,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expr {
    Var(Var),
    Lit(i64),
    Bin { op: BinOp, lhs: Box<Expr>, rhs: Box<Expr> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cond {
    Cmp { op: CmpOp, lhs: Expr, rhs: Expr },
    And(Vec<Cond>),
    Or(Vec<Cond>),
    Not(Box<Cond>),
    Const(bool),
}

/// What a rule returns: a catalog legacy instance (kernelId 0..18; the default alias -1 is resolved to
/// its target when parsed) and split-K (log2 of KBatch; 0 when the rule text gives none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Leaf {
    pub kernel_id: i32,
    #[serde(default)]
    pub split_k: u32,
}

/// A node: a leaf, or an if / else-if / else chain whose branches are nodes (so trees nest).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Node {
    Leaf(Leaf),
    Chain { branches: Vec<(Cond, Node)>, otherwise: Box<Node> },
}

/// A whole rule with optional provenance text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub root: Node,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}
