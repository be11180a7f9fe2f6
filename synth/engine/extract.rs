//! Pulling a candidate out of what a language model (or an agent command) printed: markdown fences with
//! or without a language tag, prose around the code, several code blocks. Each piece of code found is
//! tried with the task's check in order; the first that passes wins, otherwise every failure is reported.

use super::{ProposeError, Rejection};

/// A piece of code found in the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The fence's language tag (`cpp`, `rust`, ...), if any.
    pub lang: Option<String>,
    /// 1-based line of the output where the code starts.
    pub line: usize,
    pub code: String,
}

/// Fenced code blocks (``` or ~~~, three or more) in order. An unterminated last fence runs to the end.
pub fn fenced_blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        if let Some((fence, info)) = open_fence(t) {
            let lang = info
                .split_whitespace()
                .next()
                .map(|s| s.trim_matches(|c| c == '{' || c == '}' || c == '.').to_ascii_lowercase());
            let start = i + 1;
            let mut j = start;
            while j < lines.len() && !closes(lines[j].trim(), &fence) {
                j += 1;
            }
            let mut code = lines[start..j.min(lines.len())].join("\n");
            code.push('\n');
            out.push(Block { lang: lang.filter(|l| !l.is_empty()), line: start + 1, code });
            i = j + 1;
        } else {
            i += 1;
        }
    }
    out
}

/// `(fence, info string)` when `line` opens a fence.
fn open_fence(line: &str) -> Option<(String, &str)> {
    for ch in ['`', '~'] {
        let n = line.chars().take_while(|&c| c == ch).count();
        if n >= 3 {
            let info = &line[n..];
            if ch == '`' && info.contains('`') {
                return None; // inline code such as ```x```
            }
            return Some((ch.to_string().repeat(n), info.trim()));
        }
    }
    None
}

fn closes(line: &str, fence: &str) -> bool {
    let ch = fence.chars().next().unwrap_or('`');
    line.starts_with(fence) && line.chars().all(|c| c == ch)
}

/// Code candidates in the order they are tried: every fenced block; without fences, the whole text,
/// then the text from each line that looks like the start of code (`if`, `{`, `return`, `//`, `match`,
/// `(`) to the last line ending in `}` or `;` or `)`.
pub fn code_candidates(text: &str) -> Vec<Block> {
    let fenced = fenced_blocks(text);
    if !fenced.is_empty() {
        return fenced;
    }
    let mut out = Vec::new();
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return out;
    }
    out.push(Block { lang: None, line: 1, code: format!("{trimmed}\n") });
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .iter()
        .rposition(|l| {
            let t = l.trim_end();
            t.ends_with('}') || t.ends_with(';') || t.ends_with(')')
        })
        .map(|e| e + 1)
        .unwrap_or(lines.len());
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let starts_code = ["if ", "if(", "{", "return", "//", "match ", "("].iter().any(|p| t.starts_with(p));
        if starts_code && i < end {
            let code = format!("{}\n", lines[i..end].join("\n"));
            if !out.iter().any(|b| b.code.trim() == code.trim()) {
                out.push(Block { lang: None, line: i + 1, code });
            }
        }
    }
    out
}

/// The first code candidate of `text` that `check` accepts. Otherwise an error listing every candidate
/// tried and why it was rejected (or saying that the output held no code at all).
pub fn pick_candidate(text: &str, check: &dyn Fn(&str) -> Result<(), Rejection>) -> Result<String, ProposeError> {
    let blocks = code_candidates(text);
    if blocks.is_empty() {
        return Err(ProposeError::NoCandidate("the output is empty: no code block found".into()));
    }
    let mut failures = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        match check(&b.code) {
            Ok(()) => return Ok(b.code.clone()),
            Err(e) => {
                let lang = b.lang.as_deref().map(|l| format!(" ({l})")).unwrap_or_default();
                failures.push(format!("code block {}{lang} at output line {}: {e}", i + 1, b.line));
            }
        }
    }
    Err(ProposeError::NoCandidate(format!(
        "no code block in the output is a valid candidate:\n  {}",
        failures.join("\n  ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parses(t: &str) -> Result<(), Rejection> {
        if t.trim_start().starts_with("if") {
            Ok(())
        } else {
            Err(Rejection(format!("1:1: expected `if`, found {:?}", t.trim().chars().next())))
        }
    }

    #[test]
    fn fences_with_and_without_tags() {
        let t = "Here you go:\n```cpp\nif (M < 4) {}\n```\nand\n~~~\nx\n~~~\n```\nlast";
        let b = fenced_blocks(t);
        assert_eq!(b.len(), 3);
        assert_eq!(b[0].lang.as_deref(), Some("cpp"));
        assert_eq!(b[0].line, 3);
        assert_eq!(b[0].code, "if (M < 4) {}\n");
        assert_eq!(b[1].lang, None);
        assert_eq!(b[1].code, "x\n");
        assert_eq!(b[2].code, "last\n");
    }

    #[test]
    fn picks_first_valid_and_reports_all_failures() {
        let t = "```\nnope\n```\n```rust\nif m < 4 { a } else { b }\n```";
        assert_eq!(pick_candidate(t, &parses).unwrap(), "if m < 4 { a } else { b }\n");
        let bad = "```\nnope\n```\ntext\n```cpp\nstill no\n```";
        let e = pick_candidate(bad, &parses).unwrap_err();
        assert!(matches!(e, ProposeError::NoCandidate(_)), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("code block 1 at output line 2: 1:1: expected `if`"), "{e}");
        assert!(e.contains("code block 2 (cpp) at output line 6"), "{e}");
    }

    #[test]
    fn unfenced_code_with_prose_around() {
        let t = "Sure! The rule:\nif (M < 4) { return x; } else { return y; }\nThis is fast because...";
        assert_eq!(pick_candidate(t, &parses).unwrap(), "if (M < 4) { return x; } else { return y; }\n");
        assert!(pick_candidate("   \n", &parses).unwrap_err().to_string().contains("empty"));
    }
}
