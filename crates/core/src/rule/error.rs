//! Errors of the rule parsers, with a 1-based source position.

use std::fmt;

/// A 1-based line/column position in rule text (columns count characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    /// A position; both numbers are 1-based.
    pub fn new(line: usize, column: usize) -> Pos {
        Pos { line, column }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Why rule text could not be read. `line`/`column` are 1-based; 0 means "no position" (e.g. the
/// file could not be opened). Displayed as a [`synth_base::diag::Located`]: `[file:]line:col: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    /// File the text came from, when read by [`crate::rule::load`].
    pub file: Option<String>,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl RuleError {
    /// An error at `pos`.
    pub fn at(pos: Pos, message: impl Into<String>) -> RuleError {
        RuleError { file: None, line: pos.line, column: pos.column, message: message.into() }
    }

    /// An error without a source position.
    pub fn whole(message: impl Into<String>) -> RuleError {
        RuleError { file: None, line: 0, column: 0, message: message.into() }
    }

    /// The same error attributed to `file`.
    pub fn in_file(mut self, file: impl Into<String>) -> RuleError {
        self.file = Some(file.into());
        self
    }

    /// The position, if the error has one.
    pub fn pos(&self) -> Option<Pos> {
        (self.line > 0).then_some(Pos::new(self.line, self.column))
    }
}

impl From<&RuleError> for synth_base::diag::Located {
    fn from(e: &RuleError) -> Self {
        let pos = e.pos();
        synth_base::diag::Located {
            file: e.file.clone().unwrap_or_default(),
            line: pos.map(|p| p.line),
            col: pos.map(|p| p.column),
            ..synth_base::diag::Located::new("", e.message.clone())
        }
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        synth_base::diag::Located::from(self).fmt(f)
    }
}

impl std::error::Error for RuleError {}
