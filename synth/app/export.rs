//! `synth export vllm|sglang --rule R (--model M --tp T | --shapes N:K,...) --device-name D --out DIR`:
//! the runtime's block-FP8 Triton config files for a rule over the `triton` family, one per (N, K), with
//! M keys proved to make the runtime's nearest-M lookup return the rule's config at every M in
//! `1..=--max-m`, and a provenance sidecar. All files are written or none.

use super::args::LayerArgs;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use synth_core::catalog::triton::TritonConfig;
use synth_core::catalog::Catalog;
use synth_core::export::{device_component, prove, render_json, Runtime};
use synth_core::render::writer::GeneratedFile;
use synth_core::rule::Rule;

/// Name of the provenance sidecar (no runtime loads it: it matches neither runtime's file pattern).
pub const SIDECAR: &str = "synth-export.provenance.json";
/// The --max-m of `synth export`, and of the files `synth run` writes for a rule over the triton family.
pub const DEFAULT_MAX_M: u32 = 16384;
/// Largest --max-m accepted (the proof checks every M up to it, per layer).
pub const MAX_MAX_M: u32 = 1 << 20;
/// Most bytes of config files one export writes, all layers together ([`synth_core::export::MAX_KEYS`] bounds
/// each file; this bounds layers × keys).
pub const MAX_EXPORT_BYTES: usize = 32 << 20;
/// Cap of the provenance sidecar, for the export that writes it and for the later export that reads it
/// back: one whose sidecar would be larger is refused before anything is written, so every sidecar written
/// reads back. It holds a digest of the rule, not the rule, and one entry per config file.
pub const SIDECAR_MAX_BYTES: usize = 16 << 20;

#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    /// Runtime whose file names and defaults are used.
    #[arg(value_enum)]
    pub runtime: Runtime,
    /// Rule whose leaves are kernelIds of the triton family (e.g. 67703222 = triton_bm64_bn128_bk128_g32_w4_s2;
    /// JSON form, or any form that gives the ids as numbers), splitK 0.
    #[arg(long)]
    pub rule: PathBuf,
    /// The layers (a model and --tp, or --shapes).
    #[command(flatten)]
    pub layers: LayerArgs,
    /// GPU name as the runtime reports it (spaces become underscores, as the runtimes write it).
    #[arg(long)]
    pub device_name: String,
    /// Output directory (created if missing); nothing is written anywhere else.
    #[arg(long)]
    pub out: PathBuf,
    /// Largest M the files are proved for (every M in 1..=max-m).
    #[arg(long, default_value_t = DEFAULT_MAX_M)]
    pub max_m: u32,
}

/// A layer's (N, K).
pub type Nk = (u32, u32);

/// The (N, K) layers to export, sorted and without duplicates, and a model's layers left out (K not a
/// multiple of 128: no 128 x 128 block-FP8 GEMM runs them, as `synth bench` says of them too). A layer the
/// user names with `--shapes` is never left out: it is an error.
pub fn layers(args: &ExportArgs) -> anyhow::Result<(Vec<Nk>, Vec<Nk>)> {
    let mut out = BTreeSet::new();
    let model = args.layers.model.given().then(|| args.layers.model.option_text(""));
    match (&args.layers.shapes, &model, args.layers.tp) {
        (Some(text), None, None) => {
            for p in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (n, k) = p.split_once(':').with_context(|| format!("--shapes: {p:?} is not N:K"))?;
                let n: u32 = n.trim().parse().with_context(|| format!("--shapes: N in {p:?} is not an integer"))?;
                let k: u32 = k.trim().parse().with_context(|| format!("--shapes: K in {p:?} is not an integer"))?;
                if n == 0 || k == 0 {
                    bail!("--shapes: {p:?} has a zero dimension");
                }
                out.insert((n, k));
            }
        }
        (None, Some(model), Some(tp)) => {
            let spec = args.layers.model.load_or("").map_err(|e| anyhow::anyhow!("{model}: {e}"))?;
            for l in spec.layers(tp).map_err(|e| anyhow::anyhow!("{model} --tp {tp}: {e}"))? {
                out.insert((l.n, l.k));
            }
        }
        (Some(_), _, _) => bail!("--shapes names the layers itself: drop --model and --tp, or drop --shapes"),
        (None, Some(model), None) => bail!("{model} needs --tp T (the tensor-parallel degree of its layers)"),
        (None, None, Some(tp)) => {
            bail!("--tp {tp} needs --model NAME, --spec FILE or --hf-config FILE (or give the layers as --shapes N:K,...)")
        }
        _ => bail!("give the layers as --shapes N:K,... or as --model NAME (or --spec FILE, --hf-config FILE) --tp T"),
    }
    if out.is_empty() {
        bail!("--shapes: no N:K pair given");
    }
    let (kept, left): (Vec<Nk>, Vec<Nk>) =
        out.into_iter().partition(|(_, k)| k % synth_core::catalog::triton::SCALE_K == 0);
    match (left.first(), args.layers.shapes.is_some() || kept.is_empty()) {
        (Some((n, k)), true) => {
            bail!("layer N={n} K={k}: K is not a multiple of 128, so no 128x128 block-FP8 GEMM runs it")
        }
        _ => Ok((kept, left)),
    }
}

/// The line naming a model's layers [`layers`] left out, if any.
pub fn left_out_note(left: &[(u32, u32)]) -> Option<String> {
    (!left.is_empty()).then(|| {
        let names: Vec<String> = left.iter().map(|(n, k)| format!("N={n} K={k}")).collect();
        format!(
            "left out: {} (K is not a multiple of 128, so no 128x128 block-FP8 GEMM runs it; no file is written for it)",
            names.join(", ")
        )
    })
}

/// The rule's config at every M in 1..=max_m of one layer.
pub fn wanted(rule: &Rule, rule_name: &str, n: u32, k: u32, max_m: u32) -> anyhow::Result<Vec<TritonConfig>> {
    (1..=max_m)
        .map(|m| {
            let leaf = rule.eval(m, n, k);
            if leaf.backend != synth_core::catalog::Libtype::Triton {
                bail!(
                    "{rule_name}: at M={m} N={n} K={k} the rule picks a {} kernel (kernelId {}); vLLM and SGLang config \
                     files name triton configs only (a rule over `--backends triton`)",
                    leaf.backend,
                    leaf.kernel_id
                );
            }
            if leaf.split_k != 0 {
                bail!(
                    "{rule_name}: at M={m} N={n} K={k} the rule picks splitK {}; triton configs have none",
                    leaf.split_k
                );
            }
            TritonConfig::from_kernel_id(i64::from(leaf.kernel_id))
                .map_err(|e| anyhow::anyhow!("{rule_name}: at M={m} N={n} K={k} the rule picks {e}"))
        })
        .collect()
}

/// One exported layer.
struct LayerFile {
    n: u32,
    k: u32,
    file: GeneratedFile,
    keys: Vec<(u32, TritonConfig)>,
}

/// What one export writes: the runtime's files for a rule on one device.
pub struct ExportSpec<'a> {
    pub runtime: Runtime,
    pub rule: &'a Rule,
    /// How errors name the rule.
    pub rule_name: &'a str,
    /// The rule's file as the provenance sidecar names it.
    pub rule_file: String,
    /// The device as file names spell it (through [`device_component`]).
    pub device: &'a str,
    /// Every M in 1..=max_m is proved.
    pub max_m: u32,
}

fn export_layer(spec: &ExportSpec, nk: (u32, u32)) -> anyhow::Result<LayerFile> {
    let (n, k) = nk;
    let want = wanted(spec.rule, spec.rule_name, n, k, spec.max_m)?;
    let keys = synth_core::export::bounded_keys(&want, &format!("layer N={n} K={k}")).map_err(anyhow::Error::msg)?;
    if let Err(e) = prove(&keys, &want) {
        bail!("internal error: the keys for N={n} K={k} give {:?} at M={} instead of {}", e.got, e.m, e.wanted);
    }
    let name = spec.runtime.file_name(n, k, spec.device);
    let text = render_json(&keys);
    // The proof again, on the text as written (read back the way the runtime reads it).
    let read = synth_core::export::parse_runtime_json(&text, &name).map_err(anyhow::Error::msg)?;
    if read != keys || prove(&read, &want).is_err() {
        bail!("internal error: {name} does not read back as the proved keys");
    }
    Ok(LayerFile { n, k, file: GeneratedFile::new(name, text), keys })
}

/// Every layer's file, within [`MAX_EXPORT_BYTES`] in all.
fn export_layers(spec: &ExportSpec, nks: &[(u32, u32)]) -> anyhow::Result<Vec<LayerFile>> {
    let mut files = Vec::with_capacity(nks.len());
    let mut bytes = 0usize;
    for &nk in nks {
        let f = export_layer(spec, nk)?;
        bytes += f.file.contents.as_bytes().len();
        if bytes > MAX_EXPORT_BYTES {
            bail!(
                "the config files of the first {} of {} layers already hold {bytes} bytes, over the {} MiB one export \
                 writes; nothing was written: export fewer layers at once, a smaller --max-m, or a rule whose pick \
                 changes less often along M",
                files.len() + 1,
                nks.len(),
                MAX_EXPORT_BYTES >> 20
            );
        }
        files.push(f);
    }
    Ok(files)
}

/// The rule's digest as the sidecar names it: 64-bit FNV-1a of its canonical JSON form, in hex.
fn rule_digest(rule: &Rule) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in synth_core::rule::to_json(rule).as_bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("fnv1a64:{h:016x}")
}

/// The sidecar's text: what was exported and proved, the rule by its file and digest (not the rule, whose
/// size has no bound), and `earlier` (config files earlier exports wrote there); refused over
/// [`SIDECAR_MAX_BYTES`].
fn sidecar(spec: &ExportSpec, files: &[LayerFile], earlier: Vec<serde_json::Value>) -> anyhow::Result<String> {
    let layers: Vec<serde_json::Value> = files
        .iter()
        .map(|f| {
            let distinct: BTreeSet<String> = f.keys.iter().map(|(_, c)| c.name()).collect();
            serde_json::json!({
                "file": f.file.name, "N": f.n, "K": f.k, "keys": f.keys.len(),
                "configs": distinct.into_iter().collect::<Vec<_>>(),
                "proved": format!("the runtime's nearest-M lookup returns the rule's config at every M in 1..={}", spec.max_m),
            })
        })
        .collect();
    let mut doc = serde_json::json!({
        "generator": format!("gemm-synth {} export", env!("CARGO_PKG_VERSION")),
        "runtime": spec.runtime.as_str(),
        "device_name": spec.device,
        "rule_file": spec.rule_file,
        "rule_digest": rule_digest(spec.rule),
        "rule_leaves": spec.rule.leaves().len(),
        "rule_name": spec.rule_name,
        "max_m": spec.max_m,
        "lookup": "configs[min(configs.keys(), key=lambda x: abs(x - M))]: nearest key, ties to the key first in the file",
        "beyond_max_m": "the largest key's config",
        "files": layers,
    });
    if !earlier.is_empty() {
        doc["earlier_files"] = serde_json::Value::Array(earlier);
    }
    let text = serde_json::to_string_pretty(&doc).expect("JSON values always serialize") + "\n";
    if text.len() > SIDECAR_MAX_BYTES {
        bail!(
            "{SIDECAR} would hold {} bytes ({} config files listed), over the {} MiB an export reads back; nothing \
             was written: export into another directory (--out), or move the earlier exports' files away",
            text.len(),
            files.len() + doc.get("earlier_files").and_then(|e| e.as_array()).map_or(0, Vec::len),
            SIDECAR_MAX_BYTES >> 20
        );
    }
    Ok(text)
}

/// The exported layers and the sidecar for them in `dir` (see [`runtime_files`]).
fn export_into(spec: &ExportSpec, nks: &[(u32, u32)], dir: &Path) -> anyhow::Result<(Vec<LayerFile>, GeneratedFile)> {
    let files = export_layers(spec, nks)?;
    let configs: Vec<GeneratedFile> = files.iter().map(|f| f.file.clone()).collect();
    let earlier = earlier_exports(dir, &configs)?;
    let side = GeneratedFile::new(SIDECAR, sidecar(spec, &files, earlier)?);
    Ok((files, side))
}

/// The runtime's config file of every layer of `nks` and the provenance sidecar ([`SIDECAR`]) as they go
/// into `dir`, each file proved (see the module docs); an error names the M where the rule picks no triton
/// config. The same rule holds wherever they go (`synth export`, `synth run`): a config file in `dir` that
/// no earlier export wrote is never replaced (an error naming it), and the sidecar keeps listing the config
/// files earlier exports wrote there.
pub fn runtime_files(spec: &ExportSpec, nks: &[(u32, u32)], dir: &Path) -> anyhow::Result<Vec<GeneratedFile>> {
    let (files, side) = export_into(spec, nks, dir)?;
    let mut out: Vec<GeneratedFile> = files.into_iter().map(|f| f.file).collect();
    out.push(side);
    Ok(out)
}

/// Whether a rule can be exported as runtime files: every leaf a triton config with split 0.
pub fn exportable(rule: &Rule) -> bool {
    rule.leaves().iter().all(|l| {
        l.backend == synth_core::catalog::Libtype::Triton
            && l.split_k == 0
            && TritonConfig::from_kernel_id(i64::from(l.kernel_id)).is_ok()
    })
}

/// A config of the triton family as a candidate of a latency matrix (libtype `triton`, split 0).
pub fn triton_candidate(c: TritonConfig) -> synth_core::catalog::Candidate {
    synth_core::catalog::Candidate::of(synth_core::catalog::Libtype::Triton, c.kernel_id(), 0)
}

/// `vllm-default` / `sglang-default`: the config the runtime runs on a layer without a file.
pub fn default_policy(runtime: Runtime) -> synth_core::compare::Policy {
    let candidate = triton_candidate(runtime.default_config());
    synth_core::compare::Policy::Fixed { name: format!("{}-default", runtime.as_str()), candidate }
}

/// `vllm-tuned` / `sglang-tuned`: the runtime's lookup over a directory of its config files for `device`
/// (e.g. the files vLLM ships), the default config on layers without a file. Files of other devices,
/// dtypes or block shapes are not the runtime's for this GPU and are left out.
pub fn tuned_policy(
    runtime: Runtime,
    dir: &std::path::Path,
    device: &str,
) -> anyhow::Result<synth_core::compare::Policy> {
    let device = device_component(device).map_err(anyhow::Error::msg)?;
    let probe = runtime.file_name(0, 0, &device);
    let suffix = &probe["N=0,K=0".len()..];
    let mut files = std::collections::BTreeMap::new();
    let entries = std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        let Some((n, k)) = name
            .strip_suffix(suffix)
            .and_then(|nk| nk.strip_prefix("N="))
            .and_then(|nk| nk.split_once(",K="))
            .and_then(|(n, k)| Some((n.parse::<u32>().ok()?, k.parse::<u32>().ok()?)))
            .filter(|&(n, k)| runtime.file_name(n, k, &device) == name)
        else {
            continue;
        };
        let path = entry.path();
        let bytes =
            synth_base::input::read_bytes_capped(&path, synth_base::input::MAX_TABLE_BYTES, "runtime config file")
                .with_context(|| format!("cannot read {}", path.display()))?;
        let text = String::from_utf8(bytes).with_context(|| format!("{}: not UTF-8 text", path.display()))?;
        let keys = synth_core::export::parse_runtime_json(&text, &synth_base::paths::display_path(&path))
            .map_err(anyhow::Error::msg)?;
        let keys = keys.into_iter().map(|(m, c)| (m, triton_candidate(c))).collect();
        files.insert((n, k), keys);
    }
    if files.is_empty() {
        bail!("{}: no {} config file for device {device} (names like {probe})", dir.display(), runtime.as_str());
    }
    let fallback = triton_candidate(runtime.default_config());
    Ok(synth_core::compare::Policy::RuntimeFiles { name: format!("{}-tuned", runtime.as_str()), files, fallback })
}

/// The policies `--runtime-default` and `--runtime-tuned` ask for, each with a line saying what it is.
/// They score triton configs, so `backends` must name triton; `--runtime-tuned` needs `--device-name`
/// (normalized as `synth export` does), and a runtime named twice is an error.
pub fn runtime_policies(
    args: &super::args::RuntimeArgs,
    backends: Option<&synth_core::catalog::Backends>,
) -> anyhow::Result<(Vec<synth_core::compare::Policy>, Vec<String>)> {
    use synth_core::compare::Policy;
    if args.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let asked: Vec<String> = args
        .runtime_default
        .iter()
        .map(|r| format!("--runtime-default {}", r.as_str()))
        .chain(args.runtime_tuned.iter().map(|(r, d)| format!("--runtime-tuned {}={}", r.as_str(), d.display())))
        .collect();
    let Some(first) = asked.first() else {
        bail!("--device-name is read with --runtime-tuned (the GPU name in the config files' names); add --runtime-tuned vllm=DIR or leave it out");
    };
    if !backends.is_some_and(|b| b.contains(synth_core::catalog::Libtype::Triton)) {
        let now = backends.map_or_else(|| "no --backends (CK legacy only)".to_string(), |b| format!("--backends {b}"));
        bail!(
            "{first} scores triton configs, but {now} leaves the triton rows out: add triton to --backends \
             (--backends triton for a journal of triton rows, e.g. --backends ck,triton for one with both)"
        );
    }
    let mut policies = Vec::new();
    let mut notes = Vec::new();
    let mut seen = BTreeSet::new();
    for &runtime in &args.runtime_default {
        if !seen.insert(format!("{}-default", runtime.as_str())) {
            bail!("--runtime-default names {} twice", runtime.as_str());
        }
        policies.push(default_policy(runtime));
        notes.push(format!(
            "{}-default: {} on every shape (the config {} runs on a layer without a tuned file)",
            runtime.as_str(),
            runtime.default_config().name(),
            runtime.as_str()
        ));
    }
    if !args.runtime_tuned.is_empty() && args.device_name.is_none() {
        bail!(
            "--runtime-tuned needs --device-name: the GPU name in the config files' names, as the runtime reports it \
             (e.g. --device-name NVIDIA_H200)"
        );
    }
    for (runtime, dir) in &args.runtime_tuned {
        if !seen.insert(format!("{}-tuned", runtime.as_str())) {
            bail!("--runtime-tuned names {} twice; give one directory per runtime", runtime.as_str());
        }
        let device = args.device_name.as_deref().unwrap_or_default();
        let policy = tuned_policy(*runtime, dir, device)
            .with_context(|| format!("--runtime-tuned {}={}", runtime.as_str(), dir.display()))?;
        if let Policy::RuntimeFiles { files, .. } = &policy {
            let entries: usize = files.values().map(Vec::len).sum();
            notes.push(format!(
                "{}-tuned: {} files ({entries} M keys) for {} in {}, the nearest M key of the shape's (N, K) file \
                 (ties to the key first in the file); {} on a layer without a file",
                runtime.as_str(),
                files.len(),
                device_component(device).map_err(anyhow::Error::msg)?,
                synth_base::paths::display_path(dir),
                runtime.default_config().name()
            ));
        }
        policies.push(policy);
    }
    Ok((policies, notes))
}

/// The config files an earlier `synth export` wrote into `dir` (its sidecar's `files` and `earlier_files`)
/// that this one does not write and that are still there, as the sidecar listed them: the new sidecar keeps
/// them, so it names every config file the tool wrote there. Refuses, changing nothing, to replace a config
/// file of `new` that no earlier export wrote (e.g. a runtime's shipped file in the directory it loads).
fn earlier_exports(dir: &std::path::Path, new: &[GeneratedFile]) -> anyhow::Result<Vec<serde_json::Value>> {
    let sidecar_path = dir.join(SIDECAR);
    let listed: Vec<serde_json::Value> = match std::fs::symlink_metadata(&sidecar_path) {
        Ok(m) if m.is_file() => {
            let text = synth_base::input::read_text_capped(&sidecar_path, SIDECAR_MAX_BYTES as u64, "export sidecar")
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", sidecar_path.display()))?;
            let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                anyhow::anyhow!(
                    "{} is not the sidecar synth export writes ({e}); move it away or pass another --out (nothing was written)",
                    sidecar_path.display()
                )
            })?;
            ["files", "earlier_files"]
                .iter()
                .filter_map(|k| doc.get(*k).and_then(|v| v.as_array()))
                .flatten()
                .filter(|e| e.get("file").and_then(|f| f.as_str()).is_some())
                .cloned()
                .collect()
        }
        _ => Vec::new(),
    };
    let name_of = |e: &serde_json::Value| e["file"].as_str().unwrap_or_default().to_string();
    for f in new {
        let path = dir.join(&f.name);
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if !meta.is_file() && !meta.is_symlink() {
            bail!(
                "cannot write {}: {} is in the way (not a regular file); nothing was written: remove it or pass \
                 another --out",
                path.display(),
                synth_base::paths::file_kind(&meta)
            );
        }
        let Ok(on_disk) =
            synth_base::input::read_bytes_capped(&path, synth_base::input::MAX_TABLE_BYTES, "config file")
        else {
            continue;
        };
        if on_disk != f.contents.as_bytes() && !listed.iter().any(|e| name_of(e) == f.name) {
            bail!(
                "{} exists and no earlier synth export wrote it (it is not in {SIDECAR} there): it may be a file the \
                 runtime ships; nothing was written: move it away or pass another --out",
                path.display()
            );
        }
    }
    let mut kept = Vec::new();
    let mut seen = BTreeSet::new();
    for e in listed {
        let name = name_of(&e);
        let rewritten = new.iter().any(|f| f.name == name);
        let safe = !name.is_empty() && std::path::Path::new(&name).file_name().is_some_and(|b| b == name.as_str());
        if !rewritten && safe && dir.join(&name).is_file() && seen.insert(name) {
            kept.push(e);
        }
    }
    Ok(kept)
}

pub fn run(args: ExportArgs) -> anyhow::Result<()> {
    run_with(args, &mut |_| Ok(()))
}

/// [`run`], its write stopped at `stop`'s step (a test's stand-in for a signal).
fn run_with(
    args: ExportArgs,
    stop: &mut dyn FnMut(synth_core::render::outdir::Step) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let rule_name = synth_base::paths::display_path(&args.rule);
    let mut inputs = vec![("--rule", args.rule.clone())];
    inputs.extend(args.layers.model.input_files());
    let load = || synth_core::rule::load_checked(&args.rule, &Catalog::embedded());
    export_stopped(&args, &rule_name, &inputs, load, stop)
}

/// `synth export`'s work on the rule `load` gives (read after the options are checked: a file, or the
/// embedded rule of `synth configs`), named `rule_name`; `inputs` are the files it reads, which no output
/// may replace.
pub fn export_with(
    args: &ExportArgs,
    rule_name: &str,
    inputs: &[(&str, PathBuf)],
    load: impl FnOnce() -> anyhow::Result<Rule>,
) -> anyhow::Result<()> {
    export_stopped(args, rule_name, inputs, load, &mut |_| Ok(()))
}

/// [`export_with`], its write stopped at `stop`'s step.
fn export_stopped(
    args: &ExportArgs,
    rule_name: &str,
    inputs: &[(&str, PathBuf)],
    load: impl FnOnce() -> anyhow::Result<Rule>,
    stop: &mut dyn FnMut(synth_core::render::outdir::Step) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let device = device_component(&args.device_name).map_err(anyhow::Error::msg)?;
    if !(1..=MAX_MAX_M).contains(&args.max_m) {
        bail!("--max-m {}: expected 1..={MAX_MAX_M}", args.max_m);
    }
    let (nks, left) = layers(args)?;
    let rule = load()?;
    let rule_name = rule_name.to_string();
    let spec = ExportSpec {
        runtime: args.runtime,
        rule: &rule,
        rule_name: &rule_name,
        rule_file: rule_name.clone(),
        device: &device,
        max_m: args.max_m,
    };
    let named: Vec<GeneratedFile> = nks
        .iter()
        .map(|&(n, k)| GeneratedFile::new(args.runtime.file_name(n, k, &device), ""))
        .chain([GeneratedFile::new(SIDECAR, "")])
        .collect();
    super::outputs::check_out_dir(&args.out, &named, inputs)?;
    // The sidecar is read and replaced under the directory's lock, an interrupted export finished first: it
    // lists every config file an export put there.
    let locked = synth_core::render::outdir::lock(&args.out)?;
    let (files, side) = export_into(&spec, &nks, &args.out)?;
    let mut out: Vec<GeneratedFile> = files.iter().map(|f| f.file.clone()).collect();
    out.push(side);
    locked.write_with(&out, stop)?;
    for f in &files {
        let distinct: BTreeSet<_> = f.keys.iter().map(|(_, c)| *c).collect();
        outln!("{}: {} keys, {} configs", f.file.name, f.keys.len(), distinct.len());
    }
    outln!(
        "{} {} files in {} (+ {SIDECAR}); proved: the runtime's nearest-M lookup returns the rule's config at every \
         M in 1..={} of every layer",
        files.len(),
        args.runtime.as_str(),
        synth_base::paths::display_path(&args.out),
        args.max_m
    );
    if let Some(note) = left_out_note(&left) {
        outln!("{note}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use synth_core::catalog::triton::{tuner_space, VLLM_DEFAULT};
    use synth_core::rule::{CmpOp, Cond, Expr, Leaf, Node, Var};

    /// M <= 64: space[0]; M <= 2000 (and N >= 4096): space[700]; else the vLLM default.
    fn test_rule() -> Rule {
        let le = |v: Var, x: i64| Cond::Cmp { op: CmpOp::Le, lhs: Expr::Var(v), rhs: Expr::Lit(x) };
        let leaf =
            |c: TritonConfig| Box::new(Node::Leaf(Leaf::of(synth_core::catalog::Libtype::Triton, c.kernel_id(), 0)));
        Rule {
            root: Node::Chain {
                branches: vec![
                    (le(Var::M, 64), *leaf(tuner_space()[0])),
                    (
                        Cond::And(vec![le(Var::M, 2000), Cond::Not(Box::new(le(Var::N, 4095)))]),
                        *leaf(tuner_space()[700]),
                    ),
                ],
                otherwise: leaf(VLLM_DEFAULT),
            },
            note: None,
        }
    }

    fn args(dir: &std::path::Path, runtime: Runtime, shapes: &str) -> ExportArgs {
        ExportArgs {
            runtime,
            rule: dir.join("rule.json"),
            layers: LayerArgs { model: Default::default(), tp: None, shapes: Some(shapes.into()) },
            device_name: "NVIDIA H200".into(),
            out: dir.join("out"),
            max_m: 16384,
        }
    }

    /// Loads every exported file with real python3 `json.load` and applies the runtimes' own lookup
    /// expression at every M; returns "file M name" lines where the pick changes.
    fn python_picks(out: &std::path::Path, max_m: u32) -> Vec<String> {
        let script = r#"
import json, os, sys
d, max_m = sys.argv[1], int(sys.argv[2])
for f in sorted(os.listdir(d)):
    if not f.startswith("N="):
        continue
    with open(os.path.join(d, f)) as fh:
        configs = {int(key): val for key, val in json.load(fh).items()}
    prev = None
    for M in range(1, max_m + 1):
        c = configs[min(configs.keys(), key=lambda x: abs(x - M))]
        name = "triton_bm%(BLOCK_SIZE_M)d_bn%(BLOCK_SIZE_N)d_bk%(BLOCK_SIZE_K)d_g%(GROUP_SIZE_M)d_w%(num_warps)d_s%(num_stages)d" % c
        assert len(c) == 6, c
        if name != prev:
            print(f, M, name)
            prev = name
"#;
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(out)
            .arg(max_m.to_string())
            .output()
            .expect("python3 runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
    }

    fn rust_picks(runtime: Runtime, rule: &Rule, nks: &[(u32, u32)], max_m: u32) -> Vec<String> {
        let mut lines = Vec::new();
        let mut nks = nks.to_vec();
        nks.sort_by_key(|&(n, k)| runtime.file_name(n, k, "NVIDIA_H200"));
        for (n, k) in nks {
            let mut prev = None;
            for m in 1..=max_m {
                let c = TritonConfig::from_kernel_id(i64::from(rule.eval(m, n, k).kernel_id)).unwrap();
                if Some(c) != prev {
                    lines.push(format!("{} {m} {}", runtime.file_name(n, k, "NVIDIA_H200"), c.name()));
                    prev = Some(c);
                }
            }
        }
        lines
    }

    #[test]
    fn python_json_load_and_the_runtime_lookup_return_the_rule_at_every_m() {
        let dir = tempfile::tempdir().unwrap();
        let rule = test_rule();
        std::fs::write(dir.path().join("rule.json"), synth_core::rule::to_json(&rule)).unwrap();
        for runtime in [Runtime::Vllm, Runtime::Sglang] {
            let a = args(dir.path(), runtime, "1536:7168, 2048:512,1536:7168");
            run(a.clone()).unwrap();
            let names: BTreeSet<String> =
                std::fs::read_dir(&a.out).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
            let want = runtime.file_name(1536, 7168, "NVIDIA_H200");
            assert!(names.contains(&want) && names.contains(SIDECAR), "{names:?}");
            assert_eq!(
                python_picks(&a.out, a.max_m),
                rust_picks(runtime, &rule, &[(1536, 7168), (2048, 512)], a.max_m)
            );
            let side: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(a.out.join(SIDECAR)).unwrap()).unwrap();
            assert_eq!(side["files"].as_array().unwrap().len(), 2);
            std::fs::remove_dir_all(&a.out).unwrap();
        }
    }

    #[test]
    fn bad_input_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut rule = test_rule();
        std::fs::write(dir.path().join("rule.json"), synth_core::rule::to_json(&rule)).unwrap();
        let mut a = args(dir.path(), Runtime::Vllm, "1536:7168");
        a.device_name = "../../etc".into();
        assert!(run(a.clone()).unwrap_err().to_string().contains("--device-name"));
        a.device_name = "NVIDIA_H200".into();
        a.layers.shapes = Some("1536:100".into());
        assert!(run(a.clone()).unwrap_err().to_string().contains("not a multiple of 128"));
        a.layers.shapes = Some("1536:7168".into());
        // A leaf that is a CK instance id, not a triton config: named with the M where it is picked.
        rule.root = Node::Chain {
            branches: vec![(
                Cond::Cmp { op: CmpOp::Ge, lhs: Expr::Var(Var::M), rhs: Expr::Lit(9000) },
                Node::Leaf(Leaf::new(15, 0)),
            )],
            otherwise: Box::new(Node::Leaf(Leaf::of(
                synth_core::catalog::Libtype::Triton,
                VLLM_DEFAULT.kernel_id(),
                0,
            ))),
        };
        std::fs::write(dir.path().join("rule.json"), synth_core::rule::to_json(&rule)).unwrap();
        let e = run(a.clone()).unwrap_err().to_string();
        assert!(e.contains("M=9000") && e.contains("a ck kernel (kernelId 15)"), "{e}");
        // A triton config's id in a CK leaf is not a CK instance: the rule check refuses the file.
        rule.root = Node::Leaf(Leaf::new(VLLM_DEFAULT.kernel_id(), 0));
        std::fs::write(dir.path().join("rule.json"), synth_core::rule::to_json(&rule)).unwrap();
        let e = format!("{:#}", run(a.clone()).unwrap_err());
        assert!(e.contains("invalid rule") && e.contains("not a legacy candidate"), "{e}");
        assert!(!a.out.exists(), "nothing may be written on an error");
    }

    #[test]
    fn a_config_file_no_export_wrote_is_never_replaced_and_earlier_exports_stay_listed() {
        let dir = tempfile::tempdir().unwrap();
        let rule = test_rule();
        std::fs::write(dir.path().join("rule.json"), synth_core::rule::to_json(&rule)).unwrap();
        let a = args(dir.path(), Runtime::Vllm, "1536:7168");
        // A directory a runtime loads, with a file it ships for that layer: refused, nothing written.
        std::fs::create_dir_all(&a.out).unwrap();
        let shipped = a.out.join(Runtime::Vllm.file_name(1536, 7168, "NVIDIA_H200"));
        std::fs::write(&shipped, "{\"1\": {}}").unwrap();
        let e = run(a.clone()).unwrap_err().to_string();
        assert!(e.contains("no earlier synth export wrote it") && e.contains("N=1536,K=7168"), "{e}");
        assert_eq!(std::fs::read_to_string(&shipped).unwrap(), "{\"1\": {}}");
        assert!(!a.out.join(SIDECAR).exists());
        // Its own files it replaces; a second export of other layers keeps the first one's listed.
        std::fs::remove_file(&shipped).unwrap();
        run(a.clone()).unwrap();
        run(a.clone()).unwrap();
        let mut b = a.clone();
        b.layers.shapes = Some("2048:512".into());
        run(b).unwrap();
        let side: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(a.out.join(SIDECAR)).unwrap()).unwrap();
        let names = |k: &str| -> Vec<String> {
            side[k]
                .as_array()
                .map_or(Vec::new(), |v| v.iter().map(|e| e["file"].as_str().unwrap().to_string()).collect())
        };
        assert_eq!(names("files"), vec![Runtime::Vllm.file_name(2048, 512, "NVIDIA_H200")]);
        assert_eq!(names("earlier_files"), vec![Runtime::Vllm.file_name(1536, 7168, "NVIDIA_H200")]);
        // And the first layer can be exported again over its own earlier file.
        run(a).unwrap();
    }

    /// An export interrupted after its config file was moved into place and before its sidecar was: the
    /// next export (of another rule) finishes the first one's commit before it reads the sidecar, so the
    /// file is the tool's to replace, not refused as "a file the runtime ships".
    #[test]
    fn an_interrupted_export_is_finished_and_its_file_listed() {
        use synth_core::render::outdir::Step;
        let dir = tempfile::tempdir().unwrap();
        let a = args(dir.path(), Runtime::Vllm, "1536:7168");
        let file = a.out.join(Runtime::Vllm.file_name(1536, 7168, "NVIDIA_H200"));
        let other = Rule::new(Node::Leaf(Leaf::of(synth_core::catalog::Libtype::Triton, VLLM_DEFAULT.kernel_id(), 0)));
        for at in [Step::PartRenamed, Step::Committed, Step::Staged] {
            let _ = std::fs::remove_dir_all(&a.out);
            std::fs::write(dir.path().join("rule.json"), synth_core::rule::to_json(&test_rule())).unwrap();
            let stop = &mut |s| if s == at { anyhow::bail!("interrupted") } else { Ok(()) };
            assert!(run_with(a.clone(), stop).is_err());
            assert_eq!(file.exists(), at == Step::PartRenamed, "{at:?}");
            assert!(!a.out.join(SIDECAR).exists(), "{at:?}");
            std::fs::write(dir.path().join("rule.json"), synth_core::rule::to_json(&other)).unwrap();
            run(a.clone()).unwrap_or_else(|e| panic!("after stopping at {at:?}: {e:#}"));
            let side: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(a.out.join(SIDECAR)).unwrap()).unwrap();
            assert_eq!(side["files"][0]["file"].as_str(), file.file_name().unwrap().to_str(), "{at:?}");
            assert_eq!(side["rule_digest"].as_str(), Some(rule_digest(&other).as_str()), "{at:?}");
            let names: Vec<String> =
                std::fs::read_dir(&a.out).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
            assert_eq!(names.len(), 2, "{at:?}: {names:?}");
        }
    }

    #[test]
    fn runtime_policies_pick_what_the_runtime_would_run() {
        use synth_core::compare::Policy;
        use synth_core::table::{parse_aiter_csv, LatencyMatrix};
        let (a, b) = (tuner_space()[3], VLLM_DEFAULT);
        let row = |m: u32, n: u32, c: TritonConfig, us: f64| {
            format!("sm_90,132,{m},{n},7168,triton,{},0,{us},{},1,1,0.0", c.kernel_id(), c.name())
        };
        let text = format!(
            "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio\n{}\n",
            [
                row(4, 1536, a, 10.0),
                row(4, 1536, b, 20.0),
                row(40, 1536, a, 30.0),
                row(40, 1536, b, 25.0),
                row(4, 2048, a, 11.0),
                row(4, 2048, b, 12.0)
            ]
            .join("\n")
        );
        let rows = parse_aiter_csv(text.as_bytes(), "t.csv", &Catalog::embedded()).unwrap();
        let matrix = LatencyMatrix::from_rows(&rows).unwrap();
        let dir = tempfile::tempdir().unwrap();
        // A file for N=1536 only: keys 1 -> a, 64 -> b (M = 40 is nearer 64). Another device's file is ignored.
        std::fs::write(
            dir.path().join(Runtime::Vllm.file_name(1536, 7168, "NVIDIA_H200")),
            render_json(&[(1, a), (64, b)]),
        )
        .unwrap();
        std::fs::write(dir.path().join(Runtime::Vllm.file_name(2048, 7168, "NVIDIA_H100")), "not json").unwrap();
        let tuned = tuned_policy(Runtime::Vllm, dir.path(), "NVIDIA H200").unwrap();
        let default = default_policy(Runtime::Vllm);
        assert_eq!((tuned.name(), default.name()), ("vllm-tuned", "vllm-default"));
        let pick = |p: &Policy, m: u32, n: u32| {
            let s = matrix.shapes.iter().position(|x| x.m == m && x.n == n).unwrap();
            p.pick(&matrix, s, synth_core::catalog::Candidate::new(7, 0)).candidate.kernel_id
        };
        assert_eq!(pick(&tuned, 4, 1536), a.kernel_id());
        assert_eq!(pick(&tuned, 40, 1536), b.kernel_id());
        assert_eq!(pick(&tuned, 4, 2048), b.kernel_id(), "no H200 file for N=2048: the default config");
        assert!([(4, 1536), (40, 1536), (4, 2048)].iter().all(|&(m, n)| pick(&default, m, n) == b.kernel_id()));
        let e = tuned_policy(Runtime::Sglang, dir.path(), "NVIDIA_H200").unwrap_err().to_string();
        assert!(e.contains("no sglang config file"), "{e}");
        std::fs::write(dir.path().join(Runtime::Vllm.file_name(4096, 7168, "NVIDIA_H200")), "{\"x\": 1}").unwrap();
        let e = tuned_policy(Runtime::Vllm, dir.path(), "NVIDIA_H200").unwrap_err().to_string();
        assert!(e.contains("N=4096") && e.contains("not an M value"), "{e}");
    }

    #[test]
    fn model_layers_are_deduplicated() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = args(dir.path(), Runtime::Vllm, "");
        a.layers.shapes = None;
        a.layers.model = crate::app::model_args::ModelArgs::builtin("qwen3-32b");
        a.layers.tp = Some(2);
        assert_eq!(layers(&a).unwrap().0, vec![(5120, 4096), (5120, 5120), (5120, 12800), (25600, 5120)]);
    }

    /// A FIFO at a config file's name (or any non-file) is refused, naming it, without blocking on it;
    /// nothing is written.
    #[test]
    fn a_fifo_in_the_way_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("rule.json"), synth_core::rule::to_json(&test_rule())).unwrap();
        let a = args(dir.path(), Runtime::Vllm, "1536:7168");
        std::fs::create_dir_all(&a.out).unwrap();
        let fifo = a.out.join(Runtime::Vllm.file_name(1536, 7168, "NVIDIA_H200"));
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = run(a.clone()).unwrap_err().to_string();
        assert!(e.contains("a FIFO is in the way") && e.contains("N=1536,K=7168"), "{e}");
        assert!(!a.out.join(SIDECAR).exists());
    }
}
