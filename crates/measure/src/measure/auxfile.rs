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
    (!meta.file_type().is_file()).then(|| synth_base::paths::file_kind(&meta))
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

/// The prefix of the plan files a harness reads (`<prefix><pid>-<random>.jsonl` in the temporary directory).
const PLAN_PREFIX: &str = "synth-bench-plan-";

/// A new plan file in the temporary directory, deleted when dropped. A run stopped by a signal cannot
/// delete its own, so every new one first removes this user's plan files whose process is gone.
pub fn plan_file() -> Result<tempfile::NamedTempFile> {
    let dir = std::env::temp_dir();
    remove_stale_plans(&dir);
    tempfile::Builder::new()
        .prefix(&format!("{PLAN_PREFIX}{}-", std::process::id()))
        .suffix(".jsonl")
        .tempfile_in(&dir)
        .map_err(|e| anyhow::anyhow!("cannot create a plan file in {}: {e}", dir.display()))
}

/// Removes the plan files in `dir` of this user whose process (the pid in the name) has ended.
fn remove_stale_plans(dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(PLAN_PREFIX).and_then(|r| r.split_once('-')).map(|(p, _)| p) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        let Ok(meta) = e.path().symlink_metadata() else { continue };
        let gone = !Path::new("/proc").join(pid.to_string()).exists() && Path::new("/proc/self").exists();
        if meta.is_file() && meta.uid() == uid && name.ends_with(".jsonl") && pid != std::process::id() && gone {
            let _ = std::fs::remove_file(e.path());
        }
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

    /// Plan files of processes that no longer exist are removed; those of live processes, files of other
    /// names, links and directories stay.
    #[test]
    fn stale_plan_files_of_ended_processes_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let at = |name: &str| dir.path().join(name);
        let stale = ["synth-bench-plan-999999999-abc123.jsonl", "synth-bench-plan-999999998-x-y.jsonl"];
        let kept_files = [
            format!("synth-bench-plan-{me}-live.jsonl"),
            // pid 1 (init) exists as long as the system does.
            "synth-bench-plan-1-init.jsonl".to_string(),
            "synth-bench-plan-999999999-abc.txt".to_string(),
            "synth-bench-plan-999999999.jsonl".to_string(),
            "synth-bench-plan-notapid-abc.jsonl".to_string(),
            "synth-bench-plan--abc.jsonl".to_string(),
            "other-synth-bench-plan-999999999-abc.jsonl".to_string(),
            "synth-bench-999999999-abc.jsonl".to_string(),
        ];
        for name in stale.iter().copied().chain(kept_files.iter().map(String::as_str)) {
            std::fs::write(at(name), "{}\n").unwrap();
        }
        // A directory and a link of the plan name of an ended process, and the link's target, stay.
        std::fs::create_dir(at("synth-bench-plan-999999999-dir.jsonl")).unwrap();
        std::fs::write(at("target.txt"), "keep me\n").unwrap();
        std::os::unix::fs::symlink(at("target.txt"), at("synth-bench-plan-999999999-link.jsonl")).unwrap();
        // Another user's plan file stays (only root can make one here).
        // SAFETY: geteuid has no preconditions and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let foreign = at("synth-bench-plan-999999997-nobody.jsonl");
        if root {
            std::fs::write(&foreign, "{}\n").unwrap();
            std::os::unix::fs::chown(&foreign, Some(65534), None).unwrap();
        }

        remove_stale_plans(dir.path());
        for name in stale {
            assert!(!at(name).exists(), "{name} was kept");
        }
        for name in &kept_files {
            assert_eq!(std::fs::read_to_string(at(name)).unwrap(), "{}\n", "{name}");
        }
        assert!(at("synth-bench-plan-999999999-dir.jsonl").is_dir());
        assert!(at("synth-bench-plan-999999999-link.jsonl").symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(at("target.txt")).unwrap(), "keep me\n");
        assert_eq!(foreign.is_file(), root, "another user's plan file");
        // A directory that cannot be listed is no error.
        remove_stale_plans(&dir.path().join("absent"));
    }

    /// A plan file is named for this process, lies in the temporary directory, and goes when dropped.
    #[test]
    fn a_plan_file_names_this_process_and_is_removed_when_dropped() {
        let plan = plan_file().unwrap();
        let path = plan.path().to_path_buf();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        assert!(name.starts_with(&format!("synth-bench-plan-{}-", std::process::id())), "{name}");
        assert!(name.ends_with(".jsonl"), "{name}");
        assert_eq!(path.parent(), Some(std::env::temp_dir().as_path()));
        assert!(path.is_file());
        // Another new plan file does not remove this one (its process is alive).
        let other = plan_file().unwrap();
        assert!(path.is_file() && other.path().is_file());
        drop(plan);
        assert!(!path.exists());
    }
}
