//! Parser for the C++ form of a rule, as an LLM or a person writes it inside AITER's dispatcher:
//!
//! ```text
//! // optional leading comment: becomes the rule's note
//! if ((M <= 128 && N >= 4096) || M == 1) {
//!     return a8w8_blockscale_..._intrawave_v1<DDataType, EDataType>;
//! } else if (cdiv(M, 64) * cdiv(N, 128) < 304) {
//!     return {a8w8_blockscale_..._v3<DDataType, EDataType>, 2};   // split-K 2
//! } else {
//!     return kernel(7);                                            // by kernelId
//! }
//! ```
//!
//! Grammar (hand-written recursive descent over [`super::cpp_lex`] tokens):
//! - the statements may stand alone or form the body of one function definition
//!   (`[template <...>] Type name(params) { ... }`, header contents ignored);
//! - statements: `if (cond) stmt [else stmt]` (so `else if` chains and nesting), `{ stmts }`,
//!   `return leaf;`. An `if` without `else` followed by more statements falls through to them,
//!   which makes "guard clause" style (`if (c) return a; return b;`) work;
//! - leaf: `item`, `{item, splitK}`, `Type{item, splitK}` (e.g. `BlockscaleChoice{...}`), where
//!   item is an instance name in any grammar with optional template arguments (`&` allowed before
//!   it) or `kernel(ID)`; `kernel(-1)` is the default, resolved to its alias;
//! - conditions: `||`, `&&`, `!`, `==`, `!=`, `<`, `<=`, `>`, `>=`, `+`, `-`, `*`, `/`, unary minus,
//!   parentheses, `true`, `false`, integer literals (decimal or hex, `u`/`U`/`l`/`L` suffixes), the
//!   variables `M`, `N`, `K` (or lower case) and the calls `cdiv(a, b)` / `ceil_div(a, b)`,
//!   `min(a, b)`, `max(a, b)` (optionally `std::`-qualified). Unary minus on a literal gives a negative
//!   literal; on anything else it means `0 - x`.
//!
//! Every path must end in a `return`: a chain that can fall through is an error at its last `if`.
//!
//! The text is read as g++ reads it: after line splicing ([`super::splice`]: a `//` comment ending in
//! `\` goes on over the next line), with C++'s octal literals (`0100` is 64). A statement sequence of
//! any length is compiled in a loop; only nesting recurses, bounded by the depth and bracket limits.

use super::cpp_lex::{tokenize, Tok, Token};
use super::error::{Pos, RuleError};
use super::ir::{BinOp, CmpOp, Cond, Expr, Leaf, Rule, Var};
use super::source::{check_text_limits, split_leading_note, Form, Parsed, SNode};
use super::splice::logical_text;
use crate::catalog::{Catalog, InstanceParams, Libtype};

/// Largest rule (in nodes) that fall-through expansion may produce.
const MAX_NODES: usize = 200_000;
/// Deepest recursion of the parser (nested statements, unary operators, parentheses).
const MAX_RECURSION: usize = 256;
/// Deepest condition syntax tree (left-associative chains such as `a + b + c` grow it).
const MAX_AST_DEPTH: usize = 100;

/// Parses the C++ form of a rule, resolving instance names through `catalog`.
pub fn parse_cpp(text: &str, catalog: &Catalog) -> Result<Rule, RuleError> {
    parse_cpp_with_source(text, catalog).map(|p| p.rule)
}

/// Like [`parse_cpp`], also returning the source position of every branch and leaf.
/// The text is read after C++'s line splicing ([`super::splice`]), as g++ reads it; positions name the
/// lines and columns of `text`.
pub fn parse_cpp_with_source(text: &str, catalog: &Catalog) -> Result<Parsed, RuleError> {
    let logical = logical_text(text);
    let (note, body) = split_leading_note(&logical.text);
    check_text_limits(&body).map_err(|e| logical.file_error(e))?;
    let mut toks = tokenize(&body).map_err(|e| logical.file_error(e))?;
    for t in &mut toks {
        t.pos = logical.physical(t.pos);
    }
    let mut parser = Parser { toks, i: 0, catalog, depth: 0 };
    let stmts = parser.program()?;
    let end = parser.peek().pos;
    let (node, _) = compile(&stmts, None, end)?;
    node.check_json_depth(1)?;
    let (root, source) = node.into_parts();
    Ok(Parsed { rule: Rule { root, note }, source, form: Form::Cpp })
}

/// Resolves an instance name to the legacy kernelId a rule leaf stores.
pub fn resolve_leaf_name(name: &str, pos: Pos, catalog: &Catalog) -> Result<(Libtype, i32), RuleError> {
    if name.starts_with("triton_") {
        let cfg = crate::catalog::triton::TritonConfig::parse_name(name)
            .map_err(|e| RuleError::at(pos, format!("unknown triton config `{name}`: {e}")))?;
        return Ok((Libtype::Triton, cfg.kernel_id()));
    }
    resolve_ck_name(name, pos, catalog).map(|id| (Libtype::Ck, id))
}

/// The backend a call `NAME(ID)` in a leaf names: `kernel` (CK legacy), `cktile`, `triton`, `vendor`.
pub fn backend_call(name: &str) -> Option<Libtype> {
    match name {
        "kernel" => Some(Libtype::Ck),
        "cktile" => Some(Libtype::Cktile),
        "triton" => Some(Libtype::Triton),
        "vendor" => Some(Libtype::Vendor),
        _ => None,
    }
}

/// Maps the id of a `BACKEND(ID)` leaf to the stored one: CK legacy as [`leaf_id`], the others as
/// written (in range of i32).
pub fn backend_leaf_id(backend: Libtype, id: i64, pos: Pos, catalog: &Catalog) -> Result<(Libtype, i32), RuleError> {
    if backend.is_ck() {
        return leaf_id(id, pos, catalog).map(|id| (backend, id));
    }
    let id = i32::try_from(id)
        .map_err(|_| RuleError::at(pos, format!("{backend} kernelId {id} is out of range (a 32-bit integer)")))?;
    Ok((backend, id))
}

fn resolve_ck_name(name: &str, pos: Pos, catalog: &Catalog) -> Result<i32, RuleError> {
    let inst = catalog.resolve_name(name).map_err(|e| RuleError::at(pos, format!("unknown instance `{name}`: {e}")))?;
    match &inst.params {
        InstanceParams::Ck(_) if inst.id == -1 => Ok(catalog.default_alias),
        InstanceParams::Ck(_) => Ok(inst.id),
        InstanceParams::Cktile(_) => Err(RuleError::at(
            pos,
            format!(
                "`{name}` is a CK-tile instance ({}); rules select CK legacy instances (kernelId 0..18)",
                inst.arch.as_deref().unwrap_or("cktile")
            ),
        )),
    }
}

/// Maps a kernelId written in a rule to the stored one (the default -1 becomes its alias).
pub fn leaf_id(id: i64, pos: Pos, catalog: &Catalog) -> Result<i32, RuleError> {
    if id == -1 {
        return Ok(catalog.default_alias);
    }
    i32::try_from(id).map_err(|_| {
        RuleError::at(pos, format!("kernelId {id} is out of range: expected a catalog kernelId such as 0..18"))
    })
}

/// A statement of the C++ form.
#[derive(Debug, Clone)]
enum Stmt {
    /// `if (c) {..} else if (c) {..} [else {..}]`: branches with the position of their `if`.
    If {
        branches: Vec<(Pos, Cond, Vec<Stmt>)>,
        else_: Option<(Pos, Vec<Stmt>)>,
    },
    Return {
        pos: Pos,
        leaf: Leaf,
    },
}

impl Stmt {
    fn pos(&self) -> Pos {
        match self {
            Stmt::If { branches, .. } => branches[0].0,
            Stmt::Return { pos, .. } => *pos,
        }
    }

    /// Whether control can reach the end of the statement without returning.
    fn falls_through(&self) -> bool {
        match self {
            Stmt::Return { .. } => false,
            Stmt::If { else_: None, .. } => true,
            Stmt::If { branches, else_: Some((_, body)) } => {
                list_falls_through(body) || branches.iter().any(|(_, _, b)| list_falls_through(b))
            }
        }
    }
}

fn list_falls_through(stmts: &[Stmt]) -> bool {
    stmts.last().is_none_or(Stmt::falls_through)
}

fn missing_else(pos: Pos) -> RuleError {
    RuleError::at(
        pos,
        "this `if` has no final `else` and no `return` follows it: when no condition holds the rule returns \
         nothing; add `else { return ...; }`",
    )
}

/// The node of the statements after the one being compiled. A sequence is compiled from its end, so a
/// run of guard clauses of any length takes neither recursion nor quadratic time.
enum Rest {
    /// Nothing follows in this sequence: control goes to the continuation.
    Cont,
    /// A leaf.
    Leaf(SNode),
    /// A chain with its branches stored last first, so the guard clause before it prepends in O(1).
    Chain { rev: Vec<Branch>, else_pos: Pos, otherwise: Box<SNode> },
}

impl Rest {
    fn from_node(node: SNode) -> Rest {
        match node {
            SNode::Chain { mut branches, else_pos, otherwise } => {
                branches.reverse();
                Rest::Chain { rev: branches, else_pos, otherwise }
            }
            leaf => Rest::Leaf(leaf),
        }
    }

    /// The node (None for [`Rest::Cont`]).
    fn into_node(self) -> Option<SNode> {
        match self {
            Rest::Cont => None,
            Rest::Leaf(leaf) => Some(leaf),
            Rest::Chain { mut rev, else_pos, otherwise } => {
                rev.reverse();
                Some(SNode::Chain { branches: rev, else_pos, otherwise })
            }
        }
    }

    /// The node with its size: the continuation's copy for [`Rest::Cont`].
    fn materialize(self, size: usize, cont: Option<(&SNode, usize)>) -> Option<(SNode, usize)> {
        match self {
            Rest::Cont => cont.map(|(node, size)| (node.clone(), size)),
            rest => rest.into_node().map(|node| (node, size)),
        }
    }
}

/// A compiled branch: the position of its `if`, its condition and its node.
type Branch = (Pos, Cond, SNode);

/// Compiles the branch bodies of an `if`, falling through to `cont`; returns them with their total size.
fn compile_branches(
    branches: &[(Pos, Cond, Vec<Stmt>)],
    cont: Option<(&SNode, usize)>,
) -> Result<(Vec<Branch>, usize), RuleError> {
    let mut total = 0;
    let mut out = Vec::with_capacity(branches.len());
    for (pos, cond, body) in branches {
        let (node, size) = compile(body, cont, *pos)?;
        total += size;
        out.push((*pos, cond.clone(), node));
    }
    Ok((out, total))
}

/// Turns statements into a node and its size (in nodes). `cont` (with its size) is what runs when the
/// statements fall through (None at the end of the rule); `blame` is where to report a fall-through with
/// nowhere to go. Recursion only follows nesting (bounded by the parser); a sequence is a loop.
fn compile(stmts: &[Stmt], cont: Option<(&SNode, usize)>, blame: Pos) -> Result<(SNode, usize), RuleError> {
    check_reachable(stmts)?;
    if stmts.is_empty() {
        return cont.map(|(node, size)| (node.clone(), size)).ok_or_else(|| missing_else(blame));
    }
    let mut tail = Tail { rest: Rest::Cont, size: 0 };
    for (i, stmt) in stmts.iter().enumerate().rev() {
        let size = match stmt {
            Stmt::Return { pos, leaf } => {
                tail.rest = Rest::Leaf(SNode::Leaf(*leaf, *pos));
                1
            }
            Stmt::If { branches, else_: Some((else_pos, else_body)) } => {
                tail.if_else(branches, *else_pos, else_body, cont)?
            }
            Stmt::If { branches, else_: None } => {
                let last_if = branches.last().map(|b| b.0).unwrap_or(blame);
                let else_pos = stmts.get(i + 1).map(Stmt::pos).unwrap_or(last_if);
                tail.guards(branches, last_if, else_pos, cont)?
            }
        };
        if size > MAX_NODES {
            return Err(RuleError::at(
                stmt.pos(),
                format!("the rule expands to more than {MAX_NODES} nodes (statements after an `if` without `else` are copied into its branches); use explicit `else` branches"),
            ));
        }
        tail.size = size;
    }
    Ok((tail.rest.into_node().expect("a compiled statement"), tail.size))
}

/// Unreachable statements, in source order: each check needs only the statement before.
fn check_reachable(stmts: &[Stmt]) -> Result<(), RuleError> {
    for pair in stmts.windows(2) {
        match &pair[0] {
            Stmt::Return { .. } => {
                return Err(RuleError::at(pair[1].pos(), "this statement is never reached: a `return` comes before it"))
            }
            first @ Stmt::If { else_: Some(_), .. } if !first.falls_through() => {
                return Err(RuleError::at(
                    pair[1].pos(),
                    "this statement is never reached: the `if`/`else` before it returns on every path",
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// What follows the statement being compiled (statements are compiled last first) and its size.
struct Tail {
    rest: Rest,
    size: usize,
}

impl Tail {
    /// An `if` with an `else`: a chain of its own; the bodies that fall through get a copy of what follows.
    /// Returns the statement's size.
    fn if_else(
        &mut self,
        branches: &[(Pos, Cond, Vec<Stmt>)],
        else_pos: Pos,
        else_body: &[Stmt],
        cont: Option<(&SNode, usize)>,
    ) -> Result<usize, RuleError> {
        // Only bodies that fall through need a copy of what follows.
        let needed = list_falls_through(else_body) || branches.iter().any(|b| list_falls_through(&b.2));
        let after =
            if needed { std::mem::replace(&mut self.rest, Rest::Cont).materialize(self.size, cont) } else { None };
        let after = after.as_ref().map(|(node, size)| (node, *size));
        let (mut compiled, size) = compile_branches(branches, after)?;
        let (otherwise, else_size) = compile(else_body, after, else_pos)?;
        compiled.reverse();
        self.rest = Rest::Chain { rev: compiled, else_pos, otherwise: Box::new(otherwise) };
        Ok(1 + size + else_size)
    }

    /// An `if` without `else` (guard clauses, `if (a) return x; if (b) return y; ...`): its branches are
    /// prepended to what follows, read as one else-if chain whose `else` is at `else_pos`; `last_if` is
    /// blamed when nothing follows. Returns the statement's size.
    fn guards(
        &mut self,
        branches: &[(Pos, Cond, Vec<Stmt>)],
        last_if: Pos,
        else_pos: Pos,
        cont: Option<(&SNode, usize)>,
    ) -> Result<usize, RuleError> {
        if matches!(self.rest, Rest::Cont) {
            let (node, size) = cont.ok_or_else(|| missing_else(last_if))?;
            self.rest = Rest::from_node(node.clone());
            self.size = size;
        }
        let (compiled, bodies) = if branches.iter().any(|b| list_falls_through(&b.2)) {
            let (node, size) =
                std::mem::replace(&mut self.rest, Rest::Cont).materialize(self.size, None).expect("not Cont");
            let compiled = compile_branches(branches, Some((&node, size)))?;
            self.rest = Rest::from_node(node);
            compiled
        } else {
            compile_branches(branches, None)?
        };
        let (merged, size) = match std::mem::replace(&mut self.rest, Rest::Cont) {
            Rest::Chain { mut rev, else_pos, otherwise } => {
                rev.extend(compiled.into_iter().rev());
                (Rest::Chain { rev, else_pos, otherwise }, self.size + bodies)
            }
            Rest::Leaf(leaf) => {
                let rev = compiled.into_iter().rev().collect();
                (Rest::Chain { rev, else_pos, otherwise: Box::new(leaf) }, 1 + self.size + bodies)
            }
            Rest::Cont => unreachable!("set from the continuation above"),
        };
        self.rest = merged;
        Ok(size)
    }
}

/// Condition syntax tree before typing into [`Cond`] / [`Expr`].
#[derive(Debug, Clone)]
enum Ast {
    Int(i128),
    Bool(bool),
    Var(Var),
    Bin(BinOp, Box<Node>, Box<Node>),
    Cmp(CmpOp, Box<Node>, Box<Node>),
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
    Neg(Box<Node>),
    Paren(Box<Node>),
}

#[derive(Debug, Clone)]
struct Node {
    pos: Pos,
    ast: Ast,
    /// Height of the tree below and including this node.
    depth: usize,
}

impl Node {
    fn new(pos: Pos, ast: Ast) -> Node {
        let below = match &ast {
            Ast::Int(_) | Ast::Bool(_) | Ast::Var(_) => 0,
            Ast::Bin(_, l, r) | Ast::Cmp(_, l, r) => l.depth.max(r.depth),
            Ast::And(v) | Ast::Or(v) => v.iter().map(|n| n.depth).max().unwrap_or(0),
            Ast::Not(x) | Ast::Neg(x) | Ast::Paren(x) => x.depth,
        };
        Node { pos, ast, depth: below + 1 }
    }

    fn into_cond(self) -> Result<Cond, RuleError> {
        let all = |v: Vec<Node>| v.into_iter().map(Node::into_cond).collect::<Result<Vec<_>, _>>();
        match self.ast {
            Ast::Or(v) => Ok(Cond::Or(all(v)?)),
            Ast::And(v) => Ok(Cond::And(all(v)?)),
            Ast::Not(c) => Ok(Cond::Not(Box::new(c.into_cond()?))),
            Ast::Bool(b) => Ok(Cond::Const(b)),
            Ast::Paren(c) => c.into_cond(),
            Ast::Cmp(op, l, r) => Ok(Cond::Cmp { op, lhs: l.into_expr()?, rhs: r.into_expr()? }),
            Ast::Int(_) | Ast::Var(_) | Ast::Bin(..) | Ast::Neg(_) => {
                Err(RuleError::at(self.pos, "expected a condition such as `M <= 128`, found an integer expression"))
            }
        }
    }

    fn into_expr(self) -> Result<Expr, RuleError> {
        match self.ast {
            Ast::Int(v) => i64::try_from(v).map(Expr::Lit).map_err(|_| {
                RuleError::at(
                    self.pos,
                    format!("integer literal {v} is out of range: rules compute in 64-bit signed integers"),
                )
            }),
            Ast::Var(v) => Ok(Expr::Var(v)),
            Ast::Bin(op, l, r) => Ok(Expr::bin(op, l.into_expr()?, r.into_expr()?)),
            Ast::Neg(x) => Ok(Expr::bin(BinOp::Sub, Expr::Lit(0), x.into_expr()?)),
            Ast::Paren(x) => x.into_expr(),
            Ast::Cmp(..) => Err(RuleError::at(
                self.pos,
                "expected an integer expression, found a comparison (to test a range write `a < b && b < c`, \
                 not `a < b < c`)",
            )),
            Ast::And(_) | Ast::Or(_) | Ast::Not(_) | Ast::Bool(_) => {
                Err(RuleError::at(self.pos, "expected an integer expression, found a condition"))
            }
        }
    }
}

struct Parser<'a> {
    toks: Vec<Token>,
    i: usize,
    catalog: &'a Catalog,
    /// Current recursion depth (see [`MAX_RECURSION`]).
    depth: usize,
}

/// A binary node, refused when the expression grows deeper than [`MAX_AST_DEPTH`].
fn binary(pos: Pos, ast: Ast) -> Result<Node, RuleError> {
    let node = Node::new(pos, ast);
    if node.depth > MAX_AST_DEPTH {
        return Err(RuleError::at(
            pos,
            format!("this expression nests more than {MAX_AST_DEPTH} levels deep; split it"),
        ));
    }
    Ok(node)
}

impl Parser<'_> {
    fn peek(&self) -> &Token {
        &self.toks[self.i.min(self.toks.len() - 1)]
    }

    fn peek_at(&self, ahead: usize) -> &Tok {
        &self.toks[(self.i + ahead).min(self.toks.len() - 1)].tok
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if self.i < self.toks.len() - 1 {
            self.i += 1;
        }
        t
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(&self.peek().tok, Tok::Punct(q) if *q == p)
    }

    fn is_ident(&self, s: &str) -> bool {
        matches!(&self.peek().tok, Tok::Ident(q) if q == s)
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        let hit = self.is_punct(p);
        if hit {
            self.bump();
        }
        hit
    }

    fn unexpected(&self, expected: &str) -> RuleError {
        let t = self.peek();
        RuleError::at(t.pos, format!("expected {expected}, found {}", t.tok))
    }

    fn expect_punct(&mut self, p: &str, context: &str) -> Result<Pos, RuleError> {
        if self.is_punct(p) {
            Ok(self.bump().pos)
        } else {
            Err(self.unexpected(&format!("`{p}` {context}")))
        }
    }

    /// The whole input: statements, or one function definition around them.
    fn program(&mut self) -> Result<Vec<Stmt>, RuleError> {
        let first = self.peek().clone();
        let starts_statement = self.is_ident("if") || self.is_ident("return") || self.is_punct("{");
        let stmts = if starts_statement {
            let stmts = self.statements_until_eof()?;
            if stmts.is_empty() {
                return Err(RuleError::at(
                    first.pos,
                    "expected a rule (`if` ... `else` ... with `return` leaves), found an empty block",
                ));
            }
            stmts
        } else if matches!(first.tok, Tok::Eof) {
            return Err(RuleError::at(
                first.pos,
                "expected a rule (`if` ... `else` ... with `return` leaves), found end of input",
            ));
        } else {
            if self.function_header().is_err() {
                self.i = 0;
                return Err(self.unexpected(
                    "`if`, `return`, `{` or a function definition such as `BlockwiseKernel select(int M, int N, int K) { ... }`",
                ));
            }
            let open = self.toks[self.i - 1].pos;
            let stmts = self.block_body(open)?;
            if stmts.is_empty() {
                return Err(RuleError::at(open, "expected a rule in the function body, found an empty body"));
            }
            if !matches!(self.peek().tok, Tok::Eof) {
                return Err(self.unexpected("end of input after the function body"));
            }
            stmts
        };
        Ok(stmts)
    }

    fn statements_until_eof(&mut self) -> Result<Vec<Stmt>, RuleError> {
        let mut out = Vec::new();
        while !matches!(self.peek().tok, Tok::Eof) {
            if self.is_punct("}") {
                return Err(self.unexpected("a statement (this `}` closes no `{`)"));
            }
            self.statement(&mut out)?;
        }
        Ok(out)
    }

    /// Skips `[template <...>] Type name(params) [const] [-> Type] {`; Err if the tokens do not look
    /// like that.
    fn function_header(&mut self) -> Result<(), ()> {
        if self.is_ident("template") {
            self.bump();
            self.skip_angles()?;
        }
        let mut words = 0;
        loop {
            match &self.peek().tok {
                Tok::Ident(_) => {
                    self.bump();
                    words += 1;
                }
                Tok::Punct("::" | "*" | "&") => {
                    self.bump();
                }
                Tok::Punct("<") => self.skip_angles()?,
                Tok::Punct("(") if words >= 1 => break,
                _ => return Err(()),
            }
        }
        self.skip_parens()?;
        while self.is_ident("const") || self.is_ident("noexcept") || self.is_ident("override") {
            self.bump();
        }
        if self.eat_punct("->") {
            while !self.is_punct("{") {
                match &self.peek().tok {
                    Tok::Ident(_) | Tok::Punct("::" | "*" | "&") => {
                        self.bump();
                    }
                    Tok::Punct("<") => self.skip_angles()?,
                    _ => return Err(()),
                }
            }
        }
        if self.eat_punct("{") {
            Ok(())
        } else {
            Err(())
        }
    }

    /// Skips a balanced `<...>` group starting at the current `<`.
    fn skip_angles(&mut self) -> Result<(), ()> {
        self.skip_group("<", ">")
    }

    fn skip_parens(&mut self) -> Result<(), ()> {
        self.skip_group("(", ")")
    }

    fn skip_group(&mut self, open: &str, close: &str) -> Result<(), ()> {
        if !self.eat_punct(open) {
            return Err(());
        }
        let mut depth = 1;
        while depth > 0 {
            match &self.peek().tok {
                Tok::Eof | Tok::Punct(";" | "{" | "}") => return Err(()),
                Tok::Punct(p) if *p == open => depth += 1,
                Tok::Punct(p) if *p == close => depth -= 1,
                _ => {}
            }
            self.bump();
        }
        Ok(())
    }

    /// Statements up to the `}` matching the `{` at `open` (already consumed); consumes the `}`.
    fn block_body(&mut self, open: Pos) -> Result<Vec<Stmt>, RuleError> {
        let mut out = Vec::new();
        loop {
            if self.eat_punct("}") {
                return Ok(out);
            }
            if matches!(self.peek().tok, Tok::Eof) {
                return Err(self.unexpected(&format!("`}}` closing the `{{` at {open}")));
            }
            self.statement(&mut out)?;
        }
    }

    /// Enters one level of recursion; errors past [`MAX_RECURSION`].
    fn enter(&mut self) -> Result<(), RuleError> {
        self.depth += 1;
        if self.depth > MAX_RECURSION {
            return Err(RuleError::at(
                self.peek().pos,
                format!("the rule nests more than {MAX_RECURSION} levels deep here"),
            ));
        }
        Ok(())
    }

    /// One statement, appended to `out` (a nested block appends its statements).
    fn statement(&mut self, out: &mut Vec<Stmt>) -> Result<(), RuleError> {
        self.enter()?;
        let result = self.statement_inner(out);
        self.depth -= 1;
        result
    }

    fn statement_inner(&mut self, out: &mut Vec<Stmt>) -> Result<(), RuleError> {
        if self.is_ident("if") {
            out.push(self.if_statement()?);
        } else if self.is_ident("return") {
            out.push(self.return_statement()?);
        } else if self.is_punct("{") {
            let open = self.bump().pos;
            out.extend(self.block_body(open)?);
        } else {
            return Err(self.unexpected("`if`, `return` or `{`"));
        }
        Ok(())
    }

    /// A statement used as an `if`/`else` body: a block or a single statement.
    fn body(&mut self) -> Result<Vec<Stmt>, RuleError> {
        let mut out = Vec::new();
        self.statement(&mut out)?;
        Ok(out)
    }

    fn if_statement(&mut self) -> Result<Stmt, RuleError> {
        let mut branches = Vec::new();
        loop {
            let pos = self.bump().pos; // `if`
            let open = self.expect_punct("(", "after `if`")?;
            let cond = self.or_expr()?.into_cond()?;
            self.expect_punct(")", &format!("closing the `(` at {open}"))?;
            let body = self.body()?;
            branches.push((pos, cond, body));
            if !self.is_ident("else") {
                return Ok(Stmt::If { branches, else_: None });
            }
            let else_pos = self.bump().pos;
            if !self.is_ident("if") {
                let body = self.body()?;
                return Ok(Stmt::If { branches, else_: Some((else_pos, body)) });
            }
        }
    }

    fn return_statement(&mut self) -> Result<Stmt, RuleError> {
        let pos = self.bump().pos; // `return`
        let leaf = self.leaf()?;
        self.expect_punct(";", "after the returned kernel")?;
        Ok(Stmt::Return { pos, leaf })
    }

    /// `item`, `{item, splitK}` or `Type{item, splitK}`.
    fn leaf(&mut self) -> Result<Leaf, RuleError> {
        let typed_brace = matches!(self.peek().tok, Tok::Ident(_)) && matches!(self.peek_at(1), Tok::Punct("{"));
        if typed_brace {
            self.bump();
        }
        if !self.is_punct("{") {
            let (backend, kernel_id) = self.item()?;
            return Ok(Leaf::of(backend, kernel_id, 0));
        }
        let open = self.bump().pos;
        let (backend, kernel_id) = self.item()?;
        let mut split_k = 0;
        if self.eat_punct(",") && !self.is_punct("}") {
            let t = self.bump();
            split_k = match t.tok {
                Tok::Int(v) => u32::try_from(v).map_err(|_| {
                    RuleError::at(
                        t.pos,
                        format!("split-K {v} is out of range (expected 0..={})", crate::catalog::MAX_SPLIT_K),
                    )
                })?,
                other => {
                    return Err(RuleError::at(
                        t.pos,
                        format!("expected split-K (a non-negative integer, log2 of KBatch), found {other}"),
                    ))
                }
            };
            self.eat_punct(",");
        }
        if !self.eat_punct("}") {
            return Err(self.unexpected(&format!("`}}` closing the `{{` at {open} (a leaf is `{{kernel, splitK}}`)")));
        }
        Ok(Leaf::of(backend, kernel_id, split_k))
    }

    /// An instance name (optionally with template arguments and a leading `&`), a triton config name,
    /// `kernel(ID)` (CK legacy) or `BACKEND(ID)` (`cktile`, `triton`, `vendor`).
    fn item(&mut self) -> Result<(Libtype, i32), RuleError> {
        self.eat_punct("&");
        let t = self.peek().clone();
        let Tok::Ident(name) = &t.tok else {
            return Err(self.unexpected("an instance name (a8w8_blockscale_...) or `kernel(ID)`"));
        };
        self.bump();
        if let Some(backend) = backend_call(name).filter(|_| self.is_punct("(")) {
            self.bump();
            let neg = self.eat_punct("-");
            let n = self.bump();
            let Tok::Int(v) = n.tok else {
                return Err(RuleError::at(n.pos, format!("expected a kernelId inside `{name}(...)`, found {}", n.tok)));
            };
            self.expect_punct(")", &format!("closing `{name}(`"))?;
            let id = if neg { -i128::from(v) } else { i128::from(v) };
            return backend_leaf_id(backend, i64::try_from(id).unwrap_or(i64::MAX), n.pos, self.catalog);
        }
        if self.is_punct("<") {
            let open = self.peek().pos;
            self.skip_angles()
                .map_err(|_| RuleError::at(open, "unbalanced template arguments: expected `>` closing this `<`"))?;
        }
        resolve_leaf_name(name, t.pos, self.catalog)
    }

    // ---- conditions -------------------------------------------------------------------------

    fn or_expr(&mut self) -> Result<Node, RuleError> {
        let first = self.and_expr()?;
        if !self.is_punct("||") {
            return Ok(first);
        }
        let pos = first.pos;
        let mut items = vec![first];
        while self.eat_punct("||") {
            items.push(self.and_expr()?);
        }
        Ok(Node::new(pos, Ast::Or(items)))
    }

    fn and_expr(&mut self) -> Result<Node, RuleError> {
        let first = self.eq_expr()?;
        if !self.is_punct("&&") {
            return Ok(first);
        }
        let pos = first.pos;
        let mut items = vec![first];
        while self.eat_punct("&&") {
            items.push(self.eq_expr()?);
        }
        Ok(Node::new(pos, Ast::And(items)))
    }

    fn eq_expr(&mut self) -> Result<Node, RuleError> {
        let mut lhs = self.rel_expr()?;
        loop {
            let op = if self.is_punct("==") {
                CmpOp::Eq
            } else if self.is_punct("!=") {
                CmpOp::Ne
            } else {
                return Ok(lhs);
            };
            self.bump();
            let rhs = self.rel_expr()?;
            lhs = binary(lhs.pos, Ast::Cmp(op, Box::new(lhs), Box::new(rhs)))?;
        }
    }

    fn rel_expr(&mut self) -> Result<Node, RuleError> {
        let mut lhs = self.add_expr()?;
        loop {
            let op = match &self.peek().tok {
                Tok::Punct("<") => CmpOp::Lt,
                Tok::Punct("<=") => CmpOp::Le,
                Tok::Punct(">") => CmpOp::Gt,
                Tok::Punct(">=") => CmpOp::Ge,
                _ => return Ok(lhs),
            };
            self.bump();
            let rhs = self.add_expr()?;
            lhs = binary(lhs.pos, Ast::Cmp(op, Box::new(lhs), Box::new(rhs)))?;
        }
    }

    fn add_expr(&mut self) -> Result<Node, RuleError> {
        let mut lhs = self.mul_expr()?;
        loop {
            let op = match &self.peek().tok {
                Tok::Punct("+") => BinOp::Add,
                Tok::Punct("-") => BinOp::Sub,
                _ => return Ok(lhs),
            };
            self.bump();
            let rhs = self.mul_expr()?;
            lhs = binary(lhs.pos, Ast::Bin(op, Box::new(lhs), Box::new(rhs)))?;
        }
    }

    fn mul_expr(&mut self) -> Result<Node, RuleError> {
        let mut lhs = self.unary()?;
        loop {
            let op = match &self.peek().tok {
                Tok::Punct("*") => BinOp::Mul,
                Tok::Punct("/") => BinOp::Div,
                Tok::Punct("%") => {
                    return Err(RuleError::at(
                        self.peek().pos,
                        "operator `%` is not supported: conditions may use + - * / and cdiv, min, max",
                    ))
                }
                _ => return Ok(lhs),
            };
            self.bump();
            let rhs = self.unary()?;
            lhs = binary(lhs.pos, Ast::Bin(op, Box::new(lhs), Box::new(rhs)))?;
        }
    }

    fn unary(&mut self) -> Result<Node, RuleError> {
        self.enter()?;
        let result = self.unary_inner();
        self.depth -= 1;
        result
    }

    fn unary_inner(&mut self) -> Result<Node, RuleError> {
        let pos = self.peek().pos;
        if self.eat_punct("!") {
            return Ok(Node::new(pos, Ast::Not(Box::new(self.unary()?))));
        }
        if self.eat_punct("+") {
            return self.unary();
        }
        if self.eat_punct("-") {
            let inner = self.unary()?;
            return Ok(match inner.ast {
                Ast::Int(v) => Node::new(pos, Ast::Int(-v)),
                _ => Node::new(pos, Ast::Neg(Box::new(inner))),
            });
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Node, RuleError> {
        let t = self.peek().clone();
        match &t.tok {
            Tok::Int(v) => {
                self.bump();
                Ok(Node::new(t.pos, Ast::Int(i128::from(*v))))
            }
            Tok::Punct("(") => {
                self.bump();
                let inner = self.or_expr()?;
                self.expect_punct(")", &format!("closing the `(` at {}", t.pos))?;
                Ok(Node::new(t.pos, Ast::Paren(Box::new(inner))))
            }
            Tok::Ident(name) => {
                self.bump();
                let mut name = name.clone();
                if name == "std" && self.eat_punct("::") {
                    match self.bump().tok {
                        Tok::Ident(n) => name = n,
                        other => {
                            return Err(RuleError::at(
                                t.pos,
                                format!("expected a function name after `std::`, found {other}"),
                            ))
                        }
                    }
                }
                match name.as_str() {
                    "true" => return Ok(Node::new(t.pos, Ast::Bool(true))),
                    "false" => return Ok(Node::new(t.pos, Ast::Bool(false))),
                    _ => {}
                }
                if self.is_punct("(") {
                    return self.call(&name, t.pos);
                }
                match Var::from_name(&name) {
                    Some(v) => Ok(Node::new(t.pos, Ast::Var(v))),
                    None => Err(RuleError::at(t.pos, format!("unknown variable `{name}`; the rule may use M, N, K"))),
                }
            }
            _ => Err(self.unexpected("a number, `M`, `N`, `K`, `true`, `false`, a call such as `cdiv(M, 128)` or `(`")),
        }
    }

    /// `cdiv(a, b)`, `ceil_div(a, b)`, `min(a, b)`, `max(a, b)`; the name is consumed.
    fn call(&mut self, name: &str, pos: Pos) -> Result<Node, RuleError> {
        let named = BinOp::ALL.into_iter().find(|op| op.call_name() == Some(name));
        let op = match named {
            Some(op) => op,
            None if name == "ceil_div" => BinOp::CeilDiv,
            None => {
                return Err(RuleError::at(
                    pos,
                    format!("unknown function `{name}`; conditions may call cdiv, ceil_div, min, max"),
                ))
            }
        };
        let open = self.bump().pos; // `(`
        let mut args = Vec::new();
        if !self.is_punct(")") {
            loop {
                args.push(self.or_expr()?);
                if !self.eat_punct(",") {
                    break;
                }
            }
        }
        self.expect_punct(")", &format!("closing the `(` of `{name}` at {open}"))?;
        if args.len() != 2 {
            return Err(RuleError::at(pos, format!("`{name}` takes 2 arguments, found {}", args.len())));
        }
        let rhs = args.pop().expect("two arguments");
        let lhs = args.pop().expect("two arguments");
        binary(pos, Ast::Bin(op, Box::new(lhs), Box::new(rhs)))
    }
}
