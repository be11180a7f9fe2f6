//! Reading a model spec (its checks, naming the file and the field) and deriving its GEMMs at a TP degree.
//!
//! The TP rule is vLLM's (tensor parallelism without expert parallelism):
//!
//! | layer | N | K | TP |
//! |---|---|---|---|
//! | `qkv_proj` | (heads + 2·max(kv_heads, TP))·head_dim | hidden | N / TP |
//! | `o_proj` (GQA) | hidden | heads·head_dim | K / TP |
//! | `fused_qkv_a_proj` | q_lora + kv_lora + rope | hidden | replicated |
//! | `q_a_proj` | q_lora | hidden | replicated |
//! | `kv_a_proj` | kv_lora + rope | hidden | replicated |
//! | `q_proj` | heads·(nope + rope) | hidden | N / TP |
//! | `q_b_proj` | heads·(nope + rope) | q_lora | N / TP |
//! | `kv_b_proj` | heads·(nope + v) | kv_lora | N / TP |
//! | `o_proj` (MLA) | hidden | heads·v | K / TP |
//! | `gate_up_proj` | 2·intermediate | hidden | N / TP |
//! | `down_proj` | hidden | intermediate | K / TP |
//! | `experts.gate_up_proj` | 2·moe.intermediate | hidden | N / TP |
//! | `experts.down_proj` | hidden | moe.intermediate | K / TP |
//! | `shared_experts.gate_up_proj` | 2·shared·moe.intermediate | hidden | N / TP |
//! | `shared_experts.down_proj` | hidden | shared·moe.intermediate | K / TP |
//!
//! (nope, rope, v: `mla.qk_nope_head_dim`, `mla.qk_rope_head_dim`, `mla.v_head_dim`.) Sources: vLLM's
//! `DeepseekV2MLAAttention` (the fused a-projection is a `MergedColumnParallelLinear` with `disable_tp`,
//! `kv_a_proj_with_mqa` a `ReplicatedLinear`; q, kv_b column-parallel, o row-parallel), `MiniCPM3Attention`
//! (q_a and kv_a separate `ReplicatedLinear`s), `DeepseekV2MoE` (shared experts as one MLP of
//! `moe_intermediate_size · n_shared_experts`) and `FusedMoE` (`intermediate_size_per_partition =
//! intermediate_size // tp_size`). A routed expert's GEMM is measured at its per-expert shape: its M is the
//! number of tokens routed to that expert. With expert parallelism instead of TP the expert dimensions are
//! not divided; that deployment is the TP = 1 row of the same spec.

use serde::Deserialize;

use super::{Layer, MlaSpec, ModelSpec, MoeSpec, Parallel, ShapeError};

/// The TOML as written: optional fields stay optional until the checks decide what the spec describes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: String,
    #[serde(default)]
    source: Option<String>,
    hidden: u32,
    #[serde(default)]
    intermediate: Option<u32>,
    heads: u32,
    #[serde(default)]
    kv_heads: Option<u32>,
    #[serde(default)]
    head_dim: Option<u32>,
    layers: u32,
    #[serde(default)]
    mla: Option<MlaSpec>,
    #[serde(default)]
    moe: Option<MoeSpec>,
}

impl ModelSpec {
    /// Parses spec TOML text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<ModelSpec, ShapeError> {
        let raw: RawSpec = toml::from_str(text)
            .map_err(|e| ShapeError::Syntax(crate::diag::toml_error(origin, text, "invalid model spec", &e)))?;
        check(raw, origin)
    }

    /// Every linear layer at tensor-parallel degree `tp` with how TP splits it: attention first (qkv, o; or
    /// the latent-attention projections a, q, kv_b, o), then the dense MLP (gate_up, down) where the model
    /// has one, then the experts (routed, shared). The table at the top of this module gives each (N, K).
    ///
    /// `tp` must divide the head count, the dense intermediate size and the expert intermediate size, and
    /// divide the KV head count (grouped-query attention) or be a multiple of it: with more ranks than KV
    /// heads each rank holds one KV head, replicated (vLLM's `QKVParallelLinear`), so `qkv_proj`'s N per
    /// rank is (heads/TP + 2)·head_dim.
    pub fn layer_table(&self, tp: u32) -> Result<Vec<(Layer, Parallel)>, ShapeError> {
        if tp == 0 {
            return Err(ShapeError::ZeroTp);
        }
        let mut divisors = vec![("attention head count", self.heads)];
        if self.intermediate > 0 {
            divisors.push(("intermediate size", self.intermediate));
        }
        if let Some(moe) = &self.moe {
            divisors.push(("MoE intermediate size", moe.intermediate));
        }
        for (what, value) in divisors {
            if value % tp != 0 {
                return Err(ShapeError::TpNotDivisor { model: self.name.clone(), tp, what, value });
            }
        }
        if self.mla.is_none() {
            let kv = self.kv_heads;
            let fits = if tp <= kv { kv.is_multiple_of(tp) } else { tp.is_multiple_of(kv) };
            if !fits {
                return Err(ShapeError::TpKvHeads { model: self.name.clone(), tp, kv });
            }
        }
        let t = u64::from(tp);
        let fit = |layer: &'static str, v: u64| {
            u32::try_from(v).map_err(|_| ShapeError::TooLarge { model: self.name.clone(), layer, tp, value: v })
        };
        let hidden = u64::from(self.hidden);
        let heads = u64::from(self.heads);
        let mut out: Vec<(Layer, Parallel)> = Vec::new();
        // (name, N, K, how TP splits it); N and K before the split.
        let mut push = |name: &'static str, n: u64, k: u64, p: Parallel| -> Result<(), ShapeError> {
            let (n, k) = match p {
                Parallel::Column => (n / t, k),
                Parallel::Row => (n, k / t),
                Parallel::Replicated => (n, k),
            };
            out.push((Layer { name: name.to_string(), n: fit(name, n)?, k: fit(name, k)? }, p));
            Ok(())
        };
        match &self.mla {
            None => {
                // More ranks than KV heads: one KV head per rank, replicated (see the table above).
                let (kv, hd) = (u64::from(self.kv_heads).max(t), u64::from(self.head_dim));
                push("qkv_proj", (heads + 2 * kv) * hd, hidden, Parallel::Column)?;
                push("o_proj", hidden, heads * hd, Parallel::Row)?;
            }
            Some(mla) => {
                let (nope, rope, v) =
                    (u64::from(mla.qk_nope_head_dim), u64::from(mla.qk_rope_head_dim), u64::from(mla.v_head_dim));
                let kv_lora = u64::from(mla.kv_lora_rank);
                match mla.q_lora_rank.map(u64::from) {
                    Some(q_lora) => {
                        if mla.fused_qkv_a == Some(true) {
                            push("fused_qkv_a_proj", q_lora + kv_lora + rope, hidden, Parallel::Replicated)?;
                        } else {
                            push("q_a_proj", q_lora, hidden, Parallel::Replicated)?;
                            push("kv_a_proj", kv_lora + rope, hidden, Parallel::Replicated)?;
                        }
                        push("q_b_proj", heads * (nope + rope), q_lora, Parallel::Column)?;
                    }
                    None => {
                        push("kv_a_proj", kv_lora + rope, hidden, Parallel::Replicated)?;
                        push("q_proj", heads * (nope + rope), hidden, Parallel::Column)?;
                    }
                }
                push("kv_b_proj", heads * (nope + v), kv_lora, Parallel::Column)?;
                push("o_proj", hidden, heads * v, Parallel::Row)?;
            }
        }
        if self.intermediate > 0 {
            let inter = u64::from(self.intermediate);
            push("gate_up_proj", 2 * inter, hidden, Parallel::Column)?;
            push("down_proj", hidden, inter, Parallel::Row)?;
        }
        if let Some(moe) = &self.moe {
            let inter = u64::from(moe.intermediate);
            push("experts.gate_up_proj", 2 * inter, hidden, Parallel::Column)?;
            push("experts.down_proj", hidden, inter, Parallel::Row)?;
            if moe.shared_experts > 0 {
                let shared = u64::from(moe.shared_experts) * inter;
                push("shared_experts.gate_up_proj", 2 * shared, hidden, Parallel::Column)?;
                push("shared_experts.down_proj", hidden, shared, Parallel::Row)?;
            }
        }
        Ok(out)
    }

    /// The linear layers at tensor-parallel degree `tp` ([`ModelSpec::layer_table`] without the TP rule);
    /// for a dense model with grouped-query attention: qkv, o, gate_up, down.
    pub fn layers(&self, tp: u32) -> Result<Vec<Layer>, ShapeError> {
        Ok(self.layer_table(tp)?.into_iter().map(|(l, _)| l).collect())
    }

    /// The layers replicated on every TP rank (the latent-attention a-projections).
    pub fn replicated_layers(&self) -> Vec<String> {
        self.layer_table(1)
            .map(|t| t.into_iter().filter(|(_, p)| *p == Parallel::Replicated).map(|(l, _)| l.name).collect())
            .unwrap_or_default()
    }
}

/// The checks of a parsed spec, in field order; each error names the file and the field.
fn check(raw: RawSpec, origin: &str) -> Result<ModelSpec, ShapeError> {
    let path = || origin.to_string();
    let field = |field: &'static str, message: String| ShapeError::Field { path: path(), field, message };
    let positive = |field: &'static str, value: u32| {
        if value == 0 {
            Err(ShapeError::NonPositive { path: path(), field, value })
        } else {
            Ok(value)
        }
    };
    positive("hidden", raw.hidden)?;
    if let Some(v) = raw.intermediate {
        positive("intermediate", v)?;
    }
    positive("heads", raw.heads)?;
    if let Some(v) = raw.kv_heads {
        positive("kv_heads", v)?;
    }
    if let Some(v) = raw.head_dim {
        positive("head_dim", v)?;
    }
    positive("layers", raw.layers)?;
    if raw.name.trim().is_empty() {
        return Err(ShapeError::Parse { path: path(), message: "field `name` is empty".into() });
    }
    let (kv_heads, head_dim) = match &raw.mla {
        None => {
            let missing = |name: &'static str| {
                field(
                    name,
                    "missing; a spec without [mla] describes grouped-query attention, which needs kv_heads \
                     (num_key_value_heads) and head_dim"
                        .into(),
                )
            };
            let kv_heads = raw.kv_heads.ok_or_else(|| missing("kv_heads"))?;
            let head_dim = raw.head_dim.ok_or_else(|| missing("head_dim"))?;
            if kv_heads > raw.heads || !raw.heads.is_multiple_of(kv_heads) {
                return Err(ShapeError::Parse {
                    path: path(),
                    message: format!(
                        "kv_heads = {kv_heads} must divide heads = {} (each KV head serves a whole group of \
                         attention heads)",
                        raw.heads
                    ),
                });
            }
            (kv_heads, head_dim)
        }
        Some(mla) => {
            for (name, given) in [("kv_heads", raw.kv_heads.is_some()), ("head_dim", raw.head_dim.is_some())] {
                if given {
                    return Err(field(
                        name,
                        "not used with [mla]: latent attention's GEMMs are shaped by the [mla] ranks and head \
                         dimensions; remove it"
                            .into(),
                    ));
                }
            }
            if let Some(v) = mla.q_lora_rank {
                positive("mla.q_lora_rank", v)?;
            }
            positive("mla.kv_lora_rank", mla.kv_lora_rank)?;
            positive("mla.qk_nope_head_dim", mla.qk_nope_head_dim)?;
            positive("mla.qk_rope_head_dim", mla.qk_rope_head_dim)?;
            positive("mla.v_head_dim", mla.v_head_dim)?;
            match (mla.q_lora_rank, mla.fused_qkv_a) {
                (Some(_), None) => {
                    return Err(field(
                        "mla.fused_qkv_a",
                        "missing; with q_lora_rank say whether q_a and kv_a run as one GEMM (true: vLLM's \
                         DeepseekV2) or as two (false: vLLM's MiniCPM3)"
                            .into(),
                    ))
                }
                (None, Some(_)) => {
                    return Err(field(
                        "mla.fused_qkv_a",
                        "only with q_lora_rank: without it the query is projected from the hidden state by \
                         q_proj and only kv_a has a latent projection"
                            .into(),
                    ))
                }
                _ => {}
            }
            (0, 0)
        }
    };
    let intermediate = match &raw.moe {
        None => raw.intermediate.ok_or_else(|| {
            field("intermediate", "missing; a spec without [moe] has a dense MLP of intermediate_size".into())
        })?,
        Some(moe) => {
            positive("moe.intermediate", moe.intermediate)?;
            positive("moe.experts", moe.experts)?;
            positive("moe.experts_per_token", moe.experts_per_token)?;
            if moe.experts_per_token > moe.experts {
                return Err(field(
                    "moe.experts_per_token",
                    format!("{} is more than the {} experts", moe.experts_per_token, moe.experts),
                ));
            }
            if moe.dense_layers >= raw.layers {
                return Err(field(
                    "moe.dense_layers",
                    format!(
                        "{} of the {} decoder layers leaves no MoE layer; drop [moe] for a dense model",
                        moe.dense_layers, raw.layers
                    ),
                ));
            }
            match (moe.dense_layers, raw.intermediate) {
                (0, Some(_)) => {
                    return Err(field(
                        "intermediate",
                        "every decoder layer is MoE (moe.dense_layers = 0), so no GEMM has this size; remove \
                         it or set moe.dense_layers"
                            .into(),
                    ))
                }
                (d, None) if d > 0 => {
                    return Err(field(
                        "intermediate",
                        format!("missing; the first {d} decoder layers (moe.dense_layers) have a dense MLP"),
                    ))
                }
                (_, v) => v.unwrap_or(0),
            }
        }
    };
    Ok(ModelSpec {
        name: raw.name,
        source: raw.source,
        hidden: raw.hidden,
        intermediate,
        heads: raw.heads,
        kv_heads,
        head_dim,
        num_layers: raw.layers,
        mla: raw.mla,
        moe: raw.moe,
    })
}
