//! All-or-nothing writes of an output directory.
//!
//! Every file of one run goes into one transaction: a staging directory beside the target directory `D`
//! (same parent, so the same file system; named `.<D>.synth-<pid>-<n>`) receives a replica of `D` — every
//! entry hard-linked, so nothing of `D` is read twice or changed —
//! and the new contents of the files that change (subdirectories such as `aiter/` included). Only when all
//! of them were written completely are the two directories exchanged in one `renameat2(RENAME_EXCHANGE)`
//! (a new `D` is renamed into place), and the replica of the old state is deleted. A failure before the
//! exchange leaves `D` exactly as it was; a signal at any moment leaves either the old or the new `D`
//! (at worst a hidden staging directory beside it, which the next run of the same directory removes).
//! Where the exchange is not possible — not Linux or a file system without it, `D` a mount point (a bind
//! mount, a container volume: `EBUSY`, `EXDEV`), a parent where a staging directory cannot be created
//! (`EACCES`, `EPERM`: `D` writable inside a read-only directory), `D` holding what a replica cannot
//! reproduce exactly (a mount point inside it, a subdirectory — or `D` itself — of another owner or group
//! than a directory this process creates, an entry that cannot be hard-linked), or `D` the working directory or one
//! containing it (exchanging it would leave this process, and the shell that started it, in a deleted
//! directory) — the files are staged inside `D` itself instead: a hidden `.synth-<pid>-<n>` subdirectory
//! receives every changed file, each written and synced (any failure removes it and leaves `D` unchanged),
//! and only then are they renamed into place one by one (each rename atomic; a signal in the middle of the
//! renames leaves some files new and the others old).
//!
//! A symbolic link at a subdirectory of `D` that a file is written into (`D/aiter` → elsewhere) is refused
//! with an error naming it, before anything is written: output never goes through a link outside the
//! directory the user named. (A link at an output file's own name is replaced by the file, not followed.)
//!
//! New files get the mode the process umask gives (`0666 & !umask`, as any file a program creates); a
//! file that is replaced keeps the mode it had, and `D` keeps its own.

use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context};

use super::file::GeneratedFile;

/// Where [`write_all_with`] may be stopped (by a test standing in for a signal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Every new file is in the staging directory; `D` is unchanged.
    Staged,
    /// `D` holds the new state; the replica of the old one is not deleted yet.
    Swapped,
}

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
    write_all_seamed(dir, files, stop, &Seams::REAL)
}

/// The system calls a test replaces to stand in for a file system that refuses them.
struct Seams {
    /// Exchanges two directories ([`exchange`]).
    exchange: fn(&Path, &Path) -> std::io::Result<()>,
    /// Creates the staging directory beside the target.
    create_beside: fn(&Path) -> std::io::Result<()>,
    /// Hard-links an entry of the target into the replica.
    link: fn(&Path, &Path) -> std::io::Result<()>,
}

impl Seams {
    const REAL: Seams =
        Seams { exchange, create_beside: |p| std::fs::create_dir(p), link: |a, b| std::fs::hard_link(a, b) };
}

fn write_all_seamed(
    dir: &Path,
    files: &[GeneratedFile],
    stop: &mut dyn FnMut(Step) -> anyhow::Result<()>,
    seams: &Seams,
) -> anyhow::Result<Vec<PathBuf>> {
    for f in files {
        check_name(&f.name)?;
    }
    for f in files {
        check_no_link(dir, &f.name)?;
    }
    let paths: Vec<PathBuf> = files.iter().map(|f| dir.join(&f.name)).collect();
    let mut changed = Vec::new();
    for (file, path) in files.iter().zip(&paths) {
        if path.is_dir() {
            bail!("cannot write {}: a directory is in the way", path.display());
        }
        match existing_contents(path) {
            Ok(Some(bytes)) if bytes == file.contents.as_bytes() => {}
            Ok(_) => changed.push(file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.kind() == std::io::ErrorKind::NotADirectory => {
                changed.push(file)
            }
            Err(e) => bail!("cannot write {}: {e}", path.display()),
        }
    }
    if changed.is_empty() {
        return Ok(paths);
    }
    let target = real_target(dir)?;
    let existed = target.is_dir();
    if existed && cannot_exchange(&target) {
        write_in_place(dir, &target, &changed, stop)?;
        return Ok(paths);
    }
    remove_stale_staging(&target);
    let staging = match Staging::create(&target, seams.create_beside) {
        Ok(s) => s,
        Err(e) if existed && matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM | libc::EROFS)) => {
            write_in_place(dir, &target, &changed, stop)?;
            return Ok(paths);
        }
        // A name within the file system's limit whose staging name (`.<D>.synth-<pid>-<n>`) is not: the
        // files are staged inside `D` (created empty first when new; removed again if the write fails).
        Err(e) if e.raw_os_error() == Some(libc::ENAMETOOLONG) => {
            if !existed {
                std::fs::create_dir(&target).with_context(|| format!("cannot create {}", target.display()))?;
            }
            let written = write_in_place(dir, &target, &changed, stop);
            if written.is_err() && !existed {
                let _ = std::fs::remove_dir(&target);
            }
            written?;
            return Ok(paths);
        }
        Err(e) => {
            bail!("cannot create a staging directory in {}: {e}", target.parent().unwrap_or(Path::new("/")).display())
        }
    };
    if existed {
        let exact = same_owner(&target, &staging.path)
            && replicate(&target, &staging.path, seams.link)
                .with_context(|| format!("cannot stage the new files of {}", dir.display()))?;
        if !exact {
            drop(staging);
            write_in_place(dir, &target, &changed, stop)?;
            return Ok(paths);
        }
    }
    for file in &changed {
        stage_file(&staging.path, &target, file)
            .with_context(|| format!("cannot write {}", dir.join(&file.name).display()))?;
    }
    if existed {
        let meta = std::fs::metadata(&target).with_context(|| format!("cannot read {}", target.display()))?;
        std::fs::set_permissions(&staging.path, meta.permissions())
            .with_context(|| format!("cannot set the mode of {}", target.display()))?;
    }
    stop(Step::Staged)?;
    if !existed {
        std::fs::rename(&staging.path, &target)
            .with_context(|| format!("cannot move the new {} into place", target.display()))?;
        staging.disarm();
        stop(Step::Swapped)?;
        return Ok(paths);
    }
    match (seams.exchange)(&staging.path, &target) {
        Ok(()) => stop(Step::Swapped)?,
        Err(e) if exchange_unavailable(&e) => {
            drop(staging);
            write_in_place(dir, &target, &changed, stop)?;
        }
        Err(e) => bail!("cannot move the new {} into place: {e}", target.display()),
    }
    Ok(paths)
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
            crate::paths::file_kind(&meta)
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
                    crate::sanitize::shown(&to),
                    dir.display()
                );
            }
            Ok(_) => {}
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

/// Whether `target` cannot be exchanged with a directory beside it: it is a mount point (another file
/// system than its parent's), or the working directory or one containing it.
fn cannot_exchange(target: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
    let mount = target.parent().is_some_and(|parent| dev(parent) != dev(target));
    mount || std::env::current_dir().is_ok_and(|cwd| cwd.starts_with(target))
}

/// The prefix of the staging directories inside a target ([`write_in_place`]).
const INNER_PREFIX: &str = ".synth-";

/// Writes `changed` into `target` where it cannot be exchanged (see the module docs): every file is first
/// written and synced in a hidden staging directory inside `target` (a failure removes it, `target`
/// unchanged), then renamed into place.
fn write_in_place(
    dir: &Path,
    target: &Path,
    changed: &[&GeneratedFile],
    stop: &mut dyn FnMut(Step) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    remove_stale_in(target, INNER_PREFIX);
    for file in changed {
        clear_way(target, dir, &file.name)?;
    }
    let staging = Staging::create_in(target, INNER_PREFIX, |p| std::fs::create_dir(p))
        .map_err(|e| anyhow::anyhow!("cannot create a staging directory in {}: {e}", target.display()))?;
    for (n, file) in changed.iter().enumerate() {
        let staged = staging.path.join(n.to_string());
        write_synced(&staged, file.contents.as_bytes())
            .and_then(|()| match std::fs::metadata(target.join(&file.name)) {
                Ok(meta) if meta.is_file() => std::fs::set_permissions(&staged, meta.permissions()),
                _ => Ok(()),
            })
            .with_context(|| format!("cannot write {}", dir.join(&file.name).display()))?;
    }
    sync_dir(&staging.path);
    stop(Step::Staged)?;
    for (n, file) in changed.iter().enumerate() {
        let to = target.join(&file.name);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::rename(staging.path.join(n.to_string()), &to)
            .with_context(|| format!("cannot move the new {} into place", to.display()))?;
        if let Some(parent) = to.parent() {
            sync_dir(parent);
        }
    }
    drop(staging);
    stop(Step::Swapped)
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

/// Writes `bytes` to a new file at `path` and syncs it to disk.
fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut f = std::fs::File::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// Syncs a directory's entries to disk (best effort: not every file system syncs a directory).
fn sync_dir(path: &Path) {
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.sync_all();
    }
}

/// A file name must stay inside the output directory: relative, no `..`, no `.`-only name.
fn check_name(name: &str) -> anyhow::Result<()> {
    let p = Path::new(name);
    if name.is_empty() || !p.components().all(|c| matches!(c, Component::Normal(_))) {
        bail!("cannot write {name:?}: a generated file's name must be a relative path inside the output directory");
    }
    Ok(())
}

/// The directory the transaction swaps: `dir` with symbolic links resolved (a link to a directory keeps
/// pointing at the directory it names), created parents included.
fn real_target(dir: &Path) -> anyhow::Result<PathBuf> {
    if dir.exists() {
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
    let (Some(parent), Some(_)) = (abs.parent(), abs.file_name()) else {
        bail!("cannot write into {}: not a directory name", dir.display());
    };
    std::fs::create_dir_all(parent).with_context(|| format!("cannot create directory {}", parent.display()))?;
    let parent = std::fs::canonicalize(parent).with_context(|| format!("cannot read {}", parent.display()))?;
    Ok(parent.join(abs.file_name().expect("checked above")))
}

/// The staging directory of one transaction, deleted when dropped unless it became the target.
struct Staging {
    path: PathBuf,
    armed: std::cell::Cell<bool>,
}

/// The prefix of the staging directories of `target` (hidden, beside it).
fn staging_prefix(target: &Path) -> String {
    format!(".{}.synth-", target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
}

impl Staging {
    /// The staging directory beside `target`.
    fn create(target: &Path, create_dir: fn(&Path) -> std::io::Result<()>) -> std::io::Result<Staging> {
        let parent = target.parent().expect("an absolute directory with a name");
        Staging::create_in(parent, &staging_prefix(target), create_dir)
    }

    /// A new directory `<prefix><pid>-<n>` in `parent`.
    fn create_in(
        parent: &Path,
        prefix: &str,
        create_dir: fn(&Path) -> std::io::Result<()>,
    ) -> std::io::Result<Staging> {
        for n in 0..100u32 {
            let path = parent.join(format!("{prefix}{}-{n}", std::process::id()));
            match create_dir(&path) {
                Ok(()) => return Ok(Staging { path, armed: true.into() }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other("every name is taken"))
    }

    fn disarm(&self) {
        self.armed.set(false);
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if self.armed.get() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Removes staging directories of `target` left by a run that was killed (their process is gone).
fn remove_stale_staging(target: &Path) {
    if let Some(parent) = target.parent() {
        remove_stale_in(parent, &staging_prefix(target));
    }
}

/// Removes the directories `<prefix><pid>-<n>` in `parent` whose process is gone.
fn remove_stale_in(parent: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(prefix) else { continue };
        // Only a name of exactly this tool's form, `<prefix><pid>-<n>`, and only a directory.
        let Some((pid, n)) = rest.split_once('-') else { continue };
        let (Ok(pid), true) = (pid.parse::<u32>(), !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) else {
            continue;
        };
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if pid != std::process::id() && !process_alive(pid) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Whether a process with this id exists.
fn process_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists() || !Path::new("/proc/self").exists()
}

/// Whether two paths have the same owner and group.
fn same_owner(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.uid() == b.uid() && a.gid() == b.gid(),
        _ => false,
    }
}

/// Fills `to` with a replica of `from`: subdirectories recreated (same mode), every other entry
/// hard-linked, symbolic links recreated as links. Returns `false` (and stops) where the replica could not
/// be exact, so the exchange would change something that is not an output file: a subdirectory that is a
/// mount point (deleting the old directory would empty it), one whose owner or group a recreated
/// directory would not have (another user's directory in a shared one), or an entry that cannot be
/// hard-linked (a copy would get this process's owner, and a FIFO or device would not copy at all).
fn replicate(from: &Path, to: &Path, link: fn(&Path, &Path) -> std::io::Result<()>) -> anyhow::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(from).with_context(|| format!("cannot read {}", from.display()))?.dev();
    for entry in std::fs::read_dir(from).with_context(|| format!("cannot list {}", from.display()))? {
        let entry = entry.with_context(|| format!("cannot list {}", from.display()))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().with_context(|| format!("cannot read {}", src.display()))?;
        if kind.is_dir() {
            let meta = std::fs::metadata(&src).with_context(|| format!("cannot read {}", src.display()))?;
            if meta.dev() != dev {
                return Ok(false);
            }
            std::fs::create_dir(&dst).with_context(|| format!("cannot create {}", dst.display()))?;
            if !same_owner(&src, &dst) || !replicate(&src, &dst, link)? {
                return Ok(false);
            }
            std::fs::set_permissions(&dst, meta.permissions())
                .with_context(|| format!("cannot set the mode of {}", dst.display()))?;
        } else if kind.is_symlink() {
            let link = std::fs::read_link(&src).with_context(|| format!("cannot read {}", src.display()))?;
            std::os::unix::fs::symlink(link, &dst).with_context(|| format!("cannot create {}", dst.display()))?;
        } else if link(&src, &dst).is_err() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Writes `file` into the staging directory (its parents created), replacing the replica's link (never
/// writing through it), with the mode of the file it replaces in `target`.
fn stage_file(staging: &Path, target: &Path, file: &GeneratedFile) -> anyhow::Result<()> {
    let staged = staging.join(&file.name);
    if let Some(parent) = staged.parent() {
        std::fs::create_dir_all(parent).map_err(|e| {
            anyhow::anyhow!(
                "a file is in the way of the directory {}: {e}",
                target.join(&file.name).parent().unwrap_or(target).display()
            )
        })?;
    }
    match std::fs::symlink_metadata(&staged) {
        Ok(m) if m.is_dir() => bail!("a directory is in the way"),
        Ok(_) => std::fs::remove_file(&staged)?,
        Err(_) => {}
    }
    // std creates files with 0666 filtered by the umask.
    write_synced(&staged, file.contents.as_bytes())?;
    if let Ok(meta) = std::fs::metadata(target.join(&file.name)) {
        if meta.is_file() {
            std::fs::set_permissions(&staged, meta.permissions())?;
        }
    }
    Ok(())
}

/// Exchanges two directories atomically.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let a = std::ffi::CString::new(a.as_os_str().as_bytes())?;
    let b = std::ffi::CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: both are valid NUL-terminated paths; renameat2 reads them and nothing else.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

/// Whether the exchange failed because the system, the file system or the target does not allow it
/// (a mount point is busy, another file system, a directory that may not be renamed), not because of
/// the files: then the files are written inside the target instead ([`write_in_place`]).
fn exchange_unavailable(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::Unsupported
        || matches!(
            e.raw_os_error(),
            Some(libc::EINVAL | libc::ENOSYS | libc::EXDEV | libc::EBUSY | libc::EPERM | libc::EACCES)
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
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
        let left: Vec<_> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 3, "no staging directory is left behind: {left:?}");
        assert_eq!(siblings(d), vec![d.file_name().unwrap().to_string_lossy().into_owned()]);
        let e = write_all(d, &[GeneratedFile::new("../x", "x")]).unwrap_err().to_string();
        assert!(e.contains("relative path inside the output directory"), "{e}");
    }

    /// The names in the parent of `d` (the staging directories are created there).
    fn siblings(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(&*d.file_name().unwrap().to_string_lossy()))
            .collect();
        v.sort();
        v
    }

    /// Every file under `d` (relative name → contents), links followed.
    fn tree(d: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
        fn walk(root: &Path, d: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
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

    #[test]
    fn a_run_stopped_at_any_step_leaves_the_old_or_the_new_directory() {
        let base = tempfile::tempdir().unwrap();
        let d = base.path().join("out");
        std::fs::create_dir_all(d.join("aiter")).unwrap();
        std::fs::write(d.join("a.txt"), "old a").unwrap();
        std::fs::write(d.join("same.txt"), "same").unwrap();
        std::fs::write(d.join("aiter/p.patch"), "old patch").unwrap();
        std::fs::write(d.join("notes.md"), "the user's own file").unwrap();
        let old = tree(&d);
        let files = vec![
            GeneratedFile::new("a.txt", "new a"),
            GeneratedFile::new("same.txt", "same"),
            GeneratedFile::new("new.txt", "new"),
            GeneratedFile::new("aiter/p.patch", "new patch"),
        ];
        let mut new = old.clone();
        for f in &files {
            new.insert(f.name.clone(), f.contents.as_bytes().to_vec());
        }
        for at in [Step::Staged, Step::Swapped] {
            let err = write_all_with(&d, &files, &mut |s| if s == at { anyhow::bail!("killed") } else { Ok(()) });
            assert!(err.is_err());
            let now = tree(&d);
            let expected = if at == Step::Staged { &old } else { &new };
            assert_eq!(&now, expected, "stopped at {at:?}: the directory is not one run's state");
            if at == Step::Staged {
                assert_eq!(siblings(&d), vec!["out"], "the failed run's staging directory is removed");
            }
        }
        // A staging directory of a killed process is removed by the next run of the same directory.
        let stale = base.path().join(".out.synth-999999999-0");
        std::fs::create_dir(&stale).unwrap();
        write_all(&d, &[GeneratedFile::new("a.txt", "newer a")]).unwrap();
        assert!(!stale.exists());
        assert_eq!(std::fs::read_to_string(d.join("notes.md")).unwrap(), "the user's own file");
        assert_eq!(siblings(&d), vec!["out"]);
    }

    /// A directory the exchange cannot replace — a mount point (`EBUSY`), one in a parent where no staging
    /// directory can be created (`EACCES`), another file system (`EXDEV`) — is written through a staging
    /// directory inside it: all or nothing, the directory itself (its inode) kept.
    #[test]
    fn a_directory_that_cannot_be_exchanged_is_written_in_place_all_or_nothing() {
        use std::os::unix::fs::MetadataExt;
        fn busy(_: &Path, _: &Path) -> std::io::Result<()> {
            Err(std::io::Error::from_raw_os_error(libc::EBUSY))
        }
        fn cross(_: &Path, _: &Path) -> std::io::Result<()> {
            Err(std::io::Error::from_raw_os_error(libc::EXDEV))
        }
        fn denied(_: &Path) -> std::io::Result<()> {
            Err(std::io::Error::from_raw_os_error(libc::EACCES))
        }
        fn unlinkable(_: &Path, _: &Path) -> std::io::Result<()> {
            Err(std::io::Error::from_raw_os_error(libc::EPERM))
        }
        let real = Seams::REAL;
        let seams = [
            Seams { exchange: busy, ..real },
            Seams { exchange: cross, ..real },
            Seams { create_beside: denied, ..real },
            // An entry that cannot be hard-linked (`protected_hardlinks` and another user's file): a copy
            // would change its owner, so the directory is written in place, the user's files untouched.
            Seams { link: unlinkable, ..real },
        ];
        for seam in &seams {
            let base = tempfile::tempdir().unwrap();
            let d = base.path().join("mnt");
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("a.txt"), "old a").unwrap();
            std::fs::write(d.join("notes.md"), "the user's").unwrap();
            std::fs::set_permissions(d.join("a.txt"), std::fs::Permissions::from_mode(0o640)).unwrap();
            let inode = std::fs::metadata(&d).unwrap().ino();
            let notes_inode = std::fs::metadata(d.join("notes.md")).unwrap().ino();
            // A failure while staging: nothing changes, nothing is left behind.
            std::fs::write(d.join("aiter"), "a file where a directory goes").unwrap();
            let files = vec![GeneratedFile::new("a.txt", "new a"), GeneratedFile::new("aiter/p.patch", "patch")];
            let old = tree(&d);
            let e = write_all_seamed(&d, &files, &mut |_| Ok(()), seam).unwrap_err();
            assert!(format!("{e:#}").contains("a file is in the way"), "{e:#}");
            assert_eq!(tree(&d), old);
            // Stopped once every file is staged: still the old state.
            std::fs::remove_file(d.join("aiter")).unwrap();
            let old = tree(&d);
            let stop = &mut |s| if s == Step::Staged { anyhow::bail!("killed") } else { Ok(()) };
            assert!(write_all_seamed(&d, &files, stop, seam).is_err());
            assert_eq!(tree(&d), old);
            // Written: the new files in the same directory, the replaced file's mode kept, no staging left.
            write_all_seamed(&d, &files, &mut |_| Ok(()), seam).unwrap();
            assert_eq!(std::fs::metadata(&d).unwrap().ino(), inode, "the directory itself is kept");
            assert_eq!(std::fs::metadata(d.join("notes.md")).unwrap().ino(), notes_inode, "the user's file is kept");
            assert_eq!(std::fs::read_to_string(d.join("a.txt")).unwrap(), "new a");
            assert_eq!(std::fs::read_to_string(d.join("aiter/p.patch")).unwrap(), "patch");
            assert_eq!(std::fs::read_to_string(d.join("notes.md")).unwrap(), "the user's");
            assert_eq!(mode(&d.join("a.txt")), 0o640);
            let mut names: Vec<String> =
                std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
            names.sort();
            assert_eq!(names, ["a.txt", "aiter", "notes.md"]);
            assert_eq!(siblings(&d), vec!["mnt"]);
        }
    }

    /// The working directory (or a directory containing it) is not exchanged: that would leave this process
    /// and the user's shell in a deleted directory.
    #[test]
    fn the_working_directory_is_never_exchanged() {
        let cwd = std::env::current_dir().unwrap();
        assert!(cannot_exchange(&cwd));
        assert!(cannot_exchange(cwd.parent().unwrap()));
        let other = tempfile::tempdir().unwrap();
        assert!(!cannot_exchange(&std::fs::canonicalize(other.path()).unwrap()));
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
        // What this process's umask gives a new file.
        std::fs::write(d.join("probe"), "").unwrap();
        let umask_mode = mode(&d.join("probe"));
        write_all(d, &[GeneratedFile::new("kept.h", "new"), GeneratedFile::new("new.rs", "x")]).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("kept.h")).unwrap(), "new");
        assert_eq!(mode(&d.join("kept.h")), 0o640);
        assert_eq!(mode(&d.join("new.rs")), umask_mode);
        assert_ne!(mode(&d.join("new.rs")), 0o600, "not tempfile's private mode (umask {umask_mode:o})");
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
    }

    /// A directory whose name fits the file system's limit but whose staging name would not is written
    /// (in place), whether it exists or not.
    #[test]
    fn a_directory_with_a_name_near_the_limit_is_written() {
        let base = tempfile::tempdir().unwrap();
        let d = base.path().join("d".repeat(250));
        write_all(&d, &[GeneratedFile::new("a.txt", "one")]).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("a.txt")).unwrap(), "one");
        write_all(&d, &[GeneratedFile::new("a.txt", "two"), GeneratedFile::new("b.txt", "b")]).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("a.txt")).unwrap(), "two");
        let mut names: Vec<String> = std::fs::read_dir(base.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, vec!["d".repeat(250)], "no staging directory left beside it");
    }
}
