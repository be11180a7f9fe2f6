//! GEMM shapes of dense transformer models: model specs (TOML, built-ins embedded from `shapes/`), the four
//! linear layers' (N, K) at a tensor-parallel degree, and the M sets the tool measures and trains on.

pub mod cmd;
mod msets;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::table::Shape;

pub use msets::{
    m_aiter_grid, m_dataset_grid, m_decode, m_log_uniform, m_off_grid, m_pow2, m_sparse_grid, on_aiter_grid, sample_m,
};

/// Built-in model specs: (name, TOML text), from `shapes/*.toml`.
const BUILTINS: [(&str, &str); 6] = [
    ("qwen3-32b", include_str!("../../shapes/qwen3-32b.toml")),
    ("llama-3.1-8b", include_str!("../../shapes/llama-3.1-8b.toml")),
    ("llama-3.1-70b", include_str!("../../shapes/llama-3.1-70b.toml")),
    ("qwen2.5-72b", include_str!("../../shapes/qwen2.5-72b.toml")),
    ("qwen2.5-7b", include_str!("../../shapes/qwen2.5-7b.toml")),
    ("llama-3.2-3b", include_str!("../../shapes/llama-3.2-3b.toml")),
];

/// Errors from loading a spec or deriving its shapes.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    #[error("unknown model \"{name}\"; built-in models: {}; or pass a spec file with --spec", .available.join(", "))]
    UnknownModel { name: String, available: Vec<String> },
    #[error("{path}: cannot read the model spec: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: invalid model spec: {message}")]
    Parse { path: String, message: String },
    #[error("{0}")]
    Syntax(crate::diag::Located),
    #[error("{path}: field `{field}` must be a positive integer, got {value}")]
    NonPositive { path: String, field: &'static str, value: u32 },
    #[error("tensor-parallel degree must be at least 1, got 0")]
    ZeroTp,
    #[error("{model}: TP {tp} does not divide the {what} ({value}); use a TP that divides {value}")]
    TpNotDivisor { model: String, tp: u32, what: &'static str, value: u32 },
    #[error("{model}: {layer} dimension {value} at TP {tp} does not fit in 32 bits")]
    TooLarge { model: String, layer: &'static str, tp: u32, value: u64 },
}

/// Dimensions of a dense decoder-only transformer (the numbers of its Hugging Face `config.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Short model name (`qwen3-32b`).
    pub name: String,
    /// Where the numbers come from.
    #[serde(default)]
    pub source: Option<String>,
    /// hidden_size.
    pub hidden: u32,
    /// intermediate_size of the MLP.
    pub intermediate: u32,
    /// num_attention_heads.
    pub heads: u32,
    /// num_key_value_heads.
    pub kv_heads: u32,
    /// Per-head dimension.
    pub head_dim: u32,
    /// num_hidden_layers (TOML key `layers`).
    #[serde(rename = "layers")]
    pub num_layers: u32,
}

/// One linear layer's weight shape at a TP degree: the GEMM is (M tokens) x K -> N.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Layer {
    /// `qkv_proj`, `o_proj`, `gate_up_proj` or `down_proj`.
    pub name: String,
    pub n: u32,
    pub k: u32,
}

impl Layer {
    /// The GEMM of this layer at `m` tokens.
    pub fn shape(&self, m: u32) -> Shape {
        Shape::new(m, self.n, self.k)
    }
}

impl ModelSpec {
    /// Names of the built-in specs.
    pub fn builtin_names() -> Vec<&'static str> {
        BUILTINS.iter().map(|(n, _)| *n).collect()
    }

    /// A built-in spec by name (`qwen3-32b`, `llama-3.1-8b`, `llama-3.1-70b`, `qwen2.5-72b`).
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
        let text = crate::input::read_text_capped(path, crate::input::MAX_SPEC_BYTES, "model spec")
            .map_err(|source| ShapeError::Io { path: shown.clone(), source })?;
        ModelSpec::parse(&text, &shown)
    }

    /// Parses spec TOML text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<ModelSpec, ShapeError> {
        let spec: ModelSpec = toml::from_str(text)
            .map_err(|e| ShapeError::Syntax(crate::diag::toml_error(origin, text, "invalid model spec", &e)))?;
        for (field, value) in [
            ("hidden", spec.hidden),
            ("intermediate", spec.intermediate),
            ("heads", spec.heads),
            ("kv_heads", spec.kv_heads),
            ("head_dim", spec.head_dim),
            ("layers", spec.num_layers),
        ] {
            if value == 0 {
                return Err(ShapeError::NonPositive { path: origin.to_string(), field, value });
            }
        }
        if spec.name.trim().is_empty() {
            return Err(ShapeError::Parse { path: origin.to_string(), message: "field `name` is empty".into() });
        }
        if spec.kv_heads > spec.heads || !spec.heads.is_multiple_of(spec.kv_heads) {
            return Err(ShapeError::Parse {
                path: origin.to_string(),
                message: format!(
                    "kv_heads = {} must divide heads = {} (each KV head serves a whole group of attention heads)",
                    spec.kv_heads, spec.heads
                ),
            });
        }
        Ok(spec)
    }

    /// The four linear layers at tensor-parallel degree `tp`, in order qkv, o, gate_up, down.
    ///
    /// Column-parallel layers split N, row-parallel layers split K:
    /// qkv N = (heads + 2·kv_heads)·head_dim / tp, K = hidden; o N = hidden, K = heads·head_dim / tp;
    /// gate_up N = 2·intermediate / tp, K = hidden; down N = hidden, K = intermediate / tp.
    /// `tp` must divide the head count, the KV head count and the intermediate size.
    pub fn layers(&self, tp: u32) -> Result<Vec<Layer>, ShapeError> {
        if tp == 0 {
            return Err(ShapeError::ZeroTp);
        }
        for (what, value) in [
            ("attention head count", self.heads),
            ("KV head count", self.kv_heads),
            ("intermediate size", self.intermediate),
        ] {
            if value % tp != 0 {
                return Err(ShapeError::TpNotDivisor { model: self.name.clone(), tp, what, value });
            }
        }
        let (t, hd) = (u64::from(tp), u64::from(self.head_dim));
        let fit = |layer: &'static str, v: u64| {
            u32::try_from(v).map_err(|_| ShapeError::TooLarge { model: self.name.clone(), layer, tp, value: v })
        };
        let heads = u64::from(self.heads);
        let kv = u64::from(self.kv_heads);
        let inter = u64::from(self.intermediate);
        let layer = |name: &str, n: u32, k: u32| Layer { name: name.to_string(), n, k };
        Ok(vec![
            layer("qkv_proj", fit("qkv_proj", (heads + 2 * kv) * hd / t)?, self.hidden),
            layer("o_proj", self.hidden, fit("o_proj", heads * hd / t)?),
            layer("gate_up_proj", fit("gate_up_proj", 2 * inter / t)?, self.hidden),
            layer("down_proj", self.hidden, fit("down_proj", inter / t)?),
        ])
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
