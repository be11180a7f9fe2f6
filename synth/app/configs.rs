//! `synth configs vllm|sglang|aiter (--model M | --spec S | --hf-config F | --shapes N:K,...) --tp T
//! --device-name D --out DIR [--rule R]`: one command from a model to its runtime's files, with no GPU and
//! no measurement, from the rules shipped in the binary (or `--rule`):
//!
//! - `vllm`, `sglang`: the block-FP8 Triton config file of every layer, proved at every M in 1..=--max-m,
//!   and the provenance sidecar, exactly as `synth export` writes them (its code: [`super::export`]), from
//!   the Triton rule `generated/triton/rule.json`;
//! - `aiter`: the AITER patch (`aiter/<patch>`) and the Python selector `select_kernel.py` that `synth run` and
//!   `synth aiter` render, from the CK rule `generated/rule.json`, and a sidecar listing the model's layers
//!   with the rule's pick at every M in 1..=--max-m.
//!
//! Every file is written through the one all-or-nothing writer, or none.

use super::args::LayerArgs;
use std::path::PathBuf;

use anyhow::{bail, Context};

use super::export::{ExportArgs, DEFAULT_MAX_M};
use synth_core::catalog::Catalog;
use synth_core::export::Runtime;
use synth_core::render::writer::GeneratedFile;
use synth_core::rule::Rule;

/// The CK rule `synth configs aiter` writes by default: (its path in the repository, its text).
pub const CK_RULE: (&str, &str) = ("generated/rule.json", include_str!("../../generated/rule.json"));
/// The Triton rule `synth configs vllm|sglang` writes by default.
pub const TRITON_RULE: (&str, &str) = ("generated/triton/rule.json", include_str!("../../generated/triton/rule.json"));
/// The Triton rule trained on the H100's measurements, used for `--device-name` values naming an H100.
pub const TRITON_RULE_H100: (&str, &str) =
    ("generated/triton-h100/rule.json", include_str!("../../generated/triton-h100/rule.json"));
/// Name of the sidecar of `synth configs aiter` (the layers and the rule's picks).
pub const AITER_SIDECAR: &str = "synth-configs.provenance.json";

/// The runtime whose files are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    /// vLLM's block-FP8 Triton config files (N=...,K=...,device_name=...,dtype=fp8_w8a8,block_shape=[128,128].json).
    Vllm,
    /// SGLang's block-FP8 Triton config files.
    Sglang,
    /// AITER: the heuristic patch and the Python selector.
    Aiter,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ConfigsArgs {
    /// Runtime whose files are written.
    #[arg(value_enum)]
    pub target: Target,
    /// The layers (a model and --tp, or --shapes).
    #[command(flatten)]
    pub layers: LayerArgs,
    /// GPU name as the runtime reports it (spaces become underscores), e.g. NVIDIA_H200; vllm and sglang
    /// name their files by it (aiter: recorded in the sidecar only).
    #[arg(long)]
    pub device_name: Option<String>,
    /// Output directory (created if missing); nothing is written anywhere else.
    #[arg(long)]
    pub out: PathBuf,
    /// Rule file instead of the shipped one (vllm, sglang: a rule over the triton family; aiter: a rule
    /// whose leaves AITER can run) [default: generated/triton/rule.json for vllm and sglang,
    /// generated/rule.json for aiter, embedded in the binary].
    #[arg(long)]
    pub rule: Option<PathBuf>,
    /// Largest M the files are proved for (every M in 1..=max-m).
    #[arg(long, default_value_t = DEFAULT_MAX_M)]
    pub max_m: u32,
}

/// The shipped rule of a target: (name for messages, parsed rule).
fn embedded_rule(target: Target, device: &str) -> anyhow::Result<(String, Rule)> {
    let (path, text) = match target {
        Target::Aiter => CK_RULE,
        _ => triton_rule_for(device),
    };
    let rule =
        synth_core::rule::parse_json(text).map_err(|e| anyhow::anyhow!("internal error: the embedded {path}: {e}"))?;
    if synth_core::rule::validate::has_errors(&synth_core::rule::validate::validate(&rule, &Catalog::embedded())) {
        bail!("internal error: the embedded {path} does not validate (`synth check {path}`)");
    }
    Ok((format!("{path} (embedded)"), rule))
}

/// The embedded Triton rule for a device name: the H100's for a name that says H100, else the H200's.
pub fn triton_rule_for(device: &str) -> (&'static str, &'static str) {
    if device.to_ascii_uppercase().contains("H100") {
        TRITON_RULE_H100
    } else {
        TRITON_RULE
    }
}

/// The files the command reads (no output may replace one).
fn inputs(args: &ConfigsArgs) -> Vec<(&'static str, PathBuf)> {
    let mut inputs: Vec<(&str, PathBuf)> = args.rule.iter().map(|p| ("--rule", p.clone())).collect();
    inputs.extend(args.layers.model.input_files());
    inputs
}

/// The options as `synth export` takes them (for the runtimes, and for the layers of every target).
fn export_args(args: &ConfigsArgs, runtime: Runtime, device_name: String, rule_name: &str) -> ExportArgs {
    ExportArgs {
        runtime,
        rule: PathBuf::from(rule_name),
        layers: args.layers.clone(),
        device_name,
        out: args.out.clone(),
        max_m: args.max_m,
    }
}

pub fn run(args: ConfigsArgs) -> anyhow::Result<()> {
    let runtime = match args.target {
        Target::Vllm => Runtime::Vllm,
        Target::Sglang => Runtime::Sglang,
        Target::Aiter => return run_aiter(&args),
    };
    let Some(device) = args.device_name.clone() else {
        bail!(
            "configs {} needs --device-name: the GPU name in the config files' names, as the runtime reports it \
             (e.g. --device-name NVIDIA_H200)",
            runtime.as_str()
        );
    };
    let catalog = Catalog::embedded();
    let rule_name = match &args.rule {
        Some(path) => synth_base::paths::display_path(path),
        None => format!("{} (embedded)", triton_rule_for(&device).0),
    };
    let export = export_args(&args, runtime, device.clone(), &rule_name);
    super::export::export_with(&export, &rule_name, &inputs(&args), || match &args.rule {
        Some(path) => synth_core::rule::load_checked(path, &catalog),
        None => embedded_rule(args.target, &device).map(|(_, rule)| rule),
    })
}

/// One layer's picks: (first M, last M, backend, kernelId, splitK) runs over 1..=max_m.
fn picks(rule: &Rule, n: u32, k: u32, max_m: u32) -> Vec<serde_json::Value> {
    let mut runs: Vec<(u32, u32, synth_core::rule::Leaf)> = Vec::new();
    for m in 1..=max_m {
        let leaf = rule.eval(m, n, k);
        match runs.last_mut() {
            Some(last) if last.2 == leaf => last.1 = m,
            _ => runs.push((m, m, leaf)),
        }
    }
    runs.into_iter()
        .map(|(from, to, l)| {
            serde_json::json!({
                "from_m": from, "to_m": to, "backend": l.backend.to_string(), "kernel_id": l.kernel_id,
                "split_k": l.split_k,
            })
        })
        .collect()
}

/// `synth configs aiter`: the AITER patch, the Python selector and the sidecar of the model's layers.
fn run_aiter(args: &ConfigsArgs) -> anyhow::Result<()> {
    let catalog = Catalog::embedded();
    let (rule_name, rule) = match &args.rule {
        Some(path) => (synth_base::paths::display_path(path), synth_core::rule::load_checked(path, &catalog)?),
        None => embedded_rule(Target::Aiter, "")?,
    };
    if !(1..=super::export::MAX_MAX_M).contains(&args.max_m) {
        bail!("--max-m {}: expected 1..={}", args.max_m, super::export::MAX_MAX_M);
    }
    let (nks, left) = super::export::layers(&export_args(args, Runtime::Vllm, String::new(), &rule_name))?;
    if let Some(why) = synth_core::aiter::patch::unroutable(&rule) {
        bail!("{rule_name}: no AITER patch can route this rule: {why}");
    }
    let provenance = synth_core::render::Provenance {
        dataset: format!("not recorded: the rule {rule_name} (`synth run` records dataset, device and figures)"),
        training: String::new(),
        figures: Vec::new(),
        command: command_line(args),
    };
    let patch = synth_core::aiter::render_patch(&rule, &catalog, &provenance)?;
    let mut files = vec![super::outputs::patch_file(patch), super::outputs::python_file(&rule, &catalog, &provenance)?];
    let layers: Vec<serde_json::Value> = nks
        .iter()
        .map(|&(n, k)| serde_json::json!({"N": n, "K": k, "picks": picks(&rule, n, k, args.max_m)}))
        .collect();
    let doc = serde_json::json!({
        "generator": format!("gemm-synth {} configs", env!("CARGO_PKG_VERSION")),
        "target": "aiter",
        "rule_file": rule_name,
        "device_name": args.device_name,
        "command": provenance.command,
        "max_m": args.max_m,
        "layers": layers,
    });
    let sidecar = serde_json::to_string_pretty(&doc).context("the sidecar serializes")? + "\n";
    files.push(GeneratedFile::new(AITER_SIDECAR, sidecar));
    super::outputs::check_out_dir(&args.out, &files, &inputs(args))?;
    let written = super::outputs::write_files(&args.out, &files, false)?;
    for p in &written {
        outln!("written: {}", synth_base::paths::display_path(p));
    }
    outln!(
        "aiter: the patch and select_kernel.py for {} layers in {}; the rule's picks at every M in 1..={} are in {AITER_SIDECAR}",
        nks.len(),
        synth_base::paths::display_path(&args.out),
        args.max_m
    );
    if let Some(note) = super::export::left_out_note(&left) {
        outln!("{note}");
    }
    Ok(())
}

/// The command that writes these files again (shell-quoted).
fn command_line(args: &ConfigsArgs) -> String {
    let word = |p: &std::path::Path| synth_base::sanitize::shell_word(&p.display().to_string());
    let mut line = String::from("synth configs aiter");
    match &args.layers.shapes {
        Some(s) => line.push_str(&format!(" --shapes {}", synth_base::sanitize::shell_word(s))),
        None => line.push_str(&format!(" {}", args.layers.model.option_text(""))),
    }
    if let Some(tp) = args.layers.tp {
        line.push_str(&format!(" --tp {tp}"));
    }
    if let Some(r) = &args.rule {
        line.push_str(&format!(" --rule {}", word(r)));
    }
    if args.max_m != DEFAULT_MAX_M {
        line.push_str(&format!(" --max-m {}", args.max_m));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped rules parse, validate without errors, and have the leaves their targets need.
    #[test]
    fn the_embedded_rules_are_valid_for_their_targets() {
        let catalog = Catalog::embedded();
        for (target, device) in
            [(Target::Vllm, "NVIDIA_H200"), (Target::Sglang, "NVIDIA_H100_80GB_HBM3"), (Target::Aiter, "")]
        {
            let (name, rule) = embedded_rule(target, device).unwrap();
            let issues = synth_core::rule::validate::validate(&rule, &catalog);
            assert!(!synth_core::rule::validate::has_errors(&issues), "{name}: {issues:?}");
            match target {
                Target::Aiter => assert!(synth_core::aiter::patch::unroutable(&rule).is_none(), "{name}"),
                _ => assert!(super::super::export::exportable(&rule), "{name}"),
            }
        }
    }

    /// A device name that says H100 takes the rule trained on the H100's measurements; any other the H200's.
    #[test]
    fn the_triton_rule_follows_the_device_name() {
        assert_eq!(triton_rule_for("NVIDIA_H100_80GB_HBM3").0, "generated/triton-h100/rule.json");
        assert_eq!(triton_rule_for("NVIDIA_H100_NVL").0, "generated/triton-h100/rule.json");
        assert_eq!(triton_rule_for("NVIDIA_H200").0, "generated/triton/rule.json");
        assert_eq!(triton_rule_for("AMD_Instinct_MI300X").0, "generated/triton/rule.json");
    }

    #[test]
    fn picks_are_runs_of_the_interpreter() {
        let (_, rule) = embedded_rule(Target::Aiter, "").unwrap();
        let runs = picks(&rule, 5120, 5120, 300);
        assert_eq!(runs[0]["from_m"], 1);
        assert_eq!(runs.last().unwrap()["to_m"], 300);
        for w in runs.windows(2) {
            assert_eq!(w[0]["to_m"].as_u64().unwrap() + 1, w[1]["from_m"].as_u64().unwrap());
        }
    }
}
