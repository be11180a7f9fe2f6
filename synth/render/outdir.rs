//! All-or-nothing writes of an output directory. Every file is first written into a temporary directory
//! inside the target directory (same file system); only when every one of them was written completely are
//! they renamed into place, so a failure leaves the directory exactly as it was. New files get the mode
//! the process umask gives (`0666 & !umask`, as any file a program creates); a file that is replaced keeps
//! the mode it had.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::writer::{freshness, Freshness, GeneratedFile};

/// Writes every file of `files` whose contents differ from what `dir` holds (see the module docs);
/// returns the paths of all `files`. Nothing in `dir` changes when any file cannot be written.
pub fn write_all(dir: &Path, files: &[GeneratedFile]) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create directory {}", dir.display()))?;
    let mut changed = Vec::new();
    for file in files {
        if freshness(dir, file)? != Freshness::Fresh {
            changed.push(file);
        }
    }
    if !changed.is_empty() {
        let staging = tempfile::Builder::new()
            .prefix(".synth-staging-")
            .tempdir_in(dir)
            .with_context(|| format!("cannot create a staging directory in {}", dir.display()))?;
        for file in &changed {
            let staged = staging.path().join(&file.name);
            let target = dir.join(&file.name);
            // std creates files with 0666 filtered by the umask; tempfile's 0600 is never used here.
            std::fs::write(&staged, file.contents.as_bytes())
                .with_context(|| format!("cannot write {}", target.display()))?;
            if let Ok(meta) = std::fs::metadata(&target) {
                if meta.is_file() {
                    std::fs::set_permissions(&staged, meta.permissions())
                        .with_context(|| format!("cannot set the mode of {}", target.display()))?;
                }
            }
            if target.is_dir() {
                anyhow::bail!("cannot write {}: a directory is in the way", target.display());
            }
        }
        for file in &changed {
            let target = dir.join(&file.name);
            std::fs::rename(staging.path().join(&file.name), &target)
                .with_context(|| format!("cannot move the new {} into place", target.display()))?;
        }
    }
    Ok(files.iter().map(|f| dir.join(&f.name)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_failed_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("a.txt"), "old a").unwrap();
        std::fs::write(d.join("b.txt"), "old b").unwrap();
        let files = vec![
            GeneratedFile::new("a.txt", "new a"),
            GeneratedFile::new("b.txt", "new b"),
            GeneratedFile::new("no/such/dir.txt", "c"),
        ];
        let err = write_all(d, &files).unwrap_err();
        assert!(format!("{err:#}").contains("no/such/dir.txt"), "{err:#}");
        assert_eq!(std::fs::read_to_string(d.join("a.txt")).unwrap(), "old a");
        assert_eq!(std::fs::read_to_string(d.join("b.txt")).unwrap(), "old b");
        let left: Vec<_> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 2, "no staging directory is left behind: {left:?}");
    }

    #[test]
    fn modes_follow_the_umask_and_replaced_files_keep_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("kept.h"), "old").unwrap();
        std::fs::set_permissions(d.join("kept.h"), std::fs::Permissions::from_mode(0o640)).unwrap();
        // What this process's umask gives a new file.
        std::fs::write(d.join("probe"), "").unwrap();
        let umask_mode = mode(&d.join("probe"));
        write_all(d, &[GeneratedFile::new("kept.h", "new"), GeneratedFile::new("new.rs", "x")]).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("kept.h")).unwrap(), "new");
        assert_eq!(mode(&d.join("kept.h")), 0o640);
        assert_eq!(mode(&d.join("new.rs")), umask_mode);
        assert_ne!(mode(&d.join("new.rs")), 0o600, "not tempfile's private mode (umask {umask_mode:o})");
    }
}
