//! AITER's MI300X tuned tables: classification training, leave-one-table-out, lossless compression, and the
//! `import` / `compare` / `run --train-tuned` / `compress` commands on them.

use std::path::{Path, PathBuf};
use std::process::Command;

use synth_core::catalog::Catalog;
use synth_core::compare::TunedTable;
use synth_core::compress::{compress, prove, target_rows};
use synth_core::synthesize::Limits;
use synth_core::table::read_aiter_csv;
use synth_core::tuned::{leave_one_out, rule_agreement, train, AgreeWeight, TunedSet};

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

/// A tuned CSV of one layer (N = K = 512) with rows (M, kernelId, us), plus AITER's default kernel (#7)
/// tuned at M = 16 of another layer (N = K = 256), which the instance list needs a measured row of.
fn tuned_csv(dir: &Path, file: &str, rows: &[(u32, i32, f64)], gfx: &str) -> PathBuf {
    let mut text = format!("{HEADER}\n{gfx},304,16,256,256,ck,7,0,1.5,{},1.0,1.0,0.0\n", name_of(7));
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
    // Hand-computed (see compress::tests): with the rule M <= 32 -> #8 else #0 on N = 512, only row 48 (#3)
    // stays; the (N = 256) layer's one row goes, since the rule returns the default kernel there, as the
    // full table does for every M of that layer (M <= 16 by its row, the rest by AITER's miss).
    let rows = [(16, 8, 5.0), (32, 8, 6.0), (48, 3, 7.25), (64, 0, 8.0), (128, 0, 9.0)];
    let input = tuned_csv(dir.path(), "hand.csv", &rows, "gfx942");
    let rule = dir.path().join("rule.cpp");
    std::fs::write(&rule, "if (N <= 256) { return kernel(-1); } if (M <= 32) { return kernel(8); } return kernel(0);")
        .unwrap();
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
    assert!(stdout.contains("residual: 1 of 6 rows (16.67%)"), "{stdout}");
    assert!(
        stdout.contains("proof:    256 lookups (2 (N, K) x M = 1..=128), residual + rule vs full table: 0 mismatches"),
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
    for (gfx, m, n, id) in
        [("gfx942", 16, 512, 0), ("gfx950", 16, 512, 8), ("gfx942", 32, 512, 0), ("gfx942", 16, 256, 7)]
    {
        let cu = if gfx == "gfx942" { 304 } else { 256 };
        text.push_str(&format!("{gfx},{cu},{m},{n},{n},ck,{id},0,1.0,{},1.0,1.0,0.0\n", name_of(id)));
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
    // The rule trained on the gfx942 lookup answers returns #7 on N = 256 and #0 on N = 512; every gfx942 row
    // goes, the gfx950 row stays.
    let residual = std::fs::read_to_string(out.join("two.residual.csv")).unwrap();
    assert_eq!(residual.lines().count(), 2, "{residual}");
    assert!(residual.lines().nth(1).unwrap().starts_with("gfx950,256,16,"));
}

/// A real table, exhaustively: every (N, K) × M = 1..=80000 (480,000 lookups). Its N = 4096, K = 2048 layer
/// has no row for most M below 16640, where AITER runs the default kernel: a one-leaf rule cannot be made
/// lossless by any residual, and the rule trained on the lookup answers can, with a residual under 5%.
#[test]
fn real_qwen3_vl_235b_table_compresses_losslessly() {
    let cat = Catalog::embedded();
    let set = TunedSet::load(&table("a8w8_blockscale_tuned_gemm_qwen3_vl_235b.csv"), &cat, ("gfx942", 304)).unwrap();
    assert_eq!(set.rows.len(), 3903);
    let full = set.table();
    let residual_of = |kept: &std::collections::BTreeSet<synth_core::table::Shape>| {
        let mut residual = TunedTable::new("residual");
        for s in kept {
            residual.insert(*s, full.get(s.m, s.n, s.k).unwrap());
        }
        residual
    };
    let always0 = synth_core::rule::parse_any("return kernel(0);", &cat).unwrap();
    let p = prove(&full, &residual_of(&compress(&full, &always0, &cat)), &always0, &cat);
    assert_eq!((p.layers, p.max_m, p.lookups), (6, 80000, 480_000));
    assert!(!p.holds());
    assert_eq!((p.first_mismatches[0].shape.n, p.first_mismatches[0].shape.k), (4096, 2048));

    let targets = TunedSet { rows: target_rows(&full, &cat), ..set.clone() };
    let limits = Limits { max_leaves: 16, ..Limits::default() };
    let rule = train(&[&targets], &cat, &limits, AgreeWeight::Time).unwrap().rule;
    assert!(rule.num_leaves() <= 16);
    let kept = compress(&full, &rule, &cat);
    let residual = residual_of(&kept);
    let p = prove(&full, &residual, &rule, &cat);
    assert!(p.holds(), "{p:?}");
    assert!(kept.len() * 20 <= set.rows.len(), "{} of {} rows kept", kept.len(), set.rows.len());
    // Dropping any one kept row breaks the proof (the greedy stops only when no single removal is lossless).
    for victim in kept.iter().take(5) {
        let mut broken = residual.clone();
        broken.remove(*victim);
        assert!(!prove(&full, &broken, &rule, &cat).holds(), "{victim} was not needed");
    }
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
        // Trained on two tables, the rule is N = 256 -> #7, M <= 64 -> #8, else #0: all 33 rows of a and b, 32
        // of c (its M = 48 row is #3; on a or b held out, M = 48 ties #8 and #3 and the tree takes no split
        // that gains nothing).
        let expect = if r.held_out == "c" { 32 } else { 33 };
        assert_eq!(r.rule_agreement.agree, expect, "{} {:?}", r.held_out, r.objective);
        assert_eq!(r.rule_agreement.rows, 33);
        assert_eq!(r.kernel0_agreement.agree, 28);
        // The default kernel (#7) is tuned on the N = 256 row only.
        assert_eq!(r.default_agreement.agree, 1);
    }
    let all: Vec<&TunedSet> = sets.iter().collect();
    let s = train(&all, &cat, &limits, AgreeWeight::Uniform).unwrap();
    assert_eq!(rule_agreement(&s.rule, &sets[0], &cat).agree, 33);
}

#[test]
fn wave_contrasts_compare_the_rounds_of_two_tiles() {
    use synth_core::catalog::Candidate;
    use synth_core::synthesize::features::{for_candidates, wave_contrasts, FeatureSet};
    // Tiles of #0 (128x128x128), #2 (64x128x128) and #1 (128x64x128); a repeated tile adds no pair.
    let f = wave_contrasts(&[(128, 128, 128), (64, 128, 128), (128, 64, 128), (64, 128, 256)], 304);
    let names: Vec<&str> = f.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(
        names,
        ["waves(128x128) - waves(64x128)", "waves(128x128) - waves(128x64)", "waves(64x128) - waves(128x64)"]
    );
    // N = 5120, M = 928: 128x128 has 8·40 = 320 tiles = 2 waves, 64x128 15·40 = 600 = 2 waves: 0.
    // M = 992: 64x128 has 16·40 = 640 tiles = 3 waves: -1. 128x64: 8·80 = 640 = 3 waves.
    assert_eq!(f[0].eval(928, 5120, 5120), 0);
    assert_eq!(f[0].eval(992, 5120, 5120), -1);
    assert_eq!(f[1].eval(992, 5120, 5120), -1);
    assert_eq!(f[2].eval(992, 5120, 5120), 0);
    // The contrast set is the machine set plus the pairs of the candidates' tiles.
    let cat = Catalog::embedded();
    let cands = [Candidate::new(0, 0), Candidate::new(2, 0), Candidate::new(1, 0)];
    let machine = for_candidates(FeatureSet::Machine, &cands, &cat, 304);
    let contrast = for_candidates(FeatureSet::Contrast, &cands, &cat, 304);
    assert_eq!(contrast.len(), machine.len() + 3);
    assert_eq!(contrast[..machine.len()], machine[..]);
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
    // The AITER patch beside it, from the same provenance, adding that header.
    let patch = std::fs::read_to_string(out.join("aiter/gemm_a8w8_blockscale_heuristic.patch")).unwrap();
    assert!(patch.contains("trained on gfx942 tables"), "{patch}");
    assert!(patch.contains("+++ b/csrc/ck_gemm_a8w8_blockscale/include/gemm_a8w8_blockscale_heuristic.h"), "{patch}");
    let loto = std::fs::read_to_string(out.join("leave_one_table_out.csv")).unwrap();
    // Two tables × four objectives (uniform, time, band, table-band).
    assert_eq!(loto.lines().count(), 9, "{loto}");
    assert!(loto.lines().next().unwrap().ends_with(",ceiling,ceiling_m_le_1024,in_table,in_table_m_le_1024"), "{loto}");
    // The ceiling: every tuned choice of ta (#0, #7, #8) is one of tb's candidates; tb's #3 row (M = 160) is
    // not one of ta's, so at most 24 of tb's 25 rows agree (all 25 have M <= 1024).
    for l in loto.lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        let want = if f[0] == "ta" { ("1.0000", "1.0000") } else { ("0.9600", "0.9600") };
        assert_eq!((f[12], f[13]), want, "{l}");
    }
    // In-table, uniformly weighted (all 25 rows have M <= 1024): ta alone holds three choices (the default
    // row at N = 256, #8 for M <= 64, #0 for the 20 others), so a 2-leaf rule fits 24 of its 25 rows at best
    // (#8 and #0); tb holds four (its #3 row at M = 160 besides), so 4 + 19 = 23 of 25.
    for l in loto.lines().skip(1).filter(|l| l.split(',').nth(1) == Some("uniform")) {
        let f: Vec<&str> = l.split(',').collect();
        let want = if f[0] == "ta" { ("0.9600", "0.9600") } else { ("0.9200", "0.9200") };
        assert_eq!((f[14], f[15]), want, "{l}");
    }
    // A flag of the latency-table job given with tables is one error naming it, and nothing is written;
    // a tuned-table flag without tables too.
    let o = synth(&["run", "--train-tuned", a.to_str().unwrap(), "--weight", "log", "--out", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--weight does not apply to a training on tuned tables"), "{err}");
    let o = synth(&["run", "--agree-weight", "band", "--out", dir.path().join("nothing").to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--agree-weight applies to a training on tuned tables only"), "{err}");
    assert!(!dir.path().join("nothing").exists());
    // --prune-from must be above the leaf budget; above it, the run writes the same set of files.
    let pruned = dir.path().join("pruned");
    let args = |p: &str| {
        let v =
            ["run", "--train-tuned", a.to_str().unwrap(), "--train-tuned", b.to_str().unwrap(), "--max-leaves", "2"];
        let mut v: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        v.extend(["--prune-from".into(), p.into(), "--out".into(), pruned.to_str().unwrap().into()]);
        v
    };
    let o = synth(&args("2").iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--prune-from 2 is not above --max-leaves 2"), "{err}");
    assert!(!pruned.exists());
    let o = synth(&args("6").iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(pruned.join("leave_one_table_out.csv").exists() && pruned.join("rule.json").exists());
    // ta held out: the 2-leaf rule from tb (M <= 64 -> #8, else #0; its #3 row and its #7 row need more
    // leaves) agrees on 24 of ta's 25 rows.
    assert!(loto.lines().any(|l| l.starts_with("ta,uniform,") && l.split(',').nth(5) == Some("0.9600")), "{loto}");
}

#[test]
fn import_summarizes_winners_per_m_band_for_every_committed_table() {
    for f in [
        "a8w8_blockscale_tuned_gemm_qwen3_vl_32b.csv",
        "a8w8_blockscale_tuned_gemm_qwen36_27b.csv",
        "a8w8_blockscale_tuned_gemm_qwen3_vl_235b.csv",
        "a8w8_blockscale_tuned_gemm_ds_v3_gfx942.csv",
        "a8w8_blockscale_tuned_gemm_glm5_1.csv",
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
    std::fs::write(&rule, "if (N <= 256) { return kernel(-1); } if (M <= 16) { return kernel(8); } return kernel(0);")
        .unwrap();
    let o = synth(&["compare", "--dataset", input.to_str().unwrap(), "--rule", rule.to_str().unwrap(), "--published"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("agreement with the tuned (kernel, splitK) of 5 rows"), "{stdout}");
    // The rule agrees on 4 of 5 rows (M = 32 is #8): 0.8; 2 of the 3 at M <= 1024; time (1.5 + 5 + 7 + 9) / 28.5.
    let line = stdout.lines().find(|l| l.contains("r.cpp") && l.contains("0.8000")).expect("rule line");
    assert!(line.contains("0.6667") && line.contains(&format!("{:.4}", 22.5 / 28.5)), "{line}");
    assert!(stdout.lines().any(|l| l.starts_with("published-rule")), "{stdout}");
    let k0 = stdout.lines().find(|l| l.starts_with("kernel 0")).unwrap();
    assert!(k0.contains("0.4000") && k0.contains("0.0000"), "{k0}");
}

#[test]
fn search_train_tuned_runs_the_agent_loop_on_agreement_and_writes_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<(u32, i32, f64)> = (1..=24u32).map(|i| (i * 16, if i * 16 <= 64 { 8 } else { 0 }, 1.0)).collect();
    let a = tuned_csv(dir.path(), "sa.csv", &rows, "gfx942");
    let out = dir.path().join("s");
    let args = ["search", "--train-tuned", a.to_str().unwrap(), "--iterations", "1", "--offspring", "2", "--quiet"];
    let o = synth(&args);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--out"));
    let mut with_out = args.to_vec();
    with_out.extend(["--max-leaves", "3", "--out", out.to_str().unwrap()]);
    let o = synth(&with_out);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    // Three leaves separate N = 256 (#7), M <= 64 (#8) and the rest (#0): every row agrees.
    assert!(stdout.contains("in-sample agreement with sa: 1.0000"), "{stdout}");
    let header = std::fs::read_to_string(out.join("gemm_a8w8_blockscale_heuristic.h")).unwrap();
    assert!(header.contains("trained on gfx942 tables"), "{header}");
    let patch = std::fs::read_to_string(out.join("aiter/gemm_a8w8_blockscale_heuristic.patch")).unwrap();
    assert!(patch.contains("trained on gfx942 tables"), "{patch}");
}
