//! GEMM shapes of decoder-only transformer models: model specs (TOML, built-ins embedded from `shapes/`) with
//! grouped-query or multi-head latent attention and a dense or mixture-of-experts MLP, every linear layer's
//! (N, K) at a tensor-parallel degree, and the M sets the tool measures and trains on.

mod hf_config;
mod msets;
pub mod runtime_log;
mod spec;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::table::Shape;

pub use hf_config::supported_architectures;

pub use msets::{
    m_aiter_grid, m_dataset_grid, m_decode, m_log_uniform, m_off_grid, m_pow2, m_sparse_grid, on_aiter_grid, sample_m,
};

/// Built-in model specs: (name, TOML text), from `shapes/*.toml`.
const BUILTINS: [(&str, &str); 12] = [
    ("qwen3-32b", include_str!("../../../../shapes/qwen3-32b.toml")),
    ("llama-3.1-8b", include_str!("../../../../shapes/llama-3.1-8b.toml")),
    ("llama-3.1-70b", include_str!("../../../../shapes/llama-3.1-70b.toml")),
    ("qwen2.5-72b", include_str!("../../../../shapes/qwen2.5-72b.toml")),
    ("qwen2.5-7b", include_str!("../../../../shapes/qwen2.5-7b.toml")),
    ("llama-3.2-3b", include_str!("../../../../shapes/llama-3.2-3b.toml")),
    ("minicpm3-4b", include_str!("../../../../shapes/minicpm3-4b.toml")),
    ("deepseek-v2-lite", include_str!("../../../../shapes/deepseek-v2-lite.toml")),
    ("qwen3-30b-a3b", include_str!("../../../../shapes/qwen3-30b-a3b.toml")),
    ("qwen2.5-0.5b", include_str!("../../../../shapes/qwen2.5-0.5b.toml")),
    ("llama-3.1-405b", include_str!("../../../../shapes/llama-3.1-405b.toml")),
    ("mistral-large-2411", include_str!("../../../../shapes/mistral-large-2411.toml")),
];

/// Width of one FP8 block-scale group along K: a layer whose K is not a multiple of it cannot run a
/// block-scale GEMM (`synth bench` names such layers and measures the others).
pub const SCALE_K: u32 = 128;

/// Errors from loading a spec or deriving its shapes.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    #[error("unknown model \"{name}\"; built-in models: {}; for another model pass its spec file with --spec, or (where a command has no --spec) its layers from `synth shapes --spec FILE` as --shapes N:K,...", .available.join(", "))]
    UnknownModel { name: String, available: Vec<String> },
    #[error("{path}: cannot read the model spec: {reason}")]
    Io { path: String, reason: std::io::Error },
    #[error("{path}: invalid model spec: {message}")]
    Parse { path: String, message: String },
    #[error("{0}")]
    Syntax(synth_base::diag::Located),
    #[error("{path}: field `{field}` must be a positive integer, got {value}")]
    NonPositive { path: String, field: &'static str, value: u32 },
    #[error("{path}: invalid model spec: field `{field}`: {message}")]
    Field { path: String, field: &'static str, message: String },
    #[error("tensor-parallel degree must be at least 1, got 0")]
    ZeroTp,
    #[error("{model}: TP {tp} does not divide the {what} ({value}); use a TP that divides {value}")]
    TpNotDivisor { model: String, tp: u32, what: &'static str, value: u32 },
    #[error(
        "{model}: TP {tp} is neither a divisor nor a multiple of the KV head count ({kv}); use a TP that divides \
         {kv} or that {kv} divides (each rank then holds one KV head, replicated, as vLLM does)"
    )]
    TpKvHeads { model: String, tp: u32, kv: u32 },
    #[error("{model}: {layer} dimension {value} at TP {tp} does not fit in 32 bits")]
    TooLarge { model: String, layer: &'static str, tp: u32, value: String },
}

/// Dimensions of a decoder-only transformer (the numbers of its Hugging Face `config.json`).
///
/// Attention is grouped-query (`kv_heads`, `head_dim`) unless `mla` is set (multi-head latent attention);
/// the MLP is dense (`intermediate`) unless `moe` is set, where the first `moe.dense_layers` decoder layers
/// keep a dense MLP of `intermediate` and the others run experts of `moe.intermediate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelSpec {
    /// Short model name (`qwen3-32b`).
    pub name: String,
    /// Where the numbers come from.
    pub source: Option<String>,
    /// hidden_size.
    pub hidden: u32,
    /// intermediate_size of the dense MLP; 0 when no decoder layer has a dense MLP (every layer is MoE).
    pub intermediate: u32,
    /// num_attention_heads.
    pub heads: u32,
    /// num_key_value_heads of grouped-query attention; 0 with latent attention (`mla`), whose GEMMs it
    /// does not shape.
    pub kv_heads: u32,
    /// Per-head dimension of grouped-query attention; 0 with latent attention (see `mla`).
    pub head_dim: u32,
    /// num_hidden_layers (TOML key `layers`).
    #[serde(rename = "layers")]
    pub num_layers: u32,
    /// Multi-head latent attention (DeepSeek-V2 style), the TOML table `[mla]`.
    pub mla: Option<MlaSpec>,
    /// Mixture-of-experts MLP, the TOML table `[moe]`.
    pub moe: Option<MoeSpec>,
}

/// Multi-head latent attention: the query is projected directly (`q_proj`) or through a rank-`q_lora_rank`
/// bottleneck (`q_a_proj` then `q_b_proj`); keys and values through a rank-`kv_lora_rank` latent
/// (`kv_a_proj`, which also carries the shared rope key, then `kv_b_proj`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MlaSpec {
    /// q_lora_rank; absent where the config has `null` (the query is projected from the hidden state).
    #[serde(default)]
    pub q_lora_rank: Option<u32>,
    /// kv_lora_rank.
    pub kv_lora_rank: u32,
    /// qk_nope_head_dim.
    pub qk_nope_head_dim: u32,
    /// qk_rope_head_dim.
    pub qk_rope_head_dim: u32,
    /// v_head_dim.
    pub v_head_dim: u32,
    /// With `q_lora_rank`: whether q_a and kv_a run as one GEMM (`fused_qkv_a_proj`, vLLM's DeepseekV2) or as
    /// two (`q_a_proj`, `kv_a_proj`, vLLM's MiniCPM3); required with `q_lora_rank`, refused without it.
    #[serde(default)]
    pub fused_qkv_a: Option<bool>,
}

/// Mixture-of-experts MLP: routed experts of `intermediate` each, optional shared experts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeSpec {
    /// moe_intermediate_size: one expert's intermediate size.
    pub intermediate: u32,
    /// Routed experts (n_routed_experts, num_experts, num_local_experts).
    pub experts: u32,
    /// num_experts_per_tok.
    pub experts_per_token: u32,
    /// n_shared_experts: run as one MLP of `shared_experts · intermediate` (DeepSeek's layout); 0 for none.
    #[serde(default)]
    pub shared_experts: u32,
    /// first_k_dense_replace: leading decoder layers whose MLP is dense (of the spec's `intermediate`).
    #[serde(default)]
    pub dense_layers: u32,
}

/// One linear layer's weight shape at a TP degree: the GEMM is (M tokens) x K -> N.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Layer {
    /// `qkv_proj`, `o_proj`, `gate_up_proj`, `down_proj`, the latent-attention projections (`q_proj`,
    /// `fused_qkv_a_proj`, `q_a_proj`, `kv_a_proj`, `q_b_proj`, `kv_b_proj`) or the expert GEMMs
    /// (`experts.gate_up_proj`, `experts.down_proj`, `shared_experts.gate_up_proj`, `shared_experts.down_proj`).
    pub name: String,
    pub n: u32,
    pub k: u32,
}

impl Layer {
    /// The GEMM of this layer at `m` tokens.
    pub fn shape(&self, m: u32) -> Shape {
        Shape::new(m, self.n, self.k)
    }

    /// Whether a block-scale FP8 GEMM can run this layer: K is a whole number of 128-wide scale groups.
    /// (N has no such condition: the weight scales cover ceil(N / 128) row blocks.)
    pub fn runs_blockscale(&self) -> bool {
        self.k.is_multiple_of(SCALE_K)
    }
}

/// How tensor parallelism splits a layer (vLLM's linear layers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Parallel {
    /// Column-parallel: N is divided by TP.
    Column,
    /// Row-parallel: K is divided by TP.
    Row,
    /// Replicated on every rank: neither dimension depends on TP.
    Replicated,
}

impl Parallel {
    /// `N / TP`, `K / TP` or `replicated`.
    pub fn rule(self) -> &'static str {
        match self {
            Parallel::Column => "N / TP",
            Parallel::Row => "K / TP",
            Parallel::Replicated => "replicated",
        }
    }
}

impl ModelSpec {
    /// Names of the built-in specs.
    pub fn builtin_names() -> Vec<&'static str> {
        BUILTINS.iter().map(|(n, _)| *n).collect()
    }

    /// A built-in spec by name (`qwen3-32b`, `llama-3.1-8b`, `llama-3.1-70b`, `qwen2.5-72b`, ...).
    pub fn builtin(name: &str) -> Result<ModelSpec, ShapeError> {
        let (key, text) = BUILTINS.iter().find(|(n, _)| *n == name).ok_or_else(|| ShapeError::UnknownModel {
            name: name.to_string(),
            available: Self::builtin_names().iter().map(|s| s.to_string()).collect(),
        })?;
        ModelSpec::parse(text, &format!("shapes/{key}.toml"))
    }

    /// Loads a spec from a TOML file.
    pub fn load(path: &Path) -> Result<ModelSpec, ShapeError> {
        let shown = path.display().to_string();
        let text = synth_base::input::read_text_capped(path, synth_base::input::MAX_SPEC_BYTES, "model spec")
            .map_err(|reason| ShapeError::Io { path: shown.clone(), reason })?;
        ModelSpec::parse(&text, &shown)
    }

    /// Every (M, N, K) for the layers at `tp` and the given M values, layer-major.
    pub fn shapes(&self, tp: u32, ms: &[u32]) -> Result<Vec<Shape>, ShapeError> {
        Ok(self.layers(tp)?.iter().flat_map(|l| ms.iter().map(move |&m| l.shape(m))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_carry_their_key_as_name() {
        for name in ModelSpec::builtin_names() {
            let spec = ModelSpec::builtin(name).unwrap();
            assert_eq!(spec.name, name);
            assert!(spec.layers(1).is_ok());
        }
    }

    #[test]
    fn unknown_field_is_rejected() {
        let text = "name='x'\nhidden=1\nintermediate=1\nheads=1\nkv_heads=1\nhead_dim=1\nlayers=1\nvocab=3\n";
        let e = ModelSpec::parse(text, "x.toml").unwrap_err().to_string();
        assert!(e.starts_with("x.toml:8:1: invalid model spec") && e.contains("vocab"), "{e}");
    }
}
