//! The "Regenerate with" line, built from what a job used: each job writes its resolved settings
//! ([`CommandLine::value`] leaves out a value equal to *that job's* default, never clap's), so pasting the
//! line (plus `--out`) runs the same job on the same inputs and writes the same bytes.
//!
//! Paths are written as the tool names them everywhere else ([`canonical_path`]): relative to the crate
//! root when inside it (the line is run there: `cargo run`), else absolute — never relative to the
//! directory the command happened to run in. Every value is quoted for a POSIX shell
//! ([`synth_base::sanitize::shell_word`]).
//!
//! Commands that write such a line — `run` (every job), `search`, and `compress` — build it with
//! [`CommandLine`]: `CommandLine::new("compress")`, then `.always("--tuned", path)` / `.path(...)` /
//! `.value(flag, used, default)` / `.flag(...)` for every setting the job used, then `.text()`.

use std::fmt::Display;
use std::path::{Path, PathBuf};

use synth_base::sanitize::shell_word;

/// A command line being built: `cargo run --release -- <sub>` and options in the order they are added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    sub: String,
    words: Vec<String>,
}

impl CommandLine {
    /// The line of subcommand `sub`, with no option yet.
    pub fn new(sub: &str) -> CommandLine {
        CommandLine { sub: sub.to_string(), words: Vec::new() }
    }

    /// `--flag` when `on`.
    pub fn flag(&mut self, long: &str, on: bool) -> &mut Self {
        if on {
            self.words.push(long.to_string());
        }
        self
    }

    /// `--long value`, always.
    pub fn always(&mut self, long: &str, value: impl Display) -> &mut Self {
        self.words.push(long.to_string());
        self.words.push(shell_word(&value.to_string()));
        self
    }

    /// `--long value` when `value` differs from the job's default `default`.
    pub fn value<T: PartialEq + Display>(&mut self, long: &str, value: T, default: T) -> &mut Self {
        if value != default {
            self.always(long, value);
        }
        self
    }

    /// `--long path` with the path as [`canonical_path`] writes it.
    pub fn path(&mut self, long: &str, path: &Path) -> &mut Self {
        self.always(long, canonical_path(path))
    }

    /// `--long path` once per path.
    pub fn paths(&mut self, long: &str, paths: &[PathBuf]) -> &mut Self {
        for p in paths {
            self.path(long, p);
        }
        self
    }

    /// The options written so far (without `cargo run --release -- <sub>`), as the shell would split them.
    pub fn options(&self) -> &[String] {
        &self.words
    }

    /// The whole line.
    pub fn text(&self) -> String {
        let mut out = format!("cargo run --release -- {}", self.sub);
        for w in &self.words {
            out.push(' ');
            out.push_str(w);
        }
        out
    }
}

/// A path as provenance and the line name it: absolute first (a relative path is taken from the working
/// directory), then relative to the crate root when inside it ([`synth_base::paths::display_path`]).
pub fn canonical_path(path: &Path) -> String {
    synth_base::paths::display_path(&absolute(path))
}

/// `path` made absolute against the working directory (unchanged when that cannot be read).
pub fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    std::env::current_dir().map(|d| d.join(path)).unwrap_or_else(|_| path.to_path_buf())
}

/// The name clap gives a value of a `ValueEnum` (`uniform`, `machine`, ...).
pub fn enum_name<T: clap::ValueEnum>(value: &T) -> String {
    value.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_equal_to_the_jobs_default_are_left_out_and_the_rest_quoted_in_order() {
        let mut l = CommandLine::new("search");
        l.value("--seed", 0, 0).value("--seed", 3, 0).always("--agent", "cmd:python3 a.py").flag("--quiet", false);
        l.flag("--train-all", true);
        assert_eq!(l.text(), "cargo run --release -- search --seed 3 --agent 'cmd:python3 a.py' --train-all");
        assert_eq!(l.options(), ["--seed", "3", "--agent", "'cmd:python3 a.py'", "--train-all"]);
    }

    #[test]
    fn paths_are_crate_relative_inside_it_and_absolute_outside() {
        let inside = synth_base::paths::crate_root().join("measurements/h200/qwen3-32b-tp2.csv");
        assert_eq!(canonical_path(&inside), "measurements/h200/qwen3-32b-tp2.csv");
        let cwd = std::env::current_dir().unwrap();
        let rel = Path::new("some/where.csv");
        let expected = synth_base::paths::display_path(&cwd.join(rel));
        assert_eq!(canonical_path(rel), expected);
        assert!(Path::new(&expected).is_absolute() || cwd.starts_with(synth_base::paths::crate_root()));
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(canonical_path(&tmp.path().join("x.csv")), tmp.path().join("x.csv").display().to_string());
    }
}
