//! The "Regenerate with" line is what the job used: for every command that writes one (`run` on a single
//! dataset, on a manifest and on tuned tables, `search`), pasting the line from the written files with
//! another `--out`, in the crate root as `cargo run` would, writes every output file byte for byte again —
//! including flag combinations that once lost a flag (a value equal to clap's default but not to the
//! job's, the default model on the single-dataset job, a relative `--dataset` from another directory).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn synth(args: &[String], cwd: &Path) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_synth")).args(args).current_dir(cwd).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "synth {} failed:\n{text}", args.join(" "));
    text
}

/// Every file under `dir` (relative name → bytes), the search trace and its settings record left out
/// (they hold timings of the run, not its results).
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            let name = p.strip_prefix(root).unwrap().display().to_string();
            if p.is_dir() {
                walk(root, &p, out);
            } else if !name.starts_with("trace.jsonl") {
                out.insert(name, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The options of the line in `dir`'s Rust module, as the shell would split them.
fn line_of(dir: &Path) -> (String, Vec<String>) {
    let text = std::fs::read_to_string(dir.join("dispatch.rs")).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("//! Regenerate with: "))
        .unwrap_or_else(|| panic!("no line in {}", dir.display()))
        .to_string();
    let rest = line.strip_prefix("cargo run --release -- ").unwrap_or_else(|| panic!("{line}"));
    (line.clone(), shlex::split(rest).unwrap_or_else(|| panic!("not a shell line: {line}")))
}

/// Runs `args` in `cwd` into a fresh directory, then the line it wrote (in the crate root) into another,
/// and compares every file; returns the line.
fn reproduces(args: &[&str], cwd: &Path) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let (first, second) = (tmp.path().join("first"), tmp.path().join("second"));
    let mut argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    argv.extend(["--out".to_string(), first.display().to_string()]);
    synth(&argv, cwd);
    let (line, mut again) = line_of(&first);
    assert!(!line.contains("--out"), "{line}");
    again.extend(["--out".to_string(), second.display().to_string()]);
    synth(&again, root());
    let (a, b) = (files(&first), files(&second));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "{line}");
    for (name, bytes) in &a {
        assert!(bytes == &b[name], "{name} differs after running `{line}` (from `synth {}`)", args.join(" "));
    }
    line
}

#[test]
fn the_single_dataset_jobs_line_reproduces_its_files() {
    let cwd = tempfile::tempdir().unwrap();
    // The default model named: the line still runs the single-dataset job (not the multi-model one).
    let line = reproduces(&["run", "--model", "qwen3-32b", "--max-leaves", "4", "--sample-m", "6"], cwd.path());
    assert!(
        line.contains("--dataset measurements/h200/qwen3-32b-tp2.csv") && line.contains("--max-leaves 4"),
        "{line}"
    );
    // A relative --dataset from another directory (a file that is no embedded dataset), with flags equal to
    // clap's defaults and a relative --rule.
    let tp1 = std::fs::read_to_string(root().join("measurements/h200/qwen3-32b-tp1.csv")).unwrap();
    std::fs::write(cwd.path().join("mine.csv"), format!("{tp1}\n")).unwrap();
    std::fs::copy(root().join("generated/rule.json"), cwd.path().join("r.json")).unwrap();
    let line = reproduces(
        &["run", "--dataset", "mine.csv", "--tp", "1", "--max-leaves", "8", "--weight", "flops", "--rule", "r.json"],
        cwd.path(),
    );
    let abs = std::fs::canonicalize(cwd.path()).unwrap();
    assert!(line.contains(&format!("--dataset {}", abs.join("mine.csv").display())), "{line}");
    assert!(line.contains(&format!("--rule {}", abs.join("r.json").display())), "{line}");
    assert!(!line.contains("--max-leaves"), "8 is this job's default: {line}");
    // Every shape, other features, an exact depth, no refinement.
    let line = reproduces(
        &[
            "run",
            "--dataset",
            "measurements/h200/qwen3-32b-tp4.csv",
            "--tp",
            "4",
            "--train-all",
            "--features",
            "raw",
            "--exact-depth",
            "1",
            "--no-refine",
            "--max-leaves",
            "4",
        ],
        cwd.path(),
    );
    assert!(line.contains("--features raw --exact-depth 1 --no-refine") || line.contains("--features raw"), "{line}");
}

#[test]
fn the_multi_model_jobs_line_reproduces_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = tiny_manifest(dir.path());
    // 8 leaves and the uniform weight equal clap's old defaults but not this job's (16, log): kept.
    let line = reproduces(
        &["run", "--manifest", manifest.to_str().unwrap(), "--max-leaves", "8", "--weight", "uniform"],
        dir.path(),
    );
    assert!(line.contains("--max-leaves 8") && line.contains("--weight uniform"), "{line}");
    let line = reproduces(&["run", "--dataset", "m.toml", "--max-leaves", "16"], dir.path());
    assert!(!line.contains("--max-leaves"), "16 is this job's default: {line}");
}

/// The main job writes three rules, each with its own job's line: pasting the CK rule's line (the top of
/// `generated/`) or a Triton rule's (`generated/triton/`, the H200's; `generated/triton-h100/`, the H100's)
/// with `--out` writes that rule's committed files byte for byte, and together with the runtime files they
/// are all of `generated/`.
#[test]
fn the_main_jobs_two_lines_reproduce_the_committed_rules() {
    let g = root().join("generated");
    let committed = files(&g);
    let mut covered = 0;
    for (sub, manifest) in [
        ("", "measurements/zoo/datasets.toml"),
        ("triton/", "measurements/h200/triton-manifest/datasets.toml"),
        ("triton-h100/", "measurements/h100/triton-manifest/datasets.toml"),
    ] {
        let (line, mut args) = line_of(&g.join(sub));
        assert!(line.contains(&format!("--manifest {manifest}")), "{line}");
        let tmp = tempfile::tempdir().unwrap();
        args.extend(["--out".to_string(), tmp.path().display().to_string()]);
        synth(&args, root());
        for (name, bytes) in files(tmp.path()) {
            let want = committed.get(&format!("{sub}{name}")).unwrap_or_else(|| panic!("{sub}{name} is not committed"));
            assert!(&bytes == want, "{sub}{name} differs after running `{line}`");
            covered += 1;
        }
    }
    let runtime = committed.keys().filter(|n| n.starts_with("vllm/") || n.starts_with("sglang/")).count();
    assert_eq!(covered + runtime + 1, committed.len(), "the three rules, the runtime files and runtime_layers.csv");
}

#[test]
fn search_and_tuned_table_lines_reproduce_their_files() {
    let cwd = tempfile::tempdir().unwrap();
    let line = reproduces(
        &[
            "search",
            "--iterations",
            "1",
            "--offspring",
            "2",
            "--quiet",
            "--max-leaves",
            "4",
            "--seed",
            "2",
            "--model",
            "qwen3-32b",
        ],
        cwd.path(),
    );
    assert!(line.contains("--iterations 1") && line.contains("--seed 2") && !line.contains("--quiet"), "{line}");
    let table = root().join("measurements/mi300x/a8w8_blockscale_tuned_gemm_qwen36_27b.csv");
    let line = reproduces(&["run", "--train-tuned", table.to_str().unwrap(), "--max-leaves", "4"], cwd.path());
    assert!(line.contains("--train-tuned measurements/mi300x/a8w8_blockscale_tuned_gemm_qwen36_27b.csv"), "{line}");
}

/// A two-configuration manifest over one hand-made journal (as in tests/multi.rs).
fn tiny_manifest(dir: &Path) -> PathBuf {
    const HEADER: &str = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio,status";
    let cat = synth_core::catalog::Catalog::embedded();
    let name = |id: i32| cat.legacy_by_id(id).unwrap().name.clone();
    let mut j = format!("{HEADER}\n");
    for (m, n, t7, t8) in [(16, 4096, 10.0, 5.0), (64, 4096, 8.0, 16.0), (16, 5120, 10.0, 40.0), (64, 5120, 9.0, 3.0)] {
        for (id, us) in [(7, t7), (8, t8)] {
            j.push_str(&format!("sm_90,132,{m},{n},4096,ck,{id},0,{us},{},1,1,0,ok\n", name(id)));
        }
    }
    std::fs::write(dir.join("j.csv"), j).unwrap();
    let manifest = dir.join("m.toml");
    std::fs::write(
        &manifest,
        "off_grid_m = []\ntrain_pool = [\"a\", \"b\"]\ntrain_configs = 1\nvendor = []\n\
         [[config]]\nname = \"a\"\nmodel = \"llama-3.1-8b\"\ntp = 1\njournals = [\"j.csv\"]\n\
         [[config]]\nname = \"b\"\nmodel = \"qwen3-32b\"\ntp = 2\njournals = [\"j.csv\"]\n",
    )
    .unwrap();
    manifest
}
