//! The built-in knob proposer: needs no model. A kernel source declares its tuning knobs in line
//! comments,
//!
//! ```text
//! // synth:knob BLOCK 64 128 256 512 1024
//! // synth:knob VEC 1 2 4 8
//! #define BLOCK 64
//! constexpr int VEC = 1;
//! ```
//!
//! (`#` comments work too, for scripts), and each knob names exactly one definition — `#define NAME
//! VALUE`, `[static] [inline] constexpr|const TYPE NAME = VALUE;` or a script assignment `NAME=VALUE` —
//! whose value is one of the listed ones. A candidate is the source with those values replaced and
//! nothing else changed, so the task's build → run → measure loop scores knob settings.
//!
//! The search is a local search over the grid, driven only by the request's history (so a run is
//! deterministic and resumes identically): candidates are the coordinate neighbours (one knob one step
//! along its list) of the best setting, then of the next best, ...; then every untried setting by its
//! distance from the best. A setting already in the history is never proposed again: a build error, a
//! mismatch or a timeout there is the reflection that excludes it. Offspring slot `s` of an iteration
//! takes the `s`-th candidate, so parallel slots never repeat one another. When nothing is left the
//! proposer answers [`ProposeError::Exhausted`].

use crate::engine::{ProposalRequest, ProposeError, Proposer};
use regex::Regex;
use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, LazyLock};
use synth_base::diag::Located;

/// Most knobs one source may declare.
pub const MAX_KNOBS: usize = 16;
/// Most values one knob may list.
pub const MAX_VALUES: usize = 64;
/// Longest knob name and value.
const MAX_TOKEN: usize = 64;
/// Settings enumerated for the fallback beyond the neighbourhoods (larger grids skip it).
const MAX_GRID: usize = 1 << 16;

/// The marker that starts a knob declaration.
pub const MARKER: &str = "synth:knob";

/// A knob problem: the 1-based line when known, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnobError {
    pub line: Option<usize>,
    pub message: String,
}

impl KnobError {
    fn at(line: usize, message: impl Into<String>) -> Self {
        KnobError { line: Some(line + 1), message: message.into() }
    }

    /// The error located in `file` (for messages that name the source).
    pub fn located(&self, file: &str) -> Located {
        Located { line: self.line, ..Located::new(file.to_string(), self.message.clone()) }
    }
}

impl fmt::Display for KnobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "line {l}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for KnobError {}

/// One declared knob and where its value sits in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knob {
    pub name: String,
    pub values: Vec<String>,
    /// 0-based line of the declaration and of the definition.
    pub decl_line: usize,
    pub def_line: usize,
    /// Byte range of the value within the definition line.
    value_span: (usize, usize),
    /// Index of the source's value in `values`.
    pub current: usize,
}

/// The knobs of one source text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnobSpace {
    /// The source split at each `\n` (a line keeps its `\r`, and a text that ends in a newline ends in an
    /// empty line), so joining them with `\n` gives the source back byte for byte.
    lines: Vec<String>,
    pub knobs: Vec<Knob>,
}

/// A setting: one value index per knob.
pub type Setting = Vec<usize>;

static DECL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\s*(?://|#)\s*synth:knob(?:\s+(.*?))?\s*$").unwrap());
static TOKEN: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[A-Za-z0-9_.+-]+$").unwrap());
static IDENT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[A-Za-z_][A-Za-z0-9_]*$").unwrap());

/// The definition patterns of `name`; group 1 is the value.
fn definition_patterns(name: &str) -> [Regex; 3] {
    let n = regex::escape(name);
    let v = r"([A-Za-z0-9_.+-]+)";
    [
        Regex::new(&format!(r"^\s*#\s*define\s+{n}\s+{v}\s*(?://.*|/\*.*)?$")).unwrap(),
        Regex::new(&format!(
            r"^\s*(?:static\s+)?(?:inline\s+)?(?:constexpr|const)\s+[A-Za-z_][A-Za-z0-9_:]*(?:\s+[A-Za-z_][A-Za-z0-9_:]*)*\s+{n}\s*=\s*{v}\s*;.*$"
        ))
        .unwrap(),
        Regex::new(&format!(r"^\s*{n}\s*=\s*{v}\s*(?:#.*)?$")).unwrap(),
    ]
}

/// Reads the knob declarations and definitions of `text` (its line endings, `\n` or `\r\n`, are kept in
/// every render).
pub fn parse_knobs(text: &str) -> Result<KnobSpace, KnobError> {
    let lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    let mut knobs: Vec<Knob> = Vec::new();
    let mut decl_lines = HashSet::new();
    for (i, line) in lines.iter().enumerate() {
        if !line.contains(MARKER) {
            continue;
        }
        let knob = parse_declaration(i, line, &knobs)?;
        decl_lines.insert(i);
        if knobs.len() == MAX_KNOBS {
            return Err(KnobError::at(i, format!("more than {MAX_KNOBS} knobs; declare fewer")));
        }
        knobs.push(knob);
    }
    if knobs.is_empty() {
        return Err(KnobError {
            line: None,
            message: format!(
                "the source declares no knobs: add lines like `// {MARKER} BLOCK 128 256 512` next to `#define \
                 BLOCK 128`"
            ),
        });
    }
    for k in &mut knobs {
        find_definition(k, &lines, &decl_lines)?;
    }
    Ok(KnobSpace { lines, knobs })
}

/// The knob declared on line `i` (0-based), checked against the knobs declared before it (`earlier`); its
/// definition is found later.
fn parse_declaration(i: usize, line: &str, earlier: &[Knob]) -> Result<Knob, KnobError> {
    let Some(c) = DECL.captures(line) else {
        return Err(KnobError::at(
            i,
            format!(
                "`{MARKER}` must start a line comment of its own: `// {MARKER} NAME V1 V2 ...` (or `# {MARKER} ...`)"
            ),
        ));
    };
    let words: Vec<&str> = c.get(1).map(|m| m.as_str().split_whitespace().collect()).unwrap_or_default();
    let Some((name, values)) = words.split_first() else {
        return Err(KnobError::at(i, format!("the knob has no name: write `// {MARKER} NAME V1 V2 ...`")));
    };
    if !IDENT.is_match(name) || name.len() > MAX_TOKEN {
        return Err(KnobError::at(
            i,
            format!(
                "knob name \"{}\" is not an identifier (letters, digits, `_`; not starting with a digit)",
                esc(name)
            ),
        ));
    }
    if let Some(prev) = earlier.iter().find(|k| k.name == *name) {
        return Err(KnobError::at(
            i,
            format!("knob {name} is declared twice (first on line {}); keep one declaration", prev.decl_line + 1),
        ));
    }
    check_values(i, name, values)?;
    Ok(Knob {
        name: name.to_string(),
        values: values.iter().map(|v| v.to_string()).collect(),
        decl_line: i,
        def_line: 0,
        value_span: (0, 0),
        current: 0,
    })
}

/// A knob's values: two to [`MAX_VALUES`] distinct plain literals.
fn check_values(i: usize, name: &str, values: &[&str]) -> Result<(), KnobError> {
    if values.len() < 2 {
        return Err(KnobError::at(i, format!("knob {name} needs at least two values to choose from")));
    }
    if values.len() > MAX_VALUES {
        return Err(KnobError::at(i, format!("knob {name} lists {} values; at most {MAX_VALUES}", values.len())));
    }
    let mut seen = HashSet::new();
    for v in values {
        if !TOKEN.is_match(v) || v.len() > MAX_TOKEN {
            return Err(KnobError::at(
                i,
                format!(
                    "knob {name}: value \"{}\" is not a plain literal (letters, digits, `_ . + -`, at most \
                     {MAX_TOKEN} characters)",
                    esc(v)
                ),
            ));
        }
        if !seen.insert(*v) {
            return Err(KnobError::at(i, format!("knob {name} lists the value {v} twice")));
        }
    }
    Ok(())
}

fn find_definition(k: &mut Knob, lines: &[String], decl_lines: &HashSet<usize>) -> Result<(), KnobError> {
    let patterns = definition_patterns(&k.name);
    let mut found: Option<(usize, (usize, usize), String)> = None;
    for (i, line) in lines.iter().enumerate() {
        if decl_lines.contains(&i) {
            continue;
        }
        let Some(m) = patterns.iter().find_map(|p| p.captures(line)).and_then(|c| c.get(1)) else { continue };
        if let Some((first, _, _)) = &found {
            return Err(KnobError::at(
                i,
                format!("knob {} is defined on line {} and again here; keep one definition", k.name, first + 1),
            ));
        }
        found = Some((i, (m.start(), m.end()), m.as_str().to_string()));
    }
    let Some((line, span, value)) = found else {
        return Err(KnobError::at(
            k.decl_line,
            format!(
                "knob {0} has no definition: add `#define {0} {1}`, `constexpr int {0} = {1};` or `{0}={1}` on a \
                 line of its own",
                k.name, k.values[0]
            ),
        ));
    };
    let Some(current) = k.values.iter().position(|v| *v == value) else {
        return Err(KnobError::at(
            line,
            format!(
                "{} is {value} here, which is not one of the knob's values ({}); list it on line {} or change \
                 the definition",
                k.name,
                k.values.join(" "),
                k.decl_line + 1
            ),
        ));
    };
    k.def_line = line;
    k.value_span = span;
    k.current = current;
    Ok(())
}

/// Control characters and quotes escaped, so a hostile value prints on one line.
fn esc(s: &str) -> String {
    s.chars().flat_map(char::escape_debug).take(80).collect()
}

impl KnobSpace {
    /// The source's own setting.
    pub fn current(&self) -> Setting {
        self.knobs.iter().map(|k| k.current).collect()
    }

    /// The source with every knob set as `setting` says (index per knob); every other byte unchanged.
    pub fn render(&self, setting: &[usize]) -> String {
        let mut lines = self.lines.clone();
        for (k, &v) in self.knobs.iter().zip(setting) {
            let line = &mut lines[k.def_line];
            line.replace_range(k.value_span.0..k.value_span.1, &k.values[v]);
        }
        lines.join("\n")
    }

    /// `NAME=VALUE ...` of a setting.
    pub fn describe(&self, setting: &[usize]) -> String {
        self.knobs
            .iter()
            .zip(setting)
            .map(|(k, &v)| format!("{}={}", k.name, k.values[v]))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The settings one knob one step away along its list.
    pub fn neighbours(&self, setting: &[usize]) -> Vec<Setting> {
        let mut out = Vec::new();
        for (i, k) in self.knobs.iter().enumerate() {
            for step in [1isize, -1] {
                let v = setting[i] as isize + step;
                if v >= 0 && (v as usize) < k.values.len() {
                    let mut s = setting.to_vec();
                    s[i] = v as usize;
                    out.push(s);
                }
            }
        }
        out
    }

    /// Number of settings of the grid (saturating).
    pub fn grid_size(&self) -> usize {
        self.knobs.iter().fold(1usize, |n, k| n.saturating_mul(k.values.len()))
    }

    /// Every setting, in lexicographic order of value indices (only for grids up to [`MAX_GRID`]).
    fn all_settings(&self) -> Vec<Setting> {
        if self.grid_size() > MAX_GRID {
            return Vec::new();
        }
        let mut out = vec![Vec::new()];
        for k in &self.knobs {
            out =
                out.into_iter().flat_map(|s| (0..k.values.len()).map(move |v| [s.clone(), vec![v]].concat())).collect();
        }
        out
    }
}

/// Distance between settings: steps along each knob's list, summed.
fn distance(a: &[usize], b: &[usize]) -> usize {
    a.iter().zip(b).map(|(x, y)| x.abs_diff(*y)).sum()
}

/// The local-search proposer over a source's knobs.
#[derive(Debug, Clone)]
pub struct KnobProposer {
    /// Shared by clones: the source's lines are kept once, and no render of a setting is kept at all
    /// ([`KnobProposer::setting_of`] reads a text against the lines).
    space: Arc<KnobSpace>,
}

impl KnobProposer {
    /// Parses the knobs of `source` (the original kernel).
    pub fn new(source: &str) -> Result<Self, KnobError> {
        Ok(KnobProposer { space: Arc::new(parse_knobs(source)?) })
    }

    /// The knob space.
    pub fn space(&self) -> &KnobSpace {
        &self.space
    }

    /// The setting a candidate text is, when it is one of this source's renders: every line the source's
    /// own but the knobs' definitions, and each of those its own line with one of the knob's values.
    pub fn setting_of(&self, text: &str) -> Option<Setting> {
        let space = &self.space;
        let mut setting = space.current();
        let mut lines = text.split('\n');
        for (i, own) in space.lines.iter().enumerate() {
            let line = lines.next()?;
            let Some(k) = space.knobs.iter().position(|k| k.def_line == i) else {
                if line != own {
                    return None;
                }
                continue;
            };
            let knob = &space.knobs[k];
            let (from, to) = knob.value_span;
            let value = line.strip_prefix(&own[..from])?.strip_suffix(&own[to..])?;
            setting[k] = knob.values.iter().position(|v| v == value)?;
        }
        lines.next().is_none().then_some(setting)
    }

    /// The candidates for the next proposals, best first: the untried neighbours of each successful
    /// setting by score, then untried settings by distance from the best (or the original). The
    /// original's own setting is never a candidate: the loop measures the original itself.
    pub fn plan(&self, req: &ProposalRequest) -> Vec<Setting> {
        let mut tried: HashSet<Setting> = HashSet::from([self.space.current()]);
        let mut scored: Vec<(f64, usize, Setting)> = Vec::new();
        for a in req.history.iter().chain(req.parent.iter()) {
            if let Some(s) = self.setting_of(&a.candidate) {
                if let Some(score) = a.eval.score {
                    scored.push((score, a.id, s.clone()));
                }
                tried.insert(s);
            }
        }
        scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut plan: Vec<Setting> = Vec::new();
        let mut planned: HashSet<Setting> = HashSet::new();
        let mut push = |s: Setting, plan: &mut Vec<Setting>| {
            if !tried.contains(&s) && planned.insert(s.clone()) {
                plan.push(s);
            }
        };
        for (_, _, s) in &scored {
            for n in self.space.neighbours(s) {
                push(n, &mut plan);
            }
        }
        let anchor = scored.first().map(|x| x.2.clone()).unwrap_or_else(|| self.space.current());
        let mut rest: Vec<Setting> = self.space.all_settings();
        rest.sort_by_key(|s| distance(s, &anchor));
        for s in rest {
            push(s, &mut plan);
        }
        plan
    }
}

impl Proposer for KnobProposer {
    fn name(&self) -> String {
        "knobs".into()
    }

    fn propose(&self, req: &ProposalRequest) -> Result<String, ProposeError> {
        let plan = self.plan(req);
        match plan.get(req.offspring_index) {
            Some(s) => Ok(self.space.render(s)),
            None => Err(ProposeError::Exhausted(format!(
                "knob search exhausted: {} setting(s) left untried for {} offspring slot(s) (grid of {} over {})",
                plan.len(),
                req.offspring_index + 1,
                self.space.grid_size(),
                self.space.knobs.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Attempt, Evaluation};

    const SRC: &str = "// kernel\n// synth:knob BLOCK 64 128 256\n// synth:knob VEC 1 2 4\n#define BLOCK 64  // threads\nstatic constexpr int VEC = 2;\nint x = BLOCK * VEC;\n";

    fn err(text: &str) -> String {
        parse_knobs(text).unwrap_err().to_string()
    }

    #[test]
    fn parses_declarations_and_definitions() {
        let s = parse_knobs(SRC).unwrap();
        assert_eq!(s.knobs.len(), 2);
        assert_eq!(s.knobs[0].name, "BLOCK");
        assert_eq!(s.knobs[0].values, ["64", "128", "256"]);
        assert_eq!((s.knobs[0].decl_line, s.knobs[0].def_line, s.knobs[0].current), (1, 3, 0));
        assert_eq!((s.knobs[1].def_line, s.knobs[1].current), (4, 1));
        assert_eq!(s.current(), vec![0, 1]);
        assert_eq!(s.describe(&[2, 0]), "BLOCK=256 VEC=1");
        // Script form and guarded defines.
        let sh = parse_knobs("# synth:knob N 1 2\nN=2\necho $N\n").unwrap();
        assert_eq!(sh.current(), vec![1]);
        let g = parse_knobs("// synth:knob T 8 16\n#ifndef T\n#  define T 16\n#endif\n").unwrap();
        assert_eq!(g.knobs[0].def_line, 2);
    }

    #[test]
    fn render_changes_only_the_values() {
        let s = parse_knobs(SRC).unwrap();
        assert_eq!(s.render(&s.current()), SRC);
        let r = s.render(&[2, 0]);
        let expected = SRC.replace("#define BLOCK 64 ", "#define BLOCK 256 ").replace("VEC = 2;", "VEC = 1;");
        assert_eq!(r, expected);
        // The render parses back to the same knobs at the new setting.
        assert_eq!(parse_knobs(&r).unwrap().current(), vec![2, 0]);
        let no_newline = "// synth:knob A 1 2\n#define A 1";
        assert_eq!(parse_knobs(no_newline).unwrap().render(&[1]), "// synth:knob A 1 2\n#define A 2");
    }

    #[test]
    fn hostile_lines_are_errors_with_line_numbers() {
        assert_eq!(err("int a;\n/* synth:knob A 1 2 */\n#define A 1\n").split(':').next(), Some("line 2"));
        assert!(err("int a;\n/* synth:knob A 1 2 */\n").contains("must start a line comment"));
        assert!(err("// synth:knob\n").starts_with("line 1: the knob has no name"));
        assert!(err("\n// synth:knob 9LIVES 1 2\n").starts_with("line 2: knob name \"9LIVES\""));
        assert!(err("// synth:knob A 1\n#define A 1\n").starts_with("line 1: knob A needs at least two"));
        assert!(err("// synth:knob A 1 1\n#define A 1\n").contains("lists the value 1 twice"));
        let inj = err("// synth:knob A 1 $(rm\n#define A 1\n");
        assert!(inj.starts_with("line 1: knob A: value \"$(rm\" is not a plain literal"), "{inj}");
        let ctl = err("// synth:knob A 1 \u{1b}[2J\n");
        assert!(ctl.contains("\\u{1b}[2J"), "{ctl}");
        assert!(err("// synth:knob A 1 2\n// synth:knob A 2 4\n")
            .starts_with("line 2: knob A is declared twice (first on line 1)"));
        assert!(err("int a;\n// synth:knob A 1 2\n").starts_with("line 2: knob A has no definition"));
        assert!(err("// synth:knob A 1 2\n#define A 1\nconst int A = 2;\n")
            .starts_with("line 3: knob A is defined on line 2 and again"));
        assert!(err("// synth:knob A 1 2\n\n#define A 3\n").starts_with("line 3: A is 3 here, which is not one of"));
        assert_eq!(err("int main() {}\n"), parse_knobs("").unwrap_err().to_string());
        assert!(err("int main() {}\n").contains("declares no knobs"));
        let many: String = (0..=MAX_KNOBS).map(|i| format!("// synth:knob K{i} 1 2\n#define K{i} 1\n")).collect();
        assert!(err(&many).contains(&format!("more than {MAX_KNOBS} knobs")));
        let e = parse_knobs("// synth:knob A 1 2\n").unwrap_err();
        assert_eq!(
            e.located("k.cu").to_string(),
            "k.cu:1: knob A has no definition: add `#define A 1`, `constexpr int A = 1;` or `A=1` on a line of its own"
        );
    }

    fn attempt(id: usize, text: String, score: Option<f64>) -> Attempt {
        let eval = Evaluation { score, feedback: String::new(), details: serde_json::Value::Null };
        Attempt::new(id, id, "knobs", text, eval)
    }

    fn request(history: Vec<Attempt>, slot: usize) -> ProposalRequest {
        ProposalRequest {
            task_context: serde_json::Value::Null,
            history,
            parent: None,
            guidance: String::new(),
            iteration: 1,
            offspring_index: slot,
        }
    }

    #[test]
    fn plan_moves_from_the_best_and_skips_tried_settings() {
        let p = KnobProposer::new(SRC).unwrap();
        let sp = p.space();
        // Original (0, 1) at 10; (1, 1) at 5 is the best; (1, 2) failed.
        let history = vec![
            attempt(1, sp.render(&[1, 1]), Some(5.0)),
            attempt(0, sp.render(&[0, 1]), Some(10.0)),
            attempt(2, sp.render(&[1, 2]), None),
        ];
        let plan = p.plan(&request(history.clone(), 0));
        // Neighbours of the best (1,1): (2,1), (0,1) tried, (1,2) failed, (1,0); then of (0,1): (0,2), (0,0).
        assert_eq!(&plan[..4], &[vec![2, 1], vec![1, 0], vec![0, 2], vec![0, 0]]);
        assert_eq!(plan.len(), 9 - 3);
        assert!(!plan.contains(&vec![1, 2]), "a failed setting is never proposed again");
        assert_eq!(p.propose(&request(history.clone(), 1)).unwrap(), sp.render(&[1, 0]));
        assert!(matches!(p.propose(&request(history, 6)), Err(ProposeError::Exhausted(_))));
        // Nothing tried yet: the original's setting is still no candidate (the loop measures the original),
        // its nearest settings come first.
        let fresh = p.plan(&request(vec![], 0));
        assert_eq!(fresh.len(), 8);
        assert!(!fresh.contains(&sp.current()));
        assert_eq!(distance(&fresh[0], &sp.current()), 1);
        // Texts that are not renders of this source are ignored.
        let foreign = vec![attempt(0, "int main() {}".into(), Some(1.0))];
        assert_eq!(p.plan(&request(foreign, 0)), fresh);
    }

    /// A CRLF source keeps its CRs in every candidate, and its own setting is never proposed again
    /// (before, every CR was lost, so the original did not read as a render of itself and its setting came
    /// back as candidate #1).
    #[test]
    fn crlf_sources_keep_their_line_endings_and_the_original_is_not_proposed() {
        let crlf = SRC.replace('\n', "\r\n");
        let p = KnobProposer::new(&crlf).unwrap();
        let sp = p.space();
        assert_eq!(sp.render(&sp.current()), crlf);
        assert_eq!(p.setting_of(&crlf), Some(sp.current()));
        // Only the source's own renders are settings: not its LF form, not one with a line more.
        assert_eq!(p.setting_of(SRC), None);
        assert_eq!(p.setting_of(&format!("{crlf}x")), None);
        assert_eq!(p.setting_of(&format!("{crlf}\n")), None);
        assert_eq!(p.setting_of(&sp.render(&[2, 0])), Some(vec![2, 0]));
        let history = vec![attempt(0, crlf.clone(), Some(10.0))];
        let first = p.propose(&request(history.clone(), 0)).unwrap();
        assert_ne!(first, crlf, "the original's setting is measured once, by the loop");
        assert_eq!(first.matches("\r\n").count(), crlf.matches("\r\n").count(), "{first:?}");
        assert!(!first.replace("\r\n", "").contains('\n'), "a bare LF in {first:?}");
        assert_eq!(p.setting_of(&first).map(|s| distance(&s, &sp.current())), Some(1));
        // No plan ever holds the original's setting, whatever the history.
        for slot in 0..8 {
            let text = p.propose(&request(history.clone(), slot)).unwrap();
            assert_ne!(text, crlf);
        }
        // A source without a final newline renders without one.
        let bare = "// synth:knob A 1 2\r\n#define A 1";
        assert_eq!(parse_knobs(bare).unwrap().render(&[1]), "// synth:knob A 1 2\r\n#define A 2");
    }
}
