//! The application layer: the commands that wire stages together. Only this layer (and `cli`) knows the
//! command line; stages never import it.

pub mod bench;
pub mod compare;
pub mod drift;
pub mod invocation;
pub mod multi;
pub mod rewrite;
pub mod run;
pub mod search;
pub mod session;
