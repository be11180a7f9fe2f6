//! Exact simplification of a rule for real GEMM shapes: every dimension in `0..2^bits` (AITER passes
//! M, N, K as C++ `int`, never negative).
//!
//! The IR's arithmetic is total on all of i64 (wrapping `+ - *`, `x / 0 = 0`, `cdiv` of a non-positive
//! divisor is 0), and the generated C++ pays for that generality: signed 64-bit divisions by constants
//! with their sign fix-ups, guarded helpers, nested `cdiv`s. On non-negative dimensions most of it is
//! dead. [`for_dims`] returns a rule that, for every (M, N, K) in the domain,
//! - picks the same leaf as the input rule ([`crate::rule::interp`] on both agree), and
//! - keeps every subexpression's value in `0..=i64::MAX`, so no operation wraps, `/` is floor division,
//!   `cdiv(a, b)` is the ceiling of a / b with b >= 1, and the same text evaluated in unsigned 64-bit
//!   arithmetic (what the header's fast form does) computes the same values.
//!
//! The domain is the widest `0..2^bits` (bits <= 31) where that holds: a product of three tile counts
//! may exceed i64 near `INT_MAX` but not below 2^30. A rule for which no domain works (a difference
//! inside a product or a division, a literal factor below zero, a divisor that may be zero) has no
//! simplified form, and the renderers keep only the exact general form for it.
//!
//! Value bounds come from interval arithmetic over the domain (every operator is monotone in each operand
//! on non-negative values). Comparisons against a literal are rewritten with identities that hold for
//! every integer X >= 0 and literal d >= 1, each turning a division into a multiplication of the
//! threshold:
//! - `cdiv(X, d) <= t`  ⇔  `X <= t·d`;          `cdiv(X, d) >= t`  ⇔  `X >= (t−1)·d + 1`
//! - `X / d <= t`       ⇔  `X <= (t+1)·d − 1`;  `X / d >= t`       ⇔  `X >= t·d`
//! - `c·X <= t`         ⇔  `X <= ⌊t / c⌋`;      `c·X >= t`         ⇔  `X >= ⌈t / c⌉`
//! - `X + c <= t`       ⇔  `X <= t − c`  (and the same for `>=`, and `X − c` with `t + c`)
//!
//! (`<` and `>` become `<=` and `>=` against t − 1 and t + 1 first), and a comparison its bounds decide
//! becomes a constant. Before that, each side's top-level sum is split into terms: terms subtracted on
//! one side move to the other and the constants gather on one side (`A − B <= −1` becomes `A + 1 <= B`),
//! so differences of tile counts, which may be negative, compare non-negative sums. Inside expressions, `cdiv(cdiv(X, a), b)` = `cdiv(X, a·b)`, `(X / a) / b` =
//! `X / (a·b)` and `cdiv(X·c, d)` = `cdiv(X, d / c)` when c divides d.

use super::ir::{BinOp, CmpOp, Cond, Expr, Node, Rule};

/// The widest domain tried: dimensions below 2^31, i.e. every non-negative C++ `int`.
pub const MAX_BITS: u32 = 31;

const I64_MAX: i128 = i64::MAX as i128;

/// A rule simplified for dimensions in `0..2^bits`.
#[derive(Debug, Clone, PartialEq)]
pub struct Simplified {
    pub rule: Rule,
    pub bits: u32,
}

/// A side of a comparison as a sum: `constant + Σ plus − Σ minus`, with the bounds of the whole.
struct Linear {
    constant: i128,
    plus: Vec<Expr>,
    minus: Vec<Expr>,
    bounds: Bounds,
}

/// The sum of `terms` (left to right), `None` for no term.
fn sum(terms: Vec<Expr>) -> Option<Expr> {
    terms.into_iter().reduce(|a, b| Expr::bin(BinOp::Add, a, b))
}

/// Bounds of an expression's value over the domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bounds {
    lo: i128,
    hi: i128,
}

impl Bounds {
    fn plus(self, o: Bounds) -> Bounds {
        Bounds { lo: self.lo + o.lo, hi: self.hi + o.hi }
    }
    fn minus(self, o: Bounds) -> Bounds {
        Bounds { lo: self.lo - o.hi, hi: self.hi - o.lo }
    }
}

/// The rule simplified for M, N, K in `0..2^bits`, for the largest `bits` <= [`MAX_BITS`] that keeps it
/// in range, or `None` when none does (see the module documentation).
pub fn for_dims(rule: &Rule) -> Option<Simplified> {
    // Whether a domain works is monotone in its size: bounds only shrink with it.
    (1..=MAX_BITS).rev().find_map(|bits| for_dims_upto(rule, (1i64 << bits) - 1).map(|rule| Simplified { rule, bits }))
}

/// The rule simplified for the domain `0..=dim_max` (`dim_max` >= 0), or `None`; small domains let
/// tests check the result exhaustively.
pub fn for_dims_upto(rule: &Rule, dim_max: i64) -> Option<Rule> {
    let lower = Lower { dim_max: i128::from(dim_max.max(0)) };
    Some(Rule { root: lower.node(&rule.root)?, note: rule.note.clone() })
}

struct Lower {
    dim_max: i128,
}

impl Lower {
    fn node(&self, node: &Node) -> Option<Node> {
        match node {
            Node::Leaf(leaf) => Some(Node::Leaf(*leaf)),
            Node::Chain { branches, otherwise } => {
                let branches =
                    branches.iter().map(|(c, body)| Some((self.cond(c)?, self.node(body)?))).collect::<Option<_>>()?;
                Some(Node::Chain { branches, otherwise: Box::new(self.node(otherwise)?) })
            }
        }
    }

    fn cond(&self, cond: &Cond) -> Option<Cond> {
        Some(match cond {
            Cond::Cmp { op, lhs, rhs } => self.cmp(*op, lhs, rhs)?,
            Cond::And(cs) => Cond::And(cs.iter().map(|c| self.cond(c)).collect::<Option<_>>()?),
            Cond::Or(cs) => Cond::Or(cs.iter().map(|c| self.cond(c)).collect::<Option<_>>()?),
            Cond::Not(c) => Cond::Not(Box::new(self.cond(c)?)),
            Cond::Const(b) => Cond::Const(*b),
        })
    }

    /// Bounds of `e` over the domain, when every subexpression of it stays in `0..=i64::MAX` there.
    fn bounds(&self, e: &Expr) -> Option<Bounds> {
        let b = match e {
            Expr::Var(_) => Bounds { lo: 0, hi: self.dim_max },
            Expr::Lit(v) => Bounds { lo: i128::from(*v), hi: i128::from(*v) },
            Expr::Bin { op, lhs, rhs } => {
                let (a, b) = (self.bounds(lhs)?, self.bounds(rhs)?);
                match op {
                    BinOp::Add => a.plus(b),
                    BinOp::Sub => a.minus(b),
                    BinOp::Mul => Bounds { lo: a.lo * b.lo, hi: a.hi * b.hi },
                    BinOp::Div if b.lo >= 1 => Bounds { lo: a.lo / b.hi, hi: a.hi / b.lo },
                    // `a + b - 1` is computed too.
                    BinOp::CeilDiv if b.lo >= 1 && a.hi + b.hi - 1 <= I64_MAX => {
                        Bounds { lo: ceil_div(a.lo, b.hi), hi: ceil_div(a.hi, b.lo) }
                    }
                    BinOp::Div | BinOp::CeilDiv => return None,
                    BinOp::Min => Bounds { lo: a.lo.min(b.lo), hi: a.hi.min(b.hi) },
                    BinOp::Max => Bounds { lo: a.lo.max(b.lo), hi: a.hi.max(b.hi) },
                }
            }
        };
        (b.lo >= 0 && b.hi <= I64_MAX).then_some(b)
    }

    /// `e` with the expression identities applied bottom-up; same value on the domain. `e` must be in
    /// range ([`Lower::bounds`]); a rewrite whose result would not be is not made.
    fn expr(&self, e: &Expr) -> Expr {
        let Expr::Bin { op, lhs, rhs } = e else { return e.clone() };
        let (lhs, rhs) = (self.expr(lhs), self.expr(rhs));
        let simpler = match (op, &lhs, rhs.constant_value()) {
            (BinOp::CeilDiv | BinOp::Div, _, Some(1)) => Some(lhs.clone()),
            (BinOp::Mul, _, Some(1)) => Some(lhs.clone()),
            (BinOp::CeilDiv, Expr::Bin { op: BinOp::CeilDiv, lhs: x, rhs: a }, Some(b))
            | (BinOp::Div, Expr::Bin { op: BinOp::Div, lhs: x, rhs: a }, Some(b)) => match (a.constant_value(), b) {
                (Some(a), b) if a >= 1 && b >= 1 => {
                    a.checked_mul(b).map(|ab| Expr::bin(*op, (**x).clone(), Expr::Lit(ab)))
                }
                _ => None,
            },
            (BinOp::CeilDiv, Expr::Bin { op: BinOp::Mul, lhs: x, rhs: c }, Some(d)) => match c.constant_value() {
                Some(c) if c >= 1 && d >= 1 && d % c == 0 => {
                    Some(Expr::bin(BinOp::CeilDiv, (**x).clone(), Expr::Lit(d / c)))
                }
                _ => None,
            },
            _ => None,
        };
        let plain = Expr::bin(*op, lhs, rhs);
        match simpler {
            Some(s) if self.bounds(&s).is_some() => self.expr(&s),
            _ => plain,
        }
    }

    /// The top-level sum of `e`: a constant plus terms added and terms subtracted, each term in range;
    /// `None` when a term is not, or when a partial sum of `e` may leave i64 (then `e` itself may wrap).
    fn linear(&self, e: &Expr) -> Option<Linear> {
        if let Some(v) = e.constant_value() {
            let v = i128::from(v);
            return Some(Linear { constant: v, plus: Vec::new(), minus: Vec::new(), bounds: Bounds { lo: v, hi: v } });
        }
        let sum = match e {
            Expr::Bin { op: op @ (BinOp::Add | BinOp::Sub), lhs, rhs } => {
                let (a, b) = (self.linear(lhs)?, self.linear(rhs)?);
                if *op == BinOp::Add {
                    Linear {
                        constant: a.constant + b.constant,
                        plus: [a.plus, b.plus].concat(),
                        minus: [a.minus, b.minus].concat(),
                        bounds: a.bounds.plus(b.bounds),
                    }
                } else {
                    Linear {
                        constant: a.constant - b.constant,
                        plus: [a.plus, b.minus].concat(),
                        minus: [a.minus, b.plus].concat(),
                        bounds: a.bounds.minus(b.bounds),
                    }
                }
            }
            term => Linear { constant: 0, plus: vec![self.expr(term)], minus: Vec::new(), bounds: self.bounds(term)? },
        };
        (sum.bounds.lo >= i128::from(i64::MIN) && sum.bounds.hi <= I64_MAX).then_some(sum)
    }

    fn cmp(&self, op: CmpOp, lhs: &Expr, rhs: &Expr) -> Option<Cond> {
        // L op R  ⇔  (terms added to L, subtracted from R) op (terms added to R, subtracted from L) + c:
        // every side a sum of non-negative terms, the constants gathered in c.
        let (l, r) = (self.linear(lhs)?, self.linear(rhs)?);
        let left = sum([l.plus, r.minus].concat());
        let right = sum([r.plus, l.minus].concat());
        let c = r.constant - l.constant;
        let (op, x, t) = match (left, right) {
            (None, None) => return Some(Cond::Const(super::interp::compare(op, 0, c))),
            (Some(x), None) => (op, x, c),
            // 0 op Y + c  ⇔  Y op' -c.
            (None, Some(y)) => (op.swapped(), y, -c),
            (Some(x), Some(y)) => {
                let (x, y) = match c {
                    0 => (x, y),
                    c if c > 0 => (x, Expr::bin(BinOp::Add, y, Expr::Lit(i64::try_from(c).ok()?))),
                    c => (Expr::bin(BinOp::Add, x, Expr::Lit(i64::try_from(-c).ok()?)), y),
                };
                self.bounds(&x)?;
                self.bounds(&y)?;
                return Some(Cond::cmp(op, x, y));
            }
        };
        self.bounds(&x)?;
        // Only <=, >=, == and != from here on.
        let (op, t) = match op {
            CmpOp::Lt => (CmpOp::Le, t - 1),
            CmpOp::Gt => (CmpOp::Ge, t + 1),
            other => (other, t),
        };
        Some(self.threshold(op, x, t))
    }

    /// `x op t` (op one of <=, >=, ==, !=; `x` in range and simplified) with the threshold identities
    /// applied until none does, or a constant when the bounds of `x` decide it.
    fn threshold(&self, op: CmpOp, x: Expr, t: i128) -> Cond {
        let b = self.bounds(&x).expect("the caller checked the bounds");
        let decided = match op {
            CmpOp::Le if t >= b.hi => Some(true),
            CmpOp::Le if t < b.lo => Some(false),
            CmpOp::Ge if t <= b.lo => Some(true),
            CmpOp::Ge if t > b.hi => Some(false),
            CmpOp::Eq if t < b.lo || t > b.hi => Some(false),
            CmpOp::Ne if t < b.lo || t > b.hi => Some(true),
            _ => None,
        };
        if let Some(v) = decided {
            return Cond::Const(v);
        }
        // Here b.lo <= t <= b.hi, so t is in 0..=i64::MAX.
        let literal = |e: &Expr| e.constant_value().map(i128::from);
        let next = match (&x, op) {
            (Expr::Bin { op: bop, lhs, rhs }, CmpOp::Le | CmpOp::Ge) => {
                let le = op == CmpOp::Le;
                match (bop, literal(lhs), literal(rhs)) {
                    (BinOp::CeilDiv, _, Some(d)) if d >= 1 => Some((lhs, if le { t * d } else { (t - 1) * d + 1 })),
                    (BinOp::Div, _, Some(d)) if d >= 1 => Some((lhs, if le { (t + 1) * d - 1 } else { t * d })),
                    (BinOp::Mul, _, Some(c)) if c >= 1 => {
                        Some((lhs, if le { t.div_euclid(c) } else { ceil_div(t, c) }))
                    }
                    (BinOp::Mul, Some(c), _) if c >= 1 => {
                        Some((rhs, if le { t.div_euclid(c) } else { ceil_div(t, c) }))
                    }
                    (BinOp::Add, _, Some(c)) => Some((lhs, t - c)),
                    (BinOp::Add, Some(c), _) => Some((rhs, t - c)),
                    (BinOp::Sub, _, Some(c)) => Some((lhs, t + c)),
                    _ => None,
                }
            }
            _ => None,
        };
        match next {
            Some((inner, t)) => self.threshold(op, (**inner).clone(), t),
            None => Cond::cmp(op, x, Expr::Lit(i64::try_from(t).expect("t is within the bounds of x"))),
        }
    }
}

/// ⌈a / b⌉ for b >= 1 (any sign of a).
fn ceil_div(a: i128, b: i128) -> i128 {
    -((-a).div_euclid(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::ir::build::{cdiv, k, lit, m, mul, n};
    use crate::rule::text::cond_to_cpp;
    use crate::rule::Leaf;

    const DIM_MAX: i64 = i32::MAX as i64;

    fn rule_of(c: Cond) -> Rule {
        Rule::new(Node::Chain {
            branches: vec![(c, Node::Leaf(Leaf::new(5, 0)))],
            otherwise: Box::new(Node::Leaf(Leaf::new(0, 0))),
        })
    }
    fn lowered(c: Cond) -> String {
        let r = for_dims_upto(&rule_of(c), DIM_MAX).expect("lowerable");
        let Node::Chain { branches, .. } = &r.root else { unreachable!() };
        cond_to_cpp(&branches[0].0)
    }

    #[test]
    fn nested_tile_counts_become_one_multiplication_against_a_folded_threshold() {
        // cdiv(cdiv(M,16)·cdiv(N,64)·8, 132) <= 9  ⇔  8·a·b <= 1188  ⇔  a·b <= 148 (1188 / 8 = 148.5).
        let c = Cond::cmp(CmpOp::Le, cdiv(mul(mul(cdiv(m(), lit(16)), cdiv(n(), lit(64))), lit(8)), lit(132)), lit(9));
        assert_eq!(lowered(c), "cdiv(M, 16) * cdiv(N, 64) <= 148");
        // a·c·4 < 132  ⇔  a·c <= 32.
        let c = Cond::cmp(CmpOp::Lt, mul(mul(cdiv(m(), lit(16)), cdiv(n(), lit(128))), lit(4)), lit(132));
        assert_eq!(lowered(c), "cdiv(M, 16) * cdiv(N, 128) <= 32");
        // Inside a product: cdiv(p·4, 132) = cdiv(p, 33), cdiv(cdiv(K, 4), 128) = cdiv(K, 512).
        let p = mul(cdiv(m(), lit(128)), cdiv(n(), lit(128)));
        let c = Cond::cmp(CmpOp::Le, mul(cdiv(mul(p, lit(4)), lit(132)), cdiv(cdiv(k(), lit(4)), lit(128))), lit(15));
        let r = for_dims(&rule_of(c)).expect("lowerable below 2^30");
        assert_eq!(r.bits, 30, "cdiv(M,128)·cdiv(N,128)·4/132 · K/512 exceeds i64 at 2^31 - 1, not at 2^30 - 1");
        let Node::Chain { branches, .. } = &r.rule.root else { unreachable!() };
        assert_eq!(cond_to_cpp(&branches[0].0), "cdiv(cdiv(M, 128) * cdiv(N, 128), 33) * cdiv(K, 512) <= 15");
        // The edges themselves: cdiv(M, 16) <= 3  ⇔  M <= 48; cdiv(M, 16) < 3  ⇔  M <= 32.
        assert_eq!(lowered(Cond::cmp(CmpOp::Le, cdiv(m(), lit(16)), lit(3))), "M <= 48");
        assert_eq!(lowered(Cond::cmp(CmpOp::Lt, cdiv(m(), lit(16)), lit(3))), "M <= 32");
        assert_eq!(lowered(Cond::cmp(CmpOp::Le, mul(lit(3), n()), lit(10))), "N <= 3");
        assert_eq!(lowered(Cond::cmp(CmpOp::Ge, mul(n(), lit(3)), lit(10))), "N >= 4");
        assert_eq!(lowered(Cond::cmp(CmpOp::Ge, Expr::bin(BinOp::Div, k(), lit(10)), lit(4))), "K >= 40");
        // Sums and differences at the top of a side: the terms move so that both sides are sums.
        assert_eq!(lowered(Cond::cmp(CmpOp::Lt, Expr::bin(BinOp::Sub, m(), lit(5)), lit(10))), "M <= 14");
        let waves = |tm: i64| cdiv(mul(cdiv(m(), lit(tm)), cdiv(n(), lit(128))), lit(304));
        let contrast = Cond::cmp(CmpOp::Le, Expr::bin(BinOp::Sub, waves(128), waves(64)), lit(-1));
        assert_eq!(
            lowered(contrast),
            "cdiv(cdiv(M, 128) * cdiv(N, 128), 304) + 1 <= cdiv(cdiv(M, 64) * cdiv(N, 128), 304)"
        );
        let both = Cond::cmp(CmpOp::Ge, Expr::bin(BinOp::Sub, m(), n()), Expr::bin(BinOp::Sub, k(), lit(3)));
        assert_eq!(lowered(both), "M + 3 >= K + N");
        // >= through a ceiling: cdiv(M, 16) >= 3  ⇔  M >= 33; a literal on the left is swapped.
        assert_eq!(lowered(Cond::cmp(CmpOp::Ge, cdiv(m(), lit(16)), lit(3))), "M >= 33");
        assert_eq!(lowered(Cond::cmp(CmpOp::Gt, lit(1024), k())), "K <= 1023");
        // Floor division: M / 10 <= 4  ⇔  M <= 49.
        assert_eq!(lowered(Cond::cmp(CmpOp::Le, Expr::bin(BinOp::Div, m(), lit(10)), lit(4))), "M <= 49");
    }

    #[test]
    fn comparisons_the_bounds_decide_become_constants() {
        assert_eq!(lowered(Cond::cmp(CmpOp::Le, cdiv(m(), lit(16)), lit(-1))), "false");
        assert_eq!(lowered(Cond::cmp(CmpOp::Ge, cdiv(m(), lit(16)), lit(0))), "true");
        assert_eq!(lowered(Cond::cmp(CmpOp::Le, m(), lit(DIM_MAX))), "true");
        assert_eq!(lowered(Cond::cmp(CmpOp::Eq, n(), lit(-5))), "false");
        assert_eq!(lowered(Cond::cmp(CmpOp::Lt, lit(3), lit(4))), "true");
    }

    #[test]
    fn expressions_that_may_leave_the_range_keep_the_rule_out() {
        let inner = Cond::cmp(CmpOp::Lt, mul(Expr::bin(BinOp::Sub, m(), lit(5)), n()), lit(10));
        assert!(for_dims(&rule_of(inner)).is_none(), "M - 5 is negative for M < 5, and a factor");
        let wraps = Cond::cmp(CmpOp::Le, Expr::bin(BinOp::Add, m(), lit(i64::MAX)), lit(5));
        assert!(for_dims(&rule_of(wraps)).is_none(), "M + INT64_MAX wraps for M >= 1");
        assert!(for_dims(&rule_of(Cond::cmp(CmpOp::Lt, m(), n()))).is_some_and(|s| s.bits == 31));
        let neg = Cond::cmp(CmpOp::Lt, mul(m(), lit(-2)), n());
        assert!(for_dims(&rule_of(neg)).is_none());
        let by_var = Cond::cmp(CmpOp::Lt, Expr::bin(BinOp::Div, m(), n()), lit(3));
        assert!(for_dims(&rule_of(by_var)).is_none(), "N may be 0");
        // M·N·K < 2^63 needs dimensions below 2^21.
        let three = Cond::cmp(CmpOp::Lt, mul(mul(m(), n()), k()), lit(3));
        assert_eq!(for_dims(&rule_of(three)).map(|s| s.bits), Some(21));
        assert!(for_dims_upto(&rule_of(Cond::cmp(CmpOp::Lt, mul(m(), n()), lit(3))), DIM_MAX).is_some());
        // N + 1 >= 1 always, so cdiv by it is in range.
        let by_pos = Cond::cmp(CmpOp::Le, cdiv(m(), Expr::bin(BinOp::Add, n(), lit(1))), lit(3));
        assert!(for_dims(&rule_of(by_pos)).is_some());
    }

    /// The exact value of `e` at `v`, when every subexpression is in 0..=i64::MAX and every divisor >= 1
    /// (what [`for_dims`] promises for its output), computed without the IR's wrapping semantics.
    fn exact(e: &Expr, v: [i64; 3]) -> Option<i128> {
        let x = match e {
            Expr::Var(var) => i128::from(v[*var as usize]),
            Expr::Lit(l) => i128::from(*l),
            Expr::Bin { op, lhs, rhs } => {
                let (a, b) = (exact(lhs, v)?, exact(rhs, v)?);
                match op {
                    BinOp::Add => a + b,
                    BinOp::Sub => a - b,
                    BinOp::Mul => a * b,
                    BinOp::Div if b >= 1 => a / b,
                    BinOp::CeilDiv if b >= 1 && a + b - 1 <= I64_MAX => (a + b - 1) / b,
                    BinOp::Div | BinOp::CeilDiv => return None,
                    BinOp::Min => a.min(b),
                    BinOp::Max => a.max(b),
                }
            }
        };
        (0..=I64_MAX).contains(&x).then_some(x)
    }

    fn exprs_in(c: &Cond, out: &mut Vec<Expr>) {
        match c {
            Cond::Cmp { lhs, rhs, .. } => out.extend([lhs.clone(), rhs.clone()]),
            Cond::And(cs) | Cond::Or(cs) => cs.iter().for_each(|c| exprs_in(c, out)),
            Cond::Not(c) => exprs_in(c, out),
            Cond::Const(_) => {}
        }
    }

    fn random_expr(rng: &mut impl rand::Rng, depth: u32) -> Expr {
        if depth == 0 || rng.gen_bool(0.3) {
            return match rng.gen_range(0..10) {
                0..=4 => [m(), n(), k()][rng.gen_range(0..3)].clone(),
                5..=7 => lit(rng.gen_range(1..=9)),
                8 => lit(rng.gen_range(-2..=0)),
                _ => lit([1 << 31, 1 << 40, i64::MAX][rng.gen_range(0..3)]),
            };
        }
        let ops = [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::CeilDiv, BinOp::Min, BinOp::Max];
        let op = ops[rng.gen_range(0..ops.len())];
        // Mostly literal divisors, as rules have them.
        let rhs = if matches!(op, BinOp::Div | BinOp::CeilDiv | BinOp::Mul) && rng.gen_bool(0.7) {
            lit(rng.gen_range(1..=7))
        } else {
            random_expr(rng, depth - 1)
        };
        Expr::bin(op, random_expr(rng, depth - 1), rhs)
    }

    /// Exhaustive over the domain 0..=D: the simplified rule picks what the rule picks at every point, and
    /// every subexpression of its comparisons is exact (in range, no zero divisor) at every point.
    #[test]
    fn simplified_rules_agree_with_the_interpreter_everywhere_on_a_small_domain() {
        use rand::{Rng, SeedableRng};
        const D: i64 = 19;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let ops = [CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge, CmpOp::Eq, CmpOp::Ne];
        let (mut lowered, mut simplified) = (0, 0);
        for _ in 0..400 {
            let lhs = random_expr(&mut rng, 3);
            let rhs = if rng.gen_bool(0.8) { lit(rng.gen_range(-3..=120)) } else { random_expr(&mut rng, 2) };
            let c = Cond::cmp(ops[rng.gen_range(0..ops.len())], lhs, rhs);
            let c = if rng.gen_bool(0.2) { Cond::Not(Box::new(c)) } else { c };
            let rule = rule_of(c.clone());
            let Some(low) = for_dims_upto(&rule, D) else { continue };
            lowered += 1;
            let Node::Chain { branches, .. } = &low.root else { unreachable!() };
            simplified += usize::from(branches[0].0 != c);
            let mut exprs = Vec::new();
            exprs_in(&branches[0].0, &mut exprs);
            for a in 0..=D {
                for b in 0..=D {
                    for z in 0..=D {
                        let v = [a, b, z];
                        assert_eq!(branches[0].0.eval_i64(v), c.eval_i64(v), "{c} vs {} at {v:?}", branches[0].0);
                        for e in &exprs {
                            assert!(exact(e, v).is_some(), "{e} leaves the range at {v:?} (from {c})");
                        }
                    }
                }
            }
        }
        assert!(
            lowered >= 100 && simplified >= 50,
            "the cases exercise the rewrites ({lowered} lowered, {simplified} changed)"
        );
    }
}
