//! The multi-model dataset and job: the manifest and several journals as one matrix, vendor reference rows,
//! the split-K guard against the bench's own plan, AITER's lookup-then-rule policy, and the committed rule
//! on every committed journal.

use std::path::{Path, PathBuf};

use gemm_synth::app::manifest::DEFAULT_MANIFEST;
use gemm_synth::app::multi::unmeasured_picks;
use synth_core::catalog::{Candidate, Catalog};
use synth_core::compare::{evaluate, Policy, TunedTable};
use synth_core::manifest::MultiData;
use synth_core::rule::{Leaf, Node, Rule};
use synth_core::synthesize::guard::Guards;
use synth_core::synthesize::{try_synthesize, Limits};
use synth_core::table::multi::load_many;
use synth_core::table::{parse_aiter_csv, Cell, LatencyMatrix, Shape};
use synth_measure::measure::plan::split_levels;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

const HEADER: &str = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio,status";
const ID8: &str =
    "a8w8_blockscale_1x128x128_256x16x64x256_16x16_16x16_1x1_16x16x1_16x16x1_1x16x1x16_4_1x1_intrawave_v1";

#[test]
fn vendor_rows_are_a_reference_never_a_candidate() {
    let text = format!(
        "{HEADER}\nsm_90,132,16,5120,4096,ck,8,0,20.0,{ID8},1,1,0,ok\n\
         sm_90,132,16,5120,4096,vendor,0,0,10.0,vendor_scaled_mm,1,1,0,ok\n\
         sm_90,132,1,5120,4096,vendor,0,0,,vendor_scaled_mm,,,0,fail:unsupported\n"
    );
    let cat = Catalog::embedded();
    let rows = parse_aiter_csv(text.as_bytes(), "v.csv", &cat).unwrap();
    assert_eq!(rows.len(), 3);
    let m = LatencyMatrix::from_rows(&rows).unwrap();
    assert_eq!(m.candidates, vec![Candidate::new(8, 0)]);
    assert_eq!(m.shapes, vec![Shape::new(16, 5120, 4096)]);
    let v = synth_core::table::multi::vendor_times(&rows);
    assert_eq!(v.get(&Shape::new(16, 5120, 4096)), Some(&Cell::Ok(10.0)));
    assert!(matches!(v.get(&Shape::new(1, 5120, 4096)), Some(Cell::Invalid(_))));
    let (t, _, _) = TunedTable::from_rows(&rows, &cat, None, "v.csv");
    assert_eq!(t.len(), 1, "the vendor row is not a tuned row");
    // A vendor row with a kernel id or split is rejected, naming the line.
    let bad = format!("{HEADER}\nsm_90,132,16,5120,4096,vendor,3,0,10.0,vendor_scaled_mm,1,1,0,ok\n");
    let e = parse_aiter_csv(bad.as_bytes(), "v.csv", &cat).unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
    assert!(e.to_string().contains("kernelId 0"), "{e}");
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn several_journals_are_one_matrix_and_a_cell_in_two_files_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.csv", &format!("{HEADER}\nsm_90,132,16,5120,4096,ck,8,0,20.0,{ID8},1,1,0,ok\n"));
    let b = write(dir.path(), "b.csv", &format!("{HEADER}\nsm_90,132,32,1024,4096,ck,8,0,21.0,{ID8},1,1,0,ok\n"));
    let cat = Catalog::embedded();
    let (m, vendor) = load_many(&[a.clone(), b.clone()], &cat).unwrap();
    assert!(vendor.is_empty());
    assert_eq!(m.shapes, vec![Shape::new(32, 1024, 4096), Shape::new(16, 5120, 4096)]);
    assert_eq!(m.us(1, 0), Some(20.0));
    assert_eq!(m.us(0, 0), Some(21.0));
    let c = write(dir.path(), "c.csv", &format!("{HEADER}\nsm_90,132,16,5120,4096,ck,8,0,22.0,{ID8},1,1,0,ok\n"));
    let e = load_many(&[a, c], &cat).unwrap_err().to_string();
    assert!(e.contains("c.csv") && e.contains("a.csv") && e.contains("16x5120x4096"), "{e}");
    let d = write(dir.path(), "d.csv", &format!("{HEADER}\ngfx942,304,64,5120,4096,ck,8,0,22.0,{ID8},1,1,0,ok\n"));
    let e = load_many(&[b, d], &cat).unwrap_err().to_string();
    assert!(e.contains("d.csv") && e.contains("one device"), "{e}");
}

#[test]
fn split_k_guard_returns_only_levels_the_bench_plans() {
    // Differential: for every legacy instance and split level, the guarded leaf's split on a shape must be
    // one of the levels `measure::plan::split_levels` plans for that shape.
    let cat = Catalog::embedded();
    let m = LatencyMatrix::new("sm_90", 132, None, vec![Shape::new(16, 5120, 4096)], vec![Candidate::new(2, 0)]);
    let g = Guards::new(&m, &cat, &[0], 8);
    let ms: Vec<u32> = (1..=300).chain((301..20000).step_by(97)).collect();
    let nks = [(128, 128), (1280, 8192), (5120, 4096), (7392, 8192), (51200, 5120), (3072, 256), (4096, 384)];
    for inst in cat.legacy_candidates() {
        let p = inst.legacy_params().unwrap();
        for s in 1..=3 {
            let (node, guarded) = g.apply(&Node::Leaf(Leaf::new(inst.id, s)));
            assert_eq!(guarded, 1);
            for &(n, k) in &nks {
                for &mm in &ms {
                    let leaf = node.eval(mm, n, k);
                    assert_eq!(leaf.kernel_id, inst.id);
                    let shape = Shape::new(mm, n, k);
                    let planned = split_levels(shape, p.m_per_block, p.n_per_block, p.k_per_block, 132);
                    assert!(
                        planned.contains(&leaf.split_k),
                        "#{} sk{s} on {shape}: returns sk{}, planned {planned:?}",
                        inst.id,
                        leaf.split_k
                    );
                    // The top level is kept wherever the bench measures it.
                    if planned.contains(&s) {
                        assert_eq!(leaf.split_k, s, "#{} on {shape}", inst.id);
                    }
                }
            }
        }
    }
    // Hand-computed: kernel 2 is 64x128x128; M=200, N=5120 → 4·40 = 160 tiles ≥ 132: no split;
    // M=64 → 40 tiles: sk1 (80 < 132 → sk2 planned too? 40·2 = 80 < 132, K/128 = 32 ≥ 4) → sk2 kept.
    let (node, _) = g.apply(&Node::Leaf(Leaf::new(2, 2)));
    assert_eq!(node.eval(200, 5120, 4096), Leaf::new(2, 0));
    assert_eq!(node.eval(64, 5120, 4096), Leaf::new(2, 2));
    // M=128 → 2·40 = 80 tiles: sk1 planned (80 < 132), sk2 not (160 ≥ 132).
    assert_eq!(node.eval(128, 5120, 4096), Leaf::new(2, 1));
    // Split-K 0 leaves are left alone.
    assert_eq!(g.apply(&Node::Leaf(Leaf::new(2, 0))), (Node::Leaf(Leaf::new(2, 0)), 0));
}

#[test]
fn tuned_then_rule_uses_the_table_and_the_rule_where_it_misses() {
    let cat = Catalog::embedded();
    let shapes = vec![Shape::new(16, 5120, 4096), Shape::new(17, 5120, 4096), Shape::new(600, 5120, 4096)];
    let cands = vec![Candidate::new(2, 0), Candidate::new(7, 0), Candidate::new(8, 0)];
    let mut m = LatencyMatrix::new("sm_90", 132, None, shapes, cands);
    for s in 0..3 {
        for c in 0..3 {
            m.set(s, c, Cell::Ok(10.0 + (s * 3 + c) as f64));
        }
    }
    m.set(0, 2, Cell::Ok(1.0)); // #8 is best on M=16, the only tuned shape
    let table = TunedTable::from_matrix(&m, &[0], "one shape");
    let rule = Rule::new(Node::Leaf(Leaf::new(2, 0)));
    let policies = vec![
        Policy::Default,
        Policy::Tuned { name: "tuned".into(), table: table.clone() },
        Policy::TunedRule { name: "tuned→rule".into(), table, rule },
    ];
    let r = evaluate(&m, &cat, &policies, &[0, 1, 2]);
    let picks = |p: usize| r.policies[p].outcomes.iter().map(|o| o.pick.candidate.kernel_id).collect::<Vec<_>>();
    // M=17 pads (fine) to 32, which has no row; coarse to 32 as well: both lookups miss at 17 and 600.
    assert_eq!(picks(1), vec![8, 7, 7]);
    assert_eq!(picks(2), vec![8, 2, 2]);
}

fn committed() -> MultiData {
    gemm_synth::app::manifest::open(&root().join(DEFAULT_MANIFEST)).unwrap()
}

#[test]
fn manifest_configurations_hold_their_layers() {
    let d = committed();
    assert_eq!(d.configs.len(), 11);
    assert!(d.matrix.layers().len() >= 38);
    let q = d.configs.iter().find(|c| c.name == "qwen3-32b-tp2").unwrap();
    assert_eq!((q.grid.len(), q.off_grid.len()), (320, 80));
    // Qwen2.5-72B: qkv and o from the Llama-3.1-70B journals, gate_up from its own; down cannot run.
    let q72 = d.configs.iter().find(|c| c.name == "qwen2.5-72b-tp4").unwrap();
    assert_eq!(q72.layers.len(), 3);
    assert_eq!(q72.shapes().len(), 300);
    assert!(!d.vendor.is_empty());
    // Training: 4 configurations × 4 layers × 10 M = 160 shapes, grid M only.
    let train = d.sample(&d.training_configs(None), &Default::default(), 10, 0);
    assert_eq!(train.len(), 160);
    assert!(train.iter().all(|s| d.configs.iter().any(|c| c.grid.contains(s))));
}

#[test]
fn committed_rule_picks_only_measured_cells_on_every_journal() {
    // The committed CK rule's data: the zoo manifest (the dense journals with their completions, the zoo's).
    let d = gemm_synth::app::manifest::open(&root().join("measurements/zoo/datasets.toml")).unwrap();
    let rule = synth_core::rule::load(&root().join("generated/rule.json"), &d.catalog).unwrap();
    let bad = unmeasured_picks(&d, &rule);
    assert!(bad.is_empty(), "{} unmeasured picks, first {:?}", bad.len(), bad.first());
}

#[test]
fn rules_trained_on_one_configuration_pick_only_measured_cells_everywhere() {
    // Trained on few shapes of one configuration (where the old wave-boundary guard let split-K leak onto
    // other models' shapes), the guarded rule must still pick measured cells on every shape of every journal.
    let d = committed();
    let q = d.configs.iter().position(|c| c.name == "qwen3-32b-tp2").unwrap();
    let train = d.sample(&[q], &Default::default(), 10, 0);
    for leaves in [4, 8, 16] {
        let limits = Limits { max_leaves: leaves, max_instances: Some(6), ..Limits::default() };
        let s = try_synthesize(&d.matrix, &d.catalog, &train, None, &limits).unwrap();
        let bad = unmeasured_picks(&d, &s.rule);
        assert!(bad.is_empty(), "{leaves} leaves: {} unmeasured picks, first {:?}", bad.len(), bad.first());
    }
}

#[test]
fn a_session_opens_several_datasets_and_a_directory() {
    use gemm_synth::app::args::DataArgs;
    use gemm_synth::app::session::{Scope, Session};
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.csv", &format!("{HEADER}\nsm_90,132,16,5120,4096,ck,8,0,20.0,{ID8},1,1,0,ok\n"));
    write(
        dir.path(),
        "b.csv",
        &format!(
            "{HEADER}\nsm_90,132,32,1024,4096,ck,8,0,21.0,{ID8},1,1,0,ok\n\
             sm_90,132,32,1024,4096,vendor,0,0,7.0,vendor_scaled_mm,1,1,0,ok\n"
        ),
    );
    let data = DataArgs { dataset: vec![dir.path().to_path_buf()], ..DataArgs::default() };
    let s = Session::open(&data, Scope::EveryShape).unwrap();
    assert_eq!(s.shapes.len(), 2);
    assert_eq!(s.vendor.get(&Shape::new(32, 1024, 4096)), Some(&Cell::Ok(7.0)));
    let data = DataArgs { dataset: vec![a, dir.path().join("absent.csv")], ..DataArgs::default() };
    let e = Session::open(&data, Scope::EveryShape).unwrap_err().to_string();
    assert!(e.contains("absent.csv") && e.contains("does not exist"), "{e}");
}

/// A two-configuration manifest over one hand-made journal: Llama-3.1-8B TP=1's o_proj (4096, 4096) and
/// Qwen3-32B TP=2's o_proj (5120, 4096), two M values each, kernels 7 (the default) and 8.
fn tiny_manifest(dir: &Path) -> (PathBuf, PathBuf) {
    let cat = Catalog::embedded();
    let id7 = &cat.legacy_by_id(7).unwrap().name;
    let row = |m: u32, n: u32, id: i32, us: f64| {
        let name = if id == 7 { id7.as_str() } else { ID8 };
        format!("sm_90,132,{m},{n},4096,ck,{id},0,{us},{name},1,1,0,ok\n")
    };
    let mut j = format!("{HEADER}\n");
    for (m, n, t7, t8) in [(16, 4096, 10.0, 5.0), (64, 4096, 8.0, 16.0), (16, 5120, 10.0, 40.0), (64, 5120, 9.0, 3.0)] {
        j.push_str(&row(m, n, 7, t7));
        j.push_str(&row(m, n, 8, t8));
    }
    write(dir, "j.csv", &j);
    let manifest = write(
        dir,
        "m.toml",
        "off_grid_m = []\ntrain_pool = [\"a\", \"b\"]\ntrain_configs = 1\nvendor = []\n\
         [[config]]\nname = \"a\"\nmodel = \"llama-3.1-8b\"\ntp = 1\njournals = [\"j.csv\"]\n\
         [[config]]\nname = \"b\"\nmodel = \"qwen3-32b\"\ntp = 2\njournals = [\"j.csv\"]\n",
    );
    let rule = write(dir, "r.json", &synth_core::rule::to_json(&Rule::new(Node::Leaf(Leaf::new(8, 0)))));
    (manifest, rule)
}

fn synth(args: &[&str], cwd: &Path) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_synth")).args(args).current_dir(cwd).output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// The row of `config` in a per-configuration table: its numbers.
fn row_numbers(text: &str, config: &str) -> Vec<f64> {
    let line = text.lines().find(|l| l.split_whitespace().next() == Some(config)).unwrap_or_else(|| panic!("{text}"));
    line.split_whitespace().skip(1).filter_map(|w| w.parse().ok()).collect()
}

#[test]
fn drift_and_compare_score_each_configuration_of_a_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let (manifest, rule) = tiny_manifest(dir.path());
    let (m, r) = (manifest.to_str().unwrap(), rule.to_str().unwrap());
    // Always #8: a = sqrt(5/5 · 8/16) = 0.707, b = sqrt(10/40 · 3/3) = 0.500; the default (#7):
    // a = sqrt(5/10 · 8/8) = 0.707, b = sqrt(10/10 · 3/9) = 0.577; all four shapes (1·0.5·0.25·1)^(1/4) = 0.595.
    let (ok, text) = synth(&["drift", "--dataset", m, "--rule", r, "--min-fraction", "0.6"], dir.path());
    assert!(!ok, "{text}");
    // columns: shapes, default, rule, oracle, unusable
    assert_eq!(row_numbers(&text, "a"), vec![2.0, 0.707, 0.707, 1.0, 0.0], "{text}");
    assert_eq!(row_numbers(&text, "b"), vec![2.0, 0.577, 0.5, 1.0, 0.0], "{text}");
    assert!(text.contains("b: fraction of oracle 0.500 is below --min-fraction 0.6"), "{text}");
    assert!(!text.contains("a: fraction of oracle"), "{text}");
    assert!(text.contains("fraction of oracle 0.595"), "{text}");
    let (ok, text) = synth(&["drift", "--dataset", m, "--rule", r, "--min-fraction", "0.5"], dir.path());
    assert!(ok, "{text}");
    // A baseline manifest: the same data, so no configuration moved.
    let (ok, text) =
        synth(&["drift", "--dataset", m, "--baseline", m, "--rule", r, "--min-fraction", "0.5"], dir.path());
    assert!(ok && text.contains("baseline 0.500 -> 0.500 (+0.000)"), "{text}");

    let (ok, text) = synth(&["compare", "--dataset", m, "--rule", r, "--csv", "e.csv"], dir.path());
    assert!(ok, "{text}");
    assert_eq!(row_numbers(&text, "a"), vec![2.0, 0.707, 0.707, 1.0, 0.0], "{text}");
    assert_eq!(row_numbers(&text, "b"), vec![2.0, 0.577, 0.5, 1.0, 0.0], "{text}");
    let csv = std::fs::read_to_string(dir.path().join("e.csv")).unwrap();
    assert!(csv.starts_with("evaluation,config,policy,shapes,"), "{csv}");
    assert!(csv.contains(&format!("config,b,{r},2,")) && csv.contains(",0.5000,0,0"), "{csv}");
    assert!(csv.contains("all,all,oracle,4,"), "{csv}");
}

#[test]
fn run_and_search_on_a_manifest_report_every_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let (manifest, _) = tiny_manifest(dir.path());
    let m = manifest.to_str().unwrap();
    let (ok, text) = synth(
        &["search", "--dataset", m, "--iterations", "1", "--offspring", "2", "--quiet", "--out", "s"],
        dir.path(),
    );
    assert!(ok, "{text}");
    assert!(text.contains("per configuration, every shape"), "{text}");
    // The search trains on configuration a (the first of the pool), whose two shapes have different
    // winners (#8 at M=16, #7 at M=64): the winner picks both. Columns: shapes, default, tuned, nearest-M,
    // tuned→rule, published-rule, search, oracle, unusable.
    let a = row_numbers(&text, "a");
    assert_eq!((a[0], a[6], a[7]), (2.0, 1.0, 1.0), "{text}");
    let ev = std::fs::read_to_string(dir.path().join("s/evaluations.csv")).unwrap();
    assert!(ev.contains("config,a,search,2,") && ev.contains("config,b,search,2,"), "{ev}");
    // `run --dataset MANIFEST` is the multi-model job on it, written outside any checkout's generated/.
    let (ok, text) = synth(&["run", "--dataset", m, "--out", "r"], dir.path());
    assert!(ok, "{text}");
    assert!(text.contains("leave-one-model-out") && dir.path().join("r/evaluations.csv").exists(), "{text}");
    // Each configuration has one layer, so its worst layer under the LOMO rule is the configuration itself:
    // columns shapes, LOMO rule, main rule, default, worst layer (then its (N, K)), unusable, ...
    let lomo = &text[text.find("(c) leave-one-model-out").expect("the LOMO table")..];
    for (config, layer) in [("a", "(N 4096, K 4096)"), ("b", "(N 5120, K 4096)")] {
        let line = lomo.lines().find(|l| l.split_whitespace().next() == Some(config)).expect("a LOMO row");
        let v = row_numbers(line, config);
        assert_eq!(v[4], v[1], "{line}");
        assert!(line.contains(layer), "{line}");
        // The fold's leaves curve (budgets 4, 8, 16 from the same search): its 16-leaf point is the LOMO rule.
        let curve = std::fs::read_to_string(dir.path().join("r/leaves_curve.csv")).unwrap();
        let rows: Vec<Vec<&str>> = curve
            .lines()
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|r| r[0] == format!("lomo:{config}"))
            .collect();
        assert_eq!(rows.iter().map(|r| r[1]).collect::<Vec<_>>(), vec!["4", "8", "16"], "{curve}");
        let held: f64 = rows[2][4].parse().unwrap();
        assert!((held - v[1]).abs() < 0.0006, "{curve}\n{line}");
    }
    // The manifest lists no off-grid M: evaluation (b) is over no shape, and says so — no made-up 1.000 in
    // the text, no NaN and no row in the evaluations CSV, "no shapes" in the generated headers.
    assert!(text.contains("(b) off-grid M of the training configurations: no shapes"), "{text}");
    let ev = std::fs::read_to_string(dir.path().join("r/evaluations.csv")).unwrap();
    assert!(!ev.contains("NaN") && !ev.contains("off-grid"), "{ev}");
    let header = std::fs::read_to_string(dir.path().join("r/dispatch.rs")).unwrap();
    assert!(header.contains("off-grid M no shapes"), "{header}");
    let ev = std::fs::read_to_string(dir.path().join("s/evaluations.csv")).unwrap();
    assert!(!ev.contains("NaN") && !ev.contains("off-grid"), "{ev}");
}

#[test]
fn a_manifest_is_checked_at_load_and_its_names_are_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let (manifest, rule) = tiny_manifest(dir.path());
    let text = std::fs::read_to_string(&manifest).unwrap();
    // A name twice in the training pool: one error at load naming the file and the name.
    let twice = write(
        dir.path(),
        "twice.toml",
        &text.replace("train_pool = [\"a\", \"b\"]", "train_pool = [\"a\", \"b\", \"a\"]"),
    );
    let e = gemm_synth::app::manifest::open(&twice).unwrap_err().to_string();
    assert!(e.contains("twice.toml") && e.contains("train_pool names \"a\" twice"), "{e}");
    // A configuration name holding a carriage return and a right-to-left override reaches the terminal as
    // code points, as in errors and generated headers.
    let odd = write(
        dir.path(),
        "odd.toml",
        &text.replace("name = \"b\"", "name = \"b\\r\\u202Ex\"").replace("\"a\", \"b\"]", "\"a\", \"b\\r\\u202Ex\"]"),
    );
    let (ok, out) =
        synth(&["compare", "--dataset", odd.to_str().unwrap(), "--rule", rule.to_str().unwrap()], dir.path());
    assert!(ok, "{out}");
    assert!(out.contains("b<U+000D><U+202E>x") && !out.contains('\r') && !out.contains('\u{202E}'), "{out}");
}

#[test]
fn several_embedded_datasets_load_outside_a_checkout() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, text) = synth(
        &[
            "compare",
            "--dataset",
            "measurements/h200/qwen3-32b-tp1.csv",
            "--dataset",
            "measurements/h200/qwen3-32b-tp4.csv",
        ],
        dir.path(),
    );
    assert!(ok, "{text}");
    assert!(text.contains("measurements/h200/qwen3-32b-tp1.csv + measurements/h200/qwen3-32b-tp4.csv"), "{text}");
}

/// `run --dataset MANIFEST --backends ck,vendor`: two configurations with CK and vendor journals. Vendor
/// wins from M = 256 (CK #7 10/20/100/400 us, vendor 40/40/50/100 us at M = 16/64/256/1024), so the mixed
/// rule returns #7 below and vendor above, is the union oracle on every shape, and each fold's rule is as
/// well; rule[ck] and rule[vendor] each lose somewhere. A configuration without vendor rows is refused.
#[test]
fn the_multi_model_job_over_two_backends() {
    let cat = Catalog::embedded();
    let id7 = cat.legacy_by_id(7).unwrap().name.clone();
    let dir = tempfile::tempdir().unwrap();
    let (mut ck, mut vendor) = (format!("{HEADER}\n"), format!("{HEADER}\n"));
    for n in [4096, 5120] {
        for (m, t7, tv) in [(16, 10.0, 40.0), (64, 20.0, 40.0), (256, 100.0, 50.0), (1024, 400.0, 100.0)] {
            ck.push_str(&format!("sm_90,132,{m},{n},4096,ck,7,0,{t7},{id7},1,1,0,ok\n"));
            vendor.push_str(&format!("sm_90,132,{m},{n},4096,vendor,0,0,{tv},vendor_scaled_mm,1,1,0,ok\n"));
        }
    }
    write(dir.path(), "ck.csv", &ck);
    write(dir.path(), "vendor.csv", &vendor);
    let manifest = |vendor_list: &str| {
        write(
            dir.path(),
            "m.toml",
            &format!(
                "off_grid_m = []\ntrain_pool = [\"a\", \"b\"]\ntrain_configs = 1\nvendor = [{vendor_list}]\n\
                 [[config]]\nname = \"a\"\nmodel = \"llama-3.1-8b\"\ntp = 1\njournals = [\"ck.csv\"]\n\
                 [[config]]\nname = \"b\"\nmodel = \"qwen3-32b\"\ntp = 2\njournals = [\"ck.csv\"]\n"
            ),
        )
    };
    let m = manifest("\"vendor.csv\"");
    let (ok, text) = synth(
        &["run", "--dataset", m.to_str().unwrap(), "--backends", "ck,vendor", "--sample-m", "4", "--out", "r"],
        dir.path(),
    );
    assert!(ok, "{text}");
    assert!(text.contains("backends ck,vendor: `synthesized` is the mixed rule"), "{text}");
    let rule = synth_core::rule::load(&dir.path().join("r/rule.json"), &cat).unwrap();
    for n in [4096, 5120] {
        assert_eq!(rule.eval(16, n, 4096), Leaf::new(7, 0));
        assert_eq!(rule.eval(1024, n, 4096).backend, synth_core::catalog::Libtype::Vendor);
    }
    assert!(dir.path().join("r/select_kernel.py").exists() && dir.path().join("r/aiter/NO-PATCH.txt").exists());
    // Every evaluation scores the backends' own rules and oracles, and the fitted threshold.
    let ev = std::fs::read_to_string(dir.path().join("r/evaluations.csv")).unwrap();
    for p in ["rule[ck]", "rule[vendor]", "oracle[ck]", "oracle[vendor]", "threshold", "synthesized"] {
        assert!(ev.contains(&format!("leave-one-model-out,a,{p},")), "{p}\n{ev}");
    }
    let of = |config: &str, policy: &str| -> f64 {
        let line = ev.lines().find(|l| l.starts_with(&format!("leave-one-model-out,{config},{policy},"))).unwrap();
        line.split(',').nth(6).unwrap().parse().unwrap()
    };
    // The mixed rule is the union oracle; CK alone: (1 · 1 · 0.5 · 0.25)^(1/4) = 0.595; vendor alone:
    // (0.25 · 0.5 · 1 · 1)^(1/4) = 0.595: x best rule[B] = 1.682.
    for c in ["a", "b"] {
        assert_eq!(of(c, "synthesized"), 1.0, "{ev}");
        assert_eq!(of(c, "rule[ck]"), 0.5946, "{ev}");
        assert_eq!(of(c, "rule[vendor]"), 0.5946, "{ev}");
    }
    let lomo = &text[text.find("(c) leave-one-model-out").unwrap()..];
    assert!(lomo.contains("x best rule[B]") && lomo.contains("1.682"), "{lomo}");
    // Without the vendor journal, no configuration has vendor rows: refused, naming the first.
    let m = manifest("");
    let (ok, text) =
        synth(&["run", "--dataset", m.to_str().unwrap(), "--backends", "ck,vendor", "--out", "r2"], dir.path());
    assert!(!ok && text.contains("configuration \"a\" (llama-3.1-8b TP=1) has no usable vendor row"), "{text}");
    assert!(!dir.path().join("r2").exists());
    // The other commands still read a manifest as CK configurations.
    let (ok, text) = synth(&["compare", "--dataset", m.to_str().unwrap(), "--backends", "ck,vendor"], dir.path());
    assert!(!ok && text.contains("this job scores CK legacy candidates only"), "{text}");
}

/// A manifest file's journal that does not exist is an error naming the manifest, the configuration and the
/// path as resolved: it was read from the copy built into the binary when its path was one of the embedded
/// names, so the rule was scored on the built-in shapes instead of the user's and nothing said so. The
/// built-in manifest (the main job's data outside the checkout) still reads its built-in journals, saying so.
#[test]
fn a_manifest_journal_that_does_not_exist_is_an_error_not_the_built_in_copy() {
    let dir = tempfile::tempdir().unwrap();
    let rule = write(dir.path(), "r.json", &synth_core::rule::to_json(&Rule::new(Node::Leaf(Leaf::new(8, 0)))));
    let text = "off_grid_m = []\ntrain_pool = [\"a\", \"b\"]\ntrain_configs = 1\nvendor = []\n\
         [[config]]\nname = \"a\"\nmodel = \"llama-3.1-8b\"\ntp = 1\njournals = [\"measurements/h200/llama-3.1-8b-tp1.csv\"]\n\
         [[config]]\nname = \"b\"\nmodel = \"qwen3-32b\"\ntp = 2\njournals = [\"measurements/h200/qwen3-32b-tp2.csv\"]\n";
    write(dir.path(), "fb.toml", text);
    let r = rule.to_str().unwrap();
    // The manifest beside the working directory (its journal paths read as embedded names there), and in
    // another directory.
    std::fs::create_dir(dir.path().join("man")).unwrap();
    write(&dir.path().join("man"), "fb.toml", text);
    for (manifest, resolved) in [
        ("fb.toml", dir.path().join("measurements/h200/llama-3.1-8b-tp1.csv")),
        ("man/fb.toml", dir.path().join("man/measurements/h200/llama-3.1-8b-tp1.csv")),
    ] {
        for cmd in [vec!["drift", "--rule", r, "--dataset", manifest], vec!["run", "--manifest", manifest]] {
            let (ok, out) = synth(&cmd, dir.path());
            assert!(!ok, "{cmd:?}: {out}");
            let resolved = std::fs::canonicalize(dir.path()).unwrap().join(resolved.strip_prefix(dir.path()).unwrap());
            assert!(
                out.contains(&format!("{manifest}: configuration \"a\" names the journal"))
                    && out.contains(&format!("does not exist at {}", resolved.display())),
                "{cmd:?}: {out}"
            );
            assert!(!out.contains("fraction of oracle"), "{cmd:?}: nothing is scored: {out}");
        }
    }
    // The built-in manifest where no file of its name exists: its built-in journals, and a note on stderr.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_synth"))
        .args(["drift", "--rule", r, "--dataset", DEFAULT_MANIFEST, "--min-fraction", "0.01"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("reading the copy built into this binary"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("configurations"), "{err}");
}

/// The held-out model stays out: no configuration of the training pool of either manifest the main job trains
/// on is DeepSeek-V3 or a model with its layers (its layers at every TP it runs with, from its spec).
#[test]
fn the_shipped_rules_manifests_hold_no_layer_of_the_held_out_model() {
    let spec = synth_core::shapes::ModelSpec::load(&root().join("shapes/held-out/deepseek-v3.toml")).unwrap();
    let mut held = std::collections::BTreeSet::new();
    for tp in [1, 2, 4, 8, 16] {
        held.extend(spec.layers(tp).unwrap().into_iter().map(|l| (l.n, l.k)));
    }
    assert!(held.len() >= 10 && held.iter().all(|&(_, k)| k > 0), "DeepSeek-V3's layers: {held:?}");
    let triton = synth_core::catalog::Backends::parse("triton").unwrap();
    for (manifest, backends) in
        [("measurements/zoo/datasets.toml", None), ("measurements/h200/triton-manifest/datasets.toml", Some(&triton))]
    {
        let d = gemm_synth::app::manifest::open_for(&root().join(manifest), backends).unwrap();
        assert!(d.configs.len() >= 4, "{manifest}");
        // Every member of the training pool (each fold trains on some of them) is another model: DeepSeek-V3
        // itself, or a model with its layers (Kimi-K2), would have all or most of its layers among them. (A
        // dense model may share one (N, K) by chance: Llama-3.1-70B TP 8's gate_up is 7168 x 8192.)
        for &p in &d.pool {
            let c = &d.configs[p];
            assert!(!c.name.contains("deepseek-v3") && !c.name.contains("kimi"), "{manifest}: {}", c.name);
            let shared = c.layers.iter().filter(|l| held.contains(&(l.n, l.k))).count();
            assert!(2 * shared < c.layers.len(), "{manifest}: {} shares {shared} layers with DeepSeek-V3", c.name);
        }
    }
}

/// Nearest-key lookup as vLLM writes it: `min(keys, key=lambda x: abs(x - M))`, ties to the first key.
fn runtime_pick(keys: &[(u32, [u64; 6])], m: u32) -> [u64; 6] {
    let mut best = keys[0];
    for &k in &keys[1..] {
        if k.0.abs_diff(m) < best.0.abs_diff(m) {
            best = k;
        }
    }
    best.1
}

/// The committed runtime files: one per layer of every built-in model at TP 1, 2, 4 and 8 (where its layers
/// split; K a multiple of 128) for each runtime and device, and the runtime's own lookup, read from the JSON
/// text, returning the config of the committed Triton rule of that device's card at every M (the H200's
/// `triton/rule.json`, the H100's `triton-h100/rule.json`).
#[test]
fn the_committed_runtime_files_serve_every_built_in_model_and_follow_the_triton_rule() {
    use synth_core::shapes::ModelSpec;
    let g = root().join("generated");
    let catalog = Catalog::embedded();
    let rules = [("NVIDIA_H200", "triton/rule.json"), ("NVIDIA_H100_80GB_HBM3", "triton-h100/rule.json")]
        .map(|(device, path)| (device, synth_core::rule::load(&g.join(path), &catalog).unwrap()));
    let mut nks = std::collections::BTreeSet::new();
    for name in ModelSpec::builtin_names() {
        for tp in [1, 2, 4, 8] {
            if let Ok(layers) = ModelSpec::builtin(name).unwrap().layers(tp) {
                nks.extend(layers.into_iter().filter(|l| l.k % 128 == 0).map(|l| (l.n, l.k)));
            }
        }
    }
    assert!(nks.len() >= 60, "{}", nks.len());
    let csv = std::fs::read_to_string(g.join("runtime_layers.csv")).unwrap();
    let listed: std::collections::BTreeSet<(u32, u32)> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[3].parse().unwrap(), f[4].parse().unwrap())
        })
        .collect();
    assert_eq!(listed, nks);
    for (dir, sep) in [("vllm", ","), ("sglang", ", ")] {
        for device in ["NVIDIA_H200", "NVIDIA_H100_80GB_HBM3"] {
            let files = std::fs::read_dir(g.join(dir).join(device)).unwrap().count();
            assert_eq!(files, nks.len() + 1, "{dir}/{device}: one file per layer and the sidecar");
        }
        for (&(n, k), (device, rule)) in nks.iter().flat_map(|nk| rules.iter().map(move |r| (nk, r))) {
            let name = format!("N={n},K={k},device_name={device},dtype=fp8_w8a8,block_shape=[128{sep}128].json");
            let text =
                std::fs::read_to_string(g.join(dir).join(device).join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            let doc: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text).unwrap();
            let field = |v: &serde_json::Value, f: &str| v[f].as_u64().unwrap_or_else(|| panic!("{f} in {text}"));
            // The keys in file order (the lookup's ties go to the first), each with its config.
            let order: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("    \"")?.split('"').next()).collect();
            assert_eq!(order.len(), doc.len(), "{text}");
            let keys: Vec<(u32, [u64; 6])> = order
                .iter()
                .map(|&m| {
                    let c = ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages"]
                        .map(|f| field(&doc[m], f));
                    (m.parse().unwrap(), c)
                })
                .collect();
            for m in (1..=16384u32).step_by(if dir == "vllm" { 1 } else { 7 }) {
                let leaf = rule.eval(m, n, k);
                let c = synth_core::catalog::triton::TritonConfig::from_kernel_id(i64::from(leaf.kernel_id)).unwrap();
                let want = [c.block_m, c.block_n, c.block_k, c.group_m, c.num_warps, c.num_stages].map(u64::from);
                assert_eq!(runtime_pick(&keys, m), want, "{dir} {device} N={n} K={k} M={m}");
            }
        }
    }
}
