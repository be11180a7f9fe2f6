//! Standard output that a closed pipe ends quietly: `synth check rule.cpp | head -1` stops the program
//! when `head` exits, as any Unix filter does, instead of a panic (`println!` panics on a write error).
//!
//! [`out!`] and [`outln!`] take `print!`'s arguments. A broken pipe exits with status 0 (the reader has
//! what it wanted); any other write error (a full disk behind a redirect) is one error line and status 1.
//! Crate-root helper: it imports nothing of the crate.

use std::io::Write;

/// Writes `args` to standard output (see the module docs).
pub fn write(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to standard output: {e}");
        std::process::exit(1);
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
