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

/// At most this many code-like lines start an unfenced candidate (each candidate runs to the end of the
/// code, so more starts would only re-try longer and longer suffixes of one text).
pub const MAX_UNFENCED_STARTS: usize = 8;
/// At most this many candidates are tried per output; the rest are counted in the error.
pub const MAX_CANDIDATES: usize = 32;
/// Each candidate's rejection reason is cut to this many characters in the combined error.
const MAX_REASON_CHARS: usize = 400;

/// Code candidates in the order they are tried: every fenced block; without fences, the whole text,
/// then the text from each of the first [`MAX_UNFENCED_STARTS`] lines that look like the start of code
/// (`if`, `{`, `return`, `//`, `match`, `(`) to the last line ending in `}` or `;` or `)`. Time and memory
/// are linear in the text (at most `1 + MAX_UNFENCED_STARTS` copies of it).
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
    // Byte offset where each line starts, and the end (exclusive) of the last code-ending line.
    let mut line_starts = Vec::new();
    let mut end_byte = None;
    let mut offset = 0;
    for l in text.split_inclusive('\n') {
        line_starts.push(offset);
        let body = l.strip_suffix('\n').unwrap_or(l);
        let body = body.strip_suffix('\r').unwrap_or(body);
        let t = body.trim_end();
        if t.ends_with('}') || t.ends_with(';') || t.ends_with(')') {
            end_byte = Some((line_starts.len(), offset + body.len()));
        }
        offset += l.len();
    }
    let (end_line, end_byte) = end_byte.unwrap_or((line_starts.len(), text.len()));
    let mut starts = 0;
    for (i, &start) in line_starts.iter().enumerate().take(end_line) {
        if starts == MAX_UNFENCED_STARTS {
            break;
        }
        let t = text[start..].trim_start_matches([' ', '\t']);
        let starts_code = ["if ", "if(", "{", "return", "//", "match ", "("].iter().any(|p| t.starts_with(p));
        if starts_code {
            starts += 1;
            let body = text[start..end_byte].trim_end_matches(['\r', '\n']);
            // Equal to the whole text only when nothing but blank space surrounds it.
            if body.trim() != out[0].code.trim() {
                out.push(Block { lang: None, line: i + 1, code: format!("{body}\n") });
            }
        }
    }
    out
}

/// The first code candidate of `text` that `check` accepts. Otherwise an error listing every candidate
/// tried (at most [`MAX_CANDIDATES`]) and why it was rejected (or saying that the output held no code at
/// all).
pub fn pick_candidate(text: &str, check: &dyn Fn(&str) -> Result<(), Rejection>) -> Result<String, ProposeError> {
    let blocks = code_candidates(text);
    if blocks.is_empty() {
        return Err(ProposeError::NoCandidate("the output is empty: no code block found".into()));
    }
    let mut failures = Vec::new();
    for (i, b) in blocks.iter().enumerate().take(MAX_CANDIDATES) {
        match check(&b.code) {
            Ok(()) => return Ok(b.code.clone()),
            Err(e) => {
                let lang = b.lang.as_deref().map(|l| format!(" ({l})")).unwrap_or_default();
                let mut e = e.0;
                if let Some((cut, _)) = e.char_indices().nth(MAX_REASON_CHARS) {
                    e.truncate(cut);
                    e.push_str(" ...");
                }
                failures.push(format!("code block {}{lang} at output line {}: {e}", i + 1, b.line));
            }
        }
    }
    if blocks.len() > MAX_CANDIDATES {
        failures.push(format!(
            "{} more code blocks not tried (at most {MAX_CANDIDATES} are)",
            blocks.len() - MAX_CANDIDATES
        ));
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

    #[test]
    fn unfenced_candidates_match_the_line_based_definition() {
        let t = "prose\n  if (M < 4) {\n    return a;\n  }\nreturn b;\ntrailing prose\r\n";
        let b = code_candidates(t);
        let codes: Vec<&str> = b.iter().map(|b| b.code.as_str()).collect();
        assert_eq!(
            codes,
            vec![
                "prose\n  if (M < 4) {\n    return a;\n  }\nreturn b;\ntrailing prose\n",
                "  if (M < 4) {\n    return a;\n  }\nreturn b;\n",
                "    return a;\n  }\nreturn b;\n",
                "return b;\n",
            ]
        );
        assert_eq!(b.iter().map(|b| b.line).collect::<Vec<_>>(), vec![1, 2, 3, 5]);
        // Code only: the whole text is the one candidate.
        assert_eq!(code_candidates("if (M < 4) { return a; }\n").len(), 1);
    }

    /// 4 MiB of lines that each look like the start of code and end like code: the old extraction built
    /// one suffix per line (quadratic: terabytes); now at most 1 + MAX_UNFENCED_STARTS candidates of at
    /// most the text's size, and at most MAX_CANDIDATES checks with bounded reasons.
    #[test]
    fn adversarial_4_mib_answer_is_linear() {
        let line = "if (M < 4) return x;\n";
        let text = line.repeat(4 * 1024 * 1024 / line.len());
        let blocks = code_candidates(&text);
        // The whole text, then the suffixes from starts 2..=8 (the first start is the whole text again).
        assert_eq!(blocks.len(), MAX_UNFENCED_STARTS);
        let total: usize = blocks.iter().map(|b| b.code.len()).sum();
        assert!(total <= (1 + MAX_UNFENCED_STARTS) * (text.len() + 1), "{total}");
        let calls = std::cell::Cell::new(0usize);
        let reject = |c: &str| {
            calls.set(calls.get() + 1);
            Err(Rejection(format!("rejected {} bytes: {}", c.len(), "x".repeat(10_000))))
        };
        let err = pick_candidate(&text, &reject).unwrap_err().to_string();
        assert_eq!(calls.get(), MAX_UNFENCED_STARTS);
        assert!(err.len() < 10 * (MAX_REASON_CHARS + 100), "{}", err.len());

        // Many fences: 4 MiB of empty fenced blocks are counted, not all tried.
        let fences = "```\nx\n```\n".repeat(4 * 1024 * 1024 / 12);
        calls.set(0);
        let err = pick_candidate(&fences, &reject).unwrap_err().to_string();
        assert_eq!(calls.get(), MAX_CANDIDATES);
        assert!(err.contains("more code blocks not tried"), "{}", &err[err.len() - 200..]);
        assert!(err.len() < (MAX_CANDIDATES + 1) * (MAX_REASON_CHARS + 100), "{}", err.len());
    }
}
