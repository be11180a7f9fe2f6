//! Where commands write: an output never replaces one of the command's inputs or another output, the
//! report files of `drift` are written all or nothing, and an output directory is written in place when it
//! cannot be exchanged (the working directory), never through a link inside it.

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
