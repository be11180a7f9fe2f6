//! Python renderer: the rule as a standard-library-only module, `select(M, N, K) -> (backend, kernel_id,
//! split_k)`, for runtimes whose choice between backends is made in Python (AITER's `gemm_op_a8w8.py`,
//! vLLM, SGLang).
//!
//! Arithmetic follows [`crate::rule::ir`] exactly, on Python's unbounded integers: every `+ - *` result
//! is wrapped to 64-bit two's complement (`_wrap`), `/` truncates toward zero with `x / 0 = 0` and
//! `i64::MIN / -1 = i64::MIN` (`_div`), `cdiv(a, b)` is `(a + b - 1) / b` for `b > 0` and 0 otherwise
//! (`_cdiv`). `select` takes integers in the i64 range (what the interpreter's `eval_i64` takes) and
//! raises `TypeError` / `ValueError` for anything else. `tests/render.rs` runs it with `python3` against
//! the interpreter on 10,000+ shapes.
//!
//! The tree is written as nested `if` / `elif` / `else` (a rule's depth is bounded by
//! [`crate::rule::ir::MAX_JSON_DEPTH`], well inside Python's 100 indentation levels), and every string
//! the module holds is a backend word, a catalog instance name checked to be a C++ identifier or a
//! triton config name the family prints: no text from the data reaches the code unchecked (the provenance
//! comment goes through [`synth_base::sanitize::comment_line`]).

use std::fmt::Write as _;

use super::{leaf_instance, resolved, writer, Provenance};
use crate::catalog::triton::TritonConfig;
use crate::catalog::{Catalog, Libtype};
use crate::rule::{BinOp, Cond, Expr, Leaf, Node, Rule, Var};

/// File name of the generated Python module.
pub const PYTHON_MODULE: &str = "select_kernel.py";

/// The name a leaf's kernel goes by: the CK instance name, the triton config name, `vendor(0)`,
/// `cktile(ID)`. Errors for a CK id the catalog lacks or a name that is not an identifier.
fn kernel_name(leaf: &Leaf, catalog: &Catalog) -> anyhow::Result<String> {
    if leaf.is_ck() {
        return Ok(leaf_instance(catalog, leaf)?.name.clone());
    }
    let item = crate::rule::text::other_backend_item(leaf).unwrap_or_default();
    // The forms other_backend_item prints: identifiers, or `word(digits)`.
    let safe = !item.is_empty() && item.chars().all(|c| c.is_ascii_alphanumeric() || "_()-".contains(c));
    if !safe {
        anyhow::bail!("internal error: leaf {} printed as {item:?}", leaf.candidate());
    }
    Ok(item)
}

fn var(v: Var) -> &'static str {
    v.upper()
}

fn expr(e: &Expr, out: &mut String) {
    match e {
        Expr::Var(v) => out.push_str(var(*v)),
        Expr::Lit(v) if *v < 0 => {
            let _ = write!(out, "({v})");
        }
        Expr::Lit(v) => {
            let _ = write!(out, "{v}");
        }
        Expr::Bin { op, lhs, rhs } => {
            let (pre, mid) = match op {
                BinOp::Add => ("_wrap(", " + "),
                BinOp::Sub => ("_wrap(", " - "),
                BinOp::Mul => ("_wrap(", " * "),
                BinOp::Div => ("_div(", ", "),
                BinOp::CeilDiv => ("_cdiv(", ", "),
                BinOp::Min => ("min(", ", "),
                BinOp::Max => ("max(", ", "),
            };
            out.push_str(pre);
            expr(lhs, out);
            out.push_str(mid);
            expr(rhs, out);
            out.push(')');
        }
    }
}

fn cond(c: &Cond, out: &mut String) {
    match c {
        Cond::Cmp { op, lhs, rhs } => {
            out.push('(');
            expr(lhs, out);
            let _ = write!(out, " {} ", op.symbol());
            expr(rhs, out);
            out.push(')');
        }
        Cond::And(cs) | Cond::Or(cs) if cs.is_empty() => {
            out.push_str(if matches!(c, Cond::And(_)) { "True" } else { "False" });
        }
        Cond::And(cs) | Cond::Or(cs) => {
            let joiner = if matches!(c, Cond::And(_)) { " and " } else { " or " };
            out.push('(');
            for (i, x) in cs.iter().enumerate() {
                if i > 0 {
                    out.push_str(joiner);
                }
                cond(x, out);
            }
            out.push(')');
        }
        Cond::Not(x) => {
            out.push_str("(not ");
            cond(x, out);
            out.push(')');
        }
        Cond::Const(b) => out.push_str(if *b { "True" } else { "False" }),
    }
}

fn leaf_tuple(leaf: &Leaf) -> String {
    format!("(\"{}\", {}, {})", leaf.backend.as_str(), leaf.kernel_id, leaf.split_k)
}

fn node(n: &Node, level: usize, out: &mut String) {
    let pad = "    ".repeat(level);
    match n {
        Node::Leaf(leaf) => {
            let _ = writeln!(out, "{pad}return {}", leaf_tuple(leaf));
        }
        Node::Chain { branches, otherwise } if branches.is_empty() => node(otherwise, level, out),
        Node::Chain { branches, otherwise } => {
            for (i, (c, body)) in branches.iter().enumerate() {
                let mut text = String::new();
                cond(c, &mut text);
                let _ = writeln!(out, "{pad}{} {text}:", if i == 0 { "if" } else { "elif" });
                node(body, level + 1, out);
            }
            let _ = writeln!(out, "{pad}else:");
            node(otherwise, level + 1, out);
        }
    }
}

/// Renders `rule` as the Python module [`PYTHON_MODULE`], with `provenance` as `#` comments.
pub fn render_python(rule: &Rule, catalog: &Catalog, provenance: &Provenance) -> anyhow::Result<String> {
    let rule = resolved(rule, catalog)?;
    let mut out = String::new();
    for line in writer::header_lines(PYTHON_MODULE, provenance, &rule) {
        if line.is_empty() {
            out.push_str("#\n");
        } else {
            let _ = writeln!(out, "# {line}");
        }
    }
    out.push_str(PRELUDE);
    out.push_str("\n# The kernel name of every (backend, kernel_id) the rule returns.\nKERNEL_NAMES = {\n");
    let mut seen = std::collections::BTreeSet::new();
    for leaf in rule.instances_used() {
        if seen.insert((leaf.backend, leaf.kernel_id)) {
            let _ = writeln!(
                out,
                "    (\"{}\", {}): \"{}\",",
                leaf.backend.as_str(),
                leaf.kernel_id,
                kernel_name(&leaf, catalog)?
            );
        }
    }
    out.push_str("}\n");
    out.push_str(
        "\n# The meta-parameters of every triton config the rule returns (the runtimes' JSON keys).\nTRITON_CONFIGS = {\n",
    );
    for leaf in rule.instances_used().iter().filter(|l| l.backend == Libtype::Triton) {
        if !seen.remove(&(leaf.backend, leaf.kernel_id)) {
            continue;
        }
        let c = TritonConfig::from_kernel_id(i64::from(leaf.kernel_id))
            .map_err(|e| anyhow::anyhow!("the rule returns {}: {e}", leaf.candidate()))?;
        let values = [c.block_m, c.block_n, c.block_k, c.group_m, c.num_warps, c.num_stages];
        let fields: Vec<String> =
            crate::catalog::triton::RUNTIME_KEYS.iter().zip(values).map(|(k, v)| format!("\"{k}\": {v}")).collect();
        let _ = writeln!(out, "    {}: {{{}}},", leaf.kernel_id, fields.join(", "));
    }
    out.push_str("}\n\n\n");
    let used = rule.vars_used();
    out.push_str("def select(M, N, K):\n");
    out.push_str(
        "    \"\"\"The (backend, kernel_id, split_k) the rule picks for Y[M, N] = X[M, K] * W[N, K]^T.\n\n    \
         backend is \"ck\", \"cktile\", \"triton\" or \"vendor\"; split_k is log2 of the K split.\n    \"\"\"\n",
    );
    out.push_str("    M, N, K = _dim(M, \"M\"), _dim(N, \"N\"), _dim(K, \"K\")\n");
    if used.is_empty() {
        out.push_str("    del M, N, K\n");
    }
    node(&rule.root, 1, &mut out);
    Ok(out)
}

/// Helpers every module starts with (the i64 semantics of the rule IR).
const PRELUDE: &str = r#""""Kernel selection generated by gemm-synth: select(M, N, K) -> (backend, kernel_id, split_k).

Standard library only. Arithmetic is the rule interpreter's: 64-bit two's-complement integers, + - *
wrap, / truncates toward zero and x / 0 = 0, cdiv(a, b) = (a + b - 1) / b for b > 0, else 0.
"""

_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1


def _wrap(x):
    """x as a 64-bit two's-complement integer."""
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >> 63 else x


def _div(a, b):
    """a / b truncated toward zero; 0 when b is 0; _I64_MIN / -1 wraps to _I64_MIN."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return _wrap(-q if (a < 0) != (b < 0) else q)


def _cdiv(a, b):
    """(a + b - 1) / b for b > 0 (the sum wraps), else 0."""
    if b <= 0:
        return 0
    return _div(_wrap(a + b - 1), b)


def _dim(value, name):
    """A GEMM dimension as the rule reads it: an int (not a bool) in the 64-bit range."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"select: {name} must be an int, got {type(value).__name__}")
    if not _I64_MIN <= value <= _I64_MAX:
        raise ValueError(f"select: {name} = {value} is outside the 64-bit range the rule is defined on")
    return value
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::ir::build::{cdiv, lit, m, n};
    use crate::rule::CmpOp;

    #[test]
    fn a_mixed_rule_renders_each_backend_and_its_names() {
        let cat = Catalog::embedded();
        let triton = crate::catalog::triton::VLLM_DEFAULT;
        let rule = Rule::new(Node::Chain {
            branches: vec![
                (Cond::cmp(CmpOp::Lt, m(), lit(64)), Node::Leaf(Leaf::new(4, 1))),
                (Cond::cmp(CmpOp::Ge, cdiv(n(), lit(-3)), lit(0)), Node::Leaf(Leaf::of(Libtype::Vendor, 0, 0))),
            ],
            otherwise: Box::new(Node::Leaf(Leaf::of(Libtype::Triton, triton.kernel_id(), 0))),
        });
        let text = render_python(&rule, &cat, &Provenance::default()).unwrap();
        assert!(text.contains("    if (M < 64):\n        return (\"ck\", 4, 1)\n"), "{text}");
        assert!(text.contains("    elif (_cdiv(N, (-3)) >= 0):\n        return (\"vendor\", 0, 0)\n"), "{text}");
        assert!(text.contains("    else:\n        return (\"triton\", 67703222, 0)\n"), "{text}");
        assert!(text.contains("    (\"vendor\", 0): \"vendor(0)\",\n"), "{text}");
        assert!(text.contains("    (\"triton\", 67703222): \"triton_bm64_bn128_bk128_g32_w4_s2\",\n"), "{text}");
        assert!(text.contains(
            "    67703222: {\"BLOCK_SIZE_M\": 64, \"BLOCK_SIZE_N\": 128, \"BLOCK_SIZE_K\": 128, \"GROUP_SIZE_M\": 32, \"num_warps\": 4, \"num_stages\": 2},\n"
        ), "{text}");
        let name = &cat.legacy_by_id(4).unwrap().name;
        assert!(text.contains(&format!("    (\"ck\", 4): \"{name}\",\n")), "{text}");
    }

    #[test]
    fn a_bad_leaf_of_another_backend_is_an_error() {
        let cat = Catalog::embedded();
        let rule = Rule::new(Node::Leaf(Leaf::of(Libtype::Triton, 12, 0)));
        let e = render_python(&rule, &cat, &Provenance::default()).unwrap_err().to_string();
        assert!(e.contains("is not the id of a triton config"), "{e}");
    }
}
