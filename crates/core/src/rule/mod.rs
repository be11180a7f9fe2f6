//! Decision rules: the IR (serde JSON), parsers for the C++ form an LLM writes, a Rust form (syn) and
//! JSON, validation, canonical text printers, and the interpreter every other stage treats as the
//! reference semantics.
//!
//! Reading a rule: [`parse_any`] / [`load`] detect the form ([`detect_form`]); the `*_with_source`
//! variants also return a [`SourceMap`] whose lines [`validate::validate_with_source`] reports.

pub mod cpp_lex;
pub mod edit;
pub mod error;
pub mod generated;
pub mod grammar;
pub mod interp;
pub mod ir;
pub mod lower;
pub mod parse_cpp;
pub mod parse_rust;
pub mod source;
pub mod splice;
pub mod text;
pub mod validate;

use std::path::Path;

pub use error::{Pos, RuleError};
pub use ir::{BinOp, CmpOp, Cond, Expr, Leaf, Node, Rule, Var};
pub use parse_cpp::parse_cpp;
pub use parse_rust::parse_rust;
pub use source::{Form, NodePath, Parsed, SourceMap};
pub use validate::{Issue, Severity};

use crate::catalog::Catalog;

/// Parses the JSON form (the serde form of [`Rule`]).
pub fn parse_json(text: &str) -> Result<Rule, RuleError> {
    serde_json::from_str(text).map_err(|e| RuleError {
        file: None,
        line: e.line(),
        column: e.column().max(1),
        message: format!("invalid rule JSON: {e}"),
    })
}

/// The rule as pretty-printed JSON (what [`parse_json`] reads).
pub fn to_json(rule: &Rule) -> String {
    serde_json::to_string_pretty(rule).expect("a rule always serializes")
}

/// Which form `text` is written in:
/// - JSON when the first character other than whitespace is `{` and the next one is `"` or `}`
///   (a JSON object; a C++ block would continue with a statement);
/// - C++ when the text contains the word `return` outside comments (every C++ leaf is a `return`,
///   while the Rust form is an expression and never uses `return`);
/// - Rust otherwise.
pub fn detect_form(text: &str) -> Form {
    if let Some(after) = text.trim_start().strip_prefix('{') {
        if matches!(after.trim_start().chars().next(), Some('"' | '}')) {
            return Form::Json;
        }
    }
    if has_return_word(text) {
        Form::Cpp
    } else {
        Form::Rust
    }
}

/// Whether the word `return` occurs outside `//` and `/* */` comments.
fn has_return_word(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if bytes[i..].starts_with(b"/*") {
            i += 2;
            while i < bytes.len() && !bytes[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if bytes[i].is_ascii_alphabetic() || bytes[i] == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            if &bytes[start..i] == b"return" {
                return true;
            }
        } else {
            i += 1;
        }
    }
    false
}

/// Parses a rule in the given form; the files gemm-synth generates (the C++ header, the Rust module) are
/// recognized and read by [`generated`].
pub fn parse_form(text: &str, form: Form, catalog: &Catalog) -> Result<Parsed, RuleError> {
    match form {
        Form::Cpp if generated::is_generated_cpp(text) => generated::parse_generated_cpp(text, catalog),
        Form::Rust if generated::is_generated_rust(text) => parse_rust::parse_generated_rust(text, catalog),
        Form::Cpp => parse_cpp::parse_cpp_with_source(text, catalog),
        Form::Rust => parse_rust::parse_rust_with_source(text, catalog),
        Form::Json => Ok(Parsed { rule: parse_json(text)?, source: SourceMap::default(), form: Form::Json }),
    }
}

/// Parses a rule in whichever form [`detect_form`] finds.
pub fn parse_any(text: &str, catalog: &Catalog) -> Result<Rule, RuleError> {
    parse_any_with_source(text, catalog).map(|p| p.rule)
}

/// Like [`parse_any`], also returning source positions and the detected form.
pub fn parse_any_with_source(text: &str, catalog: &Catalog) -> Result<Parsed, RuleError> {
    parse_form(text, detect_form(text), catalog)
}

/// The form a file's extension names (`.cpp`/`.cc`/`.cxx`/`.h`/`.hpp`, `.rs`, `.json`), if any.
pub fn form_from_extension(path: &Path) -> Option<Form> {
    match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
        "cpp" | "cc" | "cxx" | "h" | "hpp" | "inc" => Some(Form::Cpp),
        "rs" => Some(Form::Rust),
        "json" => Some(Form::Json),
        _ => None,
    }
}

/// Reads a rule file; the form comes from the extension, else from [`detect_form`]. Errors name the file.
pub fn load(path: &Path, catalog: &Catalog) -> Result<Rule, RuleError> {
    load_with_source(path, catalog, None).map(|p| p.rule)
}

/// Reads a rule file and validates it exactly as `synth check` does: the one entry for every command that
/// takes a rule file (`compare`, `run`, `drift --rule`). A rule with error-level issues is an error that
/// lists them (file:line) and points at `synth check`.
pub fn load_checked(path: &Path, catalog: &Catalog) -> anyhow::Result<Rule> {
    let parsed = load_with_source(path, catalog, None).map_err(|e| anyhow::anyhow!("{e}"))?;
    let issues = validate::validate_with_source(&parsed.rule, catalog, &parsed.source);
    if validate::has_errors(&issues) {
        let file = synth_base::sanitize::shown(&path.display().to_string());
        let list: Vec<String> = issues
            .iter()
            .filter(|i| i.severity == Severity::Error)
            .map(|i| match i.line {
                Some(line) => format!("{file}:{line}: {}", i.message),
                None => format!("{file}: {}", i.message),
            })
            .collect();
        anyhow::bail!("invalid rule:\n  {}\n(`synth check {file}` shows every issue)", list.join("\n  "));
    }
    Ok(parsed.rule)
}

/// Like [`load`], with an optional forced form, also returning source positions.
pub fn load_with_source(path: &Path, catalog: &Catalog, form: Option<Form>) -> Result<Parsed, RuleError> {
    let name = path.display().to_string();
    let text = synth_base::input::read_text_capped(path, synth_base::input::MAX_RULE_BYTES, "rule file")
        .map_err(|e| RuleError::whole(format!("cannot read the rule file: {e}")).in_file(&name))?;
    let python = path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("py"));
    if form.is_none() && python {
        // The Python selector `synth run --backends` writes is an output only: its rule is the rule.json
        // written beside it.
        return Err(RuleError::whole(
            "a Python file is not a rule file (C++, Rust or JSON): pass the rule.json written beside it".to_string(),
        )
        .in_file(&name));
    }
    let form = form.or_else(|| form_from_extension(path)).unwrap_or_else(|| detect_form(&text));
    parse_form(&text, form, catalog).map_err(|e| e.in_file(&name))
}
