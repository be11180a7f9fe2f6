//! The binary as a new user meets it: a copy of it runs the main job anywhere (the data is embedded),
//! only the main job with its default inputs writes a checkout's `generated/`, `run --check` judges the
//! inputs rather than how they were named, the tool reads its own outputs, and the error texts say what
//! went wrong and what to do, on one line.

use std::path::Path;
use std::process::{Command, Output};

/// A multi-model job's files (the AITER patch in its own folder, so one entry of its directory each): the
/// main job writes them for the CK rule, beside [`MAIN_ONLY`].
const GENERATED: [&str; 10] = [
    "gemm_a8w8_blockscale_heuristic.h",
    "gemm_a8w8_blockscale_heuristic_instances.csv",
    "dispatch.rs",
    "rule.json",
    "compare.csv",
    "evaluations.csv",
    "speedup.svg",
    "speedup.png",
    "leaves_curve.csv",
    "aiter/gemm_a8w8_blockscale_heuristic.patch",
];

/// The main job's entries beside the CK rule's: the Triton rule's files, the runtimes' config files and the
/// list of the layers they serve.
const MAIN_ONLY: [&str; 5] = ["triton", "triton-h100", "vllm", "sglang", "runtime_layers.csv"];

/// Every file under `dir`, by its path relative to `dir`.
fn tree(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, d: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let name = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(name, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn crate_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn synth(bin: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()))
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn ok(o: Output, what: &str) -> String {
    let (out, err) = text(&o);
    assert!(o.status.success(), "{what} failed:\n{out}\n{err}");
    out
}

/// The error text of a command that must fail (stderr, `error: ` prefix removed).
fn fails(o: Output, what: &str) -> String {
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{what} succeeded:\n{out}");
    err.trim().strip_prefix("error: ").unwrap_or(err.trim()).to_string()
}

/// A directory that looks like a gemm-synth checkout (this crate's Cargo.toml name, a generated/ dir).
fn fake_checkout() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Cargo.toml"), "[package]\nname = \"gemm-synth\"\nversion = \"0.1.0\"\n").unwrap();
    std::fs::create_dir(dir.path().join("generated")).unwrap();
    dir
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn a_copied_binary_runs_the_main_job_and_writes_the_committed_files_where_the_user_is() {
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = bin_dir.path().join("synth");
    std::fs::copy(env!("CARGO_BIN_EXE_synth"), &bin).unwrap();
    let work = tempfile::tempdir().unwrap();
    let out = ok(synth(&bin, work.path(), &["run"]), "a copied binary's `synth run`");
    assert!(out.contains("outside a gemm-synth checkout"), "{out}");
    let dir = std::fs::canonicalize(work.path()).unwrap().join("gemm-synth-out/run");
    for name in GENERATED.iter().chain(["triton/rule.json", "triton-h100/rule.json", "runtime_layers.csv"].iter()) {
        assert!(out.contains(&format!("written: {}", dir.join(name).display())), "real path of {name} in:\n{out}");
    }
    // Every file, the Triton rule's and the runtime files included, is the committed one, and no other.
    let (made, committed) = (tree(&dir), tree(&crate_root().join("generated")));
    assert_eq!(made.keys().collect::<Vec<_>>(), committed.keys().collect::<Vec<_>>());
    for (name, bytes) in &made {
        assert!(bytes == &committed[name], "{name}: the main job from a copied binary differs from the committed file");
    }
}

#[test]
fn only_the_main_job_writes_a_checkouts_generated_dir() {
    let bin = Path::new(env!("CARGO_BIN_EXE_synth"));
    let co = fake_checkout();
    let sub = co.path().join("notes");
    std::fs::create_dir(&sub).unwrap();
    let generated = co.path().join("generated");

    // Other inputs: into ./gemm-synth-out/run of the working directory, never generated/.
    let out = ok(synth(bin, &sub, &["run", "--seed", "3"]), "run --seed 3");
    assert!(files_in(&generated).is_empty(), "run --seed 3 wrote generated/: {:?}", files_in(&generated));
    assert_eq!(files_in(&sub.join("gemm-synth-out/run")).len(), GENERATED.len(), "{out}");
    assert!(out.contains("the inputs differ from the main job's, so no committed generated/ was touched"), "{out}");
    let dataset = crate_root().join("measurements/h200/qwen3-32b-tp1.csv");
    ok(synth(bin, &sub, &["run", "--dataset", dataset.to_str().unwrap(), "--tp", "1"]), "run --dataset");
    assert!(files_in(&generated).is_empty(), "run --dataset wrote generated/");

    // The main job from anywhere inside the checkout writes generated/ and says so with real paths.
    let e = fails(synth(bin, &sub, &["run", "--check"]), "run --check before any run");
    assert!(e.contains("missing") || e.contains("stale") || e.contains("differ"), "{e}");
    let out = ok(synth(bin, &sub, &["run"]), "the main job");
    assert_eq!(files_in(&generated).len(), GENERATED.len() + MAIN_ONLY.len());
    assert!(MAIN_ONLY.iter().all(|e| generated.join(e).exists()), "{:?}", files_in(&generated));
    let real = std::fs::canonicalize(&generated).unwrap();
    assert!(out.contains(&format!("written: {}", real.join("rule.json").display())), "{out}");

    // The check compares the files for the same inputs (the default manifest however it is named is the
    // same job: `app::multi`'s unit tests; one run of the main job here).
    let out = ok(synth(bin, co.path(), &["run", "--check"]), "run --check");
    assert!(out.contains("up to date: "), "{out}");

    // A search writes under the working directory, never into generated/.
    let out =
        ok(synth(bin, &sub, &["search", "--iterations", "1", "--offspring", "1", "--quiet"]), "search --iterations 1");
    let search = std::fs::canonicalize(&sub).unwrap().join("gemm-synth-out/search");
    assert!(out.contains(&format!("written:  {}", search.join("dispatch.rs").display())), "{out}");
    let entries = GENERATED.len() + MAIN_ONLY.len();
    assert_eq!(files_in(&generated).len(), entries, "search changed generated/: {:?}", files_in(&generated));
}

#[test]
fn the_tool_reads_its_own_outputs() {
    let bin = Path::new(env!("CARGO_BIN_EXE_synth"));
    let root = crate_root();
    for name in ["gemm_a8w8_blockscale_heuristic.h", "dispatch.rs", "rule.json"] {
        let path = format!("generated/{name}");
        let err = text(&synth(bin, root, &["check", &path])).1;
        assert!(synth(bin, root, &["check", &path]).status.success(), "check {path}: {err}");
        assert!(err.contains("24 leaves"), "check {path}: {err}");
        ok(synth(bin, root, &["drift", "--rule", &path, "--dataset", "measurements/h200/qwen3-32b-tp2.csv"]), &path);
    }
}

#[test]
fn error_texts_say_what_to_do_on_one_line() {
    let bin = Path::new(env!("CARGO_BIN_EXE_synth"));
    let root = crate_root();
    let tmp = tempfile::tempdir().unwrap();
    let one_line = |e: &str| assert_eq!(e.lines().count(), 1, "not one line:\n{e}");

    let e = fails(synth(bin, root, &["run", "--model", "llama-3.1-8b"]), "run --model llama-3.1-8b");
    one_line(&e);
    assert!(e.contains("holds no shape of llama-3.1-8b TP=2"), "{e}");
    assert!(
        e.contains("`synth bench --model llama-3.1-8b --tp 2 --out X.csv`")
            && e.contains("`synth run --dataset X.csv --model llama-3.1-8b --tp 2`"),
        "{e}"
    );

    let e = fails(synth(bin, root, &["shapes", "--m-set", "log-uniform", "--count", "0"]), "shapes --count 0");
    one_line(&e);
    assert!(e.contains("--m-set log-uniform") && e.contains("--count 1 or more"), "{e}");
    assert!(!e.contains("LogUniform") && !e.contains("--max-m"), "{e}");
    let e = fails(synth(bin, root, &["shapes", "--m-set", "pow2", "--max-m", "0"]), "shapes --max-m 0");
    assert!(e.contains("'--max-m <MAX_M>': 0 is not in 1..=1048576"), "{e}");
    // A --max-m past any batch a server runs would list millions of M values: refused at once.
    let e = fails(synth(bin, root, &["shapes", "--m-set", "aiter", "--max-m", "4294967295"]), "shapes --max-m 2^32-1");
    assert!(e.contains("4294967295 is not in 1..=1048576"), "{e}");

    let journal = tmp.path().join("j.csv");
    let e = fails(
        synth(bin, root, &["bench", "--dry-run", "--cu-num", "0", "--out", journal.to_str().unwrap()]),
        "bench --cu-num 0",
    );
    one_line(&e);
    assert!(e.contains("--cu-num 0") && e.contains("at least 1"), "{e}");

    let profile = "measurements/h200/qwen3-32b-tp2.csv";
    let e = fails(synth(bin, root, &["compare", "--tuned", profile]), "compare --tuned <profile>");
    one_line(&e);
    assert!(e.contains("profile file") && e.contains(&format!("--dataset {profile}")), "{e}");

    let out = ok(synth(bin, root, &["compare"]), "compare without arguments");
    assert!(out.contains("hint: only the default and the oracle were scored"), "{out}");

    let e = fails(
        synth(bin, root, &["run", "--dataset", tmp.path().join("nope.csv").to_str().unwrap()]),
        "run --dataset missing",
    );
    one_line(&e);
    assert!(e.contains("does not exist") && e.contains("synth bench"), "{e}");

    // A leaf budget no rule form can hold: one error at once (it once ran for minutes and 1.8 GB).
    let started = std::time::Instant::now();
    let e =
        fails(synth(bin, root, &["run", "--model", "qwen3-32b", "--max-leaves", "1000000"]), "--max-leaves 1000000");
    one_line(&e);
    assert!(e.contains("--max-leaves 1000000 is above 2001") && e.contains("2000 branches"), "{e}");
    assert!(started.elapsed().as_secs() < 30, "the check comes before any synthesis");
    // An option the multi-model job does not read is named, not ignored.
    let e = fails(synth(bin, root, &["run", "--tp", "4", "--check"]), "run --tp 4");
    one_line(&e);
    assert!(e.contains("--tp is not read by the multi-model job"), "{e}");

    // No nvcc on PATH: one error before any candidate is built.
    let empty = tmp.path().join("bin");
    std::fs::create_dir(&empty).unwrap();
    let o = Command::new(bin)
        .args(["rewrite", "--task", "examples/swiglu/cuda.toml", "--agent", "replay:examples/swiglu/rewrites/cuda"])
        .args(["--out", tmp.path().join("rw").to_str().unwrap()])
        .env("PATH", &empty)
        .current_dir(root)
        .output()
        .unwrap();
    let e = fails(o, "rewrite without nvcc");
    one_line(&e);
    assert!(e.contains("runs `nvcc`, which is not on PATH"), "{e}");
    assert!(!tmp.path().join("rw").exists(), "nothing is written before the check");
}

#[test]
fn every_subcommand_has_examples_and_no_rustdoc_syntax_in_help() {
    let bin = Path::new(env!("CARGO_BIN_EXE_synth"));
    for sub in [
        "run",
        "instances",
        "shapes",
        "import",
        "bench",
        "check",
        "compare",
        "search",
        "rewrite",
        "drift",
        "merge",
        "tune",
    ] {
        let help = ok(synth(bin, crate_root(), &[sub, "--help"]), sub);
        assert!(help.contains("Examples"), "{sub} --help has no examples");
        assert!(help.contains(&format!("synth {sub}")), "{sub} --help examples do not run {sub}");
        assert!(!help.contains("[`"), "{sub} --help shows rustdoc link syntax:\n{help}");
    }
    // One meaning per flag: the TP default is the same everywhere.
    for sub in ["run", "shapes", "bench", "compare", "search"] {
        let help = ok(synth(bin, crate_root(), &[sub, "--help"]), sub);
        let tp = help.split("--tp <TP>").nth(1).unwrap_or_else(|| panic!("{sub} has --tp"));
        let tp = &tp[..tp.find("\n  -").unwrap_or(tp.len())];
        assert!(tp.contains("[default: 2]"), "{sub} --tp: {tp}");
    }
}
