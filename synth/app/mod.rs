//! The application layer: the commands that wire stages together. Only this layer (and `cli`) knows the
//! command line; stages never import it.

pub(crate) mod aiter;
pub(crate) mod aiter_backend;
pub(crate) mod bench;
pub(crate) mod compare;
pub(crate) mod compress;
pub(crate) mod data;
pub mod drift;
pub mod drift_remeasure;
pub mod export;
pub(crate) mod help;
pub(crate) mod invocation;
pub mod multi;
pub(crate) mod multi_eval;
pub(crate) mod outputs;
pub(crate) mod rewrite;
pub(crate) mod run;
pub mod search;
pub mod session;
pub(crate) mod tuned;
