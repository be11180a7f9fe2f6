//! The layering of ARCHITECTURE.md as a test. The table under "Who may import whom" says which modules
//! each top-level module of the crate may import; this test reads every `use` declaration and every
//! `crate::…`, `super::…` and `self::…` path in `synth/**/*.rs` (comments and string literals stripped
//! first), resolves each to the file it names (through `pub use` re-exports), and checks:
//! - every edge between two top-level modules is allowed by the table (a failure names the file, the line
//!   and the forbidden edge);
//! - there is no import cycle between files, nor between top-level modules (a failure lists each cycle).
//!
//! It reads files only (no compile), so it runs in milliseconds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

// ---- source text ------------------------------------------------------------------------------------

/// `text` with comments and the contents of string and character literals replaced by spaces; line
/// breaks are kept, so line numbers stay.
fn strip_code(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        let after_ident = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            // Block comments nest in Rust.
            let mut depth = 0usize;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(&c, i).filter(|_| !after_ident) {
            // r"…", r#"…"#, br"…": no escapes; ends at `"` followed by the same number of `#`.
            let open = c[i..].iter().position(|&ch| ch == '"').expect("raw string has a quote") + i;
            out.extend(c[i..=open].iter());
            i = open + 1;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|h| c.get(i + h) == Some(&'#')) {
                    out.push('"');
                    out.extend(std::iter::repeat_n('#', hashes));
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            if i < c.len() {
                out.push('"');
                i += 1;
            }
        } else if c[i] == '\'' && (next == Some('\\') || c.get(i + 2) == Some(&'\'')) {
            // A character literal ('a', '\n', '\u{1F}', '\''); a lifetime ('a) has no closing quote.
            let start = i;
            i += if next == Some('\\') { 3 } else { 2 };
            while i < c.len() && c[i] != '\'' && c[i] != '\n' {
                i += 1;
            }
            out.push('\'');
            out.extend(std::iter::repeat_n(' ', i - start - 1));
            if i < c.len() && c[i] == '\'' {
                out.push('\'');
                i += 1;
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The number of `#` of a raw string literal starting at `i` (`r"`, `r#"`, `br##"`, …).
fn raw_string_start(c: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if c.get(j) == Some(&'b') {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = c[j..].iter().take_while(|&&ch| ch == '#').count();
    (c.get(j + hashes) == Some(&'"')).then_some(hashes)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// `::`
    Path,
    Punct(char),
}

/// Tokens of stripped code with their 1-based line.
fn tokens(code: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(c[start..i].iter().collect()), line));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::Path, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

// ---- imports of one file ----------------------------------------------------------------------------

/// A path one file names, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RawPath {
    line: usize,
    /// Inline modules (`mod tests { … }`) around the path, outermost first.
    scope: Vec<String>,
    /// The segments as written (`crate`, `super`, `self` or a name first).
    segments: Vec<String>,
    /// From a `use` declaration (else an inline path in code).
    from_use: bool,
    /// A `pub use` (any visibility): the name it is known by in the file's module.
    reexport_as: Option<String>,
}

/// What one file declares and names.
#[derive(Debug, Default)]
struct FileScan {
    paths: Vec<RawPath>,
    /// Inline modules with bodies (`mod tests { … }`), as scopes.
    inline_modules: Vec<Vec<String>>,
}

fn ident(toks: &[(Tok, usize)], j: usize) -> Option<&str> {
    match toks.get(j) {
        Some((Tok::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    }
}

fn is_punct(toks: &[(Tok, usize)], j: usize, p: char) -> bool {
    matches!(toks.get(j), Some((Tok::Punct(q), _)) if *q == p)
}

fn is_path_sep(toks: &[(Tok, usize)], j: usize) -> bool {
    matches!(toks.get(j), Some((Tok::Path, _)))
}

/// Whether the `use` at `j` is a `pub` or `pub(…)` one.
fn is_pub_use(toks: &[(Tok, usize)], j: usize) -> bool {
    if j >= 1 && ident(toks, j - 1) == Some("pub") {
        return true;
    }
    if j >= 1 && is_punct(toks, j - 1, ')') {
        let open = (0..j - 1).rev().find(|&k| is_punct(toks, k, '('));
        return open.is_some_and(|k| k >= 1 && ident(toks, k - 1) == Some("pub"));
    }
    false
}

/// Reads the use tree at `j` (after `use`, or after a `::` inside one) into `out` as (path, name it binds).
fn use_tree(toks: &[(Tok, usize)], j: &mut usize, prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) {
    if is_punct(toks, *j, '{') {
        *j += 1;
        while *j < toks.len() && !is_punct(toks, *j, '}') {
            use_tree(toks, j, prefix, out);
            if is_punct(toks, *j, ',') {
                *j += 1;
            } else if !is_punct(toks, *j, '}') {
                break;
            }
        }
        *j += 1;
        return;
    }
    if is_punct(toks, *j, '*') {
        *j += 1;
        out.push((prefix.to_vec(), None));
        return;
    }
    let Some(name) = ident(toks, *j) else {
        return;
    };
    let mut path = prefix.to_vec();
    path.push(name.to_string());
    *j += 1;
    if is_path_sep(toks, *j) {
        *j += 1;
        use_tree(toks, j, &path, out);
        return;
    }
    let mut bound = name.to_string();
    if ident(toks, *j) == Some("as") {
        bound = ident(toks, *j + 1).unwrap_or("_").to_string();
        *j += 2;
    }
    if path.len() == 1 && name == "self" {
        // `use super::{self}` binds the prefix itself.
        path.pop();
    } else if name == "self" {
        path.pop();
        bound = path.last().cloned().unwrap_or_default();
    }
    out.push((path, Some(bound)));
}

/// The imports and inline paths of one file's source text.
fn scan_file(text: &str) -> FileScan {
    let toks = tokens(&strip_code(text));
    let mut scan = FileScan::default();
    let mut depth = 0usize;
    // Inline modules open: (name, brace depth inside them).
    let mut mods: Vec<(String, usize)> = Vec::new();
    let scope = |mods: &[(String, usize)]| mods.iter().map(|m| m.0.clone()).collect::<Vec<_>>();
    let mut j = 0;
    while j < toks.len() {
        let line = toks[j].1;
        match &toks[j].0 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if mods.last().is_some_and(|m| m.1 == depth) {
                    mods.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(w) if w == "mod" => {
                if let (Some(name), true) = (ident(&toks, j + 1), is_punct(&toks, j + 2, '{')) {
                    mods.push((name.to_string(), depth + 1));
                    scan.inline_modules.push(scope(&mods));
                    depth += 1;
                    j += 3;
                    continue;
                }
            }
            Tok::Ident(w) if w == "use" => {
                let reexport = is_pub_use(&toks, j);
                let mut k = j + 1;
                if is_path_sep(&toks, k) {
                    // `use ::name`: an external crate.
                    j = k;
                    continue;
                }
                let mut found = Vec::new();
                use_tree(&toks, &mut k, &[], &mut found);
                for (segments, bound) in found {
                    scan.paths.push(RawPath {
                        line,
                        scope: scope(&mods),
                        segments,
                        from_use: true,
                        reexport_as: if reexport { bound } else { None },
                    });
                }
                j = k;
                continue;
            }
            Tok::Ident(w) if is_path_sep(&toks, j + 1) && ident(&toks, j + 2).is_some() => {
                let prefixed = j >= 1 && (is_path_sep(&toks, j - 1) || is_punct(&toks, j - 1, '$'));
                if !prefixed {
                    let mut segments = vec![w.clone()];
                    let mut k = j + 1;
                    while is_path_sep(&toks, k) {
                        let Some(s) = ident(&toks, k + 1) else { break };
                        segments.push(s.to_string());
                        k += 2;
                    }
                    scan.paths.push(RawPath {
                        line,
                        scope: scope(&mods),
                        segments,
                        from_use: false,
                        reexport_as: None,
                    });
                    j = k;
                    continue;
                }
            }
            _ => {}
        }
        j += 1;
    }
    scan
}

// ---- the crate's module tree and its edges ----------------------------------------------------------

type ModPath = Vec<String>;

/// One resolved import.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Edge {
    /// File (relative to the repository root) and line of the path.
    file: String,
    line: usize,
    /// Module of the file and module the path resolves to.
    from: ModPath,
    to: ModPath,
    /// The file `to` lives in.
    to_file: String,
    /// The path as written.
    written: String,
    /// A `pub use`: the name is forwarded (checked against the table, but not a dependency of the file's
    /// code, so not an edge of the file graph).
    reexport: bool,
}

/// The crate's files: module path → (file, scan).
struct Crate {
    files: BTreeMap<ModPath, (String, FileScan)>,
    /// Every module, including inline ones, with the file that holds it.
    modules: BTreeMap<ModPath, String>,
    /// The names of the `#[macro_export]` macros (paths `crate::name` name no module).
    exported_macros: BTreeSet<String>,
}

/// Module path of a file under the crate's source directory (`app/run.rs` → [app, run]; `rule/mod.rs`
/// → [rule]; `lib.rs` → []); None for the binary root `main.rs`.
fn module_of(rel: &Path) -> Option<ModPath> {
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    if parts.is_empty() && stem == "main" {
        return None;
    }
    if !(parts.is_empty() && stem == "lib") && stem != "mod" {
        parts.push(stem.to_string());
    }
    Some(parts)
}

impl Crate {
    /// Builds the module tree from (path relative to the source directory, display name, text) triples.
    fn from_sources(sources: Vec<(PathBuf, String, String)>) -> Crate {
        let mut files = BTreeMap::new();
        let mut modules = BTreeMap::new();
        let exported = regex::Regex::new(r"#\[macro_export\]\s*macro_rules!\s*(\w+)").unwrap();
        let exported_macros =
            sources.iter().flat_map(|(_, _, t)| exported.captures_iter(t).map(|c| c[1].to_string())).collect();
        for (rel, shown, text) in sources {
            let Some(module) = module_of(&rel) else { continue };
            let scan = scan_file(&text);
            modules.insert(module.clone(), shown.clone());
            for inner in &scan.inline_modules {
                modules.insert([module.clone(), inner.clone()].concat(), shown.clone());
            }
            files.insert(module, (shown, scan));
        }
        Crate { files, modules, exported_macros }
    }

    /// (path relative to `src_dir`, display name, text) of every `.rs` file below `src_dir`.
    fn sources(src_dir: &Path, shown_prefix: &str) -> Vec<(PathBuf, String, String)> {
        let mut sources = Vec::new();
        let mut stack = vec![src_dir.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let rel = path.strip_prefix(src_dir).unwrap().to_path_buf();
                    let text = std::fs::read_to_string(&path).unwrap();
                    let shown = format!("{shown_prefix}{}", rel.display());
                    sources.push((rel, shown, text));
                }
            }
        }
        sources
    }

    /// The absolute module path a raw path names (None: an external crate, std, or a local item).
    fn absolute(&self, current: &ModPath, raw: &RawPath) -> Option<Vec<String>> {
        let segs = &raw.segments;
        match segs.first()?.as_str() {
            "crate" => Some(segs[1..].to_vec()),
            "self" => Some([current.clone(), segs[1..].to_vec()].concat()),
            "super" => {
                let mut base = current.clone();
                let mut rest = &segs[..];
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                Some([base, rest.to_vec()].concat())
            }
            first => {
                let child = [current.clone(), vec![first.to_string()]].concat();
                self.modules.contains_key(&child).then(|| [current.clone(), segs.to_vec()].concat())
            }
        }
    }

    /// The module an absolute path lands in, following `pub use` re-exports (e.g. `crate::rule::Rule`
    /// → `rule::ir`); None when it names no module of the crate.
    fn resolve(&self, abs: &[String], hops: usize) -> Option<ModPath> {
        let longest = (0..=abs.len()).rev().find(|&n| self.modules.contains_key(&abs[..n]))?;
        let module = abs[..longest].to_vec();
        let Some(next) = abs.get(longest) else { return Some(module) };
        if hops < 8 {
            if let Some((_, scan)) = self.files.get(&module) {
                let reexport = scan.paths.iter().find(|p| p.scope.is_empty() && p.reexport_as.as_ref() == Some(next));
                if let Some(target) = reexport.and_then(|p| self.absolute(&module, p)) {
                    let rest = &abs[longest + 1..];
                    if let Some(found) = self.resolve(&[target, rest.to_vec()].concat(), hops + 1) {
                        return Some(found);
                    }
                }
            }
        }
        Some(module).filter(|m| !m.is_empty())
    }

    /// Every import of every file, resolved (paths within one file are left out).
    fn edges(&self) -> (Vec<Edge>, Vec<String>) {
        let mut edges = Vec::new();
        let mut unresolved = Vec::new();
        for (module, (file, scan)) in &self.files {
            if module.is_empty() {
                continue; // lib.rs: module declarations and re-exports only
            }
            for raw in &scan.paths {
                let current = [module.clone(), raw.scope.clone()].concat();
                let Some(abs) = self.absolute(&current, raw) else { continue };
                let written = raw.segments.join("::");
                match self.resolve(&abs, 0) {
                    Some(to) => {
                        let to_file = self.modules[&to].clone();
                        if to_file != *file {
                            edges.push(Edge {
                                file: file.clone(),
                                line: raw.line,
                                from: module.clone(),
                                to,
                                to_file,
                                written,
                                reexport: raw.reexport_as.is_some(),
                            });
                        }
                    }
                    // A `#[macro_export]` macro lives at the crate root, outside every module.
                    None if raw.segments.len() == 2 && self.exported_macros.contains(&raw.segments[1]) => {}
                    None if raw.segments[0] == "crate" => {
                        unresolved.push(format!("{file}:{}: `{written}` names no module of the crate", raw.line))
                    }
                    None => {}
                }
            }
        }
        (edges, unresolved)
    }
}

// ---- the layering table ------------------------------------------------------------------------------

/// What a module may import: other top-level modules (or submodules such as `rule::cmd`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Allowed {
    /// `any stage`: every module except those listed in `except`.
    any: bool,
    modules: BTreeSet<String>,
}

/// The table: module → what it may import; the row `*` lists what every module may import.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Table {
    rows: BTreeMap<String, Allowed>,
}

const TABLE_HEADING: &str = "Who may import whom";
/// Modules that `any stage` does not cover (they are not stages).
const NOT_STAGES: [&str; 1] = ["cli"];

/// Reads the markdown table (`| module | may import |`) after the line containing [`TABLE_HEADING`].
/// Cells name modules in backticks; `—` (or nothing) means no other module; `any stage` means every
/// module but `cli`. Text outside backticks, and everything in parentheses, is commentary.
fn read_table(markdown: &str) -> Result<Table, String> {
    let start = markdown.find(TABLE_HEADING).ok_or(format!("no \"{TABLE_HEADING}\" section"))?;
    let lines = markdown[start..].lines().skip(1).skip_while(|l| !l.trim_start().starts_with('|'));
    let mut table = Table::default();
    let mut seen_header = false;
    for (n, line) in lines.enumerate() {
        let line = line.trim();
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() != 2 {
            return Err(format!("table row {} has {} cells, expected 2: {line}", n + 1, cells.len()));
        }
        if !seen_header {
            if cells[0] != "module" || cells[1] != "may import" {
                return Err(format!("the table's header must be `| module | may import |`, found: {line}"));
            }
            seen_header = true;
            continue;
        }
        if cells.iter().all(|c| c.chars().all(|ch| matches!(ch, '-' | ':' | ' '))) {
            continue; // the |---|---| line
        }
        let (left, right) = (without_parentheses(cells[0]), without_parentheses(cells[1]));
        let names = backticked(&left);
        if names.is_empty() {
            return Err(format!("table row `{line}`: name the module(s) in backticks"));
        }
        let allowed = Allowed { any: right.contains("any stage"), modules: backticked(&right).into_iter().collect() };
        for name in names {
            if table.rows.insert(name.clone(), allowed.clone()).is_some() {
                return Err(format!("module `{name}` has two rows in the table"));
            }
        }
    }
    if !seen_header {
        return Err(format!("no `| module | may import |` table after \"{TABLE_HEADING}\""));
    }
    Ok(table)
}

/// `cell` without its parenthesized remarks.
fn without_parentheses(cell: &str) -> String {
    let mut depth = 0usize;
    let mut out = String::new();
    for ch in cell.chars() {
        match ch {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(ch),
            _ => {}
        }
    }
    out
}

/// The words in backticks in `cell`.
fn backticked(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

impl Table {
    /// Whether module `from` (top-level) may import the module at `to`.
    fn allows(&self, from: &str, to: &[String]) -> bool {
        if to.first().is_some_and(|t| t == from) {
            return true;
        }
        let matches = |allowed: &Allowed| {
            (allowed.any && !NOT_STAGES.contains(&to[0].as_str()))
                || allowed.modules.iter().any(|m| {
                    let parts: Vec<&str> = m.split("::").collect();
                    parts.len() <= to.len() && parts.iter().zip(to).all(|(a, b)| a == b)
                })
        };
        self.rows.get(from).is_some_and(matches) || self.rows.get("*").is_some_and(matches)
    }

    /// One line per edge the table forbids: `file:line: a imports b (written): …`.
    fn breaches(&self, edges: &[Edge]) -> Vec<String> {
        let mut out = Vec::new();
        for e in edges {
            let from = &e.from[0];
            if !self.allows(from, &e.to) {
                let allowed = self.rows.get(from).map_or("no row in the table".to_string(), |a| {
                    let list: Vec<&str> = a.modules.iter().map(String::as_str).collect();
                    if a.any {
                        format!("any stage but {}", NOT_STAGES.map(|m| format!("`{m}`")).join(", "))
                    } else if list.is_empty() {
                        "no other module".to_string()
                    } else {
                        list.join(", ")
                    }
                });
                out.push(format!(
                    "{}:{}: `{from}` imports `{}` (`{}`); ARCHITECTURE.md allows `{from}` to import: {allowed}",
                    e.file,
                    e.line,
                    e.to.join("::"),
                    e.written
                ));
            }
        }
        out
    }
}

// ---- cycles ------------------------------------------------------------------------------------------

/// The strongly connected components of more than one node (Tarjan), each with one cycle through its
/// first node as a witness; an edge from a node to itself is not a cycle. Sorted, so output is stable.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<(Vec<String>, Vec<String>)> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    let nodes: BTreeSet<&str> =
        graph.iter().flat_map(|(k, vs)| std::iter::once(k.as_str()).chain(vs.iter().map(String::as_str))).collect();
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    let mut found = s.found;
    found.sort();
    found.into_iter().map(|c| (witness(graph, &c), c)).collect()
}

/// A shortest cycle from the first node of `component` back to it, inside the component (breadth first).
fn witness(graph: &BTreeMap<String, BTreeSet<String>>, component: &[String]) -> Vec<String> {
    let inside: BTreeSet<&str> = component.iter().map(String::as_str).collect();
    let start = component[0].as_str();
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        let next = graph.get(v).into_iter().flatten().map(String::as_str);
        for w in next.filter(|w| inside.contains(w) && *w != v) {
            if w == start {
                let mut path = vec![start.to_string()];
                let mut at = v;
                while at != start {
                    path.push(at.to_string());
                    at = parent[at];
                }
                path.push(start.to_string());
                let len = path.len();
                path[1..len - 1].reverse();
                return path;
            }
            if !parent.contains_key(w) {
                parent.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    component.to_vec()
}

/// One line per cycle: its members and a witness loop.
fn cycle_report(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    cycles(graph)
        .into_iter()
        .map(|(loop_, members)| format!("{{{}}}: {}", members.join(", "), loop_.join(" → ")))
        .collect()
}

fn file_graph(edges: &[Edge]) -> BTreeMap<String, BTreeSet<String>> {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // A module's root file (`mod.rs`) declares its submodules and may use them; a submodule using its
    // parent's types is then no cycle. Every other import between files must be acyclic.
    let into_own_submodule = |e: &Edge| e.to.len() > e.from.len() && e.to.starts_with(&e.from);
    for e in edges.iter().filter(|e| !e.reexport && !into_own_submodule(e)) {
        g.entry(e.file.clone()).or_default().insert(e.to_file.clone());
    }
    g
}

fn module_graph(edges: &[Edge]) -> BTreeMap<String, BTreeSet<String>> {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in edges.iter().filter(|e| e.from[0] != e.to[0]) {
        g.entry(e.from[0].clone()).or_default().insert(e.to[0].clone());
    }
    g
}

// ---- the crate -------------------------------------------------------------------------------------

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace's source directories: the `synth` binary package and each stage crate, with the module its
/// crate root stands for in the one module tree this test checks (the summary crate is the module
/// `summary`; the other crates' modules keep their names, as they had in one crate).
const ROOTS: [(&str, &str); 7] = [
    ("synth", ""),
    ("crates/base/src", ""),
    ("crates/core/src", ""),
    ("crates/measure/src", ""),
    ("crates/engine/src", ""),
    ("crates/search/src", ""),
    ("crates/summary/src", "summary"),
];

/// A file's text with paths into the workspace's crates written as paths of the one module tree: the crate
/// graph (Cargo.toml) says which crate may depend on which; the table says it per module, inside a crate too.
fn one_tree(text: &str, module: &str) -> String {
    let own = regex::Regex::new(r"(^|[^$\w])crate::").unwrap();
    let text = if module.is_empty() {
        text.to_string()
    } else {
        own.replace_all(text, format!("${{1}}crate::{module}::")).into_owned()
    };
    let summary = regex::Regex::new(r"\bsynth_summary::").unwrap();
    let text = summary.replace_all(&text, "crate::summary::");
    let other = regex::Regex::new(r"\bsynth_(base|core|measure|engine|search)::").unwrap();
    other.replace_all(&text, "crate::").into_owned()
}

fn the_crate() -> &'static Crate {
    static CRATE: std::sync::OnceLock<Crate> = std::sync::OnceLock::new();
    CRATE.get_or_init(|| {
        let mut sources = Vec::new();
        for (dir, module) in ROOTS {
            for (rel, shown, text) in Crate::sources(&repo().join(dir), &format!("{dir}/")) {
                let rel = if module.is_empty() { rel } else { Path::new(module).join(rel) };
                let rel = if module.is_empty() || !rel.ends_with("lib.rs") {
                    rel
                } else {
                    PathBuf::from(format!("{module}.rs"))
                };
                sources.push((rel, shown, one_tree(&text, module)));
            }
        }
        Crate::from_sources(sources)
    })
}

fn the_table() -> Table {
    let text = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    read_table(&text).unwrap_or_else(|e| panic!("ARCHITECTURE.md: {e}"))
}

/// The top-level modules lib.rs declares.
fn top_modules(krate: &Crate) -> BTreeSet<String> {
    krate.modules.keys().filter(|m| m.len() == 1).map(|m| m[0].clone()).collect()
}

#[test]
fn every_import_is_allowed_by_the_architecture_table() {
    let krate = the_crate();
    let table = the_table();
    let (edges, unresolved) = krate.edges();
    assert!(edges.len() > 300, "only {} imports found: the scanner is broken", edges.len());
    assert!(unresolved.is_empty(), "paths that name no module:\n{}", unresolved.join("\n"));
    let breaches = table.breaches(&edges);
    assert!(breaches.is_empty(), "imports that ARCHITECTURE.md's layering table forbids:\n{}", breaches.join("\n"));
}

#[test]
fn the_table_has_one_row_per_module_and_names_only_modules() {
    let krate = the_crate();
    let table = the_table();
    let modules = top_modules(krate);
    let missing: Vec<&String> = modules.iter().filter(|m| !table.rows.contains_key(*m)).collect();
    assert!(missing.is_empty(), "modules without a row in ARCHITECTURE.md's layering table: {missing:?}");
    let mut unknown = Vec::new();
    for (row, allowed) in &table.rows {
        if row != "*" && !modules.contains(row) {
            unknown.push(row.clone());
        }
        for m in &allowed.modules {
            let path: ModPath = m.split("::").map(str::to_string).collect();
            if !krate.modules.contains_key(&path) {
                unknown.push(m.clone());
            }
        }
    }
    assert!(unknown.is_empty(), "the layering table names modules the crate does not have: {unknown:?}");
}

/// `println!`, `print!`, `eprintln!`, `eprint!` and `dbg!` panic when their stream is closed (`synth ... 2>&1
/// | head -1`); the crate prints through `outln!`/`out!` and `errln!`/`err!` (`synth/stdout.rs`) instead.
#[test]
fn the_crate_prints_only_through_its_closed_stream_safe_macros() {
    let mut found = Vec::new();
    let mut files = 0;
    let mut stack: Vec<PathBuf> = ROOTS.iter().map(|(dir, _)| repo().join(dir)).collect();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            files += 1;
            let code = strip_code(&std::fs::read_to_string(&path).unwrap());
            let toks = tokens(&code);
            for (j, (tok, line)) in toks.iter().enumerate() {
                if let Tok::Ident(name) = tok {
                    let std_macro = matches!(name.as_str(), "println" | "print" | "eprintln" | "eprint" | "dbg");
                    if std_macro && is_punct(&toks, j + 1, '!') {
                        found.push(format!("{}:{line}: {name}!", path.strip_prefix(repo()).unwrap().display()));
                    }
                }
            }
        }
    }
    assert!(files > 50, "only {files} source files found: the scan is broken");
    assert!(found.is_empty(), "std print macros (use outln!/out!/errln!/err!):\n{}", found.join("\n"));
}

#[test]
fn the_print_scan_finds_std_macros_outside_comments_and_strings() {
    let code = strip_code("// println!(\"a\")\nlet s = \"eprintln!(x)\";\neprintln!(\"b\");\n");
    let toks = tokens(&code);
    let hits: Vec<usize> = toks
        .iter()
        .enumerate()
        .filter(|(j, (t, _))| {
            matches!(t, Tok::Ident(n) if n == "eprintln" || n == "println") && is_punct(&toks, j + 1, '!')
        })
        .map(|(_, (_, line))| *line)
        .collect();
    assert_eq!(hits, vec![3]);
}

#[test]
fn no_import_cycle_between_files() {
    let (edges, _) = the_crate().edges();
    let report = cycle_report(&file_graph(&edges));
    assert!(report.is_empty(), "import cycles between files (members: a loop through them):\n{}", report.join("\n"));
}

#[test]
fn no_import_cycle_between_modules() {
    let (edges, _) = the_crate().edges();
    let report = cycle_report(&module_graph(&edges));
    assert!(report.is_empty(), "import cycles between modules (members: a loop through them):\n{}", report.join("\n"));
}

// ---- the checker on hand-made inputs ------------------------------------------------------------------

fn graph(edges: &[(&str, &str)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, b) in edges {
        g.entry(a.to_string()).or_default().insert(b.to_string());
    }
    g
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn cycle_finder_finds_a_three_cycle_with_its_loop() {
    let g = graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")]);
    assert_eq!(cycles(&g), vec![(strings(&["a", "b", "c", "a"]), strings(&["a", "b", "c"]))]);
}

#[test]
fn cycle_finder_finds_two_disjoint_cycles() {
    let g = graph(&[("x", "y"), ("y", "x"), ("p", "q"), ("q", "r"), ("r", "p"), ("y", "p")]);
    let found = cycles(&g);
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found[0], (strings(&["p", "q", "r", "p"]), strings(&["p", "q", "r"])));
    assert_eq!(found[1], (strings(&["x", "y", "x"]), strings(&["x", "y"])));
}

#[test]
fn cycle_finder_ignores_self_imports_and_acyclic_graphs() {
    assert!(cycles(&graph(&[("a", "a"), ("a", "b"), ("b", "b"), ("b", "c")])).is_empty());
    assert!(cycles(&graph(&[("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])).is_empty());
}

#[test]
fn cycle_witness_is_a_shortest_loop_inside_the_component() {
    // a → b → c → d → a and the shortcut b → a: the loop through `a` is a → b → a.
    let g = graph(&[("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"), ("b", "a")]);
    assert_eq!(cycles(&g), vec![(strings(&["a", "b", "a"]), strings(&["a", "b", "c", "d"]))]);
}

const SMALL_TABLE: &str = "\
## Layers

Who may import whom (the test reads this table):

| module | may import |
|---|---|
| `*` | `diag` |
| `cli` | `app`, `rule::cmd` |
| `app` | any stage |
| `diag`, `catalog` | — |
| `rule` | `catalog` (its names, not `app`) |

After the table.
| not | read |
";

#[test]
fn table_reader_reads_rows_lists_and_the_any_row() {
    let t = read_table(SMALL_TABLE).unwrap();
    assert_eq!(t.rows.keys().collect::<Vec<_>>(), ["*", "app", "catalog", "cli", "diag", "rule"]);
    assert_eq!(t.rows["cli"].modules, ["app", "rule::cmd"].iter().map(|s| s.to_string()).collect());
    assert!(t.rows["app"].any && t.rows["app"].modules.is_empty());
    assert!(t.rows["catalog"].modules.is_empty() && !t.rows["catalog"].any);
    let path = |s: &str| s.split("::").map(str::to_string).collect::<Vec<_>>();
    assert!(t.allows("rule", &path("catalog::names")));
    assert!(t.allows("rule", &path("diag")), "the `*` row applies to every module");
    assert!(t.allows("rule", &path("rule::ir")), "a module imports itself freely");
    assert!(!t.allows("rule", &path("app::run")));
    assert!(t.allows("cli", &path("rule::cmd")));
    assert!(!t.allows("cli", &path("rule::ir")), "`rule::cmd` does not open the rest of `rule`");
    assert!(t.allows("app", &path("rule::ir")));
    assert!(!t.allows("app", &path("cli")), "`any stage` does not cover `cli`");
    assert!(!t.allows("nowhere", &path("catalog")), "a module without a row may import only the `*` row");
}

#[test]
fn table_reader_rejects_malformed_tables() {
    assert!(read_table("no heading here").is_err());
    assert!(read_table("Who may import whom:\n\n| a | b |\n|---|---|\n").unwrap_err().contains("header"));
    let twice = "Who may import whom\n| module | may import |\n|---|---|\n| `a` | — |\n| `a` | `b` |\n";
    assert!(read_table(twice).unwrap_err().contains("two rows"));
    let bare = "Who may import whom\n| module | may import |\n|---|---|\n| a | `b` |\n";
    assert!(read_table(bare).unwrap_err().contains("backticks"));
    let three = "Who may import whom\n| module | may import |\n|---|---|\n| `a` | `b` | `c` |\n";
    assert!(read_table(three).unwrap_err().contains("3 cells"));
}

/// A small crate from (file, text) pairs.
fn small_crate(files: &[(&str, &str)]) -> Crate {
    Crate::from_sources(files.iter().map(|(f, t)| (PathBuf::from(f), format!("synth/{f}"), t.to_string())).collect())
}

#[test]
fn scanner_reads_use_trees_inline_paths_and_skips_comments_and_strings() {
    let text = r##"
//! Docs naming crate::app::run, which is not an import.
use crate::{catalog::Catalog, rule::{self, ir::Rule as R}};
use super::sibling::*;
pub(crate) use self::inner::Thing;
use serde::Deserialize;
fn f() {
    let s = "crate::app::hidden";
    let r = r#"super::app"#;
    let c = '"'; let l: &'static str = "x";
    /* crate::app::in_block /* nested */ crate::app::still */
    crate::table::read(1); $crate::macro_path::x();
    let _ = x::<crate::shapes::Spec>();
}
"##;
    let scan = scan_file(text);
    let got: Vec<(usize, String, bool, Option<String>)> =
        scan.paths.iter().map(|p| (p.line, p.segments.join("::"), p.from_use, p.reexport_as.clone())).collect();
    let want = vec![
        (3, "crate::catalog::Catalog".to_string(), true, None),
        (3, "crate::rule".to_string(), true, None),
        (3, "crate::rule::ir::Rule".to_string(), true, None),
        (4, "super::sibling".to_string(), true, None),
        (5, "self::inner::Thing".to_string(), true, Some("Thing".to_string())),
        (6, "serde::Deserialize".to_string(), true, None),
        (12, "crate::table::read".to_string(), false, None),
        (13, "crate::shapes::Spec".to_string(), false, None),
    ];
    assert_eq!(got, want);
}

#[test]
fn a_stage_importing_app_is_caught_with_file_and_line() {
    let krate = small_crate(&[
        ("lib.rs", "pub mod app;\npub mod rule;\npub mod catalog;\npub use catalog::Catalog;\n"),
        ("app/mod.rs", "pub mod run;\n"),
        ("app/run.rs", "use crate::rule::Rule;\npub fn run() {}\n"),
        ("rule/mod.rs", "pub mod ir;\npub use ir::Rule;\n"),
        ("rule/ir.rs", "use crate::Catalog;\n\nfn f() { crate::app::run::run(); }\npub struct Rule;\n"),
        ("catalog/mod.rs", "pub struct Catalog;\n"),
    ]);
    let table = read_table(SMALL_TABLE).unwrap();
    let (edges, unresolved) = krate.edges();
    assert!(unresolved.is_empty(), "{unresolved:?}");
    let shown: Vec<String> = edges.iter().map(|e| format!("{} {} {}", e.file, e.line, e.to_file)).collect();
    assert_eq!(
        shown,
        [
            "synth/app/run.rs 1 synth/rule/ir.rs",
            "synth/rule/mod.rs 2 synth/rule/ir.rs",
            "synth/rule/ir.rs 1 synth/catalog/mod.rs",
            "synth/rule/ir.rs 3 synth/app/run.rs",
        ],
        "re-exports resolve to the defining file"
    );
    assert_eq!(
        table.breaches(&edges),
        ["synth/rule/ir.rs:3: `rule` imports `app::run` (`crate::app::run::run`); ARCHITECTURE.md allows `rule` to \
          import: catalog"]
    );
    assert_eq!(
        cycle_report(&file_graph(&edges)),
        ["{synth/app/run.rs, synth/rule/ir.rs}: synth/app/run.rs → synth/rule/ir.rs → synth/app/run.rs"]
    );
    assert_eq!(cycle_report(&module_graph(&edges)), ["{app, rule}: app → rule → app"]);
}

#[test]
fn super_paths_and_inline_modules_resolve_against_the_right_module() {
    let krate = small_crate(&[
        ("lib.rs", "pub mod app;\n"),
        ("app/mod.rs", "pub mod a;\npub mod b;\npub fn shared() {}\n"),
        ("app/a.rs", "pub fn f() { super::b::g(); }\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::shared;\n}\n"),
        ("app/b.rs", "pub fn g() {}\n"),
    ]);
    let (edges, unresolved) = krate.edges();
    assert!(unresolved.is_empty(), "{unresolved:?}");
    let shown: Vec<String> = edges.iter().map(|e| format!("{}:{} {}", e.file, e.line, e.to.join("::"))).collect();
    // `use super::*` inside `mod tests` names the file's own module: not an edge.
    assert_eq!(shown, ["synth/app/a.rs:1 app::b", "synth/app/a.rs:5 app"]);
}
