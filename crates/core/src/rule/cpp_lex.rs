//! Tokenizer for the C++ rule form: identifiers, integer literals (decimal or hex, optional
//! `u`/`U`/`l`/`L` suffixes), the punctuators the rule grammar uses, `//` and `/* */` comments and
//! `#include` / `#pragma` lines (skipped; any other directive is an error). It reads the text after line
//! splicing ([`super::splice`]).

use std::fmt;

use super::error::{Pos, RuleError};

/// Token kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    Ident(String),
    /// Magnitude of an integer literal (fits in u64; the sign is a separate `-` token).
    Int(u64),
    Punct(&'static str),
    Eof,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Ident(s) => write!(f, "`{s}`"),
            Tok::Int(v) => write!(f, "`{v}`"),
            Tok::Punct(p) => write!(f, "`{p}`"),
            Tok::Eof => write!(f, "end of input"),
        }
    }
}

/// A token and where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub tok: Tok,
    pub pos: Pos,
}

const PUNCTS: [&str; 26] = [
    "||", "&&", "==", "!=", "<=", ">=", "::", "->", "<", ">", "!", "+", "-", "*", "/", "%", "(", ")", "{", "}", ";",
    ",", "&", ":", "=", "?",
];

/// Splits `text` into tokens, ending with [`Tok::Eof`].
pub fn tokenize(text: &str) -> Result<Vec<Token>, RuleError> {
    let mut lx = Lexer { chars: text.chars().collect(), i: 0, line: 1, col: 1 };
    let mut out = Vec::new();
    let mut at_line_start = true;
    while let Some(c) = lx.peek(0) {
        let pos = Pos::new(lx.line, lx.col);
        if c == '\n' {
            at_line_start = true;
            lx.advance(1);
            continue;
        }
        // Any Unicode whitespace: rules pasted from web pages carry U+00A0 (g++ rejects those; the canonical
        // text synth prints has plain spaces).
        if c.is_whitespace() {
            lx.advance(1);
            continue;
        }
        if c == '#' && at_line_start {
            lx.directive(pos)?;
            continue;
        }
        at_line_start = false;
        let next = lx.peek(1);
        if c == '/' && next == Some('/') {
            lx.skip_line();
        } else if c == '/' && next == Some('*') {
            lx.block_comment(pos)?;
        } else if c.is_ascii_alphabetic() || c == '_' {
            out.push(Token { tok: Tok::Ident(lx.word()), pos });
        } else if c.is_ascii_digit() {
            let word = lx.word();
            out.push(Token { tok: Tok::Int(int_literal(&word, pos)?), pos });
        } else {
            out.push(Token { tok: Tok::Punct(lx.punct(c, pos)?), pos });
        }
    }
    out.push(Token { tok: Tok::Eof, pos: Pos::new(lx.line, lx.col) });
    Ok(out)
}

/// The text being split, the next char's index and its line and column.
struct Lexer {
    chars: Vec<char>,
    i: usize,
    line: usize,
    col: usize,
}

impl Lexer {
    /// The char `k` places ahead of the next one.
    fn peek(&self, k: usize) -> Option<char> {
        self.chars.get(self.i + k).copied()
    }

    /// Advances over `n` chars, tracking line and column.
    fn advance(&mut self, n: usize) {
        for _ in 0..n {
            if self.chars[self.i] == '\n' {
                self.line += 1;
                self.col = 1;
            } else {
                self.col += 1;
            }
            self.i += 1;
        }
    }

    /// Skips to the end of the line (the newline stays).
    fn skip_line(&mut self) {
        while self.peek(0).is_some_and(|c| c != '\n') {
            self.advance(1);
        }
    }

    /// A preprocessor line at `pos`: `#include` and `#pragma` lines are skipped to their end (continuations
    /// were spliced before); any other directive could change what g++ compiles (`#if 0`, `#define kernel
    /// ...`) and is an error.
    fn directive(&mut self, pos: Pos) -> Result<(), RuleError> {
        let word: String = self.chars[self.i + 1..]
            .iter()
            .skip_while(|c| matches!(c, ' ' | '\t'))
            .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
            .collect();
        if !matches!(word.as_str(), "include" | "pragma" | "") {
            return Err(RuleError::at(
                pos,
                format!(
                    "preprocessor directive `#{word}`: synth does not run the preprocessor, so this line could make \
                     g++ compile something else than synth reads; remove it (only `#include` and `#pragma` lines \
                     are skipped)"
                ),
            ));
        }
        self.skip_line();
        Ok(())
    }

    /// A `/* ... */` comment starting at `pos`.
    fn block_comment(&mut self, pos: Pos) -> Result<(), RuleError> {
        self.advance(2);
        loop {
            match (self.peek(0), self.peek(1)) {
                (None, _) => {
                    return Err(RuleError::at(pos, "unterminated `/*` comment: expected `*/` before the end of input"))
                }
                (Some('*'), Some('/')) => {
                    self.advance(2);
                    return Ok(());
                }
                _ => self.advance(1),
            }
        }
    }

    /// A run of ASCII letters, digits and `_` (an identifier, or a number with its suffix).
    fn word(&mut self) -> String {
        let start = self.i;
        while self.peek(0).is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            self.advance(1);
        }
        self.chars[start..self.i].iter().collect()
    }

    /// The punctuation starting with `c` at `pos` (the longest of [`PUNCTS`]).
    fn punct(&mut self, c: char, pos: Pos) -> Result<&'static str, RuleError> {
        let rest: String = self.chars[self.i..self.chars.len().min(self.i + 2)].iter().collect();
        match PUNCTS.iter().find(|p| rest.starts_with(**p)) {
            Some(p) => {
                self.advance(p.len());
                Ok(p)
            }
            None => Err(RuleError::at(
                pos,
                format!("unexpected character `{c}`: expected an identifier, a number or one of {}", PUNCTS.join(" ")),
            )),
        }
    }
}

/// Whether `s` is a C++ integer suffix of the kinds rules use (`u`, `l`, `ll` in either order and case;
/// `ll` is `ll` or `LL`, never `lL`).
fn valid_suffix(s: &str) -> bool {
    let unsigned = |s: &str| matches!(s, "" | "u" | "U");
    let long = |s: &str| matches!(s, "" | "l" | "L" | "ll" | "LL");
    (0..=s.len()).any(|i| {
        s.is_char_boundary(i) && {
            let (a, b) = s.split_at(i);
            (unsigned(a) && long(b)) || (long(a) && unsigned(b))
        }
    })
}

/// Value of a C++ integer literal such as `128`, `4096u`, `0x100UL`, or the octal `0100` (64, as in C++).
fn int_literal(word: &str, pos: Pos) -> Result<u64, RuleError> {
    let octal = word.len() > 1 && word.starts_with('0') && word.as_bytes()[1].is_ascii_digit();
    let (digits, radix) = match word.strip_prefix("0x").or_else(|| word.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None if octal => (&word[1..], 8),
        None => (word, 10),
    };
    let end = digits.find(|c: char| !c.is_digit(radix)).unwrap_or(digits.len());
    let (num, suffix) = digits.split_at(end);
    if num.is_empty() || !valid_suffix(suffix) {
        let hint = if octal {
            "a leading `0` makes an octal literal in C++ (digits 0..7); write the number without it"
        } else {
            "expected digits with an optional u/U/l/L/ll/LL suffix"
        };
        return Err(RuleError::at(pos, format!("invalid integer literal `{word}`: {hint}")));
    }
    u64::from_str_radix(num, radix).ok().filter(|v| *v <= 1u64 << 63).ok_or_else(|| {
        RuleError::at(pos, format!("integer literal `{word}` is out of range: rules compute in 64-bit signed integers"))
    })
}
