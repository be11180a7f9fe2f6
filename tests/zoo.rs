//! The model zoo: the configurations chosen to fill the (N, K) space beyond the dense models of the H200
//! dataset, their layers derived by the spec machinery (latent attention, MoE experts), checked against
//! hand-computed (N, K), kept apart from the held-out DeepSeek-V3 layers, and written up as
//! `measurements/zoo/README.md` (tables between markers) and `measurements/zoo/nk-space.svg`.
//!
//! `cargo test --release --test zoo` fails when the committed tables or plot differ from what the specs,
//! the bench plan and the catalog give; `ZOO_WRITE=1 cargo test --release --test zoo` writes them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use synth_core::catalog::Catalog;
use synth_core::shapes::{m_dataset_grid, m_off_grid, ModelSpec, Parallel, ShapeError};
use synth_core::Shape;
use synth_measure::measure::plan::{
    aiter_refusals, aiter_split_level, build_plan, split_levels, PlanSpec, SplitKMode, AUTO_MAX_SPLIT_K, MAX_SPLIT_K,
};

// ---------------------------------------------------------------------------------------------------------
// The choice

/// A (model, TP) configuration of the zoo and the part of the space it is there for.
struct ZooConfig {
    model: &'static str,
    tp: u32,
    why: &'static str,
}

/// The configurations to measure (built-in specs; each spec names its source).
const ZOO: [ZooConfig; 7] = [
    ZooConfig {
        model: "minicpm3-4b",
        tp: 1,
        why: "latent attention with a query bottleneck: the smallest K (256, 768) and N (288), N/K up to 20",
    },
    ZooConfig {
        model: "deepseek-v2-lite",
        tp: 1,
        why: "latent attention without a query bottleneck (N = 576 at K = 2048) and MoE experts with shared \
              experts (expert down K = 1408)",
    },
    ZooConfig {
        model: "qwen3-30b-a3b",
        tp: 1,
        why: "MoE experts of 768: expert gate_up N = 1536, expert down K = 768",
    },
    ZooConfig { model: "qwen2.5-0.5b", tp: 1, why: "small hidden size: K = 896 on three layers, N = 896" },
    ZooConfig {
        model: "qwen2.5-72b",
        tp: 1,
        why: "very wide and very deep: gate_up N = 59136, down K = 29568 (runnable at TP 1)",
    },
    ZooConfig {
        model: "llama-3.1-405b",
        tp: 8,
        why: "small N with large K: qkv N = 2304 at K = 16384, gate_up 13312 x 16384",
    },
    ZooConfig { model: "mistral-large-2411", tp: 8, why: "small N with large K: qkv N = 1792 at K = 12288; o N/K = 8" },
];

/// A further configuration, measured if time allows.
const OPTIONAL: [ZooConfig; 1] = [ZooConfig {
    model: "qwen3-30b-a3b",
    tp: 2,
    why: "MoE experts split by TP: expert gate_up N = 768, expert down K = 384",
}];

/// (N, K) that are no model's layer, at the corners of the target box the real layers do not reach
/// (N/K = 1/32 and 32): `synth bench --shapes N:K`.
const PROBES: [(u32, u32); 6] = [(256, 8192), (512, 16384), (1024, 32768), (8192, 256), (32768, 1024), (65536, 2048)];

/// The TP degrees at which the held-out model's layers are held out.
const HELD_OUT_TPS: [u32; 5] = [1, 2, 4, 8, 16];

/// M values of the split-K comparison.
const SPLIT_MS: [u32; 4] = [1, 16, 64, 256];
/// The largest M of the deep-split measurement (the issue's weak spot is M ≤ 256).
const DEEP_SPLIT_MAX_M: u32 = 256;
/// SMs of an H200, CUs of an MI300X.
const H200_CUS: u32 = 132;
const MI300X_CUS: u32 = 304;
/// Recheck share and seed of the multi-model runs (`measurements/h200/measure.sh`).
const RECHECK: f64 = 0.03;
const SEED: u64 = 7;
/// Cells per second of the multi-model H200 runs (`measurements/h200/README.md`: 23 cells/s overall).
const CELLS_PER_S: f64 = 23.0;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn held_out_spec() -> ModelSpec {
    ModelSpec::load(&root().join("shapes/held-out/deepseek-v3.toml")).unwrap()
}

fn nk(spec: &ModelSpec, tp: u32) -> Vec<(String, u32, u32)> {
    spec.layers(tp).unwrap().into_iter().map(|l| (l.name, l.n, l.k)).collect()
}

fn owned(v: &[(&str, u32, u32)]) -> Vec<(String, u32, u32)> {
    v.iter().map(|(n, a, b)| (n.to_string(), *a, *b)).collect()
}

// ---------------------------------------------------------------------------------------------------------
// Hand-computed layers

#[test]
fn minicpm3_latent_attention_at_tp_1_and_2() {
    let spec = ModelSpec::builtin("minicpm3-4b").unwrap();
    // q_a 768; kv_a 256 + 32 = 288; q_b 40·(64 + 32) = 3840 from 768; kv_b 40·(64 + 64) = 5120 from 256;
    // o 2560 from 40·64 = 2560; gate_up 2·6400 = 12800; down K 6400.
    assert_eq!(
        nk(&spec, 1),
        owned(&[
            ("q_a_proj", 768, 2560),
            ("kv_a_proj", 288, 2560),
            ("q_b_proj", 3840, 768),
            ("kv_b_proj", 5120, 256),
            ("o_proj", 2560, 2560),
            ("gate_up_proj", 12800, 2560),
            ("down_proj", 2560, 6400),
        ])
    );
    // TP 2: the a-projections are replicated; q_b, kv_b, gate_up halve N; o, down halve K.
    assert_eq!(
        nk(&spec, 2),
        owned(&[
            ("q_a_proj", 768, 2560),
            ("kv_a_proj", 288, 2560),
            ("q_b_proj", 1920, 768),
            ("kv_b_proj", 2560, 256),
            ("o_proj", 2560, 1280),
            ("gate_up_proj", 6400, 2560),
            ("down_proj", 2560, 3200),
        ])
    );
    let rules: Vec<Parallel> = spec.layer_table(2).unwrap().into_iter().map(|(_, p)| p).collect();
    use Parallel::*;
    assert_eq!(rules, vec![Replicated, Replicated, Column, Column, Row, Column, Row]);
    // TP 4: down K = 1600 = 12.5 x 128 cannot run block-scale FP8; o K = 640 can.
    let l = spec.layers(4).unwrap();
    assert!(!l[6].runs_blockscale() && l[6].k == 1600, "{l:?}");
    assert!(l[4].runs_blockscale() && l[4].k == 640, "{l:?}");
    assert_eq!(spec.replicated_layers(), vec!["q_a_proj", "kv_a_proj"]);
    // 40 heads: TP 3 does not divide them.
    assert!(spec.layers(3).unwrap_err().to_string().contains("attention head count (40)"));
}

#[test]
fn deepseek_v2_lite_latent_attention_and_experts_at_tp_1_and_2() {
    let spec = ModelSpec::builtin("deepseek-v2-lite").unwrap();
    // kv_a 512 + 64 = 576; q 16·(128 + 64) = 3072; kv_b 16·(128 + 128) = 4096 from 512; o K 16·128 = 2048;
    // dense gate_up 2·10944 = 21888, down K 10944; experts 2·1408 = 2816, K 1408; shared 2·1408 = 2816 wide:
    // gate_up 5632, down K 2816.
    assert_eq!(
        nk(&spec, 1),
        owned(&[
            ("kv_a_proj", 576, 2048),
            ("q_proj", 3072, 2048),
            ("kv_b_proj", 4096, 512),
            ("o_proj", 2048, 2048),
            ("gate_up_proj", 21888, 2048),
            ("down_proj", 2048, 10944),
            ("experts.gate_up_proj", 2816, 2048),
            ("experts.down_proj", 2048, 1408),
            ("shared_experts.gate_up_proj", 5632, 2048),
            ("shared_experts.down_proj", 2048, 2816),
        ])
    );
    assert_eq!(
        nk(&spec, 2),
        owned(&[
            ("kv_a_proj", 576, 2048),
            ("q_proj", 1536, 2048),
            ("kv_b_proj", 2048, 512),
            ("o_proj", 2048, 1024),
            ("gate_up_proj", 10944, 2048),
            ("down_proj", 2048, 5472),
            ("experts.gate_up_proj", 1408, 2048),
            ("experts.down_proj", 2048, 704),
            ("shared_experts.gate_up_proj", 2816, 2048),
            ("shared_experts.down_proj", 2048, 1408),
        ])
    );
    // The dense down_proj (K = 10944 = 85.5 x 128) never runs block-scale; at TP 2 neither does the experts'
    // down (704 = 5.5 x 128).
    let tp1 = spec.layers(1).unwrap();
    assert!(!tp1[5].runs_blockscale());
    let tp2 = spec.layers(2).unwrap();
    assert!(!tp2[7].runs_blockscale());
    assert_eq!(spec.replicated_layers(), vec!["kv_a_proj"]);
}

#[test]
fn qwen3_moe_has_no_dense_mlp() {
    let spec = ModelSpec::builtin("qwen3-30b-a3b").unwrap();
    assert_eq!(spec.intermediate, 0);
    // qkv (32 + 8)·128 = 5120; o K 32·128 = 4096; experts 2·768 = 1536, down K 768.
    assert_eq!(
        nk(&spec, 1),
        owned(&[
            ("qkv_proj", 5120, 2048),
            ("o_proj", 2048, 4096),
            ("experts.gate_up_proj", 1536, 2048),
            ("experts.down_proj", 2048, 768),
        ])
    );
    // TP 4: expert down K = 192 is not a multiple of 128.
    let l = spec.layers(4).unwrap();
    assert_eq!((l[2].n, l[3].k), (384, 192));
    assert!(!l[3].runs_blockscale());
    // 4 KV heads at TP 8: one KV head per rank, replicated (vLLM): qkv N = (32/8 + 2) x 128 = 768.
    assert_eq!(spec.layers(8).unwrap()[0].n, 768);
    // TP 6 neither divides 4 KV heads nor is a multiple of them (nor divides 32 heads).
    assert!(spec.layers(6).is_err());
}

#[test]
fn the_held_out_spec_gives_vllms_deepseek_v3_files() {
    // The spec machinery and an independent list agree: every DeepSeek-V3 layer at TP 8 is one of the 23
    // (N, K) of vLLM's H200 block-FP8 files.
    let vllm = vllm_h200_files();
    let ds = held_out_spec();
    for l in ds.layers(8).unwrap() {
        assert!(vllm.contains(&(l.n, l.k)), "{l:?} is no vLLM H200 file");
    }
    assert_eq!(
        nk(&ds, 8)[..3],
        owned(&[("fused_qkv_a_proj", 2112, 7168), ("q_b_proj", 3072, 1536), ("kv_b_proj", 4096, 512)])[..]
    );
    assert!(!ModelSpec::builtin_names().contains(&"deepseek-v3"));
}

#[test]
fn no_zoo_layer_to_measure_is_held_out_and_every_spec_names_its_source() {
    let held = held_out();
    for row in zoo_rows() {
        if row.status == Status::New {
            assert!(!held.contains_key(&(row.n, row.k)), "#{} {} {} is held out", row.index, row.model, row.layer);
        }
    }
    for c in ZOO.iter().chain(&OPTIONAL) {
        let spec = ModelSpec::builtin(c.model).unwrap();
        assert!(spec.source.as_deref().is_some_and(|s| !s.is_empty()), "{}", c.model);
    }
    // DeepSeek-V2-Lite's kv_b_proj is DeepSeek-V3's at TP 8: left out.
    let rows = zoo_rows();
    let kvb = rows.iter().find(|r| r.model == "deepseek-v2-lite" && r.layer == "kv_b_proj").unwrap();
    assert!(matches!(&kvb.status, Status::HeldOut(w) if w.contains("kv_b_proj at TP 8")), "{:?}", kvb.status);
}

// ---------------------------------------------------------------------------------------------------------
// Spec errors name the file and the field

fn parse_err(text: &str) -> String {
    ModelSpec::parse(text, "zoo.toml").unwrap_err().to_string()
}

const MLA_HEAD: &str = "name='m'\nhidden=2048\nintermediate=4096\nheads=16\nlayers=4\n";

#[test]
fn bad_latent_attention_specs_name_the_file_and_the_field() {
    let mla = "[mla]\nkv_lora_rank=512\nqk_nope_head_dim=128\nqk_rope_head_dim=64\nv_head_dim=128\n";
    assert!(ModelSpec::parse(&format!("{MLA_HEAD}{mla}"), "zoo.toml").is_ok());
    let cases = [
        (
            format!("{MLA_HEAD}kv_heads=16\n{mla}"),
            "zoo.toml: invalid model spec: field `kv_heads`: not used with [mla]",
        ),
        (
            format!("{MLA_HEAD}{mla}q_lora_rank=1536\n"),
            "zoo.toml: invalid model spec: field `mla.fused_qkv_a`: missing",
        ),
        (
            format!("{MLA_HEAD}{mla}fused_qkv_a=true\n"),
            "zoo.toml: invalid model spec: field `mla.fused_qkv_a`: only with q_lora_rank",
        ),
        (
            format!("{MLA_HEAD}{}", mla.replace("kv_lora_rank=512", "kv_lora_rank=0")),
            "zoo.toml: field `mla.kv_lora_rank` must be a positive integer, got 0",
        ),
        (
            format!("{MLA_HEAD}{}", mla.replace("v_head_dim=128\n", "")),
            "zoo.toml:6:1: invalid model spec: missing field `v_head_dim`",
        ),
        (format!("{MLA_HEAD}{mla}q_rank=3\n"), "unknown field `q_rank`"),
    ];
    for (text, want) in cases {
        let e = parse_err(&text);
        assert!(e.contains(want), "{text}\n=> {e}\nwant {want}");
    }
    // Without [mla] the GQA fields are required, named.
    let e = parse_err("name='m'\nhidden=2048\nintermediate=4096\nheads=16\nhead_dim=128\nlayers=4\n");
    assert!(e.starts_with("zoo.toml: invalid model spec: field `kv_heads`: missing"), "{e}");
}

#[test]
fn bad_expert_specs_name_the_file_and_the_field() {
    let head = "name='m'\nhidden=2048\nheads=16\nkv_heads=4\nhead_dim=128\nlayers=4\n";
    let moe = "[moe]\nintermediate=768\nexperts=8\nexperts_per_token=2\n";
    let spec = ModelSpec::parse(&format!("{head}{moe}"), "zoo.toml").unwrap();
    assert_eq!(spec.layers(2).unwrap().len(), 4);
    let cases = [
        (
            format!("intermediate=4096\n{head}{moe}"),
            "zoo.toml: invalid model spec: field `intermediate`: every decoder layer is MoE",
        ),
        (
            format!("{head}{moe}dense_layers=1\n"),
            "zoo.toml: invalid model spec: field `intermediate`: missing; the first 1 decoder layers",
        ),
        (
            format!("{head}{moe}dense_layers=4\n"),
            "field `moe.dense_layers`: 4 of the 4 decoder layers leaves no MoE layer",
        ),
        (
            format!("{head}{}", moe.replace("experts_per_token=2", "experts_per_token=9")),
            "field `moe.experts_per_token`: 9 is more than the 8 experts",
        ),
        (
            format!("{head}{}", moe.replace("intermediate=768", "intermediate=0")),
            "zoo.toml: field `moe.intermediate` must be a positive integer, got 0",
        ),
        (head.to_string(), "zoo.toml: invalid model spec: field `intermediate`: missing; a spec without [moe]"),
    ];
    for (text, want) in cases {
        let e = parse_err(&text);
        assert!(e.contains(want), "{text}\n=> {e}\nwant {want}");
    }
    // TP must divide the expert intermediate size (768 = 3 · 256).
    let e = spec.layers(512).unwrap_err();
    assert!(matches!(e, ShapeError::TpNotDivisor { .. }), "{e}");
    let e = ModelSpec::parse(
        &format!("{}{moe}", head.replace("heads=16", "heads=1024").replace("kv_heads=4", "kv_heads=1024")),
        "zoo.toml",
    )
    .unwrap()
    .layers(512)
    .unwrap_err();
    assert!(e.to_string().contains("MoE intermediate size (768)"), "{e}");
}

// ---------------------------------------------------------------------------------------------------------
// The space: existing, zoo, held out

/// (N, K) of the configurations of the H200 dataset manifest, with the configuration names.
fn existing() -> BTreeMap<(u32, u32), Vec<String>> {
    #[derive(serde::Deserialize)]
    struct Manifest {
        config: Vec<Conf>,
    }
    #[derive(serde::Deserialize)]
    struct Conf {
        name: String,
        model: String,
        tp: u32,
    }
    let text = std::fs::read_to_string(root().join("measurements/h200/datasets.toml")).unwrap();
    let m: Manifest = toml::from_str(&text).unwrap();
    let mut out: BTreeMap<(u32, u32), Vec<String>> = BTreeMap::new();
    for c in m.config {
        for l in ModelSpec::builtin(&c.model).unwrap().layers(c.tp).unwrap() {
            if l.runs_blockscale() {
                out.entry((l.n, l.k)).or_default().push(c.name.clone());
            }
        }
    }
    out
}

/// The (N, K) of vLLM's H200 block-FP8 files (all DeepSeek-V3/R1 layers).
fn vllm_h200_files() -> BTreeSet<(u32, u32)> {
    let text = std::fs::read_to_string(root().join("measurements/h200/vllm-h200-configs/index.csv")).unwrap();
    text.lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .map(|f| (f[0].parse().unwrap(), f[1].parse().unwrap()))
        .collect()
}

/// Held-out (N, K): DeepSeek-V3's layers at the TPs of [`HELD_OUT_TPS`] (fused and separate a-projections)
/// and vLLM's H200 files, each with what it is.
fn held_out() -> BTreeMap<(u32, u32), String> {
    let mut out = BTreeMap::new();
    let fused = held_out_spec();
    let mut separate = fused.clone();
    separate.mla.as_mut().unwrap().fused_qkv_a = Some(false);
    for spec in [&fused, &separate] {
        for tp in HELD_OUT_TPS {
            for l in spec.layers(tp).unwrap() {
                out.entry((l.n, l.k)).or_insert_with(|| format!("DeepSeek-V3 {} at TP {tp}", l.name));
            }
        }
    }
    for nk in vllm_h200_files() {
        out.entry(nk).or_insert_with(|| "a vLLM H200 DeepSeek-V3 file".to_string());
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Status {
    /// Measured by the zoo.
    New,
    /// K is not a multiple of 128.
    NotBlockscale,
    /// A held-out (N, K), with what it is.
    HeldOut(String),
    /// Already in the H200 dataset, with the configuration.
    Measured(String),
    /// The same (N, K) as an earlier zoo row.
    Same(usize),
}

struct Row {
    index: usize,
    model: &'static str,
    tp: u32,
    optional: bool,
    layer: String,
    n: u32,
    k: u32,
    rule: Parallel,
    status: Status,
}

fn zoo_rows() -> Vec<Row> {
    let held = held_out();
    let have = existing();
    let mut seen: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    let mut rows = Vec::new();
    let all = ZOO.iter().map(|c| (c, false)).chain(OPTIONAL.iter().map(|c| (c, true)));
    for (c, optional) in all {
        let spec = ModelSpec::builtin(c.model).unwrap();
        for (l, rule) in spec.layer_table(c.tp).unwrap() {
            let index = rows.len() + 1;
            let key = (l.n, l.k);
            let status = if !l.runs_blockscale() {
                Status::NotBlockscale
            } else if let Some(w) = held.get(&key) {
                Status::HeldOut(w.clone())
            } else if let Some(names) = have.get(&key) {
                Status::Measured(names.join(", "))
            } else if let Some(&i) = seen.get(&key) {
                Status::Same(i)
            } else {
                seen.insert(key, index);
                Status::New
            };
            rows.push(Row { index, model: c.model, tp: c.tp, optional, layer: l.name, n: l.n, k: l.k, rule, status });
        }
    }
    rows
}

// ---------------------------------------------------------------------------------------------------------
// Cells, regions, split-K

/// Cells of `synth bench` (every legacy candidate, split-K auto, 132 SMs, 3% rechecks) on one (N, K) at `ms`.
fn plan_cells(n: u32, k: u32, ms: &[u32]) -> usize {
    plan_cells_of(&[(n, k)], ms)
}

/// Cells of one `synth bench` plan over every (N, K) of `layers` at the M of `ms`: rechecks are drawn over the
/// whole plan, as the configuration's bench command draws them, so this is not the sum over its layers.
fn plan_cells_of(layers: &[(u32, u32)], ms: &[u32]) -> usize {
    let catalog = Catalog::embedded();
    let spec = PlanSpec {
        shapes: layers.iter().flat_map(|&(n, k)| ms.iter().map(move |&m| Shape::new(m, n, k))).collect(),
        instances: catalog.legacy_candidates().iter().collect(),
        split_k: SplitKMode::Auto,
        cu_num: H200_CUS,
        recheck_fraction: RECHECK,
        seed: SEED,
    };
    build_plan(&spec).unwrap().len()
}

fn off_grid() -> Vec<u32> {
    m_off_grid(20, 16384, 2026)
}

/// The regions of the space an (N, K) is in (empty: inside the existing spread).
fn regions(n: u32, k: u32) -> Vec<&'static str> {
    let mut r = Vec::new();
    if n <= 2304 && k >= 7168 {
        r.push("small N, large K");
    }
    if k <= 1024 {
        r.push("K ≤ 1024");
    }
    if n <= 1024 {
        r.push("N ≤ 1024");
    }
    if n >= 32768 {
        r.push("N ≥ 32768");
    }
    if k >= 16384 {
        r.push("K ≥ 16384");
    }
    let ratio = f64::from(n) / f64::from(k);
    if ratio >= 8.0 {
        r.push("N/K ≥ 8");
    }
    if ratio <= 1.0 / 8.0 {
        r.push("N/K ≤ 1/8");
    }
    r
}

/// Distance in octaves (Euclidean in log2 N, log2 K) to the nearest (N, K) of `set`, and that (N, K).
fn nearest(n: u32, k: u32, set: &BTreeSet<(u32, u32)>) -> (f64, (u32, u32)) {
    set.iter()
        .map(|&(a, b)| {
            let d = (f64::from(n).log2() - f64::from(a).log2()).hypot(f64::from(k).log2() - f64::from(b).log2());
            (d, (a, b))
        })
        .min_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)))
        .unwrap()
}

fn ratio_text(n: u32, k: u32) -> String {
    if n >= k {
        format!("{:.1}", f64::from(n) / f64::from(k))
    } else {
        format!("1/{:.1}", f64::from(k) / f64::from(n))
    }
}

/// AITER's `compute_gemm_SplitK` (aiter/ops/gemm_op_a8w8.py at e4048607a5), as the bench plans it with
/// `--split-k aiter`: the deepest split level its blockscale tuner tries for one tile (it tries 0 ..= this
/// level, KBatch = 2^level).
fn aiter_split(m: u32, n: u32, k: u32, tile: (u32, u32, u32), cus: u32) -> u32 {
    aiter_split_level(Shape::new(m, n, k), tile.0, tile.1, tile.2, cus)
}

#[test]
fn aiter_split_rule_hand_computed() {
    // M = 1, N = 576, 16x64 tiles: 9 tiles; 132/9 = 14.7 >= 2, 4, 8 but < 16 -> 3 (K = 7168 is no limit).
    assert_eq!(aiter_split(1, 576, 7168, (16, 64, 128), 132), 3);
    // 304 CUs: 33.8 >= 32 -> 5.
    assert_eq!(aiter_split(1, 576, 7168, (16, 64, 128), 304), 5);
    // K = 256 with a 128-deep tile: 2·128 < 512 allows level 1, 4·128 < 512 does not.
    assert_eq!(aiter_split(1, 256, 256, (16, 64, 128), 132), 1);
    // Exactly 2^(s+1) CUs per tile still splits: 132 CUs, 33 tiles -> 4 per tile -> 2.
    assert_eq!(aiter_split(1, 33 * 64, 1 << 20, (16, 64, 128), 132), 2);
    // The bench's auto rule on the same shapes: 9 tiles · 2^4 = 144 < 304 SMs and 56 K-steps >= 32, so level 5,
    // its cap (the deepest level the harness and every dispatcher take).
    assert_eq!(split_levels(Shape::new(1, 576, 7168), 16, 64, 128, 304).last(), Some(&5));
    // 132 SMs: 9 · 2^3 = 72 < 132 allows level 4, 9 · 2^4 = 144 does not.
    assert_eq!(split_levels(Shape::new(1, 576, 7168), 16, 64, 128, 132).last(), Some(&4));
}

/// The catalog's legacy tiles (MPerBLOCK, NPerBLOCK, KPerBLOCK) with their kernelIds.
fn tiles() -> Vec<((u32, u32, u32), i32)> {
    Catalog::embedded()
        .legacy_candidates()
        .iter()
        .map(|i| {
            let p = i.legacy_params().unwrap();
            ((p.m_per_block, p.n_per_block, p.k_per_block), i.id)
        })
        .collect()
}

/// The smallest tile of the catalog (by MPerBLOCK · NPerBLOCK, then KPerBLOCK) and its kernelId.
fn smallest_tile() -> ((u32, u32, u32), i32) {
    tiles().into_iter().min_by_key(|&((m, n, k), id)| (m * n, k, id)).unwrap()
}

/// (deepest level over the catalog, a tile reaching it) under `rule`.
fn deepest(rule: impl Fn((u32, u32, u32)) -> u32) -> (u32, (u32, u32, u32)) {
    tiles().into_iter().map(|(t, _)| (rule(t), t)).max_by_key(|&(s, t)| (s, std::cmp::Reverse(t))).unwrap()
}

fn bench_split(m: u32, n: u32, k: u32, t: (u32, u32, u32), cus: u32) -> u32 {
    *split_levels(Shape::new(m, n, k), t.0, t.1, t.2, cus).last().unwrap()
}

// ---------------------------------------------------------------------------------------------------------
// The tables

fn tile_text(t: (u32, u32, u32)) -> String {
    format!("{}x{}x{}", t.0, t.1, t.2)
}

fn tables() -> String {
    let rows = zoo_rows();
    let have = existing();
    let have_set: BTreeSet<(u32, u32)> = have.keys().copied().collect();
    let grid = m_dataset_grid();
    let off = off_grid();
    let mut s = String::new();

    s.push_str("### Configurations\n\n| configuration | layers | new (N, K) | cells: grid (80 M) | cells: off-grid (20 M) | hours at 23 cells/s | source | fills |\n|---|---|---|---|---|---|---|---|\n");
    let configs = ZOO.iter().map(|c| (c, false)).chain(OPTIONAL.iter().map(|c| (c, true)));
    let mut totals = (0usize, 0usize, 0usize);
    for (c, optional) in configs {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.model == c.model && r.tp == c.tp).collect();
        let new: Vec<&Row> = mine.iter().copied().filter(|r| r.status == Status::New).collect();
        let layers: Vec<(u32, u32)> = new.iter().map(|r| (r.n, r.k)).collect();
        let (g, o) = (plan_cells_of(&layers, &grid), plan_cells_of(&layers, &off));
        if !optional {
            totals = (totals.0 + new.len(), totals.1 + g, totals.2 + o);
        }
        let source = ModelSpec::builtin(c.model).unwrap().source.unwrap();
        let _ = writeln!(
            s,
            "| {}{} TP={} | {} | {} | {g} | {o} | {:.2} | {source} | {} |",
            c.model,
            if optional { " (optional)" } else { "" },
            c.tp,
            mine.len(),
            new.len(),
            (g + o) as f64 / CELLS_PER_S / 3600.0,
            c.why
        );
    }
    let _ = writeln!(
        s,
        "| **the seven** | | **{}** | **{}** | **{}** | **{:.2}** | | |",
        totals.0,
        totals.1,
        totals.2,
        (totals.1 + totals.2) as f64 / CELLS_PER_S / 3600.0
    );

    s.push_str("\n### Regions\n\n(N, K) in each region: the H200 dataset, the seven configurations' new ones, the optional configuration's new ones (an (N, K) can be in several regions).\n\n| region | H200 dataset | new | new, optional |\n|---|---|---|---|\n");
    for region in ["small N, large K", "K ≤ 1024", "N ≤ 1024", "N ≥ 32768", "K ≥ 16384", "N/K ≥ 8", "N/K ≤ 1/8"]
    {
        let count =
            |set: &mut dyn Iterator<Item = (u32, u32)>| set.filter(|&(n, k)| regions(n, k).contains(&region)).count();
        let new_main = count(&mut rows.iter().filter(|r| r.status == Status::New && !r.optional).map(|r| (r.n, r.k)));
        let new_opt = count(&mut rows.iter().filter(|r| r.status == Status::New && r.optional).map(|r| (r.n, r.k)));
        let _ = writeln!(s, "| {region} | {} | {new_main} | {new_opt} |", count(&mut have_set.iter().copied()));
    }
    s.push_str("\n### Layers\n\n`#` numbers the points of the plot. Status: **new** is measured; the others are not (held out, K not a multiple of 128, already in the H200 dataset, or the same (N, K) as an earlier row). Nearest: the closest (N, K) of the H200 dataset, in octaves (Euclidean in log2 N, log2 K).\n\n| # | configuration | layer | N | K | N/K | TP rule | status | regions | nearest measured (octaves) | cells: grid | cells: off-grid |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in &rows {
        let status = match &r.status {
            Status::New => "**new**".to_string(),
            Status::NotBlockscale => format!("not run: K = {} is not a multiple of 128", r.k),
            Status::HeldOut(w) => format!("held out: {w}"),
            Status::Measured(c) => format!("measured: {c}"),
            Status::Same(i) => format!("= #{i}"),
        };
        let (near, cells_g, cells_o) = if r.status == Status::New {
            let (d, (a, b)) = nearest(r.n, r.k, &have_set);
            (
                format!("{d:.2} ({a}, {b})"),
                plan_cells(r.n, r.k, &grid).to_string(),
                plan_cells(r.n, r.k, &off).to_string(),
            )
        } else {
            (String::new(), String::new(), String::new())
        };
        let _ = writeln!(
            s,
            "| {} | {}{} TP={} | {} | {} | {} | {} | {} | {status} | {} | {near} | {cells_g} | {cells_o} |",
            r.index,
            r.model,
            if r.optional { " (opt.)" } else { "" },
            r.tp,
            r.layer,
            r.n,
            r.k,
            ratio_text(r.n, r.k),
            r.rule.rule(),
            regions(r.n, r.k).join(", ")
        );
    }

    s.push_str("\n### Bench commands\n\nOne journal per configuration, the layers limited to its new (N, K) (`--shapes`), as `measurements/h200/measure.sh` runs them; then the same with `--m-set off-grid`.\n\n```sh\n");
    for c in ZOO.iter().chain(&OPTIONAL) {
        let pairs: Vec<String> = rows
            .iter()
            .filter(|r| r.model == c.model && r.tp == c.tp && r.status == Status::New)
            .map(|r| format!("{}:{}", r.n, r.k))
            .collect();
        let _ = writeln!(
            s,
            "synth bench --model {} --tp {} --m-set dataset --shapes {} --split-k auto --recheck-fraction 0.03 --seed 7 --out {}-tp{}.csv",
            c.model,
            c.tp,
            pairs.join(","),
            c.model,
            c.tp
        );
    }
    s.push_str("```\n");

    let ratios: Vec<f64> =
        rows.iter().filter(|r| r.status == Status::New).map(|r| f64::from(r.n) / f64::from(r.k)).collect();
    let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ratios.iter().copied().fold(0.0, f64::max);
    let _ = write!(
        s,
        "\n### Probes (no model's layer)\n\nThe new layers reach N/K from 1/{:.1} to {hi:.1}; the box's corners at 1/32 and 32 are reached only by held-out DeepSeek-V3 layers or by these (N, K), measurable with `synth bench --shapes N:K`:\n\n| N | K | N/K | cells: grid | cells: off-grid |\n|---|---|---|---|---|\n",
        1.0 / lo
    );
    for (n, k) in PROBES {
        let _ = writeln!(
            s,
            "| {n} | {k} | {} | {} | {} |",
            ratio_text(n, k),
            plan_cells(n, k, &grid),
            plan_cells(n, k, &off)
        );
    }

    let ((sm, sn, sk), sid) = smallest_tile();
    let small = (sm, sn, sk);
    let _ = write!(
        s,
        "\n### Split-K: AITER's tuner against the bench's cap\n\nDeepest split level (KBatch = 2^level) on each new (N, K): AITER's `compute_gemm_SplitK` (its blockscale tuner tries 0 ..= that level per kernel) with the catalog's smallest tile {} (kernelId {sid}) and the deepest over all 19 legacy tiles, against `synth bench --split-k auto` (`split_levels`, capped at level {AUTO_MAX_SPLIT_K}) with the same tiles. **Bold**: AITER would try deeper than `auto` measures.\n\n| N | K | M | H200 AITER {} | H200 AITER deepest | H200 bench {} | H200 bench deepest | MI300X AITER {} | MI300X AITER deepest | MI300X bench {} | MI300X bench deepest |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
        tile_text(small),
        tile_text(small),
        tile_text(small),
        tile_text(small),
        tile_text(small)
    );
    let mut deeper = 0usize;
    let mut count = 0usize;
    for r in rows.iter().filter(|r| r.status == Status::New) {
        for m in SPLIT_MS {
            let mut cells = Vec::new();
            for cus in [H200_CUS, MI300X_CUS] {
                let a_small = aiter_split(m, r.n, r.k, small, cus);
                let (a_deep, a_tile) = deepest(|t| aiter_split(m, r.n, r.k, t, cus));
                let b_small = bench_split(m, r.n, r.k, small, cus);
                let (b_deep, b_tile) = deepest(|t| bench_split(m, r.n, r.k, t, cus));
                let bold = |v: u32, cap: u32| if v > cap { format!("**{v}**") } else { v.to_string() };
                cells.push(bold(a_small, b_small));
                cells.push(format!("{} ({})", bold(a_deep, b_deep), tile_text(a_tile)));
                cells.push(b_small.to_string());
                cells.push(format!("{b_deep} ({})", tile_text(b_tile)));
                count += 1;
                if a_deep > b_deep {
                    deeper += 1;
                }
            }
            let _ = writeln!(s, "| {} | {} | {m} | {} |", r.n, r.k, cells.join(" | "));
        }
    }
    let _ = writeln!(s, "\nAITER's deepest level is above `auto`'s on {deeper} of {count} (N, K, M, device) rows.");

    // The deep-split measurement: AITER's levels on the layers of the weak region and the probes there.
    let deep: Vec<(u32, u32)> = rows
        .iter()
        .filter(|r| r.status == Status::New && regions(r.n, r.k).contains(&"small N, large K"))
        .map(|r| (r.n, r.k))
        .chain(PROBES.iter().copied().filter(|&(n, k)| regions(n, k).contains(&"small N, large K")))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let ms: Vec<u32> = grid.iter().copied().filter(|&m| m <= DEEP_SPLIT_MAX_M).collect();
    let catalog = Catalog::embedded();
    let spec = PlanSpec {
        shapes: deep.iter().flat_map(|&(n, k)| ms.iter().map(move |&m| Shape::new(m, n, k))).collect(),
        instances: catalog.legacy_candidates().iter().collect(),
        split_k: SplitKMode::Aiter,
        cu_num: H200_CUS,
        recheck_fraction: RECHECK,
        seed: SEED,
    };
    let plan = build_plan(&spec).unwrap();
    // Level 3 was `auto`'s cap when this measurement was planned.
    let deeper_cells = plan.iter().filter(|c| c.recheck == 0 && c.split_k > 3).count();
    let refused = aiter_refusals(&spec);
    let pairs: Vec<String> = deep.iter().map(|(n, k)| format!("{n}:{k}")).collect();
    let ms_text: Vec<String> = ms.iter().map(u32::to_string).collect();
    let _ = write!(
        s,
        "\n### Split-K: measuring AITER's levels\n\n`synth bench --split-k aiter` plans, per instance, the levels AITER's tuner tries (`measure::plan::aiter_levels`: 0 ..= `compute_gemm_SplitK`) up to level {MAX_SPLIT_K} (KBatch {}), each split at least one whole KPerBLOCK step, and names the levels it leaves out. On the new (N, K) of the weak region and the probes there ({}), at the dataset grid's {} M values up to {DEEP_SPLIT_MAX_M}, on the H200's {H200_CUS} SMs: {} cells ({} of them deeper than level 3, `auto`'s cap before it), {} left out ({} with splits shorter than one KPerBLOCK step, {} beyond level {MAX_SPLIT_K}; AITER's deepest level there is {}): about {:.0} minutes at {CELLS_PER_S} cells/s.\n\n```sh\nsynth bench --shapes {} --m-set {} --split-k aiter --recheck-fraction 0.03 --seed 7 --out zoo-splitk-aiter.csv\n```\n",
        1u32 << MAX_SPLIT_K,
        pairs.join(", "),
        ms.len(),
        plan.len(),
        deeper_cells,
        refused.short_k + refused.beyond_cap,
        refused.short_k,
        refused.beyond_cap,
        refused.deepest,
        plan.len() as f64 / CELLS_PER_S / 60.0,
        pairs.join(","),
        ms_text.join(","),
    );
    s
}

// ---------------------------------------------------------------------------------------------------------
// The plot

const W: f64 = 900.0;
const H: f64 = 680.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 230.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
/// log2 ranges of the axes.
const X0: f64 = 7.0;
const X1: f64 = 17.0;
const Y0: f64 = 7.0;
const Y1: f64 = 16.0;

fn px(n: f64) -> f64 {
    LEFT + (n.log2() - X0) / (X1 - X0) * (W - LEFT - RIGHT)
}

fn py(k: f64) -> f64 {
    TOP + (Y1 - k.log2()) / (Y1 - Y0) * (H - TOP - BOTTOM)
}

fn pow2_label(e: i32) -> String {
    let v = 1u64 << e;
    if v >= 1024 {
        format!("{}k", v / 1024)
    } else {
        v.to_string()
    }
}

fn svg() -> String {
    let rows = zoo_rows();
    let have = existing();
    let held = held_out();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" font-family=\"DejaVu Sans, sans-serif\">"
    );
    let _ = writeln!(s, "<rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>");
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">GEMM (N, K) of the H200 dataset, the zoo and the held-out DeepSeek-V3 layers</text>",
        (LEFT + W - RIGHT) / 2.0
    );
    let (x0, x1, y0, y1) = (px(2f64.powf(X0)), px(2f64.powf(X1)), py(2f64.powf(Y1)), py(2f64.powf(Y0)));
    // Grid and ticks at powers of two.
    for e in X0 as i32..=X1 as i32 {
        let x = px(2f64.powi(e));
        let _ = writeln!(s, "<line x1=\"{x:.1}\" y1=\"{y0:.1}\" x2=\"{x:.1}\" y2=\"{y1:.1}\" stroke=\"#e4e4e4\"/>");
        let _ = writeln!(
            s,
            "<text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
            y1 + 16.0,
            pow2_label(e)
        );
    }
    for e in Y0 as i32..=Y1 as i32 {
        let y = py(2f64.powi(e));
        let _ = writeln!(s, "<line x1=\"{x0:.1}\" y1=\"{y:.1}\" x2=\"{x1:.1}\" y2=\"{y:.1}\" stroke=\"#e4e4e4\"/>");
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            x0 - 6.0,
            y + 4.0,
            pow2_label(e)
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"13\" text-anchor=\"middle\">N (output features, log scale)</text>",
        (x0 + x1) / 2.0,
        H - 14.0
    );
    let _ = writeln!(
        s,
        "<text x=\"18\" y=\"{:.1}\" font-size=\"13\" text-anchor=\"middle\" transform=\"rotate(-90 18 {:.1})\">K (reduction, log scale)</text>",
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0
    );
    // The weak region of the issue: N <= 2304 with K >= 7168.
    let (wx0, wx1, wy0, wy1) = (x0, px(2304.0), y0, py(7168.0));
    let _ = writeln!(
        s,
        "<rect x=\"{wx0:.1}\" y=\"{wy0:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#fbe3e3\"/>",
        wx1 - wx0,
        wy1 - wy0
    );
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#a33\">N ≤ 2304, K ≥ 7168</text>",
        wx0 + 4.0,
        wy0 + 12.0
    );
    // The target box.
    let (bx0, bx1, by0, by1) = (px(256.0), px(65536.0), py(32768.0), py(256.0));
    let _ = writeln!(
        s,
        "<rect x=\"{bx0:.1}\" y=\"{by0:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#888\" stroke-dasharray=\"6 4\"/>",
        bx1 - bx0,
        by1 - by0
    );
    let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#666\" text-anchor=\"end\">N 256..65536, K 256..32768</text>", bx1 - 4.0, by0 - 4.0);
    // Lines of constant N/K, clipped to the plot: N = r·K.
    for (r, label) in [(1.0 / 32.0, "N/K = 1/32"), (1.0, "N/K = 1"), (32.0, "N/K = 32")] {
        let lr: f64 = f64::log2(r);
        // Points (x = y + lr) over y in [Y0, Y1], clipped to x in [X0, X1].
        let ya = Y0.max(X0 - lr);
        let yb = Y1.min(X1 - lr);
        if ya >= yb {
            continue;
        }
        let (ax, ay) = (px(2f64.powf(ya + lr)), py(2f64.powf(ya)));
        let (bx, by) = (px(2f64.powf(yb + lr)), py(2f64.powf(yb)));
        let _ = writeln!(s, "<line x1=\"{ax:.1}\" y1=\"{ay:.1}\" x2=\"{bx:.1}\" y2=\"{by:.1}\" stroke=\"#999\" stroke-dasharray=\"2 3\"/>");
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#666\">{label}</text>",
            bx + 3.0,
            by + 10.0
        );
    }
    // Held out: red crosses.
    for &(n, k) in held.keys() {
        let (x, y) = (px(f64::from(n)), py(f64::from(k)));
        let _ = writeln!(
            s,
            "<path d=\"M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}\" stroke=\"#c0392b\" stroke-width=\"1.6\"/>",
            x - 4.0,
            y - 4.0,
            x + 4.0,
            y + 4.0,
            x - 4.0,
            y + 4.0,
            x + 4.0,
            y - 4.0
        );
    }
    // Existing: blue circles.
    for &(n, k) in have.keys() {
        let _ = writeln!(
            s,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"#2e6fb7\"/>",
            px(f64::from(n)),
            py(f64::from(k))
        );
    }
    // Probes: green triangles.
    for (n, k) in PROBES {
        let (x, y) = (px(f64::from(n)), py(f64::from(k)));
        let _ = writeln!(
            s,
            "<path d=\"M{:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z\" fill=\"none\" stroke=\"#2a8a3e\" stroke-width=\"1.5\"/>",
            x,
            y - 5.0,
            x + 5.0,
            y + 4.0,
            x - 5.0,
            y + 4.0
        );
    }
    // Zoo: orange squares (hollow for the optional configuration), numbered.
    for r in rows.iter().filter(|r| r.status == Status::New) {
        let (x, y) = (px(f64::from(r.n)), py(f64::from(r.k)));
        let fill = if r.optional { "none" } else { "#e67e22" };
        let _ = writeln!(
            s,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"8\" height=\"8\" fill=\"{fill}\" stroke=\"#b35806\" stroke-width=\"1.2\"/>",
            x - 4.0,
            y - 4.0
        );
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" fill=\"#7a3b00\">{}</text>",
            x + 5.0,
            y - 4.0,
            r.index
        );
    }
    // Legend.
    let lx = W - RIGHT + 16.0;
    let mut ly = TOP + 10.0;
    let n_new = rows.iter().filter(|r| r.status == Status::New && !r.optional).count();
    let n_opt = rows.iter().filter(|r| r.status == Status::New && r.optional).count();
    let entries: [(&str, String); 5] = [
        ("existing", format!("H200 dataset ({} (N, K))", have.len())),
        ("zoo", format!("zoo, new ({n_new}; # of the table)")),
        ("optional", format!("optional config ({n_opt})")),
        ("held", format!("held out: DeepSeek-V3 ({})", held.len())),
        ("probe", format!("probes, no model ({})", PROBES.len())),
    ];
    for (kind, text) in entries {
        let (x, y) = (lx + 6.0, ly);
        match kind {
            "existing" => {
                let _ = writeln!(s, "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"4\" fill=\"#2e6fb7\"/>");
            }
            "zoo" | "optional" => {
                let fill = if kind == "zoo" { "#e67e22" } else { "none" };
                let _ = writeln!(s, "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"8\" height=\"8\" fill=\"{fill}\" stroke=\"#b35806\" stroke-width=\"1.2\"/>", x - 4.0, y - 4.0);
            }
            "held" => {
                let _ = writeln!(s, "<path d=\"M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}\" stroke=\"#c0392b\" stroke-width=\"1.6\"/>", x - 4.0, y - 4.0, x + 4.0, y + 4.0, x - 4.0, y + 4.0, x + 4.0, y - 4.0);
            }
            _ => {
                let _ = writeln!(s, "<path d=\"M{:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z\" fill=\"none\" stroke=\"#2a8a3e\" stroke-width=\"1.5\"/>", x, y - 5.0, x + 5.0, y + 4.0, x - 5.0, y + 4.0);
            }
        }
        let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{text}</text>", x + 12.0, y + 4.0);
        ly += 20.0;
    }
    s.push_str("</svg>\n");
    s
}

// ---------------------------------------------------------------------------------------------------------
// The committed files

const BEGIN: &str = "<!-- zoo tables: generated by `ZOO_WRITE=1 cargo test --release --test zoo`; do not edit -->\n";
const END: &str = "<!-- end of zoo tables -->\n";

fn readme_with(readme: &str, block: &str) -> String {
    let a = readme.find(BEGIN).expect("measurements/zoo/README.md has the begin marker") + BEGIN.len();
    let b = readme.find(END).expect("measurements/zoo/README.md has the end marker");
    format!("{}{block}{}", &readme[..a], &readme[b..])
}

fn check_or_write(path: &Path, want: &str) {
    if std::env::var_os("ZOO_WRITE").is_some() {
        std::fs::write(path, want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(path).unwrap();
    assert!(have == want, "{} is stale: run `ZOO_WRITE=1 cargo test --release --test zoo`", path.display());
}

#[test]
fn committed_tables_and_plot_are_current() {
    let dir = root().join("measurements/zoo");
    let readme_path = dir.join("README.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    check_or_write(&readme_path, &readme_with(&readme, &tables()));
    let svg = svg();
    check_or_write(&dir.join("nk-space.svg"), &svg);
    let png = synth_core::compare::raster::svg_to_png(&svg).unwrap();
    let png_path = dir.join("nk-space.png");
    if std::env::var_os("ZOO_WRITE").is_some() {
        std::fs::write(&png_path, &png).unwrap();
    } else {
        let have = std::fs::read(&png_path).unwrap();
        assert!(
            have == png,
            "{} is stale ({} bytes, drawn {}): run `ZOO_WRITE=1 cargo test --release --test zoo`",
            png_path.display(),
            have.len(),
            png.len()
        );
    }
}

/// `measurements/zoo/measure.sh 300 JDIR OUT PART` from the repository root with the test's binary as
/// `SYNTH` and `envs` added; its output, and stdout and stderr as one text.
fn measure_script(jdir: &Path, out: &Path, part: &str, envs: &[(&str, &str)]) -> (std::process::Output, String) {
    let mut c = std::process::Command::new("bash");
    c.arg("measurements/zoo/measure.sh")
        .args(["300", jdir.to_str().unwrap(), out.to_str().unwrap(), part])
        .current_dir(root())
        .env("SYNTH", env!("CARGO_BIN_EXE_synth"));
    for (k, v) in envs {
        c.env(k, v);
    }
    let o = c.output().expect("bash runs");
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    (o, text)
}

/// The fake harness in place of `harness/blockscale_bench.py`.
const FAKE_BENCH: (&str, &str) = ("BENCH_ARGS", "--python python3 --harness tests/fixtures/fake_harness.py");

/// `measurements/zoo/measure.sh deep` against the fake harness: it runs the README's `--split-k aiter`
/// command into the journal directory with the plan's every cell, and a second run resumes it (nothing left
/// to measure), both packed into the output directory.
#[test]
fn the_measure_script_runs_the_readme_commands_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let (jdir, out) = (dir.path().join("j"), dir.path().join("o"));
    let run = || measure_script(&jdir, &out, "deep", &[FAKE_BENCH, ("ZOO_SEED", "none")]);
    let (o, text) = run();
    assert!(o.status.success(), "{text}");
    let journal = std::fs::read_to_string(jdir.join("zoo-splitk-aiter.csv")).unwrap();
    // The plan the README states: every cell once (header line aside).
    let readme = std::fs::read_to_string(root().join("measurements/zoo/README.md")).unwrap();
    let cells: usize = readme
        .split("on the H200's 132 SMs: ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the README states the deep plan's cells");
    assert_eq!(journal.lines().count() - 1, cells, "{text}");
    assert!(journal.lines().any(|l| l.contains(",ck,6,5,")), "level 5 of kernel 6 is measured");
    assert!(out.join("zoo-journals.tgz").exists());
    let (o, _) = run();
    assert!(o.status.success());
    let log = std::fs::read_to_string(jdir.join("bench.log")).unwrap();
    assert!(log.contains(&format!("{cells} already in")) && log.contains("0 to measure"), "{log}");
    assert_eq!(std::fs::read_to_string(jdir.join("zoo-splitk-aiter.csv")).unwrap(), journal);

    // Seeded from the committed journal (complete on the H200): nothing is measured, and the journal in
    // the directory is the committed one, decompressed.
    // The fake harness answers as the device of the committed journal: a journal of another device is
    // refused before anything is measured.
    let seeded = dir.path().join("s");
    let h200 = [FAKE_BENCH, ("FAKE_DEVICE_NAMES", "0=NVIDIA H200"), ("FAKE_BACKEND", "cuda-13.0")];
    let (o, text) = measure_script(&seeded, &out, "deep", &h200);
    assert!(o.status.success(), "{text}");
    let log = std::fs::read_to_string(seeded.join("bench.log")).unwrap();
    assert!(log.contains("== seeded zoo-splitk-aiter.csv from measurements/zoo/zoo-splitk-aiter.csv.gz"), "{log}");
    assert!(log.contains(&format!("{cells} already in")) && log.contains("0 to measure"), "{log}");
    let mut committed = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::MultiGzDecoder::new(
            std::fs::File::open(root().join("measurements/zoo/zoo-splitk-aiter.csv.gz")).unwrap(),
        ),
        &mut committed,
    )
    .unwrap();
    assert_eq!(std::fs::read(seeded.join("zoo-splitk-aiter.csv")).unwrap(), committed);
}

/// `measurements/zoo/measure.sh vendor` with a stand-in of `vendor_reference.py`: one vendor journal per grid
/// command of the README, each with every grid and off-grid shape of its layers once, read back as vendor
/// rows; a second run leaves the journals as they are.
#[test]
fn the_measure_script_measures_the_vendor_rows_of_every_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let (jdir, out) = (dir.path().join("j"), dir.path().join("o"));
    let run = || {
        measure_script(
            &jdir,
            &out,
            "vendor",
            &[("VENDOR_REFERENCE", "python3 tests/fixtures/fake_vendor_reference.py")],
        )
    };
    let (o, text) = run();
    assert!(o.status.success(), "{text}");
    let readme = std::fs::read_to_string(root().join("measurements/zoo/README.md")).unwrap();
    let commands: Vec<&str> =
        readme.lines().filter(|l| l.starts_with("synth bench --model") && l.contains("--m-set dataset")).collect();
    assert_eq!(commands.len(), 8, "the README's grid commands");
    let catalog = Catalog::embedded();
    let both = synth_core::catalog::Backends::parse("ck,vendor").unwrap();
    let mut journals = Vec::new();
    for line in &commands {
        let name = line.split(" --out ").nth(1).unwrap().trim();
        let layers = line.split(" --shapes ").nth(1).unwrap().split(' ').next().unwrap().split(',').count();
        let path = jdir.join(format!("vendor-{name}"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // 80 grid and 20 off-grid M values per layer, each shape once.
        assert_eq!(text.lines().count() - 1, layers * 100, "{name}");
        let rows = synth_core::table::parse_aiter_csv(text.as_bytes(), name, &catalog).unwrap();
        let m = synth_core::table::LatencyMatrix::from_rows_for(&rows, Some(&both)).unwrap();
        assert_eq!(m.shapes.len(), layers * 100, "{name}");
        assert!(m.candidates.iter().all(|c| c.backend == synth_core::catalog::Libtype::Vendor), "{name}");
        journals.push((path, text));
    }
    let (o, _) = run();
    assert!(o.status.success());
    let log = std::fs::read_to_string(jdir.join("vendor.log")).unwrap();
    assert_eq!(log.matches(" is there").count(), 8, "{log}");
    for (path, text) in journals {
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }
}

/// `ZOO_ONLY` limits `measurements/zoo/measure.sh` to the configurations it names, in its order; a name no
/// command writes is one error naming it, before anything is measured or written.
#[test]
fn the_measure_script_runs_only_the_configurations_named() {
    let dir = tempfile::tempdir().unwrap();
    let (jdir, out) = (dir.path().join("j"), dir.path().join("o"));
    let fake = ("VENDOR_REFERENCE", "python3 tests/fixtures/fake_vendor_reference.py");
    let (o, text) = measure_script(&jdir, &out, "vendor", &[fake, ("ZOO_ONLY", "qwen3-30b-a3b-tp2,qwen2.5-0.5b-tp1")]);
    assert!(o.status.success(), "{text}");
    let mut written: Vec<String> = std::fs::read_dir(&jdir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("vendor-") && n.ends_with(".csv"))
        .collect();
    written.sort();
    assert_eq!(written, ["vendor-qwen2.5-0.5b-tp1.csv", "vendor-qwen3-30b-a3b-tp2.csv"], "{text}");
    let log = std::fs::read_to_string(jdir.join("vendor.log")).unwrap();
    let (a, b) = (log.find("vendor-qwen3-30b-a3b-tp2.csv").unwrap(), log.find("vendor-qwen2.5-0.5b-tp1.csv").unwrap());
    assert!(a < b, "ZOO_ONLY's order: {log}");

    let none = dir.path().join("n");
    let (o, text) = measure_script(&none, &out, "grid", &[FAKE_BENCH, ("ZOO_ONLY", "qwen2.5-72b-tp1,qwen9-tp1")]);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(text.contains("ZOO_ONLY names qwen9-tp1"), "{text}");
    assert!(!none.exists(), "nothing is written: {text}");
    // A name is matched whole, never as a pattern; a list of no names is refused too.
    for (only, words) in
        [(".*", "ZOO_ONLY names .*,"), ("qwen2X5-72b-tp1", "names qwen2X5-72b-tp1,"), (" , ", "names no configuration")]
    {
        let (o, text) = measure_script(&none, &out, "grid", &[FAKE_BENCH, ("ZOO_ONLY", only)]);
        assert_eq!(o.status.code(), Some(2), "{only}: {text}");
        assert!(text.contains(words), "{only}: {text}");
        assert!(!none.exists(), "{only}: nothing is written");
    }
}

/// The zoo's configurations and how many of their layers have all 20 off-grid M in both manifests: every
/// layer of the zoo's journals (and Qwen3-30B-A3B TP 1's qkv, read from the dense Qwen3-32B TP 4 journal).
const ZOO_OFF_GRID_LAYERS: [(&str, usize); 8] = [
    ("llama-3.1-405b-tp8", 4),
    ("mistral-large-2411-tp8", 3),
    ("qwen2.5-72b-tp1", 4),
    ("qwen2.5-0.5b-tp1", 4),
    ("qwen3-30b-a3b-tp1", 4),
    ("qwen3-30b-a3b-tp2", 4),
    ("minicpm3-4b-tp1", 7),
    ("deepseek-v2-lite-tp1", 8),
];

/// The zoo's manifest with cuBLAS rows (`measurements/zoo/backends.toml`): every configuration of the zoo's
/// manifest, every shape with a usable row of both backends; the zoo's configurations on their grid and their
/// 20 off-grid M (of every layer of the zoo's journals and of the dense journal Qwen3-30B-A3B TP 1 reads).
#[test]
fn the_zoo_backends_manifest_has_both_backends_on_every_shape() {
    use synth_core::catalog::{Backends, Libtype};
    let both = Backends::parse("ck,vendor").unwrap();
    let data =
        gemm_synth::app::manifest::open_for(&root().join("measurements/zoo/backends.toml"), Some(&both)).unwrap();
    let zoo = gemm_synth::app::manifest::open(&root().join("measurements/zoo/datasets.toml")).unwrap();
    let names: Vec<&str> = data.configs.iter().map(|c| c.name.as_str()).collect();
    let want: Vec<&str> = zoo.configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, want);
    let pool = |d: &synth_core::manifest::MultiData| -> Vec<String> {
        d.pool.iter().map(|&i| d.configs[i].name.clone()).collect()
    };
    assert_eq!(pool(&data), pool(&zoo), "the pool as in datasets.toml");
    assert_eq!(data.train_configs, zoo.train_configs);
    let mut missing = BTreeMap::<(&str, Libtype), usize>::new();
    for c in &data.configs {
        for s in c.grid.iter().chain(&c.off_grid) {
            for b in [Libtype::Ck, Libtype::Vendor] {
                if data.matrix.best_of(*s, b).is_none() {
                    *missing.entry((c.name.as_str(), b)).or_default() += 1;
                }
            }
        }
        if let Some((_, layers)) = ZOO_OFF_GRID_LAYERS.iter().find(|(n, _)| *n == c.name) {
            assert_eq!(c.off_grid.len(), layers * 20, "{}", c.name);
        }
    }
    assert_eq!(missing, BTreeMap::new());
}

/// The zoo's manifest reads its gzip-compressed journals and the dense ones beside them: every configuration
/// has the grid of its measured layers, and the zoo's have exactly the (N, K) its bench commands name.
#[test]
fn the_zoo_manifest_opens_with_its_compressed_journals() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let data = gemm_synth::app::manifest::open(&root.join("measurements/zoo/datasets.toml")).unwrap();
    assert_eq!(data.configs.len(), 19);
    let by_name = |n: &str| data.configs.iter().find(|c| c.name == n).unwrap();
    let layers = |n: &str| {
        let mut v: Vec<(u32, u32)> = by_name(n).layers.iter().map(|l| (l.n, l.k)).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    // Qwen2.5-0.5B at TP 1: its four layers, each on the 80-value grid.
    assert_eq!(layers("qwen2.5-0.5b-tp1"), vec![(896, 896), (896, 4864), (1152, 896), (9728, 896)]);
    assert_eq!(by_name("qwen2.5-0.5b-tp1").grid.len(), 4 * 80);
    // Qwen3-30B-A3B's qkv layer is read from the dense Qwen3-32B TP 4 journal.
    assert!(layers("qwen3-30b-a3b-tp1").contains(&(5120, 2048)));
    assert_eq!(by_name("qwen3-30b-a3b-tp1").grid.len(), 4 * 80);
    assert_eq!(by_name("minicpm3-4b-tp1").grid.len(), 7 * 80);
    assert_eq!(by_name("deepseek-v2-lite-tp1").grid.len(), 8 * 80);
    // Qwen2.5-72B at TP 1, its own journal; Qwen3-30B-A3B at TP 2 with DeepSeek-V2-Lite's 2048 x 2048.
    assert_eq!(layers("qwen2.5-72b-tp1"), vec![(8192, 8192), (8192, 29568), (10240, 8192), (59136, 8192)]);
    assert_eq!(layers("qwen3-30b-a3b-tp2"), vec![(768, 2048), (2048, 384), (2048, 2048), (2560, 2048)]);
    // Llama-3.1-405B and Mistral Large 2 at TP 8, their own journals (Mistral's o_proj, 12288 x 1536, is
    // DeepSeek-V3's q_b_proj at TP 2: held out, not measured).
    assert_eq!(layers("llama-3.1-405b-tp8"), vec![(2304, 16384), (13312, 16384), (16384, 2048), (16384, 6656)]);
    assert_eq!(layers("mistral-large-2411-tp8"), vec![(1792, 12288), (7168, 12288), (12288, 3584)]);
    for n in ["qwen2.5-72b-tp1", "qwen3-30b-a3b-tp2", "llama-3.1-405b-tp8"] {
        assert_eq!(by_name(n).grid.len(), 4 * 80, "{n}");
    }
    assert_eq!(by_name("mistral-large-2411-tp8").grid.len(), 3 * 80);
    for (n, layers) in ZOO_OFF_GRID_LAYERS {
        assert_eq!(by_name(n).off_grid.len(), layers * 20, "{n}");
    }
    // The dense configurations are as the main job's manifest has them, with what `../h200/completion/` adds:
    // Qwen3-32B TP 1's seven large-M gate_up shapes (the main job's journal lacks them).
    let dense = gemm_synth::app::manifest::open(&root.join("measurements/h200/datasets.toml")).unwrap();
    for c in &dense.configs {
        let more = if c.name == "qwen3-32b-tp1" { 7 } else { 0 };
        assert_eq!(by_name(&c.name).shapes().len(), c.shapes().len() + more, "{}", c.name);
    }
    // The pool: the two TP-8 configurations at its end (the folds kept them out of the first eight).
    let pool: Vec<&str> = data.pool.iter().map(|&i| data.configs[i].name.as_str()).collect();
    assert_eq!(pool[pool.len() - 2..], ["llama-3.1-405b-tp8", "mistral-large-2411-tp8"]);
    assert_eq!(data.train_configs, 8);
}

/// `synth shapes --help` names every built-in model, and an unknown model's error lists them and offers
/// only options a command has (a spec file with --spec, or --shapes where there is no --spec).
#[test]
fn the_help_and_the_unknown_model_error_name_every_built_in_model() {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_synth")).args(["shapes", "--help"]).output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap().replace('\n', " ");
    let bench = std::process::Command::new(env!("CARGO_BIN_EXE_synth"))
        .args(["bench", "--model", "nope", "--out", "x.csv", "--dry-run", "--cu-num", "132"])
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    let e = String::from_utf8(bench.stderr).unwrap();
    for name in ModelSpec::builtin_names() {
        assert!(help.contains(name), "shapes --help does not name {name}");
        assert!(e.contains(name), "{e}");
    }
    assert!(e.contains("--shapes N:K"), "{e}");
}
