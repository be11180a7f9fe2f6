//! C++ renderer: the AITER dispatcher header from `templates/gemm_a8w8_blockscale_heuristic.h.j2`, plus
//! the stand-in declarations and driver (`templates/check/`) that let a plain C++ compiler build and run
//! the header outside AITER.
//!
//! Conditions are printed by [`crate::rule::text::cond_to_cpp`]. The header evaluates them on a wrapper
//! integer type whose operators implement the IR's semantics, so the printed infix text is exact as long
//! as every operation has an operand of that type; [`for_cpp`] guarantees it by folding operations on
//! literals only (with the reference interpreter) before printing.
//!
//! The header holds the rule twice: `select`, exact for every `int` input on the IR's i64 semantics, and,
//! when [`lower::for_dims`] finds one, `fast::select`, the rule simplified for dimensions in
//! `0 .. 2^bits - 1` (nested ceilings merged, divisions moved into the thresholds) and evaluated in
//! unsigned arithmetic on values that provably stay in range. The dispatcher calls `fast::select` when
//! one test (`(M | N | K) >> bits == 0`) says the shape is in that domain, else `select`; every real
//! GEMM shape is. Both are the same rule: `tests/render.rs` runs the dispatcher, both trees and both
//! branchless forms against the interpreter on hostile and boundary shapes, under UBSan.
//!
//! [`render_branchless`] / [`render_branchless_simplified`] render the same rule without conditional
//! branches (`templates/check/branchless.h.j2`, a header included after the dispatcher header): every
//! distinct comparison of the rule evaluated once (the arithmetic is total, so evaluating a comparison
//! the tree would skip is harmless), `&&`/`||` as `&`/`|` on those booleans, each chain's branch picked
//! with mask arithmetic from the innermost chain outwards, and the index so found reading a static table
//! of choices. They are what `cargo bench --bench aiter_dispatch` times against the trees. The
//! dispatcher keeps the tree: measured with g++ -O2 (and clang++ -O2 for the exact form), the branchless
//! forms cost more than the mispredicted branches they remove, for the committed rule (18 comparisons)
//! and for each of its chains down to 2 comparisons, where the compiler already selects between the two
//! leaves without a branch (README.md, "Dispatch cost").

use std::collections::BTreeSet;
use std::sync::OnceLock;

use minijinja::Environment;
use serde::Serialize;

use super::{leaf_instance, resolved, writer, Provenance, CPP_HEADER};
use crate::catalog::Catalog;
use crate::rule::lower;
use crate::rule::text::cond_to_cpp;
use crate::rule::{BinOp, Cond, Expr, Leaf, Node, Rule, Var};

/// Namespace holding the header's integer type, helpers and rule body (unique to avoid clashes in
/// AITER's translation unit).
pub const DETAIL_NAMESPACE: &str = "gemm_synth_blockscale_rule";

/// File name [`render_branchless`]'s header is written under next to the dispatcher header.
pub const BRANCHLESS_HEADER: &str = "gemm_a8w8_blockscale_heuristic_branchless.h";

/// File name [`render_branchless_simplified`]'s header is written under.
pub const BRANCHLESS_SIMPLIFIED_HEADER: &str = "gemm_a8w8_blockscale_heuristic_branchless_simplified.h";

/// File name the check driver includes the stand-in declarations under.
pub const CHECK_STUB: &str = "instances_stub.h";

const HEADER_TEMPLATE: &str = "gemm_a8w8_blockscale_heuristic.h.j2";
const STUB_TEMPLATE: &str = "check/instances_stub.h.j2";
const DRIVER_TEMPLATE: &str = "check/driver.cpp.j2";
const BRANCHLESS_TEMPLATE: &str = "check/branchless.h.j2";

fn env() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        super::jinja::environment(&[
            (HEADER_TEMPLATE, include_str!("../../../../templates/gemm_a8w8_blockscale_heuristic.h.j2")),
            (STUB_TEMPLATE, include_str!("../../../../templates/check/instances_stub.h.j2")),
            (DRIVER_TEMPLATE, include_str!("../../../../templates/check/driver.cpp.j2")),
            (BRANCHLESS_TEMPLATE, include_str!("../../../../templates/check/branchless.h.j2")),
        ])
    })
}

fn render(template: &str, ctx: impl Serialize) -> anyhow::Result<String> {
    env()
        .get_template(template)
        .and_then(|t| t.render(ctx))
        .map_err(|e| anyhow::anyhow!("rendering templates/{template} failed: {e:#}"))
}

#[derive(Serialize)]
struct TLeaf {
    name: String,
    kernel_id: i32,
    split_k: u32,
    /// For a leaf of another backend: `{triton(67703222), 0}`, the `BlockscaleChoice` it returns (no CK
    /// kernel), and what it names.
    other: Option<String>,
    what: Option<String>,
}

/// The functions a header with leaves of other backends declares: `triton(ID)`, `vendor(ID)`,
/// `cktile(ID)` each return no kernel (`nullptr`), so such a leaf is "no CK pick" in C++ and reads back
/// as the leaf it was.
fn other_backends(rule: &Rule) -> Vec<&'static str> {
    let set: BTreeSet<crate::catalog::Libtype> =
        rule.leaves().iter().filter(|l| !l.is_ck()).map(|l| l.backend).collect();
    set.into_iter().map(|b| b.as_str()).collect()
}

#[derive(Serialize)]
struct TBranch {
    cond: String,
    node: TNode,
}

/// A rule node as the header template walks it: a leaf, or branches plus `otherwise`.
#[derive(Serialize)]
struct TNode {
    depth: usize,
    leaf: Option<TLeaf>,
    branches: Vec<TBranch>,
    otherwise: Option<Box<TNode>>,
}

#[derive(Serialize)]
struct TParam {
    name: &'static str,
    used: bool,
}

fn template_node(node: &Node, catalog: &Catalog, depth: usize) -> anyhow::Result<TNode> {
    match node {
        Node::Leaf(leaf) if !leaf.is_ck() => Ok(TNode {
            depth,
            leaf: Some(TLeaf {
                name: String::new(),
                kernel_id: leaf.kernel_id,
                split_k: leaf.split_k,
                other: Some(format!("{{{}({}), {}}}", leaf.backend, leaf.kernel_id, leaf.split_k)),
                what: Some(synth_base::sanitize::comment_line(&crate::rule::text::leaf_item_cpp(leaf, catalog))),
            }),
            branches: Vec::new(),
            otherwise: None,
        }),
        Node::Leaf(leaf) => {
            let inst = leaf_instance(catalog, leaf)?;
            Ok(TNode {
                depth,
                leaf: Some(TLeaf {
                    name: inst.name.clone(),
                    kernel_id: inst.id,
                    split_k: leaf.split_k,
                    other: None,
                    what: None,
                }),
                branches: Vec::new(),
                otherwise: None,
            })
        }
        // No branch: the chain is its `otherwise`.
        Node::Chain { branches, otherwise } if branches.is_empty() => template_node(otherwise, catalog, depth),
        Node::Chain { branches, otherwise } => {
            let branches = branches
                .iter()
                .map(|(cond, body)| {
                    Ok(TBranch { cond: cond_to_cpp(&for_cpp(cond)), node: template_node(body, catalog, depth + 1)? })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok(TNode {
                depth,
                leaf: None,
                branches,
                otherwise: Some(Box::new(template_node(otherwise, catalog, depth + 1)?)),
            })
        }
    }
}

#[derive(Serialize)]
struct TAtom {
    name: String,
    cond: String,
}

#[derive(Serialize)]
struct TTableLeaf {
    name: String,
    kernel_id: i32,
    split_k: u32,
}

#[derive(Serialize)]
struct TPick {
    name: String,
    expr: String,
}

/// The branchless form of a rule (already resolved and canonical): its distinct comparisons, its distinct
/// choices in first-use order and the chain-by-chain index computation.
struct Branchless {
    atoms: Vec<TAtom>,
    leaves: Vec<TTableLeaf>,
    picks: Vec<TPick>,
    index: String,
}

/// Builds [`Branchless`] for `root`. Comparisons are keyed by their folded IR ([`for_cpp`]), so one written
/// twice in the rule is evaluated once; choices are keyed by (kernelId, splitK).
fn branchless(root: &Node, catalog: &Catalog) -> anyhow::Result<Branchless> {
    let mut b = BranchlessBuilder { catalog, atoms: Vec::new(), leaves: Vec::new(), picks: Vec::new() };
    let index = b.node(root)?;
    Ok(Branchless {
        atoms: b.atoms.into_iter().map(|(_, a)| a).collect(),
        leaves: b.leaves.into_iter().map(|(_, l)| l).collect(),
        picks: b.picks,
        index,
    })
}

/// The comparisons, choices and picks of a branchless form, each keyed by what it was built from.
struct BranchlessBuilder<'c> {
    catalog: &'c Catalog,
    atoms: Vec<(Cond, TAtom)>,
    leaves: Vec<(Leaf, TTableLeaf)>,
    picks: Vec<TPick>,
}

impl BranchlessBuilder<'_> {
    fn cond(&mut self, c: &Cond) -> String {
        match c {
            Cond::Cmp { .. } => {
                let i = match self.atoms.iter().position(|(a, _)| a == c) {
                    Some(i) => i,
                    None => {
                        let atom = TAtom { name: format!("c{}", self.atoms.len()), cond: cond_to_cpp(c) };
                        self.atoms.push((c.clone(), atom));
                        self.atoms.len() - 1
                    }
                };
                self.atoms[i].1.name.clone()
            }
            Cond::And(cs) if cs.is_empty() => "true".into(),
            Cond::Or(cs) if cs.is_empty() => "false".into(),
            Cond::And(cs) => self.join(cs, " & "),
            Cond::Or(cs) => self.join(cs, " | "),
            Cond::Not(inner) => format!("!{}", self.operand(inner)),
            Cond::Const(b) => b.to_string(),
        }
    }

    fn join(&mut self, cs: &[Cond], op: &str) -> String {
        let parts: Vec<String> = cs.iter().map(|c| self.operand(c)).collect();
        parts.join(op)
    }

    /// A condition as an operand of `&`, `|` or `!`: parenthesised unless it is one name or literal.
    fn operand(&mut self, c: &Cond) -> String {
        let text = self.cond(c);
        if text.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_') {
            text
        } else {
            format!("({text})")
        }
    }

    fn node(&mut self, node: &Node) -> anyhow::Result<String> {
        match node {
            Node::Leaf(leaf) => Ok(format!("{}u", self.leaf_index(leaf)?)),
            Node::Chain { branches, otherwise } => {
                if branches.is_empty() {
                    return self.node(otherwise);
                }
                let mut arms = Vec::new();
                for (cond, body) in branches {
                    arms.push((self.cond(&for_cpp(cond)), self.node(body)?));
                }
                let mut expr = self.node(otherwise)?;
                for (cond, body) in arms.into_iter().rev() {
                    expr = format!("pick({cond}, {body}, {expr})");
                }
                let name = format!("n{}", self.picks.len());
                self.picks.push(TPick { name: name.clone(), expr });
                Ok(name)
            }
        }
    }

    /// The index of `leaf`'s choice in the table, added when new.
    fn leaf_index(&mut self, leaf: &Leaf) -> anyhow::Result<usize> {
        if let Some(i) = self.leaves.iter().position(|(l, _)| l == leaf) {
            return Ok(i);
        }
        let inst = leaf_instance(self.catalog, leaf)?;
        let entry = TTableLeaf { name: inst.name.clone(), kernel_id: inst.id, split_k: leaf.split_k };
        self.leaves.push((*leaf, entry));
        Ok(self.leaves.len() - 1)
    }
}

/// The branchless form of `rule` (file [`BRANCHLESS_HEADER`]): `select_branchless<DDataType,
/// EDataType>(Int M, Int N, Int K)` and its helper `pick` in [`DETAIL_NAMESPACE`], for inclusion after the
/// header [`render_cpp`] writes for the same rule (it uses that header's `Int`, `cdiv`, `BlockscaleChoice`
/// and instance declarations). Returns the text and the number of distinct comparisons it evaluates.
pub fn render_branchless(rule: &Rule, catalog: &Catalog) -> anyhow::Result<(String, usize)> {
    let rule = resolved(rule, catalog)?;
    branchless_text(&rule, catalog, DETAIL_NAMESPACE, "Int")
}

/// The branchless form of the rule simplified for real shapes (file [`BRANCHLESS_SIMPLIFIED_HEADER`]):
/// `select_branchless<DDataType, EDataType>(Nat M, Nat N, Nat K)` in `DETAIL_NAMESPACE::fast`, exact for
/// dimensions in `0 .. 2^bits - 1` like the header's `fast::select`, with `bits`; `None` when the rule has
/// no simplified form ([`lower::for_dims`]). Included after the header of the same rule.
pub fn render_branchless_simplified(rule: &Rule, catalog: &Catalog) -> anyhow::Result<Option<(String, usize, u32)>> {
    let rule = resolved(rule, catalog)?;
    let Some(simplified) = lower::for_dims(&rule) else { return Ok(None) };
    let (text, comparisons) = branchless_text(&simplified.rule, catalog, &format!("{DETAIL_NAMESPACE}::fast"), "Nat")?;
    Ok(Some((text, comparisons, simplified.bits)))
}

fn branchless_text(rule: &Rule, catalog: &Catalog, ns: &str, int_type: &str) -> anyhow::Result<(String, usize)> {
    let form = branchless(&rule.root, catalog)?;
    let comparisons = form.atoms.len();
    let text = render(
        BRANCHLESS_TEMPLATE,
        minijinja::context! {
            header => CPP_HEADER,
            ns => ns,
            int_type => int_type,
            params => params_of(rule),
            atoms => form.atoms,
            leaves => form.leaves,
            picks => form.picks,
            index => form.index,
        },
    )?;
    Ok((text, comparisons))
}

/// Renders the AITER header: `struct BlockscaleChoice`, the integer helpers (in [`DETAIL_NAMESPACE`])
/// and `a8w8_blockscale_heuristic_dispatch<DDataType, EDataType>(int M, int N, int K)`, with
/// `provenance` as the leading comment.
pub fn render_cpp(rule: &Rule, catalog: &Catalog, provenance: &Provenance) -> anyhow::Result<String> {
    let rule = resolved(rule, catalog)?;
    let params = params_of(&rule);
    let root = template_node(&rule.root, catalog, 1)?;
    let fast = match lower::for_dims(&rule) {
        Some(simplified) => Some(TFast {
            bits: simplified.bits,
            params: params_of(&simplified.rule),
            root: template_node(&simplified.rule.root, catalog, 1)?,
        }),
        None => None,
    };
    render(
        HEADER_TEMPLATE,
        minijinja::context! {
            provenance => writer::header_lines(CPP_HEADER, provenance, &rule),
            ns => DETAIL_NAMESPACE,
            params => params,
            root => root,
            fast => fast,
            comparisons => ["<", "<=", ">", ">=", "==", "!="],
            other_backends => other_backends(&rule),
        },
    )
}

/// The rule simplified for real shapes ([`lower::for_dims`]), as the header's `fast::select` renders it.
#[derive(Serialize)]
struct TFast {
    bits: u32,
    params: Vec<TParam>,
    root: TNode,
}

fn params_of(rule: &Rule) -> Vec<TParam> {
    let used = rule.vars_used();
    Var::ALL.iter().map(|v| TParam { name: v.upper(), used: used.contains(v) }).collect()
}

/// A condition prepared for the header: every operation whose operands are both constant is replaced by
/// its value (computed by the reference interpreter), so each remaining operation involves M, N or K and
/// runs on the header's wrapper type rather than on C++ `int`; `i64::MIN`, which has no C++ literal, is
/// written `-9223372036854775807 - 1`.
pub fn for_cpp(cond: &Cond) -> Cond {
    match cond {
        Cond::Cmp { op, lhs, rhs } => Cond::Cmp { op: *op, lhs: fold(lhs), rhs: fold(rhs) },
        Cond::And(cs) => Cond::And(cs.iter().map(for_cpp).collect()),
        Cond::Or(cs) => Cond::Or(cs.iter().map(for_cpp).collect()),
        Cond::Not(c) => Cond::Not(Box::new(for_cpp(c))),
        Cond::Const(b) => Cond::Const(*b),
    }
}

fn fold(expr: &Expr) -> Expr {
    if let Some(v) = expr.constant_value() {
        return if v == i64::MIN { Expr::bin(BinOp::Sub, Expr::Lit(-i64::MAX), Expr::Lit(1)) } else { Expr::Lit(v) };
    }
    match expr {
        Expr::Bin { op, lhs, rhs } => Expr::bin(*op, fold(lhs), fold(rhs)),
        other => other.clone(),
    }
}

#[derive(Serialize)]
struct TInstance {
    id: i32,
    name: String,
}

fn legacy_instances(catalog: &Catalog) -> anyhow::Result<Vec<TInstance>> {
    catalog
        .legacy_candidates()
        .iter()
        .map(|i| Ok(TInstance { id: i.id, name: synth_base::sanitize::cpp_identifier(&i.name)?.to_string() }))
        .collect()
}

/// The stand-in declarations for compiling the header outside AITER (file [`CHECK_STUB`]): a placeholder
/// `torch::Tensor`, AITER's `BlockwiseKernel` function-pointer type, a `bf16stub` output type and every
/// legacy catalog instance as a function template with the instances' signature.
pub fn render_check_stub(catalog: &Catalog) -> anyhow::Result<String> {
    render(STUB_TEMPLATE, minijinja::context! { header => CPP_HEADER, instances => legacy_instances(catalog)? })
}

/// One generated header for [`render_check_driver`] to include.
#[derive(Debug, Clone, Serialize)]
pub struct CheckHeader {
    /// File name to `#include`.
    pub header: String,
    /// Namespace to include it in (so several rules fit in one program); `None` includes it at global
    /// scope, exactly as AITER does.
    pub ns: Option<String>,
}

/// A driver program (`main`) that includes [`CHECK_STUB`] and the given headers, reads `M N K` lines from
/// stdin and prints, per line, `kernelId splitK` for each header in order (space-separated). The kernel
/// is identified by comparing the returned function pointer with each instance's `<float, bf16stub>`
/// instantiation; an unidentified pointer prints `unknown-kernel` and makes the exit status 1.
pub fn render_check_driver(catalog: &Catalog, headers: &[CheckHeader]) -> anyhow::Result<String> {
    render(
        DRIVER_TEMPLATE,
        minijinja::context! { stub => CHECK_STUB, rules => headers, instances => legacy_instances(catalog)? },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::CmpOp;

    #[test]
    fn constant_operations_fold_and_min_gets_a_cpp_spelling() {
        let m = Expr::Var(Var::M);
        let c = Cond::cmp(
            CmpOp::Lt,
            Expr::bin(BinOp::Add, m.clone(), Expr::bin(BinOp::Div, Expr::Lit(7), Expr::Lit(0))),
            Expr::bin(BinOp::Sub, Expr::Lit(i64::MIN + 1), Expr::Lit(1)),
        );
        assert_eq!(cond_to_cpp(&for_cpp(&c)), "M + 0 < -9223372036854775807 - 1");
        let c = Cond::cmp(CmpOp::Ge, Expr::bin(BinOp::Mul, Expr::Lit(i64::MIN), m), Expr::Lit(3));
        assert_eq!(cond_to_cpp(&for_cpp(&c)), "(-9223372036854775807 - 1) * M >= 3");
    }
}
