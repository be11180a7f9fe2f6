//! Catalog, name grammars and shape derivation, checked against the shipped data files and hand-computed
//! expectations.

use std::collections::BTreeSet;
use synth_core::catalog::names::{format_cktile, format_legacy, format_legacy_old, parse_name, Grammar, ParsedName};

use synth_core::catalog::{Catalog, InstanceParams, NameError, CKTILE_FILE, LEGACY_FILE};

const LEGACY_CSV: &str = include_str!("../ck-instances/ck_a8w8_blockscale_instances.csv");
const CKTILE_CSV: &str = include_str!("../ck-instances/ck_a8w8_blockscale_cktile_instances.csv");
const MI300X: &str = include_str!("../measurements/mi300x/a8w8_blockscale_tuned_gemm_qwen3_vl_32b.csv");

fn cat() -> Catalog {
    Catalog::embedded()
}

#[test]
fn embedded_catalog_shape() {
    let c = cat();
    assert_eq!(c.legacy_candidates().len(), 19);
    assert_eq!(c.legacy_candidates().iter().map(|i| i.id).collect::<Vec<_>>(), (0..19).collect::<Vec<_>>());
    assert_eq!(c.default_alias, 7);
    assert_eq!(c.default_instance().id, 7);
    assert_eq!(c.legacy_by_id(-1).unwrap().name, c.legacy_by_id(7).unwrap().name);
    assert!(c.legacy_by_id(19).is_none());
    assert!(c.legacy_by_id(-2).is_none());
    assert_eq!(c.cktile_for_arch("gfx942").count(), 9);
    assert_eq!(c.cktile_for_arch("gfx95x").count(), 34);
    assert_eq!(c.cktile_arch_for_gfx("gfx950"), Some("gfx95x"));
    assert_eq!(c.cktile_arch_for_gfx("gfx942"), Some("gfx942"));
    assert_eq!(c.cktile_arch_for_gfx("gfx90a"), None);
    // Reading the same files from a directory gives the same catalog.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ck-instances");
    let loaded = Catalog::load_dir(&dir).unwrap();
    assert_eq!(loaded.legacy, c.legacy);
    assert_eq!(loaded.cktile, c.cktile);
}

#[test]
fn compute_and_memory_friendly_split() {
    // REFERENCE: ids 0-3 are 64-128 row v3 tiles, ids 4-18 are 16-64 row v1 tiles.
    for inst in cat().legacy_candidates() {
        let p = inst.legacy_params().unwrap();
        if inst.id <= 3 {
            assert_eq!(p.pipeline, 3, "{}", inst.name);
            assert!(p.m_per_block >= 64);
        } else {
            assert_eq!(p.pipeline, 1, "{}", inst.name);
            assert!(p.m_per_block <= 64);
        }
    }
}

#[test]
fn every_catalog_name_round_trips_in_its_grammar() {
    let c = cat();
    for inst in c.legacy_candidates().iter().chain(&c.cktile) {
        let parsed = parse_name(&inst.name).unwrap();
        assert_eq!(parsed.format(), inst.name);
        match (&parsed, &inst.params) {
            (ParsedName::Legacy(p), InstanceParams::Ck(q)) => {
                assert_eq!(p, q);
                assert_eq!(format_legacy(q), inst.name);
            }
            (ParsedName::CkTile(p), InstanceParams::Cktile(q)) => {
                assert_eq!(p, q);
                assert_eq!(format_cktile(q), inst.name);
            }
            _ => panic!("grammar does not match kind for {}", inst.name),
        }
        let resolved = c.resolve_name(&inst.name).unwrap();
        assert_eq!(resolved.params, inst.params);
    }
}

#[test]
fn every_legacy_instance_in_the_older_grammar_resolves_back() {
    let c = cat();
    for inst in c.legacy_candidates() {
        let old = format_legacy_old(inst.legacy_params().unwrap());
        assert_eq!(old.split('_').count(), 13);
        let parsed = parse_name(&old).unwrap();
        assert_eq!(parsed.grammar(), Grammar::LegacyOld);
        assert_eq!(parsed.format(), old);
        assert_eq!(c.resolve_name(&old).unwrap().id, inst.id, "{old}");
    }
}

#[test]
fn cktile_aliases_and_suffix() {
    let c = cat();
    // gfx95x ids 8 and 9 are the same kernel; resolving the name gives the first (id 8).
    let n8 = &c.cktile_by_id("gfx95x", 8).unwrap().name;
    assert_eq!(n8, &c.cktile_by_id("gfx95x", 9).unwrap().name);
    let r = c.resolve_name(n8).unwrap();
    assert_eq!((r.arch.as_deref(), r.id), (Some("gfx95x"), 8));
    let aqrm = "a8w8_blockscale_cktile_192x256x128_4x2x1_16x16x128_intrawave_0x1x0_1_aqrm";
    let ParsedName::CkTile(p) = parse_name(aqrm).unwrap() else { panic!() };
    assert!(p.aq_row_major);
    assert_eq!((p.m_tile, p.n_tile, p.k_tile, p.m_warp, p.n_warp, p.block_per_cu), (192, 256, 128, 4, 2, 1));
    assert!(!p.tiled_mma_permute_n && p.transpose_c && !p.use_persistent_kernel);
    assert_eq!(c.resolve_name(aqrm).unwrap().id, 12);
    // The gfx942 default repeats gfx942 candidate 0.
    let d = c.cktile_by_id("gfx942", -1).unwrap();
    assert_eq!(c.resolve_name(&d.name).unwrap().id, 0);
}

/// The six instance names of the published GEAK rule, in the older grammar, with the ids read off the
/// catalog CSV by hand (tile, XDL shape, transfer fields and pipeline compared field by field).
#[test]
fn geak_blog_names_resolve_to_hand_checked_ids() {
    let c = cat();
    let cases = [
        ("a8w8_blockscale_1x128x128_256x16x64x256_16x16_16x16_16x16x1_16x16x1_1x16x1x16_4_1x1_intrawave_v1", 8),
        ("a8w8_blockscale_1x128x128_256x32x256x128_16x16_32x32_8x32x1_8x32x1_1x32x1x8_8_1x1_intrawave_v1", 9),
        ("a8w8_blockscale_1x128x128_256x128x128x128_16x16_32x32_8x32x1_8x32x1_1x32x1x8_8_1x1_intrawave_v3", 0),
        ("a8w8_blockscale_1x128x128_256x64x64x256_16x16_32x32_16x16x1_16x16x1_1x32x1x8_8_1x1_intrawave_v1", 18),
        ("a8w8_blockscale_1x128x128_256x64x128x128_16x16_32x32_8x32x1_8x32x1_1x32x1x8_8_1x1_intrawave_v3", 2),
        ("a8w8_blockscale_1x128x128_256x128x64x128_16x16_32x32_8x32x1_8x32x1_1x32x1x8_8_1x1_intrawave_v3", 1),
    ];
    for (name, id) in cases {
        assert_eq!(parse_name(name).unwrap().grammar(), Grammar::LegacyOld);
        assert_eq!(c.resolve_name(name).unwrap().id, id, "{name}");
    }
    // The rule file itself, as published, names exactly these six.
    let rule = include_str!("../assets/rules/geak_blog_rule.cpp");
    let found: Vec<&str> = rule
        .split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
        .filter(|t| t.starts_with("a8w8_blockscale_"))
        .collect();
    assert_eq!(found, cases.iter().map(|c| c.0).collect::<Vec<_>>());
}

#[test]
fn older_name_matching_several_instances_is_ambiguous() {
    // Two catalog entries that differ only in MXdlPerWave x NXdlPerWave make the older name ambiguous.
    let mut text = LEGACY_CSV.to_string();
    let extra = "19,a8w8_blockscale_1x128x128_256x128x128x128_16x16_32x32_4x1_8x32x1_8x32x1_1x32x1x8_8_1x1_intrawave_v3,256,1,128,128,128,128,128,16,16,32,32,4,1,8x32x1,8x32x1,1,1,1x32x1x8,8,Intrawave,3,candidate\n";
    text.push_str(extra);
    let c = Catalog::from_csv_text(&text, LEGACY_FILE, CKTILE_CSV, CKTILE_FILE).unwrap();
    let old = "a8w8_blockscale_1x128x128_256x128x128x128_16x16_32x32_8x32x1_8x32x1_1x32x1x8_8_1x1_intrawave_v3";
    let e = c.resolve_name(old).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, NameError::Ambiguous { ref matches, .. } if matches.len() == 2), "{msg}");
    assert!(msg.contains("id 0 (") && msg.contains("id 19 ("), "{msg}");
    assert!(msg.contains(old));
}

#[test]
fn every_kernel_name_in_the_mi300x_table_resolves_and_round_trips() {
    let c = cat();
    let mut rdr = csv::Reader::from_reader(MI300X.as_bytes());
    let h = rdr.headers().unwrap().clone();
    let name_col = h.iter().position(|x| x == "kernelName").unwrap();
    let id_col = h.iter().position(|x| x == "kernelId").unwrap();
    let mut rows = 0;
    for rec in rdr.records() {
        let rec = rec.unwrap();
        let name = &rec[name_col];
        let inst = c.resolve_name(name).unwrap();
        assert_eq!(inst.id.to_string(), &rec[id_col]);
        assert_eq!(parse_name(name).unwrap().format(), name);
        rows += 1;
    }
    assert_eq!(rows, 8172);
}

fn field_err(name: &str) -> (usize, String) {
    match parse_name(name).unwrap_err() {
        e @ NameError::Field { .. } => {
            let NameError::Field { field, .. } = &e else { unreachable!() };
            (*field, e.to_string())
        }
        e => panic!("expected a field error for {name}, got {e}"),
    }
}

const ID8: &str =
    "a8w8_blockscale_1x128x128_256x16x64x256_16x16_16x16_1x1_16x16x1_16x16x1_1x16x1x16_4_1x1_intrawave_v1";

#[test]
fn malformed_names_name_the_field() {
    // Each field class: x-joined numbers with the wrong count, non-numbers, zero, scheduler, pipeline.
    let short = ID8.replace("256x16x64x256", "256x16x64");
    let (f, msg) = field_err(&short);
    assert_eq!(f, 4);
    assert!(
        msg.contains("field 4 (BlockSize x MPerBlock x NPerBlock x KPerBlock) expected 4 positive numbers joined by 'x', got \"256x16x64\""),
        "{msg}"
    );
    assert!(msg.contains(&short));
    assert_eq!(field_err(&ID8.replace("_1x128x128_", "_1x128xQ_")).0, 3);
    assert_eq!(field_err(&ID8.replace("_16x16_16x16_1x1_", "_16_16x16_1x1_")).0, 5);
    assert_eq!(field_err(&ID8.replace("_1x1_16x16x1_", "_1x0_16x16x1_")).0, 7);
    assert_eq!(field_err(&ID8.replace("_1x16x1x16_", "_1x16x1_")).0, 10);
    assert_eq!(field_err(&ID8.replace("_4_1x1_", "_four_1x1_")).0, 11);
    assert_eq!(field_err(&ID8.replace("_4_1x1_", "_4_1x1x1_")).0, 12);
    let (f, msg) = field_err(&ID8.replace("intrawave", "Intrawave"));
    assert_eq!(f, 13);
    assert!(msg.contains("one of intrawave, interwave"), "{msg}");
    let (f, msg) = field_err(&ID8.replace("_v1", "_v9"));
    assert_eq!(f, 14);
    assert!(msg.contains("pipeline"), "{msg}");
    // Older grammar: positions shift by one after field 6.
    let old_bad = "a8w8_blockscale_1x128x128_256x16x64x256_16x16_16x16_16x16x1_16x16x1_1x16x1x16_4_1x1_intrawave_v0";
    assert_eq!(field_err(old_bad).0, 13);
    // CK-tile fields.
    let ck = "a8w8_blockscale_cktile_128x128x128_1x4x1_16x16x64_intrawave_0x1x0_1";
    assert_eq!(field_err(&ck.replace("0x1x0", "0x2x0")).0, 8);
    assert_eq!(field_err(&ck.replace("_1x4x1_", "_1x4_")).0, 5);
    assert_eq!(field_err(&format!("{ck}_aqrx")).0, 10);
    assert_eq!(field_err(&ck.replace("_0x1x0_1", "_0x1x0_0")).0, 9);
}

#[test]
fn grammar_level_errors() {
    for bad in ["", "gemm_1x2", "a8w8_blockscale_1x128x128", "a8w8_blockscale_cktile_128x128x128_1x4x1"] {
        let e = parse_name(bad).unwrap_err();
        assert!(matches!(e, NameError::Grammar { .. }), "{bad}: {e}");
        assert!(e.to_string().contains(&format!("\"{bad}\"")));
    }
}

#[test]
fn unknown_names_show_the_differing_field() {
    let c = cat();
    let unknown = ID8.replace("256x16x64x256", "256x16x64x512");
    let e = c.resolve_name(&unknown).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, NameError::Unknown { .. }));
    assert!(msg.contains(&unknown), "{msg}");
    assert!(msg.contains("field 4 (BlockSize x MPerBlock x NPerBlock x KPerBlock) is \"256x16x64x512\""), "{msg}");
    assert!(msg.contains("id 8"), "{msg}");
    let ck = "a8w8_blockscale_cktile_128x128x128_1x4x1_16x16x64_intrawave_0x1x0_9";
    let msg = c.resolve_name(ck).unwrap_err().to_string();
    assert!(msg.contains("field 9 (BlockPerCu) is \"9\""), "{msg}");
}

#[test]
fn catalog_rows_must_match_their_names() {
    // Change WAVE_MAP_M of id 0 (line 2) from 2 to 1: the name still says 2x2.
    let bad = LEGACY_CSV.replacen("16,16,32,32,2,2,8x32x1", "16,16,32,32,1,2,8x32x1", 1);
    let e = Catalog::from_csv_text(&bad, LEGACY_FILE, CKTILE_CSV, CKTILE_FILE).unwrap_err();
    assert_eq!(e.line, Some(2));
    assert_eq!(e.column.as_deref(), Some("WAVE_MAP_M"));
    assert!(e.to_string().starts_with("ck_a8w8_blockscale_instances.csv:2: column WAVE_MAP_M: value \"1\""), "{e}");
    // A CK-tile row whose BlockPerCu contradicts its name (gfx942 id 2 is on line 4).
    let bad =
        CKTILE_CSV.replacen("16,16,64,Intrawave,0,1,0,2,0,candidate", "16,16,64,Intrawave,0,1,0,3,0,candidate", 1);
    let e = Catalog::from_csv_text(LEGACY_CSV, LEGACY_FILE, &bad, CKTILE_FILE).unwrap_err();
    assert_eq!((e.line, e.column.as_deref()), (Some(4), Some("BlockPerCu")), "{e}");
    // A gap in the candidate ids.
    let bad: String = LEGACY_CSV.lines().filter(|l| !l.starts_with("5,")).map(|l| format!("{l}\n")).collect();
    let e = Catalog::from_csv_text(&bad, LEGACY_FILE, CKTILE_CSV, CKTILE_FILE).unwrap_err();
    assert!(e.to_string().contains("found 6 where 5 was expected"), "{e}");
    // A default that aliases no candidate.
    let bad = LEGACY_CSV.replace(
        "-1,a8w8_blockscale_1x128x128_256x16x128x256_16x16_16x16_1x2",
        "-1,a8w8_blockscale_1x128x128_256x16x128x512_16x16_16x16_1x2",
    );
    let bad = bad.replace(
        "256,1,128,128,16,128,256,16,16,16,16,1,2,16x16x1,16x16x1,1,2,1x16x1x16,8,Intrawave,1,default",
        "256,1,128,128,16,128,512,16,16,16,16,1,2,16x16x1,16x16x1,1,2,1x16x1x16,8,Intrawave,1,default",
    );
    let e = Catalog::from_csv_text(&bad, LEGACY_FILE, CKTILE_CSV, CKTILE_FILE).unwrap_err();
    assert_eq!(e.line, Some(21), "{e}");
    assert!(e.to_string().contains("alias"), "{e}");
    // Malformed name in the table.
    let bad = LEGACY_CSV.replacen("_intrawave_v3,256", "_intrawave_3,256", 1);
    let e = Catalog::from_csv_text(&bad, LEGACY_FILE, CKTILE_CSV, CKTILE_FILE).unwrap_err();
    assert_eq!((e.line, e.column.as_deref()), (Some(2), Some("kernelName")));
    assert!(e.to_string().contains("field 14 (pipeline)"), "{e}");
}

// ---------------------------------------------------------------------------------------------------------
// Shapes

use synth_core::shapes::{
    m_aiter_grid, m_dataset_grid, m_decode, m_log_uniform, m_pow2, sample_m, ModelSpec, ShapeError,
};

fn nk(spec: &ModelSpec, tp: u32) -> Vec<(String, u32, u32)> {
    spec.layers(tp).unwrap().into_iter().map(|l| (l.name, l.n, l.k)).collect()
}

#[test]
fn qwen3_32b_tp2_matches_the_reference_table() {
    let spec = ModelSpec::builtin("qwen3-32b").unwrap();
    assert_eq!(
        (spec.hidden, spec.intermediate, spec.heads, spec.kv_heads, spec.head_dim, spec.num_layers),
        (5120, 25600, 64, 8, 128, 64)
    );
    assert_eq!(
        nk(&spec, 2),
        vec![
            ("qkv_proj".to_string(), 5120, 5120),
            ("o_proj".to_string(), 5120, 4096),
            ("gate_up_proj".to_string(), 25600, 5120),
            ("down_proj".to_string(), 5120, 12800),
        ]
    );
    // TP=1: qkv (64+16)*128 = 10240, o K = 8192, gate_up 51200, down K 25600.
    assert_eq!(
        nk(&spec, 1).iter().map(|l| (l.1, l.2)).collect::<Vec<_>>(),
        vec![(10240, 5120), (5120, 8192), (51200, 5120), (5120, 25600)]
    );
}

#[test]
fn qwen3_32b_at_tp_2_4_8_gives_the_twelve_pairs_of_the_mi300x_table() {
    let spec = ModelSpec::builtin("qwen3-32b").unwrap();
    let derived: std::collections::BTreeSet<(u32, u32)> =
        [2, 4, 8].iter().flat_map(|&tp| spec.layers(tp).unwrap()).map(|l| (l.n, l.k)).collect();
    let mut rdr = csv::Reader::from_reader(MI300X.as_bytes());
    let measured: std::collections::BTreeSet<(u32, u32)> =
        rdr.records().map(|r| r.unwrap()).map(|r| (r[3].parse().unwrap(), r[4].parse().unwrap())).collect();
    assert_eq!(measured.len(), 12);
    assert_eq!(derived, measured);
}

#[test]
fn other_builtin_models() {
    let llama = ModelSpec::builtin("llama-3.1-8b").unwrap();
    // (32+16)*128 = 6144; 2*14336 = 28672.
    assert_eq!(
        nk(&llama, 1).iter().map(|l| (l.1, l.2)).collect::<Vec<_>>(),
        vec![(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)]
    );
    let qwen72 = ModelSpec::builtin("qwen2.5-72b").unwrap();
    // TP 8: (64+16)*128/8 = 1280; o K = 64*128/8 = 1024; gate_up 2*29568/8 = 7392; down K 3696.
    assert_eq!(
        nk(&qwen72, 8).iter().map(|l| (l.1, l.2)).collect::<Vec<_>>(),
        vec![(1280, 8192), (8192, 1024), (7392, 8192), (8192, 3696)]
    );
    assert!(ModelSpec::builtin("llama-3.1-70b").is_ok());
    let e = ModelSpec::builtin("gpt-2").unwrap_err().to_string();
    assert!(e.contains("gpt-2") && e.contains("qwen3-32b"), "{e}");
}

#[test]
fn tp_must_divide_heads_kv_heads_and_intermediate() {
    let spec = ModelSpec::builtin("qwen3-32b").unwrap();
    let e = spec.layers(3).unwrap_err();
    assert!(matches!(e, ShapeError::TpNotDivisor { value: 64, .. }), "{e}");
    assert!(e.to_string().contains("attention head count (64)"), "{e}");
    // More ranks than KV heads: one KV head per rank, replicated (vLLM): qkv N = (64/16 + 2) x 128 = 768.
    assert_eq!(nk(&spec, 16)[0].1, 768);
    let wide = ModelSpec::parse(
        "name='wide'\nhidden=1024\nintermediate=6144\nheads=24\nkv_heads=8\nhead_dim=128\nlayers=2\n",
        "wide.toml",
    )
    .unwrap();
    let e = wide.layers(12).unwrap_err();
    assert!(matches!(e, ShapeError::TpKvHeads { kv: 8, tp: 12, .. }), "{e}");
    assert!(e.to_string().contains("neither a divisor nor a multiple of the KV head count (8)"), "{e}");
    let odd = ModelSpec::parse(
        "name='odd'\nhidden=1024\nintermediate=100\nheads=8\nkv_heads=8\nhead_dim=128\nlayers=2\n",
        "odd.toml",
    )
    .unwrap();
    let e = odd.layers(8).unwrap_err();
    assert!(e.to_string().contains("intermediate size (100)"), "{e}");
    assert!(matches!(spec.layers(0), Err(ShapeError::ZeroTp)));
}

#[test]
fn spec_files_load_and_report_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.toml");
    std::fs::write(&path, "name='m'\nhidden=2048\nintermediate=8192\nheads=16\nkv_heads=4\nhead_dim=128\nlayers=24\n")
        .unwrap();
    let spec = ModelSpec::load(&path).unwrap();
    assert_eq!(
        nk(&spec, 4).iter().map(|l| (l.1, l.2)).collect::<Vec<_>>(),
        vec![(768, 2048), (2048, 512), (4096, 2048), (2048, 2048)]
    );
    std::fs::write(&path, "name='m'\nhidden=2048\nintermediate=8192\nheads=16\nhead_dim=128\nlayers=24\n").unwrap();
    let e = ModelSpec::load(&path).unwrap_err().to_string();
    assert!(e.contains("m.toml") && e.contains("kv_heads"), "{e}");
    std::fs::write(&path, "name='m'\nhidden=0\nintermediate=8192\nheads=16\nkv_heads=4\nhead_dim=128\nlayers=24\n")
        .unwrap();
    let e = ModelSpec::load(&path).unwrap_err().to_string();
    assert!(e.contains("`hidden` must be a positive integer"), "{e}");
    assert!(ModelSpec::load(&dir.path().join("absent.toml")).unwrap_err().to_string().contains("absent.toml"));
}

#[test]
fn m_set_sizes() {
    let grid = m_dataset_grid();
    assert_eq!(grid.len(), 80);
    assert!(grid.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(
        (grid[0], grid[4], grid[19], grid[20], grid[43], grid[44], grid[67], grid[68], grid[79]),
        (1, 16, 256, 288, 1024, 1152, 4096, 5120, 16384)
    );
    // AITER fine grid to 4096: 256/16 + (1024-256)/32 + (4096-1024)/64 = 16 + 24 + 48.
    let aiter = m_aiter_grid(4096);
    assert_eq!(aiter.len(), 88);
    assert_eq!((aiter[0], aiter[15], aiter[16], aiter[39], aiter[40], aiter[87]), (16, 256, 288, 1024, 1088, 4096));
    // Beyond 4096 in steps of 128: 8192 adds (8192-4096)/128 = 32.
    assert_eq!(m_aiter_grid(8192).len(), 120);
    assert!(m_aiter_grid(8).is_empty());
    assert_eq!(m_pow2(16384).len(), 15);
    assert_eq!(m_pow2(1000).last(), Some(&512));
    assert_eq!(m_decode(), vec![1, 2, 4, 8]);
}

#[test]
fn log_uniform_is_seeded_distinct_and_in_range() {
    let a = m_log_uniform(16, 1, 16384, 42);
    assert_eq!(a, m_log_uniform(16, 1, 16384, 42));
    assert_ne!(a, m_log_uniform(16, 1, 16384, 43));
    assert_eq!(a.len(), 16);
    assert!(a.windows(2).all(|w| w[0] < w[1]));
    assert!(a.iter().all(|&m| (1..=16384).contains(&m)));
    // Log-uniform over [1, 2^20]: about half the draws fall below sqrt(2^20) = 1024 (far more than the
    // 1/1024 share a uniform draw would put there; repeats among the small values lower the distinct count).
    let many = m_log_uniform(2000, 1, 1 << 20, 1);
    let below = many.iter().filter(|&&m| m < 1024).count();
    assert!(below < 1024 && below > 300, "{below}");
}

#[test]
fn sample_m_picks_one_value_per_log2_stratum() {
    let grid = m_dataset_grid();
    for seed in 0..20 {
        let s = sample_m(&grid, 10, seed);
        assert_eq!(s.len(), 10);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert!(s.iter().all(|m| grid.contains(m)));
        // Strata of width log2(16384)/10 = 1.4 over [0, 14]: every stratum of the grid is non-empty, so
        // each holds exactly one pick.
        let mut per = [0; 10];
        for &m in &s {
            per[(((m as f64).log2() / 1.4).floor() as usize).min(9)] += 1;
        }
        assert_eq!(per, [1; 10], "seed {seed}: {s:?}");
        assert_eq!(s, sample_m(&grid, 10, seed));
    }
    assert_ne!(sample_m(&grid, 10, 1), sample_m(&grid, 10, 2));
    assert_eq!(sample_m(&[5, 5, 9], 10, 0), vec![5, 9]);
    assert!(sample_m(&grid, 0, 0).is_empty());
}

#[test]
fn instance_listing_marks_aliases() {
    use gemm_synth::app::cmd::catalog::{format_csv, format_table, listing, KindFilter};
    let c = cat();
    let legacy = listing(&c, KindFilter::Legacy);
    assert_eq!(legacy.len(), 20);
    let default = legacy.iter().find(|r| r.id == -1).unwrap();
    assert_eq!((default.alias_of, default.role.as_str(), default.tile.as_str()), (Some(7), "default", "16x128x256"));
    let tile = listing(&c, KindFilter::Cktile);
    assert_eq!(tile.len(), 43);
    let id9 = tile.iter().find(|r| r.arch.as_deref() == Some("gfx95x") && r.id == 9).unwrap();
    assert_eq!(id9.alias_of, Some(8));
    assert_eq!(listing(&c, KindFilter::All).len(), 63);
    let csv_text = format_csv(&legacy).unwrap();
    assert_eq!(csv_text.lines().count(), 21);
    assert!(csv_text.contains(&format!("ck,,-1,default,7,16x128x256,{}\n", c.legacy_by_id(7).unwrap().name)));
    let table = format_table(&legacy);
    // Aligned: the name column starts at the same offset on every line.
    let offsets: BTreeSet<usize> = table.lines().map(|l| l.find("a8w8").or_else(|| l.find("name")).unwrap()).collect();
    assert_eq!(offsets.len(), 1, "{table}");
}

#[test]
fn shapes_command_m_sets() {
    use gemm_synth::app::cmd::shapes::{m_values, MSet};
    assert_eq!(m_values(MSet::Dataset, 1024, 10, 0).len(), 44);
    assert_eq!(m_values(MSet::Forty, 16384, 10, 5), sample_m(&m_dataset_grid(), 10, 5));
    assert!(m_values(MSet::Forty, 256, 10, 5).iter().all(|&m| m <= 256));
    assert_eq!(m_values(MSet::Aiter, 4096, 10, 0).len(), 88);
    assert_eq!(m_values(MSet::Decode, 4096, 10, 0), vec![1, 2, 4, 8]);
    assert_eq!(m_values(MSet::LogUniform, 4096, 12, 9), m_log_uniform(12, 1, 4096, 9));
}
