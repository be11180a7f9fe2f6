//! Applying the patch to an AITER checkout with `git apply`: checks the directory, applies (or only
//! checks), reports an already patched tree instead of patching it twice, and when AITER has moved names
//! each file and hunk that no longer matches.
//!
//! `git apply` decides (`--check`, `--check --reverse`, per hunk for the diagnosis) with repository
//! discovery stopped at the checkout's parent (`GIT_CEILING_DIRECTORIES`), so a directory that is not
//! itself a git repository is read as plain files even when it lies inside another repository. The
//! patched contents are computed by `git apply` on a copy of the changed files in a temporary directory,
//! then written into the checkout as one change ([`super::install`]): every target checked first, new
//! contents beside them, renamed only when all are ready, restored on failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::install::{self, Change};
use super::patch::{
    parse_patch, FilePatch, AITER_COMMIT, CU_PATH, GEN_INSTANCES_PATH, HEADER_PATH, KERNELS_PATH, OPS_PATH, SELECT_PATH,
};

/// The AITER files a gemm-synth patch changes (one patch changes some of them, by its rule's backends).
const CHANGED_PATHS: [&str; 3] = [CU_PATH, GEN_INSTANCES_PATH, OPS_PATH];
/// The files a gemm-synth patch adds.
const ADDED_PATHS: [&str; 3] = [HEADER_PATH, KERNELS_PATH, SELECT_PATH];
/// Text only gemm-synth's hunk puts into [`OPS_PATH`]: the import of its select module.
const OPS_MARK: &str = "gemm_a8w8_blockscale_select";

/// Largest patch file read (the committed one is well under 1 MiB).
pub const MAX_PATCH_BYTES: u64 = 64 << 20;
/// Longest wait for one `git apply`.
const GIT_LIMIT: Duration = Duration::from_secs(120);

/// Files whose presence makes a directory an AITER checkout for this patch.
pub const MARKERS: [&str; 3] = [CU_PATH, GEN_INSTANCES_PATH, "aiter/jit/utils/chip_info.py"];

/// What [`apply`] found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The patch was applied.
    Applied,
    /// Check only: the patch applies cleanly and was not applied.
    WouldApply,
    /// The tree already has the patch; nothing was changed.
    AlreadyApplied,
}

impl Outcome {
    /// One line for the user.
    pub fn message(&self, dir: &Path) -> String {
        match self {
            Outcome::Applied => format!(
                "applied to {}; rebuild AITER's module_gemm_a8w8_blockscale (its JIT build reruns gen_instances.py)",
                dir.display()
            ),
            Outcome::WouldApply => format!("applies cleanly to {} (check only: nothing changed)", dir.display()),
            Outcome::AlreadyApplied => format!("already applied in {}; nothing changed", dir.display()),
        }
    }
}

/// How one hunk relates to the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HunkState {
    Applies,
    Applied,
    Conflicts,
}

/// Applies `patch` (or, with `check_only`, checks it) in the AITER checkout `dir`.
pub fn apply(dir: &Path, patch: &str, check_only: bool) -> anyhow::Result<Outcome> {
    check_checkout(dir)?;
    let files = parse_patch(patch).map_err(|e| anyhow::anyhow!("the patch is malformed: {e:#}"))?;
    check_no_other_patch(dir, &files)?;
    if git_apply(dir, patch, &["--check"])?.is_ok() {
        // What `git apply --check` lets through (a directory or FIFO where a file goes) is refused here,
        // before anything changes.
        for f in &files {
            install::check_target(dir, &f.path, f.new_file)?;
        }
        if check_only {
            return Ok(Outcome::WouldApply);
        }
        install::install(dir, &patched_contents(dir, patch, &files)?)?;
        return Ok(Outcome::Applied);
    }
    if git_apply(dir, patch, &["--check", "--reverse"])?.is_ok() {
        return Ok(Outcome::AlreadyApplied);
    }
    Err(anyhow::anyhow!("{}", diagnose(dir, &files)?))
}

/// The revert advice for any gemm-synth patch: every file one may change, and those it added that are there.
fn revert_advice(dir: &Path) -> String {
    let added: Vec<&str> =
        ADDED_PATHS.iter().copied().filter(|p| std::fs::symlink_metadata(dir.join(p)).is_ok()).collect();
    format!(
        "revert the applied patch first (git -C {} checkout -- {}{}), then run this again",
        dir.display(),
        CHANGED_PATHS.join(" "),
        if added.is_empty() { String::new() } else { format!(", and remove {}", added.join(" ")) }
    )
}

/// Refuses a checkout where another gemm-synth patch left changes outside this patch's files (e.g. the
/// Python hunk of a rule with Triton leaves, when this patch's rule has CK leaves only): applying this
/// one beside it would leave two rules live.
fn check_no_other_patch(dir: &Path, files: &[FilePatch]) -> anyhow::Result<()> {
    let ours = |p: &str| files.iter().any(|f| f.path == p);
    let mut left = Vec::new();
    for p in ADDED_PATHS.iter().filter(|p| !ours(p)) {
        if std::fs::symlink_metadata(dir.join(p)).is_ok() {
            left.push(format!("{p} is there (this patch does not add it)"));
        }
    }
    if !ours(OPS_PATH) {
        let path = dir.join(OPS_PATH);
        let marked = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
            && synth_base::input::read_text_capped(&path, MAX_PATCH_BYTES, "source file")
                .is_ok_and(|t| t.contains(OPS_MARK));
        if marked {
            left.push(format!("{OPS_PATH} holds a gemm-synth hunk (this patch does not change it)"));
        }
    }
    if left.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "another gemm-synth patch is applied in {} ({}); this one beside it would leave two rules live. What to do: {}",
        dir.display(),
        left.join("; "),
        revert_advice(dir)
    )
}

fn check_checkout(dir: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(m) => anyhow::bail!(
            "--aiter-dir {} is {}, not a directory; give the root of a ROCm/aiter clone",
            dir.display(),
            synth_base::paths::file_kind(&m)
        ),
        Err(_) => anyhow::bail!("--aiter-dir {}: no such directory", dir.display()),
    }
    if let Some(missing) = MARKERS.iter().find(|m| !dir.join(m).is_file()) {
        anyhow::bail!(
            "{} is not an AITER checkout: {missing} is missing; give the root of a ROCm/aiter clone (main, e.g. {AITER_COMMIT})",
            dir.display()
        );
    }
    Ok(())
}

/// Reads a patch file (at most [`MAX_PATCH_BYTES`]).
pub fn read_patch(path: &Path) -> anyhow::Result<String> {
    synth_base::input::read_text_capped(path, MAX_PATCH_BYTES, "patch file")
        .map_err(|e| anyhow::anyhow!("cannot read patch {}: {e}", path.display()))
}

/// The contents of every file of the patch after applying it: `git apply` on copies of the files it
/// changes, in a temporary directory (the checkout is not touched).
fn patched_contents(dir: &Path, patch: &str, files: &[FilePatch]) -> anyhow::Result<Vec<Change>> {
    let work = tempfile::tempdir().map_err(|e| anyhow::anyhow!("cannot create a temporary directory: {e}"))?;
    for f in files.iter().filter(|f| !f.new_file) {
        let copy = work.path().join(&f.path);
        std::fs::create_dir_all(copy.parent().expect("a file path has a parent"))?;
        let bytes =
            synth_base::input::read_bytes_capped(&dir.join(&f.path), synth_base::input::MAX_TABLE_BYTES, "source file")
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", dir.join(&f.path).display()))?;
        std::fs::write(&copy, bytes)?;
    }
    git_apply(work.path(), patch, &[])?.map_err(|e| anyhow::anyhow!("git apply failed on a copy of the files: {e}"))?;
    files
        .iter()
        .map(|f| {
            let contents = std::fs::read(work.path().join(&f.path))
                .map_err(|e| anyhow::anyhow!("git apply left no {}: {e}", f.path))?;
            Ok(Change { path: f.path.clone(), new_file: f.new_file, contents })
        })
        .collect()
}

/// Runs `git apply ARGS` on `patch` in `dir`: `Ok(Ok(()))` on success, `Ok(Err(stderr))` when git
/// refuses (or does not finish within [`GIT_LIMIT`]), `Err` when git cannot run.
fn git_apply(dir: &Path, patch: &str, args: &[&str]) -> anyhow::Result<Result<(), String>> {
    let mut file =
        tempfile::NamedTempFile::new().map_err(|e| anyhow::anyhow!("cannot create a temporary file: {e}"))?;
    std::io::Write::write_all(&mut file, patch.as_bytes())
        .map_err(|e| anyhow::anyhow!("cannot write a temporary file: {e}"))?;
    let abs = dir.canonicalize().map_err(|e| anyhow::anyhow!("cannot resolve {}: {e}", dir.display()))?;
    let ceiling = abs.parent().map(PathBuf::from).unwrap_or_else(|| abs.clone());
    let mut cmd = Command::new("git");
    cmd.arg("apply").args(args).arg(file.path()).current_dir(&abs).env("GIT_CEILING_DIRECTORIES", ceiling);
    let out = synth_base::process::run_capture(&mut cmd, GIT_LIMIT, 1 << 20)
        .map_err(|e| anyhow::anyhow!("cannot run git (needed to apply the patch): {e}"))?;
    match out.status {
        Some(s) if s.success() => Ok(Ok(())),
        Some(_) => Ok(Err(String::from_utf8_lossy(&out.stderr).trim().to_string())),
        None => Ok(Err(format!("git apply did not finish in {} s", GIT_LIMIT.as_secs()))),
    }
}

fn hunk_state(dir: &Path, file: &FilePatch, i: usize) -> anyhow::Result<HunkState> {
    let text = file.hunk_text(i);
    if git_apply(dir, &text, &["--check"])?.is_ok() {
        Ok(HunkState::Applies)
    } else if git_apply(dir, &text, &["--check", "--reverse"])?.is_ok() {
        Ok(HunkState::Applied)
    } else {
        Ok(HunkState::Conflicts)
    }
}

/// The first component of `rel` (relative to `dir`, the file itself included) that is a symbolic link,
/// with where it points.
fn link_on_path(dir: &Path, rel: &str) -> Option<(PathBuf, PathBuf)> {
    let mut p = dir.to_path_buf();
    for part in Path::new(rel).components() {
        p.push(part);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&p).unwrap_or_default();
                return Some((p, to));
            }
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// The report for a tree the whole patch neither applies to nor is applied in.
fn diagnose(dir: &Path, files: &[FilePatch]) -> anyhow::Result<String> {
    let mut d = Diagnosis {
        lines: vec![format!(
            "the patch neither applies to {} nor is applied there (it was written against ROCm/aiter {AITER_COMMIT}):",
            dir.display()
        )],
        other_patch: false,
        linked: false,
        added_left: Vec::new(),
        hunks_apply: true,
    };
    for f in files {
        if let Some((link, to)) = link_on_path(dir, &f.path) {
            d.linked = true;
            // git refuses to patch through a link (it would write outside the checkout): say so, not
            // that the file is missing or that AITER changed.
            d.lines.push(format!(
                "  {}: {} is a symbolic link (to {}); the patch changes files inside the checkout only: replace \
                 the link with the directory or file it stands for",
                f.path,
                link.display(),
                to.display()
            ));
        } else if f.new_file {
            d.added_file(dir, f);
        } else {
            d.changed_file(dir, f)?;
        }
    }
    d.lines.push(d.advice(dir));
    Ok(d.lines.join("\n"))
}

/// What [`diagnose`] found so far: its report lines and what decides the advice.
struct Diagnosis {
    lines: Vec<String>,
    /// A file the patch adds is there with other contents.
    other_patch: bool,
    /// A path the patch writes goes through a symbolic link.
    linked: bool,
    /// Files this patch adds, already there as it would write them, and every hunk of the files it changes
    /// still to apply: what an earlier application leaves after `git checkout` of the changed files.
    added_left: Vec<String>,
    hunks_apply: bool,
}

impl Diagnosis {
    /// The state of a file the patch adds.
    fn added_file(&mut self, dir: &Path, f: &FilePatch) {
        let path = dir.join(&f.path);
        // Only a regular file is read (a FIFO there would block).
        let text = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => {
                synth_base::input::read_text_capped(&path, MAX_PATCH_BYTES, "source file").map_err(|_| ())
            }
            Ok(m) => {
                self.lines.push(format!(
                    "  {}: {} is in the way (the patch adds a regular file here); move it away",
                    f.path,
                    synth_base::paths::file_kind(&m)
                ));
                return;
            }
            Err(_) => Err(()),
        };
        match text {
            Err(_) => self.lines.push(format!("  {}: not present yet (the patch adds it)", f.path)),
            Ok(text) if text == f.hunks[0].new_text() => {
                self.added_left.push(f.path.clone());
                self.lines.push(format!("  {}: present, as in this patch", f.path))
            }
            Ok(_) => {
                self.other_patch = true;
                self.lines.push(format!(
                    "  {}: present with other contents (another gemm-synth patch, e.g. of another rule, is applied)",
                    f.path
                ));
            }
        }
    }

    /// The state of each hunk of a file the patch changes (or that the file is missing).
    fn changed_file(&mut self, dir: &Path, f: &FilePatch) -> anyhow::Result<()> {
        if !std::fs::symlink_metadata(dir.join(&f.path)).is_ok_and(|m| m.is_file()) {
            self.lines.push(format!("  {}: missing: AITER has moved or removed this file", f.path));
            return Ok(());
        }
        for (i, h) in f.hunks.iter().enumerate() {
            let hunk = hunk_state(dir, f, i)?;
            self.hunks_apply &= hunk == HunkState::Applies;
            let state = match hunk {
                HunkState::Applies => "matches (would apply)".to_string(),
                HunkState::Applied => "already applied".to_string(),
                HunkState::Conflicts => {
                    let first = h.lines.iter().find(|(c, _)| *c != '+').map(|(_, l)| l.trim()).unwrap_or("");
                    format!(
                        "does NOT match: AITER changed the code this hunk edits (at line {} in {AITER_COMMIT}, starting `{first}`)",
                        h.old_start
                    )
                }
            };
            self.lines.push(format!("  {} hunk {} of {}: {state}", f.path, i + 1, f.hunks.len()));
        }
        Ok(())
    }

    /// The report's last line: what to do.
    fn advice(&self, dir: &Path) -> String {
        if self.linked {
            "what to do: replace the symbolic links above with real directories or files (a checkout of \
             ROCm/aiter has none there), then run this again"
                .to_string()
        } else if self.other_patch {
            format!("what to do: {}", revert_advice(dir))
        } else if !self.added_left.is_empty() && self.hunks_apply {
            format!(
                "what to do: the files this patch adds are there already, left by an earlier application whose other \
                 changes were reverted: remove {} (in {}), then run this again",
                self.added_left.join(" "),
                dir.display()
            )
        } else {
            format!(
                "what to do: check out ROCm/aiter {AITER_COMMIT} (or a commit where these hunks match), or port the hunks that do \
                 not match by hand: see `git apply --reject` in {} for the rejected parts",
                dir.display()
            )
        }
    }
}
