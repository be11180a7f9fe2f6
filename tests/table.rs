//! Latency tables: the strict AITER CSV reader (every malformed-row class, with exact line numbers), the
//! writer, the latency matrix and the polars summary, checked against AITER's real MI300X tuned table.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod common;
use common::run_bounded;

use synth_core::catalog::{Candidate, Catalog};
use synth_core::table::{
    parse_aiter_csv, read_aiter_csv, recheck_pairs, write_aiter_csv, AiterRow, Cell, LatencyMatrix, Shape, TableError,
};
use synth_summary::summary::{best_frame, summarize, winner_counts};

const HEADER: &str = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio";
const ID8: &str =
    "a8w8_blockscale_1x128x128_256x16x64x256_16x16_16x16_1x1_16x16x1_16x16x1_1x16x1x16_4_1x1_intrawave_v1";
const ID0: &str = "a8w8_blockscale_1x128x128_256x128x128x128_16x16_32x32_2x2_8x32x1_8x32x1_1x32x1x8_8_1x1_intrawave_v3";

fn mi300x_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("measurements/mi300x/a8w8_blockscale_tuned_gemm_qwen3_vl_32b.csv")
}

fn row(m: u32, id: i32, us: &str, name: &str) -> String {
    format!("gfx942,304,{m},5120,4096,ck,{id},0,{us},{name},41.61,1314.51,0.0")
}

/// Three valid rows (lines 2-4) followed by `bad` on line 5.
fn with_bad_row(bad: &str) -> String {
    format!("{HEADER}\n{}\n{}\n{}\n{bad}\n", row(16, 8, "16.1", ID8), row(32, 8, "16.3", ID8), row(16, 0, "20.5", ID0))
}

fn parse(text: &str) -> Result<Vec<AiterRow>, TableError> {
    parse_aiter_csv(text.as_bytes(), "bad.csv", &Catalog::embedded())
}

#[track_caller]
fn expect_err(text: &str, line: usize, column: &str, value: Option<&str>, words: &str) -> TableError {
    let e = parse(text).expect_err("the table should be rejected");
    assert_eq!(e.line, Some(line), "{e}");
    assert_eq!(e.column.as_deref(), Some(column), "{e}");
    assert_eq!(e.value.as_deref(), value, "{e}");
    let shown = e.to_string();
    assert!(shown.starts_with(&format!("bad.csv:{line}: column {column}")), "{shown}");
    if let Some(v) = value {
        assert!(shown.contains(&format!("\"{v}\"")), "{shown}");
    }
    assert!(shown.contains(words), "expected {words:?} in: {shown}");
    e
}

#[test]
fn valid_rows_parse() {
    let rows = parse(&with_bad_row(&row(64, 8, "17.0", ID8))).unwrap();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows.iter().map(|r| r.line).collect::<Vec<_>>(), vec![2, 3, 4, 5]);
    let r = &rows[0];
    assert_eq!(
        (r.gfx.as_str(), r.cu_num, r.m, r.n, r.k, r.kernel_id, r.split_k),
        ("gfx942", 304, 16, 5120, 4096, 8, 0)
    );
    assert_eq!((r.us, r.tflops, r.bw, r.err_ratio), (Some(16.1), Some(41.61), Some(1314.51), Some(0.0)));
}

#[test]
fn header_errors() {
    let e = parse(&format!("{}\n{}\n", HEADER.replace(",bw", ""), row(16, 8, "1", ID8))).unwrap_err();
    assert_eq!((e.line, e.column.as_deref()), (Some(1), Some("bw")), "{e}");
    assert!(e.to_string().contains("required column is missing"), "{e}");
    let e = parse(&format!("{HEADER},M\n")).unwrap_err();
    assert_eq!((e.line, e.column.as_deref()), (Some(1), Some("M")), "{e}");
    let e = parse("").unwrap_err();
    assert!(e.to_string().contains("empty file"), "{e}");
}

#[test]
fn missing_column_in_a_row() {
    let bad = row(64, 8, "17.0", ID8).replace(",1314.51,0.0", ",1314.51");
    let e = parse(&with_bad_row(&bad)).unwrap_err();
    assert_eq!((e.line, e.column.as_deref()), (Some(5), Some("errRatio")), "{e}");
    assert!(e.to_string().contains("the row has 12 fields but the header has 13"), "{e}");
}

#[test]
fn non_numeric_fields() {
    expect_err(
        &with_bad_row(&row(64, 8, "17.0", ID8).replace(",64,", ",6x4,")),
        5,
        "M",
        Some("6x4"),
        "positive integer",
    );
    expect_err(&with_bad_row(&row(64, 8, "fast", ID8)), 5, "us", Some("fast"), "expected a number");
    expect_err(
        &with_bad_row(&row(64, 8, "17", ID8).replace(",41.61,", ",n/a,")),
        5,
        "tflops",
        Some("n/a"),
        "expected a number",
    );
    expect_err(
        &with_bad_row(&row(64, 8, "17", ID8).replace(",8,0,", ",eight,0,")),
        5,
        "kernelId",
        Some("eight"),
        "integer",
    );
    expect_err(
        &with_bad_row(&row(64, 8, "17", ID8).replace("gfx942,304", "gfx942,0")),
        5,
        "cu_num",
        Some("0"),
        "positive",
    );
    expect_err(&with_bad_row(&row(64, 8, "17", ID8).replace(",8,0,", ",8,40,")), 5, "splitK", Some("40"), "log2");
    expect_err(
        &with_bad_row(&row(64, 8, "17", ID8).replace("gfx942", "mi300")),
        5,
        "gfx",
        Some("mi300"),
        "architecture",
    );
}

#[test]
fn non_finite_negative_and_zero_times() {
    for v in ["NaN", "nan", "inf", "-inf"] {
        expect_err(&with_bad_row(&row(64, 8, v, ID8)), 5, "us", Some(v), "finite");
    }
    expect_err(&with_bad_row(&row(64, 8, "-3.5", ID8)), 5, "us", Some("-3.5"), "positive kernel time");
    expect_err(&with_bad_row(&row(64, 8, "0", ID8)), 5, "us", Some("0"), "positive kernel time");
    expect_err(&with_bad_row(&row(64, 8, "", ID8)), 5, "us", Some(""), "status=fail");
    expect_err(&with_bad_row(&row(64, 8, "17", ID8).replace(",1314.51,", ",-1,")), 5, "bw", Some("-1"), "non-negative");
}

#[test]
fn err_ratio_outside_unit_interval() {
    expect_err(&with_bad_row(&row(64, 8, "17", ID8).replace(",0.0", ",1.5")), 5, "errRatio", Some("1.5"), "[0, 1]");
    expect_err(&with_bad_row(&row(64, 8, "17", ID8).replace(",0.0", ",-0.1")), 5, "errRatio", Some("-0.1"), "[0, 1]");
    expect_err(&with_bad_row(&row(64, 8, "17", ID8).replace(",0.0", ",")), 5, "errRatio", Some(""), "empty field");
}

#[test]
fn unknown_kernel_and_contradicting_kernel_id() {
    let unknown = ID8.replace("256x16x64x256", "256x16x64x512");
    let e =
        expect_err(&with_bad_row(&row(64, 8, "17", &unknown)), 5, "kernelName", Some(&unknown), "not in the catalog");
    assert!(e.to_string().contains("field 4 (BlockSize x MPerBlock x NPerBlock x KPerBlock)"), "{e}");
    let malformed = ID8.replace("_v1", "_x1");
    expect_err(&with_bad_row(&row(64, 8, "17", &malformed)), 5, "kernelName", Some(&malformed), "field 14 (pipeline)");
    let e = expect_err(&with_bad_row(&row(64, 3, "17", ID8)), 5, "kernelId", Some("3"), "contradicts kernelName");
    assert!(e.to_string().contains("kernelId 8"), "{e}");
    expect_err(&with_bad_row(&row(64, 25, "17", ID8)), 5, "kernelId", Some("25"), "no ck instance");
    // The default id -1 is the same kernel as id 7: accepted with id 7's name, rejected with id 8's.
    let id7 = Catalog::embedded().legacy_by_id(7).unwrap().name.clone();
    assert!(parse(&with_bad_row(&row(64, -1, "17", &id7))).is_ok());
    expect_err(&with_bad_row(&row(64, -1, "17", ID8)), 5, "kernelId", Some("-1"), "contradicts");
    // Older-grammar names resolve (AITER files from 2025 use them).
    let old = "a8w8_blockscale_1x128x128_256x16x64x256_16x16_16x16_16x16x1_16x16x1_1x16x1x16_4_1x1_intrawave_v1";
    assert!(parse(&with_bad_row(&row(64, 8, "17", old))).is_ok());
    // libtype must agree with the name's kind.
    let ck_as_tile = row(64, 8, "17", ID8).replace(",ck,", ",cktile,");
    expect_err(&with_bad_row(&ck_as_tile), 5, "libtype", Some("cktile"), "kernelName is a ck instance");
    expect_err(
        &with_bad_row(&row(64, 8, "17", ID8).replace(",ck,", ",hip,")),
        5,
        "libtype",
        Some("hip"),
        "\"ck\", \"cktile\", \"vendor\" or \"triton\"",
    );
}

#[test]
fn cktile_rows_check_ids_per_architecture() {
    let name = "a8w8_blockscale_cktile_192x256x128_4x2x1_16x16x128_intrawave_0x1x0_1_aqrm";
    let line = |gfx: &str, id: i32| format!("{gfx},256,64,5120,4096,cktile,{id},0,12.5,{name},1,1,0.0");
    assert!(parse(&format!("{HEADER}\n{}\n", line("gfx950", 12))).is_ok());
    let e = parse(&format!("{HEADER}\n{}\n", line("gfx950", 11))).unwrap_err();
    assert_eq!((e.line, e.column.as_deref()), (Some(2), Some("kernelId")), "{e}");
    let e = parse(&format!("{HEADER}\n{}\n", line("gfx90a", 12))).unwrap_err();
    assert_eq!(e.column.as_deref(), Some("gfx"), "{e}");
    // CK-tile rows validate but do not enter the legacy matrix.
    let rows = parse(&format!("{HEADER}\n{}\n", line("gfx950", 12))).unwrap();
    let e = LatencyMatrix::from_rows(&rows).unwrap_err();
    assert_eq!(e.line, Some(2));
    assert!(e.to_string().contains("CK legacy candidates only"), "{e}");
}

#[test]
fn duplicates_need_the_recheck_mark() {
    let e = expect_err(&with_bad_row(&row(32, 8, "16.9", ID8)), 5, "kernelId", Some("8"), "already measured on line 3");
    assert!(e.to_string().contains("recheck=1"), "{e}");
    // With a recheck column, the repeat is a deliberate re-measurement.
    let text = format!(
        "{HEADER},recheck\n{},0\n{},\n{},1\n{},1\n",
        row(16, 8, "16.0", ID8),
        row(32, 8, "16.0", ID8),
        row(16, 8, "17.6", ID8),
        row(48, 8, "18.0", ID8)
    );
    let rows = parse(&text).unwrap();
    let pairs = recheck_pairs(&rows);
    assert_eq!(pairs.len(), 2);
    assert_eq!(pairs[0].original.as_ref().map(|o| o.0), Some(2));
    assert_eq!(pairs[0].recheck.0, 4);
    assert!((pairs[0].ratio().unwrap() - 1.1).abs() < 1e-12);
    assert_eq!(pairs[1].original, None);
    // Recheck rows stay out of the matrix.
    let m = LatencyMatrix::from_rows(&rows).unwrap();
    assert_eq!(m.shapes, vec![Shape::new(16, 5120, 4096), Shape::new(32, 5120, 4096)]);
    assert_eq!(m.us(0, 0), Some(16.0));
    // A bad recheck flag is an error.
    expect_err(&format!("{HEADER},recheck\n{},yes\n", row(16, 8, "1", ID8)), 2, "recheck", Some("yes"), "0 or 1");
}

#[test]
fn status_and_err_ratio_make_invalid_cells() {
    let text = format!(
        "{HEADER},status,device\n{},ok,MI300X\n{},fail:timeout,MI300X\n{},,MI300X\n",
        row(16, 8, "16.0", ID8),
        row(16, 0, "", ID0),
        row(32, 8, "16.0", ID8).replace(",0.0", ",0.08")
    );
    let rows = parse(&text).unwrap();
    let m = LatencyMatrix::from_rows(&rows).unwrap();
    assert_eq!(m.device.as_deref(), Some("MI300X"));
    assert_eq!(m.candidates, vec![Candidate::new(0, 0), Candidate::new(8, 0)]);
    assert_eq!(m.cell(0, 0), &Cell::Invalid("run failed: timeout".into()));
    assert_eq!(m.cell(0, 1), &Cell::Ok(16.0));
    assert_eq!(m.cell(1, 1), &Cell::Invalid("errRatio 0.08 > 0.05".into()));
    assert_eq!(m.cell(1, 0), &Cell::Missing);
    assert_eq!(m.counts(), (1, 2, 1));
    assert_eq!(m.best(1), None);
    expect_err(
        &format!("{HEADER},status\n{},broken\n", row(16, 8, "1", ID8)),
        2,
        "status",
        Some("broken"),
        "fail:<reason>",
    );
    expect_err(&format!("{HEADER},reps\n{},0\n", row(16, 8, "1", ID8)), 2, "reps", Some("0"), "positive integer");
    expect_err(&format!("{HEADER},us_p90\n{},inf\n", row(16, 8, "1", ID8)), 2, "us_p90", Some("inf"), "finite");
}

#[test]
fn crlf_files_report_exact_lines() {
    let text = with_bad_row(&row(64, 8, "nan", ID8)).replace('\n', "\r\n");
    expect_err(&text, 5, "us", Some("nan"), "finite");
}

#[test]
fn one_matrix_holds_one_device() {
    let text =
        format!("{HEADER}\n{}\n{}\n", row(16, 8, "1", ID8), row(32, 8, "1", ID8).replace("gfx942,304", "gfx942,80"));
    let e = LatencyMatrix::from_rows(&parse(&text).unwrap()).unwrap_err();
    assert_eq!(e.line, Some(3));
    assert!(e.to_string().contains("one matrix holds one device"), "{e}");
}

#[test]
fn file_errors_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("table.csv");
    std::fs::write(&path, with_bad_row(&row(64, 8, "inf", ID8))).unwrap();
    let e = read_aiter_csv(&path, &Catalog::embedded()).unwrap_err();
    assert!(e.to_string().starts_with(&format!("{}:5: column us = \"inf\"", path.display())), "{e}");
    let e = LatencyMatrix::load(&dir.path().join("absent.csv"), &Catalog::embedded()).unwrap_err();
    assert!(e.to_string().contains("absent.csv") && e.to_string().contains("cannot read"), "{e}");
}

/// Independent reading of the MI300X file: (M, N, K) → (kernelId, us), straight from the CSV.
fn raw_mi300x() -> BTreeMap<Shape, (i32, f64)> {
    let mut rdr = csv::Reader::from_path(mi300x_path()).unwrap();
    rdr.records()
        .map(|r| {
            let r = r.unwrap();
            (
                Shape::new(r[2].parse().unwrap(), r[3].parse().unwrap(), r[4].parse().unwrap()),
                (r[6].parse().unwrap(), r[8].parse().unwrap()),
            )
        })
        .collect()
}

#[test]
fn mi300x_table_loads_to_a_sparse_matrix() {
    let catalog = Catalog::embedded();
    let rows = read_aiter_csv(&mi300x_path(), &catalog).unwrap();
    assert_eq!(rows.len(), 8172);
    assert_eq!(rows.last().unwrap().line, 8173);
    let m = LatencyMatrix::from_rows(&rows).unwrap();
    assert_eq!((m.gfx.as_str(), m.cu_num, m.device.as_deref()), ("gfx942", 304, None));
    assert_eq!(m.shapes.len(), 8172);
    assert_eq!(m.m_values().len(), 681);
    assert_eq!(m.layers().len(), 12);
    let raw = raw_mi300x();
    let ids: BTreeSet<i32> = raw.values().map(|v| v.0).collect();
    assert_eq!(m.candidates, ids.iter().map(|&i| Candidate::new(i, 0)).collect::<Vec<_>>());
    assert_eq!(m.counts(), (8172, 0, 8172 * (ids.len() - 1)));
    // Each shape's only Ok cell is the tuned kernel with the tuned time.
    for (shape, (id, us)) in &raw {
        let s = m.shape_index(shape).unwrap();
        let (c, t) = m.best(s).unwrap();
        assert_eq!((m.candidates[c].kernel_id, t), (*id, *us), "{shape}");
    }
    assert_eq!(m.shape_index(&Shape::new(17, 5120, 4096)), None);
    assert_eq!(m.candidate_index(&Candidate::new(0, 0)), Some(0));
    // select_shapes keeps the rows it is given.
    let picked = m.select_shapes(&[5, 0]);
    assert_eq!(picked.shapes, vec![m.shapes[5], m.shapes[0]]);
    assert_eq!(picked.best(0), m.best(5));
}

#[test]
fn write_then_read_round_trips() {
    let catalog = Catalog::embedded();
    let rows = read_aiter_csv(&mi300x_path(), &catalog).unwrap();
    let mut out = Vec::new();
    write_aiter_csv(&mut out, &rows).unwrap();
    let back = parse_aiter_csv(&out, "written.csv", &catalog).unwrap();
    assert_eq!(back, rows);
    // Extra columns survive too.
    let text =
        format!("{HEADER},status,device\n{},fail:oom,H200\n{},ok,H200\n", row(16, 8, "", ID8), row(32, 8, "3.25", ID8));
    let rows = parse(&text).unwrap();
    let mut out = Vec::new();
    write_aiter_csv(&mut out, &rows).unwrap();
    assert!(String::from_utf8(out.clone()).unwrap().starts_with(&format!("{HEADER},device,status\n")));
    assert_eq!(parse_aiter_csv(&out, "w.csv", &catalog).unwrap(), rows);
}

#[test]
fn summary_matches_an_independent_count() {
    let m = LatencyMatrix::load(&mi300x_path(), &Catalog::embedded()).unwrap();
    let df = summarize(&m);
    assert_eq!(df.height(), 12);
    let raw = raw_mi300x();
    // Layer 5120x5120: wins per kernel and the median of the tuned times, from the raw file.
    let layer: Vec<(i32, f64)> = raw.iter().filter(|(s, _)| s.n == 5120 && s.k == 5120).map(|(_, v)| *v).collect();
    let mut wins: BTreeMap<i32, u32> = BTreeMap::new();
    for (id, _) in &layer {
        *wins.entry(*id).or_default() += 1;
    }
    let mut times: Vec<f64> = layer.iter().map(|v| v.1).collect();
    times.sort_by(f64::total_cmp);
    let median = times[340]; // 681 values: the middle one
    let n = df.column("N").unwrap().u32().unwrap();
    let k = df.column("K").unwrap().u32().unwrap();
    let row = (0..12).find(|&i| n.get(i) == Some(5120) && k.get(i) == Some(5120)).unwrap();
    assert_eq!(df.column("M_values").unwrap().u32().unwrap().get(row), Some(681));
    assert_eq!(df.column("ok").unwrap().u32().unwrap().get(row), Some(681));
    assert_eq!(df.column("missing").unwrap().u32().unwrap().get(row), Some(681 * (m.candidates.len() as u32 - 1)));
    assert_eq!(df.column("median_best_us").unwrap().f64().unwrap().get(row), Some(median));
    let winners = df.column("winners").unwrap().str().unwrap().get(row).unwrap().to_string();
    let top = wins.iter().max_by_key(|(id, c)| (**c, -**id)).unwrap();
    assert!(winners.starts_with(&format!("#{}:{} ", top.0, top.1)), "{winners}");
    let listed: BTreeMap<i32, u32> = winners
        .split(' ')
        .map(|e| {
            let (c, w) = e.trim_start_matches('#').split_once(':').unwrap();
            (c.parse().unwrap(), w.parse().unwrap())
        })
        .collect();
    assert_eq!(listed, wins);
    assert_eq!(best_frame(&m).unwrap().height(), 8172);
    assert_eq!(
        winner_counts(&m).unwrap().column("wins").unwrap().u32().unwrap().into_iter().map(|w| w.unwrap()).sum::<u32>(),
        8172
    );
}

#[test]
fn a_cell_has_at_most_one_recheck_row() {
    // One recheck row per cell (as `synth bench` writes them) stays fine ...
    let one = format!(
        "{HEADER},recheck\n{},0\n{},1\n{},1\n",
        row(16, 8, "16.0", ID8),
        row(16, 8, "16.4", ID8),
        row(16, 0, "20.5", ID0)
    );
    assert_eq!(parse(&one).unwrap().len(), 3);
    // ... a second one of the same cell is refused on its line, naming the first.
    let two = format!("{one}{},1\n", row(16, 8, "16.9", ID8));
    let e = expect_err(&two, 5, "kernelId", Some("8"), "duplicate recheck row");
    assert!(e.to_string().contains("already re-measured on line 3"), "{e}");
    // The same for a recheck row whose cell has no measurement row.
    let orphan = format!("{HEADER},recheck\n{},1\n{},1\n", row(48, 8, "18.0", ID8), row(48, 8, "18.2", ID8));
    let e = parse(&orphan).unwrap_err();
    assert_eq!((e.line, e.column.as_deref()), (Some(3), Some("kernelId")), "{e}");
    assert!(e.to_string().contains("duplicate recheck row"), "{e}");
}

// ---------------------------------------------------------------------------------------------------
// `synth import` and `synth merge` through the binary.

use std::process::{Command, Output};
use std::time::Duration;

fn synth() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_synth"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// `synth import ARGS`, which must succeed: its standard output.
#[track_caller]
fn import_ok(args: &[&std::ffi::OsStr]) -> String {
    let (o, _) = run_bounded(synth().arg("import").args(args), Duration::from_secs(120));
    assert!(o.status.success(), "import {args:?}: {}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// The value of the overview line `key` (`rows`, `candidates`, ...).
#[track_caller]
fn overview_line<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key).filter(|_| l.as_bytes().get(16).is_some_and(|b| *b != b' ')))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {key} line in:\n{out}"))
}

/// A journal of libtype triton rows only (`bench --family triton` with the fake harness, 2 shapes x 2
/// configs) imports: its matrix holds the triton configs.
#[test]
fn import_reads_a_triton_journal() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("triton.csv");
    let (o, _) = run_bounded(
        synth()
            .args(["bench", "--family", "triton", "--m-set", "16,1", "--shapes", "5120:4096", "--configs"])
            .args(["triton_bm64_bn128_bk128_g32_w4_s2,triton_bm16_bn32_bk128_g1_w4_s5", "--recheck-fraction", "0"])
            .args(["--python", "python3", "--harness", "tests/fixtures/fake_harness.py", "--out"])
            .arg(&out),
        Duration::from_secs(120),
    );
    assert!(o.status.success(), "{}", text(&o));
    let shown = import_ok(&[out.as_os_str()]);
    assert_eq!(overview_line(&shown, "rows"), "4 (0 recheck)", "{shown}");
    assert_eq!(overview_line(&shown, "candidates"), "2 measured: triton:#45700125 triton:#67703222", "{shown}");
    assert_eq!(overview_line(&shown, "cells"), "4 ok, 0 invalid, 0 missing", "{shown}");
    assert_eq!(overview_line(&shown, "shapes"), "2 (2 M values in 1..=16, 1 layers)", "{shown}");
    assert!(!shown.contains("outside the matrix"), "{shown}");

    // A hand-written one of one config, with a recheck row, too.
    use synth_core::catalog::triton::VLLM_DEFAULT;
    let name = VLLM_DEFAULT.name();
    let id = VLLM_DEFAULT.kernel_id();
    let header = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio,status,recheck";
    let line = |m: u32, us: f64, recheck: u8| {
        format!("sm_90,132,{m},1280,8192,triton,{id},0,{us},{name},1,1,0.0,ok,{recheck}")
    };
    let hand = dir.path().join("hand.csv");
    std::fs::write(&hand, format!("{header}\n{}\n{}\n{}\n", line(32, 52.5, 0), line(64, 60.0, 0), line(32, 53.0, 1)))
        .unwrap();
    let shown = import_ok(&[hand.as_os_str()]);
    assert_eq!(overview_line(&shown, "rows"), "3 (1 recheck)", "{shown}");
    assert_eq!(overview_line(&shown, "candidates"), format!("1 measured: triton:#{id}"), "{shown}");
}

/// A vendor reference CSV (libtype vendor rows only) imports: one candidate, `vendor`.
#[test]
fn import_reads_a_vendor_reference_csv() {
    let path = root().join("measurements/h200/vendor-qwen3-32b-tp2.csv");
    let shown = import_ok(&[path.as_os_str()]);
    assert_eq!(overview_line(&shown, "rows"), "400 (0 recheck)", "{shown}");
    assert_eq!(overview_line(&shown, "candidates"), "1 measured: vendor", "{shown}");
    assert_eq!(overview_line(&shown, "device"), "sm_90, 132 CUs, NVIDIA H200", "{shown}");
    assert_eq!(overview_line(&shown, "cells"), "400 ok, 0 invalid, 0 missing", "{shown}");
}

/// With CK legacy rows in the file, the matrix holds those, and the CK-tile rows are counted outside it.
#[test]
fn import_counts_cktile_rows_outside_the_ck_matrix() {
    let path = root().join("measurements/mi300x/a8w8_blockscale_tuned_gemm_glm5_1.csv");
    let shown = import_ok(&[path.as_os_str()]);
    assert_eq!(overview_line(&shown, "rows"), "1510 (0 recheck, 1 cktile outside the matrix)", "{shown}");
    assert!(!overview_line(&shown, "candidates").contains("cktile"), "{shown}");
    let json = import_ok(&[path.as_os_str(), "--format".as_ref(), "json".as_ref()]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["outside_matrix_rows"], serde_json::json!({"cktile": 1}), "{json}");
    // A CK journal without other libtypes has nothing outside the matrix to report.
    let path = root().join("measurements/h200/qwen3-32b-tp2.csv");
    let shown = import_ok(&[path.as_os_str()]);
    assert_eq!(overview_line(&shown, "rows"), "7425 (354 recheck)", "{shown}");
}

/// The rows of `path` (a CSV with a header) split in two journals: those with M below `m` and the rest.
fn split_journal(path: &Path, m: u32, a: &Path, b: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let (mut first, mut second) = (format!("{header}\n"), format!("{header}\n"));
    for l in lines {
        let this: u32 = l.split(',').nth(2).unwrap().parse().unwrap();
        if this < m { &mut first } else { &mut second }.push_str(&format!("{l}\n"));
    }
    std::fs::write(a, first).unwrap();
    std::fs::write(b, second).unwrap();
}

/// File names and device names with control characters (an ANSI colour sequence) reach the terminal
/// escaped, as code points: `import` and `merge` write no raw ESC byte.
#[test]
fn import_and_merge_escape_control_characters_in_names() {
    let dir = tempfile::tempdir().unwrap();
    let esc = "\u{1b}[31m";
    let journal = root().join("measurements/h200/qwen3-32b-tp2.csv");
    let named = dir.path().join(format!("a{esc}b.csv"));
    std::fs::copy(&journal, &named).unwrap();
    let (o, _) = run_bounded(synth().arg("import").arg(&named), Duration::from_secs(120));
    assert!(o.status.success(), "{}", text(&o));
    assert!(!o.stdout.contains(&0x1b), "a raw ESC in: {}", text(&o));
    let shown = String::from_utf8(o.stdout).unwrap();
    assert!(overview_line(&shown, "file").ends_with("a<U+001B>[31mb.csv"), "{shown}");

    let device = dir.path().join("device.csv");
    std::fs::write(&device, std::fs::read_to_string(&journal).unwrap().replace("NVIDIA H200", &format!("NV{esc}X")))
        .unwrap();
    let (o, _) = run_bounded(synth().arg("import").arg(&device), Duration::from_secs(120));
    assert!(o.status.success(), "{}", text(&o));
    assert!(!o.stdout.contains(&0x1b), "a raw ESC in: {}", text(&o));
    let shown = String::from_utf8(o.stdout).unwrap();
    assert_eq!(overview_line(&shown, "device"), "sm_90, 132 CUs, NV<U+001B>[31mX", "{shown}");

    let (a, b) = (dir.path().join(format!("one{esc}.csv")), dir.path().join(format!("two{esc}.csv")));
    split_journal(&device, 256, &a, &b);
    let merged = dir.path().join(format!("all{esc}.csv"));
    let (o, _) = run_bounded(synth().arg("merge").arg(&a).arg(&b).arg("--out").arg(&merged), Duration::from_secs(120));
    assert!(o.status.success(), "{}", text(&o));
    assert!(!o.stdout.contains(&0x1b) && !o.stderr.contains(&0x1b), "a raw ESC in: {}", text(&o));
    let shown = String::from_utf8(o.stdout).unwrap();
    assert!(shown.contains("one<U+001B>[31m.csv: ") && shown.contains("two<U+001B>[31m.csv: "), "{shown}");
    assert!(shown.contains("all<U+001B>[31m.csv: 7425 rows"), "{shown}");
    assert!(merged.is_file());
}

/// A FIFO that no program writes to is an error naming it at once; `import` never waits for a writer.
#[test]
fn import_of_a_fifo_without_a_writer_fails_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.csv");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let (o, took) = run_bounded(synth().arg("import").arg(&fifo), Duration::from_secs(60));
    let msg = text(&o);
    assert_eq!(o.status.code(), Some(1), "{msg}");
    assert!(msg.contains("FIFO") && msg.contains("pipe.csv"), "{msg}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    // One a program writes to is read as that program's output (`import <(zcat j.csv.gz)` style). The test
    // holds the FIFO open for reading and writing, so the writer is there before import opens it.
    let writer = std::fs::OpenOptions::new().read(true).write(true).open(&fifo).unwrap();
    // The pipe holds one page: the writer is still there, blocked on the rest, when import opens the FIFO.
    // SAFETY: fcntl on a descriptor this test owns; F_SETPIPE_SZ sets its pipe's capacity only.
    let pipe = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&writer), libc::F_SETPIPE_SZ, 4096) };
    let data = std::fs::read(root().join("measurements/h200/qwen3-32b-tp2.csv")).unwrap();
    assert!(pipe > 0 && data.len() > pipe as usize, "{pipe} {}", data.len());
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        let mut w = writer;
        w.write_all(&data).unwrap();
        // Dropping the only writer ends the data.
    });
    let (o, _) = run_bounded(synth().arg("import").arg(&fifo), Duration::from_secs(60));
    assert!(o.status.success(), "{}", text(&o));
    feeder.join().unwrap();
    let shown = String::from_utf8(o.stdout).unwrap();
    assert_eq!(overview_line(&shown, "rows"), "7425 (354 recheck)", "{shown}");
}
