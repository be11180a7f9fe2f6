//! AITER's MI300X tuned tables: classification training, leave-one-table-out, lossless compression, and the
//! `import` / `compare` / `run --train-tuned` / `compress` commands on them.

use std::path::{Path, PathBuf};
use std::process::Command;

use gemm_synth::catalog::{Candidate, Catalog};
use gemm_synth::compare::TunedTable;
use gemm_synth::compress::{compress, prove};
use gemm_synth::synthesize::Limits;
use gemm_synth::table::read_aiter_csv;
use gemm_synth::tuned::{leave_one_out, rule_agreement, train, AgreeWeight, TunedSet};

const HEADER: &str = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn table(name: &str) -> PathBuf {
    root().join("measurements/mi300x").join(name)
}

fn synth(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_synth")).args(args).output().unwrap()
}

/// The catalog's legacy name of kernel `id`.
fn name_of(id: i32) -> String {
    Catalog::embedded().legacy_by_id(id).unwrap().name.clone()
}

/// A tuned CSV of one layer (N = K = 512) with rows (M, kernelId, us).
fn tuned_csv(dir: &Path, file: &str, rows: &[(u32, i32, f64)], gfx: &str) -> PathBuf {
    let mut text = format!("{HEADER}\n");
    for (m, id, us) in rows {
        text.push_str(&format!("{gfx},304,{m},512,512,ck,{id},0,{us},{},1.0,1.0,0.0\n", name_of(*id)));
    }
    let p = dir.join(file);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn compress_command_writes_a_residual_that_aiter_reads_and_proves_it() {
    let dir = tempfile::tempdir().unwrap();
    // Hand-computed (see compress::tests): with the rule M <= 32 -> #8 else #0, only row 48 (#3) stays.
    let rows = [(16, 8, 5.0), (32, 8, 6.0), (48, 3, 7.25), (64, 0, 8.0), (128, 0, 9.0)];
    let input = tuned_csv(dir.path(), "hand.csv", &rows, "gfx942");
    let rule = dir.path().join("rule.cpp");
    std::fs::write(&rule, "if (M <= 32) { return {8, 0}; } return {0, 0};").unwrap();
    let out = dir.path().join("out");
    let o = synth(&[
        "compress",
        "--tuned",
        input.to_str().unwrap(),
        "--rule",
        rule.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("residual: 1 of 5 rows (20.00%)"), "{stdout}");
    assert!(
        stdout.contains("proof:    128 lookups (1 (N, K) x M = 1..=128), residual + rule vs full table: 0 mismatches"),
        "{stdout}"
    );
    // The residual is the header and row 48, byte for byte as in the input.
    let residual = std::fs::read_to_string(out.join("hand.residual.csv")).unwrap();
    let input_text = std::fs::read_to_string(&input).unwrap();
    let line48 = input_text.lines().find(|l| l.starts_with("gfx942,304,48,")).unwrap();
    assert_eq!(residual, format!("{HEADER}\n{line48}\n"));
    for f in
        ["gemm_a8w8_blockscale_heuristic.h", "dispatch.rs", "rule.json", "gemm_a8w8_blockscale_heuristic_instances.csv"]
    {
        assert!(out.join(f).exists(), "{f} missing");
    }
}

#[test]
fn compress_command_keeps_other_devices_rows_and_names_ambiguous_devices() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = format!("{HEADER}\n");
    for (gfx, m, id) in [("gfx942", 16, 0), ("gfx950", 16, 8), ("gfx942", 32, 0)] {
        let cu = if gfx == "gfx942" { 304 } else { 256 };
        text.push_str(&format!("{gfx},{cu},{m},512,512,ck,{id},0,1.0,{},1.0,1.0,0.0\n", name_of(id)));
    }
    let input = dir.path().join("two.csv");
    std::fs::write(&input, &text).unwrap();
    let out = dir.path().join("out");
    let o = synth(&["compress", "--tuned", input.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("several devices (gfx942:304, gfx950:256)") && err.contains("--device"), "{err}");
    let o = synth(&[
        "compress",
        "--tuned",
        input.to_str().unwrap(),
        "--device",
        "gfx942:304",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The rule trained on the two gfx942 rows returns #0; both go, the gfx950 row stays.
    let residual = std::fs::read_to_string(out.join("two.residual.csv")).unwrap();
    assert_eq!(residual.lines().count(), 2, "{residual}");
    assert!(residual.lines().nth(1).unwrap().starts_with("gfx950,256,16,"));
}

/// A real table, exhaustively: every (N, K) × M = 1..=80000 (480,000 lookups). With a one-leaf rule the
/// residual is what padding alone cannot drop; with a rule trained on the table it is smaller, and both
/// are lossless.
#[test]
fn real_qwen3_vl_235b_table_compresses_losslessly() {
    let cat = Catalog::embedded();
    let set = TunedSet::load(&table("a8w8_blockscale_tuned_gemm_qwen3_vl_235b.csv"), &cat, ("gfx942", 304)).unwrap();
    assert_eq!(set.rows.len(), 3903);
    let full = set.table();
    let always0 = gemm_synth::rule::parse_any("return {0, 0};", &cat).unwrap();
    let kept = compress(&full, &always0, &cat);
    let mut residual = TunedTable::new("residual");
    for s in &kept {
        residual.insert(*s, full.get(s.m, s.n, s.k).unwrap());
    }
    let p = prove(&full, &residual, &always0, &cat);
    assert_eq!((p.layers, p.max_m, p.lookups), (6, 80000, 480_000));
    assert!(p.holds(), "{p:?}");
    // Every row whose own kernel is not #0 must stay (its exact M reaches it first and the rule says #0).
    let not0 = set.rows.iter().filter(|r| r.entry.candidate != Candidate::new(0, 0)).count();
    assert!(kept.len() >= not0 && kept.len() < set.rows.len() / 5, "{} kept, {not0} not #0", kept.len());
    // Dropping any single kept row breaks the proof (the residual is minimal under one-row removal).
    let victim = *kept.iter().next().unwrap();
    let mut broken = residual.clone();
    broken.remove(victim);
    assert!(!prove(&full, &broken, &always0, &cat).holds());
}

#[test]
fn classification_training_and_leave_one_table_out_on_hand_made_tables() {
    let cat = Catalog::embedded();
    let dir = tempfile::tempdir().unwrap();
    // Two tables that agree: #8 up to M = 64, #0 above; a third where M = 48 is #3.
    let make = |file: &str, odd: bool| {
        let rows: Vec<(u32, i32, f64)> = (1..=32u32)
            .map(|i| {
                let m = i * 16;
                let id = if odd && m == 48 {
                    3
                } else if m <= 64 {
                    8
                } else {
                    0
                };
                (m, id, f64::from(m))
            })
            .collect();
        TunedSet::load(&tuned_csv(dir.path(), file, &rows, "gfx942"), &cat, ("gfx942", 304)).unwrap()
    };
    let sets = vec![make("a.csv", false), make("b.csv", false), make("c.csv", true)];
    let limits = Limits { max_leaves: 4, ..Limits::default() };
    let loto = leave_one_out(&sets, &cat, &limits, &[AgreeWeight::Uniform, AgreeWeight::Time]).unwrap();
    assert_eq!(loto.len(), 6);
    for r in &loto {
        // Trained on two tables, the rule is M <= 64 -> #8 else #0: all 32 rows of a and b, 31 of c.
        let expect = if r.held_out == "c" { 31 } else { 32 };
        assert_eq!(r.rule_agreement.agree, expect, "{} {:?}", r.held_out, r.objective);
        assert_eq!(r.kernel0_agreement.agree, 28);
        // The default kernel (#7) is never tuned here.
        assert_eq!(r.default_agreement.agree, 0);
    }
    let all: Vec<&TunedSet> = sets.iter().collect();
    let s = train(&all, &cat, &limits, AgreeWeight::Uniform).unwrap();
    assert_eq!(rule_agreement(&s.rule, &sets[0], &cat).agree, 32);
}

#[test]
fn run_train_tuned_writes_the_rule_marked_as_trained_on_gfx942_tables() {
    let dir = tempfile::tempdir().unwrap();
    let rows = |odd: i32| -> Vec<(u32, i32, f64)> {
        (1..=24u32)
            .map(|i| {
                (
                    i * 16,
                    if i * 16 <= 64 {
                        8
                    } else if i == 10 {
                        odd
                    } else {
                        0
                    },
                    f64::from(i),
                )
            })
            .collect()
    };
    let a = tuned_csv(dir.path(), "ta.csv", &rows(0), "gfx942");
    let b = tuned_csv(dir.path(), "tb.csv", &rows(3), "gfx942");
    // Without --out it refuses (generated/ holds the H200 rule).
    let o = synth(&["run", "--train-tuned", a.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--out"));
    let out = dir.path().join("rule");
    let o = synth(&[
        "run",
        "--train-tuned",
        a.to_str().unwrap(),
        "--train-tuned",
        b.to_str().unwrap(),
        "--max-leaves",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("leave-one-table-out"), "{stdout}");
    let header = std::fs::read_to_string(out.join("gemm_a8w8_blockscale_heuristic.h")).unwrap();
    assert!(header.contains("trained on gfx942 tables"), "{header}");
    let loto = std::fs::read_to_string(out.join("leave_one_table_out.csv")).unwrap();
    // Two tables × two objectives.
    assert_eq!(loto.lines().count(), 5, "{loto}");
    // ta held out: the 2-leaf rule from tb (M <= 64 -> #8, else #0; its one #3 row needs more leaves) agrees on
    // 24/24.
    assert!(loto.lines().any(|l| l.starts_with("ta,uniform,") && l.split(',').nth(5) == Some("1.0000")), "{loto}");
}

#[test]
fn import_summarizes_winners_per_m_band_for_every_committed_table() {
    for f in [
        "a8w8_blockscale_tuned_gemm_qwen3_vl_32b.csv",
        "a8w8_blockscale_tuned_gemm_qwen36_27b.csv",
        "a8w8_blockscale_tuned_gemm_qwen3_vl_235b.csv",
        "a8w8_blockscale_tuned_gemm_ds_v3_gfx942.csv",
    ] {
        let o = synth(&["import", table(f).to_str().unwrap()]);
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{f}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(stdout.contains("winners per M band:"), "{stdout}");
        assert!(stdout.contains("1-64") && stdout.contains("257-1024"), "{stdout}");
    }
    let rows = read_aiter_csv(&table("a8w8_blockscale_tuned_gemm_ds_v3_gfx942.csv"), &Catalog::embedded()).unwrap();
    assert_eq!(rows.len(), 295);
    assert!(rows.iter().all(|r| r.gfx == "gfx942" && r.cu_num == 304));
}

#[test]
fn compare_on_a_tuned_table_reports_agreement_of_rules_and_the_published_rule() {
    let dir = tempfile::tempdir().unwrap();
    let rows = [(16, 8, 5.0), (32, 8, 6.0), (2048, 0, 7.0), (4096, 0, 9.0)];
    let input = tuned_csv(dir.path(), "t.csv", &rows, "gfx942");
    let rule = dir.path().join("r.cpp");
    std::fs::write(&rule, "if (M <= 16) { return {8, 0}; } return {0, 0};").unwrap();
    let o = synth(&["compare", "--dataset", input.to_str().unwrap(), "--rule", rule.to_str().unwrap(), "--published"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("agreement with the tuned (kernel, splitK) of 4 rows"), "{stdout}");
    // The rule agrees on 3 of 4 rows (M = 32 is #8): 0.75; 2 of 2 at M <= 1024 → 0.5; time 21/27.
    let line = stdout.lines().find(|l| l.contains("r.cpp") && l.contains("0.7500")).expect("rule line");
    assert!(line.contains("0.5000") && line.contains(&format!("{:.4}", 21.0 / 27.0)), "{line}");
    assert!(stdout.lines().any(|l| l.starts_with("published-rule")), "{stdout}");
    let k0 = stdout.lines().find(|l| l.starts_with("kernel 0")).unwrap();
    assert!(k0.contains("0.5000") && k0.contains("0.0000"), "{k0}");
}
