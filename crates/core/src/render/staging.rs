//! The on-disk protocol of an output directory's transaction ([`super::outdir`]): the lock, the staging
//! directories, the commit marker, and recovery from a writer that died.
//!
//! Inside a directory `D` that is written:
//! - `D/.synth.lock`: an exclusive `flock` on it serializes the writers of `D`; it holds `pid <id>` of the
//!   holder and is removed when the writer ends (a writer that locked a lock file just removed locks the one
//!   the path names again);
//! - `D/.synth-stage-<pid>-<n>/`: one transaction's part in `D`: `tree/` holds every new file under its
//!   name in `D` (subdirectories `D` lacks included), `files.json` lists the names; a part in another
//!   directory of the same transaction (the files `compare --csv A/x.csv --svg B/y.svg` names) holds
//!   `primary`, the path of the transaction's first part;
//! - `commit`, in the first part only, written (synced, then renamed into place) once every part is staged
//!   and synced: from then on the transaction is done, and what is left is moving the files into place.
//!
//! The next writer of `D` (holding its lock) recovers every staging directory it finds there: one whose
//! transaction has its `commit` is rolled forward (its files moved into place, those of its other parts
//! too), any other is deleted. So a signal or a crash at any step leaves the old files or, after the next
//! write, the new ones.

use std::fs::File;
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::file::GeneratedFile;

/// The lock file inside an output directory.
pub const LOCK_NAME: &str = ".synth.lock";
/// The prefix of the staging directories inside an output directory (`<prefix><pid>-<n>`).
pub const STAGE_PREFIX: &str = ".synth-stage-";
const TREE: &str = "tree";
const FILES: &str = "files.json";
const COMMIT: &str = "commit";
const PRIMARY: &str = "primary";

/// How long a writer waits for the writer holding the lock before it gives up, naming it.
pub const LOCK_WAIT: Duration = Duration::from_secs(30);

/// Where a transaction may be stopped (by a test standing in for a signal: the staging directories and
/// the lock file stay as a killed process leaves them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Every new file is staged and synced; nothing in the target directory changed.
    Staged,
    /// The commit marker is written; no file is in place yet.
    Committed,
    /// The first file is in place, the others are not.
    PartRenamed,
    /// Every file is in place; the staging directories are not removed yet.
    Renamed,
}

/// The lock of one output directory, held while this value lives (the OS releases it when the process
/// ends however it ends). Dropping it removes the lock file, and the directories created for it that are
/// still empty (a writer that wrote nothing leaves nothing behind).
pub struct DirLock {
    dir: PathBuf,
    file: Option<File>,
    /// Whether the lock file is this writer's to remove (not a file of the user's at its name).
    owned: bool,
    created: Vec<PathBuf>,
}

impl DirLock {
    /// The locked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        if self.owned {
            let _ = std::fs::remove_file(self.dir.join(LOCK_NAME));
        }
        drop(self.file.take());
        for d in self.created.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Creates `dir` and its missing parents; returns those created, outermost first.
fn create_missing(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let missing: Vec<&Path> = dir.ancestors().take_while(|d| std::fs::symlink_metadata(d).is_err()).collect();
    let mut created = Vec::new();
    for d in missing.into_iter().rev() {
        match std::fs::create_dir(d) {
            Ok(()) => created.push(d.to_path_buf()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(created)
}

/// Opens (creating) the lock file without following a link and without waiting on a FIFO; anything but a
/// regular file there is an error naming it.
fn open_lock(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                std::io::Error::other("a symbolic link is in the way")
            } else {
                e
            }
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other(format!("{} is in the way", synth_base::paths::file_kind(&meta))));
    }
    Ok(file)
}

/// Whether the open `file` is the file `path` names now.
fn names_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Takes the lock of `dir` (creating `dir` and its parents when missing), waiting up to `wait` for another
/// writer; then it is refused with an error naming that writer's process id.
pub fn lock(dir: &Path, wait: Duration) -> anyhow::Result<DirLock> {
    let deadline = Instant::now() + wait;
    let path = dir.join(LOCK_NAME);
    // Not locked yet: on an error, its drop removes the directories created for it.
    let mut lock = DirLock { dir: dir.to_path_buf(), file: None, owned: false, created: Vec::new() };
    loop {
        lock.created.extend(create_missing(dir).with_context(|| format!("cannot create {}", dir.display()))?);
        let file = match open_lock(&path) {
            Ok(f) => f,
            // The directory was removed meanwhile by a writer that created it and wrote nothing.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && Instant::now() < deadline => continue,
            Err(e) => bail!("cannot open the lock file {}: {e}", path.display()),
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(std::fs::TryLockError::WouldBlock) => bail!(
                "cannot write into {}: another synth process ({}) is writing into it (it holds {}); wait for it \
                 to finish, or choose another output directory (nothing was written)",
                dir.display(),
                holder(&file),
                path.display()
            ),
            Err(std::fs::TryLockError::Error(e)) => bail!("cannot lock {}: {e}", path.display()),
        }
        if !names_file(&file, &path) {
            if Instant::now() >= deadline {
                bail!("cannot lock {}: the lock file keeps being replaced", path.display());
            }
            continue;
        }
        lock.file = Some(file);
        claim(&mut lock, &path)?;
        return Ok(lock);
    }
}

/// Who holds a lock file, as it says (`pid <id>`).
fn holder(file: &File) -> String {
    let mut text = String::new();
    let _ = file.take(256).read_to_string(&mut text);
    let text = text.trim();
    if text.is_empty() {
        "process id not recorded yet".to_string()
    } else {
        synth_base::sanitize::shown(text)
    }
}

/// Records this process in the lock file, after checking it is one (empty or `pid ...`), not a file of
/// the user's at the lock's name.
fn claim(lock: &mut DirLock, path: &Path) -> anyhow::Result<()> {
    let mut file = lock.file.as_ref().expect("held");
    let mut head = Vec::new();
    file.take(64).read_to_end(&mut head)?;
    if !head.is_empty() && !head.starts_with(b"pid ") {
        bail!(
            "{} is in the way: the output directory's lock goes there, and it holds something else (not the \
             `pid ...` line synth writes); move it away (nothing was written)",
            path.display()
        );
    }
    lock.owned = true;
    file.seek(std::io::SeekFrom::Start(0))?;
    file.set_len(0)?;
    writeln!(file, "pid {}", std::process::id())?;
    Ok(())
}

/// Whether `name` is a staging directory's name (`<prefix><pid>-<n>`).
fn is_stage_name(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    name.strip_prefix(STAGE_PREFIX).and_then(|r| r.split_once('-')).is_some_and(|(p, n)| digits(p) && digits(n))
}

/// The staging directories in `dir` (directories of the staging name, links never followed).
fn stages_in(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => bail!("cannot list {}: {e}", dir.display()),
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e.with_context(|| format!("cannot list {}", dir.display()))?;
        if is_stage_name(&e.file_name().to_string_lossy()) && e.file_type().is_ok_and(|t| t.is_dir()) {
            out.push(e.path());
        }
    }
    out.sort();
    Ok(out)
}

/// Whether `dir` holds a staging directory (an interrupted transaction to recover).
pub fn has_stages(dir: &Path) -> bool {
    stages_in(dir).is_ok_and(|s| !s.is_empty())
}

/// Recovers every transaction a dead writer left in `dir` (see the module docs); the caller holds the lock.
pub fn recover(dir: &Path) -> anyhow::Result<()> {
    for stage in stages_in(dir)? {
        recover_stage(&stage).with_context(|| {
            format!("cannot finish the interrupted write of {} (staged in {})", dir.display(), stage.display())
        })?;
    }
    Ok(())
}

fn is_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
}

fn recover_stage(stage: &Path) -> anyhow::Result<()> {
    if is_file(&stage.join(COMMIT)) {
        for part in other_parts(stage)? {
            roll_forward(&part, &mut || Ok(()))?;
            remove_stage(&part)?;
        }
        roll_forward(stage, &mut || Ok(()))?;
    } else if let Some(primary) = primary_of(stage) {
        if is_file(&primary.join(COMMIT)) {
            roll_forward(stage, &mut || Ok(()))?;
        }
    }
    remove_stage(stage)
}

fn remove_stage(stage: &Path) -> anyhow::Result<()> {
    match std::fs::remove_dir_all(stage) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => bail!("cannot remove {}: {e}", stage.display()),
    }
}

/// The first part of the transaction a part in another directory belongs to.
fn primary_of(stage: &Path) -> Option<PathBuf> {
    let text = std::fs::read(stage.join(PRIMARY)).ok()?;
    use std::os::unix::ffi::OsStrExt;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(&text)))
}

/// The other parts a committed first part lists, each checked to be a staging directory that names it.
fn other_parts(stage: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let text = read_small(&stage.join(COMMIT))?;
    let listed: Vec<Vec<u8>> =
        serde_json::from_str(&text).with_context(|| format!("{}", stage.join(COMMIT).display()))?;
    use std::os::unix::ffi::OsStrExt;
    Ok(listed
        .iter()
        .map(|p| PathBuf::from(std::ffi::OsStr::from_bytes(p)))
        .filter(|p| p.file_name().is_some_and(|n| is_stage_name(&n.to_string_lossy())))
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .filter(|p| primary_of(p).as_deref() == Some(stage))
        .collect())
}

fn read_small(path: &Path) -> anyhow::Result<String> {
    synth_base::input::read_text_capped(path, synth_base::input::MAX_SPEC_BYTES, "staging list")
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))
}

/// Moves every file still staged in `stage` into place in its parent directory, calling `moved` after
/// each move. A subdirectory the target lacks is moved whole (with every file staged under it), never
/// over a directory that appeared meanwhile; an existing file is replaced.
fn roll_forward(stage: &Path, moved: &mut dyn FnMut() -> anyhow::Result<()>) -> anyhow::Result<()> {
    let target = stage.parent().expect("a staging directory is inside its target");
    let names: Vec<String> = serde_json::from_str(&read_small(&stage.join(FILES))?)
        .with_context(|| format!("{}", stage.join(FILES).display()))?;
    let tree = stage.join(TREE);
    for name in &names {
        let parts: Vec<Component> = Path::new(name).components().collect();
        if parts.is_empty() || !parts.iter().all(|c| matches!(c, Component::Normal(_))) {
            bail!("{}: {name:?} is not a name inside {}", stage.join(FILES).display(), target.display());
        }
        if !is_file(&tree.join(name)) {
            continue;
        }
        move_one(&tree, target, &parts)?;
        moved()?;
    }
    Ok(())
}

/// Moves the staged file `parts` (or the outermost directory on its way that `target` lacks) into place.
fn move_one(tree: &Path, target: &Path, parts: &[Component]) -> anyhow::Result<()> {
    let mut rel = PathBuf::new();
    for part in &parts[..parts.len() - 1] {
        rel.push(part);
        let at = target.join(&rel);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(m) => bail!("cannot write into {}: {} is in the way", at.display(), synth_base::paths::file_kind(&m)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                rename_noreplace(&tree.join(&rel), &at)
                    .with_context(|| format!("cannot move the new directory {} into place", at.display()))?;
                sync_dir(at.parent().unwrap_or(target));
                return Ok(());
            }
            Err(e) => bail!("cannot read {}: {e}", at.display()),
        }
    }
    let name: PathBuf = parts.iter().collect();
    let to = target.join(&name);
    std::fs::rename(tree.join(&name), &to)
        .with_context(|| format!("cannot move the new {} into place", to.display()))?;
    sync_dir(to.parent().unwrap_or(target));
    Ok(())
}

/// Renames `from` to `to` unless something exists at `to`.
#[cfg(target_os = "linux")]
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let a = std::ffi::CString::new(from.as_os_str().as_bytes())?;
    let b = std::ffi::CString::new(to.as_os_str().as_bytes())?;
    // SAFETY: both are valid NUL-terminated paths; renameat2 reads them and nothing else.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    // A file system without the flag: check, then rename (a directory appearing in between is not replaced
    // unless it is empty, which rename(2) allows).
    if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
        if std::fs::symlink_metadata(to).is_ok() {
            return Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists));
        }
        return std::fs::rename(from, to);
    }
    Err(e)
}

#[cfg(not(target_os = "linux"))]
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    if std::fs::symlink_metadata(to).is_ok() {
        return Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists));
    }
    std::fs::rename(from, to)
}

/// Writes `bytes` to a new file at `path` and syncs it to disk.
fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// Syncs a directory's entries to disk (best effort: not every file system syncs a directory).
fn sync_dir(path: &Path) {
    if let Ok(f) = File::open(path) {
        let _ = f.sync_all();
    }
}

/// One directory's share of a transaction: the files (names inside `target`) that change there.
pub struct Part<'a> {
    /// The directory, links resolved; the caller holds its lock.
    pub target: &'a Path,
    pub files: Vec<&'a GeneratedFile>,
}

/// The staging directories of a transaction that is not committed: removed when dropped unless disarmed.
struct Stages(Vec<PathBuf>, bool);

impl Drop for Stages {
    fn drop(&mut self) {
        if self.1 {
            for s in self.0.iter().rev() {
                let _ = std::fs::remove_dir_all(s);
            }
        }
    }
}

/// Commits `parts` as one transaction (see the module docs): stages and syncs every file, calls
/// `before_commit` (its error undoes the transaction), writes the commit marker, moves every file into
/// place and removes the staging directories. `stop` is called at each [`Step`]; its error leaves the
/// transaction as a killed process would, for the next writer to recover.
pub fn commit(
    parts: &[Part],
    before_commit: &mut dyn FnMut() -> anyhow::Result<()>,
    stop: &mut dyn FnMut(Step) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut stages = Stages(Vec::new(), true);
    for part in parts {
        let primary = stages.0.first().cloned();
        let stage = create_stage(part.target)?;
        stages.0.push(stage.clone());
        stage_part(&stage, primary.as_deref(), part)?;
    }
    let Some(primary) = stages.0.first().cloned() else { return before_commit() };
    if let Err(e) = stop(Step::Staged) {
        stages.1 = false;
        return Err(e);
    }
    before_commit()?;
    write_marker(&primary, &stages.0[1..]).with_context(|| format!("cannot commit {}", primary.display()))?;
    stages.1 = false;
    stop(Step::Committed)?;
    let mut first = true;
    for stage in &stages.0 {
        roll_forward(stage, &mut || if std::mem::take(&mut first) { stop(Step::PartRenamed) } else { Ok(()) })
            .with_context(|| {
                format!("the files not in place yet are staged in {}; the next write there finishes", stage.display())
            })?;
    }
    stop(Step::Renamed)?;
    for stage in stages.0.iter().skip(1).chain(std::iter::once(&primary)) {
        remove_stage(stage)?;
    }
    Ok(())
}

/// A new staging directory `<prefix><pid>-<n>` in `target`.
fn create_stage(target: &Path) -> anyhow::Result<PathBuf> {
    for n in 0..1000u32 {
        let path = target.join(format!("{STAGE_PREFIX}{}-{n}", std::process::id()));
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => bail!("cannot create a staging directory in {}: {e}", target.display()),
        }
    }
    bail!("cannot create a staging directory in {}: every name is taken", target.display())
}

/// Stages the files of `part` in `stage` (each with the mode of the file it replaces, else the umask's).
fn stage_part(stage: &Path, primary: Option<&Path>, part: &Part) -> anyhow::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    if let Some(p) = primary {
        write_synced(&stage.join(PRIMARY), p.as_os_str().as_bytes())
            .with_context(|| format!("cannot write into {}", stage.display()))?;
    }
    let tree = stage.join(TREE);
    let mut dirs = std::collections::BTreeSet::from([tree.clone()]);
    std::fs::create_dir(&tree).with_context(|| format!("cannot write into {}", stage.display()))?;
    for file in &part.files {
        let staged = tree.join(&file.name);
        let shown = part.target.join(&file.name);
        let parent = staged.parent().expect("inside the tree");
        std::fs::create_dir_all(parent).with_context(|| format!("cannot write {}", shown.display()))?;
        dirs.insert(parent.to_path_buf());
        write_synced(&staged, file.contents.as_bytes())
            .and_then(|()| match std::fs::metadata(&shown) {
                Ok(meta) if meta.is_file() => std::fs::set_permissions(&staged, meta.permissions()),
                _ => Ok(()),
            })
            .with_context(|| format!("cannot write {}", shown.display()))?;
    }
    let names: Vec<&str> = part.files.iter().map(|f| f.name.as_str()).collect();
    write_synced(&stage.join(FILES), serde_json::to_string(&names).expect("names serialize").as_bytes())
        .with_context(|| format!("cannot write into {}", stage.display()))?;
    for d in dirs.iter().rev() {
        sync_dir(d);
    }
    sync_dir(stage);
    Ok(())
}

/// Writes the commit marker into the first part: synced under a temporary name, then renamed, so it
/// exists only whole.
fn write_marker(primary: &Path, others: &[PathBuf]) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let tmp = primary.join(format!("{COMMIT}.tmp"));
    let others: Vec<&[u8]> = others.iter().map(|p| p.as_os_str().as_bytes()).collect();
    write_synced(&tmp, serde_json::to_string(&others).expect("bytes serialize").as_bytes())?;
    std::fs::rename(&tmp, primary.join(COMMIT))?;
    sync_dir(primary);
    Ok(())
}
