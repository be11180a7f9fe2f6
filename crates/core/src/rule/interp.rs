//! The reference interpreter: evaluation of expressions, conditions and rules with the i64
//! semantics documented in [`crate::rule::ir`] (wrapping `+ - *`, truncating `/`, `x / 0 = 0`,
//! `cdiv(a, b) = (a + b - 1) / b` for `b > 0` and 0 otherwise). Never panics.

use super::ir::{BinOp, CmpOp, Cond, Expr, Leaf, Node, Rule, Var};

/// `a / b` truncating toward zero; 0 when `b == 0`; `i64::MIN / -1` wraps to `i64::MIN`.
pub fn div(a: i64, b: i64) -> i64 {
    if b == 0 {
        0
    } else {
        a.wrapping_div(b)
    }
}

/// `(a + b - 1) / b` (wrapping sum, truncating division) when `b > 0`; 0 when `b <= 0`.
pub fn cdiv(a: i64, b: i64) -> i64 {
    if b <= 0 {
        0
    } else {
        a.wrapping_add(b).wrapping_sub(1).wrapping_div(b)
    }
}

/// Applies a binary operator with the IR's semantics.
pub fn apply(op: BinOp, a: i64, b: i64) -> i64 {
    match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        BinOp::Div => div(a, b),
        BinOp::CeilDiv => cdiv(a, b),
        BinOp::Min => a.min(b),
        BinOp::Max => a.max(b),
    }
}

/// Applies a comparison.
pub fn compare<T: Ord>(op: CmpOp, a: T, b: T) -> bool {
    match op {
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
    }
}

impl Expr {
    /// Value at (M, N, K) = (`m`, `n`, `k`).
    pub fn eval(&self, m: u32, n: u32, k: u32) -> i64 {
        self.eval_i64([i64::from(m), i64::from(n), i64::from(k)])
    }

    /// Value with the variables given as i64 (`[M, N, K]`).
    pub fn eval_i64(&self, vars: [i64; 3]) -> i64 {
        match self {
            Expr::Var(Var::M) => vars[0],
            Expr::Var(Var::N) => vars[1],
            Expr::Var(Var::K) => vars[2],
            Expr::Lit(v) => *v,
            Expr::Bin { op, lhs, rhs } => apply(*op, lhs.eval_i64(vars), rhs.eval_i64(vars)),
        }
    }
}

impl Cond {
    /// Truth at (M, N, K) = (`m`, `n`, `k`).
    pub fn eval(&self, m: u32, n: u32, k: u32) -> bool {
        self.eval_i64([i64::from(m), i64::from(n), i64::from(k)])
    }

    /// Truth with the variables given as i64 (`[M, N, K]`). `And` and `Or` short-circuit.
    pub fn eval_i64(&self, vars: [i64; 3]) -> bool {
        match self {
            Cond::Cmp { op, lhs, rhs } => compare(*op, lhs.eval_i64(vars), rhs.eval_i64(vars)),
            Cond::And(cs) => cs.iter().all(|c| c.eval_i64(vars)),
            Cond::Or(cs) => cs.iter().any(|c| c.eval_i64(vars)),
            Cond::Not(c) => !c.eval_i64(vars),
            Cond::Const(b) => *b,
        }
    }
}

impl Node {
    /// The leaf selected at (M, N, K): the first branch whose condition holds, else `otherwise`.
    pub fn eval(&self, m: u32, n: u32, k: u32) -> Leaf {
        let vars = [i64::from(m), i64::from(n), i64::from(k)];
        let mut node = self;
        loop {
            match node {
                Node::Leaf(l) => return *l,
                Node::Chain { branches, otherwise } => {
                    node = branches.iter().find(|(c, _)| c.eval_i64(vars)).map(|(_, n)| n).unwrap_or(otherwise);
                }
            }
        }
    }
}

impl Rule {
    /// The leaf the rule selects for the GEMM shape (M, N, K).
    pub fn eval(&self, m: u32, n: u32, k: u32) -> Leaf {
        self.root.eval(m, n, k)
    }
}
