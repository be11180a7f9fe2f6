//! Rust renderer: the rule as a self-contained module (`select(m, n, k) -> Selection`, no dependencies),
//! generated as tokens with `quote` from the IR and laid out by `prettyplease`.
//!
//! Arithmetic follows [`crate::rule::ir`]: values are `i64`, `+ - *` are `wrapping_*`, `/` and `cdiv` go
//! through guarded helpers (emitted only when the rule uses them), `min`/`max` are `Ord::min`/`Ord::max`.

use std::collections::BTreeSet;

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

use super::{leaf_instance, resolved, writer, Provenance, RUST_MODULE};
use crate::catalog::Catalog;
use crate::rule::{BinOp, CmpOp, Cond, Expr, Leaf, Node, Rule, Var};

/// Renders `rule` as a Rust module: `pub struct Selection { kernel_id, split_k, name }` and
/// `pub fn select(m: u32, n: u32, k: u32) -> Selection`, with `provenance` as `//!` comments.
pub fn render_rust(rule: &Rule, catalog: &Catalog, provenance: &Provenance) -> anyhow::Result<String> {
    let rule = resolved(rule, catalog)?;
    // A rule over CK only writes the module it always wrote; leaves of other backends add a `backend`
    // field to `Selection`.
    let mixed = rule.leaves().iter().any(|l| !l.is_ck());
    let consts =
        rule.instances_used().iter().map(|leaf| leaf_const(leaf, catalog, mixed)).collect::<Result<Vec<_>, _>>()?;
    let selection = selection_struct(mixed);

    let mut gen = Gen::default();
    let body = gen.node(&rule.root);
    let used = rule.vars_used();
    let params = Var::ALL.iter().map(|v| {
        let name = if used.contains(v) { format_ident!("{}", v.lower()) } else { format_ident!("_{}", v.lower()) };
        quote!(#name: u32)
    });
    let widen = Var::ALL.iter().filter(|v| used.contains(v)).map(|v| {
        let name = format_ident!("{}", v.lower());
        quote!(let #name = i64::from(#name);)
    });
    let helpers = gen.helpers();
    let docs = module_docs(provenance, &rule);

    let tokens = quote! {
        #(#![doc = #docs])*

        #selection

        #(#consts)*

        /// Selects the kernel for Y[M, N] = X[M, K] * W[N, K]^T.
        pub fn select(#(#params),*) -> Selection {
            #(#widen)*
            #body
        }

        #helpers
    };
    let file: syn::File =
        syn::parse2(tokens).map_err(|e| anyhow::anyhow!("internal error: the generated Rust does not parse: {e}"))?;
    Ok(separate_items(&prettyplease::unparse(&file)))
}

/// The module's `//!` lines: the provenance header and the arithmetic it follows.
fn module_docs(provenance: &Provenance, rule: &Rule) -> Vec<String> {
    writer::header_lines(RUST_MODULE, provenance, rule)
        .into_iter()
        .chain([
            "".to_string(),
            "Arithmetic: i64; + - * wrap; / truncates and x / 0 = 0; cdiv(a, b) = (a + b - 1) / b for b > 0, else 0."
                .to_string(),
        ])
        .map(|l| if l.is_empty() { l } else { format!(" {l}") })
        .collect()
}

/// The `Selection` constant of one leaf (with its backend when the rule is `mixed`).
fn leaf_const(leaf: &Leaf, catalog: &Catalog, mixed: bool) -> anyhow::Result<TokenStream> {
    let ident = leaf_ident(leaf);
    let split_k = Literal::u32_unsuffixed(leaf.split_k);
    let (id, name, backend) = if leaf.is_ck() {
        let inst = leaf_instance(catalog, leaf)?;
        (inst.id, inst.name.clone(), "ck")
    } else {
        let item = crate::rule::text::other_backend_item(leaf).unwrap_or_default();
        (leaf.kernel_id, item, leaf.backend.as_str())
    };
    let lit_id = Literal::i32_unsuffixed(id);
    let name = name.as_str();
    Ok(if mixed {
        let doc = format!(" {backend} kernelId {id}, splitK {} (KBatch {}).", leaf.split_k, kbatch(leaf.split_k));
        quote! {
            #[doc = #doc]
            const #ident: Selection =
                Selection { backend: #backend, kernel_id: #lit_id, split_k: #split_k, name: #name };
        }
    } else {
        let doc = format!(" kernelId {id}, splitK {} (KBatch {}).", leaf.split_k, kbatch(leaf.split_k));
        quote! {
            #[doc = #doc]
            const #ident: Selection = Selection { kernel_id: #lit_id, split_k: #split_k, name: #name };
        }
    })
}

/// The `Selection` struct (with a `backend` field when the rule is `mixed`).
fn selection_struct(mixed: bool) -> TokenStream {
    if mixed {
        quote! {
            /// The kernel chosen for a GEMM shape.
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
            pub struct Selection {
                /// The backend that runs it: `ck` (CK legacy), `cktile`, `triton` or `vendor`.
                pub backend: &'static str,
                /// The kernel's id in its backend (AITER kernelId for CK, the packed config id for triton).
                pub kernel_id: i32,
                /// log2 of the K split (KBatch = 1 << split_k).
                pub split_k: u32,
                /// The kernel's name (the CK instance name, the triton config name, `vendor(0)`).
                pub name: &'static str,
            }
        }
    } else {
        quote! {
            /// The kernel chosen for a GEMM shape.
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
            pub struct Selection {
                /// AITER kernelId of the CK legacy blockscale instance.
                pub kernel_id: i32,
                /// log2 of the K split (KBatch = 1 << split_k).
                pub split_k: u32,
                /// The instance's AITER name.
                pub name: &'static str,
            }
        }
    }
}

/// prettyplease writes top-level items back to back; put one blank line between them (and after the
/// module docs).
fn separate_items(code: &str) -> String {
    let starts_item = |l: &str| ["///", "#[", "pub ", "const ", "fn "].iter().any(|p| l.starts_with(p));
    let mut out = String::with_capacity(code.len() + 256);
    let mut prev: Option<&str> = None;
    for line in code.lines() {
        if let Some(p) = prev {
            let item_ended = p == "}" || p.starts_with("//!") || (!p.starts_with(' ') && p.ends_with(';'));
            if item_ended && starts_item(line) {
                out.push('\n');
            }
        }
        out.push_str(line);
        out.push('\n');
        prev = Some(line);
    }
    out
}

fn kbatch(split_k: u32) -> u64 {
    1u64.checked_shl(split_k).unwrap_or(0)
}

fn leaf_ident(leaf: &Leaf) -> proc_macro2::Ident {
    if !leaf.is_ck() {
        let stem = format!("{}_{}", leaf.backend.as_str().to_ascii_uppercase(), leaf.kernel_id.unsigned_abs());
        return if leaf.split_k == 0 {
            format_ident!("{}", stem)
        } else {
            format_ident!("{}_SPLITK_{}", stem, leaf.split_k)
        };
    }
    if leaf.split_k == 0 {
        format_ident!("KERNEL_{}", leaf.kernel_id.unsigned_abs())
    } else {
        format_ident!("KERNEL_{}_SPLITK_{}", leaf.kernel_id.unsigned_abs(), leaf.split_k)
    }
}

/// Token generation state: which helpers the emitted code calls.
#[derive(Default)]
struct Gen {
    helpers: BTreeSet<BinOp>,
}

impl Gen {
    fn node(&mut self, node: &Node) -> TokenStream {
        match node {
            Node::Leaf(leaf) => {
                let ident = leaf_ident(leaf);
                quote!(#ident)
            }
            Node::Chain { branches, otherwise } => {
                let otherwise = self.node(otherwise);
                if branches.is_empty() {
                    return otherwise;
                }
                let mut out = TokenStream::new();
                for (i, (cond, body)) in branches.iter().enumerate() {
                    let cond = self.cond(cond);
                    let body = self.node(body);
                    if i > 0 {
                        out.extend(quote!(else));
                    }
                    out.extend(quote!(if #cond { #body }));
                }
                out.extend(quote!(else { #otherwise }));
                out
            }
        }
    }

    fn cond(&mut self, cond: &Cond) -> TokenStream {
        match cond {
            Cond::Const(b) => quote!(#b),
            Cond::Cmp { op, lhs, rhs } => {
                // Two bare literals would default to i32: give the left one its type.
                let both_lit = matches!((lhs, rhs), (Expr::Lit(_), Expr::Lit(_)));
                let l = self.expr(lhs, if both_lit { Ctx::Typed } else { Ctx::Plain });
                let r = self.expr(rhs, Ctx::Plain);
                let op = cmp_tokens(*op);
                quote!(#l #op #r)
            }
            Cond::And(cs) | Cond::Or(cs) => {
                let is_and = matches!(cond, Cond::And(_));
                match cs.len() {
                    0 => quote!(#is_and),
                    1 => self.cond(&cs[0]),
                    _ => {
                        let parts: Vec<TokenStream> = cs
                            .iter()
                            .map(|c| {
                                let t = self.cond(c);
                                // Parenthesize nested And/Or so the grouping reads as written.
                                if matches!(c, Cond::And(v) | Cond::Or(v) if v.len() > 1) {
                                    quote!((#t))
                                } else {
                                    t
                                }
                            })
                            .collect();
                        if is_and {
                            quote!(#(#parts)&&*)
                        } else {
                            quote!(#(#parts)||*)
                        }
                    }
                }
            }
            Cond::Not(inner) => {
                let t = self.cond(inner);
                if matches!(**inner, Cond::Const(_) | Cond::Not(_)) {
                    quote!(!#t)
                } else {
                    quote!(!(#t))
                }
            }
        }
    }

    /// `ctx`: where the expression goes, which decides how a literal is spelled.
    fn expr(&mut self, expr: &Expr, ctx: Ctx) -> TokenStream {
        match expr {
            Expr::Var(v) => {
                let name = format_ident!("{}", v.lower());
                quote!(#name)
            }
            Expr::Lit(v) => literal(*v, ctx),
            Expr::Bin { op, lhs, rhs } => match op {
                BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Min | BinOp::Max => {
                    let l = self.expr(lhs, Ctx::Receiver);
                    let r = self.expr(rhs, Ctx::Plain);
                    let method = match op {
                        BinOp::Add => format_ident!("wrapping_add"),
                        BinOp::Sub => format_ident!("wrapping_sub"),
                        BinOp::Mul => format_ident!("wrapping_mul"),
                        BinOp::Min => format_ident!("min"),
                        _ => format_ident!("max"),
                    };
                    quote!(#l.#method(#r))
                }
                BinOp::Div | BinOp::CeilDiv => {
                    self.helpers.insert(*op);
                    let l = self.expr(lhs, Ctx::Plain);
                    let r = self.expr(rhs, Ctx::Plain);
                    let f = if *op == BinOp::Div { format_ident!("div") } else { format_ident!("cdiv") };
                    quote!(#f(#l, #r))
                }
            },
        }
    }

    fn helpers(&self) -> TokenStream {
        let mut out = TokenStream::new();
        if self.helpers.contains(&BinOp::Div) {
            out.extend(quote! {
                /// `a / b` truncating toward zero; 0 when `b == 0`; `i64::MIN / -1` wraps.
                fn div(a: i64, b: i64) -> i64 {
                    if b == 0 { 0 } else { a.wrapping_div(b) }
                }
            });
        }
        if self.helpers.contains(&BinOp::CeilDiv) {
            out.extend(quote! {
                /// `(a + b - 1) / b` (wrapping sum) for `b > 0`; 0 when `b <= 0`.
                fn cdiv(a: i64, b: i64) -> i64 {
                    if b <= 0 { 0 } else { a.wrapping_add(b).wrapping_sub(1) / b }
                }
            });
        }
        out
    }
}

/// Where a literal is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// Where the type is inferred from the other operand or the parameter: `5`, `-5`.
    Plain,
    /// Needs its own type (a comparison of two literals): `5i64`, `-5i64`.
    Typed,
    /// Receiver of a method call: typed, and parenthesized when negative: `(-5i64)`.
    Receiver,
}

/// An i64 literal. `i64::MIN` and `i64::MAX` are written as paths: the first has no literal form and a
/// comparison against the second as a literal would trip rustc's useless-comparison lint.
fn literal(v: i64, ctx: Ctx) -> TokenStream {
    match v {
        i64::MIN => return quote!(i64::MIN),
        i64::MAX => return quote!(i64::MAX),
        _ => {}
    }
    let abs = v.unsigned_abs();
    let lit: TokenStream = if ctx == Ctx::Plain { abs.to_string() } else { format!("{abs}i64") }
        .parse()
        .expect("an integer literal is a valid token");
    match (v < 0, ctx) {
        (false, _) => lit,
        (true, Ctx::Receiver) => quote!((-#lit)),
        (true, _) => quote!(-#lit),
    }
}

fn cmp_tokens(op: CmpOp) -> TokenStream {
    match op {
        CmpOp::Lt => quote!(<),
        CmpOp::Le => quote!(<=),
        CmpOp::Gt => quote!(>),
        CmpOp::Ge => quote!(>=),
        CmpOp::Eq => quote!(==),
        CmpOp::Ne => quote!(!=),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(v: i64) -> Expr {
        Expr::Lit(v)
    }
    fn var(v: Var) -> Expr {
        Expr::Var(v)
    }

    #[test]
    fn expressions_use_wrapping_ops_and_typed_receivers() {
        let mut g = Gen::default();
        let e = Expr::bin(BinOp::Add, lit(-3), Expr::bin(BinOp::CeilDiv, var(Var::M), lit(16)));
        assert_eq!(g.expr(&e, Ctx::Plain).to_string(), quote!((-3i64).wrapping_add(cdiv(m, 16))).to_string());
        let e = Expr::bin(BinOp::Min, lit(5), Expr::bin(BinOp::Div, var(Var::K), lit(i64::MIN)));
        assert_eq!(g.expr(&e, Ctx::Plain).to_string(), quote!(5i64.min(div(k, i64::MIN))).to_string());
        assert_eq!(g.helpers, [BinOp::Div, BinOp::CeilDiv].into_iter().collect());
        let c = Cond::cmp(CmpOp::Lt, lit(-3_000_000_000), lit(-1));
        assert_eq!(g.cond(&c).to_string(), quote!(-3000000000i64 < -1).to_string());
        let c = Cond::cmp(CmpOp::Le, var(Var::N), lit(i64::MAX));
        assert_eq!(g.cond(&c).to_string(), quote!(n <= i64::MAX).to_string());
    }

    #[test]
    fn conditions_group_as_written() {
        let mut g = Gen::default();
        let m_lt = Cond::cmp(CmpOp::Lt, var(Var::M), lit(8));
        let n_ge = Cond::cmp(CmpOp::Ge, var(Var::N), lit(4096));
        let c = Cond::And(vec![Cond::Or(vec![m_lt.clone(), n_ge.clone()]), Cond::Not(Box::new(m_lt.clone()))]);
        assert_eq!(g.cond(&c).to_string(), quote!((m < 8 || n >= 4096) && !(m < 8)).to_string());
        assert_eq!(g.cond(&Cond::Or(vec![])).to_string(), "false");
        assert_eq!(g.cond(&Cond::Not(Box::new(Cond::Const(true)))).to_string(), quote!(!true).to_string());
    }
}
