//! Working copies: the task directory is copied (never moved, never written) into a fresh temporary
//! directory for each candidate, so the user's files cannot be modified or lost by a build or a test.

use super::spec::excluded;
use anyhow::{bail, Context};
use std::fs;
use std::path::Path;

/// Copies the tree at `src` into `dst` (created), skipping entries whose path relative to `src` matches
/// one of `exclude` (see [`excluded`]). Files keep their permission bits. A symbolic link to a file is
/// copied as a file; a link to a directory outside `src` is recreated (pointing to the same absolute
/// place); a link to a directory inside `src`, a dangling link or a special file is an error.
pub fn copy_tree(src: &Path, dst: &Path, exclude: &[String]) -> anyhow::Result<()> {
    copy_dir(src, dst, Path::new(""), exclude)
}

fn copy_dir(src_root: &Path, dst_root: &Path, rel: &Path, exclude: &[String]) -> anyhow::Result<()> {
    let src = src_root.join(rel);
    let dst = dst_root.join(rel);
    fs::create_dir_all(&dst).with_context(|| format!("cannot create {}", dst.display()))?;
    let mut entries: Vec<_> = fs::read_dir(&src)
        .with_context(|| format!("cannot list {}", src.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("cannot list {}", src.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let child_rel = rel.join(entry.file_name());
        if exclude.iter().any(|p| excluded(&child_rel, p)) {
            continue;
        }
        let from = entry.path();
        let to = dst_root.join(&child_rel);
        let ft = entry.file_type().with_context(|| format!("cannot stat {}", from.display()))?;
        if ft.is_dir() {
            copy_dir(src_root, dst_root, &child_rel, exclude)?;
        } else if ft.is_file() {
            fs::copy(&from, &to).with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
        } else if ft.is_symlink() {
            let resolved = fs::canonicalize(&from).with_context(|| {
                format!("{}: the symbolic link points to nothing; remove or exclude it", from.display())
            })?;
            if resolved.is_file() {
                // The link's content is copied: a build writing through it must not reach the original.
                fs::copy(&resolved, &to)
                    .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
            } else if resolved.starts_with(fs::canonicalize(src_root)?) {
                bail!(
                    "{}: a link to a directory inside the task would let builds write into the original;                      replace it with the directory or exclude it",
                    from.display()
                );
            } else {
                #[cfg(unix)]
                std::os::unix::fs::symlink(&resolved, &to)
                    .with_context(|| format!("cannot recreate link {}", to.display()))?;
                #[cfg(not(unix))]
                bail!("{}: links to directories are only supported on Unix", from.display());
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

#[cfg(test)]
mod tests {
    use super::*;

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
        copy_tree(src.path(), &out, &["*.o".into(), "build".into()]).unwrap();
        assert_eq!(fs::read_to_string(out.join("a/k.c")).unwrap(), "k");
        assert!(!out.join("a/build").exists());
        assert!(!out.join("top.o").exists());
        #[cfg(unix)]
        {
            assert!(out.join("link").symlink_metadata().unwrap().is_file(), "file links are copied as files");
            assert_eq!(fs::read_to_string(out.join("link")).unwrap(), "k");
            assert_eq!(fs::read_link(out.join("ext")).unwrap(), fs::canonicalize(outside.path()).unwrap());
            std::os::unix::fs::symlink(src.path().join("a"), src.path().join("inner")).unwrap();
            let err = copy_tree(src.path(), &dst.path().join("w2"), &[]).unwrap_err();
            assert!(format!("{err:#}").contains("inside the task"), "{err:#}");
        }
    }
}
