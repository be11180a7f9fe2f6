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
