//! The rewrite evaluator: a candidate is a whole replacement of the spec's target file. Each candidate
//! gets a fresh copy of the task directory in a temporary directory, the target is replaced there, the
//! build and test steps run with their timeouts, and the test's result line gives the verdict and the
//! latency (the score). Failures become feedback a reflector can act on: trimmed compiler errors with
//! line numbers, the mismatch figures, the exit status and the end of the output.

use super::diag::{summarize_build_log, tail_lines};
use super::result::{extract_result, ResultLineError};
use super::spec::{Keep, RewriteSpec, Step, Stream};
use super::workcopy::copy_tree;
use crate::engine::process::{run_step, StepOutput};
use crate::engine::{Evaluation, Task};
use anyhow::Context;
use serde::Serialize;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Outcome class of one evaluation (stored in `Evaluation::details["status"]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Built, ran, correct, timed.
    Ok,
    /// The test reported `correct: false`.
    Mismatch,
    /// The build step failed.
    BuildError,
    /// The build step ran past its timeout.
    BuildTimeout,
    /// The test failed (non-zero exit, signal) or reported success with a failing exit status.
    RunError,
    /// The test ran past its timeout.
    RunTimeout,
    /// The test finished but printed no result line.
    NoResult,
    /// The result line was malformed or lacked a required key.
    BadResult,
    /// The candidate was empty.
    Empty,
    /// The working copy could not be prepared (disk full, unreadable task directory).
    SetupError,
}

impl Status {
    /// The snake_case name used in details and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Mismatch => "mismatch",
            Status::BuildError => "build_error",
            Status::BuildTimeout => "build_timeout",
            Status::RunError => "run_error",
            Status::RunTimeout => "run_timeout",
            Status::NoResult => "no_result",
            Status::BadResult => "bad_result",
            Status::Empty => "empty",
            Status::SetupError => "setup_error",
        }
    }
}

/// The kernel-rewrite task.
pub struct RewriteTask {
    spec: RewriteSpec,
    original: String,
    keep_dir: Option<PathBuf>,
    test_lock: Arc<Mutex<()>>,
    seq: AtomicUsize,
    /// Latency of the original once it has been measured (feedback states speedups against it).
    original_us: Mutex<Option<f64>>,
}

impl RewriteTask {
    /// Reads the original target (at most [`synth_base::input::MAX_SOURCE_BYTES`], the cap of an agent's whole
    /// answer); the task directory is never written.
    pub fn new(spec: RewriteSpec) -> anyhow::Result<Self> {
        let original =
            synth_base::input::read_text_capped(&spec.target, synth_base::input::MAX_SOURCE_BYTES, "rewrite target")
                .with_context(|| format!("cannot read the target {}", spec.target.display()))?;
        // Every candidate runs in a copy of the task directory: a tree that cannot be copied (a link out
        // of the task, a cycle, a special file) is refused here, once, not as every candidate's failure.
        let trial = tempfile::Builder::new()
            .prefix("gemm-synth-rewrite-check-")
            .tempdir()
            .context("cannot create a temporary directory")?;
        copy_tree(&spec.workdir.root, &trial.path().join("work"), &spec.workdir.exclude).with_context(|| {
            format!("the task directory {} cannot be copied for its builds", spec.workdir.root.display())
        })?;
        Ok(RewriteTask {
            spec,
            original,
            keep_dir: None,
            test_lock: Arc::new(Mutex::new(())),
            seq: AtomicUsize::new(0),
            original_us: Mutex::new(None),
        })
    }

    /// Where working copies kept by the spec's `workdir.keep` policy go (`<dir>/cand-NNN/`).
    pub fn with_keep_dir(mut self, dir: PathBuf) -> Self {
        self.keep_dir = Some(dir);
        self
    }

    /// Shares `lock` for test runs with other tasks (a suite's tasks time one at a time across all of
    /// them, not only within each).
    pub fn with_test_lock(mut self, lock: Arc<Mutex<()>>) -> Self {
        self.test_lock = lock;
        self
    }

    /// The spec.
    pub fn spec(&self) -> &RewriteSpec {
        &self.spec
    }

    /// The original target text (the baseline).
    pub fn original(&self) -> &str {
        &self.original
    }

    /// Language of the target, from its extension (for proposers).
    pub fn language(&self) -> &'static str {
        match self.spec.target.extension().and_then(|e| e.to_str()).unwrap_or("") {
            "cu" | "cuh" => "cuda",
            "hip" => "hip",
            "c" | "h" => "c",
            "cc" | "cpp" | "cxx" | "hpp" => "c++",
            "py" => "python",
            "rs" => "rust",
            _ => "text",
        }
    }

    fn evaluate_in(&self, candidate: &str, seq: usize) -> (Status, String, serde_json::Value) {
        let tmp = match tempfile::Builder::new().prefix("gemm-synth-rewrite-").tempdir() {
            Ok(t) => t,
            Err(e) => return (Status::SetupError, format!("cannot create a temporary directory: {e}"), json!({})),
        };
        let work = tmp.path().join("work");
        let logs = tmp.path().join("logs");
        let setup = copy_tree(&self.spec.workdir.root, &work, &self.spec.workdir.exclude)
            .and_then(|_| std::fs::create_dir_all(&logs).context("cannot create the log directory"))
            .and_then(|_| {
                let target = work.join(self.spec.target_in_root());
                std::fs::write(&target, candidate).with_context(|| format!("cannot write {}", target.display()))
            });
        let (status, feedback, mut details) = match setup {
            Err(e) => (Status::SetupError, format!("cannot prepare the working copy: {e:#}"), json!({})),
            Ok(()) => self.build_and_test(candidate, &work, &logs),
        };
        let keep = match self.spec.workdir.keep {
            Keep::None => false,
            Keep::Failed => status != Status::Ok,
            Keep::All => true,
        };
        if let (true, Some(dir)) = (keep, &self.keep_dir) {
            let dest = dir.join(format!("cand-{seq:03}"));
            match super::workcopy::keep_tree(tmp.path(), &dest) {
                Ok(skipped) => {
                    details["kept"] = json!(dest.display().to_string());
                    if !skipped.is_empty() {
                        details["kept_skipped"] = json!(skipped);
                    }
                }
                Err(e) => {
                    // Said where it is seen, not only in the trace: the copy the spec asked for is incomplete.
                    errln!(
                        "note: candidate {seq}: its working copy could not be kept whole in {}: {e:#}",
                        dest.display()
                    );
                    details["kept_error"] = json!(format!("{e:#}"));
                }
            }
        }
        (status, feedback, details)
    }

    fn build_and_test(&self, candidate: &str, work: &Path, logs: &Path) -> (Status, String, serde_json::Value) {
        let clean = |s: &str| scrub_paths(s, work);
        let target_name = self.spec.target_file_name();
        let mut details = json!({});

        if let Some(build) = &self.spec.build {
            let out = match run_step(&build.command, work, &self.spec.env, build.timeout, logs, "build") {
                Ok(o) => o,
                Err(e) => return (Status::SetupError, format!("cannot start the build (`sh -c`): {e}"), details),
            };
            details["build_s"] = json!(round3(out.elapsed.as_secs_f64()));
            if out.timed_out || !out.success() {
                let (status, feedback) = build_failure(build, &out, &clean(&out.combined()), &target_name, candidate);
                return (status, feedback, details);
            }
        }

        let test = &self.spec.test;
        let out = {
            let _guard = if self.spec.exclusive_test {
                Some(self.test_lock.lock().unwrap_or_else(|e| e.into_inner()))
            } else {
                None
            };
            match run_step(&test.command, work, &self.spec.env, test.timeout, logs, "test") {
                Ok(o) => o,
                Err(e) => return (Status::SetupError, format!("cannot start the test (`sh -c`): {e}"), details),
            }
        };
        details["test_s"] = json!(round3(out.elapsed.as_secs_f64()));
        self.judge(&out, &clean, details)
    }

    /// Turns the test step's output into a verdict.
    fn judge(
        &self,
        out: &StepOutput,
        clean: &dyn Fn(&str) -> String,
        mut details: serde_json::Value,
    ) -> (Status, String, serde_json::Value) {
        let test = &self.spec.test;
        let fmt = &self.spec.result;
        let status_txt = out.describe_status(test.timeout);
        let tail = |n| tail_lines(&clean(&out.combined()), n);
        if out.timed_out {
            return (
                Status::RunTimeout,
                format!("test {status_txt} running `{}`; last output:\n{}", test.command, tail(15)),
                details,
            );
        }
        let searched = match fmt.stream {
            Stream::Stdout => out.stdout.clone(),
            Stream::Stderr => out.stderr.clone(),
            Stream::Both => format!("{}\n{}", out.stdout, out.stderr),
        };
        match extract_result(&searched, fmt) {
            Ok(r) => {
                details["result"] = serde_json::Value::Object(r.fields.clone());
                details["result_line"] = json!(r.line_no);
                let figures = r.figures(fmt);
                if !r.correct {
                    let others: Vec<String> = clean(&out.combined())
                        .lines()
                        .filter(|l| !l.trim_start().starts_with(fmt.tag.as_str()))
                        .map(str::to_string)
                        .collect();
                    let context = tail_lines(&others.join("\n"), 10);
                    return (
                        Status::Mismatch,
                        format!(
                            "wrong result: the test reported {}=false ({status_txt}): {}{}",
                            fmt.correct_key,
                            if figures.is_empty() { "no figures given".to_string() } else { figures },
                            if context.is_empty() { String::new() } else { format!("\nother output:\n{context}") }
                        ),
                        details,
                    );
                }
                if !out.success() {
                    return (
                        Status::RunError,
                        format!(
                            "the test reported {}=true but then failed ({status_txt}); last output:\n{}",
                            fmt.correct_key,
                            tail(15)
                        ),
                        details,
                    );
                }
                let lat = r.latency_us.expect("correct results carry a latency");
                details["latency_us"] = json!(lat);
                let mut fb = format!("correct; {} = {lat} us", fmt.latency_key);
                if !figures.is_empty() {
                    fb.push_str(&format!(" ({figures})"));
                }
                (Status::Ok, fb, details)
            }
            Err(ResultLineError::Missing { .. }) if !out.success() => (
                Status::RunError,
                format!("the test failed ({status_txt}) without a {} line; last output:\n{}", fmt.tag, tail(20)),
                details,
            ),
            Err(e @ ResultLineError::Missing { .. }) => {
                (Status::NoResult, format!("the test succeeded but printed {e}; last output:\n{}", tail(10)), details)
            }
            Err(e) => (Status::BadResult, format!("{e} ({status_txt})"), details),
        }
    }
}

/// Removes the working copy's absolute path from tool output, so messages name files as the task does.
fn scrub_paths(s: &str, work: &Path) -> String {
    let w = work.display().to_string();
    s.replace(&format!("{w}/"), "").replace(&w, ".")
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Strips one enclosing Markdown code fence (```lang ... ```), which chat models often add.
pub fn unfence(candidate: &str) -> &str {
    let t = candidate.trim();
    if let Some(rest) = t.strip_prefix("```") {
        if let Some(body_start) = rest.find('\n') {
            let body = &rest[body_start + 1..];
            if let Some(end) = body.rfind("```") {
                if body[end + 3..].trim().is_empty() {
                    return &body[..end];
                }
            }
        }
    }
    candidate
}

impl Task for RewriteTask {
    fn kind(&self) -> &'static str {
        "rewrite"
    }

    fn context(&self) -> serde_json::Value {
        let fmt = &self.spec.result;
        let target = self.spec.target_in_root().display().to_string();
        let lang = self.language();
        let system = format!(
            "You are an expert {lang} performance engineer. You rewrite one source file of a program to make \
             its kernel faster while keeping its results correct. Every rewrite is built and run by a test \
             harness that checks the results and measures the latency."
        );
        let mut user = String::new();
        if !self.spec.description.trim().is_empty() {
            user.push_str(&format!("Task: {}\n\n", self.spec.description.trim()));
        }
        user.push_str(&format!("The file to rewrite, {target}:\n```{lang}\n{}\n```\n", self.original.trim_end()));
        if let Some(b) = &self.spec.build {
            user.push_str(&format!("Build command: `{}`\n", b.command));
        }
        user.push_str(&format!(
            "Test command: `{}`. It prints `{} {{\"{}\": true|false, \"{}\": ...}}`; the score is {} in \
             microseconds (lower is better) and counts only when {} is true.\n",
            self.spec.test.command, fmt.tag, fmt.correct_key, fmt.latency_key, fmt.latency_key, fmt.correct_key
        ));
        user.push_str("Keep every function the rest of the program calls with the same signature and behaviour.\n");
        let reply =
            format!("Reply with the complete new {target} (the whole file, not a diff) in one fenced code block.");
        json!({
            "task": "rewrite",
            "name": self.spec.name,
            "description": self.spec.description,
            "target": self.spec.target_in_root().display().to_string(),
            "language": self.language(),
            "original": self.original,
            "build": self.spec.build.as_ref().map(|b| b.command.clone()),
            "test": self.spec.test.command,
            "result_line": format!("{} {{\"{}\": true, \"{}\": 12.3, ...}}", fmt.tag, fmt.correct_key, fmt.latency_key),
            "instructions": format!(
                "Return the complete new text of {} (the whole file, not a diff). Keep every function the rest \
                 of the program calls with the same signature and behaviour. The score is {} in microseconds \
                 (lower is better) and only counts when the test reports {} = true.",
                self.spec.target_in_root().display(),
                fmt.latency_key,
                fmt.correct_key
            ),
            "prompt": { "system": system, "user": user, "reply": reply },
        })
    }

    fn evaluate(&self, candidate: &str) -> Evaluation {
        let seq = self.seq.fetch_add(1, Ordering::SeqCst);
        let text = unfence(candidate);
        let (status, feedback, mut details) = if text.trim().is_empty() {
            (Status::Empty, "the candidate is empty: return the whole rewritten file".to_string(), json!({}))
        } else {
            self.evaluate_in(text, seq)
        };
        if text.len() != candidate.len() {
            details["unfenced"] = json!(true);
        }
        details["status"] = json!(status.as_str());
        details["seq"] = json!(seq);
        let score = if status == Status::Ok { details["latency_us"].as_f64() } else { None };
        let mut feedback = feedback;
        if let Some(lat) = score {
            let mut orig = self.original_us.lock().unwrap_or_else(|e| e.into_inner());
            if text == self.original {
                orig.get_or_insert(lat);
            } else if let Some(o) = *orig {
                feedback.push_str(&format!("; {:.2}x the original's speed ({o} us)", o / lat));
            }
        }
        Evaluation { score, feedback, details }
    }

    fn baseline(&self) -> Option<String> {
        Some(self.original.clone())
    }
}

/// The verdict on a build step that timed out or failed: the status and the feedback with the build's
/// `log` (paths scrubbed), its tail after a timeout, its digest after a failure.
fn build_failure(build: &Step, out: &StepOutput, log: &str, target_name: &str, candidate: &str) -> (Status, String) {
    let status_txt = out.describe_status(build.timeout);
    if out.timed_out {
        let feedback = format!("build {status_txt} running `{}`; last output:\n{}", build.command, tail_lines(log, 15));
        return (Status::BuildTimeout, feedback);
    }
    let digest = summarize_build_log(log, target_name, candidate);
    (Status::BuildError, format!("build failed ({status_txt}) running `{}`:\n{digest}", build.command))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unfence_strips_one_enclosing_block() {
        assert_eq!(unfence("```cuda\nint a;\n```\n"), "int a;\n");
        assert_eq!(unfence("int a;\n"), "int a;\n");
        assert_eq!(unfence("```\nx\n```\ntrailing"), "```\nx\n```\ntrailing");
    }

    #[test]
    fn scrub_removes_workdir() {
        let w = Path::new("/tmp/x/work");
        assert_eq!(scrub_paths("/tmp/x/work/k.c:3:1: error", w), "k.c:3:1: error");
    }
}
