//! Runs the GPU harness as a subprocess: `python3 harness/blockscale_bench.py --plan FILE`, reading one
//! JSON result per finished cell from its stdout and appending each to the journal at once. The harness
//! runs through [`synth_base::process`]: its own process group, a per-cell watchdog, an optional deadline for
//! the whole run ([`Harness::run_until`]), and no wait on a leftover grandchild that holds its pipes.

use super::journal::{CellResult, Journal};
use super::plan::{CellKey, PlanCell};
use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};
use synth_base::process::{Event, Stream, Watched};

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

/// The error of a run stopped at its deadline ([`Harness::run_until`]): the harness's process group was
/// killed; the cells finished before it are in the journal.
#[derive(Debug, thiserror::Error)]
#[error("the harness was stopped at its deadline after {appended} of {planned} cells; the finished cells are in the journal")]
pub struct DeadlineReached {
    /// Rows appended to the journal by this run.
    pub appended: usize,
    /// Cells of the plan.
    pub planned: usize,
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

impl DeviceInfo {
    /// Refuses a description no journal row could carry: an empty device name, an architecture the
    /// journal reader refuses, no CUs. (`--cu-num 0` is refused alike.)
    pub fn check(&self) -> Result<()> {
        use synth_base::sanitize::shown;
        if self.name.trim().is_empty() {
            bail!("the device name is empty: the harness must name the GPU (torch.cuda.get_device_name)");
        }
        if !synth_core::table::aiter_csv::is_arch_name(&self.gfx) {
            bail!("gfx \"{}\" is not an architecture name such as gfx942, gfx950 or sm_90", shown(&self.gfx));
        }
        if self.cu_num == 0 {
            bail!("cu_num 0: the device's CU/SM count is at least 1 (e.g. 304 for MI300X, 132 for H200)");
        }
        Ok(())
    }
}

/// The usual name of signal `sig` (Linux numbering).
fn signal_name(sig: i32) -> &'static str {
    match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => "another signal",
    }
}

/// How long a harness that has delivered every cell of its plan may take to exit before it is stopped.
pub const EXIT_GRACE: Duration = Duration::from_secs(30);

/// A harness stdout line that no newline ended and that is no JSON value: the harness died while writing it.
pub fn torn_output(line: &str) -> Option<String> {
    if line.trim().is_empty() || serde_json::from_str::<serde_json::Value>(line).is_ok() {
        return None;
    }
    Some(format!(
        "its output ended in the middle of a line ({} bytes: {}), the mark of a harness stopped while writing",
        line.len(),
        synth_base::sanitize::shown(&line.chars().take(120).collect::<String>())
    ))
}

impl Harness {
    /// How long a harness that delivered every cell may take to exit: [`EXIT_GRACE`], or `--cell-timeout`
    /// when that is shorter.
    pub fn exit_grace(&self) -> Duration {
        EXIT_GRACE.min(self.cell_timeout)
    }

    fn command(&self) -> Command {
        self.command_on(None)
    }

    /// The harness command; with `gpu`, its one visible GPU (`CUDA_VISIBLE_DEVICES` and
    /// `HIP_VISIBLE_DEVICES` both set to the id: CUDA reads the first, ROCm's HIP the second and ignores the
    /// first when the second is set).
    pub fn command_on(&self, gpu: Option<&str>) -> Command {
        let mut c = Command::new(&self.python);
        c.arg(&self.script);
        c.args(&self.extra_args);
        if let Some(id) = gpu {
            c.env("CUDA_VISIBLE_DEVICES", id).env("HIP_VISIBLE_DEVICES", id);
        }
        c
    }

    pub fn spawn_error(&self, e: std::io::Error) -> anyhow::Error {
        anyhow!(
            "cannot start the harness with Python `{}`: {e}; pass --python with an interpreter that has PyTorch and Triton",
            self.python.display()
        )
    }

    /// Explains a non-zero harness exit; `tail` is the end of its stderr.
    pub fn exit_error(&self, status: ExitStatus, tail: &str) -> anyhow::Error {
        use std::os::unix::process::ExitStatusExt;
        let py = self.python.display();
        let tail = match tail.trim() {
            "" => "no output on stderr",
            t => t,
        };
        match status.code() {
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
            None => match status.signal() {
                Some(sig) => anyhow!("the harness was killed by signal {sig} ({}): {tail}", signal_name(sig)),
                None => anyhow!("the harness ended without an exit status: {tail}"),
            },
        }
    }

    /// Asks the harness for the device description (also the early check for Python, PyTorch, GPU),
    /// waiting at most [`PROBE_LIMIT`].
    pub fn probe(&self) -> Result<DeviceInfo> {
        self.probe_within(PROBE_LIMIT)
    }

    /// [`Harness::probe`], waiting at most `limit` (then the harness's process group is killed).
    pub fn probe_within(&self, limit: Duration) -> Result<DeviceInfo> {
        self.probe_on(None, limit)
    }

    /// [`Harness::probe_within`] with only `gpu` visible to the harness ([`Harness::command_on`]).
    pub fn probe_on(&self, gpu: Option<&str>, limit: Duration) -> Result<DeviceInfo> {
        let out = synth_base::process::run_capture(self.command_on(gpu).arg("--probe"), limit, PROBE_CAP)
            .map_err(|e| self.spawn_error(e))?;
        let Some(status) = out.status else {
            bail!(
                "harness --probe gave no answer in {} s and was stopped; check that `{}` starts (and that the GPU \
                 is not hung)",
                limit.as_secs_f64(),
                self.python.display()
            );
        };
        if !status.success() {
            return Err(self.exit_error(status, &String::from_utf8_lossy(&out.stderr)));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
        let info: DeviceInfo = serde_json::from_str(line).with_context(|| {
            format!("harness --probe printed {}, expected one JSON object", synth_base::sanitize::shown(line))
        })?;
        info.check().with_context(|| format!("harness --probe printed {}", synth_base::sanitize::shown(line)))?;
        Ok(info)
    }

    /// Measures `cells` (written to `plan_path` first), appending every result to `journal` as it
    /// arrives and calling `on_row` after each. Harness stderr lines go to `on_log`. Returns the number
    /// of rows appended.
    ///
    /// The harness runs in its own process group: past `cell_timeout` without a result the group is
    /// killed; once the harness has exited, output is read until its pipes close or
    /// [`synth_base::process::LINGER_GRACE`] later (a leftover grandchild holding them is killed with the group).
    pub fn run(
        &self,
        cells: &[PlanCell],
        plan_path: &std::path::Path,
        journal: &mut Journal,
        on_row: impl FnMut(&CellResult),
        on_log: impl Fn(&str) + Send + 'static,
    ) -> Result<usize> {
        self.run_until(cells, plan_path, journal, None, on_row, on_log)
    }

    /// [`Harness::run`] that also stops at `deadline`: once it passes, the harness's process group is killed
    /// (also in the middle of a cell) and the error is [`DeadlineReached`] (downcast it to tell it from a
    /// failure); the cells finished before it are in the journal.
    pub fn run_until(
        &self,
        cells: &[PlanCell],
        plan_path: &std::path::Path,
        journal: &mut Journal,
        deadline: Option<Instant>,
        mut on_row: impl FnMut(&CellResult),
        on_log: impl Fn(&str) + Send + 'static,
    ) -> Result<usize> {
        write_plan(cells, plan_path)?;
        let mut child = Watched::spawn(self.command().arg("--plan").arg(plan_path)).map_err(|e| self.spawn_error(e))?;
        let wanted: std::collections::HashMap<_, &PlanCell> = cells.iter().map(|c| (c.key(), c)).collect();
        let mut st = RunState {
            device: journal.rows().first().map(|r| (r.gfx.clone(), r.cu_num, r.device.clone())),
            appended: 0,
            line_no: 0,
            tail: Vec::new(),
        };
        let mut last_result = Instant::now();
        let mut torn: Option<String> = None;
        let outcome: Result<ExitStatus> = loop {
            // Checked at every event, so a harness that keeps printing log lines cannot hold it off.
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break Err(DeadlineReached { appended: st.appended, planned: cells.len() }.into());
            }
            let tick = deadline.map_or(TICK, |d| TICK.min(d.saturating_duration_since(Instant::now())));
            let ev = match child.next(tick) {
                Ok(ev) => ev,
                Err(e) => break Err(anyhow!("waiting for the harness: {e}")),
            };
            match ev {
                Event::Line(Stream::Stderr, line) => {
                    on_log(&line);
                    st.tail.push(line);
                    if st.tail.len() > 20 {
                        st.tail.remove(0);
                    }
                }
                Event::Unterminated(Stream::Stderr, line) => {
                    on_log(&line);
                    st.tail.push(line);
                }
                Event::Unterminated(Stream::Stdout, line) if torn_output(&line).is_some() => torn = torn_output(&line),
                Event::Line(Stream::Stdout, line) | Event::Unterminated(Stream::Stdout, line) => {
                    match st.take_line(&line, &wanted, journal) {
                        Ok(Some(row)) => {
                            last_result = Instant::now();
                            on_row(&row);
                        }
                        Ok(None) => {}
                        Err(e) => break Err(e),
                    }
                }
                Event::ReadError(_, e) => break Err(anyhow!("reading harness output: {e}")),
                Event::Exited(status) => break Ok(status),
                // Every cell is in: a harness that does not exit (a hung teardown) is stopped; nothing is lost.
                Event::Idle if st.appended == cells.len() && last_result.elapsed() >= self.exit_grace() => {
                    child.kill();
                    on_log(&format!(
                        "note: the harness delivered every cell but had not exited {:.0} s later; it was stopped",
                        self.exit_grace().as_secs_f64()
                    ));
                    return Ok(st.appended);
                }
                Event::Idle if last_result.elapsed() >= self.cell_timeout => {
                    break Err(self.timeout_error(cells, journal, st.appended))
                }
                Event::Idle => {}
            }
        };
        let status = match outcome {
            Ok(s) => s,
            Err(e) => {
                child.kill();
                return Err(e);
            }
        };
        self.exited(status, &st, torn, cells.len())
    }

    /// The outcome of a harness that exited with `status` after the rows of `st`, of `planned` cells (`torn`:
    /// what its stdout's torn last line said): the rows appended, or why the run failed.
    fn exited(&self, status: ExitStatus, st: &RunState, torn: Option<String>, planned: usize) -> Result<usize> {
        let torn = torn.map(|t| format!("; {t}")).unwrap_or_default();
        if !status.success() {
            let e = self.exit_error(status, &st.tail.join("\n"));
            return Err(if torn.is_empty() { e } else { anyhow!("{e:#}{torn}") });
        }
        if st.appended < planned {
            bail!(
                "the harness exited after {} of {planned} cells without an error{torn}; run again to resume",
                st.appended
            );
        }
        Ok(st.appended)
    }

    fn timeout_error(&self, cells: &[PlanCell], journal: &Journal, appended: usize) -> anyhow::Error {
        let next = cells.iter().find(|c| !journal.is_done(&c.key()));
        anyhow!(
            "the harness produced no result for {:.0} s (--cell-timeout) and was stopped{}; the {appended} \
             cells finished in this run are in the journal: run again to resume, or raise --cell-timeout",
            self.cell_timeout.as_secs_f64(),
            next.map(|c| format!(
                " while measuring M={} N={} K={} kernelId {} splitK {}",
                c.m, c.n, c.k, c.kernel_id, c.split_k
            ))
            .unwrap_or_default()
        )
    }
}

/// Longest wait for `--probe`.
pub const PROBE_LIMIT: Duration = Duration::from_secs(600);
/// Most bytes of each probe stream kept.
const PROBE_CAP: usize = 1 << 20;
/// Poll interval of the harness loop.
pub const TICK: Duration = Duration::from_millis(100);

/// What a harness run has read so far.
struct RunState {
    /// Every row must come from the device the journal already holds (or the first row of this run).
    device: Option<(String, u32, String)>,
    appended: usize,
    line_no: usize,
    tail: Vec<String>,
}

impl RunState {
    /// Checks one stdout line and appends its row; `Ok(None)` for a blank line.
    fn take_line(
        &mut self,
        line: &str,
        wanted: &std::collections::HashMap<CellKey, &PlanCell>,
        journal: &mut Journal,
    ) -> Result<Option<CellResult>> {
        self.line_no += 1;
        let row = take_result(line, self.line_no, wanted, &mut self.device, journal)?;
        if row.is_some() {
            self.appended += 1;
        }
        Ok(row)
    }
}

/// Checks stdout line `i` of a harness run against the run's cells (`wanted`) and the journal's device, and
/// appends its row to the journal; `Ok(None)` for a blank line.
pub fn take_result<P: std::borrow::Borrow<PlanCell>>(
    line: &str,
    i: usize,
    wanted: &std::collections::HashMap<CellKey, P>,
    device: &mut Option<(String, u32, String)>,
    journal: &mut Journal,
) -> Result<Option<CellResult>> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let shown = || synth_base::sanitize::shown(&line.chars().take(300).collect::<String>());
    let row: CellResult =
        serde_json::from_str(line).map_err(|e| anyhow!("harness output line {i}: {e}: {}", shown()))?;
    let Some(cell) = wanted.get(&row.key()) else {
        bail!("harness output line {i} is for a cell not in the plan: {}", shown());
    };
    check_against_plan(&row, cell.borrow(), device)
        .map_err(|e| anyhow!("harness output line {i}: {e}; the row was not written: {}", shown()))?;
    journal.append(row.clone())?;
    Ok(Some(row))
}

/// What a harness row must agree on with its plan cell and the journal before it is written: the
/// kernel name and libtype the plan sent, a measured time (no screening estimate), and one device (gfx, CU count, device name) per journal.
fn check_against_plan(row: &CellResult, cell: &PlanCell, device: &mut Option<(String, u32, String)>) -> Result<()> {
    use synth_base::sanitize::shown;
    if row.kernel_name != cell.kernel_name {
        bail!(
            "kernelName \"{}\" is not the plan's \"{}\" for kernelId {}",
            shown(&row.kernel_name),
            cell.kernel_name,
            cell.kernel_id
        );
    }
    if row.libtype != cell.libtype() {
        bail!("libtype \"{}\" is not the plan's \"{}\"", row.libtype, cell.libtype());
    }
    if row.timing == "estimate" {
        bail!(
            "timing \"estimate\" is a screening figure, not a measured latency (the journal reader refuses it); \
             run the harness without --slow-reps 0 so that every cell is timed"
        );
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

/// Writes `cells` to the plan file at `plan_path`, one JSON line each.
fn write_plan(cells: &[PlanCell], plan_path: &std::path::Path) -> Result<()> {
    let mut f =
        std::fs::File::create(plan_path).with_context(|| format!("cannot write plan {}", plan_path.display()))?;
    for c in cells {
        writeln!(f, "{}", c.to_json_line())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A harness that prints a log line every 10 ms and never a result: the deadline stops it (the per-cell
    /// watchdog, an hour here, never fires), its process group is killed, and the error says so.
    #[test]
    fn the_deadline_stops_a_harness_that_keeps_logging() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = synth_core::catalog::Catalog::embedded();
        let (mut journal, _) = Journal::open(&dir.path().join("j.csv"), &catalog).unwrap();
        let harness = Harness {
            python: "python3".into(),
            script: "-c".into(),
            extra_args: vec![
                "import sys, time\nwhile True:\n print('log', file=sys.stderr, flush=True)\n time.sleep(0.01)\n".into(),
            ],
            cell_timeout: Duration::from_secs(3600),
        };
        let started = Instant::now();
        let deadline = Some(started + Duration::from_millis(800));
        let plan = dir.path().join("plan.jsonl");
        let err = harness.run_until(&[], &plan, &mut journal, deadline, |_| {}, |_| {}).unwrap_err();
        let reached = err.downcast_ref::<DeadlineReached>().expect("stopped at the deadline");
        assert_eq!((reached.appended, reached.planned), (0, 0));
        assert!(started.elapsed() >= Duration::from_millis(800), "{:?}", started.elapsed());
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        // Without a deadline the same harness exits on its own terms (here: at once, successfully).
        let quick = Harness { extra_args: vec!["pass".into()], ..harness };
        assert_eq!(quick.run_until(&[], &plan, &mut journal, None, |_| {}, |_| {}).unwrap(), 0);
    }
}
