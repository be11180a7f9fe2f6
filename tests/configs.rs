//! `synth configs vllm|sglang|aiter`: a model's runtime files from the rules shipped in the binary, with
//! no GPU. Each runtime end to end (the files exist, load back with Python as the runtime loads them, and
//! give the shipped rule's pick at every M), a model from its config.json, and the errors.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{strs, synth, text};
use synth_core::catalog::triton::TritonConfig;
use synth_core::rule::Rule;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hf-configs").join(name).display().to_string()
}

fn shipped(path: &str) -> Rule {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap();
    synth_core::rule::parse_json(&text).unwrap()
}

/// Runs python3 on `script` with `args`; its standard output.
fn python(script: &str, args: &[String]) -> String {
    let o = Command::new("python3").arg("-c").arg(script).args(args).output().expect("python3 runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// Loads every config file of `dir` with `json.load` and applies the runtimes' own lookup
/// (`min(configs.keys(), key=lambda x: abs(x - M))`) at every M in 1..=max_m: one line per file,
/// `N K name@M,name@M,...` with the name at every M where it changes.
const RUNTIME_LOOKUP: &str = r#"
import json, os, sys
d, max_m = sys.argv[1], int(sys.argv[2])
for f in sorted(os.listdir(d)):
    if not f.startswith("N="):
        continue
    n = int(f.split(",")[0][2:]); k = int(f.split(",")[1][2:])
    with open(os.path.join(d, f)) as fh:
        configs = {int(key): val for key, val in json.load(fh).items()}
    out, prev = [], None
    for m in range(1, max_m + 1):
        c = configs[min(configs.keys(), key=lambda x: abs(x - m))]
        name = "triton_bm%d_bn%d_bk%d_g%d_w%d_s%d" % (c["BLOCK_SIZE_M"], c["BLOCK_SIZE_N"], c["BLOCK_SIZE_K"],
            c["GROUP_SIZE_M"], c["num_warps"], c["num_stages"])
        if name != prev:
            out.append("%s@%d" % (name, m))
            prev = name
    print(n, k, ",".join(out))
"#;

/// The same lines from the rule's interpreter.
fn rule_lines(rule: &Rule, layers: &[(u32, u32)], max_m: u32) -> Vec<String> {
    let mut sorted = layers.to_vec();
    sorted.sort_by_key(|&(n, k)| format!("N={n},K={k},"));
    sorted
        .into_iter()
        .map(|(n, k)| {
            let mut out: Vec<String> = Vec::new();
            let mut prev = String::new();
            for m in 1..=max_m {
                let leaf = rule.eval(m, n, k);
                let name = TritonConfig::from_kernel_id(i64::from(leaf.kernel_id)).unwrap().name();
                if name != prev {
                    out.push(format!("{name}@{m}"));
                    prev = name;
                }
            }
            format!("{n} {k} {}", out.join(","))
        })
        .collect()
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// vLLM's files for Qwen3-32B at TP 2 from its config.json: one file per layer, named as vLLM looks it up,
/// giving the shipped Triton rule's config at every M in 1..=16384 when read as vLLM reads it.
#[test]
fn vllm_files_of_a_config_json_model_give_the_shipped_rule_at_every_m() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("vllm");
    let args = [
        "configs",
        "vllm",
        "--hf-config",
        &fixture("qwen3-32b.json"),
        "--tp",
        "2",
        "--device-name",
        "NVIDIA H200",
        "--out",
        out.to_str().unwrap(),
    ];
    let o = synth(&strs(&args), &[]);
    assert!(o.status.success(), "{}", text(&o));
    // Qwen3-32B at TP 2 (independent numbers): qkv (64 + 16) * 128 / 2 = 5120 x 5120, o 5120 x 4096,
    // gate_up 25600 x 5120, down 5120 x 12800.
    let layers = [(5120, 5120), (5120, 4096), (25600, 5120), (5120, 12800)];
    let mut want: Vec<String> = layers
        .iter()
        .map(|(n, k)| format!("N={n},K={k},device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"))
        .collect();
    want.push("synth-export.provenance.json".into());
    want.sort();
    assert_eq!(files_in(&out), want);
    let got: Vec<String> =
        python(RUNTIME_LOOKUP, &[out.display().to_string(), "16384".into()]).lines().map(str::to_string).collect();
    assert_eq!(got, rule_lines(&shipped("generated/triton/rule.json"), &layers, 16384));
    let sidecar: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("synth-export.provenance.json")).unwrap()).unwrap();
    assert_eq!(sidecar["rule_file"], "generated/triton/rule.json (embedded)");
    assert_eq!(sidecar["files"].as_array().unwrap().len(), 4);
    assert!(text(&o).contains("4 vllm files in"), "{}", text(&o));
}

/// SGLang's names (`block_shape=[128, 128]`) for a built-in MoE model on an H100 (the H100's rule); --shapes and
/// --max-m as export.
#[test]
fn sglang_files_of_a_builtin_model_and_of_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sglang");
    let o = synth(
        &strs(&[
            "configs",
            "sglang",
            "--model",
            "qwen3-30b-a3b",
            "--tp",
            "2",
            "--device-name",
            "NVIDIA_H100_80GB_HBM3",
            "--out",
            out.to_str().unwrap(),
            "--max-m",
            "4096",
        ]),
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    // qkv (32 + 2·4) · 128 / 2 = 2560 x 2048, o 2048 x 2048, experts gate_up 768 x 2048, down 2048 x 384.
    let layers = [(2560, 2048), (2048, 2048), (768, 2048), (2048, 384)];
    let names = files_in(&out);
    for (n, k) in layers {
        let name = format!("N={n},K={k},device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128, 128].json");
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    assert_eq!(names.len(), 5);
    let got: Vec<String> =
        python(RUNTIME_LOOKUP, &[out.display().to_string(), "4096".into()]).lines().map(str::to_string).collect();
    assert_eq!(got, rule_lines(&shipped("generated/triton-h100/rule.json"), &layers, 4096));
    let out2 = dir.path().join("shapes");
    let o = synth(
        &strs(&[
            "configs",
            "sglang",
            "--shapes",
            "4096:7168,7168:2048",
            "--device-name",
            "NVIDIA_H200",
            "--out",
            out2.to_str().unwrap(),
        ]),
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(files_in(&out2).len(), 3);
}

/// A model with a layer no block-FP8 GEMM runs (DeepSeek-V2-Lite TP 1: the dense down_proj, K 10944 =
/// 85.5 x 128): every other layer gets its file and the output names the one left out, as `synth bench`
/// leaves it out of its plan; the same layer named with `--shapes` is an error.
#[test]
fn a_models_layer_with_k_not_a_multiple_of_128_is_left_out_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("vllm");
    let args = ["configs", "vllm", "--model", "deepseek-v2-lite", "--tp", "1", "--device-name", "NVIDIA_H200"];
    let o = synth(&strs(&[&args[..], &["--out", out.to_str().unwrap(), "--max-m", "256"]].concat()), &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("left out: N=2048 K=10944 (K is not a multiple of 128"), "{}", text(&o));
    // kv_a 576, q 3072, kv_b 4096 x 512, o, dense gate_up 21888, experts 2816 / down K 1408, shared 5632 / K 2816.
    let layers = [
        (576, 2048),
        (3072, 2048),
        (4096, 512),
        (2048, 2048),
        (21888, 2048),
        (2816, 2048),
        (2048, 1408),
        (5632, 2048),
        (2048, 2816),
    ];
    let got: Vec<String> =
        python(RUNTIME_LOOKUP, &[out.display().to_string(), "256".into()]).lines().map(str::to_string).collect();
    assert_eq!(got, rule_lines(&shipped("generated/triton/rule.json"), &layers, 256));
    assert_eq!(files_in(&out).len(), layers.len() + 1, "one file a layer and the sidecar");
    let named = dir.path().join("named");
    let o = synth(
        &strs(&[
            "configs",
            "vllm",
            "--shapes",
            "2048:10944",
            "--device-name",
            "NVIDIA_H200",
            "--out",
            named.to_str().unwrap(),
        ]),
        &[],
    );
    assert!(!o.status.success() && text(&o).contains("K=10944: K is not a multiple of 128"), "{}", text(&o));
    assert!(!named.exists());
}

/// AITER: the patch and the Python selector of the shipped CK rule, and a sidecar of the model's layers
/// whose picks are what the Python selector returns at every M.
#[test]
fn aiter_writes_the_patch_the_selector_and_every_layers_picks() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("aiter-files");
    let o = synth(
        &strs(&[
            "configs",
            "aiter",
            "--hf-config",
            &fixture("deepseek-v3.json"),
            "--tp",
            "8",
            "--out",
            out.to_str().unwrap(),
            "--max-m",
            "2048",
        ]),
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(files_in(&out), ["aiter", "select_kernel.py", "synth-configs.provenance.json"]);
    let patch = std::fs::read_to_string(out.join("aiter").join(synth_core::aiter::PATCH_FILE)).unwrap();
    assert!(patch.contains("AITER_BLOCKSCALE_HEURISTIC"), "{patch:.400}");
    let sidecar: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("synth-configs.provenance.json")).unwrap()).unwrap();
    let layers = sidecar["layers"].as_array().unwrap();
    // DeepSeek-V3 at TP 8: fused_qkv_a 2112 x 7168, q_b 3072 x 1536, kv_b 4096 x 512, o 7168 x 2048,
    // gate_up 4608 x 7168, down 7168 x 2304, experts 512 x 7168 and 7168 x 256, shared the same: 8 (N, K).
    let nks: Vec<(u64, u64)> = layers.iter().map(|l| (l["N"].as_u64().unwrap(), l["K"].as_u64().unwrap())).collect();
    let mut want = vec![
        (2112, 7168),
        (3072, 1536),
        (4096, 512),
        (7168, 2048),
        (4608, 7168),
        (7168, 2304),
        (512, 7168),
        (7168, 256),
    ];
    want.sort();
    assert_eq!(nks, want);
    // The Python selector at every M against the sidecar's runs.
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import select_kernel
doc = json.load(open(sys.argv[2]))
bad = 0
for layer in doc["layers"]:
    for run in layer["picks"]:
        for m in range(run["from_m"], run["to_m"] + 1):
            got = select_kernel.select(m, layer["N"], layer["K"])
            if (got[0], got[1], got[2]) != (run["backend"], run["kernel_id"], run["split_k"]):
                bad += 1
    assert layer["picks"][0]["from_m"] == 1 and layer["picks"][-1]["to_m"] == doc["max_m"]
print(bad)
"#;
    let bad =
        python(script, &[out.display().to_string(), out.join("synth-configs.provenance.json").display().to_string()]);
    assert_eq!(bad.trim(), "0");
    assert_eq!(
        sidecar["command"],
        format!("synth configs aiter --hf-config {} --tp 8 --max-m 2048", fixture("deepseek-v3.json"))
    );
}

/// One clear error for each bad input, and nothing written.
#[test]
fn bad_inputs_are_one_error_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o_str = out.to_str().unwrap().to_string();
    let bad_json = dir.path().join("config.json");
    std::fs::write(&bad_json, r#"{"architectures":["LlamaForCausalLM"],"hidden_size":4096.0}"#).unwrap();
    let qwen2_moe = fixture("qwen2-57b-a14b.json");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["configs", "vllm", "--model", "llama-3.1-8b", "--tp", "1", "--out", &o_str],
            "configs vllm needs --device-name",
        ),
        (
            vec!["configs", "vllm", "--tp", "1", "--device-name", "H", "--out", &o_str],
            "--tp 1 needs --model NAME, --spec FILE or --hf-config FILE",
        ),
        (
            vec!["configs", "vllm", "--model", "llama-3.1-8b", "--device-name", "H", "--out", &o_str],
            "--model llama-3.1-8b needs --tp T",
        ),
        (
            vec!["configs", "sglang", "--model", "gpt-4o", "--tp", "1", "--device-name", "H", "--out", &o_str],
            "unknown model \"gpt-4o\"",
        ),
        (
            vec![
                "configs",
                "vllm",
                "--hf-config",
                bad_json.to_str().unwrap(),
                "--tp",
                "1",
                "--device-name",
                "H",
                "--out",
                &o_str,
            ],
            "key `hidden_size`: must be a whole number from 1 to 1048576, got 4096.0",
        ),
        (
            vec!["configs", "vllm", "--hf-config", &qwen2_moe, "--tp", "8", "--device-name", "H", "--out", &o_str],
            "TP 8 does not divide the attention head count (28)",
        ),
        (vec!["configs", "aiter", "--shapes", "4096:7000", "--out", &o_str], "K is not a multiple of 128"),
        (
            vec!["configs", "vllm", "--model", "llama-3.1-8b", "--tp", "1", "--device-name", "../x", "--out", &o_str],
            "--device-name \"../x\"",
        ),
        (
            vec!["configs", "aiter", "--model", "llama-3.1-8b", "--tp", "1", "--out", &o_str, "--rule", "absent.json"],
            "absent.json",
        ),
    ];
    for (args, want) in cases {
        let o = synth(&strs(&args), &[]);
        let t = text(&o);
        assert!(!o.status.success() && t.contains(want), "{args:?}: {t}");
        assert!(!t.contains("panicked"), "{t}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
}

/// A file in --out that no export wrote is refused, as `synth export` refuses it, and left alone; an
/// output naming the config.json read is refused.
#[test]
fn configs_keeps_exports_guards() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shipped");
    std::fs::create_dir(&out).unwrap();
    let name = "N=6144,K=4096,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json";
    std::fs::write(out.join(name), "{\"1\": {}}\n").unwrap();
    let o = synth(
        &strs(&[
            "configs",
            "vllm",
            "--model",
            "llama-3.1-8b",
            "--tp",
            "1",
            "--device-name",
            "NVIDIA_H200",
            "--out",
            out.to_str().unwrap(),
        ]),
        &[],
    );
    assert!(!o.status.success() && text(&o).contains("no earlier synth export wrote it"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(out.join(name)).unwrap(), "{\"1\": {}}\n");
    assert_eq!(files_in(&out).len(), 1);
    let cfg_dir: PathBuf = dir.path().join("model");
    std::fs::create_dir(&cfg_dir).unwrap();
    std::fs::copy(fixture("llama-3.1-8b.json"), cfg_dir.join("config.json")).unwrap();
    let inside = cfg_dir.join("config.json").join("x");
    let o = synth(
        &strs(&[
            "configs",
            "aiter",
            "--hf-config",
            cfg_dir.join("config.json").to_str().unwrap(),
            "--tp",
            "1",
            "--out",
            inside.to_str().unwrap(),
        ]),
        &[],
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(cfg_dir.join("config.json").is_file());
}
