//! Auxiliary files of a measurement run (the journal's `.lock`, the AITER work directory's untuned CSV and
//! tuner log): opened without following symbolic links (`O_NOFOLLOW`) and only when they are regular
//! files, so a link planted at one of these names never gets its target overwritten, and a FIFO or device
//! there never blocks the run. The refusal names the path and what is there.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{bail, Result};

/// How an auxiliary file is opened (each but `Read` creates it when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Read only (a file another program writes, e.g. the tuner's profile).
    Read,
    /// Read and write, contents kept (a lock file).
    ReadWrite,
    /// Write from empty (an input written for a tool).
    Truncate,
    /// Append (a log).
    Append,
}

/// What is at `path` when it is not a regular file (for messages), from `lstat`.
fn what_is_there(path: &Path) -> Option<&'static str> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    (!meta.file_type().is_file()).then(|| crate::paths::file_kind(&meta))
}

/// Opens the auxiliary file `path` (`what` names it in messages, e.g. "journal lock") in `mode`, refusing
/// a symbolic link or anything but a regular file there.
pub fn open(path: &Path, mode: Mode, what: &str) -> Result<File> {
    let refuse = |kind: &str| {
        anyhow::anyhow!(
            "{what} {} is {kind}; gemm-synth opens its auxiliary files only as regular files and never through a \
             link: remove it (or pass another --out)",
            path.display()
        )
    };
    if let Some(kind) = what_is_there(path) {
        return Err(refuse(kind));
    }
    let mut o = OpenOptions::new();
    o.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    match mode {
        Mode::Read => o.read(true),
        Mode::ReadWrite => o.read(true).write(true).create(true).truncate(false),
        Mode::Truncate => o.write(true).create(true).truncate(true),
        Mode::Append => o.append(true).create(true),
    };
    let file = match o.open(path) {
        Ok(f) => f,
        // Planted between the check and the open.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(refuse("a symbolic link")),
        Err(e) => match what_is_there(path) {
            Some(kind) => return Err(refuse(kind)),
            None => bail!("cannot open {what} {}: {e}", path.display()),
        },
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(refuse(what_is_there(path).unwrap_or("not a regular file")));
    }
    Ok(file)
}

/// Whether `path` may be used as an auxiliary file: absent or a regular file (not a link); else the same
/// refusal as [`open`].
pub fn check(path: &Path, what: &str) -> Result<()> {
    match what_is_there(path) {
        None => Ok(()),
        Some(kind) => bail!(
            "{what} {} is {kind}; gemm-synth uses its auxiliary files only as regular files and never through a \
             link: remove it (or pass another --out)",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn links_fifos_and_directories_are_refused_and_their_targets_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("precious.txt");
        std::fs::write(&target, "keep me\n").unwrap();
        let link = dir.path().join("x.lock");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for mode in [Mode::ReadWrite, Mode::Truncate, Mode::Append] {
            let e = open(&link, mode, "journal lock").unwrap_err().to_string();
            assert!(e.contains("x.lock is a symbolic link") && e.contains("journal lock"), "{e}");
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n");
        // A dangling link is refused too (it would create its target).
        let dangling = dir.path().join("d.log");
        std::os::unix::fs::symlink(dir.path().join("new-file"), &dangling).unwrap();
        assert!(open(&dangling, Mode::Append, "tuner log").is_err());
        assert!(!dir.path().join("new-file").exists());
        let fifo = dir.path().join("f.csv");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path only.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        assert!(open(&fifo, Mode::Truncate, "untuned CSV").unwrap_err().to_string().contains("is a FIFO"));
        assert!(open(dir.path(), Mode::Append, "tuner log").unwrap_err().to_string().contains("is a directory"));
        assert!(check(&link, "x").is_err() && check(&dir.path().join("absent"), "x").is_ok());
        // Regular files work in every mode.
        let ok = dir.path().join("ok.log");
        open(&ok, Mode::Append, "log").unwrap().write_all(b"a\n").unwrap();
        open(&ok, Mode::Append, "log").unwrap().write_all(b"b\n").unwrap();
        assert_eq!(std::fs::read_to_string(&ok).unwrap(), "a\nb\n");
        open(&ok, Mode::Truncate, "log").unwrap().write_all(b"c\n").unwrap();
        assert_eq!(std::fs::read_to_string(&ok).unwrap(), "c\n");
    }
}
