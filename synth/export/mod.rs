//! Export of a selection over the block-FP8 Triton family as the config files vLLM and SGLang load.
//!
//! Both runtimes read one JSON file per (N, K, device) — vLLM
//! `N={N},K={K},device_name={dev},dtype=fp8_w8a8,block_shape=[128,128].json`, SGLang the same with
//! `block_shape=[128, 128]` — mapping M keys to configs, and run the config of the key nearest to the
//! GEMM's M: `configs[min(configs.keys(), key=lambda x: abs(x - M))]` (vLLM `fp8_utils.py`, SGLang
//! `fp8_kernel.py`), the keys in file order (Python's `json.load` keeps it), so a tie goes to the key
//! written first. [`runtime_pick`] is that lookup. [`choose_keys`] turns the wanted config at every M in
//! `1..=max_m` into keys for which the lookup returns exactly that config, and [`prove`] checks it at
//! every M.
//!
//! Key placement: the wanted configs form runs of equal configs over M. Writing both ends of every run, in
//! increasing order, is always right: an M inside a run is nearer to one of its run's ends than to any key
//! outside the run, and at a run boundary b | b+1 the two keys b and b+1 are adjacent. Keys are then
//! dropped one at a time, last first, whenever the exhaustive check still
//! passes, so a layer whose choice never changes gets one key.

use crate::catalog::triton::TritonConfig;

/// The runtime whose files are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Runtime {
    Vllm,
    Sglang,
}

impl Runtime {
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Vllm => "vllm",
            Runtime::Sglang => "sglang",
        }
    }

    /// The file name the runtime looks for (`device` already through [`device_component`]).
    pub fn file_name(self, n: u32, k: u32, device: &str) -> String {
        let block = match self {
            Runtime::Vllm => "[128,128]",
            Runtime::Sglang => "[128, 128]",
        };
        format!("N={n},K={k},device_name={device},dtype=fp8_w8a8,block_shape={block}.json")
    }

    /// The config the runtime runs where no file matches (vLLM: 2 stages, SGLang: 3).
    pub fn default_config(self) -> TritonConfig {
        match self {
            Runtime::Vllm => crate::catalog::triton::VLLM_DEFAULT,
            Runtime::Sglang => crate::catalog::triton::SGLANG_DEFAULT,
        }
    }
}

/// The device name as it appears in file names: the runtimes replace spaces by underscores
/// (`get_device_name().replace(" ", "_")`); anything that could leave the output directory or break the
/// name (path separators, `..`, `,`, `=`, control characters) is refused.
pub fn device_component(name: &str) -> Result<String, String> {
    let d = name.replace(' ', "_");
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '(' | ')' | '+');
    if d.is_empty() || d.len() > 128 || d.starts_with('.') || d.contains("..") || !d.chars().all(ok_char) {
        return Err(format!(
            "--device-name {name:?}: expected the GPU name the runtime reports (letters, digits, spaces, \
             '_', '-', '.', '(', ')', '+'; at most 128 characters), e.g. NVIDIA_H200"
        ));
    }
    Ok(d)
}

/// The runtimes' lookup: the first key (in file order) with the smallest |key - m|.
pub fn runtime_pick(keys: &[(u32, TritonConfig)], m: u32) -> Option<TritonConfig> {
    let mut best: Option<(u64, TritonConfig)> = None;
    for &(key, cfg) in keys {
        let d = u64::from(key.abs_diff(m));
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, cfg));
        }
    }
    best.map(|(_, c)| c)
}

/// The first M where the keys' lookup differs from the wanted config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    pub m: u32,
    pub wanted: TritonConfig,
    pub got: Option<TritonConfig>,
}

/// Checks the lookup at every M in `1..=wanted.len()` (`wanted[i]` is the config for M = i + 1).
pub fn prove(keys: &[(u32, TritonConfig)], wanted: &[TritonConfig]) -> Result<(), Mismatch> {
    if !keys.windows(2).all(|w| w[0].0 < w[1].0) {
        // Not a valid file order (the writer emits strictly increasing keys).
        let m = 1;
        return Err(Mismatch { m, wanted: wanted[0], got: runtime_pick(keys, m) });
    }
    prove_range(keys, wanted, 1, wanted.len() as u32)
}

/// [`prove`] on `from..=to` only (1-based M; `keys` strictly increasing). The nearest key of M among
/// sorted keys is the predecessor or the successor; a tie goes to the earlier (smaller) key, as in
/// [`runtime_pick`].
fn prove_range(keys: &[(u32, TritonConfig)], wanted: &[TritonConfig], from: u32, to: u32) -> Result<(), Mismatch> {
    // The last key at or below `from` (or the first key when every key is above it).
    let mut j = keys.partition_point(|k| k.0 <= from).saturating_sub(1);
    for m in from..=to {
        let want = wanted[m as usize - 1];
        while j + 1 < keys.len() && keys[j + 1].0 <= m {
            j += 1;
        }
        let got = if keys.is_empty() {
            None
        } else if keys[j].0 > m || j + 1 == keys.len() {
            Some(keys[j].1)
        } else {
            let (lo, hi) = (keys[j], keys[j + 1]);
            Some(if m - lo.0 <= hi.0 - m { lo.1 } else { hi.1 })
        };
        if got != Some(want) {
            return Err(Mismatch { m, wanted: want, got });
        }
    }
    Ok(())
}

/// Keys (strictly increasing M) whose runtime lookup returns `wanted[i]` at M = i + 1 for every i; few
/// of them (see the module docs). `wanted` must not be empty.
pub fn choose_keys(wanted: &[TritonConfig]) -> Vec<(u32, TritonConfig)> {
    let mut keys: Vec<(u32, TritonConfig)> = Vec::new();
    let mut start = 0usize;
    for i in 1..=wanted.len() {
        if i == wanted.len() || wanted[i] != wanted[start] {
            let (a, b) = (start as u32 + 1, i as u32);
            keys.push((a, wanted[start]));
            if b != a {
                keys.push((b, wanted[start]));
            }
            start = i;
        }
    }
    debug_assert!(prove(&keys, wanted).is_ok());
    // Drop keys while the proof holds, last first. Dropping key i changes the lookup only between its
    // neighbours, the key before it (every earlier key is still there) and the nearest key after it that
    // was kept (below the first key or above the last, the nearest key is the first or the last), so
    // only that span is proved again, against those two keys: linear in the range, not in keys x range.
    let last_m = wanted.len() as u32;
    let mut kept_rev: Vec<(u32, TritonConfig)> = Vec::with_capacity(keys.len());
    for i in (0..keys.len()).rev() {
        let left = i.checked_sub(1).map(|j| keys[j]);
        let right = kept_rev.last().copied();
        let neighbours: Vec<(u32, TritonConfig)> = left.into_iter().chain(right).collect();
        let from = left.map_or(1, |k| k.0);
        let to = right.map_or(last_m, |k| k.0);
        let droppable = !neighbours.is_empty() && prove_range(&neighbours, wanted, from, to).is_ok();
        if !droppable {
            kept_rev.push(keys[i]);
        }
    }
    kept_rev.reverse();
    let keys = kept_rev;
    debug_assert!(prove(&keys, wanted).is_ok());
    keys
}

/// Reads a runtime config file's text: its (M, config) entries in file order (the order the runtimes'
/// lookup sees). Refused, naming `origin` and the key: a key that is not a decimal integer in
/// 1..=4294967295 written canonically (no sign, no leading zero), a key written twice (Python would keep
/// the first position with the last value), a config that is not exactly the six integer fields of a
/// valid [`TritonConfig`], or anything but one JSON object.
pub fn parse_runtime_json(text: &str, origin: &str) -> Result<Vec<(u32, TritonConfig)>, String> {
    let entries: Entries =
        serde_json::from_str(text).map_err(|e| format!("{origin}: not a JSON object of configs: {e}"))?;
    let mut out: Vec<(u32, TritonConfig)> = Vec::with_capacity(entries.0.len());
    let mut seen = std::collections::HashSet::with_capacity(entries.0.len());
    for (key, value) in entries.0 {
        let canonical = !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit()) && !key.starts_with('0');
        let m =
            key.parse::<u32>().ok().filter(|_| canonical).ok_or_else(|| {
                format!("{origin}: key {key:?} is not an M value (a decimal integer in 1..=4294967295)")
            })?;
        if !seen.insert(m) {
            return Err(format!("{origin}: key \"{m}\" appears twice"));
        }
        let obj = value.as_object().ok_or_else(|| format!("{origin}: key \"{m}\": the config is not a JSON object"))?;
        let mut vals = [0u32; 6];
        for (i, name) in crate::catalog::triton::RUNTIME_KEYS.iter().enumerate() {
            vals[i] = obj.get(*name).and_then(|v| v.as_u64()).and_then(|v| u32::try_from(v).ok()).ok_or_else(|| {
                format!("{origin}: key \"{m}\": field {name} is missing or not a non-negative integer")
            })?;
        }
        if let Some(extra) = obj.keys().find(|k| !crate::catalog::triton::RUNTIME_KEYS.contains(&k.as_str())) {
            return Err(format!(
                "{origin}: key \"{m}\": unknown field {extra:?} (the runtime passes every field to the kernel)"
            ));
        }
        let cfg = TritonConfig {
            block_m: vals[0],
            block_n: vals[1],
            block_k: vals[2],
            group_m: vals[3],
            num_warps: vals[4],
            num_stages: vals[5],
        };
        cfg.check().map_err(|e| format!("{origin}: key \"{m}\": {e}"))?;
        out.push((m, cfg));
    }
    if out.is_empty() {
        return Err(format!("{origin}: no configs"));
    }
    Ok(out)
}

/// A JSON object's entries in document order (serde_json's own map sorts its keys).
struct Entries(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct InOrder;
        impl<'de> serde::de::Visitor<'de> for InOrder {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object mapping M to a config")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Entries, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = a.next_entry::<String, serde_json::Value>()? {
                    out.push(entry);
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(InOrder)
    }
}

/// The file's JSON text: `{"M": {config}, ...}` in key order, 4-space indented like the shipped files.
pub fn render_json(keys: &[(u32, TritonConfig)]) -> String {
    let body: Vec<String> = keys.iter().map(|(m, c)| format!("    \"{m}\": {}", c.runtime_json(8))).collect();
    format!("{{\n{}\n}}\n", body.join(",\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::triton::{tuner_space, SGLANG_DEFAULT, VLLM_DEFAULT};

    fn cfg(i: usize) -> TritonConfig {
        tuner_space()[i]
    }

    #[test]
    fn file_names_are_the_runtimes() {
        assert_eq!(
            Runtime::Vllm.file_name(1536, 7168, "NVIDIA_H200"),
            "N=1536,K=7168,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"
        );
        assert_eq!(
            Runtime::Sglang.file_name(1536, 7168, "NVIDIA_H200"),
            "N=1536,K=7168,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json"
        );
        assert_eq!(Runtime::Sglang.default_config(), SGLANG_DEFAULT);
        assert_eq!(device_component("NVIDIA H200").unwrap(), "NVIDIA_H200");
        assert_eq!(device_component("Intel(R) Arc(TM) Pro B70 Graphics").unwrap(), "Intel(R)_Arc(TM)_Pro_B70_Graphics");
        for bad in ["", "../x", "a/b", "a\\b", ".hidden", "H200,dtype=x", "a=b", "x\ny", "a..b", &"x".repeat(129)] {
            let e = device_component(bad).unwrap_err();
            assert!(e.contains("--device-name"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn lookup_breaks_ties_to_the_first_key() {
        let keys = [(10, cfg(0)), (20, cfg(1))];
        assert_eq!(runtime_pick(&keys, 15), Some(cfg(0)));
        assert_eq!(runtime_pick(&keys, 16), Some(cfg(1)));
        assert_eq!(runtime_pick(&keys, 1), Some(cfg(0)));
        assert_eq!(runtime_pick(&keys, 99), Some(cfg(1)));
        assert_eq!(runtime_pick(&[], 3), None);
        // Hand-computed: runs 1..=3 A, 4..=4 B, 5..=9 A.
        let a = cfg(5);
        let b = cfg(6);
        let wanted = [a, a, a, b, a, a, a, a, a];
        let keys = choose_keys(&wanted);
        assert!(keys.iter().any(|&(m, c)| m == 4 && c == b), "{keys:?}");
        assert_eq!(prove(&keys, &wanted), Ok(()));
        // A key set that misses the boundary is caught at the exact M.
        let wrong = [(1, a), (4, b), (9, a)];
        assert_eq!(prove(&wrong, &wanted), Err(Mismatch { m: 3, wanted: a, got: Some(b) }));
    }

    #[test]
    fn one_run_needs_one_key() {
        let wanted = vec![VLLM_DEFAULT; 16384];
        let keys = choose_keys(&wanted);
        assert_eq!(keys, vec![(1, VLLM_DEFAULT)]);
    }

    /// A deterministic pseudo-random sequence (xorshift64) from `seed`.
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn random_step_functions_are_exact_at_every_m() {
        // Deterministic pseudo-random runs (xorshift), lengths 1..=700, configs from a small pool.
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..40 {
            let max_m = 1 + (next() % 5000) as usize;
            let mut wanted = Vec::with_capacity(max_m);
            while wanted.len() < max_m {
                let len = 1 + (next() % 700) as usize;
                let c = cfg((next() % 6) as usize);
                wanted.extend(std::iter::repeat_n(c, len.min(max_m - wanted.len())));
            }
            let keys = choose_keys(&wanted);
            assert!(keys.windows(2).all(|w| w[0].0 < w[1].0));
            for (i, &want) in wanted.iter().enumerate() {
                assert_eq!(runtime_pick(&keys, i as u32 + 1), Some(want), "M={}", i + 1);
            }
        }
    }

    /// The key choice before the proof was made local: every removal re-proved on the whole range.
    fn choose_keys_whole_range(wanted: &[TritonConfig]) -> Vec<(u32, TritonConfig)> {
        let mut keys: Vec<(u32, TritonConfig)> = Vec::new();
        for (i, &c) in wanted.iter().enumerate() {
            let m = i as u32 + 1;
            let starts = i == 0 || wanted[i - 1] != c;
            let ends = i + 1 == wanted.len() || wanted[i + 1] != c;
            if starts || ends {
                keys.push((m, c));
            }
        }
        let mut i = keys.len();
        while i > 0 && keys.len() > 1 {
            i -= 1;
            let removed = keys.remove(i);
            if (1..=wanted.len()).any(|m| runtime_pick(&keys, m as u32) != Some(wanted[m - 1])) {
                keys.insert(i, removed);
            }
        }
        keys
    }

    #[test]
    fn local_proof_drops_the_same_keys_as_a_whole_range_one() {
        // Alternating configs (a key at every M: the case the local proof exists for), short runs and
        // long runs, against the whole-range choice and the runtime lookup at every M.
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let alternating: Vec<TritonConfig> = (0..300).map(|i| cfg(i % 2)).collect();
        let mut cases = vec![alternating];
        for max_run in [1u64, 3, 40, 400] {
            for _ in 0..6 {
                let max_m = 1 + (next() % 600) as usize;
                let mut wanted = Vec::new();
                while wanted.len() < max_m {
                    let len = 1 + (next() % max_run) as usize;
                    wanted.extend(std::iter::repeat_n(cfg((next() % 4) as usize), len.min(max_m - wanted.len())));
                }
                cases.push(wanted);
            }
        }
        for wanted in &cases {
            let keys = choose_keys(wanted);
            assert_eq!(keys, choose_keys_whole_range(wanted), "{} M values", wanted.len());
            for (i, &want) in wanted.iter().enumerate() {
                assert_eq!(runtime_pick(&keys, i as u32 + 1), Some(want), "M={}", i + 1);
            }
        }
    }

    #[test]
    fn runtime_files_read_back_in_file_order() {
        let keys = [(1, VLLM_DEFAULT), (64, SGLANG_DEFAULT), (4096, cfg(9))];
        assert_eq!(parse_runtime_json(&render_json(&keys), "f.json").unwrap(), keys.to_vec());
        // Shipped files may list keys in any order; the order decides ties, so it is kept.
        let d = VLLM_DEFAULT.runtime_json(8);
        let s = SGLANG_DEFAULT.runtime_json(8);
        let text = format!("{{\"10\": {s}, \"6\": {s}, \"2\": {d}}}");
        let read = parse_runtime_json(&text, "f.json").unwrap();
        assert_eq!(read.iter().map(|e| e.0).collect::<Vec<_>>(), vec![10, 6, 2]);
        // M = 4 is as near to 6 as to 2: the key written first (6) wins, as in Python's min().
        assert_eq!(runtime_pick(&read, 4), Some(SGLANG_DEFAULT));
        assert_eq!(runtime_pick(&read, 3), Some(VLLM_DEFAULT));
        for (bad, why) in [
            (format!("{{\"01\": {d}}}"), "not an M value"),
            (format!("{{\"-3\": {d}}}"), "not an M value"),
            (format!("{{\"3\": {d}, \"3\": {s}}}"), "appears twice"),
            ("{\"3\": {\"BLOCK_SIZE_M\": 64}}".to_string(), "field BLOCK_SIZE_N is missing"),
            (
                d.replace("\"num_stages\": 2", "\"num_stages\": 2, \"kpack\": 2").replace('{', "{\"5\": {") + "}",
                "unknown field",
            ),
            (
                d.replace("\"BLOCK_SIZE_K\": 128", "\"BLOCK_SIZE_K\": 256").replace('{', "{\"5\": {") + "}",
                "BLOCK_SIZE_K 256",
            ),
            ("[]".to_string(), "not a JSON object"),
            ("{}".to_string(), "no configs"),
        ] {
            let e = parse_runtime_json(&bad, "f.json").unwrap_err();
            assert!(e.starts_with("f.json: ") && e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn json_is_loadable_and_ordered() {
        let keys = [(1, VLLM_DEFAULT), (64, SGLANG_DEFAULT)];
        let v: serde_json::Value = serde_json::from_str(&render_json(&keys)).unwrap();
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), 2);
        assert_eq!(obj["64"]["num_stages"], 3);
        assert_eq!(obj["1"].as_object().unwrap().len(), 6);
    }
}
