//! `synth compress` as a user runs it: outputs all or nothing (a failed proof writes nothing, a later run
//! never pairs a new residual with an old rule), the rule file validated as every command validates one,
//! an M beyond what the exhaustive proof covers refused at once, and a Regenerate line that, pasted into a
//! shell (with `--out`), reproduces every output byte for byte even when file names hold shell syntax.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use synth_core::catalog::Catalog;

const HEADER: &str = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn synth(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_synth")).current_dir(root()).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn name_of(id: i32) -> String {
    Catalog::embedded().legacy_by_id(id).unwrap().name.clone()
}

/// The hand-made table of `compress::tests`: one layer N = K = 512 with rows (M, kernelId), plus AITER's
/// default kernel (#7) at M = 16 of N = K = 256.
fn tuned_csv(path: &Path, rows: &[(u32, i32)]) {
    let mut text = format!("{HEADER}\ngfx942,304,16,256,256,ck,7,0,1.5,{},1.0,1.0,0.0\n", name_of(7));
    for (m, id) in rows {
        text.push_str(&format!("gfx942,304,{m},512,512,ck,{id},0,{}.5,{},1.0,1.0,0.0\n", m / 8, name_of(*id)));
    }
    std::fs::write(path, text).unwrap();
}

const ROWS: [(u32, i32); 5] = [(16, 8), (32, 8), (48, 3), (64, 0), (128, 0)];

/// Every file of a directory (name -> bytes).
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap())
                .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
                .collect()
        })
        .unwrap_or_default()
}

fn compress(tuned: &Path, rule: Option<&Path>, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["compress", "--tuned", tuned.to_str().unwrap(), "--out", out.to_str().unwrap()];
    if let Some(r) = rule {
        args.extend(["--rule", r.to_str().unwrap()]);
    }
    args.extend(extra);
    synth(&args)
}

#[test]
fn a_failed_proof_writes_nothing_and_leaves_the_last_good_output_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let tuned = dir.path().join("hand.csv");
    tuned_csv(&tuned, &ROWS);
    let good = dir.path().join("good.cpp");
    std::fs::write(&good, "if (N <= 256) { return kernel(-1); } if (M <= 32) { return kernel(8); } return kernel(0);")
        .unwrap();
    let out = dir.path().join("out");
    let o = compress(&tuned, Some(&good), &out, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let before = files(&out);
    assert_eq!(before.len(), 5, "{:?}", before.keys());

    // Kernel 0 everywhere cannot be lossless: on N = 256 the full table misses above M = 16 and AITER runs
    // its default kernel (#7). Into an empty directory: nothing at all is written.
    let bad = dir.path().join("bad.cpp");
    std::fs::write(&bad, "return kernel(0);").unwrap();
    let fresh = dir.path().join("fresh");
    let o = compress(&tuned, Some(&bad), &fresh, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not lossless") && text(&o).contains("nothing was written"), "{}", text(&o));
    assert!(files(&fresh).is_empty(), "{:?}", files(&fresh).keys());

    // Over the good run's output, with another table (so a partial write would pair a new residual with
    // the old rule): every file stays as it was.
    tuned_csv(&tuned, &[(16, 8), (32, 8), (48, 3), (64, 0), (128, 0), (256, 2)]);
    let o = compress(&tuned, Some(&bad), &out, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(files(&out), before);
}

#[test]
fn a_rule_file_is_validated_as_every_command_validates_one() {
    let dir = tempfile::tempdir().unwrap();
    let tuned = dir.path().join("hand.csv");
    tuned_csv(&tuned, &ROWS);
    let out = dir.path().join("out");
    // split-K 17 (the C++ dispatcher would launch KBatch = 1 << 17) and kernelId 99 (no such instance).
    for (name, body) in [("split17.cpp", "return {kernel(0), 17};"), ("kernel99.cpp", "return kernel(99);")] {
        let rule = dir.path().join(name);
        std::fs::write(&rule, body).unwrap();
        let check = synth(&["check", rule.to_str().unwrap()]);
        assert!(!check.status.success(), "{name}: synth check accepts it: {}", text(&check));
        let o = compress(&tuned, Some(&rule), &out, &[]);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", text(&o));
        assert!(text(&o).contains("invalid rule"), "{name}: {}", text(&o));
        assert!(files(&out).is_empty(), "{name}: {:?}", files(&out).keys());
    }
}

#[test]
fn an_m_beyond_the_exhaustive_proof_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let tuned = dir.path().join("huge.csv");
    std::fs::write(&tuned, format!("{HEADER}\ngfx942,304,4194304,512,512,ck,0,0,1.5,{},1.0,1.0,0.0\n", name_of(0)))
        .unwrap();
    let out = dir.path().join("out");
    let started = std::time::Instant::now();
    let o = compress(&tuned, None, &out, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("huge.csv:2: M = 4194304 is above 1048576"), "{}", text(&o));
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
    assert!(files(&out).is_empty());
}

#[test]
fn a_leaf_budget_no_rule_can_hold_is_refused_at_once_as_in_run() {
    let dir = tempfile::tempdir().unwrap();
    let tuned = dir.path().join("t.csv");
    tuned_csv(&tuned, &ROWS);
    let out = dir.path().join("out");
    let started = std::time::Instant::now();
    let o = compress(&tuned, None, &out, &["--max-leaves", "1000000"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--max-leaves 1000000 is above 2001"), "{}", text(&o));
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
    assert!(files(&out).is_empty());
    // The same message as every other command that trains a rule.
    let run = synth(&["run", "--model", "qwen3-32b", "--max-leaves", "1000000", "--out", out.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    assert!(text(&run).contains("--max-leaves 1000000 is above 2001"), "{}", text(&run));
}

/// The "Regenerate with" line of a written file.
fn regenerate_line(out: &Path) -> String {
    let rust = std::fs::read_to_string(out.join("dispatch.rs")).unwrap();
    let line = rust.lines().find(|l| l.contains("Regenerate with: ")).unwrap();
    let line = line.split_once("Regenerate with: ").unwrap().1.trim().to_string();
    // The C++ header carries the same line.
    let header = std::fs::read_to_string(out.join("gemm_a8w8_blockscale_heuristic.h")).unwrap();
    assert!(header.contains(&format!("Regenerate with: {line}")), "{header}");
    line
}

/// Pastes `line` into `sh` in the crate root with the built binary for `cargo run --release --` and
/// `--out` appended; returns its output.
fn paste(line: &str, out: &Path, cwd: &Path) -> Output {
    let rest = line.strip_prefix("cargo run --release -- ").unwrap_or_else(|| panic!("{line}"));
    let bin = synth_base::sanitize::shell_word(env!("CARGO_BIN_EXE_synth"));
    let cmd = format!("{bin} {rest} --out {}", synth_base::sanitize::shell_word(out.to_str().unwrap()));
    Command::new("sh").arg("-c").arg(cmd).current_dir(cwd).output().unwrap()
}

fn reproduces(tuned: &Path, rule: Option<&Path>, extra: &[&str], work: &Path) -> String {
    let first = work.join("first");
    let o = compress(tuned, rule, &first, extra);
    assert!(o.status.success(), "{}", text(&o));
    let line = regenerate_line(&first);
    let again = work.join("again");
    let o = paste(&line, &again, root());
    assert!(o.status.success(), "{line}\n{}", text(&o));
    let (a, b) = (files(&first), files(&again));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "{line}");
    for (name, bytes) in &a {
        assert!(bytes == &b[name], "{name} differs when regenerated with: {line}");
    }
    line
}

#[test]
fn the_regenerate_line_reproduces_every_output_and_quotes_file_names() {
    let dir = tempfile::tempdir().unwrap();
    // File names a shell would run: the line must name them as words.
    let hostile = dir.path().join("tables $(touch PWNED) `touch PWNED2`; x");
    std::fs::create_dir_all(&hostile).unwrap();
    let tuned = hostile.join("my table's rows.csv");
    tuned_csv(&tuned, &ROWS);
    let rule = hostile.join("rule $HOME.cpp");
    std::fs::write(&rule, "if (N <= 256) { return kernel(-1); } if (M <= 32) { return kernel(8); } return kernel(0);")
        .unwrap();

    // With --rule: the line names the rule (without it, pasting it would train one).
    let line = reproduces(&tuned, Some(&rule), &[], &dir.path().join("a"));
    assert!(line.contains("--rule"), "{line}");
    // Trained, with limits other than the defaults and --device: the line keeps them.
    let line = reproduces(
        &tuned,
        None,
        &["--max-leaves", "3", "--max-depth", "2", "--device", "gfx942:304"],
        &dir.path().join("b"),
    );
    assert!(line.contains("--max-leaves 3 --max-depth 2") && line.contains("--device gfx942:304"), "{line}");
    // Trained with every default: pasting the line trains the same rule.
    reproduces(&tuned, None, &[], &dir.path().join("c"));
    // A relative --tuned: the line does not depend on the working directory it was run in.
    let first = dir.path().join("d1");
    let rel = Command::new(env!("CARGO_BIN_EXE_synth"))
        .current_dir(&hostile)
        .args(["compress", "--tuned", "my table's rows.csv", "--out", first.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(rel.status.success(), "{}", text(&rel));
    let line = regenerate_line(&first);
    let o = paste(&line, &dir.path().join("d2"), root());
    assert!(o.status.success(), "{line}\n{}", text(&o));
    assert_eq!(files(&first), files(&dir.path().join("d2")), "{line}");

    for cwd in [root().to_path_buf(), hostile.clone(), PathBuf::from(dir.path())] {
        for marker in ["PWNED", "PWNED2"] {
            assert!(!cwd.join(marker).exists(), "the line ran shell code in {}", cwd.display());
        }
    }
}
