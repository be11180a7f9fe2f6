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

/// A size computed from spec fields (a GEMM dimension before the TP split): the one place spec sizes are
/// computed. Every sum, product and split is checked, exactly (the value is held in 128 bits, and an
/// operation beyond even that is kept as "too large"), so a product of large fields never wraps into a
/// plausible number: [`Size::dim`] gives the 32-bit dimension or the error naming the model, the layer,
/// the TP degree and the exact value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Size(Option<u128>);

impl Size {
    /// A spec field.
    fn of(v: u32) -> Size {
        Size(Some(u128::from(v)))
    }

    /// The share of one of `tp` ranks (`tp` divides it where the checks of the spec ran; the quotient is
    /// rounded down otherwise). `tp` = 0 gives "too large", never a division by zero.
    fn split(self, tp: u32) -> Size {
        Size(self.0.and_then(|v| v.checked_div(u128::from(tp))))
    }

    /// The value as a GEMM dimension (N or K, 32 bits), or [`ShapeError::TooLarge`].
    fn dim(self, model: &str, layer: &'static str, tp: u32) -> Result<u32, ShapeError> {
        self.0.and_then(|v| u32::try_from(v).ok()).ok_or_else(|| ShapeError::TooLarge {
            model: model.to_string(),
            layer,
            tp,
            value: self.0.map_or_else(|| "beyond 2^128".to_string(), |v| v.to_string()),
        })
    }
}

impl std::ops::Add for Size {
    type Output = Size;
    fn add(self, other: Size) -> Size {
        Size(self.0.zip(other.0).and_then(|(a, b)| a.checked_add(b)))
    }
}

impl std::ops::Mul for Size {
    type Output = Size;
    fn mul(self, other: Size) -> Size {
        Size(self.0.zip(other.0).and_then(|(a, b)| a.checked_mul(b)))
    }
}

impl ModelSpec {
    /// Parses spec TOML text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<ModelSpec, ShapeError> {
        let raw: RawSpec = toml::from_str(text)
            .map_err(|e| ShapeError::Syntax(synth_base::diag::toml_error(origin, text, "invalid model spec", &e)))?;
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
        self.check_tp(tp)?;
        let size = Size::of;
        let hidden = size(self.hidden);
        let heads = size(self.heads);
        let mut out: Vec<(Layer, Parallel)> = Vec::new();
        // (name, N, K, how TP splits it); N and K before the split, exact.
        let mut push = |name: &'static str, n: Size, k: Size, p: Parallel| -> Result<(), ShapeError> {
            let (n, k) = match p {
                Parallel::Column => (n.split(tp), k),
                Parallel::Row => (n, k.split(tp)),
                Parallel::Replicated => (n, k),
            };
            let dim = |v: Size| v.dim(&self.name, name, tp);
            out.push((Layer { name: name.to_string(), n: dim(n)?, k: dim(k)? }, p));
            Ok(())
        };
        match &self.mla {
            None => {
                // More ranks than KV heads: one KV head per rank, replicated (see the table above).
                let (kv, hd) = (size(self.kv_heads.max(tp)), size(self.head_dim));
                push("qkv_proj", (heads + size(2) * kv) * hd, hidden, Parallel::Column)?;
                push("o_proj", hidden, heads * hd, Parallel::Row)?;
            }
            Some(mla) => {
                let (nope, rope, v) = (size(mla.qk_nope_head_dim), size(mla.qk_rope_head_dim), size(mla.v_head_dim));
                let kv_lora = size(mla.kv_lora_rank);
                match mla.q_lora_rank.map(size) {
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
            let inter = size(self.intermediate);
            push("gate_up_proj", size(2) * inter, hidden, Parallel::Column)?;
            push("down_proj", hidden, inter, Parallel::Row)?;
        }
        if let Some(moe) = &self.moe {
            let inter = size(moe.intermediate);
            push("experts.gate_up_proj", size(2) * inter, hidden, Parallel::Column)?;
            push("experts.down_proj", hidden, inter, Parallel::Row)?;
            if moe.shared_experts > 0 {
                let shared = size(moe.shared_experts) * inter;
                push("shared_experts.gate_up_proj", size(2) * shared, hidden, Parallel::Column)?;
                push("shared_experts.down_proj", hidden, shared, Parallel::Row)?;
            }
        }
        Ok(out)
    }

    /// The TP rule's conditions on `tp` (see [`ModelSpec::layer_table`]).
    fn check_tp(&self, tp: u32) -> Result<(), ShapeError> {
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
        Ok(())
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
    let at = Checks { path: origin };
    at.sizes(&raw)?;
    let (kv_heads, head_dim) = match &raw.mla {
        None => at.attention(&raw)?,
        Some(mla) => {
            at.latent_attention(&raw, mla)?;
            (0, 0)
        }
    };
    let intermediate = match &raw.moe {
        None => raw.intermediate.ok_or_else(|| {
            at.field("intermediate", "missing; a spec without [moe] has a dense MLP of intermediate_size".into())
        })?,
        Some(moe) => at.moe(&raw, moe)?,
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

/// The checks of [`check`] on the spec read from `path`.
struct Checks<'a> {
    path: &'a str,
}

impl Checks<'_> {
    fn field(&self, field: &'static str, message: String) -> ShapeError {
        ShapeError::Field { path: self.path.to_string(), field, message }
    }

    fn parse_error(&self, message: String) -> ShapeError {
        ShapeError::Parse { path: self.path.to_string(), message }
    }

    fn positive(&self, field: &'static str, value: u32) -> Result<u32, ShapeError> {
        if value == 0 {
            Err(ShapeError::NonPositive { path: self.path.to_string(), field, value })
        } else {
            Ok(value)
        }
    }

    /// The model's sizes are positive and its name is not empty.
    fn sizes(&self, raw: &RawSpec) -> Result<(), ShapeError> {
        self.positive("hidden", raw.hidden)?;
        if let Some(v) = raw.intermediate {
            self.positive("intermediate", v)?;
        }
        self.positive("heads", raw.heads)?;
        if let Some(v) = raw.kv_heads {
            self.positive("kv_heads", v)?;
        }
        if let Some(v) = raw.head_dim {
            self.positive("head_dim", v)?;
        }
        self.positive("layers", raw.layers)?;
        if raw.name.trim().is_empty() {
            return Err(self.parse_error("field `name` is empty".into()));
        }
        Ok(())
    }

    /// Grouped-query attention (a spec without `[mla]`): its kv_heads and head_dim.
    fn attention(&self, raw: &RawSpec) -> Result<(u32, u32), ShapeError> {
        let missing = |name: &'static str| {
            self.field(
                name,
                "missing; a spec without [mla] describes grouped-query attention, which needs kv_heads \
                 (num_key_value_heads) and head_dim"
                    .into(),
            )
        };
        let kv_heads = raw.kv_heads.ok_or_else(|| missing("kv_heads"))?;
        let head_dim = raw.head_dim.ok_or_else(|| missing("head_dim"))?;
        if kv_heads > raw.heads || !raw.heads.is_multiple_of(kv_heads) {
            return Err(self.parse_error(format!(
                "kv_heads = {kv_heads} must divide heads = {} (each KV head serves a whole group of attention \
                 heads)",
                raw.heads
            )));
        }
        Ok((kv_heads, head_dim))
    }

    /// Latent attention (`[mla]`): its ranks and head dimensions, without the grouped-query fields.
    fn latent_attention(&self, raw: &RawSpec, mla: &MlaSpec) -> Result<(), ShapeError> {
        for (name, given) in [("kv_heads", raw.kv_heads.is_some()), ("head_dim", raw.head_dim.is_some())] {
            if given {
                return Err(self.field(
                    name,
                    "not used with [mla]: latent attention's GEMMs are shaped by the [mla] ranks and head \
                     dimensions; remove it"
                        .into(),
                ));
            }
        }
        if let Some(v) = mla.q_lora_rank {
            self.positive("mla.q_lora_rank", v)?;
        }
        self.positive("mla.kv_lora_rank", mla.kv_lora_rank)?;
        self.positive("mla.qk_nope_head_dim", mla.qk_nope_head_dim)?;
        self.positive("mla.qk_rope_head_dim", mla.qk_rope_head_dim)?;
        self.positive("mla.v_head_dim", mla.v_head_dim)?;
        match (mla.q_lora_rank, mla.fused_qkv_a) {
            (Some(_), None) => Err(self.field(
                "mla.fused_qkv_a",
                "missing; with q_lora_rank say whether q_a and kv_a run as one GEMM (true: vLLM's DeepseekV2) \
                 or as two (false: vLLM's MiniCPM3)"
                    .into(),
            )),
            (None, Some(_)) => Err(self.field(
                "mla.fused_qkv_a",
                "only with q_lora_rank: without it the query is projected from the hidden state by q_proj and \
                 only kv_a has a latent projection"
                    .into(),
            )),
            _ => Ok(()),
        }
    }

    /// A mixture-of-experts model (`[moe]`): the dense layers' intermediate size (0 when every layer is
    /// MoE).
    fn moe(&self, raw: &RawSpec, moe: &MoeSpec) -> Result<u32, ShapeError> {
        self.positive("moe.intermediate", moe.intermediate)?;
        self.positive("moe.experts", moe.experts)?;
        self.positive("moe.experts_per_token", moe.experts_per_token)?;
        if moe.experts_per_token > moe.experts {
            return Err(self.field(
                "moe.experts_per_token",
                format!("{} is more than the {} experts", moe.experts_per_token, moe.experts),
            ));
        }
        if moe.dense_layers >= raw.layers {
            return Err(self.field(
                "moe.dense_layers",
                format!(
                    "{} of the {} decoder layers leaves no MoE layer; drop [moe] for a dense model",
                    moe.dense_layers, raw.layers
                ),
            ));
        }
        match (moe.dense_layers, raw.intermediate) {
            (0, Some(_)) => Err(self.field(
                "intermediate",
                "every decoder layer is MoE (moe.dense_layers = 0), so no GEMM has this size; remove it or set \
                 moe.dense_layers"
                    .into(),
            )),
            (d, None) if d > 0 => Err(self.field(
                "intermediate",
                format!("missing; the first {d} decoder layers (moe.dense_layers) have a dense MLP"),
            )),
            (_, v) => Ok(v.unwrap_or(0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error of `spec` at `tp`, which must be the size error of `layer`.
    fn too_large(spec: &str, tp: u32) -> String {
        let spec = ModelSpec::parse(spec, "s.toml").unwrap();
        let e = spec.layers(tp).unwrap_err();
        assert!(matches!(e, ShapeError::TooLarge { .. }), "{e}");
        e.to_string()
    }

    // Each case below wraps to a value that fits in 32 bits when computed in 64 bits (2^64 + 2^32 - 2
    // wraps to 2^32 - 2): the checked size names the exact value instead.

    #[test]
    fn a_plain_product_that_overflows_is_refused() {
        // qkv N = (heads + 2·kv_heads) · head_dim = (2^32 + 2) · (2^32 - 1).
        let spec = "name='g'\nhidden=1024\nintermediate=1024\nheads=1431655766\nkv_heads=1431655766\n\
                    head_dim=4294967295\nlayers=1\n";
        assert_eq!(too_large(spec, 1), "g: qkv_proj dimension 18446744078004518910 at TP 1 does not fit in 32 bits");
    }

    #[test]
    fn an_mla_product_that_overflows_is_refused() {
        // q_b N = heads · (nope + rope) = (2^32 - 1) · (2^32 + 2), at TP 3 a third of it.
        let spec = "name='m'\nhidden=1024\nintermediate=3072\nheads=4294967295\nlayers=1\n[mla]\nq_lora_rank=64\n\
                    fused_qkv_a=true\nkv_lora_rank=64\nqk_nope_head_dim=2147483649\nqk_rope_head_dim=2147483649\n\
                    v_head_dim=1\n";
        assert_eq!(too_large(spec, 3), "m: q_b_proj dimension 6148914692668172970 at TP 3 does not fit in 32 bits");
    }

    #[test]
    fn a_moe_product_that_overflows_is_refused() {
        // shared gate_up N = 2 · shared · moe.intermediate = 2 · (2^31 + 1) · (2^32 - 1), at TP 3 a third;
        // the routed experts' own sizes fit (2 · (2^32 - 1) / 3).
        let spec = "name='e'\nhidden=1024\nheads=3\nkv_heads=3\nhead_dim=128\nlayers=1\n[moe]\n\
                    intermediate=4294967295\nexperts=8\nexperts_per_token=2\nshared_experts=2147483649\n";
        assert_eq!(
            too_large(spec, 3),
            "e: shared_experts.gate_up_proj dimension 6148914692668172970 at TP 3 does not fit in 32 bits"
        );
    }

    #[test]
    fn the_tp_split_of_an_overflowing_product_is_refused_and_an_exact_one_kept() {
        // More ranks than KV heads: qkv N = (heads + 2·TP) · head_dim / TP with TP = heads = 2^31:
        // 3 · 2^31 · (2^32 - 1) / 2^31 = 3 · (2^32 - 1), which 64 bits wrap to 2^32 - 3 after the split.
        let spec = "name='t'\nhidden=1024\nintermediate=2147483648\nheads=2147483648\nkv_heads=1\n\
                    head_dim=4294967295\nlayers=1\n";
        assert_eq!(
            too_large(spec, 1 << 31),
            "t: qkv_proj dimension 12884901885 at TP 2147483648 does not fit in 32 bits"
        );
        // A product over 32 bits that the split brings back within them is the exact quotient: gate_up N =
        // 2 · (2^32 - 4) / 4.
        let spec = "name='d'\nhidden=1024\nintermediate=4294967292\nheads=4\nkv_heads=4\nhead_dim=128\nlayers=1\n";
        let spec = ModelSpec::parse(spec, "s.toml").unwrap();
        let gate_up = spec.layers(4).unwrap().into_iter().find(|l| l.name == "gate_up_proj").unwrap();
        assert_eq!((gate_up.n, gate_up.k), (2147483646, 1024));
        assert!(spec.layers(1).unwrap_err().to_string().contains("gate_up_proj dimension 8589934584 at TP 1"));
    }

    #[test]
    fn sizes_are_exact_and_never_wrap() {
        let big = Size::of(u32::MAX);
        assert_eq!((big * big * big * big).0, Some(u128::from(u32::MAX).pow(4)));
        assert_eq!((big * big * big * big * big).0, None, "beyond 128 bits is too large, not wrapped");
        assert_eq!(Size::of(7).split(0).0, None);
        let e = (big * big * big * big * big).dim("x", "q_proj", 1).unwrap_err().to_string();
        assert_eq!(e, "x: q_proj dimension beyond 2^128 at TP 1 does not fit in 32 bits");
        assert_eq!((Size::of(6) + Size::of(2)).split(4).dim("x", "q_proj", 4).unwrap(), 2);
    }
}
