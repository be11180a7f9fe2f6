//! A model spec from the model's own Hugging Face `config.json` (`--hf-config FILE`): the same
//! [`ModelSpec`] a `shapes/*.toml` file gives, so every layer and its TP rule come from one place
//! ([`ModelSpec::layer_table`], vLLM's rules).
//!
//! The architecture (`architectures`, else `model_type`) decides which keys shape which GEMMs, as vLLM's
//! model code reads them; an architecture outside this list is refused, never guessed:
//!
//! | architectures | attention | MLP |
//! |---|---|---|
//! | Llama, Mistral, Qwen2, Qwen3, InternLM2, Phi3, Gemma, Gemma2 | grouped-query | dense |
//! | Mixtral | grouped-query | experts of `intermediate_size` (`num_local_experts`), every layer |
//! | Qwen2Moe, Qwen3Moe | grouped-query | experts of `moe_intermediate_size` (`num_experts`), a dense MLP on the layers of `mlp_only_layers` and off `decoder_sparse_step`; Qwen2Moe's shared expert of `shared_expert_intermediate_size` |
//! | DeepseekV2, DeepseekV3 | latent (`q_lora_rank` null or set: q_a and kv_a fused) | experts of `moe_intermediate_size` (`n_routed_experts`) from layer `first_k_dense_replace` on, every `moe_layer_freq`-th; `n_shared_experts` shared |
//! | MiniCPM3 | latent (q_a and kv_a separate; `v_head_dim` defaults to `qk_nope_head_dim`) | dense |
//!
//! Grouped-query attention: `num_key_value_heads` defaults to `num_attention_heads`, `head_dim` (absent
//! or null) to `hidden_size / num_attention_heads`, as vLLM's model code does. The embeddings and the
//! LM head (tied or not, `tie_word_embeddings`) are not layers of a model spec, so they are not read
//! beyond their type; neither are the routers (`gate`) of the experts. A spec's `moe.dense_layers` is the
//! number of decoder layers with a dense MLP, wherever they are (the GEMM shapes do not depend on which).
//!
//! Every key read is checked where it enters: its JSON type, and a positive whole number of at most
//! [`MAX_SIZE`] (sizes) or [`MAX_COUNT`] (layers, experts); an error names the file, the key and the value.

use std::path::Path;

use serde_json::{Map, Value};

use super::{MlaSpec, ModelSpec, MoeSpec, ShapeError};
use synth_base::diag::Located;

/// The largest size a config may give (hidden, intermediate, heads, ranks, head dimensions): 2^20, far above
/// any model's, and small enough that every product of the layer table fits 64 bits.
pub const MAX_SIZE: u64 = 1 << 20;
/// The largest count a config may give (decoder layers, experts, sparse step).
pub const MAX_COUNT: u64 = 1 << 16;

/// How an architecture's keys shape its GEMMs (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Dense,
    Mixtral,
    QwenMoe { shared_expert: bool },
    DeepSeek,
    MiniCpm3,
}

/// (architectures entry, model_type, family).
const ARCHITECTURES: [(&str, &str, Family); 14] = [
    ("LlamaForCausalLM", "llama", Family::Dense),
    ("MistralForCausalLM", "mistral", Family::Dense),
    ("Qwen2ForCausalLM", "qwen2", Family::Dense),
    ("Qwen3ForCausalLM", "qwen3", Family::Dense),
    ("InternLM2ForCausalLM", "internlm2", Family::Dense),
    ("Phi3ForCausalLM", "phi3", Family::Dense),
    ("GemmaForCausalLM", "gemma", Family::Dense),
    ("Gemma2ForCausalLM", "gemma2", Family::Dense),
    ("MixtralForCausalLM", "mixtral", Family::Mixtral),
    ("Qwen2MoeForCausalLM", "qwen2_moe", Family::QwenMoe { shared_expert: true }),
    ("Qwen3MoeForCausalLM", "qwen3_moe", Family::QwenMoe { shared_expert: false }),
    ("DeepseekV2ForCausalLM", "deepseek_v2", Family::DeepSeek),
    ("DeepseekV3ForCausalLM", "deepseek_v3", Family::DeepSeek),
    ("MiniCPM3ForCausalLM", "minicpm3", Family::MiniCpm3),
];

/// The `architectures` entries read (for messages and help).
pub fn supported_architectures() -> Vec<&'static str> {
    ARCHITECTURES.iter().map(|(a, _, _)| *a).collect()
}

impl ModelSpec {
    /// A spec from a Hugging Face `config.json` file (read through the capped reader).
    pub fn load_hf_config(path: &Path) -> Result<ModelSpec, ShapeError> {
        let shown = path.display().to_string();
        let text = synth_base::input::read_text_capped(path, synth_base::input::MAX_SPEC_BYTES, "Hugging Face config")
            .map_err(|reason| ShapeError::Io { path: shown.clone(), reason })?;
        ModelSpec::parse_hf_config(&text, &shown, &default_name(path))
    }

    /// A spec from `config.json` text; `origin` names it in errors, `fallback_name` names the model when the
    /// config has no `_name_or_path`.
    pub fn parse_hf_config(text: &str, origin: &str, fallback_name: &str) -> Result<ModelSpec, ShapeError> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            let full = e.to_string();
            let message = full.rsplit_once(" at line ").map_or(full.as_str(), |(m, _)| m);
            ShapeError::Syntax(
                Located::new(origin, format!("not a JSON config: {message}")).at(e.line().max(1), e.column().max(1)),
            )
        })?;
        let obj = value.as_object().ok_or_else(|| {
            ShapeError::Syntax(Located::new(origin, "a config.json is one JSON object ({...}), got another value"))
        })?;
        Config { obj, origin }.spec(fallback_name)
    }
}

/// The model's name when the config has none: the directory holding `config.json`, else the file stem.
fn default_name(path: &Path) -> String {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("hf-config");
    if stem == "config" {
        if let Some(dir) = path.parent().and_then(|d| d.file_name()).and_then(|d| d.to_str()) {
            return dir.to_string();
        }
    }
    stem.to_string()
}

/// The parsed object and where it came from.
struct Config<'a> {
    obj: &'a Map<String, Value>,
    origin: &'a str,
}

/// A value as an error shows it: its JSON text, cut at 40 characters.
fn shown(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(40) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text,
    }
}

impl Config<'_> {
    fn err(&self, key: &str, message: String) -> ShapeError {
        ShapeError::Syntax(Located::new(self.origin, message).key(key))
    }

    /// A whole number in `min..=max`, or `None` when the key is absent or null.
    fn number(&self, key: &str, min: u64, max: u64) -> Result<Option<u32>, ShapeError> {
        let Some(v) = self.obj.get(key).filter(|v| !v.is_null()) else { return Ok(None) };
        let n = v
            .as_u64()
            .ok_or_else(|| self.err(key, format!("must be a whole number from {min} to {max}, got {}", shown(v))))?;
        if !(min..=max).contains(&n) {
            return Err(self.err(key, format!("must be from {min} to {max}, got {n}")));
        }
        Ok(Some(u32::try_from(n).map_err(|_| self.err(key, format!("{n} does not fit in 32 bits")))?))
    }

    /// A positive size, absent or null allowed.
    fn opt_size(&self, key: &str) -> Result<Option<u32>, ShapeError> {
        self.number(key, 1, MAX_SIZE)
    }

    /// A positive size the architecture needs.
    fn size(&self, key: &str) -> Result<u32, ShapeError> {
        self.opt_size(key)?.ok_or_else(|| self.missing(key))
    }

    /// A positive count the architecture needs.
    fn count(&self, key: &str) -> Result<u32, ShapeError> {
        self.number(key, 1, MAX_COUNT)?.ok_or_else(|| self.missing(key))
    }

    fn missing(&self, key: &str) -> ShapeError {
        let arch = self.architecture().map_or("this architecture", |(a, _)| a);
        self.err(key, format!("missing (or null); {arch} needs it to shape its GEMMs"))
    }

    /// The family of the first supported `architectures` entry, else (no `architectures`) of `model_type`.
    fn architecture(&self) -> Result<(&'static str, Family), ShapeError> {
        let lookup = |name: &str, by_type: bool| {
            ARCHITECTURES
                .iter()
                .find(|(a, t, _)| if by_type { *t == name } else { *a == name })
                .map(|(a, _, f)| (*a, *f))
        };
        let mut named: Vec<Result<(&'static str, Family), &str>> = Vec::new();
        let key = match (self.obj.get("architectures"), self.obj.get("model_type")) {
            (Some(v), _) => {
                let list = v
                    .as_array()
                    .filter(|l| !l.is_empty() && l.iter().all(Value::is_string))
                    .ok_or_else(|| self.err("architectures", format!("must be a list of names, got {}", shown(v))))?;
                named.extend(list.iter().filter_map(Value::as_str).map(|s| lookup(s, false).ok_or(s)));
                "architectures"
            }
            (None, Some(v)) => {
                let t =
                    v.as_str().ok_or_else(|| self.err("model_type", format!("must be a name, got {}", shown(v))))?;
                named.push(lookup(t, true).ok_or(t));
                "model_type"
            }
            (None, None) => "architectures",
        };
        if let Some(found) = named.iter().find_map(|r| r.ok()) {
            return Ok(found);
        }
        let given: Vec<String> = named.iter().filter_map(|r| r.err()).map(|n| format!("{n:?}")).collect();
        Err(self.err(
            key,
            format!(
                "{}: no architecture whose GEMM layout is known; supported: {} (for another model write a spec \
                 TOML and pass --spec)",
                if given.is_empty() {
                    "neither architectures nor model_type given".to_string()
                } else {
                    given.join(", ")
                },
                supported_architectures().join(", ")
            ),
        ))
    }

    /// Type checks of keys read for no GEMM.
    fn check_unused(&self) -> Result<(), ShapeError> {
        if let Some(v) = self.obj.get("tie_word_embeddings").filter(|v| !v.is_null() && !v.is_boolean()) {
            return Err(self.err("tie_word_embeddings", format!("must be true or false, got {}", shown(v))));
        }
        Ok(())
    }

    fn spec(&self, fallback_name: &str) -> Result<ModelSpec, ShapeError> {
        let (arch, family) = self.architecture()?;
        self.check_unused()?;
        // `_name_or_path` is `org/model` (or a local path): its last component, else the file's name.
        let named = self
            .obj
            .get("_name_or_path")
            .and_then(Value::as_str)
            .and_then(|n| n.trim_end_matches('/').rsplit('/').next());
        let name = named.filter(|n| !n.trim().is_empty()).unwrap_or(fallback_name).to_string();
        let hidden = self.size("hidden_size")?;
        let heads = self.size("num_attention_heads")?;
        let layers = self.count("num_hidden_layers")?;
        let (kv_heads, head_dim, mla) = match family {
            Family::DeepSeek | Family::MiniCpm3 => (0, 0, Some(self.mla(family)?)),
            _ => {
                let (kv, hd) = self.grouped_query(hidden, heads)?;
                (kv, hd, None)
            }
        };
        let (intermediate, moe) = self.mlp(family, layers)?;
        Ok(ModelSpec {
            name,
            source: Some(format!("{} ({arch})", self.origin)),
            hidden,
            intermediate,
            heads,
            kv_heads,
            head_dim,
            num_layers: layers,
            mla,
            moe,
        })
    }

    /// (KV heads, head dimension) of grouped-query attention.
    fn grouped_query(&self, hidden: u32, heads: u32) -> Result<(u32, u32), ShapeError> {
        let kv = self.opt_size("num_key_value_heads")?.unwrap_or(heads);
        if kv > heads || !heads.is_multiple_of(kv) {
            return Err(self.err(
                "num_key_value_heads",
                format!("{kv} must divide num_attention_heads = {heads} (each KV head serves a whole group of heads)"),
            ));
        }
        let head_dim = match self.opt_size("head_dim")? {
            Some(d) => d,
            None if hidden.is_multiple_of(heads) => hidden / heads,
            None => {
                return Err(self.err(
                    "hidden_size",
                    format!(
                        "{hidden} is not a multiple of num_attention_heads = {heads} and the config gives no head_dim"
                    ),
                ))
            }
        };
        Ok((kv, head_dim))
    }

    /// Latent attention: DeepSeek fuses q_a and kv_a into one GEMM where q_lora_rank is set, MiniCPM3 does not.
    fn mla(&self, family: Family) -> Result<MlaSpec, ShapeError> {
        let q_lora_rank = self.opt_size("q_lora_rank")?;
        let qk_nope_head_dim = self.size("qk_nope_head_dim")?;
        let v_head_dim = match family {
            // configuration_minicpm.py: v_head_dim = qk_nope_head_dim when the config has none.
            Family::MiniCpm3 => self.opt_size("v_head_dim")?.unwrap_or(qk_nope_head_dim),
            _ => self.size("v_head_dim")?,
        };
        Ok(MlaSpec {
            q_lora_rank,
            kv_lora_rank: self.size("kv_lora_rank")?,
            qk_nope_head_dim,
            qk_rope_head_dim: self.size("qk_rope_head_dim")?,
            v_head_dim,
            fused_qkv_a: q_lora_rank.map(|_| family == Family::DeepSeek),
        })
    }

    /// (dense intermediate size or 0, experts) of the MLP.
    fn mlp(&self, family: Family, layers: u32) -> Result<(u32, Option<MoeSpec>), ShapeError> {
        match family {
            Family::Dense | Family::MiniCpm3 => {
                self.refuse_experts()?;
                Ok((self.size("intermediate_size")?, None))
            }
            Family::Mixtral => {
                let moe = self.experts("num_local_experts", "intermediate_size", 0, 0)?;
                Ok((0, Some(moe)))
            }
            Family::QwenMoe { shared_expert } => self.qwen_moe(layers, shared_expert),
            Family::DeepSeek => self.deepseek_moe(layers),
        }
    }

    /// A dense architecture's config naming routed experts is a layout vLLM's model code for it does not run.
    fn refuse_experts(&self) -> Result<(), ShapeError> {
        let arch = self.architecture().map_or("this architecture", |(a, _)| a);
        for key in ["num_experts", "num_local_experts", "n_routed_experts"] {
            if let Some(n) = self.number(key, 0, u64::MAX)? {
                if n > 0 {
                    return Err(self.err(
                        key,
                        format!(
                            "{n} experts, but vLLM runs {arch} with a dense MLP; remove the key, or write a spec TOML \
                             with [moe] and pass --spec"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The routed experts (`experts_key` of `size_key` each), with `shared` shared and `dense` dense layers.
    fn experts(&self, experts_key: &str, size_key: &str, shared: u32, dense: u32) -> Result<MoeSpec, ShapeError> {
        let experts = self.count(experts_key)?;
        let per_token = self.count("num_experts_per_tok")?;
        if per_token > experts {
            return Err(self.err(
                "num_experts_per_tok",
                format!("{per_token} is more than the {experts} experts ({experts_key})"),
            ));
        }
        Ok(MoeSpec {
            intermediate: self.size(size_key)?,
            experts,
            experts_per_token: per_token,
            shared_experts: shared,
            dense_layers: dense,
        })
    }

    /// The dense intermediate size (where `dense` layers have a dense MLP) and the experts, or the dense
    /// model where no layer has experts.
    fn with_dense(&self, layers: u32, dense: u32, moe: MoeSpec) -> Result<(u32, Option<MoeSpec>), ShapeError> {
        if dense == layers {
            return Ok((self.size("intermediate_size")?, None));
        }
        let intermediate = if dense > 0 { self.size("intermediate_size")? } else { 0 };
        Ok((intermediate, Some(moe)))
    }

    /// Qwen2-MoE / Qwen3-MoE: layer i has experts unless it is in `mlp_only_layers` or (i + 1) is not a
    /// multiple of `decoder_sparse_step` (vLLM's Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer).
    fn qwen_moe(&self, layers: u32, shared_expert: bool) -> Result<(u32, Option<MoeSpec>), ShapeError> {
        let step = self.number("decoder_sparse_step", 1, MAX_COUNT)?.unwrap_or(1);
        let only = self.layer_list("mlp_only_layers", layers)?;
        let dense = (0..layers).filter(|i| only.contains(i) || !(i + 1).is_multiple_of(step)).count();
        let dense = u32::try_from(dense).unwrap_or(u32::MAX);
        let shared = if shared_expert {
            let key = "shared_expert_intermediate_size";
            let size = self.number(key, 0, MAX_SIZE)?.ok_or_else(|| self.missing(key))?;
            let expert = self.size("moe_intermediate_size")?;
            if !size.is_multiple_of(expert) {
                return Err(self.err(
                    key,
                    format!(
                        "{size} is not a multiple of moe_intermediate_size = {expert}: a model spec holds the shared \
                         expert as a whole number of experts"
                    ),
                ));
            }
            size / expert
        } else {
            0
        };
        let moe = self.experts("num_experts", "moe_intermediate_size", shared, dense)?;
        self.with_dense(layers, dense, moe)
    }

    /// DeepSeek-V2/V3: layer i has experts when `n_routed_experts` is set, i >= `first_k_dense_replace` and
    /// i is a multiple of `moe_layer_freq` (vLLM's DeepseekV2DecoderLayer); shared experts run as one MLP of
    /// `n_shared_experts · moe_intermediate_size`.
    fn deepseek_moe(&self, layers: u32) -> Result<(u32, Option<MoeSpec>), ShapeError> {
        if self.number("n_routed_experts", 1, MAX_COUNT)?.is_none() {
            return Ok((self.size("intermediate_size")?, None));
        }
        let first = self.number("first_k_dense_replace", 0, MAX_COUNT)?.unwrap_or(0);
        let freq = self.number("moe_layer_freq", 1, MAX_COUNT)?.unwrap_or(1);
        let dense = (0..layers).filter(|&i| !(i >= first && i.is_multiple_of(freq))).count();
        let dense = u32::try_from(dense).unwrap_or(u32::MAX);
        let shared = self.number("n_shared_experts", 0, MAX_COUNT)?.unwrap_or(0);
        let moe = self.experts("n_routed_experts", "moe_intermediate_size", shared, dense)?;
        self.with_dense(layers, dense, moe)
    }

    /// A list of decoder layer indices, each below `layers`; absent or null is empty.
    fn layer_list(&self, key: &str, layers: u32) -> Result<Vec<u32>, ShapeError> {
        let Some(v) = self.obj.get(key).filter(|v| !v.is_null()) else { return Ok(Vec::new()) };
        let list =
            v.as_array().ok_or_else(|| self.err(key, format!("must be a list of layer indices, got {}", shown(v))))?;
        list.iter()
            .map(|e| match e.as_u64() {
                Some(i) if i < u64::from(layers) => Ok(i as u32),
                _ => Err(self.err(
                    key,
                    format!("{} is not a decoder layer index (0 to {})", shown(e), layers.saturating_sub(1)),
                )),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ModelSpec, ShapeError> {
        ModelSpec::parse_hf_config(text, "c.json", "m")
    }

    #[test]
    fn a_llama_config_is_the_spec_of_its_numbers() {
        let text = r#"{"architectures":["LlamaForCausalLM"],"hidden_size":4096,"intermediate_size":14336,
            "num_attention_heads":32,"num_key_value_heads":8,"num_hidden_layers":32,"tie_word_embeddings":false}"#;
        let spec = parse(text).unwrap();
        assert_eq!(
            (spec.hidden, spec.intermediate, spec.heads, spec.kv_heads, spec.head_dim),
            (4096, 14336, 32, 8, 128)
        );
        assert_eq!(spec.name, "m");
    }

    #[test]
    fn each_bad_value_names_the_key_and_the_value() {
        let base = r#""architectures":["LlamaForCausalLM"],"intermediate_size":14336,"num_attention_heads":32,"num_hidden_layers":32"#;
        for (hidden, want) in [
            ("-4096", "must be a whole number from 1 to 1048576, got -4096"),
            ("4096.5", "got 4096.5"),
            ("\"4096\"", "got \"4096\""),
            ("0", "must be from 1 to 1048576, got 0"),
            ("99999999999", "got 99999999999"),
        ] {
            let e = parse(&format!("{{{base},\"hidden_size\":{hidden}}}")).unwrap_err().to_string();
            assert!(e.starts_with("c.json: key `hidden_size`: ") && e.contains(want), "{e}");
        }
        let e = parse(&format!("{{{base}}}")).unwrap_err().to_string();
        assert_eq!(e, "c.json: key `hidden_size`: missing (or null); LlamaForCausalLM needs it to shape its GEMMs");
        let e = parse("{\"hidden_size\": 1,\n oops}").unwrap_err().to_string();
        assert!(e.starts_with("c.json:2:2: not a JSON config"), "{e}");
        let e = parse(r#"{"architectures":["GPT2LMHeadModel"]}"#).unwrap_err().to_string();
        assert!(
            e.contains("key `architectures`: \"GPT2LMHeadModel\": no architecture") && e.contains("MixtralForCausalLM"),
            "{e}"
        );
    }
}
