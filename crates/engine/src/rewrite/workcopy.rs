//! Working copies: the task directory is copied (never moved, never written) into a fresh temporary
//! directory for each candidate, so the user's files cannot be modified or lost by a build or a test.

use super::spec::excluded;
use anyhow::{bail, Context};
use std::fs;
use std::path::{Path, PathBuf};

/// Copies the tree at `src` into `dst` (created), skipping entries whose path relative to `src` matches
/// one of `exclude` (see [`excluded`]). Files keep their permission bits. Symbolic links are never
/// recreated: a link whose target lies inside `src` is replaced by a copy of that target (a file, or a
/// directory copied under the same rules), so nothing a build or test does in the copy reaches the
/// original. A link that leads out of `src`, a link to a directory that contains it (a cycle), a dangling
/// link or a special file is an error naming the link and what to do.
pub fn copy_tree(src: &Path, dst: &Path, exclude: &[String]) -> anyhow::Result<()> {
    let root = fs::canonicalize(src).with_context(|| format!("cannot open the task directory {}", src.display()))?;
    let mut stack = vec![root.clone()];
    copy_dir(&root, &root, dst, Path::new(""), exclude, &mut stack)
}

/// The entries of the directory `dir`, sorted by name.
fn sorted_entries(dir: &Path) -> anyhow::Result<Vec<fs::DirEntry>> {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("cannot list {}", dir.display()))?;
    entries.sort_by_key(|e| e.file_name());
    Ok(entries)
}

/// Links to directories inside the task nest at most this deep.
const MAX_LINK_DEPTH: usize = 64;

/// Copies the directory `src` (canonical) into `dst`; `rel` is its path relative to the task root as the
/// user sees it (for excludes), `stack` the canonical directories being copied (for cycles).
fn copy_dir(
    root: &Path,
    src: &Path,
    dst: &Path,
    rel: &Path,
    exclude: &[String],
    stack: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    fs::create_dir_all(dst).with_context(|| format!("cannot create {}", dst.display()))?;
    let entries = sorted_entries(src)?;
    for entry in entries {
        let child_rel = rel.join(entry.file_name());
        if exclude.iter().any(|p| excluded(&child_rel, p)) {
            continue;
        }
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let ft = entry.file_type().with_context(|| format!("cannot stat {}", from.display()))?;
        if ft.is_dir() {
            stack.push(from.clone());
            copy_dir(root, &from, &to, &child_rel, exclude, stack)?;
            stack.pop();
        } else if ft.is_file() {
            fs::copy(&from, &to).with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
        } else if ft.is_symlink() {
            let resolved = fs::canonicalize(&from).with_context(|| {
                format!("{}: the symbolic link points to nothing; remove or exclude it", from.display())
            })?;
            if !resolved.starts_with(root) {
                bail!(
                    "{}: the symbolic link leads out of the task (to {}), where builds and tests could modify or \
                     delete the original; copy what it points to into the task, or exclude the link in the \
                     spec's [workdir] exclude list",
                    from.display(),
                    resolved.display()
                );
            }
            if resolved.is_file() {
                // The target's content is copied: a build writing through the name cannot reach it.
                fs::copy(&resolved, &to)
                    .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
            } else if resolved.is_dir() {
                if stack.iter().any(|d| d.starts_with(&resolved)) || stack.len() > MAX_LINK_DEPTH {
                    bail!(
                        "{}: the symbolic link points to {}, a directory that contains it (a cycle); replace it \
                         or exclude it",
                        from.display(),
                        resolved.display()
                    );
                }
                stack.push(resolved.clone());
                copy_dir(root, &resolved, &to, &child_rel, exclude, stack)?;
                stack.pop();
            } else {
                bail!("{}: the symbolic link points to a special file; remove or exclude it", from.display());
            }
        } else {
            bail!(
                "{}: not a regular file, directory or link; exclude it in the spec's [workdir] exclude list",
                from.display()
            );
        }
    }
    Ok(())
}

/// Copies a finished candidate's directory `src` into `dst` to keep it for inspection (nothing runs in it
/// again): files and directories are copied, a symbolic link is kept as a link (a build's `venv/bin/python3
/// -> /usr/bin/python3` included, never followed), and a special file (a FIFO or socket a test left) is left
/// out. Returns what was left out, one line each; an error stops at the first file that cannot be copied.
pub fn keep_tree(src: &Path, dst: &Path) -> anyhow::Result<Vec<String>> {
    let mut skipped = Vec::new();
    keep_dir(src, dst, &mut skipped)?;
    Ok(skipped)
}

fn keep_dir(src: &Path, dst: &Path, skipped: &mut Vec<String>) -> anyhow::Result<()> {
    fs::create_dir_all(dst).with_context(|| format!("cannot create {}", dst.display()))?;
    let entries = sorted_entries(src)?;
    for entry in entries {
        let (from, to) = (entry.path(), dst.join(entry.file_name()));
        let ft = entry.file_type().with_context(|| format!("cannot stat {}", from.display()))?;
        if ft.is_dir() {
            keep_dir(&from, &to, skipped)?;
        } else if ft.is_file() {
            fs::copy(&from, &to).with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
        } else if ft.is_symlink() {
            let target = fs::read_link(&from).with_context(|| format!("cannot read the link {}", from.display()))?;
            std::os::unix::fs::symlink(&target, &to)
                .with_context(|| format!("cannot make the link {}", to.display()))?;
        } else {
            skipped.push(format!("{}: not a regular file, directory or link", from.display()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_copy_keeps_links_as_links_and_leaves_out_special_files() {
        let src = tempfile::tempdir().unwrap();
        fs::create_dir_all(src.path().join("work/venv/bin")).unwrap();
        fs::write(src.path().join("work/k.sh"), "k").unwrap();
        std::os::unix::fs::symlink("/usr/bin/python3", src.path().join("work/venv/bin/python3")).unwrap();
        std::os::unix::fs::symlink("missing", src.path().join("work/dangling")).unwrap();
        let fifo = src.path().join("work/z.fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let dst = tempfile::tempdir().unwrap();
        let skipped = keep_tree(src.path(), &dst.path().join("cand")).unwrap();
        let kept = dst.path().join("cand/work");
        assert_eq!(fs::read_to_string(kept.join("k.sh")).unwrap(), "k");
        assert_eq!(fs::read_link(kept.join("venv/bin/python3")).unwrap(), Path::new("/usr/bin/python3"));
        assert_eq!(fs::read_link(kept.join("dangling")).unwrap(), Path::new("missing"));
        assert!(!kept.join("z.fifo").exists());
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(skipped[0].contains("z.fifo"), "{skipped:?}");
    }

    #[test]
    fn copies_with_excludes_and_links() {
        let src = tempfile::tempdir().unwrap();
        fs::create_dir_all(src.path().join("a/build")).unwrap();
        fs::write(src.path().join("a/k.c"), "k").unwrap();
        fs::write(src.path().join("a/build/x.o"), "o").unwrap();
        fs::write(src.path().join("top.o"), "o").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("a/k.c", src.path().join("link")).unwrap();
        let outside = tempfile::tempdir().unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(outside.path(), src.path().join("ext")).unwrap();
        let dst = tempfile::tempdir().unwrap();
        let out = dst.path().join("w");
        copy_tree(src.path(), &out, &["*.o".into(), "build".into(), "ext".into()]).unwrap();
        assert_eq!(fs::read_to_string(out.join("a/k.c")).unwrap(), "k");
        assert!(!out.join("a/build").exists());
        assert!(!out.join("top.o").exists());
        #[cfg(unix)]
        {
            assert!(out.join("link").symlink_metadata().unwrap().is_file(), "file links are copied as files");
            assert_eq!(fs::read_to_string(out.join("link")).unwrap(), "k");
            assert!(!out.join("ext").exists(), "the excluded outside link is not there");
            // A link to a directory inside the task becomes a real directory with the same files.
            std::os::unix::fs::symlink(src.path().join("a"), src.path().join("inner")).unwrap();
            let w2 = dst.path().join("w2");
            copy_tree(src.path(), &w2, &["ext".into()]).unwrap();
            assert!(w2.join("inner").symlink_metadata().unwrap().is_dir());
            assert_eq!(fs::read_to_string(w2.join("inner/k.c")).unwrap(), "k");
            // A link out of the task is refused, naming it.
            let err = copy_tree(src.path(), &dst.path().join("w3"), &[]).unwrap_err();
            assert!(format!("{err:#}").contains("ext: the symbolic link leads out of the task"), "{err:#}");
            // A link to an enclosing directory is a cycle, not an endless copy.
            fs::remove_file(src.path().join("ext")).unwrap();
            std::os::unix::fs::symlink(src.path(), src.path().join("a/up")).unwrap();
            let err = copy_tree(src.path(), &dst.path().join("w4"), &[]).unwrap_err();
            assert!(format!("{err:#}").contains("a cycle"), "{err:#}");
        }
    }
}
