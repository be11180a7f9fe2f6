//! Standard output that a closed pipe cannot break: `synth check rule.cpp | head -1` ends without a panic
//! (`println!` panics on a write error) and a command whose reader went away still finishes its work (its
//! files are written, its journal complete); only what it would have printed is dropped.
//!
//! [`out!`] and [`outln!`] take `print!`'s arguments; [`errln!`] and [`err!`] are their standard error
//! side: a closed or unwritable standard error (`synth ... 2>&1 | head -1`) drops the message and the
//! command goes on (there is nowhere left to report it). `eprintln!` and `println!` are refused by clippy
//! (`clippy.toml`), since they panic there. After a broken pipe nothing more is printed; any
//! other write error (a full disk behind a redirect) is said once on stderr, printing stops the same way,
//! and the program exits with status 1 once its work is done ([`failed`]).
//!
//! Every text printed through these macros passes one terminal filter ([`terminal_safe`]): a control,
//! bidi or invisible character other than a line end or a tab is written as its code point `<U+XXXX>`, so
//! a device name, a path or a model name holding an escape sequence cannot recolour, clear or rewrite the
//! terminal, whichever message carries it. Crate-root helper: it imports only [`crate::sanitize`].

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

/// `text` with every hazard character ([`crate::sanitize::is_hazard`]) but `\n` and `\t` written as its
/// code point `<U+XXXX>` (borrowed when there is none).
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let keep = |c: char| c == '\n' || c == '\t' || !crate::sanitize::is_hazard(c);
    if text.chars().all(keep) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if keep(c) {
            out.push(c);
        } else {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The text of `args` through [`terminal_safe`].
fn filtered(args: std::fmt::Arguments) -> String {
    let text = match args.as_str() {
        Some(s) => s.to_string(),
        None => args.to_string(),
    };
    match terminal_safe(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(s) => s,
    }
}

/// Writes `args` to standard output (see the module docs).
pub fn write(args: std::fmt::Arguments) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let text = filtered(args);
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if !CLOSED.swap(true, Ordering::Relaxed) && e.kind() != std::io::ErrorKind::BrokenPipe {
            FAILED.store(true, Ordering::Relaxed);
            write_err(format_args!("warning: cannot write to standard output ({e}); nothing more is printed there\n"));
        }
    }
}

/// Writes `args` to standard error; a write error drops them (see the module docs).
pub fn write_err(args: std::fmt::Arguments) {
    let text = filtered(args);
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
}

/// `eprint!` that a closed standard error cannot turn into a panic (see [`write_err`]).
#[macro_export]
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::stdout::write_err(format_args!($($arg)*))
    };
}

/// `eprintln!` that a closed standard error cannot turn into a panic (see [`write_err`]).
#[macro_export]
macro_rules! errln {
    () => {
        $crate::stdout::write_err(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::write_err(format_args!("{}\n", format_args!($($arg)*)))
    };
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

#[cfg(test)]
mod tests {
    use super::terminal_safe;

    #[test]
    fn escape_sequences_and_bidi_become_code_points_and_line_ends_stay() {
        assert_eq!(terminal_safe("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(terminal_safe("E\u{1b}[31mRED\r\n"), "E<U+001B>[31mRED<U+000D>\n");
        assert_eq!(terminal_safe("a\u{202E}b"), "a<U+202E>b");
        assert!(matches!(terminal_safe("no change"), std::borrow::Cow::Borrowed(_)));
    }
}
