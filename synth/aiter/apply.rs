//! Applying the patch to an AITER checkout with `git apply`: checks the directory, applies (or only
//! checks), reports an already patched tree instead of patching it twice, and when AITER has moved names
//! each file and hunk that no longer matches.
//!
//! `git apply` runs in the checkout with repository discovery stopped at the checkout's parent
//! (`GIT_CEILING_DIRECTORIES`), so a directory that is not itself a git repository is patched as plain
//! files even when it lies inside another repository.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::patch::{parse_patch, FilePatch, AITER_COMMIT, CU_PATH, GEN_INSTANCES_PATH};

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
    if git_apply(dir, patch, &["--check"])?.is_ok() {
        if check_only {
            return Ok(Outcome::WouldApply);
        }
        git_apply(dir, patch, &[])?.map_err(|e| anyhow::anyhow!("git apply failed in {}: {e}", dir.display()))?;
        return Ok(Outcome::Applied);
    }
    if git_apply(dir, patch, &["--check", "--reverse"])?.is_ok() {
        return Ok(Outcome::AlreadyApplied);
    }
    Err(anyhow::anyhow!("{}", diagnose(dir, &files)?))
}

fn check_checkout(dir: &Path) -> anyhow::Result<()> {
    if !dir.is_dir() {
        anyhow::bail!("--aiter-dir {}: no such directory", dir.display());
    }
    if let Some(missing) = MARKERS.iter().find(|m| !dir.join(m).is_file()) {
        anyhow::bail!(
            "{} is not an AITER checkout: {missing} is missing; give the root of a ROCm/aiter clone (main, e.g. {AITER_COMMIT})",
            dir.display()
        );
    }
    Ok(())
}

/// Runs `git apply ARGS` on `patch` in `dir`: `Ok(Ok(()))` on success, `Ok(Err(stderr))` when git
/// refuses, `Err` when git cannot run.
fn git_apply(dir: &Path, patch: &str, args: &[&str]) -> anyhow::Result<Result<(), String>> {
    let mut file =
        tempfile::NamedTempFile::new().map_err(|e| anyhow::anyhow!("cannot create a temporary file: {e}"))?;
    std::io::Write::write_all(&mut file, patch.as_bytes())
        .map_err(|e| anyhow::anyhow!("cannot write a temporary file: {e}"))?;
    let abs = dir.canonicalize().map_err(|e| anyhow::anyhow!("cannot resolve {}: {e}", dir.display()))?;
    let ceiling = abs.parent().map(PathBuf::from).unwrap_or_else(|| abs.clone());
    let out = Command::new("git")
        .arg("apply")
        .args(args)
        .arg(file.path())
        .current_dir(&abs)
        .env("GIT_CEILING_DIRECTORIES", ceiling)
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run git (needed to apply the patch): {e}"))?;
    if out.status.success() {
        Ok(Ok(()))
    } else {
        Ok(Err(String::from_utf8_lossy(&out.stderr).trim().to_string()))
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

/// The report for a tree the whole patch neither applies to nor is applied in.
fn diagnose(dir: &Path, files: &[FilePatch]) -> anyhow::Result<String> {
    let mut lines = vec![format!(
        "the patch neither applies to {} nor is applied there (it was written against ROCm/aiter {AITER_COMMIT}):",
        dir.display()
    )];
    let mut other_patch = false;
    for f in files {
        let path = dir.join(&f.path);
        if f.new_file {
            match std::fs::read_to_string(&path) {
                Err(_) => lines.push(format!("  {}: not present yet (the patch adds it)", f.path)),
                Ok(text) if text == f.hunks[0].new_text() => {
                    lines.push(format!("  {}: present, as in this patch", f.path))
                }
                Ok(_) => {
                    other_patch = true;
                    lines.push(format!(
                        "  {}: present with other contents (another gemm-synth patch, e.g. of another rule, is applied)",
                        f.path
                    ));
                }
            }
            continue;
        }
        if !path.is_file() {
            lines.push(format!("  {}: missing: AITER has moved or removed this file", f.path));
            continue;
        }
        for (i, h) in f.hunks.iter().enumerate() {
            let state = match hunk_state(dir, f, i)? {
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
            lines.push(format!("  {} hunk {} of {}: {state}", f.path, i + 1, f.hunks.len()));
        }
    }
    if other_patch {
        lines.push(format!(
            "what to do: revert the applied patch first (git -C {0} checkout -- {CU_PATH} {GEN_INSTANCES_PATH}, and remove \
             the files it added), then run this again",
            dir.display()
        ));
    } else {
        lines.push(format!(
            "what to do: check out ROCm/aiter {AITER_COMMIT} (or a commit where these hunks match), or port the hunks that do \
             not match by hand: see `git apply --reject` in {} for the rejected parts",
            dir.display()
        ));
    }
    Ok(lines.join("\n"))
}
