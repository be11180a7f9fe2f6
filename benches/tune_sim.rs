//! `synth tune` simulated on committed data (`cargo bench --bench tune_sim`): the tune's round loop
//! (`synth_measure::tune::sim::simulate`, the same code as `synth tune --replay`) replayed against journals in
//! which every cell is measured, each "measure" answered from them, across devices:
//!
//! - CK: the H200 prior (the shipped `generated/rule.json`, trained on the zoo's H200 journals) tuned on
//!   every configuration of `measurements/h100/datasets.toml`; the H100 prior (the same job on the H100
//!   manifest) tuned on every configuration of `measurements/h200/datasets.toml`;
//! - Triton: the H200 prior (`generated/triton/rule.json` and the kept set) tuned on the H100's sweep of the
//!   whole 1,280-config space (`measurements/h100/triton-space/`); the H100 prior (the Triton job's limits on
//!   the H100 sweep's own cover, `cover-27.json`, and vLLM's default) tuned on the H200's sweep.
//!
//! Prints, per configuration and card, the quality after each round (fraction of the rule trained on every
//! cell, and of the per-shape oracle) against the share of cells measured, the figures at <= 5% of the
//! cells (and for Triton at <= 2% of the exhaustive tuner's 1,280 x 18 cells per layer), and writes every
//! point as CSV (`TUNE_SIM_CSV`, default `target/tune-sim.csv`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use synth_core::catalog::triton::{TritonConfig, VLLM_DEFAULT};
use synth_core::catalog::{Backends, Candidate, Catalog, Libtype};
use synth_core::LatencyMatrix;
use synth_measure::tune::sim::{at_share, csv_row, simulate, SimResult, SimSpec, CSV_HEADER};
use synth_measure::tune::{Family, Method, Prior};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sim_spec(family: Family, prior: Prior) -> anyhow::Result<SimSpec> {
    let job = match family {
        Family::Ck => gemm_synth::app::ship::ck_job()?,
        Family::Triton => gemm_synth::app::ship::triton_job(&gemm_synth::app::ship::TRITON_RULES[0])?,
    };
    let settings = job.settings();
    let method = Method {
        family,
        prior,
        limits: settings.limits,
        weight: settings.weight,
        first_ms: 4,
        refine_ms: 3,
        held_out: 1,
        seed: 0,
    };
    Ok(SimSpec { method, max_rounds: 8, full_within: (family == Family::Triton).then_some(1.05) })
}

/// The CK job of the shipped rule (`ship::ck_job`) on another card's manifest: that card's prior.
fn ck_prior_on(manifest: &Path) -> anyhow::Result<Prior> {
    let mut job = gemm_synth::app::ship::ck_job()?;
    job.manifest = manifest.to_path_buf();
    job.embedded_name = None;
    job.default_manifest = false;
    Ok(Prior { rule: gemm_synth::app::multi::prepare(&job)?.rule, candidates: Vec::new() })
}

/// The Triton job's limits on one card's sweep, over `kept`: that card's prior.
fn triton_prior_on(matrix: &LatencyMatrix, kept: &[Candidate]) -> anyhow::Result<Prior> {
    let m = matrix.select_candidates(|c| kept.contains(c));
    let settings = gemm_synth::app::ship::triton_job(&gemm_synth::app::ship::TRITON_RULES[0])?.settings();
    let train: Vec<usize> = (0..m.shapes.len()).filter(|&s| m.best(s).is_some()).collect();
    let limits = synth_core::synthesize::Limits { log_ratio: settings.weight.log_ratio(), ..settings.limits };
    let weights = settings.weight.weights(&m, &train);
    let mut out = synth_core::synthesize::synthesize_budgets(
        &m,
        &Catalog::embedded(),
        &train,
        weights.as_deref(),
        &limits,
        &[limits.max_leaves],
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Prior { rule: out.pop().expect("one rule").rule, candidates: kept.to_vec() })
}

fn triton_space(dir: &str) -> anyhow::Result<LatencyMatrix> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("space-chunk-")))
        .filter(|p| p.to_string_lossy().ends_with(".jsonl.gz"))
        .collect();
    paths.sort();
    let backends = Backends::parse("triton").map_err(anyhow::Error::msg)?;
    let catalog = Catalog::embedded();
    let mut tables = Vec::new();
    for p in &paths {
        tables.push((p.clone(), synth_measure::tune::replay::read_rows(p, &catalog, true)?));
    }
    // A cell measured again by a later chunk (a sweep completing an earlier one) is taken from the later.
    let mut seen = std::collections::HashSet::new();
    let mut dropped = 0usize;
    for (_, rows) in tables.iter_mut().rev() {
        rows.retain(|r| {
            let fresh = r.is_recheck() || seen.insert((r.shape(), r.candidate()));
            dropped += usize::from(!fresh);
            fresh
        });
    }
    tables.retain(|(_, rows)| rows.iter().any(|r| !r.is_recheck()));
    eprintln!("{dir}: {} files, {dropped} cells measured again by a later chunk taken from it", paths.len());
    Ok(synth_core::table::multi::merge_tables_for(&tables, Some(&backends))?.0)
}

/// The H100 sweep's own cover (`cover-27.json`'s kept configs) and vLLM's default.
fn h100_kept() -> anyhow::Result<Vec<Candidate>> {
    let text = std::fs::read_to_string(root().join("measurements/h100/triton-space/cover-27.json"))?;
    let doc: serde_json::Value = serde_json::from_str(&text)?;
    let mut out = Vec::new();
    for name in doc["kept"].as_array().ok_or_else(|| anyhow::anyhow!("cover-27.json: no kept list"))? {
        let c = TritonConfig::parse_name(name.as_str().unwrap_or_default()).map_err(|e| anyhow::anyhow!("{e}"))?;
        out.push(Candidate::of(Libtype::Triton, c.kernel_id(), 0));
    }
    out.push(Candidate::of(Libtype::Triton, VLLM_DEFAULT.kernel_id(), 0));
    Ok(out)
}

struct Out {
    csv: Vec<String>,
    table: Vec<String>,
    misses: Vec<String>,
}

impl Out {
    fn add(&mut self, family: &str, card: &str, prior: &str, config: &str, r: &SimResult, tuner: bool) {
        for p in &r.points {
            self.csv.push(csv_row(family, card, prior, config, p));
        }
        let five = at_share(&r.points, 0.05);
        let last = r.points.last();
        let f = |p: Option<f64>| p.map_or("-".to_string(), |v| format!("{v:.4}"));
        let mut row = format!(
            "| {family} | {card} | {prior} | {config} | {} | {:.4} | {:.4} | {} | {} | {} | {} |",
            r.total_cells,
            r.full,
            r.prior,
            five.map_or("-".to_string(), |p| format!("{:.4} ({:.1}%)", p.of_full, 100.0 * p.share)),
            f(last.map(|p| p.of_full)),
            last.map_or("-".to_string(), |p| format!("{:.1}%", 100.0 * p.share)),
            f(last.map(|p| p.of_oracle)),
        );
        if five.is_none_or(|p| p.of_full < 0.99) {
            self.misses.push(format!("{family} {card} {config}: at <= 5% of the cells {}", f(five.map(|p| p.of_full))));
        }
        if tuner {
            let two = r.points.iter().rfind(|p| p.share_of_tuner.is_some_and(|s| s <= 0.02));
            row.push_str(&format!(
                " at <= 2% of the tuner's cells: {} of the space's best ({}) |",
                f(two.map(|p| p.of_oracle)),
                two.and_then(|p| p.share_of_tuner).map_or("-".to_string(), |s| format!("{:.2}%", 100.0 * s))
            ));
            if two.is_none_or(|p| p.of_oracle < 0.98) {
                self.misses.push(format!(
                    "{family} {card}: files at <= 2% of the tuner's cells {}",
                    f(two.map(|p| p.of_oracle))
                ));
            }
        }
        println!("{row}");
        self.table.push(row);
    }
}

fn ck(out: &mut Out) -> anyhow::Result<()> {
    let catalog = Catalog::embedded();
    let h200_prior = gemm_synth::app::tune::prior(Family::Ck, "NVIDIA_H200")?;
    let h100_prior = ck_prior_on(&root().join("measurements/h100/datasets.toml"))?;
    for (card, prior_name, prior, manifest) in [
        ("H100", "H200", h200_prior, "measurements/h100/datasets.toml"),
        ("H200", "H100", h100_prior, "measurements/h200/datasets.toml"),
    ] {
        let data = gemm_synth::app::manifest::open(&root().join(manifest))?;
        let spec = sim_spec(Family::Ck, prior)?;
        for config in &data.configs {
            let started = Instant::now();
            let m = data.matrix.select_shapes(&config.shapes());
            let r = simulate(&m, &catalog, &spec)?;
            eprintln!("ck {card} {}: {:.1} s", config.name, started.elapsed().as_secs_f64());
            out.add("ck", card, prior_name, &config.name, &r, false);
        }
    }
    Ok(())
}

fn triton(out: &mut Out) -> anyhow::Result<()> {
    let catalog = Catalog::embedded();
    let h100 = triton_space("measurements/h100/triton-space")?;
    let h200 = triton_space("measurements/h200/triton-space")?;
    let h200_prior = gemm_synth::app::tune::prior(Family::Triton, "NVIDIA_H200")?;
    let h100_prior = triton_prior_on(&h100, &h100_kept()?)?;
    for (card, prior_name, prior, matrix) in [("H100", "H200", h200_prior, &h100), ("H200", "H100", h100_prior, &h200)]
    {
        let started = Instant::now();
        let r = simulate(matrix, &catalog, &sim_spec(Family::Triton, prior)?)?;
        eprintln!("triton {card}: {:.1} s", started.elapsed().as_secs_f64());
        out.add("triton", card, prior_name, "sample+validation shapes", &r, true);
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let started = Instant::now();
    let mut out = Out { csv: vec![CSV_HEADER.to_string()], table: Vec::new(), misses: Vec::new() };
    println!(
        "| family | card | prior | configuration | cells | full rule | prior | at <= 5% of cells: of full (share) | \
         last round: of full | share | of oracle |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let only = std::env::var("TUNE_SIM_ONLY").unwrap_or_default();
    if only != "triton" {
        ck(&mut out)?;
    }
    if only != "ck" {
        triton(&mut out)?;
    }
    let path = std::env::var("TUNE_SIM_CSV").map(PathBuf::from).unwrap_or_else(|_| root().join("target/tune-sim.csv"));
    std::fs::write(&path, out.csv.join("\n") + "\n")?;
    println!(
        "\nfigure targets missed: {}",
        if out.misses.is_empty() { "none".to_string() } else { out.misses.join("; ") }
    );
    println!("curves: {} ({:.0} s)", path.display(), started.elapsed().as_secs_f64());
    Ok(())
}
