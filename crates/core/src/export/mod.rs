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
//! Key placement ([`choose_keys`]): the fewest keys for which the lookup is exact at every M, found by
//! dynamic programming over the runs of equal configs, and at most [`MAX_KEYS`] of them
//! ([`bounded_keys`]): the runtimes scan every key on every GEMM call.

use crate::catalog::triton::TritonConfig;

/// The runtime whose files are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
/// name (path separators, `..`, `,`, `=`, control characters) is refused, naming `--device-name`.
pub fn device_component(name: &str) -> Result<String, String> {
    device_part(name).map_err(|e| format!("--device-name {e}"))
}

/// [`device_component`] whatever named the device: the error starts with the name, quoted, and says what a
/// device name may hold (the caller says where the name came from).
pub fn device_part(name: &str) -> Result<String, String> {
    let d = name.replace(' ', "_");
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '(' | ')' | '+');
    if d.is_empty() || d.len() > 128 || d.starts_with('.') || d.contains("..") || !d.chars().all(ok_char) {
        return Err(format!(
            "{name:?}: expected the GPU name the runtime reports (ASCII letters, digits, spaces, '_', '-', '.', \
             '(', ')', '+'; at most 128 characters), e.g. NVIDIA_H200"
        ));
    }
    Ok(d)
}

/// Most M keys one config file may hold: vLLM and SGLang scan every key of the file on every GEMM call
/// (`min(configs.keys(), ...)`), so a file of many keys slows every call it serves. The runtimes' own
/// files hold 18; a rule needs one key per run of equal picks along M at least.
pub const MAX_KEYS: usize = 4096;

/// The runs of equal configs in `wanted` (a key set needs at least one key per run: a key's own M returns
/// its config, so no key of one config can stand inside a run of another).
pub fn runs(wanted: &[TritonConfig]) -> usize {
    if wanted.is_empty() {
        return 0;
    }
    1 + wanted.windows(2).filter(|w| w[0] != w[1]).count()
}

/// [`choose_keys`] within [`MAX_KEYS`]: an error (naming `what`, e.g. the file) when the picks change too
/// often along M for a file the runtimes can scan on every call. The runs are counted first, so a
/// pathological rule is refused before any key is placed.
pub fn bounded_keys(wanted: &[TritonConfig], what: &str) -> Result<Vec<(u32, TritonConfig)>, String> {
    let too_many = |keys: usize| {
        format!(
            "{what}: the rule's pick changes {} times over M = 1..={}, which needs {keys} keys for the runtime's \
             nearest-M lookup; a config file holds at most {MAX_KEYS} keys (vLLM and SGLang scan every key on \
             every GEMM call): export a smaller M range (--max-m) or a rule whose pick changes less often along M",
            runs(wanted).saturating_sub(1),
            wanted.len()
        )
    };
    let needed = runs(wanted);
    if needed > MAX_KEYS {
        return Err(too_many(needed));
    }
    let keys = choose_keys(wanted);
    if keys.len() > MAX_KEYS {
        return Err(too_many(keys.len()));
    }
    Ok(keys)
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

/// A run of equal wanted configs: M in `a..=b`.
#[derive(Debug, Clone, Copy)]
struct Run {
    a: u32,
    b: u32,
    cfg: TritonConfig,
}

/// The runs of `wanted` (`wanted[i]` is the config at M = i + 1), in M order.
fn run_list(wanted: &[TritonConfig]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for (i, &cfg) in wanted.iter().enumerate() {
        let m = i as u32 + 1;
        match runs.last_mut() {
            Some(r) if r.cfg == cfg => r.b = m,
            _ => runs.push(Run { a: m, b: m, cfg }),
        }
    }
    runs
}

/// One way to place the keys of the runs up to one: `cost` keys, the last one anywhere in `lo..=hi` of
/// that run; `from` is the state of the run before it extends, `two` whether this run holds two keys
/// (its first fixed by the key before, its last free) rather than one.
#[derive(Debug, Clone, Copy)]
struct State {
    cost: usize,
    lo: u32,
    hi: u32,
    from: usize,
    two: bool,
}

/// Most states kept per run (more only when many placements tie; the placement stays exact, at worst
/// not the fewest keys).
const MAX_STATES: usize = 64;

/// The first keys `r` can start with after a last key `p` of the run before, for `p` in `plo..=phi`:
/// the lookup serves M up to (p + f) / 2 (rounded down, a tie going to the earlier key) from `p`, so
/// that must be `r.a - 1`, the end of the run before: f is 2·r.a − 2 − p or 2·r.a − 1 − p, within `r`.
fn follow(r: &Run, plo: u32, phi: u32) -> Option<(u32, u32)> {
    let (a, b) = (i64::from(r.a), i64::from(r.b));
    let lo = (2 * a - 2 - i64::from(phi)).max(a);
    let hi = (2 * a - 1 - i64::from(plo)).min(b);
    (lo <= hi).then_some((lo as u32, hi as u32))
}

/// Keeps the states that can still lead to the fewest keys: a state of 2 keys more than the cheapest is
/// never better (the cheapest one reaches every position two runs on with at most as many keys), nor is
/// one inside another of no more keys.
fn prune(states: &mut Vec<State>) {
    let Some(min) = states.iter().map(|s| s.cost).min() else { return };
    states.sort_by_key(|s| (s.cost, s.lo, std::cmp::Reverse(s.hi)));
    let mut kept: Vec<State> = Vec::new();
    for s in states.drain(..).filter(|s| s.cost <= min + 1) {
        if !kept.iter().any(|k| k.lo <= s.lo && s.hi <= k.hi) && kept.len() < MAX_STATES {
            kept.push(s);
        }
    }
    *states = kept;
}

/// The states of every run (dynamic programming over the runs, see [`choose_keys`]).
fn key_states(runs: &[Run]) -> Vec<Vec<State>> {
    let mut table: Vec<Vec<State>> = Vec::with_capacity(runs.len());
    for (i, r) in runs.iter().enumerate() {
        let mut states = match table.last() {
            None => vec![State { cost: 1, lo: r.a, hi: r.b, from: 0, two: false }],
            Some(before) => {
                let mut v = Vec::new();
                for (j, s) in before.iter().enumerate() {
                    if let Some((lo, hi)) = follow(r, s.lo, s.hi) {
                        v.push(State { cost: s.cost + 1, lo, hi, from: j, two: false });
                        if lo < r.b {
                            v.push(State { cost: s.cost + 2, lo: lo + 1, hi: r.b, from: j, two: true });
                        }
                    }
                }
                v
            }
        };
        // A last key the next run cannot follow (too far before its end) is dropped; the run's end always
        // stays.
        if let Some(next) = runs.get(i + 1) {
            let min_p = (2 * i64::from(next.a) - 2 - i64::from(next.b)).max(0) as u32;
            states.iter_mut().for_each(|s| s.lo = s.lo.max(min_p));
            states.retain(|s| s.lo <= s.hi);
        }
        prune(&mut states);
        table.push(states);
    }
    table
}

/// The keys of the cheapest state of the last run, walked back through the table.
fn fewest_keys(runs: &[Run]) -> Vec<(u32, TritonConfig)> {
    let table = key_states(runs);
    let Some(best) = table.last().and_then(|l| (0..l.len()).min_by_key(|&j| (l[j].cost, l[j].lo))) else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    let (mut j, mut x) = (best, table[table.len() - 1][best].lo);
    for i in (0..runs.len()).rev() {
        let (s, r) = (table[i][j], runs[i]);
        keys.push((x, r.cfg));
        let Some(before) = i.checked_sub(1).map(|b| table[b][s.from]) else { break };
        let a = i64::from(r.a);
        let p = if s.two {
            keys.push(((2 * a - 2 - i64::from(before.hi)).max(a) as u32, r.cfg));
            before.hi
        } else {
            // The last key before: one of the two that make x follow it, in the state's range.
            let fits = |p: i64| p >= i64::from(before.lo) && p <= i64::from(before.hi);
            let p = [2 * a - 1 - i64::from(x), 2 * a - 2 - i64::from(x)].into_iter().find(|&p| fits(p));
            p.unwrap_or(i64::from(before.hi)) as u32
        };
        (j, x) = (s.from, p);
    }
    keys.reverse();
    keys
}

/// Keys (strictly increasing M) whose runtime lookup returns `wanted[i]` at M = i + 1 for every i, as few
/// as can be.
///
/// The wanted configs form runs of equal configs along M. A key stands in a run of its own config (at its
/// own M the lookup returns it), so every run holds a key. Between two keys p < q the lookup switches
/// after (p + q) / 2, rounded down (a tie goes to the earlier key); so where one run ends at b, its last
/// key p and the next run's first key q must have p + q = 2b or 2b + 1, and nothing else constrains the
/// keys. A run of one key ties the key before it to the key after it; a run of two frees them. The
/// fewest keys follow by dynamic programming over the runs, each run's possible last keys an interval
/// per key count ([`key_states`]); the result is proved at every M, and where it would not hold (never,
/// by construction) both ends of every run are written instead, which always hold.
pub fn choose_keys(wanted: &[TritonConfig]) -> Vec<(u32, TritonConfig)> {
    let runs = run_list(wanted);
    let keys = fewest_keys(&runs);
    if prove(&keys, wanted).is_ok() {
        return keys;
    }
    runs.iter().flat_map(|r| std::iter::once((r.a, r.cfg)).chain((r.b != r.a).then_some((r.b, r.cfg)))).collect()
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
        for bad in
            ["", "../x", "a/b", "a\\b", ".hidden", "H200,dtype=x", "a=b", "x\ny", "a..b", &"x".repeat(129), "Gär"]
        {
            let e = device_component(bad).unwrap_err();
            assert!(e.starts_with(&format!("--device-name {bad:?}: expected the GPU name")), "{bad:?}: {e}");
            assert_eq!(device_part(bad).unwrap_err(), e["--device-name ".len()..], "{bad:?}");
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
        // Deterministic pseudo-random runs (xorshift), lengths 1..=700, configs from a small pool: exact, and
        // never more keys than the ends of the runs with the last ones dropped.
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
            if max_m <= 1500 {
                assert!(keys.len() <= dropped_ends(&wanted).len(), "{max_m}");
            }
            for (i, &want) in wanted.iter().enumerate() {
                assert_eq!(runtime_pick(&keys, i as u32 + 1), Some(want), "M={}", i + 1);
            }
        }
    }

    /// The fewest keys by exhaustive search: every set of key positions in 1..=len, each key with the
    /// config wanted at its M.
    fn fewest_by_search(wanted: &[TritonConfig]) -> usize {
        let len = wanted.len();
        (1u32..1 << len)
            .filter(|set| {
                let keys: Vec<(u32, TritonConfig)> =
                    (0..len).filter(|i| set & (1 << i) != 0).map(|i| (i as u32 + 1, wanted[i])).collect();
                (0..len).all(|i| runtime_pick(&keys, i as u32 + 1) == Some(wanted[i]))
            })
            .map(u32::count_ones)
            .min()
            .unwrap() as usize
    }

    /// The ends of every run, last ones dropped while the lookup stays exact (the placement before the
    /// fewest keys were searched for).
    fn dropped_ends(wanted: &[TritonConfig]) -> Vec<(u32, TritonConfig)> {
        let mut keys: Vec<(u32, TritonConfig)> = run_list(wanted)
            .iter()
            .flat_map(|r| std::iter::once((r.a, r.cfg)).chain((r.b != r.a).then_some((r.b, r.cfg))))
            .collect();
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
    fn the_keys_are_the_fewest_the_lookup_needs() {
        // Every step function of up to 12 M values over 3 configs drawn at random, against an exhaustive
        // search of every key set.
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for _ in 0..400 {
            let len = 1 + (next() % 12) as usize;
            let mut wanted = Vec::new();
            while wanted.len() < len {
                let run = 1 + (next() % 4) as usize;
                wanted.extend(std::iter::repeat_n(cfg((next() % 3) as usize), run.min(len - wanted.len())));
            }
            let keys = choose_keys(&wanted);
            assert_eq!(prove(&keys, &wanted), Ok(()), "{wanted:?}");
            assert_eq!(keys.len(), fewest_by_search(&wanted), "{wanted:?}: {keys:?}");
        }
        // Alternating runs of 16 (a rule that reads M modulo 32): one key per run, where keeping the
        // ends of runs needed two.
        let (a, b) = (cfg(0), cfg(1));
        let wanted: Vec<TritonConfig> = (0..1024).map(|i| if i % 32 < 16 { a } else { b }).collect();
        let keys = choose_keys(&wanted);
        assert_eq!(keys.len(), 64);
        assert_eq!(dropped_ends(&wanted).len(), 126);
        for (i, &want) in wanted.iter().enumerate() {
            assert_eq!(runtime_pick(&keys, i as u32 + 1), Some(want), "M={}", i + 1);
        }
        // A threshold keeps its readable keys: the two M values either side of it.
        let wanted: Vec<TritonConfig> = (1..=16384).map(|m| if m <= 64 { a } else { b }).collect();
        assert_eq!(choose_keys(&wanted), vec![(64, a), (65, b)]);
    }

    #[test]
    fn keys_are_bounded_with_a_message_naming_the_layer() {
        let (a, b) = (cfg(0), cfg(1));
        // Runs of 16 up to M = 2^20: 65,536 runs, each needing a key; refused before any is placed.
        let wanted: Vec<TritonConfig> = (0..1u32 << 20).map(|i| if i % 32 < 16 { a } else { b }).collect();
        assert_eq!(runs(&wanted), 65536);
        let e = bounded_keys(&wanted, "layer N=1 K=128").unwrap_err();
        assert!(e.starts_with("layer N=1 K=128: the rule's pick changes 65535 times over M = 1..=1048576"), "{e}");
        assert!(e.contains("needs 65536 keys") && e.contains(&format!("at most {MAX_KEYS} keys")), "{e}");
        // MAX_KEYS runs fit; one more does not.
        let fits: Vec<TritonConfig> = (0..MAX_KEYS * 2).map(|i| if i % 4 < 2 { a } else { b }).collect();
        assert_eq!(bounded_keys(&fits, "x").unwrap().len(), MAX_KEYS);
        let over: Vec<TritonConfig> = (0..MAX_KEYS * 2 + 1).map(|i| if i % 4 < 2 { a } else { b }).collect();
        assert!(bounded_keys(&over, "x").unwrap_err().contains(&format!("needs {} keys", MAX_KEYS + 1)));
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
