//! Where commands write: an output never replaces one of the command's inputs or another output, the
//! report files of `drift` are written all or nothing, an output directory is written in place (the
//! working directory too), never through a link inside it, and two writers of one directory at once both
//! land their files.

mod common;

use std::path::Path;

use common::{strs as s, synth, text};

const DATA: &str = "measurements/h200/qwen3-32b-tp2.csv";

/// A copy of `from` in `dir` named `name`, its path as text.
fn copy(dir: &Path, from: &str, name: &str) -> String {
    let p = dir.join(name);
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join(from), &p).unwrap();
    p.to_str().unwrap().to_string()
}

/// Runs `args` and checks it fails with a message containing every one of `needles`, nothing written.
fn refused(args: &[&str], needles: &[&str]) {
    let o = synth(&s(args), &[]);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    for n in needles {
        assert!(err.contains(n), "{args:?}: {n:?} not in {err}");
    }
}

#[test]
fn an_output_never_replaces_an_input_or_another_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let victim = copy(d, DATA, "victim.csv");
    let before = std::fs::read(&victim).unwrap();
    let rule = copy(d, "generated/rule.json", "rule.json");
    let rule_before = std::fs::read(&rule).unwrap();
    let both = d.join("both.svg").to_str().unwrap().to_string();
    let same = d.join("same.out").to_str().unwrap().to_string();
    // A hard link is the same file under another name.
    let link = d.join("link.csv").to_str().unwrap().to_string();
    std::fs::hard_link(&victim, &link).unwrap();

    refused(
        &["compare", "--dataset", &victim, "--csv", &victim],
        &[&format!("--csv {victim} is the file --dataset {victim} ")],
    );
    refused(
        &["compare", "--dataset", &victim, "--csv", &link],
        &[&format!("--csv {link} is the file --dataset {victim}")],
    );
    refused(&["compare", "--dataset", DATA, "--rule", &rule, "--csv", &rule], &["--csv", "--rule"]);
    refused(&["compare", "--dataset", DATA, "--csv", &both, "--svg", &both], &["--csv", "--svg", "are the same file"]);
    let png = d.join("both.png").to_str().unwrap().to_string();
    refused(&["compare", "--dataset", DATA, "--csv", &png, "--svg", &both], &["the PNG beside --svg", "same file"]);
    refused(
        &["drift", "--rule", &rule, "--dataset", &victim, "--report-json", &victim],
        &["--report-json", "--dataset"],
    );
    refused(&["drift", "--rule", &rule, "--dataset", DATA, "--report-md", &rule], &["--report-md", "--rule"]);
    refused(
        &["drift", "--rule", &rule, "--dataset", DATA, "--report-md", &same, "--report-json", &same],
        &["--report-md", "--report-json", "are the same file"],
    );
    assert_eq!(std::fs::read(&victim).unwrap(), before);
    assert_eq!(std::fs::read(&rule).unwrap(), rule_before);
    assert!(!Path::new(&both).exists() && !Path::new(&same).exists());

    // An --out directory holding an input under the name of a file the command writes.
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    let tuned = copy(&out, "measurements/mi300x/a8w8_blockscale_tuned_gemm_glm5_1.csv", "rule.json");
    let tuned_before = std::fs::read(&tuned).unwrap();
    refused(
        &["compress", "--tuned", &tuned, "--out", out.to_str().unwrap()],
        &["(its rule.json)", "is the file --tuned", "would replace that input"],
    );
    assert_eq!(std::fs::read(&tuned).unwrap(), tuned_before);
}

#[test]
fn drift_reports_are_written_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("ok.md");
    let json = dir.path().join("nodir/x.json");
    let o = synth(
        &s(&["drift", "--dataset", DATA, "--report-md", md.to_str().unwrap(), "--report-json", json.to_str().unwrap()]),
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains(&format!("cannot write {}", json.display())), "{}", text(&o));
    assert!(!md.exists(), "the markdown report is not written when the JSON one cannot be");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing staged is left: {}", text(&o));
}

#[test]
fn the_working_directory_is_written_in_place_and_links_in_it_are_refused() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("notes.md"), "mine").unwrap();
    let inode = std::fs::metadata(&work).unwrap().ino();
    let rule = Path::new(env!("CARGO_MANIFEST_DIR")).join("generated/rule.json");
    let aiter = |cwd: &Path, out: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_synth"))
            .args(["aiter", "--rule", rule.to_str().unwrap(), "--out", out])
            .current_dir(cwd)
            .output()
            .unwrap()
    };
    let o = aiter(&work, ".");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::metadata(&work).unwrap().ino(), inode, "the working directory is the same directory");
    let names: Vec<String> =
        std::fs::read_dir(&work).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names.len(), 2, "the patch and the user's file, no staging left: {names:?}");
    assert_eq!(std::fs::read_to_string(work.join("notes.md")).unwrap(), "mine");

    // `synth run ... --out ud7` with ud7/aiter a link to a directory elsewhere: refused, nothing written there.
    let (ud7, elsewhere) = (dir.path().join("ud7"), dir.path().join("elsewhere"));
    std::fs::create_dir(&ud7).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, ud7.join("aiter")).unwrap();
    let o = synth(&s(&["run", "--dataset", DATA, "--max-leaves", "2", "--out", ud7.to_str().unwrap()]), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains(&format!("{} is a symbolic link", ud7.join("aiter").display())), "{}", text(&o));
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(&ud7).unwrap().count(), 1, "nothing but the link");
}

/// Two `synth export` runs into one directory at once (other layers each): both succeed, both files are
/// there, and the sidecar lists both (one as the last export's, the other as an earlier one's). Once, the
/// second commit exchanged the directory with a replica made before the first one's file existed.
#[test]
fn two_exports_into_one_directory_at_once_both_land() {
    let dir = tempfile::tempdir().unwrap();
    let rule = dir.path().join("rule.json");
    // triton_bm64_bn128_bk128_g32_w4_s2 at every shape.
    std::fs::write(&rule, r#"{"root": {"leaf": {"backend": "triton", "kernel_id": 67703222, "split_k": 0}}}"#).unwrap();
    let files = ["N=1536,K=7168", "N=2048,K=512"]
        .map(|nk| format!("{nk},device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"));
    for attempt in 0..6 {
        let out = dir.path().join(format!("out{attempt}"));
        let export = |shapes: &str| {
            std::process::Command::new(env!("CARGO_BIN_EXE_synth"))
                .args(["export", "vllm", "--rule", rule.to_str().unwrap(), "--shapes", shapes])
                .args(["--device-name", "NVIDIA H200", "--out", out.to_str().unwrap()])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (export("1536:7168"), export("2048:512"));
        for o in [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()] {
            assert!(o.status.success(), "attempt {attempt}: {}", text(&o));
        }
        let mut want = vec![files[0].clone(), files[1].clone(), "synth-export.provenance.json".to_string()];
        want.sort();
        assert_eq!(names(&out), want, "attempt {attempt}: a file is lost or something is left");
        let side: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("synth-export.provenance.json")).unwrap()).unwrap();
        let mut listed: Vec<String> = ["files", "earlier_files"]
            .iter()
            .flat_map(|k| side[k].as_array().unwrap().iter().map(|e| e["file"].as_str().unwrap().to_string()))
            .collect();
        listed.sort();
        assert_eq!(listed, files.to_vec(), "attempt {attempt}: {side}");
    }
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn an_output_inside_an_input_directory_is_refused() {
    // A dataset directory is read whole: a file written into it would be read as a table by the next run.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let table = copy(&data, DATA, "qwen3-32b-tp2.csv");
    let before = std::fs::read(&table).unwrap();
    let rule = copy(dir.path(), "generated/rule.json", "rule.json");
    let d = data.to_str().unwrap();
    let csv = data.join("out.csv");
    refused(
        &["compare", "--dataset", d, "--rule", &rule, "--csv", csv.to_str().unwrap()],
        &[&format!("--csv {} is inside the directory --dataset {d}", csv.display())],
    );
    // `run --out` the dataset directory itself: its rule.json, sources and CSVs would land among the tables.
    let started = std::time::Instant::now();
    let o = synth(&s(&["run", "--dataset", d, "--model", "qwen3-32b", "--out", d]), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("is inside the directory --dataset"), "{}", text(&o));
    eprintln!("run --out DATASET_DIR refused after {:.1} s", started.elapsed().as_secs_f64());
    assert_eq!(names(&data), ["qwen3-32b-tp2.csv"], "nothing is written into the dataset directory");
    assert_eq!(std::fs::read(&table).unwrap(), before);
}

#[test]
fn run_into_its_dataset_directory_is_refused_before_synthesizing() {
    // The refusal needs only the command line: a run that synthesizes (minutes at a larger --exact-depth)
    // and only then refuses to write wastes that time.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    copy(&data, DATA, "qwen3-32b-tp2.csv");
    let d = data.to_str().unwrap();
    let o = synth(&s(&["run", "--dataset", d, "--model", "qwen3-32b", "--out", d]), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is inside the directory --dataset"), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(!stdout.contains("rule:") && !stdout.contains("synthesized"), "it synthesized first:\n{stdout}");
    assert_eq!(names(&data), ["qwen3-32b-tp2.csv"]);
}

/// `synth search` on `dataset`, one iteration of one offspring (the built-in agent), into `out`.
fn search(dataset: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = s(&["search", "--iterations", "1", "--offspring", "1", "--quiet", "--dataset"]);
    args.push(dataset.to_str().unwrap().to_string());
    args.push("--out".into());
    args.push(out.to_str().unwrap().to_string());
    args.extend(s(extra));
    synth(&args, &[])
}

#[test]
fn a_search_never_writes_over_its_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    std::fs::create_dir(&out).unwrap();
    // The dataset under the name of the comparison table the search writes into --out.
    let input = copy(&out, DATA, "compare.csv");
    let before = std::fs::read(&input).unwrap();
    let o = search(Path::new(&input), &out, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("--dataset {input}")) && err.contains("--out"), "{err}");
    assert!(err.contains("would replace that input"), "{err}");
    assert_eq!(std::fs::read(&input).unwrap(), before, "the input is unchanged");
    assert_eq!(names(&out), ["compare.csv"], "refused before the loop: no trace, no settings record");

    // A trace named like a file the search writes: the winner's source would replace the trace.
    let data = copy(dir.path(), DATA, "data.csv");
    let t = dir.path().join("t");
    std::fs::create_dir(&t).unwrap();
    let trace = t.join("dispatch.rs");
    std::fs::write(&trace, "").unwrap();
    let o = search(Path::new(&data), &t, &["--trace", trace.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--trace") && err.contains("--out") && err.contains("dispatch.rs"), "{err}");
    assert_eq!(names(&t), ["dispatch.rs"], "{err}");
    assert_eq!(std::fs::read(&trace).unwrap(), b"");
}

#[test]
fn a_trace_named_like_a_search_output_is_refused_when_it_does_not_exist_yet() {
    // The first run with `--trace S/dispatch.rs --out S` writes the trace there during the loop and the
    // winner's dispatch.rs over it at the end: refused before the loop, whether the trace exists or not.
    let dir = tempfile::tempdir().unwrap();
    let data = copy(dir.path(), DATA, "data.csv");
    let t = dir.path().join("t");
    let trace = t.join("dispatch.rs");
    let o = search(Path::new(&data), &t, &["--trace", trace.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--trace") && err.contains("--out") && err.contains("dispatch.rs"), "{err}");
    assert!(!trace.exists(), "{}", text(&o));
}

#[test]
fn a_refused_search_keeps_the_earlier_settings_and_a_resume_checks_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.csv");
    copy(dir.path(), DATA, "data.csv");
    let out = dir.path().join("s");
    let first = search(&data, &out, &[]);
    assert!(first.status.success(), "{}", text(&first));
    let settings = out.join("trace.jsonl.settings.json");
    let (trace_before, settings_before) =
        (std::fs::read(out.join("trace.jsonl")).unwrap(), std::fs::read(&settings).unwrap());

    // Another search into the same directory with other settings and no --resume: refused, and the
    // earlier run's settings record is left as it was (else a later --resume would mix two runs).
    let again = search(&data, &out, &["--seed", "7"]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(text(&again).contains("holds the attempts of an earlier run"), "{}", text(&again));
    assert_eq!(std::fs::read(&settings).unwrap(), settings_before, "the settings record changed");
    assert_eq!(std::fs::read(out.join("trace.jsonl")).unwrap(), trace_before);

    // The same path with other times: the trace's scores were computed on other data, so no resume.
    let csv = std::fs::read_to_string(&data).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let timed: Vec<usize> =
        header.iter().enumerate().filter(|(_, h)| **h == "us" || h.starts_with("us_")).map(|(i, _)| i).collect();
    assert!(!timed.is_empty(), "{header:?}");
    let mut scaled = header.join(",") + "\n";
    for line in lines {
        let mut cells: Vec<String> = line.split(',').map(str::to_string).collect();
        for &i in &timed {
            if let Ok(v) = cells[i].parse::<f64>() {
                cells[i] = format!("{:.4}", v * 1.5);
            }
        }
        scaled.push_str(&cells.join(","));
        scaled.push('\n');
    }
    std::fs::write(&data, scaled).unwrap();
    let resumed = search(&data, &out, &["--resume"]);
    let msg = text(&resumed);
    assert_eq!(resumed.status.code(), Some(1), "{msg}");
    assert!(msg.contains("other settings") && msg.contains("training_data"), "{msg}");
    assert!(!msg.contains("seed:"), "the refused --seed 7 run left no trace in the record: {msg}");
    assert_eq!(std::fs::read(out.join("trace.jsonl")).unwrap(), trace_before);
}

#[test]
fn out_of_range_counts_are_refused_by_the_argument_parser() {
    // Each with --out a fresh directory, so that a regression that runs them writes nowhere that matters
    // (`run` alone would write the checkout's generated/).
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    for (args, needle) in [
        (&["search", "--jobs", "100000", "--iterations", "1", "--offspring", "1"][..], "100000 is not in 0..=256"),
        (&["run", "--exact-depth", "4"][..], "4 is not in 1..=3"),
        (&["run", "--exact-depth", "0"][..], "0 is not in 1..=3"),
    ] {
        let started = std::time::Instant::now();
        let mut args = args.to_vec();
        args.extend(["--out", out]);
        let args = &args[..];
        let o = synth(&s(args), &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?} ran: {}", text(&o));
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{args:?} ran");
        assert!(!Path::new(out).exists(), "{args:?} ran");
    }
}
