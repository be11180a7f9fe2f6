//! All-or-nothing writes of an output directory, which stays a shared place.
//!
//! A directory `D` that a command writes (`--out D`, `generated/`, the directories of the files `compare
//! --csv/--svg` and `drift --report-*` name) may hold the user's own files, be another program's working
//! directory, carry extended attributes and a default ACL, or be written by a second `synth` at the same
//! time. So a commit of `D` changes exactly the files it writes and nothing else:
//!
//! - `D` and every subdirectory of it keep their inode (their metadata, ACLs and extended attributes, and
//!   a process whose working directory is inside them keeps working there): files are renamed into place
//!   one by one, and a subdirectory `D` lacks is created in place (moved in whole with its new files, never
//!   over a directory that appeared meanwhile); no existing directory is replaced;
//! - no entry the commit did not write is deleted, replaced or hidden;
//! - writers of one `D` are serialized by an exclusive lock on `D/.synth.lock` (which records the holder's
//!   process id): a second writer waits for the first, up to [`staging::LOCK_WAIT`], then is refused with an
//!   error naming the holder's pid. The lock file is removed when the writer ends;
//! - the files that change are staged and synced in a hidden `D/.synth-stage-<pid>-<n>/` (same file
//!   system), a commit marker is written, and only then are they renamed into place. A failure before the
//!   marker removes the staging directory and changes nothing; a signal or crash at any step leaves a
//!   staging directory that the next writer of `D` recovers under the lock before anything else: rolled
//!   forward (the remaining renames finished) when it has its marker, deleted when not. So every commit is
//!   all or nothing across a crash (the protocol: [`super::staging`]); the files of one transaction in
//!   several directories (`compare --csv A/x.csv --svg B/y.svg`) share one marker.
//!
//! A writer that changes nothing takes no lock and leaves nothing behind; one that fails leaves no lock
//! file and removes the directories it created for the output that are still empty. A symbolic link at a
//! subdirectory of `D` that a file is written into (`D/aiter` → elsewhere) is refused with an error naming
//! it, before anything is written: output never goes through a link outside the directory the user named.
//! (A link at an output file's own name is replaced by the file, not followed.) A FIFO, socket or device at
//! an output's name is refused, never read or waited on.
//!
//! New files get the mode the process umask gives (`0666 & !umask`, as any file a program creates; a
//! default ACL of `D` applies to them); a file that is replaced keeps the mode it had, and `D` keeps its own.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};

use super::file::GeneratedFile;
use super::staging::{self, DirLock, Part};

pub use super::staging::Step;

/// Writes every file of `files` whose contents differ from what `dir` holds (see the module docs);
/// returns the paths of all `files`. Nothing in `dir` changes when any file cannot be written.
pub fn write_all(dir: &Path, files: &[GeneratedFile]) -> anyhow::Result<Vec<PathBuf>> {
    write_all_with(dir, files, &mut |_| Ok(()))
}

/// [`write_all`], calling `stop` at each [`Step`]; an error from it ends the write there, as a signal would.
pub fn write_all_with(
    dir: &Path,
    files: &[GeneratedFile],
    stop: &mut dyn FnMut(Step) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<PathBuf>> {
    write_waiting(dir, files, stop, staging::LOCK_WAIT)
}

fn write_waiting(
    dir: &Path,
    files: &[GeneratedFile],
    stop: &mut dyn FnMut(Step) -> anyhow::Result<()>,
    wait: Duration,
) -> anyhow::Result<Vec<PathBuf>> {
    let paths = check_files(dir, files)?;
    let target = real_target(dir)?;
    if target.is_dir() && changed(dir, files)?.is_empty() && !staging::has_stages(&target) {
        return Ok(paths);
    }
    lock_target(dir, &target, wait)?.write_with(files, stop)
}

/// The checks that need neither the lock nor the disk's contents: every name inside the directory, no
/// link on its way. Returns the paths of `files`.
fn check_files(dir: &Path, files: &[GeneratedFile]) -> anyhow::Result<Vec<PathBuf>> {
    for f in files {
        check_name(&f.name)?;
    }
    for f in files {
        check_no_link(dir, &f.name)?;
    }
    Ok(files.iter().map(|f| dir.join(&f.name)).collect())
}

/// The files of `files` whose contents differ from what `dir` holds (or that it lacks).
fn changed<'a>(dir: &Path, files: &'a [GeneratedFile]) -> anyhow::Result<Vec<&'a GeneratedFile>> {
    let mut out = Vec::new();
    for file in files {
        let path = dir.join(&file.name);
        if path.is_dir() {
            bail!("cannot write {}: a directory is in the way", path.display());
        }
        match existing_contents(&path) {
            Ok(Some(bytes)) if bytes == file.contents.as_bytes() => {}
            Ok(_) => out.push(file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.kind() == std::io::ErrorKind::NotADirectory => {
                out.push(file)
            }
            Err(e) => bail!("cannot write {}: {e}", path.display()),
        }
    }
    Ok(out)
}

/// An output directory locked for this writer, what an interrupted writer left there recovered
/// ([`lock`]). The lock is released (and its file removed) when this value is dropped.
pub struct Locked {
    lock: DirLock,
    dir: PathBuf,
}

/// Locks `dir` (creating it when missing; removed again if nothing is written) and recovers what a writer
/// that died left there. A command that reads the directory before it writes it (`synth export` and its
/// provenance sidecar) reads it under this lock, so what it read is what it replaces.
pub fn lock(dir: &Path) -> anyhow::Result<Locked> {
    lock_target(dir, &real_target(dir)?, staging::LOCK_WAIT)
}

fn lock_target(dir: &Path, target: &Path, wait: Duration) -> anyhow::Result<Locked> {
    let lock = staging::lock(target, wait)?;
    staging::recover(target)?;
    Ok(Locked { lock, dir: dir.to_path_buf() })
}

impl Locked {
    /// [`write_all_with`] into the locked directory.
    pub fn write_with(
        self,
        files: &[GeneratedFile],
        stop: &mut dyn FnMut(Step) -> anyhow::Result<()>,
    ) -> anyhow::Result<Vec<PathBuf>> {
        let paths = check_files(&self.dir, files)?;
        let changed = changed(&self.dir, files)?;
        if changed.is_empty() {
            return Ok(paths);
        }
        for file in &changed {
            clear_way(self.lock.dir(), &self.dir, &file.name)?;
        }
        staging::commit(&[Part { target: self.lock.dir(), files: changed }], &mut || Ok(()), stop)?;
        Ok(paths)
    }
}

/// Writes files the user named one by one (`compare --csv/--svg` and the PNG, `drift --report-*`), each
/// into its directory (which must exist), as one transaction over those directories (see the module docs):
/// every file is staged and synced, then `before_commit` runs (its error changes no file), then they are
/// moved into place. Every target is replaced whatever it holds; the caller refuses what must not be.
pub fn write_named(
    files: &[(PathBuf, Vec<u8>)],
    before_commit: &mut dyn FnMut() -> anyhow::Result<()>,
    stop: &mut dyn FnMut(Step) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut groups: std::collections::BTreeMap<PathBuf, Vec<GeneratedFile>> = Default::default();
    for (target, bytes) in files {
        let Some(name) = target.file_name() else { bail!("cannot write {}: not a file name", target.display()) };
        let Some(name) = name.to_str() else {
            bail!("cannot write {}: the file name is not UTF-8 text", target.display())
        };
        let parent = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let real =
            std::fs::canonicalize(parent).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", target.display()))?;
        if !real.is_dir() {
            bail!("cannot write {}: {} is not a directory", target.display(), parent.display());
        }
        groups.entry(real).or_default().push(GeneratedFile::binary(name, bytes.clone()));
    }
    let mut locks = Vec::new();
    for dir in groups.keys() {
        locks.push(staging::lock(dir, staging::LOCK_WAIT)?);
        staging::recover(dir)?;
    }
    let parts: Vec<Part> =
        groups.iter().map(|(dir, files)| Part { target: dir, files: files.iter().collect() }).collect();
    staging::commit(&parts, before_commit, stop)
}

/// The contents of the regular file at an output's path (`None` when a link to something else is there:
/// it is replaced, not followed); an error when something other than a file, a directory or a link is in
/// the way (a FIFO would block the read, and replacing a device or socket is never what was meant).
fn existing_contents(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    let meta = std::fs::symlink_metadata(path)?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        return match std::fs::metadata(path) {
            Ok(m) if m.is_file() => std::fs::read(path).map(Some),
            _ => Ok(None),
        };
    }
    if !kind.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is in the way (not a regular file); remove it or choose another --out",
            synth_base::paths::file_kind(&meta)
        )));
    }
    std::fs::read(path).map(Some)
}

/// Refuses to write `name` into `dir` when a subdirectory on its way is a symbolic link: writing through it
/// would put the file outside `dir` (and replacing it would delete something of the user's).
fn check_no_link(dir: &Path, name: &str) -> anyhow::Result<()> {
    let mut at = dir.to_path_buf();
    let parts: Vec<_> = Path::new(name).components().collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&at).map(|t| t.display().to_string()).unwrap_or_default();
                bail!(
                    "cannot write {}: {} is a symbolic link (to {}), and output is written only inside {}, never \
                     through a link: remove the link (or choose another --out)",
                    dir.join(name).display(),
                    at.display(),
                    synth_base::sanitize::shown(&to),
                    dir.display()
                );
            }
            Ok(_) => {}
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

/// An error naming the file in the way when a directory `name` is written into is a file in `target`.
fn clear_way(target: &Path, dir: &Path, name: &str) -> anyhow::Result<()> {
    let mut at = target.to_path_buf();
    let parts: Vec<_> = Path::new(name).components().collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!(
                "cannot write {}: a file is in the way of the directory {}",
                dir.join(name).display(),
                at.display()
            ),
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

/// A file name must stay inside the output directory: relative, no `..`, no `.`-only name.
fn check_name(name: &str) -> anyhow::Result<()> {
    let p = Path::new(name);
    if name.is_empty() || !p.components().all(|c| matches!(c, Component::Normal(_))) {
        bail!("cannot write {name:?}: a generated file's name must be a relative path inside the output directory");
    }
    Ok(())
}

/// The directory written: `dir` with symbolic links resolved (a link to a directory keeps pointing at the
/// directory it names); for a directory that does not exist yet, its nearest existing ancestor resolved and
/// the rest of the name kept (created when the lock is taken).
fn real_target(dir: &Path) -> anyhow::Result<PathBuf> {
    if std::fs::symlink_metadata(dir).is_ok() {
        if !dir.is_dir() {
            bail!("cannot write into {}: it is not a directory", dir.display());
        }
        return std::fs::canonicalize(dir).with_context(|| format!("cannot read {}", dir.display()));
    }
    let abs = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir().context("cannot read the working directory")?.join(dir)
    };
    let Some(base) = abs.ancestors().find(|a| std::fs::symlink_metadata(a).is_ok()) else {
        bail!("cannot write into {}: not a directory name", dir.display());
    };
    let rest = abs.strip_prefix(base).expect("an ancestor");
    if !rest.components().all(|c| matches!(c, Component::Normal(_))) {
        bail!("cannot write into {}: `..` after a directory that does not exist", dir.display());
    }
    if !base.is_dir() {
        bail!("cannot write into {}: {} is not a directory", dir.display(), base.display());
    }
    Ok(std::fs::canonicalize(base).with_context(|| format!("cannot read {}", base.display()))?.join(rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    /// The names in `d`, sorted.
    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    /// Every file under `d` (relative name → contents), links followed, the transaction's own hidden
    /// entries (lock, staging directories) left out.
    fn tree(d: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
        fn walk(root: &Path, d: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
                if p.file_name().unwrap().to_string_lossy().starts_with(".synth") {
                    continue;
                }
                if p.is_dir() {
                    walk(root, &p, out);
                } else {
                    out.insert(p.strip_prefix(root).unwrap().display().to_string(), std::fs::read(&p).unwrap());
                }
            }
        }
        let mut out = std::collections::BTreeMap::new();
        walk(d, d, &mut out);
        out
    }

    /// Whether `d` holds anything of a transaction (a lock file, a staging directory).
    fn leftovers(d: &Path) -> Vec<String> {
        names(d).into_iter().filter(|n| n.starts_with(".synth")).collect()
    }

    fn stop_at(at: Step) -> impl FnMut(Step) -> anyhow::Result<()> {
        move |s| if s == at { anyhow::bail!("killed at {s:?}") } else { Ok(()) }
    }

    #[test]
    fn a_failed_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("a.txt"), "old a").unwrap();
        std::fs::write(d.join("b.txt"), "old b").unwrap();
        // The third file's directory is a file: nothing is written, the first two included.
        std::fs::write(d.join("sub"), "a file").unwrap();
        let files = vec![
            GeneratedFile::new("a.txt", "new a"),
            GeneratedFile::new("b.txt", "new b"),
            GeneratedFile::new("sub/c.txt", "c"),
        ];
        let err = write_all(d, &files).unwrap_err();
        assert!(format!("{err:#}").contains("sub/c.txt"), "{err:#}");
        assert_eq!(std::fs::read_to_string(d.join("a.txt")).unwrap(), "old a");
        assert_eq!(std::fs::read_to_string(d.join("b.txt")).unwrap(), "old b");
        assert_eq!(names(d), ["a.txt", "b.txt", "sub"], "no lock or staging directory is left behind");
        let e = write_all(d, &[GeneratedFile::new("../x", "x")]).unwrap_err().to_string();
        assert!(e.contains("relative path inside the output directory"), "{e}");
        // A new directory whose write fails is removed again, with the parents created for it.
        let new = d.join("new/deeper");
        let clash = vec![GeneratedFile::new("x/y.txt", "y"), GeneratedFile::new("x", "a file where x/ goes")];
        assert!(write_all(&new, &clash).is_err());
        assert!(!d.join("new").exists(), "{:?}", names(d));
    }

    #[test]
    fn a_writer_stopped_at_any_step_is_finished_or_undone_by_the_next_one() {
        let files = vec![
            GeneratedFile::new("a.txt", "new a"),
            GeneratedFile::new("same.txt", "same"),
            GeneratedFile::new("new.txt", "new"),
            GeneratedFile::new("aiter/p.patch", "new patch"),
            GeneratedFile::new("fresh/dir/f.txt", "in a new subdirectory"),
        ];
        for at in [Step::Staged, Step::Committed, Step::PartRenamed, Step::Renamed] {
            let base = tempfile::tempdir().unwrap();
            let d = base.path().join("out");
            std::fs::create_dir_all(d.join("aiter")).unwrap();
            std::fs::write(d.join("a.txt"), "old a").unwrap();
            std::fs::write(d.join("same.txt"), "same").unwrap();
            std::fs::write(d.join("aiter/p.patch"), "old patch").unwrap();
            std::fs::write(d.join("notes.md"), "the user's own file").unwrap();
            let inode = std::fs::metadata(&d).unwrap().ino();
            let old = tree(&d);
            let mut new = old.clone();
            for f in &files {
                new.insert(f.name.clone(), f.contents.as_bytes().to_vec());
            }
            assert!(write_all_with(&d, &files, &mut stop_at(at)).is_err());
            match at {
                Step::Staged | Step::Committed => assert_eq!(tree(&d), old, "stopped at {at:?}"),
                Step::Renamed => assert_eq!(tree(&d), new, "stopped at {at:?}"),
                Step::PartRenamed => assert_eq!(std::fs::read(d.join("a.txt")).unwrap(), b"new a"),
            }
            assert!(!leftovers(&d).is_empty(), "stopped at {at:?}: the staging directory stays, as after a kill");
            // The next writer of the directory (here one that writes another file) recovers first.
            write_all(&d, &[GeneratedFile::new("other.txt", "other")]).unwrap();
            let mut want = if at == Step::Staged { old } else { new };
            want.insert("other.txt".into(), b"other".to_vec());
            assert_eq!(tree(&d), want, "after stopping at {at:?}, the next writer left one run's state");
            assert_eq!(leftovers(&d), Vec::<String>::new(), "after stopping at {at:?}");
            assert_eq!(std::fs::metadata(&d).unwrap().ino(), inode);
            assert_eq!(names(base.path()), ["out"], "nothing is written beside the directory");
        }
    }

    /// A writer that finds an interrupted transaction recovers it even when its own files are unchanged.
    #[test]
    fn an_unchanged_write_still_finishes_an_interrupted_one() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("a.txt"), "old").unwrap();
        let files = [GeneratedFile::new("a.txt", "new"), GeneratedFile::new("b.txt", "b")];
        assert!(write_all_with(d, &files, &mut stop_at(Step::PartRenamed)).is_err());
        assert_eq!(std::fs::read_to_string(d.join("a.txt")).unwrap(), "new");
        assert!(!d.join("b.txt").exists());
        write_all(d, &[GeneratedFile::new("a.txt", "new")]).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("b.txt")).unwrap(), "b");
        assert_eq!(names(d), ["a.txt", "b.txt"]);
    }

    /// Sets the extended attribute `user.team` on `p`; false where the file system has none.
    fn set_xattr(p: &Path) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
        // SAFETY: valid NUL-terminated strings and a buffer of the given length.
        unsafe { libc::setxattr(path.as_ptr(), c"user.team".as_ptr(), b"gemm".as_ptr().cast(), 4, 0) == 0 }
    }

    fn xattr(p: &Path) -> Vec<u8> {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
        let mut buf = [0u8; 64];
        // SAFETY: valid NUL-terminated strings and a buffer of the given length.
        let n = unsafe { libc::getxattr(path.as_ptr(), c"user.team".as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        buf[..n.max(0) as usize].to_vec()
    }

    /// The directory and its subdirectories stay the same directories: their inodes, extended attributes
    /// and modes, and a process working inside one of them writes there after the commit.
    #[test]
    fn a_commit_keeps_every_directory_and_the_processes_inside_it() {
        use std::io::Write as _;
        let base = tempfile::tempdir().unwrap();
        let d = base.path().join("out");
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::create_dir_all(d.join("aiter")).unwrap();
        std::fs::write(d.join("sub/a.txt"), "old").unwrap();
        std::fs::write(d.join("sub/theirs.txt"), "theirs").unwrap();
        std::fs::set_permissions(d.join("sub"), std::fs::Permissions::from_mode(0o750)).unwrap();
        let xattrs = set_xattr(&d) && set_xattr(&d.join("sub"));
        let inodes = |d: &Path| ["", "sub", "aiter"].map(|s| std::fs::metadata(d.join(s)).unwrap().ino());
        let before = inodes(&d);
        // A process whose working directory is D/sub, writing a file there once told to.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read line && echo child > by-child.txt"])
            .current_dir(d.join("sub"))
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let files = [
            GeneratedFile::new("sub/a.txt", "new"),
            GeneratedFile::new("aiter/p.patch", "patch"),
            GeneratedFile::new("rule.json", "{}"),
        ];
        write_all(&d, &files).unwrap();
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        assert!(child.wait().unwrap().success());
        assert_eq!(
            std::fs::read_to_string(d.join("sub/by-child.txt")).unwrap(),
            "child\n",
            "the child's write was lost"
        );
        assert_eq!(inodes(&d), before, "a directory was replaced");
        assert_eq!(mode(&d.join("sub")), 0o750);
        assert_eq!(std::fs::read_to_string(d.join("sub/theirs.txt")).unwrap(), "theirs");
        assert_eq!(std::fs::read_to_string(d.join("sub/a.txt")).unwrap(), "new");
        // (Where the file system has no user extended attributes, the inodes say the same.)
        if xattrs {
            assert_eq!(xattr(&d), b"gemm");
            assert_eq!(xattr(&d.join("sub")), b"gemm");
        }
    }

    /// Writers of one directory are serialized: many at once each get their file in, none is lost.
    #[test]
    fn concurrent_writers_of_one_directory_lose_nothing() {
        let base = tempfile::tempdir().unwrap();
        let d = base.path().join("out");
        let writers: Vec<_> = (0..8)
            .map(|i| {
                let d = d.clone();
                std::thread::spawn(move || {
                    let files = [
                        GeneratedFile::new(format!("w{i}.txt"), format!("{i}")),
                        GeneratedFile::new(format!("sub{}/w{i}.txt", i % 2), "x"),
                        GeneratedFile::new("shared.txt", format!("{i}")),
                    ];
                    write_all(&d, &files).unwrap();
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        for i in 0..8 {
            assert_eq!(std::fs::read_to_string(d.join(format!("w{i}.txt"))).unwrap(), format!("{i}"));
            assert!(d.join(format!("sub{}/w{i}.txt", i % 2)).is_file());
        }
        assert_eq!(names(&d).len(), 11, "{:?}", names(&d));
    }

    /// A second writer that cannot get the lock in time is refused, naming the holder's pid; nothing is
    /// written. The lock file goes when the holder ends; a lock file that is the user's file is refused.
    #[test]
    fn a_writer_waiting_too_long_is_refused_naming_the_holder() {
        let base = tempfile::tempdir().unwrap();
        let d = base.path().join("out");
        let held = lock(&d).unwrap();
        let files = [GeneratedFile::new("a.txt", "a")];
        let started = std::time::Instant::now();
        let e = write_waiting(&d, &files, &mut |_| Ok(()), Duration::from_millis(300)).unwrap_err().to_string();
        assert!(started.elapsed() >= Duration::from_millis(300), "it did not wait");
        let pid = format!("pid {}", std::process::id());
        assert!(e.contains("another synth process") && e.contains(&pid), "{e}");
        assert!(!d.join("a.txt").exists());
        drop(held);
        assert!(!d.exists(), "the lock of a writer that wrote nothing leaves nothing");
        write_all(&d, &files).unwrap();
        assert_eq!(names(&d), ["a.txt"]);
        std::fs::write(d.join(staging::LOCK_NAME), "my notes").unwrap();
        let e = write_all(&d, &[GeneratedFile::new("a.txt", "b")]).unwrap_err().to_string();
        assert!(e.contains("is in the way"), "{e}");
        assert_eq!(std::fs::read_to_string(d.join(staging::LOCK_NAME)).unwrap(), "my notes");
    }

    /// Files named one by one in two directories are one transaction: stopped between the renames, the
    /// next writer of either directory finishes it.
    #[test]
    fn named_files_in_two_directories_are_one_transaction() {
        let base = tempfile::tempdir().unwrap();
        let (a, b) = (base.path().join("a"), base.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        for (at, next) in [(Step::Staged, &b), (Step::PartRenamed, &b), (Step::PartRenamed, &a), (Step::Committed, &a)]
        {
            std::fs::write(a.join("x.csv"), "old").unwrap();
            std::fs::write(b.join("y.svg"), "old").unwrap();
            std::fs::write(b.join("y.png"), "old").unwrap();
            let files = [
                (a.join("x.csv"), b"new".to_vec()),
                (b.join("y.svg"), b"new".to_vec()),
                (b.join("y.png"), b"new".to_vec()),
            ];
            assert!(write_named(&files, &mut || Ok(()), &mut stop_at(at)).is_err());
            // The next writer of one of the two directories.
            write_named(&[(next.join("z"), b"z".to_vec())], &mut || Ok(()), &mut |_| Ok(())).unwrap();
            let want: &[u8] = if at == Step::Staged { b"old" } else { b"new" };
            for f in [a.join("x.csv"), b.join("y.svg"), b.join("y.png")] {
                assert_eq!(std::fs::read(&f).unwrap(), want, "{} after stopping at {at:?}", f.display());
            }
            assert_eq!(leftovers(next), Vec::<String>::new());
            // The other directory's leftovers go with its next writer.
            let other = if next == &a { &b } else { &a };
            write_named(&[(other.join("z"), b"z".to_vec())], &mut || Ok(()), &mut |_| Ok(())).unwrap();
            assert_eq!(leftovers(other), Vec::<String>::new());
            assert_eq!(leftovers(next), Vec::<String>::new());
        }
        // An error before the commit (a stream that cannot be written) changes no file and leaves nothing.
        let files = [(a.join("x.csv"), b"newer".to_vec()), (b.join("y.svg"), b"newer".to_vec())];
        assert!(write_named(&files, &mut || anyhow::bail!("no reader"), &mut |_| Ok(())).is_err());
        assert_eq!(std::fs::read(a.join("x.csv")).unwrap(), b"new");
        assert_eq!((leftovers(&a), leftovers(&b)), (vec![], vec![]));
    }

    /// A symbolic link at a subdirectory a file is written into is refused, naming it: the file would land
    /// outside the directory. Nothing is written, the link and what it points to are untouched.
    #[test]
    fn a_link_on_the_way_to_a_file_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let (d, elsewhere) = (base.path().join("ud7"), base.path().join("elsewhere"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, d.join("aiter")).unwrap();
        let files = vec![GeneratedFile::new("rule.json", "{}"), GeneratedFile::new("aiter/x.patch", "patch")];
        let e = write_all(&d, &files).unwrap_err().to_string();
        assert!(e.contains(&format!("{} is a symbolic link", d.join("aiter").display())), "{e}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "nothing is written through the link");
        assert!(!d.join("rule.json").exists());
        assert!(std::fs::symlink_metadata(d.join("aiter")).unwrap().file_type().is_symlink());
        // A link at an output file's own name is replaced by the file, not followed.
        std::fs::remove_file(d.join("aiter")).unwrap();
        std::fs::write(elsewhere.join("target.json"), "theirs").unwrap();
        std::os::unix::fs::symlink(elsewhere.join("target.json"), d.join("rule.json")).unwrap();
        write_all(&d, &files).unwrap();
        assert_eq!(std::fs::read_to_string(elsewhere.join("target.json")).unwrap(), "theirs");
        assert_eq!(std::fs::read_to_string(d.join("rule.json")).unwrap(), "{}");
    }

    #[test]
    fn modes_follow_the_umask_and_replaced_files_keep_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("kept.h"), "old").unwrap();
        std::fs::set_permissions(d.join("kept.h"), std::fs::Permissions::from_mode(0o640)).unwrap();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o751)).unwrap();
        // What this process's umask gives a new file.
        std::fs::write(d.join("probe"), "").unwrap();
        let umask_mode = mode(&d.join("probe"));
        write_all(d, &[GeneratedFile::new("kept.h", "new"), GeneratedFile::new("new.rs", "x")]).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("kept.h")).unwrap(), "new");
        assert_eq!(mode(&d.join("kept.h")), 0o640);
        assert_eq!(mode(&d.join("new.rs")), umask_mode);
        assert_ne!(mode(&d.join("new.rs")), 0o600, "not tempfile's private mode (umask {umask_mode:o})");
        assert_eq!(mode(d), 0o751);
    }

    /// Something other than a file at an output's name: a FIFO would block the read (and replacing it is
    /// never what was meant): one error naming it, nothing written.
    #[test]
    fn a_fifo_at_an_output_name_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("out");
        std::fs::create_dir(&d).unwrap();
        let fifo = std::ffi::CString::new(d.join("rule.json").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let files = vec![GeneratedFile::new("a.txt", "a"), GeneratedFile::new("rule.json", "{}")];
        let e = write_all(&d, &files).unwrap_err().to_string();
        assert!(e.contains("rule.json") && e.contains("FIFO") && e.contains("in the way"), "{e}");
        assert!(!d.join("a.txt").exists());
        assert!(std::fs::symlink_metadata(d.join("rule.json")).unwrap().file_type().is_fifo());
        // A FIFO at the lock's name is refused too, never opened for reading.
        std::fs::remove_file(d.join("rule.json")).unwrap();
        let lock = std::ffi::CString::new(d.join(staging::LOCK_NAME).to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(lock.as_ptr(), 0o644) }, 0);
        let e = write_all(&d, &files).unwrap_err().to_string();
        assert!(e.contains("FIFO") && e.contains(staging::LOCK_NAME), "{e}");
        assert!(!d.join("a.txt").exists());
    }

    /// A directory whose name is at the file system's limit is written, whether it exists or not.
    #[test]
    fn a_directory_with_a_name_near_the_limit_is_written() {
        let base = tempfile::tempdir().unwrap();
        let d = base.path().join("d".repeat(255));
        write_all(&d, &[GeneratedFile::new("a.txt", "one")]).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("a.txt")).unwrap(), "one");
        let name = "n".repeat(255);
        write_all(&d, &[GeneratedFile::new("a.txt", "two"), GeneratedFile::new(&name, "b")]).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("a.txt")).unwrap(), "two");
        assert_eq!(names(&d), vec!["a.txt".to_string(), name]);
        assert_eq!(names(base.path()), vec!["d".repeat(255)], "nothing left beside it");
    }
}
