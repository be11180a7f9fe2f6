//! Decision rules: the IR (serde JSON), parsers for the C++ form an LLM writes, a Rust form (syn) and
//! JSON, validation, and the interpreter every other stage treats as the reference semantics.

pub mod ir;
pub mod interp;
pub mod parse_cpp;
pub mod parse_rust;
pub mod validate;

pub use ir::{BinOp, CmpOp, Cond, Expr, Leaf, Node, Rule, Var};
pub mod cmd;
