//! Parser for the Rust form of a rule (read with `syn`):
//!
//! ```text
//! // optional leading comment: becomes the rule's note
//! if m <= 128 && n >= 4096 {
//!     a8w8_blockscale_1x128x128_256x16x64x256_16x16_16x16_1x1_16x16x1_16x16x1_1x16x1x16_4_1x1_intrawave_v1
//! } else if m.div_ceil(64) * cdiv(n, 128) < 304 {
//!     (2, 1)
//! } else {
//!     7
//! }
//! ```
//!
//! The rule is one `if`/`else if`/`else` expression (nesting allowed, every `if` needs an `else`),
//! optionally the tail expression of one function such as `fn select(m: u32, n: u32, k: u32) -> ...`.
//! A leaf is an instance name (any grammar) as an identifier, an integer kernelId (`-1` is the
//! default, resolved to its alias), `kernel(ID)`, or a tuple `(instance, split_k)`. Conditions use
//! `||`, `&&`, `!`, comparisons, `+ - * /`, unary minus, parentheses, `true`/`false`, integer
//! literals (any integer suffix), `m`, `n`, `k` (or upper case), `cdiv(a, b)` / `ceil_div(a, b)` /
//! `a.div_ceil(b)`, `min(a, b)` / `a.min(b)`, `max(a, b)` / `a.max(b)`; `as` casts to primitive
//! integer types are accepted and ignored (all arithmetic is i64, see [`crate::rule::ir`]).

use proc_macro2::Span;
use quote::ToTokens;
use syn::spanned::Spanned;

use super::error::{Pos, RuleError};
use super::ir::{BinOp, CmpOp, Cond, Expr, Leaf, Rule, Var};
use super::parse_cpp::{backend_call, backend_leaf_id, leaf_id, resolve_leaf_name};
use super::source::{check_text_limits, split_leading_note, Form, Parsed, SNode};

/// Deepest recursion of the reader over syn's tree (nested blocks, operators, parentheses).
const MAX_RECURSION: usize = 128;
/// Most `if`s the Rust form may hold (syn nests `else if` chains recursively).
pub const MAX_RUST_IFS: usize = 2000;
use crate::catalog::{Catalog, Libtype};

/// Parses the Rust form of a rule, resolving instance names through `catalog`.
pub fn parse_rust(text: &str, catalog: &Catalog) -> Result<Rule, RuleError> {
    parse_rust_with_source(text, catalog).map(|p| p.rule)
}

/// Like [`parse_rust`], also returning the source position of every branch and leaf.
pub fn parse_rust_with_source(text: &str, catalog: &Catalog) -> Result<Parsed, RuleError> {
    let (note, body) = split_leading_note(text);
    check_text_limits(&body)?;
    check_if_count(&body)?;
    let first_word: String =
        body.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '#').collect();
    let is_item = matches!(first_word.as_str(), "fn" | "pub" | "const" | "#");
    let reader = Reader { catalog, named: Default::default(), depth: std::cell::Cell::new(0) };
    let node = if is_item {
        let file: syn::File = syn::parse_str(&body).map_err(syn_error)?;
        reader.function(&file)?
    } else {
        let expr: syn::Expr = syn::parse_str(&body).map_err(syn_error)?;
        reader.node(&expr)?
    };
    node.check_json_depth(1)?;
    let (root, source) = node.into_parts();
    Ok(Parsed { rule: Rule { root, note }, source, form: Form::Rust })
}

/// Reads the rule of a Rust module gemm-synth generated (`dispatch.rs`): the `const NAME: Selection =
/// Selection { kernel_id, split_k, name }` items name the leaves (each name must be the catalog's name of
/// that kernelId), `pub fn select` holds the rule after its `let m = i64::from(m);` conversions, and the
/// note comes from the provenance comment's `Note:` field.
pub fn parse_generated_rust(text: &str, catalog: &Catalog) -> Result<Parsed, RuleError> {
    check_text_limits(text)?;
    check_if_count(text)?;
    let file: syn::File = syn::parse_str(text).map_err(syn_error)?;
    let mut named = std::collections::HashMap::new();
    let mut select = None;
    for item in &file.items {
        match item {
            syn::Item::Const(c) if matches!(&*c.ty, syn::Type::Path(t) if t.path.is_ident("Selection")) => {
                named.insert(c.ident.to_string(), selection_leaf(&c.expr, catalog)?);
            }
            syn::Item::Fn(f) if f.sig.ident == "select" => select = Some(f),
            _ => {}
        }
    }
    let Some(select) = select else {
        return Err(RuleError::at(
            Pos::new(1, 1),
            "this gemm-synth module has no `pub fn select`; it was edited or truncated: regenerate it with `synth run`",
        ));
    };
    let stmts = &select.block.stmts;
    let lets = stmts.iter().take_while(|s| matches!(s, syn::Stmt::Local(_))).count();
    for stmt in &stmts[..lets] {
        let syn::Stmt::Local(local) = stmt else { unreachable!("counted above") };
        let is_conversion = matches!(&local.pat, syn::Pat::Ident(p) if Var::from_name(&p.ident.to_string()).is_some())
            && local.init.as_ref().is_some_and(|i| i.expr.to_token_stream().to_string().starts_with("i64 :: from"));
        if !is_conversion {
            return Err(err(local, "expected only `let m = i64::from(m);` conversions before the rule in `select`"));
        }
    }
    let [syn::Stmt::Expr(rule, None)] = &stmts[lets..] else {
        return Err(RuleError::at(
            pos_of(select.block.brace_token.span.open()),
            "expected the rule as the tail expression of `select` after the `let` conversions",
        ));
    };
    let reader = Reader { catalog, named, depth: std::cell::Cell::new(0) };
    let node = reader.node(rule)?;
    node.check_json_depth(1)?;
    let (root, source) = node.into_parts();
    let note = super::generated::provenance_note(text, "//!");
    Ok(Parsed { rule: Rule { root, note }, source, form: Form::Rust })
}

/// The leaf of `Selection { kernel_id: 2, split_k: 1, name: "…" }`; the name must be the kernel's.
fn selection_leaf(e: &syn::Expr, catalog: &Catalog) -> Result<Leaf, RuleError> {
    let syn::Expr::Struct(s) = e else {
        return Err(err(e, format!("expected `Selection {{ kernel_id, split_k, name }}`, found {}", shown(e))));
    };
    let field = |name: &str| {
        s.fields
            .iter()
            .find(|f| matches!(&f.member, syn::Member::Named(i) if i == name))
            .map(|f| &f.expr)
            .ok_or_else(|| err(e, format!("`Selection` without the field `{name}`")))
    };
    let int = |name: &str| -> Result<i128, RuleError> {
        let v = field(name)?;
        signed_literal(v)
            .unwrap_or_else(|| Err(err(v, format!("expected an integer for `{name}`, found {}", shown(v)))))
    };
    // `backend` is written only by modules of rules with leaves of other backends; absent, it is CK.
    let backend = match s.fields.iter().find(|f| matches!(&f.member, syn::Member::Named(i) if i == "backend")) {
        None => Libtype::Ck,
        Some(f) => match &f.expr {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(b), .. }) => {
                Libtype::parse(&b.value()).ok_or_else(|| {
                    err(&f.expr, format!("backend {:?} is not one of ck, cktile, triton, vendor", b.value()))
                })?
            }
            other => return Err(err(other, format!("expected the backend as a string, found {}", shown(other)))),
        },
    };
    let id_expr = field("kernel_id")?;
    let (_, kernel_id) = backend_leaf_id(
        backend,
        i64::try_from(int("kernel_id")?).unwrap_or(i64::MAX),
        pos_of(id_expr.span()),
        catalog,
    )?;
    let sk_expr = field("split_k")?;
    let split_k = u32::try_from(int("split_k")?).map_err(|_| {
        err(sk_expr, format!("split_k is out of range: expected 0..={} (log2 of KBatch)", crate::catalog::MAX_SPLIT_K))
    })?;
    let name_expr = field("name")?;
    let syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(name), .. }) = name_expr else {
        return Err(err(name_expr, format!("expected the instance name as a string, found {}", shown(name_expr))));
    };
    if !backend.is_ck() {
        let leaf = Leaf::of(backend, kernel_id, split_k);
        let want = super::text::other_backend_item(&leaf).unwrap_or_default();
        if name.value() != want {
            return Err(err(
                name_expr,
                format!(
                    "name {:?} does not match {backend} kernel_id {kernel_id}, whose name is {want:?}; the file was \
                     edited: regenerate it with `synth run`",
                    name.value()
                ),
            ));
        }
        return Ok(leaf);
    }
    let (_, named_id) = resolve_leaf_name(&name.value(), pos_of(name.span()), catalog)?;
    if named_id != kernel_id {
        return Err(err(
            name_expr,
            format!(
                "kernel_id {kernel_id} does not match the name, which is kernelId {named_id}; the file was edited: \
                 regenerate it with `synth run`"
            ),
        ));
    }
    Ok(Leaf::new(kernel_id, split_k))
}

/// Refuses Rust text with more than [`MAX_RUST_IFS`] `if` keywords (outside `//` comments).
fn check_if_count(text: &str) -> Result<(), RuleError> {
    let mut count = 0;
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let words = code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
        count += words.filter(|w| *w == "if").count();
        if count > MAX_RUST_IFS {
            return Err(RuleError::at(
                Pos::new(i + 1, 1),
                format!("the Rust form reads at most {MAX_RUST_IFS} `if`s; write larger rules in the C++ or JSON form"),
            ));
        }
    }
    Ok(())
}

/// 1-based position of the start of a span.
fn pos_of(span: Span) -> Pos {
    let lc = span.start();
    Pos::new(lc.line.max(1), lc.column + 1)
}

/// A span for `e` that does not walk its whole subtree (which [`Spanned::span`] does).
fn shallow_span(e: &syn::Expr) -> Span {
    match e {
        syn::Expr::Binary(b) => b.op.span(),
        syn::Expr::Unary(u) => u.op.span(),
        syn::Expr::Paren(p) => p.paren_token.span.open(),
        syn::Expr::If(i) => i.if_token.span,
        syn::Expr::Block(b) => b.block.brace_token.span.open(),
        syn::Expr::MethodCall(m) => m.dot_token.span,
        syn::Expr::Call(c) => c.paren_token.span.open(),
        syn::Expr::Cast(c) => c.as_token.span,
        _ => e.span(),
    }
}

fn syn_error(e: syn::Error) -> RuleError {
    RuleError::at(pos_of(e.span()), format!("Rust syntax error: {e}"))
}

/// Source text of a syntax node, shortened for messages.
fn shown(node: &impl ToTokens) -> String {
    let text = node.to_token_stream().to_string();
    if text.chars().count() > 60 {
        format!("`{}...`", text.chars().take(57).collect::<String>())
    } else {
        format!("`{text}`")
    }
}

fn err(node: &(impl ToTokens + Spanned), message: impl Into<String>) -> RuleError {
    RuleError::at(pos_of(node.span()), message)
}

/// Value of an integer literal (any suffix) as a magnitude.
fn int_value(lit: &syn::LitInt) -> Result<u64, RuleError> {
    let ok_suffix = matches!(lit.suffix(), "" | "i64" | "u64" | "i32" | "u32" | "usize" | "isize" | "i128" | "u128");
    if !ok_suffix {
        return Err(err(lit, format!("unsupported literal suffix `{}`: expected an integer", lit.suffix())));
    }
    lit.base10_parse::<u64>().ok().filter(|v| *v <= 1u64 << 63).ok_or_else(|| {
        err(
            lit,
            format!("integer literal {} is out of range: rules compute in 64-bit signed integers", lit.base10_digits()),
        )
    })
}

/// `-literal` or `literal` as a signed value, if `e` is one.
fn signed_literal(e: &syn::Expr) -> Option<Result<i128, RuleError>> {
    match e {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(lit), .. }) => Some(int_value(lit).map(i128::from)),
        syn::Expr::Unary(syn::ExprUnary { op: syn::UnOp::Neg(_), expr, .. }) => match &**expr {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(lit), .. }) => {
                Some(int_value(lit).map(|v| -i128::from(v)))
            }
            _ => None,
        },
        _ => None,
    }
}

struct Reader<'a> {
    catalog: &'a Catalog,
    /// Leaves known by name (the `const KERNEL_…: Selection` items of a generated module).
    named: std::collections::HashMap<String, Leaf>,
    /// Current recursion depth (see [`MAX_RECURSION`]).
    depth: std::cell::Cell<usize>,
}

impl Reader<'_> {
    /// Runs `f` one recursion level deeper; errors at `at` past [`MAX_RECURSION`].
    fn nested<T>(&self, at: &syn::Expr, f: impl FnOnce() -> Result<T, RuleError>) -> Result<T, RuleError> {
        let depth = self.depth.get() + 1;
        if depth > MAX_RECURSION {
            return Err(RuleError::at(
                pos_of(shallow_span(at)),
                format!("the rule nests more than {MAX_RECURSION} levels deep here; split the expression or flatten the nesting"),
            ));
        }
        self.depth.set(depth);
        let result = f();
        self.depth.set(depth - 1);
        result
    }

    /// The tail expression of the file's single function.
    fn function(&self, file: &syn::File) -> Result<SNode, RuleError> {
        let f = match file.items.as_slice() {
            [syn::Item::Fn(f)] => f,
            [] => {
                return Err(RuleError::at(
                    Pos::new(1, 1),
                    "expected a function such as `fn select(m: u32, n: u32, k: u32) -> ... { ... }`, found nothing",
                ))
            }
            [_, second, ..] => {
                return Err(err(second, "expected exactly one function holding the rule, found another item"))
            }
            [other] => {
                return Err(err(other, format!("expected one function holding the rule, found {}", shown(other))))
            }
        };
        self.block(&f.block)
    }

    fn block(&self, block: &syn::Block) -> Result<SNode, RuleError> {
        match block.stmts.as_slice() {
            [syn::Stmt::Expr(e, None)] => self.node(e),
            [] => Err(RuleError::at(
                pos_of(block.brace_token.span.open()),
                "empty block: expected a kernel or an `if`/`else` expression",
            )),
            [only] => Err(err(
                only,
                "expected the block's value (a kernel or an `if`/`else` expression without `;`); the Rust form has no statements or `return`",
            )),
            [_, second, ..] => Err(err(
                second,
                "expected a single expression in this block; the Rust form has no statements, `let` or `return`",
            )),
        }
    }

    fn node(&self, e: &syn::Expr) -> Result<SNode, RuleError> {
        self.nested(e, || self.node_inner(e))
    }

    fn node_inner(&self, e: &syn::Expr) -> Result<SNode, RuleError> {
        match e {
            syn::Expr::If(first) => self.chain(first),
            syn::Expr::Block(b) if b.label.is_none() => self.block(&b.block),
            syn::Expr::Paren(p) if !matches!(*p.expr, syn::Expr::Tuple(_)) => self.node(&p.expr),
            syn::Expr::Group(g) => self.node(&g.expr),
            _ => Ok(SNode::Leaf(self.leaf(e)?, pos_of(e.span()))),
        }
    }

    fn chain(&self, first: &syn::ExprIf) -> Result<SNode, RuleError> {
        let mut branches = Vec::new();
        let mut current = first;
        loop {
            let pos = pos_of(current.if_token.span);
            let cond = self.cond(&current.cond)?;
            let body = self.block(&current.then_branch)?;
            branches.push((pos, cond, body));
            match &current.else_branch {
                Some((_, next)) if matches!(**next, syn::Expr::If(_)) => {
                    let syn::Expr::If(inner) = &**next else { unreachable!("checked by the guard") };
                    current = inner;
                }
                Some((else_token, otherwise)) => {
                    let otherwise = self.node(otherwise)?;
                    return Ok(SNode::Chain { branches, else_pos: pos_of(else_token.span), otherwise: Box::new(otherwise) });
                }
                None => {
                    return Err(RuleError::at(
                        pos,
                        "this `if` has no final `else`: when no condition holds the rule returns nothing; add `else { ... }`",
                    ))
                }
            }
        }
    }

    fn leaf(&self, e: &syn::Expr) -> Result<Leaf, RuleError> {
        match e {
            syn::Expr::Tuple(t) if (1..=2).contains(&t.elems.len()) => {
                let (backend, kernel_id) = self.item(&t.elems[0])?;
                let split_k = match t.elems.iter().nth(1) {
                    None => 0,
                    Some(s) => match signed_literal(s) {
                        Some(v) => {
                            let v = v?;
                            u32::try_from(v).map_err(|_| {
                                err(
                                    s,
                                    format!(
                                        "split-K {v} is out of range: expected 0..={} (log2 of KBatch)",
                                        crate::catalog::MAX_SPLIT_K
                                    ),
                                )
                            })?
                        }
                        None => {
                            return Err(err(
                                s,
                                format!("expected split-K (a non-negative integer), found {}", shown(s)),
                            ))
                        }
                    },
                };
                Ok(Leaf::of(backend, kernel_id, split_k))
            }
            syn::Expr::Paren(p) => self.leaf(&p.expr),
            syn::Expr::Path(p) if p.path.get_ident().is_some_and(|i| self.named.contains_key(&i.to_string())) => {
                Ok(self.named[&p.path.get_ident().expect("checked by the guard").to_string()])
            }
            _ => {
                let (backend, kernel_id) = self.item(e)?;
                Ok(Leaf::of(backend, kernel_id, 0))
            }
        }
    }

    /// An instance name, a kernelId, `kernel(ID)`, a triton config name or `BACKEND(ID)` (`cktile`,
    /// `triton`, `vendor`).
    fn item(&self, e: &syn::Expr) -> Result<(Libtype, i32), RuleError> {
        if let Some(v) = signed_literal(e) {
            return leaf_id(i64::try_from(v?).unwrap_or(i64::MAX), pos_of(e.span()), self.catalog)
                .map(|id| (Libtype::Ck, id));
        }
        match e {
            syn::Expr::Path(p) if p.qself.is_none() => match p.path.get_ident() {
                Some(ident) => resolve_leaf_name(&ident.to_string(), pos_of(ident.span()), self.catalog),
                None => Err(err(e, format!("expected an instance name, found the path {}", shown(e)))),
            },
            syn::Expr::Call(c) if c.args.len() == 1 => {
                let backend = match &*c.func {
                    syn::Expr::Path(p) => p.path.get_ident().and_then(|i| backend_call(&i.to_string())),
                    _ => None,
                };
                let Some(backend) = backend else {
                    return Err(err(
                        e,
                        format!(
                            "expected `kernel(ID)` or `cktile(ID)`, `triton(ID)`, `vendor(ID)`, found {}",
                            shown(e)
                        ),
                    ));
                };
                match signed_literal(&c.args[0]) {
                    Some(v) => backend_leaf_id(
                        backend,
                        i64::try_from(v?).unwrap_or(i64::MAX),
                        pos_of(c.args[0].span()),
                        self.catalog,
                    ),
                    None if backend.is_ck() => self.item(&c.args[0]),
                    None => Err(err(&c.args[0], format!("expected a kernelId, found {}", shown(&c.args[0])))),
                }
            }
            syn::Expr::Paren(p) => self.item(&p.expr),
            _ => Err(err(
                e,
                format!("expected an instance name, a kernelId or `(instance, split_k)`, found {}", shown(e)),
            )),
        }
    }

    fn cond(&self, e: &syn::Expr) -> Result<Cond, RuleError> {
        self.nested(e, || self.cond_inner(e))
    }

    fn cond_inner(&self, e: &syn::Expr) -> Result<Cond, RuleError> {
        match e {
            syn::Expr::Binary(b) => {
                let cmp = match b.op {
                    syn::BinOp::And(_) | syn::BinOp::Or(_) => {
                        let is_and = matches!(b.op, syn::BinOp::And(_));
                        let mut items = Vec::new();
                        self.flatten(e, is_and, &mut items)?;
                        return Ok(if is_and { Cond::And(items) } else { Cond::Or(items) });
                    }
                    syn::BinOp::Lt(_) => CmpOp::Lt,
                    syn::BinOp::Le(_) => CmpOp::Le,
                    syn::BinOp::Gt(_) => CmpOp::Gt,
                    syn::BinOp::Ge(_) => CmpOp::Ge,
                    syn::BinOp::Eq(_) => CmpOp::Eq,
                    syn::BinOp::Ne(_) => CmpOp::Ne,
                    _ => {
                        return Err(err(
                            e,
                            format!(
                                "expected a condition such as `m <= 128`, found the integer expression {}",
                                shown(e)
                            ),
                        ))
                    }
                };
                Ok(Cond::Cmp { op: cmp, lhs: self.expr(&b.left)?, rhs: self.expr(&b.right)? })
            }
            syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Not(_)) => Ok(Cond::Not(Box::new(self.cond(&u.expr)?))),
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Bool(b), .. }) => Ok(Cond::Const(b.value)),
            syn::Expr::Paren(p) => self.cond(&p.expr),
            syn::Expr::Group(g) => self.cond(&g.expr),
            _ => Err(err(e, format!("expected a condition such as `m <= 128`, found {}", shown(e)))),
        }
    }

    /// Operands of a run of the same `&&` / `||` (parenthesized runs stay one operand). syn nests
    /// the run to the left, so walk down the left spine.
    fn flatten(&self, e: &syn::Expr, is_and: bool, out: &mut Vec<Cond>) -> Result<(), RuleError> {
        let mut rights = Vec::new();
        let mut current = e;
        while let syn::Expr::Binary(b) = current {
            let same = match b.op {
                syn::BinOp::And(_) => is_and,
                syn::BinOp::Or(_) => !is_and,
                _ => false,
            };
            if !same {
                break;
            }
            rights.push(&*b.right);
            current = &b.left;
        }
        out.push(self.cond(current)?);
        for right in rights.into_iter().rev() {
            out.push(self.cond(right)?);
        }
        Ok(())
    }

    fn expr(&self, e: &syn::Expr) -> Result<Expr, RuleError> {
        self.nested(e, || self.expr_inner(e))
    }

    fn expr_inner(&self, e: &syn::Expr) -> Result<Expr, RuleError> {
        if let Some(v) = signed_literal(e) {
            let v = v?;
            return i64::try_from(v).map(Expr::Lit).map_err(|_| {
                err(e, format!("integer literal {v} is out of range: rules compute in 64-bit signed integers"))
            });
        }
        match e {
            syn::Expr::Binary(b) => Ok(Expr::bin(binary_op(e, b)?, self.expr(&b.left)?, self.expr(&b.right)?)),
            syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => {
                Ok(Expr::bin(BinOp::Sub, Expr::Lit(0), self.expr(&u.expr)?))
            }
            syn::Expr::Path(p) if p.qself.is_none() => path_expr(e, p),
            syn::Expr::Call(c) => self.call(e, c),
            syn::Expr::MethodCall(mc) => self.method_call(e, mc),
            syn::Expr::Cast(c) => {
                let ty = c.ty.to_token_stream().to_string();
                if matches!(ty.as_str(), "i64" | "u64" | "i32" | "u32" | "usize" | "isize" | "i128" | "u128") {
                    self.expr(&c.expr)
                } else {
                    Err(err(&c.ty, format!("unsupported cast to `{ty}`: expected an integer type")))
                }
            }
            syn::Expr::Paren(p) => self.expr(&p.expr),
            syn::Expr::Group(g) => self.expr(&g.expr),
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Bool(_), .. }) | syn::Expr::Unary(_) => {
                Err(err(e, format!("expected an integer expression, found the condition {}", shown(e))))
            }
            _ => Err(err(e, format!("expected an integer expression, found {}", shown(e)))),
        }
    }

    /// A function call `f(a, b)`: cdiv (ceil_div, div_ceil), div, min or max.
    fn call(&self, e: &syn::Expr, c: &syn::ExprCall) -> Result<Expr, RuleError> {
        let name = match &*c.func {
            syn::Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default(),
            _ => String::new(),
        };
        let op = match name.as_str() {
            "cdiv" | "ceil_div" | "div_ceil" => BinOp::CeilDiv,
            "div" => BinOp::Div,
            "min" => BinOp::Min,
            "max" => BinOp::Max,
            _ => {
                return Err(err(
                    &c.func,
                    format!("unknown function {}; conditions may call cdiv, ceil_div, div, min, max", shown(&c.func)),
                ))
            }
        };
        if c.args.len() != 2 {
            return Err(err(e, format!("`{name}` takes 2 arguments, found {}", c.args.len())));
        }
        Ok(Expr::bin(op, self.expr(&c.args[0])?, self.expr(&c.args[1])?))
    }

    /// A method call `a.f(b)`: div_ceil, min, max, or the wrapping + - * the generated module spells.
    fn method_call(&self, e: &syn::Expr, mc: &syn::ExprMethodCall) -> Result<Expr, RuleError> {
        let name = mc.method.to_string();
        let op = match name.as_str() {
            "div_ceil" => BinOp::CeilDiv,
            "min" => BinOp::Min,
            "max" => BinOp::Max,
            // The IR's + - * wrap (see `crate::rule::ir`), as the generated module spells them.
            "wrapping_add" => BinOp::Add,
            "wrapping_sub" => BinOp::Sub,
            "wrapping_mul" => BinOp::Mul,
            _ => {
                return Err(err(
                    &mc.method,
                    format!(
                        "unknown method `{name}`; conditions may call .div_ceil(b), .min(b), .max(b), \
                         .wrapping_add(b), .wrapping_sub(b), .wrapping_mul(b)"
                    ),
                ))
            }
        };
        if mc.args.len() != 1 {
            return Err(err(e, format!("`.{name}` takes 1 argument, found {}", mc.args.len())));
        }
        Ok(Expr::bin(op, self.expr(&mc.receiver)?, self.expr(&mc.args[0])?))
    }
}

/// The arithmetic operator of a binary expression `e`; comparisons, conditions and other operators are
/// errors.
fn binary_op(e: &syn::Expr, b: &syn::ExprBinary) -> Result<BinOp, RuleError> {
    match b.op {
        syn::BinOp::Add(_) => Ok(BinOp::Add),
        syn::BinOp::Sub(_) => Ok(BinOp::Sub),
        syn::BinOp::Mul(_) => Ok(BinOp::Mul),
        syn::BinOp::Div(_) => Ok(BinOp::Div),
        syn::BinOp::Lt(_)
        | syn::BinOp::Le(_)
        | syn::BinOp::Gt(_)
        | syn::BinOp::Ge(_)
        | syn::BinOp::Eq(_)
        | syn::BinOp::Ne(_) => {
            Err(err(e, format!("expected an integer expression, found the comparison {}", shown(e))))
        }
        syn::BinOp::And(_) | syn::BinOp::Or(_) => {
            Err(err(e, format!("expected an integer expression, found the condition {}", shown(e))))
        }
        _ => Err(err(
            e,
            format!(
                "operator `{}` is not supported: conditions may use + - * / and cdiv, min, max",
                b.op.to_token_stream()
            ),
        )),
    }
}

/// A path expression (no qualified self): `i64::MIN`, `i64::MAX`, or one of the variables M, N, K.
fn path_expr(e: &syn::Expr, p: &syn::ExprPath) -> Result<Expr, RuleError> {
    if p.path.segments.len() == 2 && p.path.segments[0].ident == "i64" {
        return match p.path.segments[1].ident.to_string().as_str() {
            "MIN" => Ok(Expr::Lit(i64::MIN)),
            "MAX" => Ok(Expr::Lit(i64::MAX)),
            _ => Err(err(e, format!("unknown constant {}; expected i64::MIN or i64::MAX", shown(e)))),
        };
    }
    match p.path.get_ident() {
        Some(ident) => {
            let name = ident.to_string();
            Var::from_name(&name)
                .map(Expr::Var)
                .ok_or_else(|| err(e, format!("unknown variable `{name}`; the rule may use M, N, K")))
        }
        None => Err(err(e, format!("unknown variable {}; the rule may use M, N, K", shown(e)))),
    }
}
