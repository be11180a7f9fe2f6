//! Bad inputs and output collisions end to end through the `synth` binary, each against what a user would
//! expect: a closed standard error, an input at the name of a file a command writes beside its outputs, an
//! edited trace resumed, a directory entry that is no file, a rule of a backend the data does not hold,
//! contradictory manifests, and TP degrees past the KV head count.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

mod common;
use common::{run_bounded, text};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn synth_in(dir: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_synth"));
    c.current_dir(dir).args(args);
    run_bounded(&mut c, Duration::from_secs(300)).0
}

fn data(name: &str) -> String {
    root().join(name).display().to_string()
}

#[test]
fn a_closed_standard_error_neither_panics_nor_stops_the_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_synth");
    // An error message to a closed stderr: exit 1, not a panic (101).
    let mut c = Command::new("sh");
    c.arg("-c").arg(format!("exec '{bin}' shapes --spec /nonexistent/spec.toml 2>&-"));
    let (o, _) = run_bounded(&mut c, Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // A note to a closed stderr: the run goes on and writes its outputs.
    let out = dir.path().join("s");
    let mut c = Command::new("sh");
    c.current_dir(dir.path()).arg("-c").arg(format!(
        "exec '{bin}' search --iterations 1 --offspring 1 --quiet --resume --out '{}' 2>&-",
        out.display()
    ));
    let (o, _) = run_bounded(&mut c, Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(out.join("dispatch.rs").is_file());
}

#[test]
fn search_never_writes_its_settings_record_over_an_input_or_a_foreign_file() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("run.jsonl.settings.json");
    std::fs::copy(root().join("measurements/h200/qwen3-32b-tp2.csv"), &table).unwrap();
    let before = std::fs::read(&table).unwrap();
    let t = table.display().to_string();
    let o = synth_in(
        dir.path(),
        &["search", "--iterations", "1", "--offspring", "1", "--dataset", &t, "--trace", "run.jsonl", "--out", "o"],
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("the settings record of --trace run.jsonl"), "{}", text(&o));
    assert_eq!(std::fs::read(&table).unwrap(), before);
    // A file of the user's there (not a record search wrote) is not replaced either.
    std::fs::write(dir.path().join("exp.settings.json"), "my notes\n").unwrap();
    let o = synth_in(dir.path(), &["search", "--iterations", "1", "--offspring", "1", "--trace", "exp", "--out", "o2"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("exp.settings.json is in the way"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(dir.path().join("exp.settings.json")).unwrap(), "my notes\n");
}

#[test]
fn a_resumed_trace_whose_candidate_text_was_edited_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["search", "--iterations", "2", "--offspring", "2", "--quiet", "--out", "s"];
    let o = synth_in(dir.path(), &args);
    assert!(o.status.success(), "{}", text(&o));
    let trace = dir.path().join("s/trace.jsonl");
    let lines: Vec<String> = std::fs::read_to_string(&trace).unwrap().lines().map(str::to_string).collect();
    // The second attempt in the file gets the baseline's text and keeps its own score.
    let base: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    let mut first: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    assert_ne!(first["candidate"], base["candidate"]);
    first["candidate"] = base["candidate"].clone();
    let mut edited = lines.clone();
    edited[1] = first.to_string();
    std::fs::write(&trace, edited.join("\n") + "\n").unwrap();
    let before = std::fs::read(&trace).unwrap();
    let mut resume = args.to_vec();
    resume.push("--resume");
    let o = synth_in(dir.path(), &resume);
    assert!(!o.status.success());
    assert!(text(&o).contains(&format!("attempt {} records score", first["id"])), "{}", text(&o));
    assert!(text(&o).contains("the trace was edited or written for other data"), "{}", text(&o));
    assert_eq!(std::fs::read(&trace).unwrap(), before, "nothing appended");
    // The trace as written resumes.
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let o = synth_in(dir.path(), &resume);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_dataset_directory_entry_that_is_no_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let jd = dir.path().join("jd");
    std::fs::create_dir(&jd).unwrap();
    std::fs::copy(root().join("measurements/h200/qwen3-32b-tp2.csv"), jd.join("qwen3-32b-tp2.csv")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("missing.csv"), jd.join("qwen3-32b-tp2-offgrid.csv")).unwrap();
    let o = synth_in(dir.path(), &["run", "--dataset", "jd", "--model", "qwen3-32b", "--out", "o"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("qwen3-32b-tp2-offgrid.csv") && text(&o).contains("dangling"), "{}", text(&o));
    assert!(!dir.path().join("o").exists());
    std::fs::remove_file(jd.join("qwen3-32b-tp2-offgrid.csv")).unwrap();
    std::fs::create_dir(jd.join("old.csv")).unwrap();
    let o = synth_in(dir.path(), &["run", "--dataset", "jd", "--model", "qwen3-32b", "--out", "o"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("old.csv") && text(&o).contains("a directory"), "{}", text(&o));
}

#[test]
fn a_tuned_table_without_the_default_kernel_compresses() {
    let dir = tempfile::tempdir().unwrap();
    let text_in =
        std::fs::read_to_string(root().join("measurements/mi300x/a8w8_blockscale_tuned_gemm_glm5_1.csv")).unwrap();
    let kept: Vec<&str> = text_in.lines().filter(|l| !l.contains(",ck,7,")).collect();
    assert!(kept.len() + 1 < text_in.lines().count(), "the table has rows of kernel 7 to drop");
    std::fs::write(dir.path().join("no7.csv"), kept.join("\n") + "\n").unwrap();
    let o = synth_in(dir.path(), &["compress", "--tuned", "no7.csv", "--out", "c"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("0 mismatches"), "{}", text(&o));
}

/// A rule of one triton leaf (vLLM's default config), as JSON.
fn triton_rule(dir: &Path) -> PathBuf {
    use synth_core::catalog::triton::VLLM_DEFAULT;
    use synth_core::catalog::Libtype;
    use synth_core::rule::{Leaf, Node, Rule};
    let rule = Rule::new(Node::Leaf(Leaf::of(Libtype::Triton, VLLM_DEFAULT.kernel_id(), 0)));
    let path = dir.join("triton.json");
    std::fs::write(&path, synth_core::rule::to_json(&rule)).unwrap();
    path
}

#[test]
fn a_rule_of_a_backend_the_data_does_not_hold_is_said_so_not_called_drift() {
    let dir = tempfile::tempdir().unwrap();
    let rule = triton_rule(dir.path()).display().to_string();
    let table = data("measurements/h200/qwen3-32b-tp2.csv");
    let o = synth_in(dir.path(), &["drift", "--rule", &rule, "--dataset", &table]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("the data holds no triton rows"), "{}", text(&o));
    assert!(!text(&o).contains("drift detected"), "{}", text(&o));
    let o = synth_in(dir.path(), &["compare", "--rule", &rule, "--dataset", &table, "--model", "qwen3-32b"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("note: ") && text(&o).contains("the data holds no triton rows"), "{}", text(&o));
}

#[test]
fn drift_says_when_the_default_has_no_usable_cell() {
    let dir = tempfile::tempdir().unwrap();
    // The dataset without kernel 7 (the default) rows.
    let src = std::fs::read_to_string(root().join("measurements/h200/qwen3-32b-tp2.csv")).unwrap();
    let kept: Vec<&str> = src.lines().filter(|l| !l.contains(",ck,7,")).collect();
    std::fs::write(dir.path().join("no7.csv"), kept.join("\n") + "\n").unwrap();
    let rule = data("generated/rule.json");
    let o = synth_in(
        dir.path(),
        &["drift", "--rule", &rule, "--dataset", "no7.csv", "--min-fraction", "0.01", "--report-json", "r.json"],
    );
    assert!(text(&o).contains("note: the default kernel's cell is not usable on"), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert!(report["notes"][0].as_str().unwrap().contains("not usable"), "{report}");
}

#[test]
fn an_off_grid_m_that_is_a_grid_m_zero_or_repeated_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = std::fs::read_to_string(root().join("measurements/h200/datasets.toml")).unwrap();
    let journals = root().join("measurements/h200");
    for (bad, says) in [
        ("16, 6", "off_grid_m 16 is an M of the dataset grid"),
        ("0, 6", "off_grid_m 0"),
        ("6, 6", "off_grid_m 6 is listed twice"),
    ] {
        let start = manifest.find("off_grid_m = [").unwrap();
        let end = start + manifest[start..].find(']').unwrap();
        let edited = format!("{}off_grid_m = [{bad}{}", &manifest[..start], &manifest[end..]);
        // The journals named by absolute path, so the copy reads the committed ones.
        let at = format!("\"{}/", journals.display());
        let edited: String = edited
            .lines()
            .map(|l| match l.starts_with("journals = [") || l.starts_with("vendor = [") {
                true => format!("{}\n", l.replace("[\"", &format!("[{at}")).replace(", \"", &format!(", {at}"))),
                false => format!("{l}\n"),
            })
            .collect();
        let path = dir.path().join("m.toml");
        std::fs::write(&path, edited).unwrap();
        let o = synth_in(dir.path(), &["run", "--manifest", "m.toml", "--out", "o"]);
        assert!(!o.status.success());
        assert!(text(&o).contains(says), "{}", text(&o));
    }
}

#[test]
fn tp_past_the_kv_head_count_replicates_kv_heads_as_vllm_does() {
    let dir = tempfile::tempdir().unwrap();
    // Llama-3.1-70B: 64 heads, 8 KV heads, head_dim 128, hidden 8192. TP 16: 4 query heads and one (replicated)
    // KV head per rank: (4 + 2) x 128 = 768; o_proj K = 64 x 128 / 16 = 512.
    let o = synth_in(dir.path(), &["shapes", "--model", "llama-3.1-70b", "--tp", "16"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["qkv_proj", "768", "8192"]), "{t}");
    assert!(t.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["o_proj", "8192", "512"]), "{t}");
    let o = synth_in(dir.path(), &["shapes", "--model", "llama-3.1-70b", "--tp", "12"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("TP 12 does not divide the attention head count (64)"), "{}", text(&o));
}

#[test]
fn aiter_outputs_never_replace_the_rule_they_are_made_from() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d");
    std::fs::create_dir(&d).unwrap();
    let rule = d.join("gemm_a8w8_blockscale_heuristic.patch");
    std::fs::copy(root().join("generated/rule.json"), &rule).unwrap();
    let before = std::fs::read(&rule).unwrap();
    let o = synth_in(dir.path(), &["aiter", "--rule", "d/gemm_a8w8_blockscale_heuristic.patch", "--out", "d"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("writing it would replace that input"), "{}", text(&o));
    assert_eq!(std::fs::read(&rule).unwrap(), before);
    let kit_rule = d.join("expected.txt");
    std::fs::copy(root().join("generated/rule.json"), &kit_rule).unwrap();
    let o = synth_in(dir.path(), &["aiter", "--rule", "d/expected.txt", "--kit", "d"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--kit d (its expected.txt)"), "{}", text(&o));
    assert_eq!(std::fs::read(&kit_rule).unwrap(), before);
}

#[test]
fn a_python_selector_given_as_a_rule_says_which_file_to_pass() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("select_kernel.py"), "def select(m, n, k):\n    return ('ck', 7, 0)\n").unwrap();
    let o = synth_in(dir.path(), &["check", "select_kernel.py"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("a Python file is not a rule file"), "{}", text(&o));
}

#[test]
fn a_journal_held_by_a_measurement_run_is_not_merged_under_another_name() {
    use synth_core::catalog::Catalog;
    use synth_measure::measure::Journal;
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::embedded();
    let path = dir.path().join("j.csv");
    let (held, _) = Journal::open(&path, &catalog).unwrap();
    let alias = dir.path().join("alias.csv");
    std::os::unix::fs::symlink(&path, &alias).unwrap();
    let out = dir.path().join("merged.csv");
    let o = synth_in(dir.path(), &["merge", "alias.csv", "--out", "merged.csv"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("journal alias.csv is in use by a measurement run"), "{}", text(&o));
    assert!(!out.exists() && !dir.path().join("merged.csv.lock").exists(), "nothing written");
    drop(held);
}
