//! The block-FP8 Triton family in tables: journal rows with libtype `triton` are read by the table
//! reader, their kernelName checked against the family's grammar and kernelId against its packing.

use synth_core::catalog::triton::{TritonConfig, VLLM_DEFAULT};
use synth_core::catalog::{Catalog, Libtype};
use synth_core::table::{parse_aiter_csv, AiterRow, TableError};

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
    use synth_core::table::LatencyMatrix;
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
    assert!(out.join("aiter").join(synth_core::aiter::PATCH_FILE).is_file(), "triton leaves with BK 128 route");
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
            assert_eq!(&common::runtime_lookup(&text, *m), name, "{runtime} M={m} N={n} K={k}");
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

// ---------------------------------------------------------------------------------------------------
// `synth compare` with the runtimes' own policies: vLLM's and SGLang's default configs and a directory of
// vLLM config files, next to a rule and the family's oracle, on a hand-written journal.

/// Configs of the hand-written journal: the two runtime defaults, two small tiles, and one config that a
/// vLLM file names but the journal never measured.
const B: TritonConfig =
    TritonConfig { block_m: 16, block_n: 64, block_k: 128, group_m: 1, num_warps: 4, num_stages: 3 };
const C: TritonConfig =
    TritonConfig { block_m: 32, block_n: 64, block_k: 128, group_m: 1, num_warps: 4, num_stages: 3 };
const U: TritonConfig =
    TritonConfig { block_m: 128, block_n: 128, block_k: 128, group_m: 16, num_warps: 8, num_stages: 4 };

/// A shape (M, N, K) and the times of A (vLLM's default), S (SGLang's), B and C; `None` is a failed cell.
type ShapeTimes = ((u32, u32, u32), [Option<f64>; 4]);

const TIMES: [ShapeTimes; 7] = [
    ((1, 1536, 7168), [Some(20.0), Some(22.0), Some(10.0), Some(12.0)]),
    ((16, 1536, 7168), [Some(24.0), Some(20.0), Some(16.0), Some(15.0)]),
    ((64, 1536, 7168), [Some(30.0), Some(28.0), Some(40.0), Some(25.0)]),
    ((200, 1536, 7168), [Some(50.0), Some(45.0), Some(90.0), Some(60.0)]),
    ((1, 2048, 512), [Some(8.0), Some(9.0), Some(5.0), Some(6.0)]),
    ((64, 2048, 512), [Some(10.0), Some(12.0), Some(11.0), Some(9.0)]),
    ((16, 3072, 1536), [Some(14.0), None, Some(7.0), Some(10.0)]),
];

fn hand_journal() -> String {
    let configs = [VLLM_DEFAULT, synth_core::catalog::triton::SGLANG_DEFAULT, B, C];
    let mut text = format!("{HEADER}\n");
    for ((m, n, k), times) in TIMES {
        for (c, us) in configs.iter().zip(times) {
            let (id, name) = (c.kernel_id(), c.name());
            text.push_str(&match us {
                Some(us) => format!("sm_90,132,{m},{n},{k},triton,{id},0,{us},{name},1,1,0.0,ok\n"),
                None => format!("sm_90,132,{m},{n},{k},triton,{id},0,,{name},,,0.5,fail:errRatio\n"),
            });
        }
    }
    text
}

/// A vLLM config file: `keys` in this order.
fn vllm_file(keys: &[(u32, TritonConfig)]) -> String {
    let body: Vec<String> = keys
        .iter()
        .map(|(m, c)| {
            format!(
                "\"{m}\": {{\"BLOCK_SIZE_M\": {}, \"BLOCK_SIZE_N\": {}, \"BLOCK_SIZE_K\": {}, \"GROUP_SIZE_M\": {}, \
                 \"num_warps\": {}, \"num_stages\": {}}}",
                c.block_m, c.block_n, c.block_k, c.group_m, c.num_warps, c.num_stages
            )
        })
        .collect();
    format!("{{{}}}\n", body.join(", "))
}

/// Geometric mean of num[i] / den[i].
fn geomean(num: &[f64], den: &[f64]) -> f64 {
    (num.iter().zip(den).map(|(a, b)| (a / b).ln()).sum::<f64>() / num.len() as f64).exp()
}

#[test]
fn compare_scores_the_runtime_defaults_and_tuned_files_by_hand() {
    use synth_core::rule::ir::build::{lit, m};
    use synth_core::rule::{CmpOp, Cond, Leaf, Node, Rule};
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.csv");
    std::fs::write(&journal, hand_journal()).unwrap();
    let configs = dir.path().join("configs");
    std::fs::create_dir(&configs).unwrap();
    let name =
        |n: u32, k: u32| format!("N={n},K={k},device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json");
    // N=1536: M 1 and 16 -> key 1 (B; 16 is 15 from 1, 16 from 32), 64 -> key 32 (C), 200 -> key 128 (A).
    std::fs::write(configs.join(name(1536, 7168)), vllm_file(&[(1, B), (32, C), (128, VLLM_DEFAULT)])).unwrap();
    // N=2048: M 1 -> key 32 (B); M 64 is 32 from both keys: the first in the file, 96, whose U is unmeasured.
    std::fs::write(configs.join(name(2048, 512)), vllm_file(&[(96, U), (32, B)])).unwrap();
    // N=3072 has no file: vLLM's default config.
    let rule = Rule::new(Node::Chain {
        branches: vec![(Cond::cmp(CmpOp::Le, m(), lit(16)), Node::Leaf(Leaf::of(Libtype::Triton, B.kernel_id(), 0)))],
        otherwise: Box::new(Node::Leaf(Leaf::of(Libtype::Triton, C.kernel_id(), 0))),
    });
    let rule_path = dir.path().join("rule.json");
    std::fs::write(&rule_path, synth_core::rule::to_json(&rule)).unwrap();
    let out_csv = dir.path().join("cmp.csv");
    let args: Vec<String> = [
        "compare",
        "--dataset",
        journal.to_str().unwrap(),
        "--backends",
        "triton",
        "--runtime-default",
        "vllm,sglang",
        "--runtime-tuned",
        &format!("vllm={}", configs.display()),
        "--device-name",
        "NVIDIA H200",
        "--rule",
        rule_path.to_str().unwrap(),
        "--csv",
        out_csv.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let o = common::synth(&args, &[]);
    let text = common::text(&o);
    assert!(o.status.success(), "{text}");

    // The charged time of each policy per shape, by hand (TIMES order). A pick of a failed or unmeasured cell
    // is charged the default's time, vLLM's default config here (--backends triton, no CK row).
    let oracle = [10.0, 15.0, 25.0, 45.0, 5.0, 9.0, 7.0];
    let default = [20.0, 24.0, 30.0, 50.0, 8.0, 10.0, 14.0];
    let sglang = [22.0, 20.0, 28.0, 45.0, 9.0, 12.0, 14.0]; // S failed on the last shape
    let tuned = [10.0, 16.0, 25.0, 50.0, 5.0, 10.0, 14.0]; // U unmeasured at M=64 N=2048
    let by_rule = [10.0, 16.0, 25.0, 60.0, 5.0, 9.0, 7.0];
    let rule_name = |p: &str| p.ends_with("rule.json");
    let want: [(&str, &[f64; 7], usize); 6] = [
        ("default", &default, 0),
        ("oracle[triton]", &oracle, 0),
        ("vllm-default", &default, 0),
        ("sglang-default", &sglang, 1),
        ("vllm-tuned", &tuned, 1),
        ("rule.json", &by_rule, 0),
    ];
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.starts_with("policy "))
        .skip(2)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(names.len(), 7, "{text}");
    assert_eq!(&names[..5], ["default", "oracle[triton]", "vllm-default", "sglang-default", "vllm-tuned"], "{text}");
    assert!(rule_name(names[5]) && names[6] == "oracle", "{text}");
    for (policy, times, fallbacks) in want {
        let row = rows.iter().find(|r| r[0] == policy || (policy == "rule.json" && rule_name(r[0]))).unwrap();
        // policy, total ms, x default (total), x default (geo), x tuned x2, of oracle, fallbacks, kernels
        let total: f64 = times.iter().sum();
        assert_eq!(row[1], format!("{:.3}", total / 1000.0), "{policy} total:\n{text}");
        assert_eq!(row[3], format!("{:.3}", geomean(&default, times)), "{policy} x default:\n{text}");
        assert_eq!(row[6], format!("{:.3}", geomean(&oracle, times)), "{policy} of oracle:\n{text}");
        assert_eq!(row[7], fallbacks.to_string(), "{policy} fallbacks:\n{text}");
    }
    assert_eq!(format!("{:.3}", geomean(&oracle, &tuned)), "0.871");
    assert_eq!(format!("{:.3}", geomean(&oracle, &by_rule)), "0.951");
    assert!(text.contains("vllm-tuned: 2 files (5 M keys) for NVIDIA_H200"), "{text}");

    // The CSV names each pick, how the lookup found it and whether its cell was usable.
    let mut found = std::collections::BTreeMap::new();
    for rec in csv::Reader::from_path(&out_csv).unwrap().deserialize::<std::collections::HashMap<String, String>>() {
        let r = rec.unwrap();
        let key = (r["policy"].clone(), r["M"].parse::<u32>().unwrap(), r["N"].parse::<u32>().unwrap());
        found.insert(key, (r["kernelId"].clone(), r["lookup"].clone(), r["status"].clone()));
    }
    let id = |c: TritonConfig| format!("triton:{}", c.kernel_id());
    let pick = |p: &str, m: u32, n: u32| found[&(p.to_string(), m, n)].clone();
    assert_eq!(pick("vllm-tuned", 16, 1536), (id(B), "nearest".into(), "ok".into()));
    assert_eq!(pick("vllm-tuned", 64, 1536), (id(C), "nearest".into(), "ok".into()));
    assert_eq!(pick("vllm-tuned", 200, 1536), (id(VLLM_DEFAULT), "nearest".into(), "ok".into()));
    assert_eq!(pick("vllm-tuned", 64, 2048), (id(U), "nearest".into(), "missing".into()));
    assert_eq!(pick("vllm-tuned", 16, 3072), (id(VLLM_DEFAULT), "default".into(), "ok".into()));
    let sglang_default = synth_core::catalog::triton::SGLANG_DEFAULT;
    assert_eq!(pick("sglang-default", 16, 3072), (id(sglang_default), String::new(), "invalid".into()));
    assert_eq!(pick("default", 16, 3072), (id(VLLM_DEFAULT), String::new(), "ok".into()));
}

#[test]
fn runtime_policies_need_the_triton_backend_and_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.csv");
    std::fs::write(&journal, hand_journal()).unwrap();
    let j = journal.to_str().unwrap();
    let d = dir.path().to_str().unwrap();
    let tuned = format!("vllm={d}");
    let cases: [(Vec<&str>, &str); 5] = [
        (vec!["--runtime-default", "vllm"], "add triton to --backends"),
        (vec!["--backends", "triton", "--runtime-tuned", &tuned], "--runtime-tuned needs --device-name"),
        (vec!["--backends", "triton", "--device-name", "NVIDIA_H200"], "--device-name is read with --runtime-tuned"),
        (vec!["--backends", "triton", "--runtime-default", "sglang,sglang"], "names sglang twice"),
        (
            vec!["--backends", "triton", "--runtime-tuned", &tuned, "--device-name", "NVIDIA_H200"],
            "no vllm config file for device NVIDIA_H200",
        ),
    ];
    for (extra, words) in cases {
        let mut args = common::strs(&["compare", "--dataset", j]);
        args.extend(common::strs(&extra));
        let o = common::synth(&args, &[]);
        let text = common::text(&o);
        assert!(!o.status.success() && text.contains(words), "{extra:?}: {text}");
    }
}
