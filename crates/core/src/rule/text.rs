//! Canonical rule text in the C++ and Rust forms: what LLM prompts show and what mutation operators
//! print. [`crate::rule::parse_cpp`] and [`crate::rule::parse_rust`] read the output back to the
//! same rule (after [`Rule::canonical`]; a note is printed as a leading `//` comment block).
//!
//! Expressions use the helper calls `cdiv(a, b)`, `min(a, b)`, `max(a, b)` and are parenthesized
//! exactly where the grouping differs from the operators' precedence and left associativity, so
//! `a - (b - c)` keeps its parentheses and `(a - b) - c` prints as `a - b - c`.

use std::fmt::Write as _;

use super::ir::{BinOp, Cond, Expr, Leaf, Node, Rule, Var};
use crate::catalog::Catalog;

/// Variable spelling of a text form.
#[derive(Clone, Copy)]
enum Style {
    Cpp,
    Rust,
}

impl Style {
    fn var(self, v: Var) -> &'static str {
        match self {
            Style::Cpp => v.upper(),
            Style::Rust => v.lower(),
        }
    }
}

/// Binding strength of an expression's top operator (higher binds tighter).
fn prec(e: &Expr) -> u8 {
    match e {
        Expr::Var(_) | Expr::Lit(_) => 3,
        Expr::Bin { op, .. } => op_prec(*op),
    }
}

fn op_prec(op: BinOp) -> u8 {
    match op {
        BinOp::Add | BinOp::Sub => 1,
        BinOp::Mul | BinOp::Div => 2,
        BinOp::CeilDiv | BinOp::Min | BinOp::Max => 3,
    }
}

fn write_expr(out: &mut String, e: &Expr, style: Style) {
    match e {
        Expr::Var(v) => out.push_str(style.var(*v)),
        Expr::Lit(v) => {
            let _ = write!(out, "{v}");
        }
        Expr::Bin { op, lhs, rhs } => {
            if let Some(name) = op.call_name() {
                out.push_str(name);
                out.push('(');
                write_expr(out, lhs, style);
                out.push_str(", ");
                write_expr(out, rhs, style);
                out.push(')');
                return;
            }
            let p = op_prec(*op);
            write_grouped(out, lhs, style, prec(lhs) < p);
            out.push(' ');
            out.push_str(op.infix().unwrap_or("/"));
            out.push(' ');
            write_grouped(out, rhs, style, prec(rhs) <= p);
        }
    }
}

fn write_grouped(out: &mut String, e: &Expr, style: Style, parens: bool) {
    if parens {
        out.push('(');
    }
    write_expr(out, e, style);
    if parens {
        out.push(')');
    }
}

fn write_cond(out: &mut String, c: &Cond, style: Style) {
    match c {
        Cond::Const(b) => out.push_str(if *b { "true" } else { "false" }),
        Cond::Cmp { op, lhs, rhs } => {
            write_expr(out, lhs, style);
            out.push(' ');
            out.push_str(op.symbol());
            out.push(' ');
            write_expr(out, rhs, style);
        }
        Cond::Not(inner) => {
            out.push('!');
            let atom = matches!(**inner, Cond::Const(_) | Cond::Not(_));
            if !atom {
                out.push('(');
            }
            write_cond(out, inner, style);
            if !atom {
                out.push(')');
            }
        }
        Cond::And(items) | Cond::Or(items) => {
            let is_and = matches!(c, Cond::And(_));
            match items.len() {
                0 => out.push_str(if is_and { "true" } else { "false" }),
                1 => write_cond(out, &items[0], style),
                _ => {
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            out.push_str(if is_and { " && " } else { " || " });
                        }
                        // Nested and/or operands keep their grouping (and read unambiguously).
                        let group = matches!(item, Cond::And(v) | Cond::Or(v) if v.len() >= 2);
                        if group {
                            out.push('(');
                        }
                        write_cond(out, item, style);
                        if group {
                            out.push(')');
                        }
                    }
                }
            }
        }
    }
}

/// An expression as C++ (variables `M`, `N`, `K`).
pub fn expr_to_cpp(e: &Expr) -> String {
    let mut s = String::new();
    write_expr(&mut s, e, Style::Cpp);
    s
}

/// A condition as C++ (variables `M`, `N`, `K`), without the surrounding `if (...)` parentheses.
pub fn cond_to_cpp(c: &Cond) -> String {
    let mut s = String::new();
    write_cond(&mut s, c, Style::Cpp);
    s
}

/// An expression as Rust (variables `m`, `n`, `k`).
pub fn expr_to_rust(e: &Expr) -> String {
    let mut s = String::new();
    write_expr(&mut s, e, Style::Rust);
    s
}

/// A condition as Rust (variables `m`, `n`, `k`).
pub fn cond_to_rust(c: &Cond) -> String {
    let mut s = String::new();
    write_cond(&mut s, c, Style::Rust);
    s
}

impl std::fmt::Display for Expr {
    /// The C++ text ([`expr_to_cpp`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&expr_to_cpp(self))
    }
}

impl std::fmt::Display for Cond {
    /// The C++ text ([`cond_to_cpp`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&cond_to_cpp(self))
    }
}

/// A leaf of a backend other than CK legacy as both text forms write it: a triton config by its name
/// (`triton_bm64_bn128_bk128_g32_w4_s2`, or `triton(ID)` for an id that is no config), else
/// `BACKEND(ID)` (`vendor(0)`, `cktile(3)`). `None` for CK legacy.
pub fn other_backend_item(leaf: &Leaf) -> Option<String> {
    use crate::catalog::Libtype;
    match leaf.backend {
        Libtype::Ck => None,
        Libtype::Triton => Some(
            crate::catalog::triton::TritonConfig::from_kernel_id(i64::from(leaf.kernel_id))
                .map(|c| c.name())
                .unwrap_or_else(|_| format!("triton({})", leaf.kernel_id)),
        ),
        b => Some(format!("{b}({})", leaf.kernel_id)),
    }
}

/// The leaf's instance as C++: `name<DDataType, EDataType>`, or `kernel(ID)` for an id the catalog
/// does not have.
pub fn leaf_item_cpp(leaf: &Leaf, catalog: &Catalog) -> String {
    if let Some(item) = other_backend_item(leaf) {
        return item;
    }
    match catalog.legacy_by_id(leaf.kernel_id) {
        Some(inst) if leaf.kernel_id >= 0 => format!("{}<DDataType, EDataType>", inst.name),
        _ => format!("kernel({})", leaf.kernel_id),
    }
}

/// The leaf's instance as Rust: the name as an identifier, or the bare id when unknown.
pub fn leaf_item_rust(leaf: &Leaf, catalog: &Catalog) -> String {
    if let Some(item) = other_backend_item(leaf) {
        return item;
    }
    match catalog.legacy_by_id(leaf.kernel_id) {
        Some(inst) if leaf.kernel_id >= 0 => inst.name.clone(),
        _ => leaf.kernel_id.to_string(),
    }
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("    ");
    }
}

fn write_cpp_node(out: &mut String, node: &Node, catalog: &Catalog, level: usize) {
    match node {
        Node::Leaf(leaf) => {
            indent(out, level);
            let _ = writeln!(out, "return {{{}, {}}};", leaf_item_cpp(leaf, catalog), leaf.split_k);
        }
        Node::Chain { branches, otherwise } => {
            indent(out, level);
            for (i, (cond, child)) in branches.iter().enumerate() {
                if i > 0 {
                    out.push_str(" else ");
                }
                let _ = writeln!(out, "if ({}) {{", cond_to_cpp(cond));
                write_cpp_node(out, child, catalog, level + 1);
                indent(out, level);
                out.push('}');
            }
            out.push_str(" else {\n");
            write_cpp_node(out, otherwise, catalog, level + 1);
            indent(out, level);
            out.push_str("}\n");
        }
    }
}

fn write_rust_node(out: &mut String, node: &Node, catalog: &Catalog, level: usize) {
    match node {
        Node::Leaf(leaf) => {
            indent(out, level);
            let _ = writeln!(out, "({}, {})", leaf_item_rust(leaf, catalog), leaf.split_k);
        }
        Node::Chain { branches, otherwise } => {
            indent(out, level);
            for (i, (cond, child)) in branches.iter().enumerate() {
                if i > 0 {
                    out.push_str(" else ");
                }
                let _ = writeln!(out, "if {} {{", cond_to_rust(cond));
                write_rust_node(out, child, catalog, level + 1);
                indent(out, level);
                out.push('}');
            }
            out.push_str(" else {\n");
            write_rust_node(out, otherwise, catalog, level + 1);
            indent(out, level);
            out.push_str("}\n");
        }
    }
}

/// The rule as a C++ if/else chain with `return {name<DDataType, EDataType>, splitK};` leaves,
/// preceded by the note as `//` comments. A chain with no branches prints as its `otherwise`.
pub fn rule_to_cpp_text(rule: &Rule, catalog: &Catalog) -> String {
    let mut out = rule.note.as_deref().map(super::source::note_comment).unwrap_or_default();
    write_cpp_node(&mut out, &drop_empty_chains(&rule.root), catalog, 0);
    out
}

/// The rule as a Rust if/else expression with `(name, splitK)` leaves (variables `m`, `n`, `k`),
/// preceded by the note as `//` comments.
pub fn rule_to_rust_text(rule: &Rule, catalog: &Catalog) -> String {
    let mut out = rule.note.as_deref().map(super::source::note_comment).unwrap_or_default();
    write_rust_node(&mut out, &drop_empty_chains(&rule.root), catalog, 0);
    out
}

/// Replaces chains without branches (no text form can write them) by their `otherwise`.
fn drop_empty_chains(node: &Node) -> Node {
    match node {
        Node::Leaf(l) => Node::Leaf(*l),
        Node::Chain { branches, otherwise } if branches.is_empty() => drop_empty_chains(otherwise),
        Node::Chain { branches, otherwise } => Node::Chain {
            branches: branches.iter().map(|(c, n)| (c.clone(), drop_empty_chains(n))).collect(),
            otherwise: Box::new(drop_empty_chains(otherwise)),
        },
    }
}
