//! The AITER main patch without an AITER checkout: its structure (checked by an independent parser and by
//! `git apply` itself on a tree rebuilt from the hunks' old sides), `synth aiter --aiter-dir` on such trees
//! (apply, idempotence, a moved AITER), the patched header compiled with g++ and run against the
//! interpreter, its environment switch, and the kernel list module run by python3.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rand::{Rng, SeedableRng};
use synth_core::aiter::apply::{apply, Outcome};
use synth_core::aiter::patch::{
    self, render_aiter_header, render_kernels_module, CU_PATH, ENV_VAR, GEN_INSTANCES_PATH, HEADER_PATH, KERNELS_PATH,
};
use synth_core::catalog::Catalog;
use synth_core::render::{cpp, Provenance};
use synth_core::rule::Rule;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn main_rule(catalog: &Catalog) -> Rule {
    synth_core::rule::load(&root().join("generated/rule.json"), catalog).expect("generated/rule.json loads")
}

fn provenance() -> Provenance {
    Provenance {
        dataset: "tests (sm_90, 132 CUs)".into(),
        training: "none".into(),
        figures: vec!["not measured".into()],
        command: "cargo test --test aiter".into(),
    }
}

/// A unified-diff file section as this test reads it (independently of the crate's parser).
#[derive(Debug)]
struct Section {
    path: String,
    new_file: bool,
    /// (old start, old count, new start, new count, lines with markers)
    hunks: Vec<(usize, usize, usize, usize, Vec<String>)>,
}

fn sections(text: &str) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut lines = text.lines().skip_while(|l| !l.starts_with("diff --git ")).peekable();
    while let Some(line) = lines.next() {
        let path = line.strip_prefix("diff --git a/").unwrap().split(' ').next().unwrap().to_string();
        assert_eq!(line, format!("diff --git a/{path} b/{path}"));
        let mut next = lines.next().unwrap();
        let new_file = next == "new file mode 100644";
        if new_file {
            next = lines.next().unwrap();
        }
        assert_eq!(next, if new_file { "--- /dev/null".to_string() } else { format!("--- a/{path}") });
        assert_eq!(lines.next().unwrap(), format!("+++ b/{path}"));
        let mut hunks = Vec::new();
        while lines.peek().is_some_and(|l| l.starts_with("@@ ")) {
            let header = lines.next().unwrap();
            let nums: Vec<usize> = header
                .trim_start_matches("@@ -")
                .trim_end_matches(" @@")
                .split([',', ' ', '+'])
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect();
            let (os, oc, ns, nc) = match nums.len() {
                4 => (nums[0], nums[1], nums[2], nums[3]),
                3 if header.contains(&format!("-{},{}", nums[0], nums[1])) => (nums[0], nums[1], nums[2], 1),
                3 => (nums[0], 1, nums[1], nums[2]),
                _ => (nums[0], 1, nums[1], 1),
            };
            let mut body = Vec::new();
            let (mut o, mut n) = (0, 0);
            while o < oc || n < nc {
                let l = lines.next().expect("hunk shorter than its header says").to_string();
                match l.chars().next() {
                    Some(' ') => (o, n) = (o + 1, n + 1),
                    Some('-') => o += 1,
                    Some('+') => n += 1,
                    _ => panic!("bad hunk line {l:?}"),
                }
                body.push(l);
            }
            assert_eq!((o, n), (oc, nc), "counts of {header}");
            hunks.push((os, oc, ns, nc, body));
        }
        out.push(Section { path, new_file, hunks });
    }
    out
}

fn added_text(section: &Section) -> String {
    section.hunks[0].4.iter().map(|l| format!("{}\n", &l[1..])).collect()
}

#[test]
fn patch_structure_and_embedded_files() {
    let catalog = Catalog::embedded();
    let rule = main_rule(&catalog);
    let text = patch::render_patch(&rule, &catalog, &provenance()).unwrap();
    let secs = sections(&text);
    let paths: Vec<&str> = secs.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(paths, vec![HEADER_PATH, KERNELS_PATH, CU_PATH, GEN_INSTANCES_PATH]);
    assert!(secs[0].new_file && secs[1].new_file && !secs[2].new_file && !secs[3].new_file);
    let header = render_aiter_header(&rule, &catalog, &provenance()).unwrap();
    assert_eq!(added_text(&secs[0]), header);
    assert_eq!(added_text(&secs[1]), render_kernels_module(&rule, &catalog, &provenance()).unwrap());
    assert_eq!(secs[0].hunks[0].0, 0);
    assert_eq!(secs[0].hunks[0].3, header.lines().count());
    // New-side starts follow the earlier hunks' growth.
    for s in &secs[2..] {
        let mut delta = 0isize;
        for h in &s.hunks {
            assert_eq!(h.2 as isize, h.0 as isize + delta, "{}", s.path);
            delta += h.3 as isize - h.1 as isize;
        }
    }
    // The header keeps the provenance, says what it is for, and is the standalone dispatcher plus the switch.
    assert!(header.contains("// Dataset: tests (sm_90, 132 CUs)"), "{header}");
    assert!(header.contains("A rule measured on one GPU is for that GPU"));
    let standalone = cpp::render_cpp(&rule, &catalog, &patch::aiter_provenance(&provenance())).unwrap();
    assert!(header.starts_with(&standalone));
    assert!(header[standalone.len()..].contains(&format!("std::getenv(\"{ENV_VAR}\")")));
    // The .cu change uses the heuristic's splitK as KBatch = 1 << splitK, for both output types.
    let cu: String = secs[2].hunks.iter().flat_map(|h| h.4.iter()).map(|l| format!("{l}\n")).collect();
    assert_eq!(cu.matches("kernel(XQ, WQ, x_scale, w_scale, Y, 1 << splitK);").count(), 2);
    assert!(cu.contains("-    int KBatch = 1 << splitK;"));
    assert!(cu.contains("+#include \"gemm_a8w8_blockscale_heuristic.h\""));
    // The crate's own parser agrees.
    let parsed = patch::parse_patch(&text).unwrap();
    assert_eq!(parsed, patch::patch_files(&rule, &catalog, &provenance()).unwrap());
}

#[test]
fn committed_patch_is_well_formed_and_embeds_the_committed_rule() {
    let catalog = Catalog::embedded();
    let text = std::fs::read_to_string(root().join("generated/aiter").join(patch::PATCH_FILE)).unwrap();
    let secs = sections(&text);
    assert_eq!(secs.len(), 4);
    let header = added_text(&secs[0]);
    // The committed header is the committed rule's, whatever the provenance text: same body as a fresh render.
    let fresh = render_aiter_header(&main_rule(&catalog), &catalog, &provenance()).unwrap();
    let body = |h: &str| h.lines().skip_while(|l| l.starts_with("//")).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&header), body(&fresh));
    assert!(header.contains("// Dataset: measurements/zoo/datasets.toml"), "provenance of synth run");
}

/// Rebuilds the old side of every changed file from the patch's hunks (filler lines elsewhere), plus the
/// checkout markers.
fn rebuilt_tree(files: &[patch::FilePatch]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in files.iter().filter(|f| !f.new_file) {
        let mut lines: Vec<String> = Vec::new();
        for h in &f.hunks {
            while lines.len() + 1 < h.old_start {
                lines.push(format!("# filler line {}", lines.len() + 1));
            }
            lines.extend(h.lines.iter().filter(|(c, _)| *c != '+').map(|(_, l)| l.clone()));
        }
        for i in 0..5 {
            lines.push(format!("# trailing line {i}"));
        }
        let path = dir.path().join(&f.path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    }
    let chip = dir.path().join("aiter/jit/utils/chip_info.py");
    std::fs::create_dir_all(chip.parent().unwrap()).unwrap();
    std::fs::write(chip, "def build_tune_dict(): pass\n").unwrap();
    dir
}

#[test]
fn git_applies_the_patch_once_and_names_hunks_that_moved() {
    let catalog = Catalog::embedded();
    let rule = main_rule(&catalog);
    let text = patch::render_patch(&rule, &catalog, &provenance()).unwrap();
    let files = patch::parse_patch(&text).unwrap();

    let tree = rebuilt_tree(&files);
    let before = std::fs::read_to_string(tree.path().join(CU_PATH)).unwrap();
    assert_eq!(apply(tree.path(), &text, true).unwrap(), Outcome::WouldApply);
    assert_eq!(std::fs::read_to_string(tree.path().join(CU_PATH)).unwrap(), before, "check only changes nothing");
    assert!(!tree.path().join(HEADER_PATH).exists());
    assert_eq!(apply(tree.path(), &text, false).unwrap(), Outcome::Applied);
    assert_eq!(
        std::fs::read_to_string(tree.path().join(HEADER_PATH)).unwrap(),
        render_aiter_header(&rule, &catalog, &provenance()).unwrap()
    );
    let cu = std::fs::read_to_string(tree.path().join(CU_PATH)).unwrap();
    assert!(cu.contains("blockscale_dispatch(const std::string& kernelName, int M, int N, int K, int& splitK)"));
    assert!(!cu.contains("int KBatch = 1 << splitK;"));
    let gen = std::fs::read_to_string(tree.path().join(GEN_INSTANCES_PATH)).unwrap();
    assert!(gen.contains("from gemm_a8w8_blockscale_heuristic_kernels import add_heuristic_kernels\n"));
    // Idempotent: reported, not applied twice.
    assert_eq!(apply(tree.path(), &text, false).unwrap(), Outcome::AlreadyApplied);
    assert_eq!(apply(tree.path(), &text, true).unwrap(), Outcome::AlreadyApplied);

    // AITER moved: the second hunk of gen_instances.py no longer matches.
    let moved = rebuilt_tree(&files);
    let gen_path = moved.path().join(GEN_INSTANCES_PATH);
    let gen = std::fs::read_to_string(&gen_path).unwrap();
    let gen = gen.replace("self.gen_code(self.get_tune_dict(self.tune_file))", "self.gen_code(self.tuned_kernels())");
    std::fs::write(&gen_path, gen).unwrap();
    let err = apply(moved.path(), &text, false).unwrap_err().to_string();
    assert!(err.contains(&format!("{GEN_INSTANCES_PATH} hunk 2 of 2: does NOT match")), "{err}");
    assert!(err.contains(&format!("{GEN_INSTANCES_PATH} hunk 1 of 2: matches")), "{err}");
    assert!(err.contains(&format!("{CU_PATH} hunk 1 of 4: matches")), "{err}");
    assert!(err.contains("what to do:"), "{err}");
    assert!(!moved.path().join(HEADER_PATH).exists(), "nothing applied");

    // Another rule's patch is applied: the added files differ.
    let other = rebuilt_tree(&files);
    let mut other_rule = rule.clone();
    other_rule.root = synth_core::rule::Node::Leaf(synth_core::rule::Leaf::new(5, 1));
    let other_text = patch::render_patch(&other_rule, &catalog, &provenance()).unwrap();
    assert_eq!(apply(other.path(), &other_text, false).unwrap(), Outcome::Applied);
    let err = apply(other.path(), &text, false).unwrap_err().to_string();
    assert!(err.contains("present with other contents"), "{err}");
    assert!(err.contains("revert the applied patch first"), "{err}");

    // Not an AITER checkout.
    let empty = tempfile::tempdir().unwrap();
    let err = apply(empty.path(), &text, true).unwrap_err().to_string();
    assert!(err.contains("is not an AITER checkout") && err.contains(CU_PATH), "{err}");
    // A regular file is not a directory, and says so.
    let file = empty.path().join("afile");
    std::fs::write(&file, "x").unwrap();
    let err = apply(&file, &text, true).unwrap_err().to_string();
    assert!(err.contains("is a regular file, not a directory"), "{err}");

    // A symbolic link on a patched file's path: the link is named, not a moved AITER; nothing changes.
    let linked = rebuilt_tree(&files);
    let elsewhere = tempfile::tempdir().unwrap();
    let cu = linked.path().join(CU_PATH);
    let moved_to = elsewhere.path().join("real.cu");
    std::fs::rename(&cu, &moved_to).unwrap();
    std::os::unix::fs::symlink(&moved_to, &cu).unwrap();
    let before = std::fs::read(&moved_to).unwrap();
    let err = apply(linked.path(), &text, false).unwrap_err().to_string();
    assert!(err.contains(&format!("{CU_PATH}: ")) && err.contains("is a symbolic link"), "{err}");
    assert!(err.contains("replace the symbolic links"), "{err}");
    assert!(!err.contains("AITER has moved or removed"), "{err}");
    assert_eq!(std::fs::read(&moved_to).unwrap(), before, "nothing written through the link");
}

/// Every file of a tree with its bytes (directories and special files marked), for before/after checks.
fn snapshot(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                out.push((rel, b"<dir>".to_vec()));
                stack.push(p);
            } else if t.is_file() {
                out.push((rel, std::fs::read(&p).unwrap()));
            } else {
                out.push((rel, b"<special>".to_vec()));
            }
        }
    }
    out.sort();
    out
}

/// #1 of the sweep: what `git apply --check` lets through but the apply cannot write (a directory or a
/// FIFO where the patch adds a file, a file where it needs a directory) is refused before anything
/// changes: the checkout keeps every file (its local edits too), and is still an AITER checkout.
#[test]
fn an_apply_that_cannot_finish_changes_nothing() {
    let catalog = Catalog::embedded();
    let text = patch::render_patch(&main_rule(&catalog), &catalog, &provenance()).unwrap();
    let files = patch::parse_patch(&text).unwrap();
    let include_dir = Path::new(HEADER_PATH).parent().unwrap().to_path_buf();
    let fifo = |p: &Path| {
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path only.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    };
    type Obstacle = (&'static str, Box<dyn Fn(&Path)>, String);
    let cases: Vec<Obstacle> = vec![
        (
            "directory at the header",
            Box::new(|t: &Path| std::fs::create_dir_all(t.join(HEADER_PATH)).unwrap()),
            format!("{HEADER_PATH} is a directory"),
        ),
        (
            "FIFO at the kernel list",
            Box::new(move |t: &Path| fifo(&t.join(KERNELS_PATH))),
            // `git apply --check` refuses this one itself; the diagnosis names it.
            format!("{KERNELS_PATH}: a FIFO is in the way"),
        ),
        (
            "file at the include directory",
            Box::new({
                let d = include_dir.clone();
                move |t: &Path| {
                    let _ = std::fs::remove_dir_all(t.join(&d));
                    std::fs::write(t.join(&d), "not a directory\n").unwrap();
                }
            }),
            format!("{} is a regular file where the patch needs a directory", include_dir.display()),
        ),
    ];
    for (what, make, want) in cases {
        let tree = rebuilt_tree(&files);
        // A local edit that must survive.
        let cu = tree.path().join(CU_PATH);
        let mut edited = std::fs::read_to_string(&cu).unwrap();
        edited.push_str("// a local edit\n");
        std::fs::write(&cu, &edited).unwrap();
        make(tree.path());
        let before = snapshot(tree.path());
        for check_only in [true, false] {
            let err = format!("{:#}", apply(tree.path(), &text, check_only).unwrap_err());
            assert!(err.contains(&want), "{what}: {err}");
            assert_eq!(snapshot(tree.path()), before, "{what}: the checkout changed");
        }
        assert_eq!(std::fs::read_to_string(&cu).unwrap(), edited);
    }
}

/// After a successful apply no staging file is left beside the targets, and modes are kept.
#[test]
fn an_apply_leaves_only_the_patched_files() {
    use std::os::unix::fs::PermissionsExt;
    let catalog = Catalog::embedded();
    let text = patch::render_patch(&main_rule(&catalog), &catalog, &provenance()).unwrap();
    let files = patch::parse_patch(&text).unwrap();
    let tree = rebuilt_tree(&files);
    let gen = tree.path().join(GEN_INSTANCES_PATH);
    std::fs::set_permissions(&gen, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before: Vec<String> = snapshot(tree.path()).into_iter().map(|(p, _)| p).collect();
    assert_eq!(apply(tree.path(), &text, false).unwrap(), Outcome::Applied);
    let after: Vec<String> = snapshot(tree.path()).into_iter().map(|(p, _)| p).collect();
    let added: Vec<&String> = after.iter().filter(|p| !before.contains(p)).collect();
    for p in &added {
        let dir_of_header = HEADER_PATH.starts_with(&format!("{p}/"));
        assert!(p.as_str() == HEADER_PATH || p.as_str() == KERNELS_PATH || dir_of_header, "{p} was added");
    }
    assert!(added.iter().any(|p| p.as_str() == HEADER_PATH) && added.iter().any(|p| p.as_str() == KERNELS_PATH));
    assert_eq!(std::fs::metadata(&gen).unwrap().permissions().mode() & 0o777, 0o755);
}

fn gxx(args: &[&str], dir: &Path) {
    let out = Command::new("g++").args(args).current_dir(dir).output().expect("g++ runs");
    assert!(out.status.success(), "g++ {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn patched_header_compiles_and_matches_the_interpreter() {
    let catalog = Catalog::embedded();
    let rule = main_rule(&catalog);
    let text = std::fs::read_to_string(root().join("generated/aiter").join(patch::PATCH_FILE)).unwrap();
    let header = added_text(&sections(&text)[0]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("gemm_a8w8_blockscale_heuristic.h"), &header).unwrap();
    std::fs::write(d.join(cpp::CHECK_STUB), cpp::render_check_stub(&catalog).unwrap()).unwrap();
    let headers = [cpp::CheckHeader { header: "gemm_a8w8_blockscale_heuristic.h".into(), ns: None }];
    std::fs::write(d.join("driver.cpp"), cpp::render_check_driver(&catalog, &headers).unwrap()).unwrap();
    gxx(&["-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-fsanitize=undefined", "driver.cpp", "-o", "driver"], d);

    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let shapes: Vec<(u32, u32, u32)> = (0..10_000)
        .map(|i| {
            if i % 2 == 0 {
                (rng.gen_range(1..=16384), 128 * rng.gen_range(1..=256), 128 * rng.gen_range(1..=256))
            } else {
                (rng.gen_range(1..=65536), rng.gen_range(1..=65536), rng.gen_range(1..=65536))
            }
        })
        .collect();
    let input: String = shapes.iter().map(|(m, n, k)| format!("{m} {n} {k}\n")).collect();
    let mut child =
        Command::new(d.join("driver")).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("driver runs");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let got = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(lines.len(), shapes.len());
    let mut kernels = std::collections::BTreeSet::new();
    for ((m, n, k), line) in shapes.iter().zip(&lines) {
        let leaf = rule.eval(*m, *n, *k);
        let id = catalog.legacy_by_id(leaf.kernel_id).unwrap().id;
        assert_eq!(*line, format!("{id} {}", leaf.split_k), "M={m} N={n} K={k}");
        kernels.insert((id, leaf.split_k));
    }
    assert!(kernels.len() >= 3, "the shapes exercise several leaves: {kernels:?}");
}

#[test]
fn environment_switch() {
    let catalog = Catalog::embedded();
    let header = render_aiter_header(&main_rule(&catalog), &catalog, &provenance()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("h.h"), header).unwrap();
    std::fs::write(d.join(cpp::CHECK_STUB), cpp::render_check_stub(&catalog).unwrap()).unwrap();
    let main = format!(
        "#include \"{}\"\n#include \"h.h\"\n#include <cstdio>\nint main() {{\n  try {{ std::printf(\"%d\\n\", \
         a8w8_blockscale_heuristic_enabled() ? 1 : 0); }}\n  catch(const std::invalid_argument& e) {{ std::printf(\"error: %s\\n\", e.what()); }}\n}}\n",
        cpp::CHECK_STUB
    );
    std::fs::write(d.join("main.cpp"), main).unwrap();
    gxx(&["-std=c++17", "-Wall", "-Wextra", "-Werror", "main.cpp", "-o", "main"], d);
    let run = |value: Option<&str>| {
        let mut cmd = Command::new(d.join("main"));
        match value {
            Some(v) => cmd.env(ENV_VAR, v),
            None => cmd.env_remove(ENV_VAR),
        };
        String::from_utf8(cmd.output().unwrap().stdout).unwrap().trim().to_string()
    };
    assert_eq!(run(None), "1");
    assert_eq!(run(Some("")), "1");
    assert_eq!(run(Some("1")), "1");
    assert_eq!(run(Some("0")), "0");
    let bad = run(Some("off"));
    assert!(bad.starts_with(&format!("error: {ENV_VAR}='off' is not understood: set it to 0")), "{bad}");
}

fn python_kernel_list_run(module: &str, instances: &str, dir: &Path) -> std::process::Output {
    std::fs::write(dir.join("gemm_a8w8_blockscale_heuristic_kernels.py"), module).unwrap();
    std::fs::write(dir.join("gemm_a8w8_blockscale_instance.py"), instances).unwrap();
    let script = "from gemm_a8w8_blockscale_heuristic_kernels import add_heuristic_kernels\n\
                  from gemm_a8w8_blockscale_instance import candidate_kernels_dict as c\n\
                  base = {-1: c[7], ('gfx942', 304, 1, 2, 3): c[0]}\n\
                  merged = add_heuristic_kernels(base)\n\
                  assert len(base) == 2, 'input unchanged'\n\
                  for key in sorted(k for k in merged if isinstance(k, int)):\n    print(key, merged[key].name)\n\
                  print(merged[('gfx942', 304, 1, 2, 3)].name)\n";
    Command::new("python3").arg("-c").arg(script).current_dir(dir).output().expect("python3 runs")
}

#[test]
fn kernel_list_module_adds_heuristic_kernels_under_negative_keys() {
    let catalog = Catalog::embedded();
    let rule = main_rule(&catalog);
    let module = render_kernels_module(&rule, &catalog, &provenance()).unwrap();
    let kernels = patch::heuristic_kernels(&rule, &catalog).unwrap();
    // A stand-in for gemm_a8w8_blockscale_instance.py: every catalog instance under its kernelId.
    let mut instances = String::from(
        "class K:\n    def __init__(self, name):\n        self.name = name\n\ncandidate_kernels_dict = {\n",
    );
    for inst in catalog.legacy_candidates() {
        instances += &format!("    {}: K({:?}),\n", inst.id, inst.name);
    }
    instances += "}\n";
    let dir = tempfile::tempdir().unwrap();
    let out = python_kernel_list_run(&module, &instances, dir.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut expected: Vec<String> =
        kernels.iter().enumerate().rev().map(|(i, k)| format!("{} {}", -2 - i as i64, k.name)).collect();
    // -N .. -2 are the heuristic kernels (ascending key), -1 the untouched default, then the tuned row.
    expected.push(format!("-1 {}", catalog.default_instance().name));
    expected.push(catalog.legacy_by_id(0).unwrap().name.clone());
    let got = String::from_utf8(out.stdout).unwrap();
    assert_eq!(got.lines().collect::<Vec<_>>(), expected, "{got}");

    // A kernel list for another instance table is refused with a clear error.
    let renamed = instances.replacen(&kernels[0].name, "a8w8_blockscale_renamed", 1);
    let out = python_kernel_list_run(&module, &renamed, dir.path());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("kernelId {} should be {}", kernels[0].id, kernels[0].name)), "{err}");
    assert!(err.contains("regenerate the patch"), "{err}");
}

#[test]
fn kit_expected_choices_follow_the_interpreter() {
    let catalog = Catalog::embedded();
    let rule = main_rule(&catalog);
    let dir = tempfile::tempdir().unwrap();
    let files = synth_core::aiter::kit::write_kit(&rule, &catalog, dir.path(), 10_000, 3).unwrap();
    assert!(files.iter().any(|p: &PathBuf| p.ends_with("stub/torch/extension.h")));
    let shapes = std::fs::read_to_string(dir.path().join("shapes.txt")).unwrap();
    let expected = std::fs::read_to_string(dir.path().join("expected.txt")).unwrap();
    assert_eq!(shapes.lines().count(), 10_000);
    for (s, e) in shapes.lines().zip(expected.lines()).take(500) {
        let v: Vec<u32> = s.split(' ').map(|x| x.parse().unwrap()).collect();
        let leaf = rule.eval(v[0], v[1], v[2]);
        let name = &catalog.legacy_by_id(leaf.kernel_id).unwrap().name;
        assert_eq!(e, format!("{s} {name} {}", 1u32 << leaf.split_k));
    }
    // The stand-in kernels compile against the stand-in torch and CK headers.
    gxx(
        &["-std=c++17", "-Wall", "-Wextra", "-Werror", "-I", "stub", "-I", ".", "-c", "kernels.cpp", "-o", "k.o"],
        dir.path(),
    );
    let err = synth_core::aiter::kit::write_kit(&rule, &catalog, dir.path(), 100, 3).unwrap_err().to_string();
    assert!(err.contains("at least 10000"), "{err}");
}

#[test]
fn the_deepest_split_level_validates_and_reaches_aiter_as_kbatch_32() {
    // Level 5 (`catalog::MAX_SPLIT_K`, what `synth bench --split-k aiter` measures at most) is a valid leaf,
    // level 6 is not; the kit's expected choices pass KBatch = 1 << 5 = 32 to the kernel.
    let catalog = Catalog::embedded();
    assert_eq!(synth_core::catalog::MAX_SPLIT_K, 5);
    let rule =
        synth_core::rule::parse_any("if (M <= 16) return {kernel(6), 5}; else return kernel(3);", &catalog).unwrap();
    let errors: Vec<_> = synth_core::rule::validate::validate(&rule, &catalog)
        .into_iter()
        .filter(|i| i.severity == synth_core::rule::Severity::Error)
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    let deeper =
        synth_core::rule::parse_any("if (M <= 16) return {kernel(6), 6}; else return kernel(3);", &catalog).unwrap();
    let issues = synth_core::rule::validate::validate(&deeper, &catalog);
    assert!(issues.iter().any(|i| i.message.contains("split-K 6 is out of range: expected 0..=5")), "{issues:?}");

    let dir = tempfile::tempdir().unwrap();
    synth_core::aiter::kit::write_kit(&rule, &catalog, dir.path(), 10_000, 3).unwrap();
    let shapes = std::fs::read_to_string(dir.path().join("shapes.txt")).unwrap();
    let expected = std::fs::read_to_string(dir.path().join("expected.txt")).unwrap();
    let (small, large) = (&catalog.legacy_by_id(6).unwrap().name, &catalog.legacy_by_id(3).unwrap().name);
    let mut deep = 0;
    for (s, e) in shapes.lines().zip(expected.lines()) {
        let m: u32 = s.split(' ').next().unwrap().parse().unwrap();
        let want = if m <= 16 { format!("{s} {small} 32") } else { format!("{s} {large} 1") };
        assert_eq!(e, want);
        deep += usize::from(m <= 16);
    }
    assert!(deep > 0, "some shapes have M <= 16");
}

/// The kit's options: `--shapes` within 10,000..=1,000,000 (a clear error past it, not an allocation that
/// panics or aborts), `--shapes` / `--seed` only with `--kit`, and `--check` (change nothing) not with
/// `--kit` (which writes); nothing is written by a refused call.
#[test]
fn kit_options_are_refused_where_they_do_not_apply() {
    let dir = tempfile::tempdir().unwrap();
    let rule = root().join("generated/rule.json");
    let kit = dir.path().join("kit");
    let run =
        |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_synth")).current_dir(dir.path()).args(args).output().unwrap();
    let rule = rule.to_str().unwrap();
    let kit = kit.to_str().unwrap();
    let o = run(&["aiter", "--rule", rule, "--kit", kit, "--shapes", "18446744073709551615"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("--shapes 18446744073709551615 is more than the check needs: use at most 1000000"), "{e}");
    let o = run(&["aiter", "--rule", rule, "--kit", kit, "--check"]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be used with"));
    for extra in [["--shapes", "20000"], ["--seed", "3"]] {
        for place in [&["--out", "p"][..], &[]] {
            let o = run(&[&["aiter", "--rule", rule], place, &extra[..]].concat());
            let e = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success(), "{e}");
            assert!(e.contains("--kit"), "{e}");
        }
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a refused call writes nothing");
}

/// A rule with a CK leaf and a triton leaf: its patch also changes `gemm_op_a8w8.py` and adds the select module.
fn ck_triton_rule() -> Rule {
    use synth_core::catalog::triton::VLLM_DEFAULT;
    use synth_core::catalog::Libtype;
    use synth_core::rule::ir::build::{lit, m};
    use synth_core::rule::{CmpOp, Cond, Leaf, Node};
    Rule::new(Node::Chain {
        branches: vec![(Cond::cmp(CmpOp::Le, m(), lit(64)), Node::Leaf(Leaf::new(4, 1)))],
        otherwise: Box::new(Node::Leaf(Leaf::of(Libtype::Triton, VLLM_DEFAULT.kernel_id(), 0))),
    })
}

#[test]
fn another_rules_python_hunk_left_in_the_checkout_is_refused_and_the_advice_clears_it() {
    let catalog = Catalog::embedded();
    let mixed = patch::render_patch(&ck_triton_rule(), &catalog, &provenance()).unwrap();
    let plain = patch::render_patch(&main_rule(&catalog), &catalog, &provenance()).unwrap();
    let files = patch::parse_patch(&mixed).unwrap();
    let tree = rebuilt_tree(&files);
    let original: Vec<(String, Vec<u8>)> = [CU_PATH, GEN_INSTANCES_PATH, patch::OPS_PATH]
        .iter()
        .map(|p| (p.to_string(), std::fs::read(tree.path().join(p)).unwrap()))
        .collect();
    assert_eq!(apply(tree.path(), &mixed, false).unwrap(), Outcome::Applied);
    // The C++ side reverted and the added C++ files removed, the Python side left as it was.
    for (p, bytes) in &original[..2] {
        std::fs::write(tree.path().join(p), bytes).unwrap();
    }
    std::fs::remove_file(tree.path().join(HEADER_PATH)).unwrap();
    std::fs::remove_file(tree.path().join(KERNELS_PATH)).unwrap();
    let before = snapshot(tree.path());
    for check in [true, false] {
        let err = apply(tree.path(), &plain, check).unwrap_err().to_string();
        assert!(err.contains("another gemm-synth patch is applied"), "{err}");
        assert!(err.contains(&format!("{} holds a gemm-synth hunk", patch::OPS_PATH)), "{err}");
        assert!(err.contains(&format!("{} is there", patch::SELECT_PATH)), "{err}");
        // The advice names every file a patch changes and the added one that is there.
        assert!(err.contains(&format!("checkout -- {CU_PATH} {GEN_INSTANCES_PATH} {}", patch::OPS_PATH)), "{err}");
        assert!(err.contains(&format!("and remove {}", patch::SELECT_PATH)), "{err}");
    }
    assert_eq!(snapshot(tree.path()), before, "nothing changed");
    // Following the advice, the CK rule's patch applies.
    std::fs::write(tree.path().join(patch::OPS_PATH), &original[2].1).unwrap();
    std::fs::remove_file(tree.path().join(patch::SELECT_PATH)).unwrap();
    assert_eq!(apply(tree.path(), &plain, false).unwrap(), Outcome::Applied);
}

#[test]
fn added_files_left_by_a_reverted_application_are_named_as_such() {
    let catalog = Catalog::embedded();
    let text = patch::render_patch(&main_rule(&catalog), &catalog, &provenance()).unwrap();
    let files = patch::parse_patch(&text).unwrap();
    let tree = rebuilt_tree(&files);
    let cu = std::fs::read(tree.path().join(CU_PATH)).unwrap();
    let gen = std::fs::read(tree.path().join(GEN_INSTANCES_PATH)).unwrap();
    assert_eq!(apply(tree.path(), &text, false).unwrap(), Outcome::Applied);
    // `git checkout -- .`: the changed files back, the added ones left (untracked).
    std::fs::write(tree.path().join(CU_PATH), cu).unwrap();
    std::fs::write(tree.path().join(GEN_INSTANCES_PATH), gen).unwrap();
    let err = apply(tree.path(), &text, false).unwrap_err().to_string();
    assert!(err.contains("the files this patch adds are there already"), "{err}");
    assert!(err.contains(HEADER_PATH) && err.contains(KERNELS_PATH), "{err}");
    assert!(!err.contains("check out ROCm/aiter"), "{err}");
}
