//! Runs the GPU harness as a subprocess: `python3 harness/blockscale_bench.py --plan FILE`, reading one
//! JSON result per finished cell from its stdout and appending each to the journal at once.

use super::journal::{CellResult, Journal};
use super::plan::PlanCell;
use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// Harness exit codes (harness/bsbench/env.py).
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_NO_TORCH: i32 = 3;
pub const EXIT_NO_TRITON: i32 = 4;
pub const EXIT_NO_GPU: i32 = 5;
pub const EXIT_DEVICE_LOST: i32 = 6;

/// How to start the harness.
#[derive(Debug, Clone)]
pub struct Harness {
    /// Python interpreter that has PyTorch and Triton.
    pub python: PathBuf,
    /// Path of `blockscale_bench.py`.
    pub script: PathBuf,
    /// Extra arguments passed through (e.g. `--mapping 64:2:3`).
    pub extra_args: Vec<String>,
}

/// What the harness reports about the device (`--probe`).
#[derive(Debug, Clone, Deserialize)]
pub struct DeviceInfo {
    pub name: String,
    pub gfx: String,
    pub cu_num: u32,
    pub backend: String,
    #[serde(default)]
    pub torch: String,
    #[serde(default)]
    pub triton: String,
    #[serde(default)]
    pub mapping_rule: String,
    #[serde(default)]
    pub l2_bytes: u64,
}

impl Harness {
    fn command(&self) -> Command {
        let mut c = Command::new(&self.python);
        c.arg(&self.script);
        c.args(&self.extra_args);
        c
    }

    fn spawn_error(&self, e: std::io::Error) -> anyhow::Error {
        anyhow!(
            "cannot start the harness with Python `{}`: {e}; pass --python with an interpreter that has PyTorch and Triton",
            self.python.display()
        )
    }

    /// Explains a non-zero harness exit; `tail` is the end of its stderr.
    pub fn exit_error(&self, code: Option<i32>, tail: &str) -> anyhow::Error {
        let py = self.python.display();
        let tail = tail.trim();
        match code {
            Some(EXIT_NO_GPU) => anyhow!(
                "no GPU found: PyTorch under `{py}` sees no CUDA or ROCm device ({tail}); run on a machine with one \
                 (`--dry-run --cu-num N` shows the plan without it)"
            ),
            Some(EXIT_NO_TORCH) => anyhow!(
                "PyTorch is not importable by `{py}`: install PyTorch and Triton for it, or pass --python PATH of an \
                 interpreter that has them (`--dry-run --cu-num N` shows the plan without either)"
            ),
            Some(EXIT_NO_TRITON) => anyhow!(
                "Triton is not importable by `{py}`: install Triton for it, or pass --python PATH of an interpreter \
                 that has it (`--dry-run --cu-num N` shows the plan without it)"
            ),
            Some(EXIT_USAGE) => anyhow!("the harness rejected its arguments or plan: {tail}"),
            Some(EXIT_DEVICE_LOST) => anyhow!(
                "the GPU stopped working mid-run ({tail}); finished cells are in the journal, run again to resume"
            ),
            Some(c) => anyhow!("the harness exited with status {c}: {tail}"),
            None => anyhow!("the harness was killed by a signal: {tail}"),
        }
    }

    /// Asks the harness for the device description (also the early check for Python, PyTorch, GPU).
    pub fn probe(&self) -> Result<DeviceInfo> {
        let out = self.command().arg("--probe").stdin(Stdio::null()).output().map_err(|e| self.spawn_error(e))?;
        if !out.status.success() {
            return Err(self.exit_error(out.status.code(), &String::from_utf8_lossy(&out.stderr)));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
        serde_json::from_str(line)
            .with_context(|| format!("harness --probe printed {line:?}, expected one JSON object"))
    }

    /// Measures `cells` (written to `plan_path` first), appending every result to `journal` as it
    /// arrives and calling `on_row` after each. Harness stderr lines go to `on_log`. Returns the number
    /// of rows appended.
    pub fn run(
        &self,
        cells: &[PlanCell],
        plan_path: &std::path::Path,
        journal: &mut Journal,
        mut on_row: impl FnMut(&CellResult),
        on_log: impl Fn(&str) + Send + 'static,
    ) -> Result<usize> {
        {
            let mut f = std::fs::File::create(plan_path)
                .with_context(|| format!("cannot write plan {}", plan_path.display()))?;
            for c in cells {
                writeln!(f, "{}", c.to_json_line())?;
            }
        }
        let mut child = self
            .command()
            .arg("--plan")
            .arg(plan_path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| self.spawn_error(e))?;
        let stderr = child.stderr.take().expect("stderr is piped");
        let tail = Arc::new(Mutex::new(Vec::<String>::new()));
        let tail2 = Arc::clone(&tail);
        let log_thread = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                on_log(&line);
                let mut t = tail2.lock().expect("stderr tail lock");
                t.push(line);
                if t.len() > 20 {
                    t.remove(0);
                }
            }
        });
        let wanted: std::collections::HashSet<_> = cells.iter().map(|c| c.key()).collect();
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut appended = 0;
        let mut failure = None;
        for (i, line) in BufReader::new(stdout).lines().enumerate() {
            let line = match line {
                Ok(l) => l,
                Err(e) => {
                    failure = Some(anyhow!("reading harness output: {e}"));
                    break;
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            let row: CellResult = match serde_json::from_str(&line) {
                Ok(r) => r,
                Err(e) => {
                    failure = Some(anyhow!("harness output line {}: {e}: {line:?}", i + 1));
                    break;
                }
            };
            if !wanted.contains(&row.key()) {
                failure = Some(anyhow!("harness output line {} is for a cell not in the plan: {line:?}", i + 1));
                break;
            }
            if let Err(e) = journal.append(row.clone()) {
                failure = Some(e);
                break;
            }
            appended += 1;
            on_row(&row);
        }
        if failure.is_some() {
            let _ = child.kill();
        }
        let status = child.wait().context("waiting for the harness")?;
        let _ = log_thread.join();
        if let Some(e) = failure {
            return Err(e);
        }
        if !status.success() {
            let t = tail.lock().expect("stderr tail lock").join("\n");
            return Err(self.exit_error(status.code(), &t));
        }
        if appended < cells.len() {
            bail!("the harness exited after {appended} of {} cells without an error; run again to resume", cells.len());
        }
        Ok(appended)
    }
}
