//! Hostile inputs to the runtime config files (`synth export`, and `synth run` on a rule over the triton
//! family), to `--backends` on data without such rows, to model spec sizes and to dataset names: each is
//! refused with one clear error, or handled, and what a command writes it reads back.

use std::path::Path;

use synth_core::catalog::triton::{tuner_space, TritonConfig, VLLM_DEFAULT};
use synth_core::catalog::Libtype;
use synth_core::rule::ir::build::{lit, m, n};
use synth_core::rule::{BinOp, CmpOp, Cond, Expr, Leaf, Node, Rule};

mod common;
use common::{strs, synth, text};

fn leaf(c: TritonConfig) -> Node {
    Node::Leaf(Leaf::of(Libtype::Triton, c.kernel_id(), 0))
}

fn write_rule(dir: &Path, rule: &Rule) -> String {
    let path = dir.join("rule.json");
    std::fs::write(&path, synth_core::rule::to_json(rule)).unwrap();
    path.display().to_string()
}

fn export(rule: &str, shapes: &str, max_m: u32, out: &Path) -> std::process::Output {
    let args = [
        "export",
        "vllm",
        "--rule",
        rule,
        "--shapes",
        shapes,
        "--device-name",
        "NVIDIA H200",
        "--max-m",
        &max_m.to_string(),
        "--out",
        out.to_str().unwrap(),
    ];
    synth(&strs(&args), &[])
}

fn vllm_name(n: u32, k: u32) -> String {
    format!("N={n},K={k},device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json")
}

/// 64-bit FNV-1a, in hex.
fn fnv1a64(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("fnv1a64:{h:016x}")
}

// ---------------------------------------------------------------------------------------------------
// The provenance sidecar holds a digest of the rule, not the rule: a large rule exports again.

#[test]
fn a_2000_branch_rule_exports_twice_into_one_directory() {
    let dir = tempfile::tempdir().unwrap();
    let space = tuner_space();
    let cmp = |op, lhs, rhs| Cond::Cmp { op, lhs, rhs };
    let branches: Vec<(Cond, Node)> = (0..2000i64)
        .map(|i| {
            let cond = Cond::And(vec![
                cmp(CmpOp::Eq, n(), lit(128 * (i + 8))),
                cmp(CmpOp::Le, m(), lit(64 + i)),
                Cond::Not(Box::new(cmp(CmpOp::Gt, m(), lit(100_000 + i)))),
            ]);
            (cond, leaf(space[i as usize % 64]))
        })
        .collect();
    let rule = Rule::new(Node::Chain { branches, otherwise: Box::new(leaf(VLLM_DEFAULT)) });
    let rule_path = write_rule(dir.path(), &rule);
    let rule_bytes = std::fs::read(&rule_path).unwrap();
    assert!(rule_bytes.len() > 1 << 20, "the rule alone is over 1 MiB: {} bytes", rule_bytes.len());
    let out = dir.path().join("out");
    let first = export(&rule_path, "1024:7168,2048:7168", 4096, &out);
    assert!(first.status.success(), "{}", text(&first));
    let side = std::fs::read(out.join("synth-export.provenance.json")).unwrap();
    let second = export(&rule_path, "1024:7168,2048:7168", 4096, &out);
    assert!(second.status.success(), "the second export reads the first one's sidecar back: {}", text(&second));
    assert_eq!(
        std::fs::read(out.join("synth-export.provenance.json")).unwrap(),
        side,
        "the same export, the same bytes"
    );
    let doc: serde_json::Value = serde_json::from_slice(&side).unwrap();
    assert_eq!(doc["rule_digest"], fnv1a64(&rule_bytes), "the digest of the rule as written");
    assert_eq!(doc["rule_leaves"], 2001);
    assert!(doc.get("rule").is_none() && side.len() < 16 << 10, "{} bytes", side.len());
    // The files return the rule's pick: N=1024 is branch 0 (M <= 64), N=2048 branch 8 (M <= 72).
    for (nn, branch) in [(1024u32, 0usize), (2048, 8)] {
        let file = std::fs::read_to_string(out.join(vllm_name(nn, 7168))).unwrap();
        for mm in 1..=4096u32 {
            let want = if mm <= 64 + branch as u32 { space[branch % 64] } else { VLLM_DEFAULT };
            assert_eq!(common::runtime_lookup(&file, mm), want.name(), "N={nn} M={mm}");
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Only the keys the lookup needs, at most MAX_KEYS per file and MAX_EXPORT_BYTES in all.

/// A: M mod 32 below 16; else B (runs of 16 along M).
fn periodic_rule() -> (Rule, TritonConfig, TritonConfig) {
    let (a, b) = (tuner_space()[0], tuner_space()[1]);
    let div = Expr::bin(BinOp::Div, m(), lit(32));
    let rem = Expr::bin(BinOp::Sub, m(), Expr::bin(BinOp::Mul, div, lit(32)));
    let rule = Rule::new(Node::Chain {
        branches: vec![(Cond::Cmp { op: CmpOp::Lt, lhs: rem, rhs: lit(16) }, leaf(a))],
        otherwise: Box::new(leaf(b)),
    });
    (rule, a, b)
}

#[test]
fn export_writes_the_fewest_keys_and_bounds_keys_and_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (rule, a, b) = periodic_rule();
    let rule_path = write_rule(dir.path(), &rule);
    let out = dir.path().join("out");

    // 2^20 M values: 65,537 runs (1..=15, then 16 each, then M = 2^20 alone), each needing a key; refused,
    // nothing written.
    let o = export(&rule_path, "1536:7168", 1 << 20, &out);
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains("layer N=1536 K=7168: the rule's pick changes 65536 times"), "{msg}");
    assert!(msg.contains("needs 65537 keys") && msg.contains("at most 4096 keys"), "{msg}");
    assert!(!out.exists(), "nothing may be written");

    // 4,096 M values: 257 runs, one key each (the ends of the runs would be 512), exact at every M.
    let o = export(&rule_path, "1536:7168", 4096, &out);
    assert!(o.status.success(), "{}", text(&o));
    let file = std::fs::read_to_string(out.join(vllm_name(1536, 7168))).unwrap();
    let doc: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&file).unwrap();
    assert_eq!(doc.len(), 257, "one key per run");
    for mm in 1..=4096u32 {
        let want = if (mm % 32) < 16 { a } else { b };
        assert_eq!(common::runtime_lookup(&file, mm), want.name(), "M={mm}");
    }
    assert!(text(&o).contains(": 257 keys, 2 configs"), "{}", text(&o));

    // 4,096 keys per file (4,096 runs up to M = 65,535) fit; 80 such files are over the bytes of one export.
    let shapes: Vec<String> = (1..=80).map(|i| format!("{}:7168", 128 * i)).collect();
    let many = dir.path().join("many");
    let o = export(&rule_path, &shapes.join(","), 65535, &many);
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains("over the 32 MiB one export writes") && msg.contains("of 80 layers"), "{msg}");
    assert!(!many.exists(), "nothing may be written");
    let o = export(&rule_path, &shapes[..2].join(","), 65535, &many);
    assert!(o.status.success() && text(&o).contains(": 4096 keys, 2 configs"), "{}", text(&o));
}

// ---------------------------------------------------------------------------------------------------
// `--backends` naming a backend the data has no row of: one error, as the multi-model job gives.

#[test]
fn a_backend_without_rows_in_the_data_is_refused_naming_it_and_the_data() {
    let data = "measurements/h200/qwen3-32b-tp2.csv";
    for (args, backend) in [
        (vec!["compare", "--dataset", data, "--backends", "ck,cktile"], "cktile"),
        (vec!["compare", "--dataset", data, "--backends", "ck,triton"], "triton"),
        (vec!["run", "--dataset", data, "--backends", "triton,ck", "--out", "/nonexistent/never"], "triton"),
    ] {
        let o = synth(&strs(&args), &[]);
        let msg = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {msg}");
        let want = format!("{data} (");
        assert!(msg.contains(&want) && msg.contains(&format!("has no usable {backend} row")), "{args:?}: {msg}");
        assert!(msg.contains(&format!("--backends names {backend}")), "{args:?}: {msg}");
        assert!(!msg.contains(&format!("oracle[{backend}]")), "{args:?}: {msg}");
    }
}

// ---------------------------------------------------------------------------------------------------
// `synth run --backends triton`: the runtime files follow export's rules.

const HEADER: &str = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio,device,status";

/// A triton journal of Qwen3-32B TP=2's four layers on `device`: small tiles fast at small M, the vLLM
/// default fast at large M.
fn triton_journal(path: &Path, device: &str) {
    let small = tuner_space()[0];
    let mut text = format!("{HEADER}\n");
    for (nn, kk) in [(5120u32, 5120u32), (5120, 4096), (25600, 5120), (5120, 12800)] {
        for mm in [1u32, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192] {
            for (c, us) in [(small, 10.0 + f64::from(mm) * 0.02), (VLLM_DEFAULT, 14.0 + f64::from(mm) * 0.01)] {
                let (id, name) = (c.kernel_id(), c.name());
                text.push_str(&format!("sm_90,132,{mm},{nn},{kk},triton,{id},0,{us},{name},1,1,0.0,{device},ok\n"));
            }
        }
    }
    std::fs::write(path, text).unwrap();
}

fn run_triton(journal: &Path, out: &Path) -> std::process::Output {
    let args = ["run", "--dataset", journal.to_str().unwrap(), "--backends", "triton", "--sample-m", "6"];
    let mut args = strs(&args);
    args.extend(strs(&["--out", out.to_str().unwrap()]));
    synth(&args, &[])
}

#[test]
fn a_device_name_no_file_name_holds_leaves_out_only_the_runtime_files() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.csv");
    triton_journal(&journal, "NVIDIA H200 Grün");
    let out = dir.path().join("out");
    let o = run_triton(&journal, &out);
    let msg = text(&o);
    assert!(o.status.success(), "{msg}");
    assert!(out.join("rule.json").is_file() && out.join("select_kernel.py").is_file(), "{msg}");
    assert!(!out.join("vllm").exists() && !out.join("sglang").exists(), "{msg}");
    assert!(msg.contains("vLLM/SGLang config files: not written (the rule's other files are)"), "{msg}");
    assert!(msg.contains("\"NVIDIA H200 Grün\": expected the GPU name"), "{msg}");
    assert!(msg.contains("synth export vllm|sglang"), "{msg}");
}

#[test]
fn run_never_replaces_a_runtime_file_no_export_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.csv");
    triton_journal(&journal, "NVIDIA H200");
    let out = dir.path().join("out");
    let shipped = out.join("vllm").join(vllm_name(5120, 5120));
    std::fs::create_dir_all(shipped.parent().unwrap()).unwrap();
    std::fs::write(&shipped, "{\"1\": {}}").unwrap();
    let o = run_triton(&journal, &out);
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains("no earlier synth export wrote it") && msg.contains("N=5120,K=5120"), "{msg}");
    assert_eq!(std::fs::read_to_string(&shipped).unwrap(), "{\"1\": {}}");
    assert!(!out.join("rule.json").exists(), "nothing was written: {msg}");
    // Its own files a run replaces: twice in a row, then the layer's file holds the rule's picks.
    std::fs::remove_file(&shipped).unwrap();
    for _ in 0..2 {
        let o = run_triton(&journal, &out);
        assert!(o.status.success(), "{}", text(&o));
    }
    let side: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("vllm/synth-export.provenance.json")).unwrap()).unwrap();
    assert_eq!(side["files"].as_array().unwrap().len(), 4, "{side}");
    assert!(side.get("earlier_files").is_none(), "{side}");
}

// ---------------------------------------------------------------------------------------------------
// Errors name the dataset file the user gave, even when its bytes are an embedded journal's.

#[test]
fn a_copy_of_an_embedded_journal_is_named_by_its_path_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bytes =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("measurements/h200/qwen3-32b-tp2.csv")).unwrap();
    let (one, two) = (dir.path().join("one.csv"), dir.path().join("two.csv"));
    std::fs::write(&one, &bytes).unwrap();
    std::fs::write(&two, &bytes).unwrap();
    let o = synth(&strs(&["compare", "--dataset", one.to_str().unwrap(), "--dataset", two.to_str().unwrap()]), &[]);
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains("two.csv") && msg.contains("is also measured in") && msg.contains("one.csv"), "{msg}");
    assert!(!msg.contains("measurements/h200"), "{msg}");
}

// ---------------------------------------------------------------------------------------------------
// Model spec sizes: a product that overflows is the "does not fit in 32 bits" error, never a wrapped value.

#[test]
fn an_overflowing_mla_product_is_refused_not_wrapped() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("mla.toml");
    // heads · (nope + rope) = (2^32 - 1) · (2^32 + 2) = 2^64 + 2^32 - 2: wrapped to 64 bits, 2^32 - 2, which
    // TP 3 would split into q_proj N = 1431655764.
    std::fs::write(
        &spec,
        "name = 'big'\nhidden = 1024\nintermediate = 3072\nheads = 4294967295\nlayers = 2\n[mla]\n\
         kv_lora_rank = 512\nqk_nope_head_dim = 2147483649\nqk_rope_head_dim = 2147483649\nv_head_dim = 128\n",
    )
    .unwrap();
    let o = synth(&strs(&["shapes", "--spec", spec.to_str().unwrap(), "--tp", "3"]), &[]);
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains("big: q_proj dimension 6148914692668172970 at TP 3 does not fit in 32 bits"), "{msg}");
    assert!(!msg.contains("1431655764"), "{msg}");
}
