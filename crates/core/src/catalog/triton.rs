//! The block-FP8 Triton config family (libtype `triton`): the meta-parameters vLLM and SGLang tune for
//! their `w8a8_block_fp8_matmul` kernel, with a name grammar, a self-describing kernelId and the tuner's
//! 1280-config search space.
//!
//! A config is (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M, num_warps, num_stages). Its name
//! is `triton_bm{BM}_bn{BN}_bk{BK}_g{G}_w{W}_s{S}` and its kernelId the decimal packing
//! `log2(BM)·10^7 + log2(BN)·10^6 + log2(BK)·10^5 + G·10^2 + log2(W)·10 + S` (every field has digits of its
//! own, so the id decodes back to the config). The harness (`harness/bsbench/triton_config.py`) uses the
//! same grammar and packing; a journal row carries both and the table reader checks they agree.

use std::fmt;

/// Width of one scale group along K (the 128x128 block recipe); BLOCK_SIZE_K must divide it.
pub const SCALE_K: u32 = 128;

/// One config of the family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TritonConfig {
    pub block_m: u32,
    pub block_n: u32,
    pub block_k: u32,
    pub group_m: u32,
    pub num_warps: u32,
    pub num_stages: u32,
}

/// vLLM's config where no tuned file matches (`fp8_utils.py`): BM 64, BN and BK the block shape (128),
/// GROUP_M 32, 4 warps, 2 stages.
pub const VLLM_DEFAULT: TritonConfig =
    TritonConfig { block_m: 64, block_n: 128, block_k: 128, group_m: 32, num_warps: 4, num_stages: 2 };
/// SGLang's default (`fp8_kernel.py`): vLLM's with 3 stages.
pub const SGLANG_DEFAULT: TritonConfig = TritonConfig { num_stages: 3, ..VLLM_DEFAULT };

/// The runtime JSON keys of a config, in the order the runtimes' files list them.
pub const RUNTIME_KEYS: [&str; 6] =
    ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages"];

/// Why a name or id is not a config of the family.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TritonError {
    #[error(
        "{0:?} is not a triton config name (expected triton_bm<BM>_bn<BN>_bk<BK>_g<G>_w<W>_s<S>, \
         e.g. triton_bm64_bn128_bk128_g32_w4_s2)"
    )]
    Grammar(String),
    #[error("{name:?}: {reason}")]
    Invalid { name: String, reason: String },
    #[error(
        "kernelId {0} is not the id of a triton config (an id packs log2(BM)*10^7 + log2(BN)*10^6 + log2(BK)*10^5 \
         + GROUP_M*100 + log2(warps)*10 + stages, e.g. 67703222 for triton_bm64_bn128_bk128_g32_w4_s2)"
    )]
    Id(i64),
}

fn pow2_in(v: u32, lo: u32, hi: u32) -> bool {
    v.is_power_of_two() && (lo..=hi).contains(&v)
}

impl TritonConfig {
    /// The first field the kernel cannot realize, as a sentence.
    pub fn check(&self) -> Result<(), String> {
        for (field, v) in [("BLOCK_SIZE_M", self.block_m), ("BLOCK_SIZE_N", self.block_n)] {
            if !pow2_in(v, 16, 512) {
                return Err(format!("{field} {v} is not a power of two in 16..=512"));
            }
        }
        if !pow2_in(self.block_k, 16, SCALE_K) {
            return Err(format!(
                "BLOCK_SIZE_K {} is not a power of two in 16..={SCALE_K} (it must divide the {SCALE_K}-wide scale group)",
                self.block_k
            ));
        }
        if !(1..=999).contains(&self.group_m) {
            return Err(format!("GROUP_SIZE_M {} is not in 1..=999", self.group_m));
        }
        if ![1, 2, 4, 8, 16].contains(&self.num_warps) {
            return Err(format!("num_warps {} is not one of 1, 2, 4, 8, 16", self.num_warps));
        }
        if !(1..=9).contains(&self.num_stages) {
            return Err(format!("num_stages {} is not in 1..=9", self.num_stages));
        }
        Ok(())
    }

    /// The family name, e.g. `triton_bm64_bn128_bk128_g32_w4_s2`.
    pub fn name(&self) -> String {
        format!(
            "triton_bm{}_bn{}_bk{}_g{}_w{}_s{}",
            self.block_m, self.block_n, self.block_k, self.group_m, self.num_warps, self.num_stages
        )
    }

    /// Parses a family name (exactly the grammar: no spaces, no leading zeros, valid fields).
    pub fn parse_name(name: &str) -> Result<TritonConfig, TritonError> {
        let grammar = || TritonError::Grammar(name.to_string());
        let parts: Vec<&str> = name.split('_').collect();
        let prefixes = ["triton", "bm", "bn", "bk", "g", "w", "s"];
        if parts.len() != prefixes.len() || parts[0] != "triton" {
            return Err(grammar());
        }
        let mut v = [0u32; 6];
        for (i, (part, prefix)) in parts[1..].iter().zip(&prefixes[1..]).enumerate() {
            let digits = part.strip_prefix(prefix).ok_or_else(grammar)?;
            let ok = !digits.is_empty()
                && digits.len() <= 3
                && digits.bytes().all(|b| b.is_ascii_digit())
                && !(digits.len() > 1 && digits.starts_with('0'));
            if !ok {
                return Err(grammar());
            }
            v[i] = digits.parse().map_err(|_| grammar())?;
        }
        let cfg = TritonConfig {
            block_m: v[0],
            block_n: v[1],
            block_k: v[2],
            group_m: v[3],
            num_warps: v[4],
            num_stages: v[5],
        };
        cfg.check().map_err(|reason| TritonError::Invalid { name: name.to_string(), reason })?;
        Ok(cfg)
    }

    /// The packed kernelId (see the module docs). Only for configs that pass [`TritonConfig::check`].
    pub fn kernel_id(&self) -> i32 {
        let l = |v: u32| v.trailing_zeros() as i32;
        l(self.block_m) * 10_000_000
            + l(self.block_n) * 1_000_000
            + l(self.block_k) * 100_000
            + self.group_m as i32 * 100
            + l(self.num_warps) * 10
            + self.num_stages as i32
    }

    /// The config a packed kernelId denotes.
    pub fn from_kernel_id(id: i64) -> Result<TritonConfig, TritonError> {
        if !(0..=i64::from(i32::MAX)).contains(&id) {
            return Err(TritonError::Id(id));
        }
        let d = |div: i64, modulo: i64| ((id / div) % modulo) as u32;
        let shift = |e: u32| if e < 31 { 1u32 << e } else { 0 };
        let cfg = TritonConfig {
            block_m: shift((id / 10_000_000) as u32),
            block_n: shift(d(1_000_000, 10)),
            block_k: shift(d(100_000, 10)),
            group_m: d(100, 1000),
            num_warps: shift(d(10, 10)),
            num_stages: d(1, 10),
        };
        if cfg.check().is_err() || i64::from(cfg.kernel_id()) != id {
            return Err(TritonError::Id(id));
        }
        Ok(cfg)
    }

    /// The six values in [`RUNTIME_KEYS`] order.
    pub fn values(&self) -> [u32; 6] {
        [self.block_m, self.block_n, self.block_k, self.group_m, self.num_warps, self.num_stages]
    }

    /// The config as one JSON object in the runtimes' key order, e.g.
    /// `{"BLOCK_SIZE_M": 64, ..., "num_stages": 2}` (`indent` spaces before each key on its own line).
    pub fn runtime_json(&self, indent: usize) -> String {
        let pad = " ".repeat(indent);
        let close = " ".repeat(indent.saturating_sub(4));
        let body: Vec<String> =
            RUNTIME_KEYS.iter().zip(self.values()).map(|(k, v)| format!("{pad}\"{k}\": {v}")).collect();
        format!("{{\n{}\n{close}}}", body.join(",\n"))
    }
}

impl fmt::Display for TritonConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// The tuner's search space (vLLM `benchmarks/kernels/benchmark_w8a8_block_fp8.py`), in its loop order:
/// num_stages 2..=5, BLOCK_SIZE_M 16..=256, BLOCK_SIZE_K 64/128, BLOCK_SIZE_N 32..=256, num_warps 4/8,
/// GROUP_SIZE_M 1/16/32/64 — 1280 configs, every BLOCK_SIZE_K dividing 128.
pub fn tuner_space() -> Vec<TritonConfig> {
    let mut out = Vec::with_capacity(1280);
    for num_stages in [2, 3, 4, 5] {
        for block_m in [16, 32, 64, 128, 256] {
            for block_k in [64, 128] {
                for block_n in [32, 64, 128, 256] {
                    for num_warps in [4, 8] {
                        for group_m in [1, 16, 32, 64] {
                            out.push(TritonConfig { block_m, block_n, block_k, group_m, num_warps, num_stages });
                        }
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_matches_the_tuner_and_names_and_ids_round_trip() {
        let space = tuner_space();
        assert_eq!(space.len(), 4 * 5 * 2 * 4 * 2 * 4);
        assert_eq!(space[0].name(), "triton_bm16_bn32_bk64_g1_w4_s2");
        assert_eq!(space[1279].name(), "triton_bm256_bn256_bk128_g64_w8_s5");
        assert!(space.contains(&VLLM_DEFAULT) && space.contains(&SGLANG_DEFAULT));
        let mut ids = std::collections::HashSet::new();
        for c in &space {
            assert_eq!(TritonConfig::parse_name(&c.name()).unwrap(), *c);
            assert_eq!(TritonConfig::from_kernel_id(i64::from(c.kernel_id())).unwrap(), *c);
            ids.insert(c.kernel_id());
        }
        assert_eq!(ids.len(), 1280);
        // The same packing as the harness (hand-computed: 6e7 + 7e6 + 7e5 + 32e2 + 2e1 + 2).
        assert_eq!(VLLM_DEFAULT.kernel_id(), 67_703_222);
        assert_eq!(SGLANG_DEFAULT.name(), "triton_bm64_bn128_bk128_g32_w4_s3");
        let odd = TritonConfig { block_m: 512, block_n: 16, block_k: 16, group_m: 999, num_warps: 16, num_stages: 9 };
        assert_eq!(TritonConfig::from_kernel_id(i64::from(odd.kernel_id())).unwrap(), odd);
    }

    #[test]
    fn hostile_names_are_rejected_with_the_name_in_the_message() {
        for bad in [
            "",
            "triton",
            "triton_bm64_bn128_bk128_g32_w4",
            "triton_bm64_bn128_bk128_g32_w4_s2_x",
            "triton_bm064_bn128_bk128_g32_w4_s2",
            "triton_bm64_bn128_bk128_g32_w4_s2 ",
            " triton_bm64_bn128_bk128_g32_w4_s2",
            "triton_bm64_bn128_bk128_g32_w4_s2\n",
            "triton_bm+64_bn128_bk128_g32_w4_s2",
            "triton_bm64_bn128_bk128_g-1_w4_s2",
            "triton_bm4294967360_bn128_bk128_g32_w4_s2",
            "TRITON_bm64_bn128_bk128_g32_w4_s2",
            "triton_bn128_bm64_bk128_g32_w4_s2",
            "triton_bm６４_bn128_bk128_g32_w4_s2",
        ] {
            let e = TritonConfig::parse_name(bad).unwrap_err();
            assert!(matches!(e, TritonError::Grammar(_)), "{bad:?}: {e}");
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
        for (bad, why) in [
            ("triton_bm48_bn128_bk128_g32_w4_s2", "BLOCK_SIZE_M 48"),
            ("triton_bm64_bn128_bk256_g32_w4_s2", "must divide the 128-wide scale group"),
            ("triton_bm64_bn128_bk128_g0_w4_s2", "GROUP_SIZE_M 0"),
            ("triton_bm64_bn128_bk128_g32_w3_s2", "num_warps 3"),
            ("triton_bm64_bn128_bk128_g32_w4_s0", "num_stages 0"),
            ("triton_bm64_bn8_bk128_g32_w4_s2", "BLOCK_SIZE_N 8"),
        ] {
            let e = TritonConfig::parse_name(bad).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn ids_that_pack_no_config_are_rejected() {
        // stages 0, BK 256, G 0, 32 warps, BM 1024, BM 1 (the CK ids), negative, past i32
        for id in [67_703_220i64, 67_803_222, 67_700_022, 67_703_252, 107_703_222, 0, 7, 18, -1, 1i64 << 40] {
            assert_eq!(TritonConfig::from_kernel_id(id), Err(TritonError::Id(id)), "{id}");
        }
    }

    #[test]
    fn runtime_json_is_the_six_keys_in_order() {
        let v: serde_json::Value = serde_json::from_str(&VLLM_DEFAULT.runtime_json(8)).unwrap();
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), 6);
        assert_eq!(obj["BLOCK_SIZE_M"], 64);
        assert_eq!(obj["num_stages"], 2);
        let text = VLLM_DEFAULT.runtime_json(8);
        let pos: Vec<usize> = RUNTIME_KEYS.iter().map(|k| text.find(&format!("\"{k}\"")).unwrap()).collect();
        assert!(pos.windows(2).all(|w| w[0] < w[1]));
    }
}
