//! Standard output that a closed pipe cannot break: `synth check rule.cpp | head -1` ends without a panic
//! (`println!` panics on a write error) and a command whose reader went away still finishes its work (its
//! files are written, its journal complete); only what it would have printed is dropped.
//!
//! [`out!`] and [`outln!`] take `print!`'s arguments. After a broken pipe nothing more is printed; any
//! other write error (a full disk behind a redirect) is said once on stderr, printing stops the same way,
//! and the program exits with status 1 once its work is done ([`failed`]). Crate-root helper: it imports nothing of the crate.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once standard output cannot be written.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Set when that was not a closed pipe (e.g. a full disk): the program still exits with an error.
static FAILED: AtomicBool = AtomicBool::new(false);

/// Whether printing failed for another reason than a closed pipe; `main` then exits non-zero, so a
/// redirect to a full disk is not read as success.
pub fn failed() -> bool {
    FAILED.load(Ordering::Relaxed)
}

/// Writes `args` to standard output (see the module docs).
pub fn write(args: std::fmt::Arguments) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if !CLOSED.swap(true, Ordering::Relaxed) && e.kind() != std::io::ErrorKind::BrokenPipe {
            FAILED.store(true, Ordering::Relaxed);
            eprintln!("warning: cannot write to standard output ({e}); nothing more is printed there");
        }
    }
}

/// `print!` that a closed pipe ends quietly (see [`write`]).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write(format_args!($($arg)*))
    };
}

/// `println!` that a closed pipe ends quietly (see [`write`]).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::stdout::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}
