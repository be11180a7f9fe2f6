//! The one error type of every input reader: where the problem is (file, line, character column, the named
//! CSV column and its value) and what to do about it.
//!
//! Display, each part only when known:
//!
//! ```text
//! file:line:col: column NAME = "VALUE": message; hint
//! ```
//!
//! Without a file, a position reads `line:col` and a bare line `line N`. A value is written with Rust's
//! string escapes, so control characters and quotes from the input never reach the terminal raw.

use std::fmt;

/// A problem in an input, located as precisely as the reader knows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Located {
    /// Source file (empty for text that did not come from a file).
    pub file: String,
    /// 1-based line.
    pub line: Option<usize>,
    /// 1-based character column on `line`.
    pub col: Option<usize>,
    /// The named column of a CSV row (or a manifest key).
    pub column: Option<String>,
    /// The offending value in `column`.
    pub value: Option<String>,
    /// The dotted key of a TOML file (`build.timeout_s`).
    pub key: Option<String>,
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl Located {
    /// A problem in `file` (empty: no file) with no position yet.
    pub fn new(file: impl Into<String>, message: impl Into<String>) -> Self {
        Located { file: file.into(), message: message.into(), ..Located::default() }
    }

    /// A problem at `line`, when known, of rows that are already in memory (no file).
    pub fn at_line(line: Option<usize>, message: impl Into<String>) -> Self {
        Located { line, message: message.into(), ..Located::default() }
    }

    /// A file that could not be read.
    pub fn io(path: &std::path::Path, e: impl fmt::Display) -> Self {
        Located::new(path.display().to_string(), format!("cannot read the file: {e}"))
    }

    /// At 1-based `line`.
    pub fn line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }

    /// At 1-based `line` and character column `col`.
    pub fn at(mut self, line: usize, col: usize) -> Self {
        self.line = Some(line);
        self.col = Some(col);
        self
    }

    /// In the named CSV column (or manifest key).
    pub fn column(mut self, column: impl Into<String>) -> Self {
        self.column = Some(column.into());
        self
    }

    /// The column's offending value.
    pub fn value(mut self, value: impl Into<String>) -> Self {
        self.value = Some(value.into());
        self
    }

    /// At the dotted TOML key.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// At byte `offset` of `text` (the file's contents).
    pub fn at_offset(self, text: &str, offset: usize) -> Self {
        let (line, col) = line_col(text, offset);
        self.at(line, col)
    }

    /// What to do about it.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut placed = !self.file.is_empty();
        write!(f, "{}", self.file)?;
        match (self.line, self.col) {
            (Some(l), Some(c)) if placed => write!(f, ":{l}:{c}")?,
            (Some(l), None) if placed => write!(f, ":{l}")?,
            (Some(l), Some(c)) => write!(f, "{l}:{c}")?,
            (Some(l), None) => write!(f, "line {l}")?,
            (None, _) => {}
        }
        placed |= self.line.is_some();
        if let Some(column) = &self.column {
            write!(f, "{}column {column}", if placed { ": " } else { "" })?;
            if let Some(v) = &self.value {
                write!(f, " = {v:?}")?;
            }
            placed = true;
        }
        if let Some(key) = &self.key {
            write!(f, "{}key `{key}`", if placed { ": " } else { "" })?;
            placed = true;
        }
        if placed {
            write!(f, ": ")?;
        }
        write!(f, "{}", self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Located {}

/// The 1-based line and character column of byte `offset` of `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// A TOML syntax or schema error of `file` (contents `text`): at the error's position, `what` followed by
/// TOML's own message (without its source excerpt, which the position replaces).
pub fn toml_error(file: &str, text: &str, what: &str, e: &toml::de::Error) -> Located {
    let located = Located::new(file, format!("{what}: {}", e.message().trim_end()));
    match e.span() {
        Some(span) => located.at_offset(text, span.start),
        None => located,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_only_when_known() {
        let e = Located::new("t.csv", "expected a time").line(12).column("us").value("fast");
        assert_eq!(e.to_string(), "t.csv:12: column us = \"fast\": expected a time");
        assert_eq!(Located::new("r.cpp", "expected `if`").at(3, 5).to_string(), "r.cpp:3:5: expected `if`");
        assert_eq!(Located::new("r.cpp", "cannot read the file").to_string(), "r.cpp: cannot read the file");
        assert_eq!(Located::new("", "expected `if`").at(3, 5).to_string(), "3:5: expected `if`");
        assert_eq!(Located::new("", "duplicate cell").line(7).to_string(), "line 7: duplicate cell");
        assert_eq!(Located::new("", "no rows").to_string(), "no rows");
        let hinted = Located::new("trace.jsonl", "malformed trace line").at(2, 9).hint("fix or delete the line");
        assert_eq!(hinted.to_string(), "trace.jsonl:2:9: malformed trace line; fix or delete the line");
    }

    #[test]
    fn keys_and_positions_of_toml_files() {
        assert_eq!(line_col("a = 1\nbé = x\n", 10), (2, 4));
        assert_eq!(line_col("ab", 99), (1, 3));
        let e = Located::new("t.toml", "expected a number").at(4, 13).key("test.timeout_s");
        assert_eq!(e.to_string(), "t.toml:4:13: key `test.timeout_s`: expected a number");
        let text = "name = \"m\"\nhidden = x\n";
        let err = toml::from_str::<toml::Table>(text).unwrap_err();
        let shown = toml_error("m.toml", text, "invalid model spec", &err).to_string();
        assert!(shown.starts_with("m.toml:2:10: invalid model spec: "), "{shown}");
    }

    #[test]
    fn values_are_escaped() {
        let e = Located::new("t.csv", "expected a number").line(2).column("M").value("1\n\"2\"\u{1b}[31m");
        assert_eq!(e.to_string(), "t.csv:2: column M = \"1\\n\\\"2\\\"\\u{1b}[31m\": expected a number");
    }
}
