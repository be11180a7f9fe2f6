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
    /// Longest wait for the next result line; past it the harness is killed and the run stops with an
    /// error (finished cells stay in the journal).
    pub cell_timeout: std::time::Duration,
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
        let wanted: std::collections::HashMap<_, &PlanCell> = cells.iter().map(|c| (c.key(), c)).collect();
        let stdout = child.stdout.take().expect("stdout is piped");
        // Lines arrive over a channel so that a harness that stops answering is noticed (cell timeout).
        let (tx, rx) = std::sync::mpsc::sync_channel::<std::io::Result<String>>(64);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let stop = line.is_err();
                if tx.send(line).is_err() || stop {
                    break;
                }
            }
        });
        // Every row must come from the device the journal already holds (or the first row of this run).
        let mut device = journal.rows().first().map(|r| (r.gfx.clone(), r.cu_num, r.device.clone()));
        let mut appended = 0;
        let mut failure = None;
        let mut i = 0usize;
        loop {
            let line = match rx.recv_timeout(self.cell_timeout) {
                Ok(Ok(l)) => l,
                Ok(Err(e)) => {
                    failure = Some(anyhow!("reading harness output: {e}"));
                    break;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    let next = cells.iter().find(|c| !journal.is_done(&c.key()));
                    failure = Some(anyhow!(
                        "the harness produced no result for {:.0} s (--cell-timeout) and was stopped{}; the {appended} \
                         cells finished in this run are in the journal: run again to resume, or raise --cell-timeout",
                        self.cell_timeout.as_secs_f64(),
                        next.map(|c| format!(" while measuring M={} N={} K={} kernelId {} splitK {}", c.m, c.n, c.k, c.kernel_id, c.split_k))
                            .unwrap_or_default()
                    ));
                    break;
                }
            };
            i += 1;
            if line.trim().is_empty() {
                continue;
            }
            let shown = || crate::sanitize::shown(&line.chars().take(300).collect::<String>());
            let row: CellResult = match serde_json::from_str(&line) {
                Ok(r) => r,
                Err(e) => {
                    failure = Some(anyhow!("harness output line {i}: {e}: {}", shown()));
                    break;
                }
            };
            let Some(cell) = wanted.get(&row.key()) else {
                failure = Some(anyhow!("harness output line {i} is for a cell not in the plan: {}", shown()));
                break;
            };
            if let Err(e) = check_against_plan(&row, cell, &mut device) {
                failure = Some(anyhow!("harness output line {i}: {e}; the row was not written: {}", shown()));
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
            if let Ok(pid) = libc::pid_t::try_from(child.id()) {
                // SAFETY: kill has no memory effects; the child is not yet reaped, so the pid is ours.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
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

/// What a harness row must agree on with its plan cell and the journal before it is written: the
/// kernel name the plan sent, libtype `ck`, and one device (gfx, CU count, device name) per journal.
fn check_against_plan(row: &CellResult, cell: &PlanCell, device: &mut Option<(String, u32, String)>) -> Result<()> {
    use crate::sanitize::shown;
    if row.kernel_name != cell.kernel_name {
        bail!(
            "kernelName \"{}\" is not the plan's \"{}\" for kernelId {}",
            shown(&row.kernel_name),
            cell.kernel_name,
            cell.kernel_id
        );
    }
    if row.libtype != crate::catalog::Libtype::Ck {
        bail!("libtype \"{}\" is not \"ck\"", row.libtype);
    }
    let this = (row.gfx.clone(), row.cu_num, row.device.clone());
    match device {
        None => *device = Some(this),
        Some(d) if *d == this => {}
        Some((gfx, cu, name)) => bail!(
            "the row is from device \"{}\" ({}, {} CUs) but the journal holds \"{}\" ({gfx}, {cu} CUs): one \
             journal per device; use another --out",
            shown(&row.device),
            shown(&row.gfx),
            row.cu_num,
            shown(name)
        ),
    }
    Ok(())
}
