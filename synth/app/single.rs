//! The single-dataset job of `synth run` (`--dataset`, `--model` or `--spec`): loads the latency table,
//! keeps the model's layers, draws the training sample (stratified M values × layers), synthesizes a rule
//! within the limits, writes the rule's files (C++ header, instance list, Rust module, rule JSON, AITER
//! patch, comparison CSV, SVG and PNG, leaves curve) into `--out` (never the committed `generated/`), and
//! prints the comparison on every held-out shape against the default, the offline-tuned table built from
//! the same training shapes, the nearest-tuned-M lookup, the published rule and the oracle.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::bail;

use synth_core::compare::{self, Policy, Report};
use synth_core::render::{writer::GeneratedFile, Provenance};
use synth_core::synthesize::curve::{curve_csv, curve_table, cv_curve, sample_curve, CurvePoint};
use synth_core::synthesize::{synthesize_budgets, Limits, Synthesized};

use super::args::RunArgs;
use super::args::{Effort, ResolvedLimits, STANDARD_LIMITS};
use super::line::CommandLine;
use super::session::{summary_figure, Sample, Scope, Session, DEFAULT_MODEL};
use super::shared::{rule_outline, COMPARE_CSV, CURVE_CSV, SPEEDUP_PNG, SPEEDUP_SVG};

/// Leaf budgets of the curve.
pub const CURVE_BUDGETS: [usize; 4] = [4, 8, 16, 32];
/// Folds of the cross-validated curve.
pub const CV_FOLDS: usize = 5;

/// What the single-dataset job runs with, every option resolved against its defaults.
#[derive(Debug, Clone)]
pub struct SingleJob {
    pub limits: ResolvedLimits,
    pub synthesis: Limits,
    pub train_all: bool,
    pub line: CommandLine,
}

impl SingleJob {
    /// The job of `args` on `session`; an error for an option it cannot use.
    pub fn resolve(args: &RunArgs, session: &Session) -> anyhow::Result<SingleJob> {
        if args.sample.sample_m == 0 && !args.train_all {
            bail!("--sample-m must be at least 1 (or pass --train-all)");
        }
        let limits = args.limits.resolve(STANDARD_LIMITS)?;
        let synthesis = effort(args).apply(limits.limits());
        Ok(SingleJob { line: line(args, session, &limits), limits, synthesis, train_all: args.train_all })
    }
}

/// The "Regenerate with" line of the job: every setting it used that differs from its default. The data is
/// always named (by the name provenance gives it), so the line runs this job and not the multi-model one.
fn line(args: &RunArgs, session: &Session, limits: &ResolvedLimits) -> CommandLine {
    let mut l = CommandLine::new("run");
    for d in &session.dataset_args {
        l.always("--dataset", d);
    }
    super::resolve::write_model_line(&args.data.model, &mut l, DEFAULT_MODEL);
    l.value("--tp", args.data.tp, 2);
    args.data.backends.write_line(&mut l);
    if !args.train_all {
        args.sample.write_line(&mut l);
    }
    l.flag("--train-all", args.train_all);
    limits.write_line(&mut l);
    effort(args).write_line(&mut l);
    if let Some(t) = &args.tuned {
        l.path("--tuned", t);
    }
    l.flag("--tuned-any-device", args.tuned.is_some() && args.tuned_any_device);
    l.paths("--rule", &args.rule);
    l
}

/// The effort flags of `args`.
fn effort(args: &RunArgs) -> Effort {
    Effort::new(args.exact_depth, args.no_refine, args.no_split_k_guards)
}

/// The rule and what was measured of it.
struct Outcome {
    sample: Sample,
    synth: Synthesized,
    synth_time: Duration,
    report: Report,
    points: Vec<CurvePoint>,
    curve_time: Duration,
    /// What the backend policies are (`--backends`).
    notes: Vec<String>,
}

/// Runs the single-dataset job.
pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let session = Session::open(&args.data, Scope::DefaultModel)?;
    session.check_backend_rows()?;
    let job = SingleJob::resolve(args, &session)?;
    if !args.check {
        // Before the synthesis: an --out inside a dataset directory is refused at once.
        let target = super::outputs::out_dir(args.out.as_deref(), false, "run")?;
        super::outputs::check_out_dir(&target.dir, &[], &super::outputs::run_inputs(args))?;
    }
    let o = synthesize_and_score(args, &session, &job)?;
    let scope = if job.train_all { "in-sample" } else { "held-out" };
    let provenance = Provenance {
        dataset: session.dataset_text(),
        training: training_text(args, &session, &o.sample, job.limits.weight),
        figures: vec![o.synth.shape_line(), summary_figure(scope, &o.report, "synthesized")?],
        command: job.line.text(),
    };
    // The single-dataset job never writes the committed generated/ unless --out says so.
    let target = super::outputs::out_dir(args.out.as_deref(), false, "run")?;
    let (files, export_note) = job_files(&session, &o, scope, &provenance, &target.dir)?;
    let written = files.and_then(|f| {
        if !args.check {
            super::outputs::check_out_dir(&target.dir, &f, &super::outputs::run_inputs(args))?;
        }
        super::outputs::write_files(&target.dir, &f, args.check)
    });
    let mut text = super::outputs::run_header(&provenance);
    text.push_str(&job_text(args, &session, &o, scope, export_note.as_deref()));
    let end = super::outputs::RunEnd {
        target: &target,
        main_job: false,
        out_given: args.out.is_some(),
        check: args.check,
        blank_line: false,
        started,
    };
    super::outputs::finish_run(text, written, &end)
}

/// The job's files (the rule's forms, the comparison CSV and plot, the curve, the Python selector with
/// `--backends`, the runtimes' config files of a triton rule), and the note on the runtime files.
fn job_files(
    session: &Session,
    o: &Outcome,
    scope: &str,
    provenance: &Provenance,
    out: &std::path::Path,
) -> anyhow::Result<(anyhow::Result<Vec<GeneratedFile>>, Option<String>)> {
    let (catalog, matrix, what) = (&session.catalog, &session.matrix, &session.what);
    let title = format!("{what} on {} — {scope} shapes", matrix.device.as_deref().unwrap_or(&matrix.gfx));
    let svg = compare::plot::speedup_svg(&o.report, &session.names, &title)?;
    let png = compare::raster::svg_to_png(&svg)?;
    let mut extra = vec![
        GeneratedFile::new(COMPARE_CSV, compare::report::csv(&o.report, &session.names)),
        GeneratedFile::new(SPEEDUP_SVG, svg),
        GeneratedFile::binary(SPEEDUP_PNG, png),
        GeneratedFile::new(CURVE_CSV, curve_csv(&o.points)),
    ];
    if session.backends.is_some() {
        // The rule for a runtime that chooses between backends in Python.
        extra.push(super::outputs::python_file(&o.synth.rule, catalog, provenance)?);
    }
    let export_note = runtime_exports(&o.synth.rule, session, out, &mut extra)?;
    Ok((super::outputs::rule_files(&o.synth.rule, catalog, matrix, provenance, extra), export_note))
}

/// What the job prints after the header: the rule, its outline, the comparison, the backends, the runtime
/// files and the curve.
fn job_text(args: &RunArgs, session: &Session, o: &Outcome, scope: &str, export_note: Option<&str>) -> String {
    let mut text = String::new();
    let s = &o.synth;
    let _ = writeln!(
        text,
        "rule:     {} leaves ({} split-K guards), depth {}, instances {:?}; its picks sum to {:.3} ms of measured \
         latency on the training shapes ({} unusable picks); synthesized in {:.2} s\n",
        s.leaves,
        s.guards,
        s.depth,
        s.instances,
        s.train_us / 1000.0,
        s.unusable,
        o.synth_time.as_secs_f64()
    );
    text.push_str(&rule_outline(&s.rule, &session.catalog));
    let _ = writeln!(text, "\ncomparison on {} {scope} shapes:", o.report.shapes.len());
    let _ = writeln!(text, "{}", compare::report::table(&o.report, &session.names));
    if let Some(b) = &session.backends {
        let _ = writeln!(
            text,
            "backends {b}: `synthesized` is the mixed rule, `rule[B]` each backend's own rule, `oracle[B]` its \
             oracle, `oracle` the union oracle"
        );
        for n in &o.notes {
            let _ = writeln!(text, "  {n}");
        }
        let _ = writeln!(text);
    }
    if let Some(note) = export_note {
        let _ = writeln!(text, "{note}\n");
    }
    if args.curve {
        let _ = writeln!(text, "leaves versus quality (curve computed in {:.2} s):", o.curve_time.as_secs_f64());
        let _ = writeln!(text, "{}", curve_table(&o.points));
    }
    text
}

/// Subdirectories of a run's output for the runtimes' config files of a rule over the triton family.
pub const RUNTIME_DIRS: [(synth_core::export::Runtime, &str); 2] =
    [(synth_core::export::Runtime::Vllm, "vllm"), (synth_core::export::Runtime::Sglang, "sglang")];

/// A rule whose every leaf is a triton config gets the vLLM and SGLang config files of the model's layers
/// for the data's device (as `synth export` writes them, in `vllm/` and `sglang/` of `out`, under the same
/// provenance check: a config file there that no export wrote is never replaced); returns what the
/// terminal says about them (`None` for a rule with leaves of other backends, which no runtime file holds).
/// Where no file name can be made of the data's device (none named, or one the runtimes' names cannot
/// hold), only these files are left out, with a note naming the `synth export` that writes them.
fn runtime_exports(
    rule: &synth_core::rule::Rule,
    session: &Session,
    out: &std::path::Path,
    extra: &mut Vec<GeneratedFile>,
) -> anyhow::Result<Option<String>> {
    if !super::export::exportable(rule) {
        return Ok(None);
    }
    let export_line = "run `synth export vllm|sglang --rule rule.json --device-name NAME ...` with the GPU's name as \
                       the runtime reports it";
    let Some(device) = session.matrix.device.as_deref() else {
        return Ok(Some(format!(
            "vLLM/SGLang config files: not written, the data names no device (journal column `device`); {export_line}"
        )));
    };
    let device = match synth_core::export::device_part(device) {
        Ok(d) => d,
        Err(why) => {
            return Ok(Some(format!(
                "vLLM/SGLang config files: not written (the rule's other files are), the data's device (journal \
                 column `device`) {why}; {export_line}"
            )))
        }
    };
    let nks: std::collections::BTreeSet<(u32, u32)> =
        session.layers.iter().filter(|l| l.k % synth_core::catalog::triton::SCALE_K == 0).map(|l| (l.n, l.k)).collect();
    let nks: Vec<(u32, u32)> = nks.into_iter().collect();
    for (runtime, dir) in RUNTIME_DIRS {
        let spec = super::export::ExportSpec {
            runtime,
            rule,
            rule_name: super::shared::RULE_JSON,
            rule_file: format!("../{}", super::shared::RULE_JSON),
            device: &device,
            max_m: super::export::DEFAULT_MAX_M,
        };
        for f in super::export::runtime_files(&spec, &nks, &out.join(dir))? {
            extra.push(GeneratedFile { name: format!("{dir}/{}", f.name), contents: f.contents });
        }
    }
    Ok(Some(format!(
        "vLLM/SGLang config files: {} layers × 2 runtimes for device {device} in vllm/ and sglang/ (the runtimes' \
         nearest-M lookup proved to return the rule's config at every M in 1..={})",
        nks.len(),
        super::export::DEFAULT_MAX_M
    )))
}

/// The training sample, the rule (one search serves it and the sample curve), its comparison on the
/// held-out shapes and the curves.
fn synthesize_and_score(args: &RunArgs, session: &Session, job: &SingleJob) -> anyhow::Result<Outcome> {
    let (catalog, matrix) = (&session.catalog, &session.matrix);
    let sample = if job.train_all { session.every_shape() } else { session.sample(&args.sample) };
    if sample.train.is_empty() {
        bail!("the training sample is empty");
    }
    if sample.heldout.is_empty() {
        bail!("every shape is in the training sample: nothing is held out; lower --sample-m or pass --train-all");
    }
    let weight = job.limits.weight;
    let weights = weight.weights(matrix, &sample.train);
    let t0 = Instant::now();
    let mut budgets = vec![job.synthesis.max_leaves];
    budgets.extend(CURVE_BUDGETS);
    let results = synthesize_budgets(matrix, catalog, &sample.train, weights.as_deref(), &job.synthesis, &budgets)?;
    let synth = results[0].clone();
    let synth_time = t0.elapsed();

    let mut extra = Vec::new();
    let mut notes = Vec::new();
    if let Some(backends) = &session.backends {
        // Each backend alone: its own rule, synthesized on the same training shapes from its candidates.
        extra.extend(super::session::own_rules(
            matrix,
            catalog,
            backends,
            &sample.train,
            weights.as_deref(),
            &job.synthesis,
        )?);
        let (policies, lines) = session.backend_policies(&sample.train);
        extra.extend(policies);
        notes.extend(lines);
    }
    if let Some(path) = &args.tuned {
        let (name, table) = session.tuned_file(path, args.tuned_any_device)?;
        extra.push(Policy::Tuned { name, table });
    }
    extra.extend(session.rule_policies(&args.rule)?);
    let policies = session.standard_policies(&sample.train, extra, ("synthesized", &synth.rule))?;
    let report = compare::evaluate(matrix, catalog, &policies, &sample.heldout);

    let t1 = Instant::now();
    let mut points = if job.train_all {
        Vec::new()
    } else {
        sample_curve("sample", matrix, catalog, &sample.train, &sample.heldout, &results[1..], &CURVE_BUDGETS)
    };
    points.extend(cv_curve(matrix, catalog, &session.shapes, CV_FOLDS, weight, &job.synthesis, &CURVE_BUDGETS)?);
    Ok(Outcome { sample, synth, synth_time, report, points, curve_time: t1.elapsed(), notes })
}

/// The provenance's training line.
fn training_text(
    args: &RunArgs,
    session: &Session,
    sample: &Sample,
    weight: synth_core::synthesize::Weighting,
) -> String {
    let what = &session.what;
    if args.train_all {
        return format!("all {} shapes of {what} (weight {:?})", sample.train.len(), weight).to_lowercase();
    }
    format!(
        "{} shapes of {what}: M in {:?} (sample_m of {} dataset M values, {} strata, seed {}) × {} layers; weight {}",
        sample.train.len(),
        sample.picked,
        session.matrix.m_values().len(),
        args.sample.sample_m,
        args.sample.seed,
        session.layers.len(),
        format!("{weight:?}").to_lowercase()
    )
}
