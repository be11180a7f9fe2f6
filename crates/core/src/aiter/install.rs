//! Writing a set of files into a checkout as one change: every target is checked first (a file the patch
//! changes must be a regular file that can be opened for writing; a file it adds must be absent; every
//! directory on the way a real directory, never a link), the new contents are written beside their
//! targets, and only when all are ready are they renamed into place. A failing rename restores every
//! file already replaced (and removes every file and directory added), and interrupt signals are held
//! from the first write to the last rename, so an interrupted or failed run leaves the old tree or the new one.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

/// Prefix of the files written beside their targets before the renames.
const STAGE_PREFIX: &str = ".gemm-synth-apply.";

/// One file to write, relative to the tree's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Path relative to the root (`/`-separated, no `..`).
    pub path: String,
    /// Whether the file is new (it must not exist yet).
    pub new_file: bool,
    /// The new contents.
    pub contents: Vec<u8>,
}

fn lstat(path: &Path) -> Result<Option<std::fs::Metadata>> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow!("cannot inspect {}: {e}", path.display())),
    }
}

/// Checks that `path` (relative to `root`) can be written as `new_file` says, changing nothing. Returns
/// the directories that do not exist yet (outermost first), which the change would create.
pub fn check_target(root: &Path, path: &str, new_file: bool) -> Result<Vec<PathBuf>> {
    let rel = Path::new(path);
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) || path.is_empty() {
        bail!("the patch names {path:?}, which is not a plain path inside the checkout");
    }
    let in_the_way = |p: &Path, kind: &str, what: &str| {
        anyhow!(
            "cannot apply: {} is {kind} {what}; nothing was changed — move it away (or restore the file) and run again",
            p.display()
        )
    };
    let mut missing = Vec::new();
    let mut dir = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for part in &parts[..parts.len() - 1] {
        dir.push(part);
        match lstat(&dir)? {
            None => missing.push(dir.clone()),
            Some(m) if m.is_dir() => {}
            Some(m) => {
                return Err(in_the_way(&dir, synth_base::paths::file_kind(&m), "where the patch needs a directory"))
            }
        }
    }
    if !missing.is_empty() && !new_file {
        bail!("cannot apply: {} is missing (the patch changes it); nothing was changed", root.join(rel).display());
    }
    let target = root.join(rel);
    match (lstat(&target)?, new_file) {
        (None, true) => {}
        (None, false) => {
            bail!("cannot apply: {} is missing (the patch changes it); nothing was changed", target.display())
        }
        (Some(m), true) => {
            return Err(in_the_way(&target, synth_base::paths::file_kind(&m), "where the patch adds a file"))
        }
        (Some(m), false) if !m.file_type().is_file() => {
            return Err(in_the_way(&target, synth_base::paths::file_kind(&m), "where the patch changes a regular file"))
        }
        (Some(_), false) => {
            // Opening for writing (no truncation) changes nothing and fails for an immutable file.
            OpenOptions::new().write(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(&target).map_err(
                |e| anyhow!("cannot apply: {} cannot be written ({e}); nothing was changed", target.display()),
            )?;
        }
    }
    Ok(missing)
}

/// A new file's contents written beside its target, waiting for the rename.
struct Staged {
    target: PathBuf,
    temp: tempfile::TempPath,
    /// The old contents (None for a new file).
    old: Option<Vec<u8>>,
}

/// Leftovers of an interrupted earlier run next to `target` (only regular files with the stage prefix).
fn remove_leftovers(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let stale =
            e.file_name().to_string_lossy().starts_with(STAGE_PREFIX) && e.file_type().is_ok_and(|t| t.is_file());
        if stale {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn stage(target: &Path, contents: &[u8], mode: u32) -> Result<tempfile::TempPath> {
    let dir = target.parent().expect("a target has a parent");
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut f = tempfile::Builder::new()
        .prefix(&format!("{STAGE_PREFIX}{name}."))
        .tempfile_in(dir)
        .with_context(|| format!("cannot apply: cannot write beside {}; nothing was changed", target.display()))?;
    f.write_all(contents)
        .and_then(|_| f.as_file().sync_all())
        .and_then(|_| f.as_file().set_permissions(std::fs::Permissions::from_mode(mode)))
        .with_context(|| format!("cannot apply: cannot write beside {}; nothing was changed", target.display()))?;
    Ok(f.into_temp_path())
}

fn read_old(target: &Path) -> Result<(Vec<u8>, u32)> {
    let f = File::open(target).with_context(|| format!("cannot read {}", target.display()))?;
    let mode = f.metadata()?.permissions().mode() & 0o7777;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(f, synth_base::input::MAX_TABLE_BYTES + 1), &mut bytes)?;
    if bytes.len() as u64 > synth_base::input::MAX_TABLE_BYTES {
        bail!(
            "{} is larger than {} MiB: not an AITER source",
            target.display(),
            synth_base::input::MAX_TABLE_BYTES >> 20
        );
    }
    Ok((bytes, mode))
}

/// Blocks interrupt signals on this thread until dropped.
struct HeldSignals(libc::sigset_t);

impl HeldSignals {
    fn hold() -> HeldSignals {
        // SAFETY: the sets are initialized by sigemptyset before use; pthread_sigmask only changes this
        // thread's mask and writes the old mask into `old`.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                libc::sigaddset(&mut set, s);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            HeldSignals(old)
        }
    }
}

impl Drop for HeldSignals {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `hold`.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut());
        }
    }
}

/// Writes `changes` under `root` as one change (see the module docs).
pub fn install(root: &Path, changes: &[Change]) -> Result<()> {
    // Held from the first write on (not only for the renames): an interrupt while the new contents are
    // written beside their targets would leave those files, and created directories, in the checkout.
    let _held = HeldSignals::hold();
    let mut create: Vec<PathBuf> = Vec::new();
    for c in changes {
        for d in check_target(root, &c.path, c.new_file)? {
            if !create.contains(&d) {
                create.push(d);
            }
        }
    }
    let mut made: Vec<PathBuf> = Vec::new();
    let staged = (|| -> Result<Vec<Staged>> {
        for d in &create {
            std::fs::create_dir(d).with_context(|| format!("cannot apply: cannot create {}", d.display()))?;
            made.push(d.clone());
        }
        let mut dirs: Vec<PathBuf> =
            changes.iter().filter_map(|c| root.join(&c.path).parent().map(Path::to_path_buf)).collect();
        dirs.dedup();
        for d in &dirs {
            remove_leftovers(d);
        }
        let mut staged = Vec::new();
        for c in changes {
            let target = root.join(&c.path);
            let (old, mode) = if c.new_file { (None, 0o644) } else { read_old(&target).map(|(b, m)| (Some(b), m))? };
            staged.push(Staged { temp: stage(&target, &c.contents, mode)?, target, old });
        }
        Ok(staged)
    })();
    let staged = match staged {
        Ok(s) => s,
        Err(e) => {
            for d in made.iter().rev() {
                let _ = std::fs::remove_dir(d);
            }
            return Err(e);
        }
    };
    commit(staged, &made)
}

/// Renames every staged file into place; on the first failure, puts back every file already replaced.
fn commit(staged: Vec<Staged>, made: &[PathBuf]) -> Result<()> {
    let _held = HeldSignals::hold();
    let mut done: Vec<(PathBuf, Option<Vec<u8>>)> = Vec::new();
    let mut failure = None;
    for s in staged {
        match s.temp.persist(&s.target) {
            Ok(()) => done.push((s.target, s.old)),
            Err(e) => {
                failure = Some(anyhow!("cannot apply: cannot replace {}: {}", s.target.display(), e.error));
                break;
            }
        }
    }
    let Some(failure) = failure else { return Ok(()) };
    let mut unrestored = Vec::new();
    for (target, old) in done.iter().rev() {
        let restored = match old {
            None => std::fs::remove_file(target).map_err(anyhow::Error::from),
            Some(bytes) => {
                let mode = std::fs::metadata(target).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0o644);
                stage(target, bytes, mode).and_then(|t| t.persist(target).map_err(|e| anyhow!("{}", e.error)))
            }
        };
        if restored.is_err() {
            unrestored.push(target.display().to_string());
        }
    }
    for d in made.iter().rev() {
        let _ = std::fs::remove_dir(d);
    }
    if unrestored.is_empty() {
        Err(failure.context("every file was restored; nothing was changed"))
    } else {
        Err(failure.context(format!("could not restore {}; restore them from git", unrestored.join(", "))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("src")).unwrap();
        std::fs::write(d.path().join("src/a.cu"), "old a\n").unwrap();
        std::fs::write(d.path().join("src/b.py"), "old b\n").unwrap();
        d
    }

    fn changes() -> Vec<Change> {
        vec![
            Change { path: "src/a.cu".into(), new_file: false, contents: b"new a\n".to_vec() },
            Change { path: "src/inc/h.h".into(), new_file: true, contents: b"new h\n".to_vec() },
            Change { path: "src/b.py".into(), new_file: false, contents: b"new b\n".to_vec() },
        ]
    }

    fn listing(root: &Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                if p.is_dir() {
                    out.push((rel, "<dir>".into()));
                    stack.push(p);
                } else {
                    out.push((rel, std::fs::read_to_string(&p).unwrap_or_else(|_| "<special>".into())));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn all_files_are_written_with_their_modes() {
        let t = tree();
        std::fs::set_permissions(t.path().join("src/b.py"), std::fs::Permissions::from_mode(0o755)).unwrap();
        install(t.path(), &changes()).unwrap();
        assert_eq!(std::fs::read_to_string(t.path().join("src/a.cu")).unwrap(), "new a\n");
        assert_eq!(std::fs::read_to_string(t.path().join("src/inc/h.h")).unwrap(), "new h\n");
        let mode = |p: &str| std::fs::metadata(t.path().join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode("src/b.py"), mode("src/inc/h.h")), (0o755, 0o644));
        assert!(listing(t.path()).iter().all(|(p, _)| !p.contains(STAGE_PREFIX)));
    }

    #[test]
    fn obstacles_are_named_before_anything_changes() {
        for (make, want) in [
            (&(|p: &Path| std::fs::create_dir_all(p.join("src/inc/h.h")).unwrap()) as &dyn Fn(&Path), "is a directory"),
            (
                &|p: &Path| std::fs::write(p.join("src/inc"), "x").unwrap(),
                "src/inc is a regular file where the patch needs a directory",
            ),
            (&|p: &Path| std::os::unix::fs::symlink("/etc", p.join("src/inc")).unwrap(), "is a symbolic link"),
            (
                &|p: &Path| {
                    std::fs::remove_file(p.join("src/b.py")).unwrap();
                    std::fs::create_dir(p.join("src/b.py")).unwrap();
                },
                "src/b.py is a directory where the patch changes a regular file",
            ),
        ] {
            let t = tree();
            make(t.path());
            let before = listing(t.path());
            let e = format!("{:#}", install(t.path(), &changes()).unwrap_err());
            assert!(e.contains(want) && e.contains("nothing was changed"), "{e}");
            assert_eq!(listing(t.path()), before);
        }
    }

    #[test]
    fn a_failing_rename_restores_every_file() {
        let t = tree();
        let before = listing(t.path());
        let root = t.path().to_path_buf();
        let mut staged = Vec::new();
        let mut made = Vec::new();
        for c in changes() {
            for d in check_target(&root, &c.path, c.new_file).unwrap() {
                std::fs::create_dir(&d).unwrap();
                made.push(d);
            }
            let target = root.join(&c.path);
            let old = (!c.new_file).then(|| std::fs::read(&target).unwrap());
            staged.push(Staged { temp: stage(&target, &c.contents, 0o644).unwrap(), target, old });
        }
        // The last target becomes a non-empty directory after the checks: its rename fails.
        std::fs::remove_file(root.join("src/b.py")).unwrap();
        std::fs::create_dir_all(root.join("src/b.py/x")).unwrap();
        let e = format!("{:#}", commit(staged, &made).unwrap_err());
        assert!(e.contains("cannot replace") && e.contains("every file was restored"), "{e}");
        let after = listing(&root);
        assert_eq!(std::fs::read_to_string(root.join("src/a.cu")).unwrap(), "old a\n");
        assert!(!root.join("src/inc").exists());
        assert!(after.iter().all(|(p, _)| !p.contains(STAGE_PREFIX)), "{after:?}");
        assert_eq!(before.iter().filter(|(p, _)| p == "src/a.cu").count(), 1);
    }
}
