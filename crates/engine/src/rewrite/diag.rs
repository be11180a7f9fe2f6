//! Trimming a build log to what a reflector needs: the compiler's error lines (gcc/clang/hipcc
//! `file:line:col: error: ...` and nvcc `file(line): error: ...`) with their context, linker and driver
//! errors, and the candidate's source line when the compiler did not echo it.

use regex::Regex;
use std::sync::OnceLock;

/// Most error blocks kept.
pub const MAX_ERRORS: usize = 12;
/// Most lines in a summary.
pub const MAX_LINES: usize = 60;

fn located() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"^(?P<file>[^\s:()][^:()]*?)(?::(?P<l1>\d+)(?::\d+)?:|\((?P<l2>\d+)\):)\s*(?P<kind>(?:fatal |catastrophic )?error|warning|note|remark)\b",
        )
        .expect("valid regex")
    })
}

fn unlocated_error() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)(\berror\b|undefined reference|\bfatal\b|multiple definition|cannot find)")
            .expect("valid regex")
    })
}

/// One recognized error.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildError {
    /// File named by the compiler (None for linker/driver errors).
    pub file: Option<String>,
    /// 1-based line in that file.
    pub line: Option<usize>,
    /// The error line and its context lines.
    pub text: Vec<String>,
}

/// Extracts error blocks from a build log.
pub fn build_errors(log: &str) -> Vec<BuildError> {
    let lines: Vec<&str> = log.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(c) = located().captures(line) {
            let kind = &c["kind"];
            if kind.ends_with("error") {
                let lno = c.name("l1").or(c.name("l2")).and_then(|m| m.as_str().parse().ok());
                let mut text = vec![line.to_string()];
                let mut j = i + 1;
                // Context: the echoed source line and caret (and nvcc's indented detail), up to 3 lines.
                while j < lines.len() && text.len() < 4 {
                    let next = lines[j];
                    if next.trim().is_empty() || located().is_match(next) || !next.starts_with([' ', '\t']) {
                        break;
                    }
                    text.push(next.to_string());
                    j += 1;
                }
                out.push(BuildError { file: Some(c["file"].to_string()), line: lno, text });
                i = j;
                continue;
            }
        } else if unlocated_error().is_match(line) && !line.trim_start().starts_with("In file included") {
            out.push(BuildError { file: None, line: None, text: vec![line.to_string()] });
        }
        i += 1;
    }
    out
}

/// A short build-failure summary: recognized errors (at most [`MAX_ERRORS`], [`MAX_LINES`] lines), each
/// error in the target file followed by the candidate's source line when the compiler did not show it;
/// the log's last lines when no error is recognized.
pub fn summarize_build_log(log: &str, target_file: &str, candidate: &str) -> String {
    let errors = build_errors(log);
    if errors.is_empty() {
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        let mut tail: Vec<&str> = tail.into_iter().rev().collect();
        if tail.is_empty() {
            tail.push("(the build printed nothing)");
        }
        return format!("no compiler error line recognized; last lines of the build log:\n{}", tail.join("\n"));
    }
    let src: Vec<&str> = candidate.lines().collect();
    let mut lines = vec![format!("{} error line(s); first ones:", errors.len())];
    for e in errors.iter().take(MAX_ERRORS) {
        let mut block = e.text.clone();
        let in_target = e.file.as_deref().is_some_and(|f| f == target_file || f.ends_with(&format!("/{target_file}")));
        if let (true, Some(l)) = (in_target, e.line) {
            if let Some(code) = src.get(l.wrapping_sub(1)) {
                let code = code.trim();
                if !code.is_empty() && !block[1..].iter().any(|b| b.contains(code)) {
                    block.push(format!("    {l} | {code}"));
                }
            }
        }
        if lines.len() + block.len() > MAX_LINES {
            lines.push(format!("[... {} more error line(s) not shown ...]", errors.len() - (lines.len() - 1)));
            break;
        }
        lines.extend(block);
    }
    if errors.len() > MAX_ERRORS {
        lines.push(format!("[... {} more error(s) not shown ...]", errors.len() - MAX_ERRORS));
    }
    lines.extend(link_hints(&errors, target_file, candidate));
    lines.join("\n")
}

fn linker_symbol() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?P<what>undefined reference to|multiple definition of) [`'‘](?P<sym>[^`'’]+)['’]")
            .expect("valid regex")
    })
}

/// What a linker error means for the rewritten file: the linker names another object file (the caller), so
/// the reflector is told which symbol the rewritten file must define (or must not define twice). One line per
/// symbol, in the order the linker reported them.
fn link_hints(errors: &[BuildError], target_file: &str, candidate: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for e in errors.iter().filter(|e| e.file.is_none()) {
        for line in &e.text {
            let Some(c) = linker_symbol().captures(line) else { continue };
            let sym = c["sym"].to_string();
            let undefined = c["what"].starts_with("undefined");
            if seen.contains(&(sym.clone(), undefined)) {
                continue;
            }
            let named = Regex::new(&format!(r"\b{}\b", regex::escape(&sym))).is_ok_and(|r| r.is_match(candidate));
            out.push(match (undefined, named) {
                (true, false) => format!(
                    "note: the program no longer links: `{sym}` is called from another file but the rewritten \
                     {target_file} does not define it; keep the function's name and signature"
                ),
                (true, true) => format!(
                    "note: the program no longer links: the rewritten {target_file} names `{sym}` but does not export \
                     it (a misspelt name, a `static` or `inline`-only definition, or a changed signature in C++)"
                ),
                (false, _) => format!(
                    "note: the rewritten {target_file} defines `{sym}`, which another file also defines; rename \
                     the helper or make it `static`"
                ),
            });
            seen.push((sym, undefined));
        }
    }
    out
}

/// The last `n` non-empty lines of `s`.
pub fn tail_lines(s: &str, n: usize) -> String {
    let v: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    v[v.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcc_error_with_echoed_source() {
        let log = "k.c: In function 'f':\nk.c:3:5: error: 'y' undeclared (first use in this function)\n    3 |     y = 1;\n      |     ^\nk.c:4:1: warning: unused\n";
        let e = build_errors(log);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].line, Some(3));
        assert_eq!(e[0].text.len(), 3);
        let s = summarize_build_log(log, "k.c", "a\nb\n    y = 1;\n");
        assert!(s.starts_with("1 error line(s)"));
        assert_eq!(s.matches("y = 1;").count(), 1, "{s}");
    }

    #[test]
    fn nvcc_error_gets_source_line_appended() {
        let log = "swiglu.cu(2): error: identifier \"oops\" is undefined\n\n1 error detected in the compilation of \"swiglu.cu\".\n";
        let e = build_errors(log);
        assert_eq!(e[0].file.as_deref(), Some("swiglu.cu"));
        assert_eq!(e[0].line, Some(2));
        let s = summarize_build_log(log, "swiglu.cu", "int a;\nint b = oops;\n");
        assert!(s.contains("    2 | int b = oops;"), "{s}");
        assert!(s.contains("1 error detected"), "{s}");
    }

    #[test]
    fn linker_errors_and_fallback() {
        let log = "/usr/bin/ld: main.o: in function `main':\nmain.c:(.text+0x1): undefined reference to `g'\ncollect2: error: ld returned 1 exit status\n";
        assert_eq!(build_errors(log).len(), 2);
        let s = summarize_build_log("something odd\n", "k.c", "");
        assert!(s.contains("something odd"));
    }

    #[test]
    fn linker_errors_name_the_symbol_the_rewritten_file_must_define() {
        // gcc's own text when the rewritten kernel.c lost `sum_squares` (main.c calls it).
        let log = "/usr/bin/ld: /tmp/ccX.o: in function `main':\nmain.c:(.text+0x6e): undefined reference to `sum_squares'\nmain.c:(.text+0x9a): undefined reference to `sum_squares'\ncollect2: error: ld returned 1 exit status\n";
        let s = summarize_build_log(log, "kernel.c", "float sumsq(const float *v, int n) { return 0; }\n");
        let notes: Vec<&str> = s.lines().filter(|l| l.starts_with("note:")).collect();
        assert_eq!(notes.len(), 1, "{s}");
        assert!(notes[0].contains("`sum_squares`") && notes[0].contains("kernel.c does not define it"), "{s}");
        // The name is in the file, but not as an exported definition.
        let s = summarize_build_log(log, "kernel.c", "static float sum_squares(const float *v, int n) { return 0; }\n");
        assert!(s.contains("kernel.c names `sum_squares` but does not export it"), "{s}");
        // A helper clashing with one of main.c's.
        let log = "/usr/bin/ld: /tmp/ccY.o: in function `helper':\nkernel.c:(.text+0x0): multiple definition of `helper'; /tmp/ccZ.o:main.c:(.text+0x0): first defined here\ncollect2: error: ld returned 1 exit status\n";
        let s = summarize_build_log(log, "kernel.c", "int helper(void) { return 1; }\n");
        assert!(s.contains("kernel.c defines `helper`, which another file also defines"), "{s}");
        // A compile error gets no linker note.
        let s = summarize_build_log("k.c:3:5: error: 'y' undeclared\n", "k.c", "");
        assert!(!s.contains("note:"), "{s}");
    }
}
