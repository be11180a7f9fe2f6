//! The plain `synth drift` check (no re-measurement) in CI: its markdown summary and JSON report are
//! written like `--remeasure`'s, and the options only `--remeasure` uses are refused by name instead of
//! being accepted and doing nothing.

mod common;

use common::{strs as s, synth, text};

const DATA: &str = "measurements/h200/qwen3-32b-tp2.csv";

/// The "geomean fraction of oracle X" the check printed for `label`.
fn printed_fraction(stdout: &str, label: &str) -> f64 {
    let line = stdout.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("{stdout}"));
    let rest = line.split_once("geomean fraction of oracle ").unwrap().1;
    rest.split(';').next().unwrap().parse().unwrap()
}

#[test]
fn the_plain_check_writes_its_reports() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("summary.md");
    let json = dir.path().join("report.json");
    let run = |extra: &[&str]| {
        let mut args = s(&[
            "drift",
            "--dataset",
            DATA,
            "--baseline",
            DATA,
            "--report-md",
            md.to_str().unwrap(),
            "--report-json",
            json.to_str().unwrap(),
        ]);
        args.extend(s(extra));
        let o = synth(&args, &[]);
        let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (o, r, std::fs::read_to_string(&md).unwrap())
    };
    let (o, r, summary) = run(&[]);
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(r["verdict"], "ok");
    assert!(r["problems"].as_array().unwrap().is_empty());
    let all = &r["configs"][0];
    assert_eq!(all["config"], "all");
    let printed = printed_fraction(&stdout, "new measurements");
    assert!((all["fraction_of_oracle"].as_f64().unwrap() - printed).abs() < 5e-4, "{all} vs {printed}");
    assert_eq!(all["fraction_of_oracle"], all["baseline_fraction_of_oracle"]);
    assert!(all["shapes"].as_u64().unwrap() > 100, "{all}");
    assert!(summary.starts_with("## gemm-synth drift check: no drift"), "{summary}");
    assert!(summary.contains(&format!("| all | {} | {printed:.3} | {printed:.3} | 0 |", all["shapes"])), "{summary}");

    // Past a tolerance: exit 1, and the reports say why and what to do.
    let (o, r, summary) = run(&["--min-fraction", "0.999", "--shape-regret", "0.01"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(r["verdict"], "drift");
    let problems = r["problems"].as_array().unwrap();
    assert!(problems.iter().any(|p| p.as_str().unwrap().contains("below --min-fraction 0.999")), "{problems:?}");
    assert!(r["fix"].as_str().unwrap().contains("synth run --dataset"), "{}", r["fix"]);
    let slower = r["slower"].as_array().unwrap();
    assert!(!slower.is_empty());
    // Slowest first, each beyond the 1% regret.
    let ratio = |v: &serde_json::Value| v["us"].as_f64().unwrap() / v["oracle_us"].as_f64().unwrap();
    assert!(slower.windows(2).all(|w| ratio(&w[0]) >= ratio(&w[1])));
    assert!(slower.iter().all(|v| ratio(v) > 1.01));
    assert!(summary.starts_with("## gemm-synth drift check: DRIFT") && summary.contains("### Problems"), "{summary}");
    assert!(summary.contains("### Shapes slower than the new oracle by more than 1%"), "{summary}");
}

#[test]
fn the_manifest_check_writes_one_row_per_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let o = synth(
        &s(&[
            "drift",
            "--dataset",
            "measurements/zoo/datasets.toml",
            "--min-fraction",
            "0.5",
            "--report-json",
            json.to_str().unwrap(),
        ]),
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let configs = r["configs"].as_array().unwrap();
    assert!(configs.len() >= 3, "{configs:?}");
    assert_eq!(configs.last().unwrap()["config"], "all");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let all = stdout.lines().find(|l| l.trim_start().starts_with("all ")).unwrap();
    let printed: f64 = all.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((configs.last().unwrap()["fraction_of_oracle"].as_f64().unwrap() - printed).abs() < 5e-4, "{all}");
}

#[test]
fn options_of_the_re_measurement_are_refused_by_name_without_it() {
    for (extra, named) in [
        (vec!["--budget-s", "60"], "--budget-s only applies"),
        (vec!["--sample-shapes", "3", "--cell-timeout", "5"], "--sample-shapes, --cell-timeout only apply"),
        (vec!["--aiter-dir", "x", "--backend", "harness"], "--backend, --aiter-dir only apply"),
    ] {
        let mut args = s(&["drift", "--dataset", DATA]);
        args.extend(s(&extra));
        let o = synth(&args, &[]);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(named) && err.contains("to `drift --remeasure`"), "{extra:?}: {err}");
        assert!(o.stdout.is_empty(), "{extra:?}: nothing is checked: {}", text(&o));
    }
}

/// A rule over CK and the vendor GEMM (`#7` below M = 64, vendor from it) re-checked on a CK journal and a
/// vendor journal given as two --dataset tables: hand-computed fractions of the oracle, and clear errors
/// where the vendor leaves could not be scored.
#[test]
fn a_rule_of_several_backends_is_rechecked_on_one_table_per_backend() {
    const HEADER: &str = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio,status";
    let ck7 = synth_core::Catalog::embedded().legacy_by_id(7).unwrap().name.clone();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    // M = 16: #7 10 us, vendor 20 us; M = 1024: #7 100 us, vendor 40 us (new: vendor 80 us).
    let ck = write(
        "ck.csv",
        format!("{HEADER}\nsm_90,132,16,512,512,ck,7,0,10.0,{ck7},1,1,0,ok\nsm_90,132,1024,512,512,ck,7,0,100.0,{ck7},1,1,0,ok\n"),
    );
    let vendor = |us: f64| {
        format!(
            "{HEADER}\nsm_90,132,16,512,512,vendor,0,0,20.0,vendor_scaled_mm,1,1,0,ok\n\
             sm_90,132,1024,512,512,vendor,0,0,{us},vendor_scaled_mm,1,1,0,ok\n"
        )
    };
    let (old_vendor, new_vendor) = (write("vendor-old.csv", vendor(40.0)), write("vendor-new.csv", vendor(80.0)));
    let rule = write("mixed.cpp", "if (M < 64) return kernel(7); else return {vendor(0), 0};\n".to_string());
    let drift = |extra: &[&str]| {
        let mut args = s(&["drift", "--rule", &rule]);
        args.extend(s(extra));
        synth(&args, &[])
    };
    // Without --backends the vendor leaves cannot be scored: one error saying what to add.
    let o = drift(&["--dataset", &ck]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("the rule returns vendor leaves") && text(&o).contains("--backends ck,vendor"),
        "{}",
        text(&o)
    );
    let o = drift(&["--dataset", &ck, "--dataset", &old_vendor, "--backends", "ck"]);
    assert!(text(&o).contains("which --backends ck does not name"), "{}", text(&o));
    // Both tables: on new data where vendor at M = 1024 is 80 us against #7's 100 us, the rule is still the
    // oracle: 1.000, no drift.
    let o = drift(&["--dataset", &ck, "--dataset", &new_vendor, "--backends", "ck,vendor"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(printed_fraction(&String::from_utf8_lossy(&o.stdout), "new measurements"), 1.0);
    // New vendor times of 120 us: #7 (100 us) is the oracle at M = 1024, the rule 100/120 there:
    // sqrt(1 · 0.8333) = 0.913; against the baseline's 1.000 a drop of 0.087 > --max-drop 0.05.
    let slower = write("vendor-slower.csv", vendor(120.0));
    let o = drift(&[
        "--dataset",
        &ck,
        "--dataset",
        &slower,
        "--baseline",
        &ck,
        "--baseline",
        &old_vendor,
        "--backends",
        "ck,vendor",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(printed_fraction(&out, "new measurements"), 0.913, "{out}");
    assert_eq!(printed_fraction(&out, "baseline"), 1.0, "{out}");
    assert!(text(&o).contains("fell by 0.087"), "{}", text(&o));
    assert!(text(&o).contains(&format!("--dataset {ck} --dataset {slower} --backends ck,vendor")), "{}", text(&o));
    // A manifest is one --dataset of CK configurations; --remeasure writes one journal.
    let o = drift(&["--dataset", "measurements/h200/datasets.toml", "--backends", "ck,vendor"]);
    assert!(text(&o).contains("a manifest (measurements/h200/datasets.toml) holds CK configurations"), "{}", text(&o));
    let o = synth(&s(&["drift", "--dataset", "a.csv", "--dataset", "b.csv", "--remeasure", "--baseline", DATA]), &[]);
    assert!(text(&o).contains("--dataset is given 2 times, but --remeasure writes one journal"), "{}", text(&o));
}

/// A tolerance that is not a number (or out of its range) is refused by name: NaN compared with anything is
/// false, so `--min-fraction NaN` or `--max-drop NaN` turned the gate off and drift passed.
#[test]
fn tolerances_out_of_range_are_refused() {
    for (flag, value) in [
        ("--min-fraction", "NaN"),
        ("--min-fraction", "0"),
        ("--min-fraction", "1.5"),
        ("--min-fraction", "inf"),
        ("--max-drop", "NaN"),
        ("--max-drop", "inf"),
        ("--max-drop", "-0.1"),
        ("--max-drop", "1"),
        ("--shape-regret", "NaN"),
        ("--shape-regret", "-1"),
    ] {
        let o = synth(&s(&["drift", "--dataset", DATA, "--baseline", DATA, &format!("{flag}={value}")]), &[]);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(flag) && err.contains(value) && err.contains("expected"), "{flag} {value}: {err}");
        assert!(o.stdout.is_empty(), "{flag} {value}: nothing is checked: {}", text(&o));
    }
    // In range: the gate applies (the committed rule is below 0.999 of the oracle).
    let o = synth(&s(&["drift", "--dataset", DATA, "--min-fraction", "0.999"]), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

/// A baseline of another device (an MI300X table against H200 measurements) was accepted and reported "no
/// drift" from a baseline of unusable picks; a tuned table (only each shape's winner) is no baseline either.
#[test]
fn a_baseline_of_another_device_or_a_tuned_table_is_refused() {
    let mi300x = "measurements/mi300x/a8w8_blockscale_tuned_gemm_glm5_1.csv";
    let o = synth(&s(&["drift", "--dataset", DATA, "--baseline", mi300x]), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("--baseline {mi300x} holds measurements of gfx942 with 304 CUs"))
            && err.contains(&format!("--dataset {DATA} of NVIDIA H200 (sm_90, 132 CUs)")),
        "{err}"
    );
    assert!(!text(&o).contains("no drift"), "{}", text(&o));
    // The same against a manifest.
    let o = synth(&s(&["drift", "--dataset", "measurements/h200/datasets.toml", "--baseline", mi300x]), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("holds measurements of gfx942 with 304 CUs"), "{}", text(&o));
    // The H200 data's winners as a tuned table of the same device: refused as a baseline.
    let dir = tempfile::tempdir().unwrap();
    let all = std::fs::read_to_string(DATA).unwrap();
    let mut lines = all.lines();
    let mut tuned = format!("{}\n", lines.next().unwrap());
    let mut seen = std::collections::BTreeSet::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if f[21] == "ok" && seen.insert((f[2], f[3], f[4])) {
            tuned.push_str(l);
            tuned.push('\n');
        }
    }
    let tuned_path = dir.path().join("tuned.csv");
    std::fs::write(&tuned_path, tuned).unwrap();
    let o = synth(&s(&["drift", "--dataset", DATA, "--baseline", tuned_path.to_str().unwrap()]), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("is a tuned table (one row per shape, only its winner)"), "{}", text(&o));
}
