//! The main job (`synth run` with no options): the rules the project ships, in every form, in one
//! transaction into the checkout's `generated/`.
//!
//! - The CK rule: the multi-model job on the zoo manifest ([`CK_MANIFEST`]) at the setting chosen by
//!   leave-one-model-out ([`ck_job`]); its files at the top of `generated/` (C++ header, instance CSV, Rust
//!   module, rule JSON, the evaluations, plot and curve, the AITER patch).
//! - The Triton rules, one per card ([`TRITON_RULES`]): the multi-model job with `--backends triton` on every
//!   configuration measured with the kept config set on that card, settings chosen by leave-one-model-out
//!   over those configurations ([`triton_job`]); the H200's files under `triton/`, the H100's under
//!   `triton-h100/` (the Python selector too).
//! - The vLLM and SGLang config files of each card's Triton rule for every built-in model at [`COMMON_TP`],
//!   named for that card (`vllm/<device>/`, `sglang/<device>/`, each with its provenance sidecar, every M
//!   in `1..=16384` proved), and `runtime_layers.csv` naming the model layers each file serves.
//!
//! DeepSeek-V3 (and every model sharing its layers) is in neither manifest: it is the held-out model.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use synth_core::render::writer::GeneratedFile;
use synth_core::synthesize::FeatureSet;

use super::args::{Effort, LimitArgs, SampleArgs};
use super::multi::{prepare, MultiJob};

/// The CK rule's manifest (embedded in the binary with its journals).
pub const CK_MANIFEST: &str = "measurements/zoo/datasets.toml";
/// The H200's Triton rule's manifest (embedded in the binary with its journal).
pub const TRITON_MANIFEST: &str = "measurements/h200/triton-manifest/datasets.toml";
/// The H100's Triton rule's manifest (embedded in the binary with its journal).
pub const TRITON_MANIFEST_H100: &str = "measurements/h100/triton-manifest/datasets.toml";
/// Where the H200's Triton rule's files go in `generated/` (`triton/rule.json` is read by other commands).
pub const TRITON_DIR: &str = "triton";
/// The tensor-parallel degrees the runtime files cover, for each built-in model where its layers split.
pub const COMMON_TP: [u32; 4] = [1, 2, 4, 8];
/// The list of exported model layers.
pub const RUNTIME_LAYERS_CSV: &str = "runtime_layers.csv";

/// The CK rule's job: the zoo manifest, 70 training M per configuration, 24 leaves, the contrast features
/// and a 0.5 % split-K fallback margin (chosen on the leave-one-model-out folds). Its 19 folds (one 24-leaf
/// rule each, about a minute on 2 cores) are not part of the main job (`--no-folds`): its line without that
/// flag runs them, and `measurements/zoo/folds/` holds that run's evaluations.
pub fn ck_job() -> anyhow::Result<MultiJob> {
    let limits = LimitArgs {
        max_leaves: Some(24),
        features: Some(FeatureSet::Contrast),
        split_k_fallback: Some(0.5),
        ..LimitArgs::default()
    };
    let job =
        MultiJob::resolve(&limits, &SampleArgs { sample_m: 70, seed: 0 }, Effort::default(), Path::new(CK_MANIFEST))?;
    Ok(job.without_folds())
}

/// Training M per configuration of the H200's Triton rule (chosen on its leave-one-model-out folds).
pub const TRITON_SAMPLE_M: usize = 40;
/// Leaves of the H200's Triton rule (chosen on its leave-one-model-out folds).
pub const TRITON_LEAVES: usize = 8;

/// One card's Triton rule: its manifest, settings, where its files go and the device its runtime files are
/// named for (as vLLM and SGLang spell it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TritonRule {
    pub manifest: &'static str,
    pub sample_m: usize,
    pub leaves: usize,
    pub dir: &'static str,
    pub device: &'static str,
}

/// The Triton rules the main job ships, each trained on its own card's measurements with the setting its
/// folds chose (the H100's: `measurements/h100/triton-manifest/README.md`).
pub const TRITON_RULES: [TritonRule; 2] = [
    TritonRule {
        manifest: TRITON_MANIFEST,
        sample_m: TRITON_SAMPLE_M,
        leaves: TRITON_LEAVES,
        dir: TRITON_DIR,
        device: "NVIDIA_H200",
    },
    TritonRule {
        manifest: TRITON_MANIFEST_H100,
        sample_m: 20,
        leaves: 24,
        dir: "triton-h100",
        device: "NVIDIA_H100_80GB_HBM3",
    },
];

/// The Triton rule of the card `device` names: the H100's for a name that says H100, else the H200's (as
/// `configs::triton_rule_for` picks the embedded rule).
pub fn triton_rule_of(device: &str) -> &'static TritonRule {
    let h100 = device.to_ascii_uppercase().contains("H100");
    &TRITON_RULES[usize::from(h100)]
}

/// A Triton rule's job: its manifest with `--backends triton`.
pub fn triton_job(spec: &TritonRule) -> anyhow::Result<MultiJob> {
    let limits = LimitArgs { max_leaves: Some(spec.leaves), ..LimitArgs::default() };
    let sample = SampleArgs { sample_m: spec.sample_m, seed: 0 };
    let backends = Some(synth_core::catalog::Backends::parse("triton").map_err(anyhow::Error::msg)?);
    Ok(MultiJob::resolve(&limits, &sample, Effort::default(), Path::new(spec.manifest))?.with_backends(backends))
}

/// Runs the main job, writing into `out` (or the checkout's `generated/`).
pub fn run(out: Option<&Path>, check: bool) -> anyhow::Result<()> {
    let started = Instant::now();
    let ck = prepare(&ck_job()?)?;
    let target = super::outputs::out_dir(out, true, "run")?;
    let mut text = format!("== the CK rule\n\n{}", ck.text);
    let mut inputs: Vec<(&str, PathBuf)> = ck.inputs.clone();
    let mut files = ck.files;
    for spec in &TRITON_RULES {
        let triton = prepare(&triton_job(spec)?)?;
        let _ = write!(text, "\n== the Triton rule of {} (files in {}/)\n\n{}", spec.device, spec.dir, triton.text);
        let runtime = runtime_files(&triton.rule, spec, &target.dir);
        if let Ok((_, note)) = &runtime {
            let _ = write!(text, "\n{note}");
        }
        inputs.extend(triton.inputs.iter().cloned());
        files = files.and_then(|mut files| {
            let dir = spec.dir;
            files.extend(triton.files?.into_iter().map(|f| GeneratedFile { name: format!("{dir}/{}", f.name), ..f }));
            files.extend(runtime?.0);
            Ok(files)
        });
    }
    let written = files.and_then(|mut files| {
        files.push(runtime_layers_csv()?);
        if !check {
            super::outputs::check_out_dir(&target.dir, &files, &inputs)?;
        }
        super::outputs::write_files(&target.dir, &files, check)
    });
    let end = super::outputs::RunEnd {
        target: &target,
        main_job: true,
        out_given: out.is_some(),
        check,
        blank_line: true,
        started,
    };
    super::outputs::finish_run(text, written, &end)
}

/// Every (model, TP, layer) the runtime files serve: the built-in models at each of [`COMMON_TP`] where
/// their layers split, the layers a 128 × 128 block-FP8 GEMM runs (K a multiple of 128).
pub fn runtime_layers() -> anyhow::Result<Vec<(String, u32, synth_core::shapes::Layer)>> {
    let mut out = Vec::new();
    for name in synth_core::shapes::ModelSpec::builtin_names() {
        let spec = synth_core::shapes::ModelSpec::builtin(name).map_err(|e| anyhow::anyhow!("{e}"))?;
        for tp in COMMON_TP {
            let Ok(layers) = spec.layers(tp) else { continue };
            for l in layers.into_iter().filter(|l| l.k % synth_core::catalog::triton::SCALE_K == 0) {
                out.push((name.to_string(), tp, l));
            }
        }
    }
    Ok(out)
}

/// The vLLM and SGLang files of `rule` for every layer of [`runtime_layers`], named for `spec`'s device (as
/// they go into `out`), and what the terminal says about them.
fn runtime_files(
    rule: &synth_core::rule::Rule,
    spec: &TritonRule,
    out: &Path,
) -> anyhow::Result<(Vec<GeneratedFile>, String)> {
    let layers = runtime_layers()?;
    let nks: Vec<(u32, u32)> =
        layers.iter().map(|(_, _, l)| (l.n, l.k)).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    let device = spec.device;
    let mut files = Vec::new();
    for (runtime, dir) in super::single::RUNTIME_DIRS {
        let export = super::export::ExportSpec {
            runtime,
            rule,
            rule_name: "the Triton rule",
            rule_file: format!("../../{}/{}", spec.dir, super::shared::RULE_JSON),
            device,
            max_m: super::export::DEFAULT_MAX_M,
        };
        for f in super::export::runtime_files(&export, &nks, &out.join(dir).join(device))? {
            files.push(GeneratedFile { name: format!("{dir}/{device}/{}", f.name), contents: f.contents });
        }
    }
    let models: std::collections::BTreeSet<(&str, u32)> = layers.iter().map(|(m, tp, _)| (m.as_str(), *tp)).collect();
    let note = format!(
        "runtime files: this rule as vLLM and SGLang config files for {} layers ({} configurations of {} built-in \
         models at TP {}; {RUNTIME_LAYERS_CSV}) named for {device} in vllm/{device}/ and sglang/{device}/ (the \
         runtimes' nearest-M lookup proved to return the rule's config at every M in 1..={})\n",
        nks.len(),
        models.len(),
        synth_core::shapes::ModelSpec::builtin_names().len(),
        COMMON_TP.map(|t| t.to_string()).join(", "),
        super::export::DEFAULT_MAX_M
    );
    Ok((files, note))
}

/// The list of exported model layers: which file serves which layer of which model.
fn runtime_layers_csv() -> anyhow::Result<GeneratedFile> {
    let mut csv = String::from("model,tp,layer,N,K\n");
    for (model, tp, l) in &runtime_layers()? {
        let _ = writeln!(csv, "{model},{tp},{},{},{}", l.name, l.n, l.k);
    }
    Ok(GeneratedFile::new(RUNTIME_LAYERS_CSV, csv))
}
