//! The main job against its targets (`cargo bench --bench multi_targets`): runs `synth run` (the main job:
//! the shipped CK rule on the zoo's manifest at the setting its folds chose, and the shipped Triton rule)
//! twice into scratch directories, checks that the two runs wrote identical files, and reads the CK rule's
//! `evaluations.csv` and the terminal report of the first run for every target:
//!
//! - ≤ 24 leaves, ≤ 8 instances, training from the first 8 configurations of the zoo's pool;
//! - leave-one-model-out ≥ 0.98 of the oracle on every held-out configuration, ≥ 0.95 on every layer of it
//!   under its fold's rule;
//! - the held-out grid and off-grid evaluations of the job's own rule ≥ 0.99;
//! - held-out grid shapes of the training configurations: ahead of nearest-M;
//! - 0 picks of unmeasured or invalid cells on every configuration;
//! - `tuned→rule` against `tuned` (AITER today: lookup, miss → default) on shapes without a tuned row;
//! - the Triton rule (`triton/evaluations.csv`): leave-one-model-out ≥ 0.985 of the kept set's oracle on
//!   every held-out configuration.
//!
//! Then runs the multi-model job on the zoo's manifest at `--sample-m 40` without and with
//! `--split-k-fallback 0.5` (split-K leaves charged what their guards run), and at `--sample-m 70` with it at
//! the job's 16 leaves (the shipped rule has 24), for the zoo issue's leave-one-model-out targets.
//!
//! Then the mixed rule over two backends on the H200 dataset with cuBLAS rows
//! (`measurements/h200/backends.toml`), on the zoo's manifest with cuBLAS rows
//! (`measurements/zoo/backends.toml`, with the zoo job's `--sample-m 40 --features contrast`, and at
//! `--sample-m 70 --split-k-fallback 0.5`, the setting the zoo's folds chose) and on the H100
//! dataset (`measurements/h100/datasets.toml`), each `--backends ck,vendor`, against the backends issue's
//! targets: ≥ 0.97 of the union oracle, ≥ 1.15x over the best single-backend rule, ≥ 1.05x over the best
//! threshold, on the held-out grid shapes, the off-grid M, the untuned shapes, every leave-one-model-out fold
//! and DeepSeek-V3 (held out of the pool, `synth compare` on the same card's DeepSeek-V3 journals).
//!
//! Prints one line per target (value, target, met or not) and the wall time of each run.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// (evaluation, config, policy) → (shapes, geomean vs default, total vs default, of oracle, unusable).
type Rows = BTreeMap<(String, String, String), (usize, f64, f64, f64, usize)>;

fn read_rows(path: &Path) -> anyhow::Result<Rows> {
    let mut out = Rows::new();
    let mut r = csv::Reader::from_path(path)?;
    for rec in r.records() {
        let rec = rec?;
        let f = |i: usize| rec.get(i).unwrap_or_default().to_string();
        let num = |i: usize| f(i).parse::<f64>().unwrap_or(f64::NAN);
        let unusable = f(7).parse::<usize>().unwrap_or(0) + f(8).parse::<usize>().unwrap_or(0);
        out.insert((f(0), f(1), f(2)), (f(3).parse().unwrap_or(0), num(4), num(5), num(6), unusable));
    }
    Ok(out)
}

fn run_main_job(dir: &Path) -> anyhow::Result<(String, f64)> {
    run_job(dir, &[])
}

/// `synth run ARGS --out DIR`: its terminal report and wall time.
fn run_job(dir: &Path, args: &[&str]) -> anyhow::Result<(String, f64)> {
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_synth")).arg("run").args(args).arg("--out").arg(dir).output()?;
    let secs = t0.elapsed().as_secs_f64();
    anyhow::ensure!(out.status.success(), "synth run failed:\n{}", String::from_utf8_lossy(&out.stderr));
    Ok((String::from_utf8(out.stdout)?, secs))
}

fn same_files(a: &Path, b: &Path) -> anyhow::Result<bool> {
    for entry in walk(a)? {
        let rel = entry.strip_prefix(a)?;
        if std::fs::read(&entry)? != std::fs::read(b.join(rel))? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn walk(dir: &Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            out.extend(walk(&p)?);
        } else {
            out.push(p);
        }
    }
    Ok(out)
}

fn line(what: &str, value: String, target: &str, met: bool) {
    println!("  {what:<58} {value:>22}  target {target:<14} {}", if met { "met" } else { "NOT MET" });
}

/// Each leave-one-model-out fold's fraction of the oracle, lowest first.
fn lomo_folds(rows: &Rows) -> Vec<(&str, f64)> {
    let mut lomo: Vec<(&str, f64)> = rows
        .iter()
        .filter(|((e, _, p), _)| e == "leave-one-model-out" && p == "synthesized")
        .map(|((_, c, _), v)| (c.as_str(), v.3))
        .collect();
    lomo.sort_by(|x, y| x.1.total_cmp(&y.1));
    lomo
}

/// The lowest layer of each fold, from a report's leave-one-model-out table ("0.955 (N 1280, K 8192)"),
/// printed against `target`.
fn lowest_layer_line(report: &str, target: f64) {
    let layers: Vec<(f64, String)> = report
        .split("(c) leave-one-model-out")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let at = l.find(" (N ")?;
            let value: f64 = l[..at].split_whitespace().last()?.parse().ok()?;
            Some((value, l[at + 1..].split(')').next()?.to_string() + ")"))
        })
        .collect();
    match layers.iter().min_by(|a, b| a.0.total_cmp(&b.0)) {
        Some((f, layer)) => line(
            &format!("leave-one-model-out, lowest layer of any fold {layer}"),
            format!("{f:.3}"),
            &format!(">= {target:.2}"),
            *f >= target,
        ),
        None => {
            line("leave-one-model-out, lowest layer of any fold", "not found".into(), &format!(">= {target:.2}"), false)
        }
    }
}

/// The zoo issue's leave-one-model-out targets on the zoo's manifest (dense configurations and the zoo's),
/// with `extra` options.
fn zoo_targets(dir: &Path, extra: &[&str]) -> anyhow::Result<()> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/measurements/zoo/datasets.toml");
    let mut args = vec!["--dataset", manifest, "--features", "contrast"];
    args.extend_from_slice(extra);
    let (report, secs) = run_job(dir, &args)?;
    let rows = read_rows(&dir.join("evaluations.csv"))?;
    let lomo = lomo_folds(&rows);
    let shown: String = extra.iter().map(|a| format!(" {a}")).collect();
    println!(
        "with the model zoo (`synth run --dataset measurements/zoo/datasets.toml --features contrast{shown}`, \
         {secs:.1} s):"
    );
    let met = lomo.iter().filter(|(_, f)| *f >= 0.98).count();
    line("leave-one-model-out folds >= 0.98", format!("{met} of {}", lomo.len()), "all", met == lomo.len());
    for (c, f) in lomo.iter().filter(|(_, f)| *f < 0.98) {
        line(&format!("leave-one-model-out, {c}"), format!("{f:.4}"), ">= 0.98", false);
    }
    lowest_layer_line(&report, 0.90);
    let get = |e: &str| rows.get(&(e.to_string(), "training".to_string(), "synthesized".to_string())).map(|v| v.3);
    if let (Some(grid), Some(off)) = (get("heldout-grid"), get("off-grid")) {
        line("its rule: held-out grid shapes (a)", format!("{grid:.4}"), ">= 0.99", grid >= 0.99);
        line("its rule: off-grid M (b)", format!("{off:.4}"), ">= 0.99", off >= 0.99);
    }
    Ok(())
}

/// The backends issue's three targets for one evaluation: `synth`, the best single-backend rule and the
/// best threshold as fractions of the union oracle.
fn backend_lines(what: &str, synth: f64, single: (&str, f64), threshold: f64) {
    line(&format!("{what}: of the union oracle"), format!("{synth:.4}"), ">= 0.97", synth >= 0.97);
    let (a, b) = (synth / single.1, synth / threshold);
    line(&format!("{what}: over the best {}", single.0), format!("{a:.3}x"), ">= 1.15x", a >= 1.15);
    line(&format!("{what}: over the best threshold"), format!("{b:.3}x"), ">= 1.05x", b >= 1.05);
}

/// One card's data for the backends issue's targets: its manifest and its DeepSeek-V3 journals (paths
/// relative to the repository root).
struct BackendData {
    card: &'static str,
    manifest: &'static str,
    /// Options of the job beside `--dataset` and `--backends`.
    extra: &'static [&'static str],
    deepseek: &'static [&'static str],
}

const H200_DEEPSEEK: &[&str] =
    &["measurements/h200/deepseek-v3-tp8.csv.gz", "measurements/h200/vendor-deepseek-v3-tp8.csv"];

const BACKEND_DATA: [BackendData; 4] = [
    BackendData { card: "H200", manifest: "measurements/h200/backends.toml", extra: &[], deepseek: H200_DEEPSEEK },
    BackendData {
        card: "H200, with the model zoo",
        manifest: "measurements/zoo/backends.toml",
        extra: &["--sample-m", "40", "--features", "contrast"],
        deepseek: H200_DEEPSEEK,
    },
    BackendData {
        card: "H200, with the model zoo at the zoo's fold-chosen sample",
        manifest: "measurements/zoo/backends.toml",
        extra: &["--sample-m", "70", "--features", "contrast", "--split-k-fallback", "0.5"],
        deepseek: H200_DEEPSEEK,
    },
    BackendData {
        card: "H100",
        manifest: "measurements/h100/datasets.toml",
        extra: &[],
        deepseek: &[
            "measurements/h100/deepseek-v3-tp8.csv.gz",
            "measurements/h100/vendor-deepseek-v3-tp8.csv",
            "measurements/h100/deepseek-v3-tp8-offgrid.csv.gz",
            "measurements/h100/vendor-deepseek-v3-tp8-offgrid.csv",
        ],
    },
];

/// The mixed rule on one card's dataset (CK-geometry family and cuBLAS), and on DeepSeek-V3 held out.
fn backend_targets(dir: &Path, data: &BackendData) -> anyhow::Result<()> {
    let root = env!("CARGO_MANIFEST_DIR");
    let manifest = format!("{root}/{}", data.manifest);
    let mut args = vec!["--dataset", manifest.as_str(), "--backends", "ck,vendor"];
    args.extend_from_slice(data.extra);
    let (_, secs) = run_job(dir, &args)?;
    let rows = read_rows(&dir.join("evaluations.csv"))?;
    let extra: String = data.extra.iter().map(|a| format!(" {a}")).collect();
    println!(
        "mixed rule over ck,vendor (`synth run --dataset {} --backends ck,vendor{extra}`, {}, {secs:.1} s):",
        data.manifest, data.card
    );
    let of = |e: &str, c: &str, p: &str| rows.get(&(e.to_string(), c.to_string(), p.to_string())).map(|v| v.3);
    let mut evals = vec![
        ("heldout-grid".to_string(), "training".to_string()),
        ("off-grid".into(), "training".into()),
        ("untuned".into(), "all".into()),
    ];
    evals.extend(
        rows.keys()
            .filter(|(e, _, p)| e == "leave-one-model-out" && p == "synthesized")
            .map(|(e, c, _)| (e.clone(), c.clone())),
    );
    for (e, c) in &evals {
        let single = of(e, c, "rule[ck]").unwrap_or(0.0).max(of(e, c, "rule[vendor]").unwrap_or(0.0));
        match (of(e, c, "synthesized"), of(e, c, "threshold")) {
            (Some(s), Some(t)) if single > 0.0 => {
                let what = match e.as_str() {
                    "heldout-grid" => "held-out grid".to_string(),
                    "off-grid" => "off-grid M".to_string(),
                    "leave-one-model-out" => format!("LOMO {c}"),
                    _ => e.clone(),
                };
                backend_lines(&what, s, ("backend rule", single), t)
            }
            _ => line(&format!("{e} {c}"), "not found".into(), "-", false),
        }
    }
    let csv_path = dir.join("deepseek-v3.csv");
    let mut compare = Command::new(env!("CARGO_BIN_EXE_synth"));
    compare.arg("compare").arg("--rule").arg(dir.join("rule.json"));
    for journal in data.deepseek {
        compare.args(["--dataset", &format!("{root}/{journal}")]);
    }
    let out = compare
        .args(["--backends", "ck,vendor", "--spec", &format!("{root}/shapes/held-out/deepseek-v3.toml"), "--tp", "8"])
        .arg("--csv")
        .arg(&csv_path)
        .output()?;
    anyhow::ensure!(out.status.success(), "synth compare failed:\n{}", String::from_utf8_lossy(&out.stderr));
    // Geomean of_oracle per policy over the per-shape rows; the rule's policy is its path.
    let mut logs: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let mut r = csv::Reader::from_path(&csv_path)?;
    let h = r.headers()?.clone();
    let (pi, oi) = (
        h.iter().position(|c| c == "policy").unwrap_or(usize::MAX),
        h.iter().position(|c| c == "of_oracle").unwrap_or(usize::MAX),
    );
    for rec in r.records() {
        let rec = rec?;
        if let (Some(p), Some(Ok(f))) = (rec.get(pi), rec.get(oi).map(str::parse::<f64>)) {
            let e = logs.entry(p.to_string()).or_default();
            e.0 += f.ln();
            e.1 += 1;
        }
    }
    let geo = |p: &str| logs.get(p).filter(|v| v.1 > 0).map(|v| (v.0 / v.1 as f64).exp());
    let rule = dir.join("rule.json").display().to_string();
    let single = geo("oracle[ck]").unwrap_or(0.0).max(geo("oracle[vendor]").unwrap_or(0.0));
    match (geo(&rule), geo("threshold")) {
        (Some(s), Some(t)) if single > 0.0 => backend_lines("DeepSeek-V3 (held out)", s, ("backend oracle", single), t),
        _ => line("DeepSeek-V3 (held out)", "not found".into(), "-", false),
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let (report, t1) = run_main_job(&a)?;
    let (_, t2) = run_main_job(&b)?;
    let deterministic = same_files(&a, &b)?;
    let rows = read_rows(&a.join("evaluations.csv"))?;
    let get = |e: &str, c: &str, p: &str| rows.get(&(e.to_string(), c.to_string(), p.to_string())).copied();

    println!("main job (`synth run`: the CK rule on the zoo's manifest, the Triton rule), one run's figures:");
    let report = report.split("== the Triton rule").next().unwrap_or_default().to_string();
    // The rule and its training set, from the report's `rule:` and `training:` lines.
    let rule_line = report.lines().find(|l| l.starts_with("rule:")).unwrap_or_default();
    let leaves: usize = rule_line.split_whitespace().nth(1).and_then(|w| w.parse().ok()).unwrap_or(usize::MAX);
    let instances =
        rule_line.split('{').nth(1).map_or(usize::MAX, |s| s.split('}').next().unwrap_or("").split(',').count());
    let train_line = report.lines().find(|l| l.starts_with("training:")).unwrap_or_default();
    let train_shapes: usize = train_line.split_whitespace().nth(1).and_then(|w| w.parse().ok()).unwrap_or(usize::MAX);
    let train_configs =
        train_line.split(" of ").nth(1).and_then(|s| s.split(':').next()).map_or(usize::MAX, |s| s.split(',').count());
    line("leaves", leaves.to_string(), "<= 24", leaves <= 24);
    line("distinct instances", instances.to_string(), "<= 8", instances <= 8);
    line("training shapes", train_shapes.to_string(), "reported", true);
    line("training configurations", train_configs.to_string(), "8", train_configs == 8);

    let lomo = lomo_folds(&rows);
    for (c, f) in &lomo {
        line(&format!("leave-one-model-out, {c}"), format!("{f:.4}"), ">= 0.98", *f >= 0.98);
    }
    lowest_layer_line(&report, 0.95);
    if let Some(off) = get("off-grid", "training", "synthesized") {
        line("off-grid M of the training configurations (b)", format!("{:.4}", off.3), ">= 0.99", off.3 >= 0.99);
    }
    if let Some(grid) = get("heldout-grid", "training", "synthesized") {
        line("held-out grid shapes (a)", format!("{:.4}", grid.3), ">= 0.99", grid.3 >= 0.99);
    }
    if let (Some(s), Some(n)) =
        (get("heldout-grid", "training", "synthesized"), get("heldout-grid", "training", "nearest-M"))
    {
        line("held-out grid shapes: rule vs nearest-M", format!("{:.4} vs {:.4}", s.3, n.3), "ahead", s.3 > n.3);
    }
    let unusable: usize =
        rows.iter().filter(|((e, _, p), _)| e == "config" && p == "synthesized").map(|(_, v)| v.4).sum();
    line("picks of unmeasured or invalid cells, every configuration", unusable.to_string(), "0", unusable == 0);
    if let (Some(tr), Some(td)) = (get("untuned", "all", "tuned→rule"), get("untuned", "all", "tuned")) {
        line(
            &format!("untuned shapes ({}): tuned→rule x default, geomean / total", tr.0),
            format!("{:.3} / {:.3}", tr.1, tr.2),
            "reported",
            true,
        );
        line(
            &format!("untuned shapes ({}): tuned→default x default, geomean / total", td.0),
            format!("{:.3} / {:.3}", td.1, td.2),
            "reported",
            true,
        );
    }
    let triton = read_rows(&a.join("triton/evaluations.csv"))?;
    for (c, f) in lomo_folds(&triton) {
        line(&format!("Triton rule, leave-one-model-out, {c}"), format!("{f:.4}"), ">= 0.985", f >= 0.985);
    }
    line("two runs wrote identical files", deterministic.to_string(), "true", deterministic);
    println!("  wall time of the main job: {t1:.2} s and {t2:.2} s");
    zoo_targets(&tmp.path().join("zoo"), &["--sample-m", "40"])?;
    zoo_targets(&tmp.path().join("zoo-fallback"), &["--sample-m", "40", "--split-k-fallback", "0.5"])?;
    // The setting the zoo's folds chose (measurements/zoo/README.md) at the job's 16 leaves; at 24 it is the
    // main job's CK rule, above.
    zoo_targets(&tmp.path().join("zoo-70"), &["--sample-m", "70", "--split-k-fallback", "0.5"])?;
    for (i, data) in BACKEND_DATA.iter().enumerate() {
        backend_targets(&tmp.path().join(format!("backends-{i}")), data)?;
    }
    Ok(())
}
