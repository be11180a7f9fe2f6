//! The application layer: the commands that wire stages together. Only this layer (and `cli`) knows the
//! command line; stages never import it.

pub mod aiter;
pub mod aiter_backend;
pub mod bench;
pub mod compare;
pub mod compress;
pub mod data;
pub mod drift;
pub mod drift_remeasure;
pub mod help;
pub mod invocation;
pub mod multi;
pub mod multi_eval;
pub mod outputs;
pub mod rewrite;
pub mod run;
pub mod search;
pub mod session;
pub mod tuned;
