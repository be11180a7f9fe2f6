//! The one gate for text that reaches generated code or a terminal.
//!
//! Data (dataset and model names, file names, rule notes, device strings) ends up in comments of the
//! generated C++ header and Rust module and in messages. A compiler ends a `//` comment at any line
//! terminator it knows (`\n`, a lone `\r`, and for Rust also U+2028/U+2029/U+0085 in some tools), splices a
//! line ending in `\` (or the trigraph `??/`) into the next one, and shows bidirectional overrides
//! (U+202E, ...) so that the text reads differently from what compiles. So every such text goes through
//! [`comment_line`] (or [`shown`] for messages): each control, format and bidi character, a BOM, and any
//! character that could end or splice a line is replaced by its code point written `<U+XXXX>`; the result
//! is one line of plain printable text. Identifiers that are pasted into code as code (instance names) go
//! through [`cpp_identifier`], which accepts only `[A-Za-z_][A-Za-z0-9_]*`.
//!
//! Command lines shown as "Regenerate with:" quote every argument for a POSIX shell ([`shell_word`]).

use std::fmt::Write as _;

/// True for a character that must never appear raw in generated code or a message: every Unicode control
/// character (C0, DEL, C1), line and paragraph separators, the bidi embeddings, overrides, isolates and
/// marks, zero-width characters and the byte-order mark.
pub fn is_hazard(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'                  // ARABIC LETTER MARK
            | '\u{00AD}'                // SOFT HYPHEN
            | '\u{180E}'                // MONGOLIAN VOWEL SEPARATOR
            | '\u{200B}'..='\u{200F}'   // zero-width space/joiners, LRM, RLM
            | '\u{2028}'..='\u{202E}'   // line/paragraph separator, LRE RLE PDF LRO RLO
            | '\u{2060}'..='\u{206F}'   // word joiner, invisible operators, LRI RLI FSI PDI, deprecated format
            | '\u{FEFF}'                // BOM / zero-width no-break space
            | '\u{FFF9}'..='\u{FFFB}'   // interlinear annotation
        )
}

fn push_code_point(out: &mut String, c: char) {
    let _ = write!(out, "<U+{:04X}>", c as u32);
}

/// `text` as one line safe inside a `//` (C++) or `//!` (Rust) comment: hazard characters (see
/// [`is_hazard`]) become `<U+XXXX>`, `??` is broken up (no trigraph can form), and a trailing backslash
/// (also one followed only by spaces) is written `<U+005C>` so the line cannot splice into the next.
pub fn comment_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut prev_question = false;
    for c in text.chars() {
        if is_hazard(c) || (c == '?' && prev_question) {
            push_code_point(&mut out, c);
            prev_question = false;
        } else {
            out.push(c);
            prev_question = c == '?';
        }
    }
    // g++ also splices a backslash followed by spaces and then the line end.
    let kept = out.trim_end_matches(' ').len();
    if out[..kept].ends_with('\\') {
        let spaces = out.split_off(kept);
        out.pop();
        push_code_point(&mut out, '\\');
        out.push_str(&spaces);
    }
    out
}

/// `text` for a message: hazard characters as `<U+XXXX>`, everything else unchanged. Tabs and newlines
/// are kept when `multiline` (messages that are meant to span lines), otherwise escaped too.
pub fn shown_with(text: &str, multiline: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_hazard(c) && !(multiline && (c == '\n' || c == '\t')) {
            push_code_point(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// [`shown`] of a path as the terminal shows it (a file name may hold any byte but `/` and NUL).
pub fn shown_path(path: &std::path::Path) -> String {
    shown(&path.display().to_string())
}

/// `text` for a one-line message: see [`shown_with`].
pub fn shown(text: &str) -> String {
    shown_with(text, false)
}

/// `name` when it is a C/C++ identifier (`[A-Za-z_][A-Za-z0-9_]*`, at most 256 characters), else an error
/// naming it (with hazards shown as code points).
pub fn cpp_identifier(name: &str) -> anyhow::Result<&str> {
    let mut chars = name.chars();
    let ok = name.len() <= 256
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(name)
    } else {
        anyhow::bail!(
            "instance name \"{}\" is not a C++ identifier ([A-Za-z_][A-Za-z0-9_]*, at most 256 characters), so it \
             cannot be written into generated code; fix the catalog",
            shown(name)
        )
    }
}

/// `word` quoted for a POSIX shell so that pasting the command runs exactly that argument: plain words
/// stay as they are, anything else is single-quoted (`'` written `'\''`); a word holding a line break is
/// written as bash's `$'...'` with every hazard character (see [`is_hazard`]) escaped, so the command stays
/// on one line. A NUL, which no argument can hold, is shown as `<U+0000>` inside the quotes.
pub fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | ',' | ':' | '=' | '+' | '@'));
    if plain {
        return word.to_string();
    }
    let word = word.replace('\0', "<U+0000>");
    if word.chars().any(is_hazard) {
        // A line break inside '...' would split the line the command is shown on (a comment line of a
        // generated file), and comment lines and messages show other control and format characters as
        // code points (`<U+0009>`), which a shell would not read back: bash's $'...' keeps the word on one
        // line, every hazard character escaped, so the line pastes as the command it was.
        let mut out = String::from("$'");
        for c in word.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\'' => out.push_str("\\'"),
                c if is_hazard(c) && (c as u32) < 0x80 => {
                    let _ = write!(out, "\\x{:02x}", c as u32);
                }
                c if is_hazard(c) => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
                c => out.push(c),
            }
        }
        out.push('\'');
        return out;
    }
    shlex::try_quote(&word).map(|q| q.into_owned()).unwrap_or_else(|_| format!("'{}'", word.replace('\'', "'\\''")))
}

/// A GBNF string literal: `"`, `\` and control characters escaped (llama.cpp's escapes).
pub fn gbnf_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_control_and_bidi_character_is_escaped() {
        let hazards: Vec<char> = (0u32..=0x10FFFF).filter_map(char::from_u32).filter(|&c| is_hazard(c)).collect();
        // All C0, DEL and C1 controls, and the named format characters.
        for c in (0u32..0x20).chain(0x7F..0xA0).filter_map(char::from_u32) {
            assert!(hazards.contains(&c), "{:?}", c);
        }
        for c in ['\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}', '\u{2067}', '\u{2068}'] {
            assert!(hazards.contains(&c));
        }
        for c in ['\u{2069}', '\u{200B}', '\u{200E}', '\u{200F}', '\u{061C}', '\u{FEFF}', '\u{2028}', '\u{2029}'] {
            assert!(hazards.contains(&c));
        }
        for &c in &hazards {
            let line = comment_line(&format!("a{c}b"));
            assert_eq!(line, format!("a<U+{:04X}>b", c as u32));
            assert!(line.chars().all(|x| x.is_ascii_graphic()));
            assert_eq!(shown(&format!("{c}")), format!("<U+{:04X}>", c as u32));
        }
        assert_eq!(comment_line("x ??/"), "x ?<U+003F>/");
        assert_eq!(comment_line("ends in \\"), "ends in <U+005C>");
        assert_eq!(comment_line("ends in \\  "), "ends in <U+005C>  ");
        assert_eq!(comment_line("NVIDIA H200 (132 SMs) — ok"), "NVIDIA H200 (132 SMs) — ok");
        assert_eq!(shown_with("a\nb\tc\u{202E}", true), "a\nb\tc<U+202E>");
    }

    #[test]
    fn shell_words_are_quoted() {
        assert_eq!(shell_word("measurements/h200/a.csv"), "measurements/h200/a.csv");
        assert_eq!(shell_word("a;touch PWNED;$(id).csv"), "'a;touch PWNED;$(id).csv'");
        assert_eq!(shell_word(""), "''");
        // Round trip through a shell word splitter.
        for w in ["a b", "$(id)", "`id`", "x'y\"z", "a\\b", "semi;colon", "~user", "*"] {
            assert_eq!(shlex::split(&shell_word(w)).unwrap(), vec![w.to_string()], "{w}");
        }
        // A word with a line break (and an escape or a bidi character) stays on one line and is printed
        // back as it was by bash.
        // So does any other control or format character (a tab, a bidi override): comment lines show those
        // as code points, which a shell would not read back.
        for w in [
            "my rule\n$(touch pwned).json",
            "esc\u{1b}[31m\nRED",
            "x\u{202E}y'z\\\r\n",
            "tab\there\n",
            "tab\there",
            "\u{202E}x",
        ] {
            let q = shell_word(w);
            assert!(!q.contains('\n') && !q.chars().any(is_hazard), "{q}");
            if let Ok(out) = std::process::Command::new("bash").arg("-c").arg(format!("printf '%s' {q}")).output() {
                assert_eq!(String::from_utf8(out.stdout).unwrap(), w, "{q}");
            }
        }
        assert!(cpp_identifier("a8w8_blockscale_1x128x128_256x16x128x256_16x16_16x16").is_ok());
        assert!(cpp_identifier("x\"; system(\"id\"); //").is_err());
        assert!(cpp_identifier("9a").is_err());
    }
}
