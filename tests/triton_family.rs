//! The block-FP8 Triton family in tables: journal rows with libtype `triton` are read by the table
//! reader, their kernelName checked against the family's grammar and kernelId against its packing.

use gemm_synth::catalog::triton::{TritonConfig, VLLM_DEFAULT};
use gemm_synth::catalog::{Catalog, Libtype};
use gemm_synth::table::{parse_aiter_csv, AiterRow, TableError};

const HEADER: &str = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio,status";

fn line(id: &str, split_k: &str, name: &str) -> String {
    format!("sm_90,132,32,1280,8192,triton,{id},{split_k},52.66,{name},12.7,210.3,0.0,ok")
}

fn parse(rows: &[String]) -> Result<Vec<AiterRow>, TableError> {
    let text = format!("{HEADER}\n{}\n", rows.join("\n"));
    parse_aiter_csv(text.as_bytes(), "j.csv", &Catalog::embedded())
}

#[test]
fn triton_rows_parse_with_their_config() {
    let name = VLLM_DEFAULT.name();
    let other = TritonConfig { block_m: 16, block_n: 32, block_k: 128, group_m: 1, num_warps: 4, num_stages: 2 };
    let rows =
        parse(&[line("67703222", "0", &name), line(&other.kernel_id().to_string(), "0", &other.name())]).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].libtype, Libtype::Triton);
    assert_eq!(TritonConfig::parse_name(&rows[1].kernel_name).unwrap(), other);
    assert_eq!(rows[1].kernel_id, 45_700_122);
}

#[test]
fn triton_rows_that_disagree_are_rejected_naming_line_and_column() {
    let name = VLLM_DEFAULT.name();
    let cases = [
        (line("67703223", "0", &name), "kernelId", "contradicts kernelName, whose kernelId is 67703222"),
        (line("67703222", "1", &name), "splitK", "no split-K"),
        (line("67703222", "0", "triton_bm64_bn128_bk256_g32_w4_s2"), "kernelName", "must divide"),
        (line("67703222", "0", "triton_bm64_bn128"), "kernelName", "is not a triton config name"),
        (line("15", "0", "a8w8_blockscale_x"), "kernelName", "is not a triton config name"),
    ];
    for (bad, column, words) in cases {
        let e = parse(&[line("67703222", "0", &name), bad.clone()]).unwrap_err();
        assert_eq!(e.line, Some(3), "{bad}: {e}");
        assert_eq!(e.column.as_deref(), Some(column), "{bad}: {e}");
        assert!(e.to_string().contains(words), "{bad}: {e}");
    }
}

#[test]
fn a_latency_matrix_holds_one_family() {
    use gemm_synth::table::LatencyMatrix;
    let name = VLLM_DEFAULT.name();
    let triton = parse(&[line("67703222", "0", &name)]).unwrap();
    let m = LatencyMatrix::from_rows(&triton).unwrap();
    assert_eq!(m.candidates.len(), 1);
    assert_eq!(m.candidates[0].kernel_id, VLLM_DEFAULT.kernel_id());
    let ck = "a8w8_blockscale_1x128x128_256x16x64x256_16x16_16x16_1x1_16x16x1_16x16x1_1x16x1x16_4_1x1_intrawave_v1";
    let text =
        format!("{HEADER}\n{}\nsm_90,132,32,1280,8192,ck,8,0,40.0,{ck},1,1,0.0,ok\n", line("67703222", "0", &name));
    let rows = parse_aiter_csv(text.as_bytes(), "j.csv", &Catalog::embedded()).unwrap();
    let e = LatencyMatrix::from_rows(&rows).unwrap_err();
    assert_eq!(e.line, Some(3), "{e}");
    assert!(e.to_string().contains("starts with libtype triton on line 2"), "{e}");
}

#[test]
fn a_screening_estimate_is_not_read_as_a_latency() {
    let name = VLLM_DEFAULT.name();
    let header = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio,timing,status";
    let row =
        |timing: &str| format!("sm_90,132,32,1280,8192,triton,67703222,0,52.66,{name},12.7,210.3,0.0,{timing},ok");
    let text = format!("{header}\n{}\n{}\n", row("graph"), row("estimate"));
    let e = parse_aiter_csv(text.as_bytes(), "j.csv", &Catalog::embedded()).unwrap_err();
    assert_eq!(e.line, Some(3), "{e}");
    assert_eq!(e.column.as_deref(), Some("timing"), "{e}");
    assert!(e.to_string().contains("--done-rescreen"), "{e}");
    let ok = format!("{header}\n{}\n", row("graph"));
    assert_eq!(parse_aiter_csv(ok.as_bytes(), "j.csv", &Catalog::embedded()).unwrap().len(), 1);
}

// ---------------------------------------------------------------------------------------------------
// `synth run --backends triton` on a journal of triton rows only (made from the committed harness result
// lines of the kept configs on Qwen3-32B TP=2 and other models, the way the README says).

mod common;

/// The journal `harness/triton_journal.py` writes from the committed manifest result lines.
fn manifest_journal(dir: &std::path::Path) -> std::path::PathBuf {
    let out = dir.join("triton.csv");
    let o = std::process::Command::new("python3")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["harness/triton_journal.py", "measurements/h200/triton-manifest/manifest.jsonl.gz", "--out"])
        .arg(&out)
        .output()
        .expect("python3 runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// (M, N, K) -> kernelName -> us of the journal's usable, non-recheck rows, read here with the csv crate.
type Times = std::collections::BTreeMap<(u32, u32, u32), std::collections::BTreeMap<String, f64>>;

fn journal_times(path: &std::path::Path) -> Times {
    let mut r = csv::Reader::from_path(path).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |name: &str| h.iter().position(|x| x == name).unwrap();
    let (m, n, k, name, us, status, recheck) =
        (col("M"), col("N"), col("K"), col("kernelName"), col("us"), col("status"), col("recheck"));
    let mut out = Times::new();
    for rec in r.records() {
        let rec = rec.unwrap();
        if &rec[status] != "ok" || &rec[recheck] != "0" {
            continue;
        }
        let shape = (rec[m].parse().unwrap(), rec[n].parse().unwrap(), rec[k].parse().unwrap());
        out.entry(shape).or_default().insert(rec[name].to_string(), rec[us].parse().unwrap());
    }
    out
}

/// The runtimes' lookup over a config file as Python's `json.load` keeps it (keys in file order):
/// `min(keys, key=|key - M|)`, ties to the first key.
fn runtime_lookup(text: &str, m: u32) -> String {
    let doc: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text).unwrap();
    let mut best: Option<(u32, &serde_json::Value)> = None;
    for (key, c) in &doc {
        let d = key.parse::<u32>().unwrap().abs_diff(m);
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    let c = best.unwrap().1;
    let v = |k: &str| c[k].as_u64().unwrap();
    format!(
        "triton_bm{}_bn{}_bk{}_g{}_w{}_s{}",
        v("BLOCK_SIZE_M"),
        v("BLOCK_SIZE_N"),
        v("BLOCK_SIZE_K"),
        v("GROUP_SIZE_M"),
        v("num_warps"),
        v("num_stages")
    )
}

#[test]
fn a_triton_only_run_finishes_with_the_runtime_default_and_the_runtime_files() {
    let dir = tempfile::tempdir().unwrap();
    let journal = manifest_journal(dir.path());
    let out = dir.path().join("out");
    let args = common::strs(&["run", "--dataset", journal.to_str().unwrap(), "--model", "qwen3-32b", "--tp", "2"]);
    let mut with = args.clone();
    with.extend(common::strs(&["--backends", "triton", "--out", out.to_str().unwrap()]));
    let o = common::synth(&with, &[]);
    let text = common::text(&o);
    assert!(o.status.success(), "{text}");

    // What applies is written; the AITER instance CSV is replaced by a note saying why.
    for f in ["rule.json", "dispatch.rs", "gemm_a8w8_blockscale_heuristic.h", "select_kernel.py", "compare.csv"] {
        assert!(out.join(f).is_file(), "{f} missing:\n{text}");
    }
    assert!(!out.join("gemm_a8w8_blockscale_heuristic_instances.csv").exists());
    let note = std::fs::read_to_string(out.join("NO-INSTANCES.txt")).unwrap();
    assert!(note.contains("returns no CK legacy instance") && note.contains("no CK measurement"), "{note}");
    let header = std::fs::read_to_string(out.join("gemm_a8w8_blockscale_heuristic.h")).unwrap();
    assert!(header.contains("return BlockscaleChoice{triton("), "every leaf is \"no CK pick\"");
    assert!(out.join("aiter").join(gemm_synth::aiter::PATCH_FILE).is_file(), "triton leaves with BK 128 route");
    assert!(!text.contains("published-rule"), "the CK-only published rule is not scored on triton data:\n{text}");

    // `default` is vLLM's default config, and every figure is charged against it: checked per shape
    // against the journal read here.
    let times = journal_times(&journal);
    let mut csv = csv::Reader::from_path(out.join("compare.csv")).unwrap();
    let mut picks: Vec<(u32, u32, u32, String)> = Vec::new();
    let mut shapes = 0;
    for rec in csv.deserialize::<std::collections::HashMap<String, String>>() {
        let rec = rec.unwrap();
        let shape: (u32, u32, u32) = (rec["M"].parse().unwrap(), rec["N"].parse().unwrap(), rec["K"].parse().unwrap());
        let cells = &times[&shape];
        let oracle = cells.values().copied().fold(f64::INFINITY, f64::min);
        assert_eq!(rec["oracle_us"], format!("{oracle:.4}"), "{shape:?}");
        let default =
            cells.get(&VLLM_DEFAULT.name()).copied().unwrap_or_else(|| cells.values().copied().fold(0.0, f64::max));
        assert_eq!(rec["default_us"], format!("{default:.4}"), "{shape:?}: the vLLM default's time (else the slowest)");
        match rec["policy"].as_str() {
            "default" => {
                shapes += 1;
                assert_eq!(rec["kernelId"], format!("triton:{}", VLLM_DEFAULT.kernel_id()));
            }
            "synthesized" => {
                let id: i64 = rec["kernelId"].strip_prefix("triton:").unwrap().parse().unwrap();
                picks.push((shape.0, shape.1, shape.2, TritonConfig::from_kernel_id(id).unwrap().name()));
            }
            _ => {}
        }
    }
    assert_eq!(shapes, 280, "the 80-value grid of 4 layers less the 40 training shapes");

    // The vLLM and SGLang files return the rule's pick at every scored M (read back here).
    for (runtime, block) in [("vllm", "[128,128]"), ("sglang", "[128, 128]")] {
        for (m, n, k, name) in &picks {
            let file = out
                .join(runtime)
                .join(format!("N={n},K={k},device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape={block}.json"));
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            assert_eq!(&runtime_lookup(&text, *m), name, "{runtime} M={m} N={n} K={k}");
        }
    }

    // Without --backends the same triton-only table is one family too: the same rule, the same default.
    let out2 = dir.path().join("out2");
    let mut without = args;
    without.extend(common::strs(&["--out", out2.to_str().unwrap()]));
    let o = common::synth(&without, &[]);
    assert!(o.status.success(), "{}", common::text(&o));
    assert!(out2.join("NO-INSTANCES.txt").is_file());
}
