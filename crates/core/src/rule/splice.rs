//! Translation phases 1 and 2 of C++ on rule text, as g++ performs them, so that the C++ reader sees
//! what the compiler sees:
//! - a byte-order mark at the start is dropped;
//! - a line ends at `\n`, `\r\n` or a lone `\r` (a lone `\r` becomes `\n`, so it ends a `//` comment
//!   as it does for g++);
//! - a backslash followed by a line end is deleted together with the line end (line splicing), wherever
//!   it stands: a `//` comment ending in `\` goes on over the next line, a word split by `\` is one word.
//!   Like g++, spaces, tabs, form feeds and vertical tabs between the backslash and the line end are
//!   allowed (g++ warns about them, and splices). Phase 2 runs once: a splice does not form a new one.
//!
//! C++17 has no trigraphs (`??/` is not a backslash); raw strings and character literals do not occur in
//! the rule grammar (a quote is an error of the tokenizer). Positions in the logical text map back to
//! the lines and columns of the file through [`Logical::physical`].

use super::error::{Pos, RuleError};

/// Rule text after phases 1 and 2, with what is needed to map its positions back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logical {
    pub text: String,
    /// After each splice: the logical position of the next character and its position in the file.
    anchors: Vec<(Pos, Pos)>,
}

fn is_splice_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{0B}' | '\u{0C}')
}

/// Runs phases 1 and 2 on `text`.
pub fn logical_text(text: &str) -> Logical {
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    if !text.contains(['\\', '\r']) {
        return Logical { text: text.to_string(), anchors: Vec::new() };
    }
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut anchors = Vec::new();
    let (mut line, mut col) = (1usize, 1usize); // logical
    let mut phys_line = 1usize; // the physical column equals `col` except right after a splice (anchored)
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '\\' => {
                let end = (i + 1..c.len()).find(|&j| !is_splice_space(c[j])).unwrap_or(c.len());
                if matches!(c.get(end), Some('\n' | '\r')) {
                    i = end + if c[end] == '\r' && c.get(end + 1) == Some(&'\n') { 2 } else { 1 };
                    phys_line += 1;
                    anchors.push((Pos::new(line, col), Pos::new(phys_line, 1)));
                    continue;
                }
                out.push('\\');
                col += 1;
            }
            '\r' if c.get(i + 1) != Some(&'\n') => {
                out.push('\n');
                (line, col) = (line + 1, 1);
                phys_line += 1;
            }
            '\n' => {
                out.push('\n');
                (line, col) = (line + 1, 1);
                phys_line += 1;
            }
            ch => {
                out.push(ch);
                col += 1;
            }
        }
        i += 1;
    }
    Logical { text: out, anchors }
}

impl Logical {
    /// Where the character at logical position `pos` stands in the file.
    pub fn physical(&self, pos: Pos) -> Pos {
        let n = self.anchors.partition_point(|(logical, _)| *logical <= pos);
        let Some((logical, file)) = n.checked_sub(1).map(|k| self.anchors[k]) else { return pos };
        if pos.line == logical.line {
            Pos::new(file.line, file.column + (pos.column - logical.column))
        } else {
            Pos::new(file.line + (pos.line - logical.line), pos.column)
        }
    }

    /// `e` with its position mapped to the file (an error without a position stays as it is).
    pub fn file_error(&self, mut e: RuleError) -> RuleError {
        if let Some(pos) = e.pos() {
            let file = self.physical(pos);
            (e.line, e.column) = (file.line, file.column);
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_without_backslash_or_cr_is_unchanged() {
        let l = logical_text("if (M < 2) return kernel(1);\nreturn kernel(2);\n");
        assert_eq!(l.text, "if (M < 2) return kernel(1);\nreturn kernel(2);\n");
        assert_eq!(l.physical(Pos::new(2, 3)), Pos::new(2, 3));
    }

    #[test]
    fn a_backslash_at_the_end_of_a_line_joins_the_next() {
        // `// c \` swallows the next line; the word `ret\urn` is one word; a backslash before a space that
        // is not at a line end stays.
        let l = logical_text("// c \\\nreturn kernel(3);\nret\\\nurn kernel(4); \\ x\n");
        assert_eq!(l.text, "// c return kernel(3);\nreturn kernel(4); \\ x\n");
        // `urn` of line 2 starts at logical 2:4, in the file at 4:1; `kernel` at 2:8 is 4:5.
        assert_eq!(l.physical(Pos::new(2, 1)), Pos::new(3, 1));
        assert_eq!(l.physical(Pos::new(2, 3)), Pos::new(3, 3));
        assert_eq!(l.physical(Pos::new(2, 4)), Pos::new(4, 1));
        assert_eq!(l.physical(Pos::new(2, 8)), Pos::new(4, 5));
        assert_eq!(l.physical(Pos::new(1, 6)), Pos::new(2, 1));
        assert_eq!(l.physical(Pos::new(3, 1)), Pos::new(5, 1));
    }

    #[test]
    fn whitespace_after_the_backslash_crlf_and_lone_cr_are_line_ends_like_gxx() {
        let l = logical_text("a \\ \t\nb\\\r\nc\rd\r\ne\\\rf");
        assert_eq!(l.text, "a bc\nd\r\nef");
        assert_eq!(l.physical(Pos::new(1, 3)), Pos::new(2, 1));
        assert_eq!(l.physical(Pos::new(1, 4)), Pos::new(3, 1));
        assert_eq!(l.physical(Pos::new(2, 1)), Pos::new(4, 1));
        assert_eq!(l.physical(Pos::new(3, 2)), Pos::new(6, 1));
    }

    #[test]
    fn splicing_runs_once_and_a_final_backslash_stays() {
        // `\\` then a line end: the second backslash splices, the first stays; the empty line after
        // the splice is not joined again.
        let l = logical_text("// x \\\\\n\nreturn kernel(4);\n\\");
        assert_eq!(l.text, "// x \\\nreturn kernel(4);\n\\");
        assert_eq!(l.physical(Pos::new(2, 1)), Pos::new(3, 1));
    }

    #[test]
    fn a_leading_byte_order_mark_is_dropped() {
        assert_eq!(logical_text("\u{FEFF}return kernel(1);").text, "return kernel(1);");
    }
}
