//! Several GPUs of one host (`synth bench --gpus 0,1,…`): one harness worker per GPU, each a harness
//! process that sees only its GPU ([`Harness::command_on`]), fed its share of the cells dealt by shape
//! ([`super::shard::deal_by_shape`]) in one plan file, so it compiles its kernel variants once and keeps
//! them for its whole share. The workers stream their results to this process, which checks each line
//! against the worker's cells and appends it to the one journal: the journal's lock holder stays its only
//! writer, and a cell is written once.
//!
//! A worker fails when its harness exits with an error, is killed, stops early, or gives no result for
//! the cell timeout. Its GPU takes no more work; the cells it had not finished (and those still queued for
//! it) are dealt by shape to the other workers, which measure them in a new harness process once their
//! current one is done. The cell in flight at a failure (the first unfinished one, the harness measuring
//! in plan order) is counted against it: a cell in flight at more than `retries` + 1 failures stops the
//! run, as does a failure every worker would share (bad arguments, no PyTorch or Triton) or a harness
//! line that breaks the protocol. When every worker has failed, the error lists each failure. Finished
//! cells stay in the journal in every case; a rerun resumes.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::driver::{take_result, torn_output, Harness, EXIT_NO_TORCH, EXIT_NO_TRITON, EXIT_USAGE};
use super::journal::{CellResult, Journal};
use super::plan::{CellKey, PlanCell};
use super::shard::deal_by_shape;
use synth_base::process::{Event, Stream, Watched};

/// Default of [`Pool::retries`].
pub const DEFAULT_RETRIES: u32 = 2;

/// Most events read from one worker before the others get their turn.
const BURST: usize = 256;

/// GPU workers over one harness.
pub struct Pool<'a> {
    pub harness: &'a Harness,
    /// The GPU ids, as `CUDA_VISIBLE_DEVICES` / `HIP_VISIBLE_DEVICES` take them; one worker each.
    pub gpus: Vec<String>,
    /// How many times the cell in flight at a worker's failure is dealt to another worker.
    pub retries: u32,
}

/// What [`Pool::run`] reports as it goes.
#[derive(Debug)]
pub enum PoolEvent<'e> {
    /// A worker's harness started on `cells` cells of `shapes` shapes.
    Started { gpu: &'e str, cells: usize, shapes: usize },
    /// A row was written to the journal.
    Row { gpu: &'e str, row: &'e CellResult },
    /// A line of a worker's stderr.
    Log { gpu: &'e str, line: &'e str },
    /// A worker failed; its `moved` unfinished cells went to the listed workers (GPU, cells).
    Failed { gpu: &'e str, error: &'e str, moved: usize, to: &'e [(String, usize)] },
}

/// A harness process of a worker and what it has returned.
struct Job {
    child: Watched,
    /// The plan file it reads (removed when the job ends).
    _plan: tempfile::NamedTempFile,
    cells: Vec<PlanCell>,
    wanted: HashMap<CellKey, PlanCell>,
    line_no: usize,
    appended: usize,
    tail: Vec<String>,
    last_result: Instant,
    /// Set when its stdout ended in the middle of a line ([`super::driver::torn_output`]).
    torn: Option<String>,
}

struct Worker {
    gpu: String,
    /// Cells dealt to it and not yet handed to a harness.
    queue: Vec<PlanCell>,
    job: Option<Job>,
    /// Why it stopped taking work.
    failure: Option<String>,
}

impl Worker {
    fn load(&self) -> u64 {
        (self.queue.len() + self.job.as_ref().map_or(0, |j| j.cells.len() - j.appended)) as u64
    }
}

/// How a job ended.
enum End {
    Done,
    /// The worker failed (message); its cells are dealt again.
    Failed(String),
    /// The run stops.
    Fatal(anyhow::Error),
}

fn shapes_of(cells: &[PlanCell]) -> usize {
    cells.iter().map(|c| c.shape()).collect::<std::collections::HashSet<_>>().len()
}

fn cell_text(c: &PlanCell) -> String {
    format!(
        "M={} N={} K={} kernelId {} splitK {}{}",
        c.m,
        c.n,
        c.k,
        c.kernel_id,
        c.split_k,
        if c.recheck != 0 { " (recheck)" } else { "" }
    )
}

/// What [`Pool::run`] keeps across its workers.
struct RunState {
    /// The device of the rows so far (gfx, CU count, name), which every row must match.
    device: Option<(String, u32, String)>,
    /// The GPUs whose workers failed with each cell in flight.
    in_flight: HashMap<CellKey, Vec<String>>,
    /// Rows appended in this run.
    appended: usize,
}

/// Reads up to [`BURST`] events of `job` (the worker on `gpu`), appending its results to `journal`.
/// Returns whether anything was read, and how the harness ended if it did.
fn read_burst(
    job: &mut Job,
    gpu: &str,
    run: &mut RunState,
    journal: &mut Journal,
    on_event: &mut impl FnMut(PoolEvent),
) -> Result<(bool, Option<Result<ExitStatus, String>>)> {
    let mut active = false;
    for _ in 0..BURST {
        let ev = match job.child.next(Duration::ZERO) {
            Ok(ev) => ev,
            Err(e) => return Ok((active, Some(Err(format!("waiting for the harness: {e}"))))),
        };
        match ev {
            Event::Unterminated(Stream::Stdout, line) if torn_output(&line).is_some() => {
                active = true;
                job.torn = torn_output(&line);
            }
            Event::Line(Stream::Stdout, line) | Event::Unterminated(Stream::Stdout, line) => {
                active = true;
                job.line_no += 1;
                let row = take_result(&line, job.line_no, &job.wanted, &mut run.device, journal)
                    .with_context(|| format!("GPU {gpu}"))?;
                if let Some(row) = row {
                    job.appended += 1;
                    run.appended += 1;
                    job.last_result = Instant::now();
                    on_event(PoolEvent::Row { gpu, row: &row });
                }
            }
            Event::Line(Stream::Stderr, line) | Event::Unterminated(Stream::Stderr, line) => {
                active = true;
                on_event(PoolEvent::Log { gpu, line: &line });
                job.tail.push(line);
                if job.tail.len() > 20 {
                    job.tail.remove(0);
                }
            }
            Event::ReadError(_, e) => return Ok((active, Some(Err(format!("reading harness output: {e}"))))),
            Event::Exited(status) => return Ok((active, Some(Ok(status)))),
            Event::Idle => break,
        }
    }
    Ok((active, None))
}

impl Pool<'_> {
    /// Measures `todo` on the workers into `journal`; returns the rows appended. See the module comment for
    /// what happens on a failure.
    pub fn run(&self, todo: &[PlanCell], journal: &mut Journal, mut on_event: impl FnMut(PoolEvent)) -> Result<usize> {
        if self.gpus.is_empty() {
            bail!("no GPU to measure on");
        }
        let order: HashMap<CellKey, usize> = todo.iter().enumerate().map(|(i, c)| (c.key(), i)).collect();
        let mut workers: Vec<Worker> = deal_by_shape(todo, &vec![0; self.gpus.len()])
            .into_iter()
            .zip(&self.gpus)
            .map(|(queue, gpu)| Worker { gpu: gpu.clone(), queue, job: None, failure: None })
            .collect();
        let mut run = RunState {
            device: journal.rows().first().map(|r| (r.gfx.clone(), r.cu_num, r.device.clone())),
            in_flight: HashMap::new(),
            appended: 0,
        };
        loop {
            for w in workers.iter_mut().filter(|w| w.job.is_none() && w.failure.is_none() && !w.queue.is_empty()) {
                let mut cells = std::mem::take(&mut w.queue);
                cells.sort_by_key(|c| order.get(&c.key()).copied().unwrap_or(usize::MAX));
                on_event(PoolEvent::Started { gpu: &w.gpu, cells: cells.len(), shapes: shapes_of(&cells) });
                w.job = Some(self.start(&w.gpu, cells)?);
            }
            if workers.iter().all(|w| w.job.is_none()) {
                break;
            }
            let mut quiet = true;
            for i in 0..workers.len() {
                if self.turn(i, &mut workers, &mut run, journal, &mut on_event)? {
                    quiet = false;
                }
            }
            if quiet {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let left = todo.iter().filter(|c| !journal.is_done(&c.key())).count();
        if left > 0 {
            let why: Vec<String> = workers
                .iter()
                .map(|w| format!("  GPU {}: {}", w.gpu, w.failure.as_deref().unwrap_or("no failure")))
                .collect();
            bail!(
                "every GPU worker failed, with {left} of {} cells not measured; the {} cells measured in this \
                 run are in the journal: run again to resume (with --gpus naming GPUs that work)\n{}",
                todo.len(),
                run.appended,
                why.join("\n")
            );
        }
        Ok(run.appended)
    }

    /// Worker `i`'s turn: up to [`BURST`] events of its harness, then its job ends if the harness exited,
    /// failed, or stayed silent past the exit grace (every cell in) or the cell timeout. Returns whether
    /// anything happened.
    fn turn(
        &self,
        i: usize,
        workers: &mut [Worker],
        run: &mut RunState,
        journal: &mut Journal,
        on_event: &mut impl FnMut(PoolEvent),
    ) -> Result<bool> {
        let gpu = workers[i].gpu.clone();
        let Some(job) = workers[i].job.as_mut() else { return Ok(false) };
        let (active, mut ended) = read_burst(job, &gpu, run, journal, on_event)?;
        let delivered = job.appended == job.cells.len();
        if ended.is_none() && delivered && job.last_result.elapsed() >= self.harness.exit_grace() {
            // Every cell is in: a harness that does not exit (a hung teardown) is stopped, nothing lost.
            on_event(PoolEvent::Log {
                gpu: &gpu,
                line: &format!(
                    "note: the harness delivered every cell but had not exited {:.0} s later; it was stopped",
                    self.harness.exit_grace().as_secs_f64()
                ),
            });
            let mut job = workers[i].job.take().expect("a running job");
            job.child.kill();
            return Ok(active);
        }
        if ended.is_none() && job.last_result.elapsed() >= self.harness.cell_timeout {
            ended = Some(Err(format!(
                "the harness produced no result for {:.0} s (--cell-timeout) and was stopped",
                self.harness.cell_timeout.as_secs_f64()
            )));
        }
        let Some(ended) = ended else { return Ok(active) };
        let mut job = workers[i].job.take().expect("a running job");
        job.child.kill();
        match self.outcome(&job, ended, journal) {
            End::Done => {}
            End::Fatal(e) => return Err(e.context(format!("GPU {gpu}"))),
            End::Failed(msg) => self.fail(i, job, msg, workers, &mut run.in_flight, journal, on_event)?,
        }
        Ok(true)
    }

    /// Starts a harness on `gpu` for `cells` (written to a plan file of its own).
    fn start(&self, gpu: &str, cells: Vec<PlanCell>) -> Result<Job> {
        let mut plan = super::auxfile::plan_file()?;
        for c in &cells {
            writeln!(plan, "{}", c.to_json_line()).context("cannot write a plan file")?;
        }
        plan.flush().context("cannot write a plan file")?;
        let child = Watched::spawn(self.harness.command_on(Some(gpu)).arg("--plan").arg(plan.path()))
            .map_err(|e| self.harness.spawn_error(e))?;
        let wanted = cells.iter().map(|c| (c.key(), c.clone())).collect();
        Ok(Job {
            child,
            _plan: plan,
            cells,
            wanted,
            line_no: 0,
            appended: 0,
            tail: Vec::new(),
            last_result: Instant::now(),
            torn: None,
        })
    }

    fn outcome(&self, job: &Job, ended: Result<ExitStatus, String>, journal: &Journal) -> End {
        let torn = job.torn.as_deref().map(|t| format!("; {t}")).unwrap_or_default();
        let status = match ended {
            Ok(s) => s,
            Err(msg) => return End::Failed(format!("{msg}{torn}")),
        };
        let tail = job.tail.join("\n");
        match status.code() {
            Some(0) => {
                let left = job.cells.iter().filter(|c| !journal.is_done(&c.key())).count();
                if left == 0 {
                    End::Done
                } else {
                    End::Failed(format!(
                        "the harness exited after {} of {} cells without an error{torn}",
                        job.cells.len() - left,
                        job.cells.len()
                    ))
                }
            }
            // What every worker of this host would run into: stop at once.
            Some(EXIT_USAGE | EXIT_NO_TORCH | EXIT_NO_TRITON) => End::Fatal(self.harness.exit_error(status, &tail)),
            _ => End::Failed(format!("{:#}{torn}", self.harness.exit_error(status, &tail))),
        }
    }

    /// Worker `i` failed: its unfinished and queued cells are dealt to the workers still working.
    #[allow(clippy::too_many_arguments)]
    fn fail(
        &self,
        i: usize,
        job: Job,
        msg: String,
        workers: &mut [Worker],
        in_flight: &mut HashMap<CellKey, Vec<String>>,
        journal: &Journal,
        on_event: &mut impl FnMut(PoolEvent),
    ) -> Result<()> {
        let gpu = workers[i].gpu.clone();
        let mut moved: Vec<PlanCell> = job.cells.into_iter().filter(|c| !journal.is_done(&c.key())).collect();
        if let Some(first) = moved.first() {
            let seen = in_flight.entry(first.key()).or_default();
            seen.push(gpu.clone());
            if seen.len() as u32 > self.retries {
                bail!(
                    "cell {} was being measured when the workers on GPU {} failed: more than --worker-retries {} \
                     retries, so the run stopped (the last failure, GPU {gpu}: {msg}); finished cells are in the \
                     journal: run again to resume, or leave that cell out (--instances, --m-set)",
                    cell_text(first),
                    seen.join(", "),
                    self.retries
                );
            }
        }
        moved.append(&mut workers[i].queue);
        workers[i].failure = Some(msg.clone());
        let alive: Vec<usize> = (0..workers.len()).filter(|&j| workers[j].failure.is_none()).collect();
        let loads: Vec<u64> = alive.iter().map(|&j| workers[j].load()).collect();
        let mut to = Vec::new();
        for (&j, cells) in alive.iter().zip(deal_by_shape(&moved, &loads)) {
            if !cells.is_empty() {
                to.push((workers[j].gpu.clone(), cells.len()));
                workers[j].queue.extend(cells);
            }
        }
        on_event(PoolEvent::Failed { gpu: &gpu, error: &msg, moved: moved.len(), to: &to });
        Ok(())
    }
}

/// Probes every GPU of `gpus` at once (each with only its GPU visible) and checks that they are one kind of
/// device with one software stack: a journal holds one device. Returns the description they share.
pub fn probe_all(harness: &Harness, gpus: &[String], limit: Duration) -> Result<super::DeviceInfo> {
    let found: Vec<Result<super::DeviceInfo>> = std::thread::scope(|s| {
        let handles: Vec<_> = gpus.iter().map(|g| s.spawn(move || harness.probe_on(Some(g), limit))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow!("the probe thread panicked")))).collect()
    });
    let mut infos = Vec::with_capacity(gpus.len());
    for (gpu, r) in gpus.iter().zip(found) {
        infos.push(r.with_context(|| format!("GPU {gpu} (--gpus)"))?);
    }
    let first = infos.first().cloned().ok_or_else(|| anyhow!("no GPU to probe"))?;
    let describe = |d: &super::DeviceInfo| {
        format!(
            "\"{}\" ({}, {} CUs/SMs, {}; torch {}, triton {})",
            synth_base::sanitize::shown(&d.name),
            synth_base::sanitize::shown(&d.gfx),
            d.cu_num,
            synth_base::sanitize::shown(&d.backend),
            synth_base::sanitize::shown(&d.torch),
            synth_base::sanitize::shown(&d.triton)
        )
    };
    for (gpu, d) in gpus.iter().zip(&infos).skip(1) {
        let same = (&d.name, &d.gfx, d.cu_num, &d.backend, &d.torch, &d.triton)
            == (&first.name, &first.gfx, first.cu_num, &first.backend, &first.torch, &first.triton);
        if !same {
            bail!(
                "GPU {gpu} is {} but GPU {} is {}: one journal holds one kind of device; pass --gpus with GPUs of one \
                 kind (and measure the others into a journal of their own)",
                describe(d),
                gpus[0],
                describe(&first)
            );
        }
    }
    Ok(first)
}
