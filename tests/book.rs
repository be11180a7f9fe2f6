//! The documentation book: its result tables are rendered from the committed CSVs by `synth book` and are
//! fresh; `synth book` renders hand-written CSVs to hand-written markdown, escapes every cell, and refuses
//! bad input naming file and line; every link of the README and the book points at a file that exists,
//! every chapter is in SUMMARY.md, and every test the "Hostile inputs" chapter names exists.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn book(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_synth")).arg("book").args(args).current_dir(cwd).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn the_committed_tables_are_fresh() {
    let o = book(&["--check"], &root());
    assert!(o.status.success(), "docs/src/generated/ is out of date: run `synth book` and commit it\n{}", text(&o));
    assert!(text(&o).contains("fresh"), "{}", text(&o));
}

/// A checkout-like directory with small result CSVs whose tables are known by hand.
fn fixture(dir: &Path) {
    write(
        &dir.join("generated/evaluations.csv"),
        "evaluation,config,policy,shapes,of_oracle\n\
         heldout-grid,training,default,4,0.3805\n\
         heldout-grid,training,synthesized,4,0.9920\n\
         off-grid,training,default,2,0.4140\n\
         off-grid,training,synthesized,2,0.9921\n",
    );
    write(
        &dir.join("generated/leaves_curve.csv"),
        "setting,budget,heldout_of_oracle\nsample,4,0.9580\nsample,8,0.9777\n",
    );
    write(
        &dir.join("generated/triton/compare.csv"),
        "layer,M,policy,status,us,default_us,of_oracle,speedup_vs_default\n\
         qkv,1,rule,ok,5,10,0.5,2\n\
         qkv,2,rule,missing,2.5,20,0.8,8\n\
         qkv,1,default,ok,10,10,0.25,1\n\
         qkv,2,default,ok,20,20,0.1,1\n",
    );
}

const HEAD: &str = "<!-- Rendered by `synth book` from ";
const TAIL: &str = " (checked by `synth book --check`); do not edit by hand. -->\n\n";

#[test]
fn hand_written_csvs_render_to_hand_written_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, out) = (tmp.path().join("repo"), tmp.path().join("pages"));
    fixture(&src);
    let o = book(&["--root", src.to_str().unwrap(), "--out", out.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", text(&o));
    let page = |name: &str| std::fs::read_to_string(out.join(name)).unwrap();

    assert_eq!(
        page("evaluations.md"),
        format!(
            "{HEAD}generated/evaluations.csv{TAIL}of\\_oracle by policy:\n\n\
             | evaluation | config | shapes | default | synthesized |\n\
             | --- | --- | ---: | ---: | ---: |\n\
             | heldout-grid | training | 4 | 0.3805 | 0.9920 |\n\
             | off-grid | training | 2 | 0.4140 | 0.9921 |\n"
        )
    );
    assert_eq!(
        page("evaluations-full.md"),
        format!(
            "{HEAD}generated/evaluations.csv{TAIL}evaluation = heldout-grid:\n\n\
             | config | policy | shapes | of\\_oracle |\n| --- | --- | ---: | ---: |\n\
             | training | default | 4 | 0.3805 |\n| training | synthesized | 4 | 0.9920 |\n\n\
             evaluation = off-grid:\n\n\
             | config | policy | shapes | of\\_oracle |\n| --- | --- | ---: | ---: |\n\
             | training | default | 2 | 0.4140 |\n| training | synthesized | 2 | 0.9921 |\n"
        )
    );
    assert_eq!(
        page("leaves_curve.md"),
        format!(
            "{HEAD}generated/leaves_curve.csv{TAIL}| setting | budget | heldout\\_of\\_oracle |\n\
             | --- | ---: | ---: |\n| sample | 4 | 0.9580 |\n| sample | 8 | 0.9777 |\n"
        )
    );
    // rule: of_oracle geomean sqrt(0.5 * 0.8) = 0.632; speed-up geomean sqrt(2 * 8) = 4; total (10 + 20) /
    // (5 + 2.5) = 4; one unusable pick. default: sqrt(0.25 * 0.1) = 0.158, 1, 1.
    assert_eq!(
        page("triton/compare-summary.md"),
        format!(
            "{HEAD}generated/triton/compare.csv{TAIL}\
             | policy | shapes | unusable picks | of oracle (geomean) | x default (geomean) | x default (total) |\n\
             | --- | ---: | ---: | ---: | ---: | ---: |\n\
             | rule | 2 | 1 | 0.632 | 4.000 | 4.000 |\n\
             | default | 2 | 0 | 0.158 | 1.000 | 1.000 |\n"
        )
    );
    // Only the CSVs that exist are rendered: no triton evaluations, no top-level compare.
    assert!(!out.join("compare-summary.md").exists() && !out.join("triton/evaluations.md").exists());

    let o = book(&["--root", src.to_str().unwrap(), "--out", out.to_str().unwrap(), "--check"], tmp.path());
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn check_names_a_stale_page_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, out) = (tmp.path().join("repo"), tmp.path().join("pages"));
    fixture(&src);
    let args = ["--root", src.to_str().unwrap(), "--out", out.to_str().unwrap()];
    assert!(book(&args, tmp.path()).status.success());
    write(&src.join("generated/leaves_curve.csv"), "setting,budget,heldout_of_oracle\nsample,4,0.9000\n");
    let before = std::fs::read(out.join("leaves_curve.md")).unwrap();
    let o = book(&[&args[..], &["--check"]].concat(), tmp.path());
    assert!(!o.status.success());
    let e = text(&o);
    assert!(e.contains("leaves_curve.md (differs)") && !e.contains("evaluations.md"), "{e}");
    assert_eq!(std::fs::read(out.join("leaves_curve.md")).unwrap(), before, "--check wrote");
}

#[test]
fn a_csv_cell_never_becomes_markup() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, out) = (tmp.path().join("repo"), tmp.path().join("pages"));
    write(
        &src.join("generated/leaves_curve.csv"),
        "setting,budget\n\"<img src=x onerror=alert(1)>|[a](javascript:x)\",\"`{{#include /etc/passwd}}`\u{1b}[2J\"\n",
    );
    let o = book(&["--root", src.to_str().unwrap(), "--out", out.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", text(&o));
    let page = std::fs::read_to_string(out.join("leaves_curve.md")).unwrap();
    let row = page.lines().last().unwrap();
    assert_eq!(
        row,
        "| \\<img src=x onerror=alert(1)\\>\\|\\[a\\](javascript:x) | \\`\\{\\{\\#include /etc/passwd\\}\\}\\`\\<U+001B\\>\\[2J |"
    );
    assert!(!page.contains('\u{1b}'));
}

#[test]
fn bad_input_is_one_error_naming_file_and_line_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, out) = (tmp.path().join("repo"), tmp.path().join("pages"));
    fixture(&src);
    write(&src.join("generated/leaves_curve.csv"), "setting,budget\nsample,4\nsample\n");
    let o = book(&["--root", src.to_str().unwrap(), "--out", out.to_str().unwrap()], tmp.path());
    assert!(!o.status.success());
    assert!(text(&o).contains("generated/leaves_curve.csv: line 3"), "{}", text(&o));
    assert!(!out.exists(), "a failed render wrote pages");

    write(&src.join("generated/leaves_curve.csv"), "setting,budget\nsample,4\n");
    write(
        &src.join("generated/triton/compare.csv"),
        "policy,status,us,default_us,of_oracle,speedup_vs_default\nr,ok,0,1,1,1\n",
    );
    let o = book(&["--root", src.to_str().unwrap(), "--out", out.to_str().unwrap()], tmp.path());
    assert!(!o.status.success());
    assert!(text(&o).contains("generated/triton/compare.csv: line 2: column us = \"0\""), "{}", text(&o));

    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = book(&["--root", empty.to_str().unwrap(), "--out", out.to_str().unwrap()], tmp.path());
    assert!(!o.status.success() && text(&o).contains("no result CSV"), "{}", text(&o));
}

#[test]
fn pages_are_never_written_into_the_results_they_are_made_from() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("repo");
    fixture(&src);
    let into = src.join("generated/book");
    let o = book(&["--root", src.to_str().unwrap(), "--out", into.to_str().unwrap()], tmp.path());
    assert!(!o.status.success());
    assert!(text(&o).contains("is inside the directory"), "{}", text(&o));
    assert!(!into.exists());
}

// ---- links ------------------------------------------------------------------------------------------

/// `text` without fenced code blocks and inline code spans (their brackets are not links).
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if !fenced {
            let mut in_code = false;
            for part in line.split('`') {
                if !in_code {
                    out.push_str(part);
                }
                out.push(' ');
                in_code = !in_code;
            }
        }
        out.push('\n');
    }
    out
}

/// The targets of the markdown links `[text](target)` and includes `{{#include target}}` of `text`.
fn targets(text: &str) -> Vec<String> {
    let link = regex::Regex::new(r"\]\(([^)\s]*)\)").unwrap();
    let include = regex::Regex::new(r"\{\{#include ([^}\s]+)\}\}").unwrap();
    let mut out: Vec<String> = link.captures_iter(&prose(text)).map(|c| c[1].to_string()).collect();
    out.extend(include.captures_iter(text).map(|c| c[1].to_string()));
    out
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// Each broken link of `file`: the target, when it is a relative path that names no file.
fn broken_links(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    targets(&text)
        .into_iter()
        .filter(|t| !t.is_empty() && !t.contains("://") && !t.starts_with('#') && !t.starts_with("mailto:"))
        .filter(|t| {
            let path = t.split('#').next().unwrap();
            let path = path.split(':').next().unwrap(); // an include's line range
            !file.parent().unwrap().join(path).exists()
        })
        .map(|t| format!("{}: {t}", file.strip_prefix(root()).unwrap_or(file).display()))
        .collect()
}

#[test]
fn the_link_check_finds_a_broken_link_and_skips_code() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a.md");
    write(&tmp.path().join("there.md"), "x");
    write(
        &file,
        "[ok](there.md#part) [web](https://example.org) [gone](missing.md)\n`[code](nope.md)`\n```\n[x](alsonope.md)\n```\n\
         {{#include there.md:2:3}} {{#include lost.md}}\n",
    );
    let broken = broken_links(&file);
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(broken[0].ends_with(": missing.md") && broken[1].ends_with(": lost.md"), "{broken:?}");
}

#[test]
fn every_link_of_the_readme_and_the_book_names_a_file_that_exists() {
    let mut files = vec![root().join("README.md")];
    markdown_files(&root().join("docs/src"), &mut files);
    assert!(files.len() > 10, "the book's chapters are missing: {files:?}");
    let broken: Vec<String> = files.iter().flat_map(|f| broken_links(f)).collect();
    assert!(broken.is_empty(), "links to missing files:\n{}", broken.join("\n"));
}

#[test]
fn every_chapter_is_in_the_summary_and_every_summary_entry_exists() {
    let src = root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: Vec<String> = targets(&summary).into_iter().filter(|t| !t.is_empty()).collect();
    for t in &listed {
        assert!(src.join(t).is_file(), "SUMMARY.md lists {t}, which does not exist");
    }
    let mut files = Vec::new();
    markdown_files(&src, &mut files);
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().to_str().unwrap().to_string();
        let included = rel.starts_with("generated/");
        assert!(included || rel == "SUMMARY.md" || listed.contains(&rel), "{rel} is not in SUMMARY.md");
    }
    for required in ["results.md", "hostile-inputs.md"] {
        assert!(listed.iter().any(|t| t == required), "SUMMARY.md does not list {required}");
    }
}

#[test]
fn every_test_the_hostile_inputs_chapter_names_exists() {
    let chapter = std::fs::read_to_string(root().join("docs/src/hostile-inputs.md")).unwrap();
    let name = regex::Regex::new(r"`([a-z0-9]+(?:_[a-z0-9]+){3,})`").unwrap();
    let mut sources = String::new();
    for dir in ["tests", "synth", "crates"] {
        let mut stack = vec![root().join(dir)];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(d).unwrap() {
                let p = entry.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|e| e == "rs") {
                    sources.push_str(&std::fs::read_to_string(&p).unwrap());
                }
            }
        }
    }
    let names: Vec<String> = name.captures_iter(&chapter).map(|c| c[1].to_string()).collect();
    assert!(names.len() >= 30, "the chapter names {} tests", names.len());
    let missing: Vec<&String> = names.iter().filter(|n| !sources.contains(&format!("fn {n}("))).collect();
    assert!(missing.is_empty(), "hostile-inputs.md names tests that do not exist: {missing:?}");
}
