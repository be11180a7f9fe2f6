//! The rewrite task spec: a TOML file naming the kernel source to rewrite, how to build and test a
//! working copy, and how the test's result line is read.
//!
//! ```toml
//! name = "swiglu-cuda"                 # optional, defaults to the spec's file stem
//! description = "SwiGLU over bf16"     # optional, shown to proposers
//! target = "cuda/swiglu.cu"            # the file candidates replace (relative to this file's directory)
//!
//! [workdir]                            # optional table
//! root = "cuda"                        # copied into a fresh temporary directory per candidate (default ".")
//! exclude = ["*.o", "build"]           # entries not copied (glob: `*`, `?`; no `/` = any depth)
//! keep = "failed"                      # none | failed | all: keep working copies in <out>/work/
//!
//! [build]                              # optional table (interpreted tasks have no build)
//! command = "nvcc -O3 -arch=sm_90 -o swiglu harness.cu swiglu.cu"   # run with `sh -c` in the copy
//! timeout_s = 300                      # default 600
//!
//! [test]
//! command = "./swiglu"
//! timeout_s = 120                      # default 600
//! exclusive = true                     # default true: one test run at a time (timing is not disturbed)
//!
//! [result]                             # optional table
//! tag = "GEMMSYNTH_RESULT"             # default
//! line = "last"                        # first | last (default last)
//! stream = "stdout"                    # stdout | stderr | both (default stdout)
//! correct_key = "correct"              # default
//! latency_key = "latency_us"           # default
//!
//! [env]                                # optional: extra environment variables for build and test
//! CUDA_VISIBLE_DEVICES = "0"
//! ```
//!
//! Every error names the spec file, the line and column when known, and the key (`build.timeout_s`).

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;
use toml::{Spanned, Value};

/// Default timeout of the build and test steps.
pub const DEFAULT_TIMEOUT_S: f64 = 600.0;
/// Largest accepted timeout (one day).
pub const MAX_TIMEOUT_S: f64 = 86_400.0;
/// Default tag of the structured result line.
pub const DEFAULT_TAG: &str = "GEMMSYNTH_RESULT";

/// A parsed and checked task spec. Paths are absolute (resolved against the spec's directory).
#[derive(Debug, Clone, PartialEq)]
pub struct RewriteSpec {
    /// The spec file as given.
    pub path: PathBuf,
    /// Task name (the `name` key, or the spec's file stem).
    pub name: String,
    /// Free text for proposers.
    pub description: String,
    /// The original target file.
    pub target: PathBuf,
    /// How working copies are made and kept.
    pub workdir: WorkdirPolicy,
    /// Build step; None for tasks without one.
    pub build: Option<Step>,
    /// Test step: runs the candidate and prints the result line.
    pub test: Step,
    /// Whether test runs are serialized across parallel evaluations.
    pub exclusive_test: bool,
    /// How the result line is found and read.
    pub result: ResultFormat,
    /// Extra environment variables for both steps.
    pub env: BTreeMap<String, String>,
}

impl RewriteSpec {
    /// The target's path relative to the working-copy root.
    pub fn target_in_root(&self) -> &Path {
        self.target.strip_prefix(&self.workdir.root).expect("checked when the spec was loaded")
    }

    /// The target's file name (e.g. `swiglu.cu`).
    pub fn target_file_name(&self) -> String {
        self.target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }
}

/// Working-copy policy.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkdirPolicy {
    /// Directory copied for each candidate (absolute).
    pub root: PathBuf,
    /// Glob patterns of entries not copied.
    pub exclude: Vec<String>,
    /// Which working copies are kept after evaluation.
    pub keep: Keep,
}

/// Which working copies survive their evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Keep {
    /// Delete every working copy.
    None,
    /// Keep copies of failed candidates.
    Failed,
    /// Keep every copy.
    All,
}

/// One shell step.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Command line, run with `sh -c` in the working copy.
    pub command: String,
    /// Wall-clock limit; the whole process group is killed past it.
    pub timeout: Duration,
}

/// Which of several result lines counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// The first tagged line.
    First,
    /// The last tagged line.
    Last,
}

/// Which output stream holds the result line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output only.
    Stdout,
    /// Standard error only.
    Stderr,
    /// Standard output, then standard error.
    Both,
}

/// How the result line is read.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultFormat {
    /// The fixed tag that starts the line.
    pub tag: String,
    /// First or last tagged line.
    pub pick: Pick,
    /// Stream(s) searched.
    pub stream: Stream,
    /// JSON key of the boolean correctness verdict.
    pub correct_key: String,
    /// JSON key of the latency in microseconds (the score).
    pub latency_key: String,
}

impl Default for ResultFormat {
    fn default() -> Self {
        ResultFormat {
            tag: DEFAULT_TAG.to_string(),
            pick: Pick::Last,
            stream: Stream::Stdout,
            correct_key: "correct".into(),
            latency_key: "latency_us".into(),
        }
    }
}

/// A spec problem: file, position when known, key, message.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecError {
    /// The spec file.
    pub file: PathBuf,
    /// 1-based line and column of the offending text, when known.
    pub position: Option<(usize, usize)>,
    /// Dotted key (`build.command`), empty for syntax errors.
    pub key: String,
    /// What was wrong and what to do.
    pub message: String,
}

impl From<&SpecError> for synth_base::diag::Located {
    fn from(e: &SpecError) -> Self {
        synth_base::diag::Located {
            line: e.position.map(|p| p.0),
            col: e.position.map(|p| p.1),
            key: (!e.key.is_empty()).then(|| e.key.clone()),
            ..synth_base::diag::Located::new(e.file.display().to_string(), e.message.clone())
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        synth_base::diag::Located::from(self).fmt(f)
    }
}

impl std::error::Error for SpecError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: Option<Spanned<Value>>,
    description: Option<Spanned<Value>>,
    target: Option<Spanned<Value>>,
    workdir: Option<Spanned<RawWorkdir>>,
    build: Option<Spanned<RawStep>>,
    test: Option<Spanned<RawStep>>,
    result: Option<Spanned<RawResult>>,
    env: Option<Spanned<BTreeMap<String, Spanned<Value>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkdir {
    root: Option<Spanned<Value>>,
    exclude: Option<Spanned<Value>>,
    keep: Option<Spanned<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    command: Option<Spanned<Value>>,
    timeout_s: Option<Spanned<Value>>,
    exclusive: Option<Spanned<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResult {
    tag: Option<Spanned<Value>>,
    line: Option<Spanned<Value>>,
    stream: Option<Spanned<Value>>,
    correct_key: Option<Spanned<Value>>,
    latency_key: Option<Spanned<Value>>,
}

/// Error construction with positions computed from byte offsets.
struct Ctx<'a> {
    file: &'a Path,
    text: &'a str,
}

impl Ctx<'_> {
    fn pos(&self, offset: usize) -> (usize, usize) {
        synth_base::diag::line_col(self.text, offset)
    }

    fn err(&self, span: Option<std::ops::Range<usize>>, key: &str, message: impl Into<String>) -> SpecError {
        SpecError {
            file: self.file.to_path_buf(),
            position: span.map(|s| self.pos(s.start)),
            key: key.to_string(),
            message: message.into(),
        }
    }

    fn string(&self, v: &Spanned<Value>, key: &str) -> Result<String, SpecError> {
        match v.get_ref() {
            Value::String(s) => Ok(s.clone()),
            other => Err(self.err(Some(v.span()), key, format!("expected a string, found {}", describe(other)))),
        }
    }

    fn nonempty(&self, v: &Spanned<Value>, key: &str) -> Result<String, SpecError> {
        let s = self.string(v, key)?;
        if s.trim().is_empty() {
            return Err(self.err(Some(v.span()), key, "must not be empty"));
        }
        Ok(s)
    }

    fn choice<T: Copy>(&self, v: &Spanned<Value>, key: &str, options: &[(&str, T)]) -> Result<T, SpecError> {
        let s = self.string(v, key)?;
        options.iter().find(|(name, _)| *name == s).map(|(_, t)| *t).ok_or_else(|| {
            let names: Vec<String> = options.iter().map(|(n, _)| format!("\"{n}\"")).collect();
            self.err(Some(v.span()), key, format!("expected one of {}, found \"{s}\"", names.join(", ")))
        })
    }

    fn timeout(&self, v: Option<&Spanned<Value>>, key: &str) -> Result<Duration, SpecError> {
        let Some(v) = v else { return Ok(Duration::from_secs_f64(DEFAULT_TIMEOUT_S)) };
        let secs = match v.get_ref() {
            Value::Integer(i) => *i as f64,
            Value::Float(f) => *f,
            other => {
                return Err(self.err(
                    Some(v.span()),
                    key,
                    format!("expected a number of seconds, found {}", describe(other)),
                ))
            }
        };
        if !(secs > 0.0 && secs <= MAX_TIMEOUT_S) {
            return Err(self.err(
                Some(v.span()),
                key,
                format!("expected seconds in (0, {MAX_TIMEOUT_S}], found {secs}"),
            ));
        }
        Ok(Duration::from_secs_f64(secs))
    }

    fn boolean(&self, v: &Spanned<Value>, key: &str) -> Result<bool, SpecError> {
        match v.get_ref() {
            Value::Boolean(b) => Ok(*b),
            other => Err(self.err(Some(v.span()), key, format!("expected true or false, found {}", describe(other)))),
        }
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::String(s) => format!("string \"{s}\""),
        Value::Integer(i) => format!("integer {i}"),
        Value::Float(f) => format!("float {f}"),
        Value::Boolean(b) => format!("boolean {b}"),
        Value::Datetime(d) => format!("datetime {d}"),
        Value::Array(_) => "an array".into(),
        Value::Table(_) => "a table".into(),
    }
}

/// A relative path inside the spec's directory (no absolute paths, no `..`).
fn relative(ctx: &Ctx, v: &Spanned<Value>, key: &str) -> Result<PathBuf, SpecError> {
    let s = ctx.nonempty(v, key)?;
    let p = PathBuf::from(&s);
    if p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir | Component::Prefix(_))) {
        return Err(ctx.err(
            Some(v.span()),
            key,
            format!("\"{s}\" must be a path relative to the spec's directory, without `..`"),
        ));
    }
    Ok(p)
}

fn step(ctx: &Ctx, raw: &Spanned<RawStep>, table: &str, allow_exclusive: bool) -> Result<Step, SpecError> {
    let r = raw.get_ref();
    let cmd_key = format!("{table}.command");
    let command = match &r.command {
        Some(c) => ctx.nonempty(c, &cmd_key)?,
        None => {
            return Err(ctx.err(
                Some(raw.span()),
                &cmd_key,
                format!("missing: the [{table}] table needs `command = \"...\"` (a shell command line)"),
            ))
        }
    };
    if let (false, Some(e)) = (allow_exclusive, &r.exclusive) {
        return Err(ctx.err(Some(e.span()), &format!("{table}.exclusive"), "only [test] accepts `exclusive`"));
    }
    let timeout = ctx.timeout(r.timeout_s.as_ref(), &format!("{table}.timeout_s"))?;
    Ok(Step { command, timeout })
}

/// Parses spec text; `file` is the spec's path (for messages and to resolve relative paths). Checks
/// that the target exists inside the working-copy root.
pub fn parse_spec(text: &str, file: &Path) -> Result<RewriteSpec, SpecError> {
    let ctx = Ctx { file, text };
    let raw: RawSpec = toml::from_str(text).map_err(|e| SpecError {
        file: file.to_path_buf(),
        position: e.span().map(|s| ctx.pos(s.start)),
        key: String::new(),
        message: format!(
            "{} (accepted top-level keys: name, description, target, [workdir], [build], [test], [result], [env])",
            e.message()
        ),
    })?;
    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = std::path::absolute(&dir).unwrap_or(dir);

    let name = match &raw.name {
        Some(v) => ctx.nonempty(v, "name")?,
        None => file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "rewrite".into()),
    };
    let description = match &raw.description {
        Some(v) => ctx.string(v, "description")?,
        None => String::new(),
    };
    let (target_rel, target) = target_of(&ctx, raw.target.as_ref(), &dir)?;
    let workdir = match &raw.workdir {
        Some(w) => workdir_of(&ctx, w.get_ref(), &dir, &target, &target_rel)?,
        None => WorkdirPolicy { root: dir.clone(), exclude: Vec::new(), keep: Keep::None },
    };
    let build = match &raw.build {
        Some(b) => Some(step(&ctx, b, "build", false)?),
        None => None,
    };
    let (test, exclusive_test) = test_of(&ctx, raw.test.as_ref())?;
    let result = match &raw.result {
        Some(r) => result_of(&ctx, r.get_ref())?,
        None => ResultFormat::default(),
    };
    let env = match &raw.env {
        Some(e) => env_of(&ctx, e.get_ref())?,
        None => BTreeMap::new(),
    };
    Ok(RewriteSpec {
        path: file.to_path_buf(),
        name,
        description,
        target,
        workdir,
        build,
        test,
        exclusive_test,
        result,
        env,
    })
}

/// The `target` key: the path as written and resolved against the spec's directory `dir`; it must name a
/// file.
fn target_of(ctx: &Ctx, v: Option<&Spanned<Value>>, dir: &Path) -> Result<(PathBuf, PathBuf), SpecError> {
    let Some(target_v) = v else {
        return Err(ctx.err(
            None,
            "target",
            "missing: name the source file candidates replace, e.g. target = \"kernel.cu\"",
        ));
    };
    let target_rel = relative(ctx, target_v, "target")?;
    let target = dir.join(&target_rel);
    if !target.is_file() {
        return Err(ctx.err(
            Some(target_v.span()),
            "target",
            format!(
                "{} is not a file (paths are relative to the spec's directory {})",
                target_rel.display(),
                dir.display()
            ),
        ));
    }
    Ok((target_rel, target))
}

/// The `[workdir]` table: a root containing the target, exclude patterns that leave the target in, the
/// keep policy.
fn workdir_of(
    ctx: &Ctx,
    w: &RawWorkdir,
    dir: &Path,
    target: &Path,
    target_rel: &Path,
) -> Result<WorkdirPolicy, SpecError> {
    let mut workdir = WorkdirPolicy { root: dir.to_path_buf(), exclude: Vec::new(), keep: Keep::None };
    if let Some(v) = &w.root {
        let rel = relative(ctx, v, "workdir.root")?;
        workdir.root = dir.join(&rel);
        if !workdir.root.is_dir() {
            return Err(ctx.err(Some(v.span()), "workdir.root", format!("{} is not a directory", rel.display())));
        }
        if !target.starts_with(&workdir.root) {
            return Err(ctx.err(
                Some(v.span()),
                "workdir.root",
                format!(
                    "the target {} is not inside the working-copy root {}; the root must contain it",
                    target_rel.display(),
                    rel.display()
                ),
            ));
        }
    }
    if let Some(v) = &w.exclude {
        workdir.exclude = exclude_patterns(ctx, v)?;
        let target_in_root = target.strip_prefix(&workdir.root).unwrap_or(target).to_path_buf();
        if let Some(p) = workdir.exclude.iter().find(|p| excluded(&target_in_root, p)) {
            return Err(ctx.err(
                Some(v.span()),
                "workdir.exclude",
                format!("pattern \"{p}\" excludes the target itself"),
            ));
        }
    }
    if let Some(v) = &w.keep {
        workdir.keep =
            ctx.choice(v, "workdir.keep", &[("none", Keep::None), ("failed", Keep::Failed), ("all", Keep::All)])?;
    }
    Ok(workdir)
}

/// `workdir.exclude`: an array of non-empty glob strings.
fn exclude_patterns(ctx: &Ctx, v: &Spanned<Value>) -> Result<Vec<String>, SpecError> {
    let Value::Array(items) = v.get_ref() else {
        return Err(ctx.err(
            Some(v.span()),
            "workdir.exclude",
            format!("expected an array of strings, found {}", describe(v.get_ref())),
        ));
    };
    let mut patterns = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match item {
            Value::String(s) if !s.is_empty() => patterns.push(s.clone()),
            other => {
                return Err(ctx.err(
                    Some(v.span()),
                    &format!("workdir.exclude[{i}]"),
                    format!("expected a non-empty glob string, found {}", describe(other)),
                ))
            }
        }
    }
    Ok(patterns)
}

/// The `[test]` table (required): its step and whether test runs are serialized (default true).
fn test_of(ctx: &Ctx, raw: Option<&Spanned<RawStep>>) -> Result<(Step, bool), SpecError> {
    let Some(test_raw) = raw else {
        return Err(ctx.err(
            None,
            "test",
            "missing: add a [test] table with `command = \"...\"` that runs the candidate and prints the result line",
        ));
    };
    let test = step(ctx, test_raw, "test", true)?;
    let exclusive_test = match &test_raw.get_ref().exclusive {
        Some(v) => ctx.boolean(v, "test.exclusive")?,
        None => true,
    };
    Ok((test, exclusive_test))
}

/// The `[result]` table over the defaults.
fn result_of(ctx: &Ctx, r: &RawResult) -> Result<ResultFormat, SpecError> {
    let mut result = ResultFormat::default();
    if let Some(v) = &r.tag {
        let tag = ctx.nonempty(v, "result.tag")?;
        if tag.chars().any(char::is_whitespace) {
            return Err(ctx.err(Some(v.span()), "result.tag", format!("\"{tag}\" must not contain whitespace")));
        }
        result.tag = tag;
    }
    if let Some(v) = &r.line {
        result.pick = ctx.choice(v, "result.line", &[("first", Pick::First), ("last", Pick::Last)])?;
    }
    if let Some(v) = &r.stream {
        result.stream = ctx.choice(
            v,
            "result.stream",
            &[("stdout", Stream::Stdout), ("stderr", Stream::Stderr), ("both", Stream::Both)],
        )?;
    }
    if let Some(v) = &r.correct_key {
        result.correct_key = ctx.nonempty(v, "result.correct_key")?;
    }
    if let Some(v) = &r.latency_key {
        result.latency_key = ctx.nonempty(v, "result.latency_key")?;
    }
    Ok(result)
}

/// The `[env]` table: each value a string or an integer.
fn env_of(ctx: &Ctx, e: &BTreeMap<String, Spanned<Value>>) -> Result<BTreeMap<String, String>, SpecError> {
    let mut env = BTreeMap::new();
    for (k, v) in e {
        let value = match v.get_ref() {
            Value::String(s) => s.clone(),
            Value::Integer(i) => i.to_string(),
            other => {
                return Err(ctx.err(
                    Some(v.span()),
                    &format!("env.{k}"),
                    format!("expected a string or integer, found {}", describe(other)),
                ))
            }
        };
        env.insert(k.clone(), value);
    }
    Ok(env)
}

/// Reads and parses a spec file.
pub fn load_spec(path: &Path) -> Result<RewriteSpec, SpecError> {
    let text =
        synth_base::input::read_text_capped(path, synth_base::input::MAX_SPEC_BYTES, "task spec").map_err(|e| {
            SpecError {
                file: path.to_path_buf(),
                position: None,
                key: String::new(),
                message: format!("cannot read the task spec: {e}"),
            }
        })?;
    parse_spec(&text, path)
}

/// Whether `rel` (a path relative to the working-copy root) matches the exclude pattern: patterns
/// without `/` match any single component's name, patterns with `/` match the whole relative path.
pub fn excluded(rel: &Path, pattern: &str) -> bool {
    if pattern.contains('/') {
        let s = rel.to_string_lossy();
        glob_match(pattern.trim_end_matches('/').as_bytes(), s.as_bytes())
    } else {
        rel.components().any(|c| glob_match(pattern.as_bytes(), c.as_os_str().to_string_lossy().as_bytes()))
    }
}

/// `*` matches any run of characters except `/`, `?` one character except `/`.
fn glob_match(p: &[u8], s: &[u8]) -> bool {
    match (p.first(), s.first()) {
        (None, None) => true,
        (None, Some(_)) => false,
        (Some(b'*'), _) => glob_match(&p[1..], s) || (!s.is_empty() && s[0] != b'/' && glob_match(p, &s[1..])),
        (Some(b'?'), Some(c)) => *c != b'/' && glob_match(&p[1..], &s[1..]),
        (Some(a), Some(b)) => a == b && glob_match(&p[1..], &s[1..]),
        (Some(_), None) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_patterns() {
        assert!(excluded(Path::new("a/b/x.o"), "*.o"));
        assert!(!excluded(Path::new("a/b/x.c"), "*.o"));
        assert!(excluded(Path::new("build"), "build"));
        assert!(excluded(Path::new("build/y"), "build"));
        assert!(excluded(Path::new("a/build"), "a/build"));
        assert!(!excluded(Path::new("b/a/build"), "a/build"));
        assert!(!excluded(Path::new("a/b/c"), "a/*"));
        assert!(excluded(Path::new("ab"), "a?"));
    }

    #[test]
    fn positions_are_one_based() {
        let ctx = Ctx { file: Path::new("s.toml"), text: "a = 1\nbb = 2\n" };
        assert_eq!(ctx.pos(0), (1, 1));
        assert_eq!(ctx.pos(6), (2, 1));
        assert_eq!(ctx.pos(11), (2, 6));
    }
}
