//! `--hf-config`: a model's layers from its own Hugging Face config.json.
//!
//! The fixtures in tests/data/hf-configs/ are config.json files written from the numbers each built-in spec
//! (shapes/*.toml) documents, plus architectures beyond them whose shapes are computed here by hand from
//! vLLM's rules (column-parallel N / TP, row-parallel K / TP, KV heads replicated past their count).

mod common;

use std::path::{Path, PathBuf};

use synth_core::shapes::{ModelSpec, Parallel};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hf-configs").join(name)
}

fn load(name: &str) -> ModelSpec {
    ModelSpec::load_hf_config(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// (layer, N, K) at `tp`.
fn layers(spec: &ModelSpec, tp: u32) -> Vec<(String, u32, u32)> {
    spec.layers(tp).unwrap().into_iter().map(|l| (l.name, l.n, l.k)).collect()
}

fn want(rows: &[(&str, u32, u32)]) -> Vec<(String, u32, u32)> {
    rows.iter().map(|(n, a, b)| (n.to_string(), *a, *b)).collect()
}

/// Every built-in model (and the held-out DeepSeek-V3) from its config.json: the same dimensions, and the
/// same layers with the same TP rule at every TP, or the same refusal.
#[test]
fn every_builtin_model_from_its_config_json_has_the_same_layers_at_every_tp() {
    let mut specs: Vec<(String, ModelSpec)> =
        ModelSpec::builtin_names().into_iter().map(|n| (n.to_string(), ModelSpec::builtin(n).unwrap())).collect();
    let held_out = Path::new(env!("CARGO_MANIFEST_DIR")).join("shapes/held-out/deepseek-v3.toml");
    specs.push(("deepseek-v3".into(), ModelSpec::load(&held_out).unwrap()));
    assert_eq!(specs.len(), 13);
    for (name, toml) in specs {
        let hf = load(&format!("{name}.json"));
        let dims = |s: &ModelSpec| (s.hidden, s.intermediate, s.heads, s.kv_heads, s.head_dim, s.num_layers);
        assert_eq!(dims(&hf), dims(&toml), "{name}");
        assert_eq!((&hf.mla, &hf.moe), (&toml.mla, &toml.moe), "{name}");
        for tp in [1, 2, 3, 4, 8, 16, 32] {
            match (hf.layer_table(tp), toml.layer_table(tp)) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{name} TP {tp}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{name} TP {tp}"),
                (a, b) => panic!("{name} TP {tp}: config.json gives {a:?}, the spec {b:?}"),
            }
        }
    }
}

#[test]
fn mixtral_8x7b_experts_on_every_layer() {
    let spec = load("mixtral-8x7b.json");
    assert_eq!(
        layers(&spec, 2),
        want(&[
            ("qkv_proj", 3072, 4096),
            ("o_proj", 4096, 2048),
            ("experts.gate_up_proj", 14336, 4096),
            ("experts.down_proj", 4096, 7168),
        ])
    );
    assert_eq!(
        layers(&spec, 8),
        want(&[
            ("qkv_proj", 768, 4096),
            ("o_proj", 4096, 512),
            ("experts.gate_up_proj", 3584, 4096),
            ("experts.down_proj", 4096, 1792),
        ])
    );
    let moe = spec.moe.as_ref().unwrap();
    assert_eq!((moe.experts, moe.experts_per_token, spec.intermediate), (8, 2, 0));
}

#[test]
fn qwen2_57b_a14b_shared_expert_is_one_mlp() {
    let spec = load("qwen2-57b-a14b.json");
    assert_eq!(
        layers(&spec, 4),
        want(&[
            ("qkv_proj", 1152, 3584),
            ("o_proj", 3584, 896),
            ("experts.gate_up_proj", 1280, 3584),
            ("experts.down_proj", 3584, 640),
            ("shared_experts.gate_up_proj", 10240, 3584),
            ("shared_experts.down_proj", 3584, 5120),
        ])
    );
    // 28 heads: TP 8 does not divide them.
    let e = spec.layers(8).unwrap_err().to_string();
    assert!(e.contains("TP 8 does not divide the attention head count (28)"), "{e}");
}

#[test]
fn yi_internlm_gemma_and_phi3_dense_models() {
    let yi = load("yi-1.5-34b.json");
    assert_eq!(
        layers(&yi, 8),
        want(&[
            ("qkv_proj", 1152, 7168),
            ("o_proj", 7168, 896),
            ("gate_up_proj", 5120, 7168),
            ("down_proj", 7168, 2560)
        ])
    );
    assert_eq!(
        layers(&yi, 4),
        want(&[
            ("qkv_proj", 2304, 7168),
            ("o_proj", 7168, 1792),
            ("gate_up_proj", 10240, 7168),
            ("down_proj", 7168, 5120)
        ])
    );
    let internlm = load("internlm2.5-20b.json");
    assert_eq!(
        layers(&internlm, 2),
        want(&[
            ("qkv_proj", 4096, 6144),
            ("o_proj", 6144, 3072),
            ("gate_up_proj", 16384, 6144),
            ("down_proj", 6144, 8192)
        ])
    );
    // Gemma's head_dim (256) is not hidden / heads (192).
    let gemma = load("gemma-7b.json");
    assert_eq!(
        layers(&gemma, 1),
        want(&[
            ("qkv_proj", 12288, 3072),
            ("o_proj", 3072, 4096),
            ("gate_up_proj", 49152, 3072),
            ("down_proj", 3072, 24576)
        ])
    );
    assert_eq!(
        layers(&gemma, 2),
        want(&[
            ("qkv_proj", 6144, 3072),
            ("o_proj", 3072, 2048),
            ("gate_up_proj", 24576, 3072),
            ("down_proj", 3072, 12288)
        ])
    );
    // Phi-3-mini: head_dim = 3072 / 32 = 96.
    let phi = load("phi-3-mini.json");
    assert_eq!(
        layers(&phi, 1),
        want(&[
            ("qkv_proj", 9216, 3072),
            ("o_proj", 3072, 3072),
            ("gate_up_proj", 16384, 3072),
            ("down_proj", 3072, 8192)
        ])
    );
    assert_eq!(
        layers(&phi, 2),
        want(&[
            ("qkv_proj", 4608, 3072),
            ("o_proj", 3072, 1536),
            ("gate_up_proj", 8192, 3072),
            ("down_proj", 3072, 4096)
        ])
    );
}

/// More ranks than KV heads: each rank holds one KV head, replicated (Llama 3.1 70B: 64 heads, 8 KV heads at
/// TP 16 -> qkv N = (64 / 16 + 2) * 128); Yi-1.5-34B's 56 heads do not divide over 16 ranks.
#[test]
fn kv_heads_are_replicated_past_their_count() {
    let llama = load("llama-3.1-70b.json");
    let table = llama.layer_table(16).unwrap();
    assert_eq!((table[0].0.n, table[0].0.k, table[0].1), (768, 8192, Parallel::Column));
    assert!(load("yi-1.5-34b.json").layers(16).is_err());
}

/// Layers without experts where vLLM's decoder layer says so: Qwen-MoE's `mlp_only_layers` and
/// `decoder_sparse_step`, DeepSeek's `first_k_dense_replace` and `moe_layer_freq`.
#[test]
fn dense_layers_of_moe_models_follow_vllm() {
    let qwen = r#"{"architectures":["Qwen3MoeForCausalLM"],"hidden_size":2048,"intermediate_size":6144,
        "moe_intermediate_size":768,"num_attention_heads":32,"num_key_value_heads":4,"head_dim":128,
        "num_hidden_layers":8,"num_experts":16,"num_experts_per_tok":2,"decoder_sparse_step":2,"mlp_only_layers":[1]}"#;
    // Layers 0, 2, 4, 6 ((i + 1) odd) and 1 (listed) are dense: 5 of 8.
    let spec = ModelSpec::parse_hf_config(qwen, "q.json", "q").unwrap();
    assert_eq!((spec.intermediate, spec.moe.as_ref().unwrap().dense_layers), (6144, 5));
    let names: Vec<String> = spec.layers(2).unwrap().into_iter().map(|l| l.name).collect();
    assert_eq!(names, ["qkv_proj", "o_proj", "gate_up_proj", "down_proj", "experts.gate_up_proj", "experts.down_proj"]);
    let all_dense = qwen.replace("\"mlp_only_layers\":[1]", "\"mlp_only_layers\":[1,3,5,7]");
    let spec = ModelSpec::parse_hf_config(&all_dense, "q.json", "q").unwrap();
    assert!(spec.moe.is_none() && spec.intermediate == 6144);
    let deepseek = std::fs::read_to_string(fixture("deepseek-v3.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&deepseek).unwrap();
    let mut v2 = v.clone();
    v2["moe_layer_freq"] = 2.into();
    let spec = ModelSpec::parse_hf_config(&v2.to_string(), "d.json", "d").unwrap();
    // Layers 0-2 dense, then the odd layers 3..=59: 3 + 29 = 32 dense of 61.
    assert_eq!(spec.moe.as_ref().unwrap().dense_layers, 32);
    let mut none = v;
    none["n_routed_experts"] = serde_json::Value::Null;
    let spec = ModelSpec::parse_hf_config(&none.to_string(), "d.json", "d").unwrap();
    assert!(spec.moe.is_none() && spec.intermediate == 18432);
}

/// Each bad config is one error naming the file, the key and the value.
#[test]
fn bad_configs_name_the_file_the_key_and_the_value() {
    let base = std::fs::read_to_string(fixture("qwen2-57b-a14b.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&base).unwrap();
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        ("num_key_value_heads", 5.into(), "key `num_key_value_heads`: 5 must divide num_attention_heads = 28"),
        (
            "num_key_value_heads",
            (-4).into(),
            "key `num_key_value_heads`: must be a whole number from 1 to 1048576, got -4",
        ),
        (
            "shared_expert_intermediate_size",
            1000.into(),
            "key `shared_expert_intermediate_size`: 1000 is not a multiple of moe_intermediate_size = 2560",
        ),
        ("num_experts_per_tok", 65.into(), "key `num_experts_per_tok`: 65 is more than the 64 experts"),
        (
            "mlp_only_layers",
            serde_json::json!([3, 28]),
            "key `mlp_only_layers`: 28 is not a decoder layer index (0 to 27)",
        ),
        (
            "hidden_size",
            serde_json::json!("3584"),
            "key `hidden_size`: must be a whole number from 1 to 1048576, got \"3584\"",
        ),
        ("hidden_size", serde_json::json!(3584.5), "got 3584.5"),
        ("num_hidden_layers", 100_000.into(), "key `num_hidden_layers`: must be from 1 to 65536, got 100000"),
        ("tie_word_embeddings", "no".into(), "key `tie_word_embeddings`: must be true or false, got \"no\""),
        (
            "architectures",
            serde_json::json!(["FalconForCausalLM"]),
            "key `architectures`: \"FalconForCausalLM\": no architecture whose GEMM layout is known",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (key, value, expected) in cases {
        let mut bad = v.clone();
        bad[key] = value;
        let path = dir.path().join("config.json");
        std::fs::write(&path, bad.to_string()).unwrap();
        let e = ModelSpec::load_hf_config(&path).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}: ", path.display())) && e.contains(expected), "{key}: {e}");
    }
    let mut unknown = v.clone();
    unknown.as_object_mut().unwrap().remove("architectures");
    unknown["model_type"] = "falcon".into();
    let e = ModelSpec::parse_hf_config(&unknown.to_string(), "c.json", "c").unwrap_err().to_string();
    assert!(e.starts_with("c.json: key `model_type`: \"falcon\": no architecture whose GEMM layout is known; supported: LlamaForCausalLM"), "{e}");
    let mut missing = v;
    missing.as_object_mut().unwrap().remove("moe_intermediate_size");
    let e = ModelSpec::parse_hf_config(&missing.to_string(), "c.json", "c").unwrap_err().to_string();
    assert_eq!(
        e,
        "c.json: key `moe_intermediate_size`: missing (or null); Qwen2MoeForCausalLM needs it to shape its GEMMs"
    );
    let e = ModelSpec::load_hf_config(&dir.path().join("absent.json")).unwrap_err().to_string();
    assert!(e.contains("absent.json: cannot read the model spec"), "{e}");
}

/// `synth shapes --hf-config` lists the layers `--model` lists, and every command that takes a model
/// takes --hf-config (one option group), alone.
#[test]
fn the_cli_takes_hf_config_wherever_it_takes_a_model() {
    let path = fixture("llama-3.1-8b.json").display().to_string();
    let hf = common::synth(&common::strs(&["shapes", "--hf-config", &path, "--tp", "2", "--m-set", "decode"]), &[]);
    let model =
        common::synth(&common::strs(&["shapes", "--model", "llama-3.1-8b", "--tp", "2", "--m-set", "decode"]), &[]);
    assert!(hf.status.success(), "{}", common::text(&hf));
    // The model is named after the file (`llama-3.1-8b.json`): the same bytes.
    assert_eq!(String::from_utf8_lossy(&hf.stdout), String::from_utf8_lossy(&model.stdout));
    for cmd in ["shapes", "run", "compare", "search", "bench", "export", "configs"] {
        let mut args = vec![cmd.to_string()];
        if matches!(cmd, "export" | "configs") {
            args.push("vllm".into());
        }
        args.extend(common::strs(&["--hf-config", &path, "--model", "qwen3-32b"]));
        let o = common::synth(&args, &[]);
        let text = common::text(&o);
        assert!(!o.status.success() && text.contains("cannot be used with"), "{cmd}: {text}");
        let help = common::synth(&common::strs(&[cmd, "--help"]), &[]);
        assert!(String::from_utf8_lossy(&help.stdout).contains("--hf-config <FILE>"), "{cmd}");
    }
}
