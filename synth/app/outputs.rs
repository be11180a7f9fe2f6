//! Where a command's files go, decided in one place so that no command but the main job touches the
//! committed `generated/`.
//!
//! - `--out DIR` always wins;
//! - the main job with no option that changes its inputs writes (or `--check`s) `generated/` of the
//!   gemm-synth checkout that contains the working directory;
//! - everything else (the main job with other inputs, run outside a checkout, `search`, ...) writes
//!   `./gemm-synth-out/<what>/` under the working directory.
//!
//! Files are written through [`write_files`], the one function every generated file goes through.

use std::path::{Path, PathBuf};

use synth_core::render::writer::GeneratedFile;

/// The directory, under the working directory, for output that is not the committed `generated/`.
pub const LOCAL_OUT: &str = "gemm-synth-out";

/// The gemm-synth checkout containing `dir` (the nearest ancestor with this crate's `Cargo.toml` and a
/// `generated/` directory), if any.
pub fn checkout_containing(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| {
            d.join("generated").is_dir()
                && std::fs::read_to_string(d.join("Cargo.toml"))
                    .is_ok_and(|t| t.lines().any(|l| l.trim() == format!("name = \"{}\"", env!("CARGO_PKG_NAME"))))
        })
        .map(Path::to_path_buf)
}

/// Where the output goes and why (for the terminal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutDir {
    pub dir: PathBuf,
    /// Whether this is the checkout's committed `generated/`.
    pub committed: bool,
}

/// The output directory of a command: `out` when given; `generated/` of the enclosing checkout when
/// `main_job` (the main job with its default inputs); else `./gemm-synth-out/<sub>`.
pub fn out_dir(out: Option<&Path>, main_job: bool, sub: &str) -> anyhow::Result<OutDir> {
    let cwd = std::env::current_dir().map_err(|e| anyhow::anyhow!("cannot read the working directory: {e}"))?;
    if let Some(out) = out {
        let dir = if out.is_absolute() { out.to_path_buf() } else { cwd.join(out) };
        let committed = checkout_containing(&cwd).is_some_and(|root| dir == root.join("generated"));
        return Ok(OutDir { dir, committed });
    }
    if main_job {
        if let Some(root) = checkout_containing(&cwd) {
            return Ok(OutDir { dir: root.join("generated"), committed: true });
        }
    }
    Ok(OutDir { dir: cwd.join(LOCAL_OUT).join(sub), committed: false })
}

/// Writes (or with `check`, compares) `files` in `dir`; see [`synth_core::render::writer::write_files`].
pub fn write_files(dir: &Path, files: &[GeneratedFile], check: bool) -> anyhow::Result<Vec<PathBuf>> {
    synth_core::render::writer::write_files(dir, files, check)
}

/// The files of a synthesized rule, in the order they are listed: the three rendered sources, the rule
/// JSON, `extra`, and the AITER patch in its own subdirectory (one transaction with the rest).
/// The rule as the Python module a runtime that chooses between backends imports (`select_kernel.py`).
pub fn python_file(
    rule: &synth_core::rule::Rule,
    catalog: &synth_core::catalog::Catalog,
    provenance: &synth_core::render::Provenance,
) -> anyhow::Result<GeneratedFile> {
    Ok(GeneratedFile::new(
        synth_core::render::PYTHON_MODULE,
        synth_core::render::render_python(rule, catalog, provenance)?,
    ))
}

pub fn rule_files(
    rule: &synth_core::rule::Rule,
    catalog: &synth_core::catalog::Catalog,
    matrix: &synth_core::table::LatencyMatrix,
    provenance: &synth_core::render::Provenance,
    extra: Vec<GeneratedFile>,
) -> anyhow::Result<Vec<GeneratedFile>> {
    let mut files = synth_core::render::generated_files(rule, catalog, matrix, provenance)?;
    let mut json = synth_core::rule::to_json(rule);
    json.push('\n');
    files.push(GeneratedFile::new(super::shared::RULE_JSON, json));
    files.extend(extra);
    match synth_core::aiter::patch::unroutable(rule) {
        None => files.push(patch_file(synth_core::aiter::render_patch(rule, catalog, provenance)?)),
        // A rule AITER's untuned path cannot run gets a note in place of the patch.
        Some(why) => files.push(GeneratedFile::new(
            format!("{}/{}", synth_core::aiter::GENERATED_SUBDIR, NO_PATCH_NOTE),
            format!(
                "No AITER patch was written for this rule: {why}.\nThe patch routes CK legacy leaves (C++ heuristic) \
                 and triton leaves (AITER's Triton blockscale GEMM); run again with --backends naming only those.\n"
            ),
        )),
    }
    Ok(files)
}

/// The file written in place of the AITER patch for a rule whose leaves AITER cannot run.
pub const NO_PATCH_NOTE: &str = "NO-PATCH.txt";

/// The AITER patch as a file of the output directory (`aiter/<patch>`).
pub fn patch_file(patch: String) -> GeneratedFile {
    GeneratedFile::new(format!("{}/{}", synth_core::aiter::GENERATED_SUBDIR, synth_core::aiter::PATCH_FILE), patch)
}

/// The `run` outputs written as one: `files` (the rendered sources, when they rendered, plus `extra`) and
/// the AITER patch in its own subdirectory, all or nothing in `dir` (one transaction). Returns every path
/// written (or checked). (For commands that render the patch themselves, such as `compress`; the jobs of
/// `run` use [`rule_files`] and [`write_files`].)
#[allow(dead_code)]
pub fn write_run_files(
    dir: &Path,
    rendered: anyhow::Result<Vec<GeneratedFile>>,
    extra: Vec<GeneratedFile>,
    aiter_patch: GeneratedFile,
    check: bool,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = rendered?;
    files.extend(extra);
    let name = format!("{}/{}", synth_core::aiter::GENERATED_SUBDIR, aiter_patch.name);
    files.push(GeneratedFile { name, contents: aiter_patch.contents });
    write_files(dir, &files, check)
}

/// Writes files the user named one by one (`compare --csv/--svg` and the PNG, `drift --report-*`) as one
/// transaction ([`synth_core::render::outdir::write_named`]): every file is staged and synced in a hidden
/// directory inside its target's directory, and only when all of them were are they moved into place; a
/// failure before that changes none of the targets, and a signal while they are moved leaves a commit the
/// next writer of those directories finishes (so no staged file survives a later run). A replaced file
/// keeps its mode; a new one gets the umask's. A target that is a stream — a character device such as
/// `/dev/stdout` or `/dev/null`, or a FIFO a program reads — is written into, never replaced (after every
/// file is staged, before any is moved into place); a socket or block device there is refused.
pub fn write_named_files(files: &[(PathBuf, Vec<u8>)]) -> anyhow::Result<()> {
    write_named_files_with(files, &mut |_| Ok(()))
}

/// [`write_named_files`], calling `stop` at each step of the transaction (a test's stand-in for a signal).
fn write_named_files_with(
    files: &[(PathBuf, Vec<u8>)],
    stop: &mut dyn FnMut(synth_core::render::outdir::Step) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let mut regular = Vec::new();
    let mut streams = Vec::new();
    for (target, bytes) in files {
        if target.is_dir() {
            anyhow::bail!("cannot write {}: a directory is in the way", target.display());
        }
        if let Ok(meta) = std::fs::metadata(target) {
            let t = meta.file_type();
            if t.is_char_device() || t.is_fifo() {
                streams.push((target, bytes));
                continue;
            }
            if !t.is_file() {
                anyhow::bail!(
                    "cannot write {}: it is {}; name a file (or a stream such as /dev/stdout)",
                    target.display(),
                    synth_base::paths::file_kind(&meta)
                );
            }
        }
        regular.push((target.clone(), bytes.clone()));
    }
    let mut write_streams = || -> anyhow::Result<()> {
        for (target, bytes) in &streams {
            write_stream(target, bytes).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", target.display()))?;
        }
        Ok(())
    };
    synth_core::render::outdir::write_named(&regular, &mut write_streams, stop)
}

/// Writes `bytes` into a character device or FIFO; a FIFO no program reads is an error, not a wait.
fn write_stream(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(target).map_err(|e| {
        if e.raw_os_error() == Some(libc::ENXIO) {
            std::io::Error::other("it is a FIFO that no program is reading")
        } else {
            e
        }
    })?;
    synth_base::input::set_blocking(&f)?;
    f.write_all(bytes)?;
    f.flush()
}

/// The files `synth run` reads (option, path), for [`check_out_dir`].
pub fn run_inputs(args: &super::args::RunArgs) -> Vec<(&'static str, PathBuf)> {
    let mut inputs: Vec<(&str, PathBuf)> = args.data.dataset.iter().map(|p| ("--dataset", p.clone())).collect();
    inputs.extend(args.data.model.input_files());
    inputs.extend(args.tuned.iter().map(|p| ("--tuned", p.clone())));
    inputs.extend(args.rule.iter().map(|p| ("--rule", p.clone())));
    inputs.extend(args.manifest.iter().map(|p| ("--manifest", p.clone())));
    inputs.extend(args.tuned_train.train_tuned.iter().map(|p| ("--train-tuned", p.clone())));
    inputs
}

/// One file named on the command line, for [`check_distinct`]: where it resolves (symbolic links and `..`
/// resolved where the file or its directory exists) and, for a file that exists, its device and inode (a
/// hard link is the same file under another name).
struct Identity {
    path: PathBuf,
    inode: Option<(u64, u64)>,
    exists: bool,
}

fn identity(p: &Path) -> Identity {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(p).ok();
    let inode = meta.as_ref().map(|m| (m.dev(), m.ino()));
    let path = std::fs::canonicalize(p).unwrap_or_else(|_| {
        let abs = super::line::absolute(p);
        let abs: PathBuf = abs.components().filter(|c| !matches!(c, std::path::Component::CurDir)).collect();
        match (abs.parent(), abs.file_name()) {
            (Some(dir), Some(name)) => std::fs::canonicalize(dir).map_or_else(|_| abs.clone(), |d| d.join(name)),
            _ => abs,
        }
    });
    Identity { path, inode, exists: meta.is_some() }
}

fn same(a: &Identity, b: &Identity) -> bool {
    a.path == b.path || (a.inode.is_some() && a.inode == b.inode)
}

/// Refuses a command whose outputs would replace one of its inputs or each other: every output path (option,
/// path) must be a file other than every input that exists (the same path once links are resolved, or the
/// same inode) and than every other output. One error naming both options and the path.
pub fn check_distinct<A: AsRef<str>, B: AsRef<str>>(
    inputs: &[(A, PathBuf)],
    outputs: &[(B, PathBuf)],
) -> anyhow::Result<()> {
    check_paths(inputs, outputs, true)
}

/// For a command that writes `files` into the directory `dir` (`--out DIR`): refuses an input that is one of
/// the files it would write there (e.g. `compress --tuned rule.json --out .`, whose generated `rule.json`
/// would replace its input).
pub fn check_out_dir<A: AsRef<str>>(
    dir: &Path,
    files: &[GeneratedFile],
    inputs: &[(A, PathBuf)],
) -> anyhow::Result<()> {
    check_out_dir_as("--out", dir, files, inputs)
}

/// [`check_out_dir`] for a directory given under option `flag` (e.g. `--kit`).
pub fn check_out_dir_as<A: AsRef<str>>(
    flag: &str,
    dir: &Path,
    files: &[GeneratedFile],
    inputs: &[(A, PathBuf)],
) -> anyhow::Result<()> {
    check_not_inside_inputs(flag, dir, &identity(dir), inputs)?;
    let outputs: Vec<(String, PathBuf)> =
        files.iter().map(|f| (format!("{flag} {} (its {})", dir.display(), f.name), dir.join(&f.name))).collect();
    check_paths(inputs, &outputs, false)
}

/// Refuses an output (option `flag`, path `path`, resolved as `at`) inside a directory one of `inputs`
/// names: the next run would read it as one of its inputs.
fn check_not_inside_inputs<A: AsRef<str>>(
    flag: &str,
    path: &Path,
    at: &Identity,
    inputs: &[(A, PathBuf)],
) -> anyhow::Result<()> {
    for (iflag, ipath) in inputs {
        if ipath.is_dir() && at.path.starts_with(identity(ipath).path) {
            anyhow::bail!(
                "{flag} {} is inside the directory {} {} reads: the next run would read it as one of its inputs; \
                 name a path outside {}",
                path.display(),
                iflag.as_ref(),
                ipath.display(),
                ipath.display()
            );
        }
    }
    Ok(())
}

fn check_paths<A: AsRef<str>, B: AsRef<str>>(
    inputs: &[(A, PathBuf)],
    outputs: &[(B, PathBuf)],
    pairwise: bool,
) -> anyhow::Result<()> {
    let ins: Vec<Identity> = inputs.iter().map(|(_, p)| identity(p)).collect();
    let outs: Vec<Identity> = outputs.iter().map(|(_, p)| identity(p)).collect();
    for (o, (oflag, opath)) in outs.iter().zip(outputs) {
        for (i, (iflag, ipath)) in ins.iter().zip(inputs) {
            if i.exists && same(o, i) {
                let real = real_path(ipath);
                let real = if real == ipath.display().to_string() { String::new() } else { format!(" ({real})") };
                anyhow::bail!(
                    "{} {} is the file {} {}{real} reads: writing it would replace that input; name another path \
                     for {}",
                    oflag.as_ref(),
                    opath.display(),
                    iflag.as_ref(),
                    ipath.display(),
                    oflag.as_ref()
                );
            }
        }
    }
    for (o, (oflag, opath)) in outs.iter().zip(outputs) {
        check_not_inside_inputs(oflag.as_ref(), opath, o, inputs)?;
    }
    if pairwise {
        for a in 0..outs.len() {
            for b in 0..a {
                if same(&outs[a], &outs[b]) {
                    let ((aflag, apath), (bflag, bpath)) = (&outputs[a], &outputs[b]);
                    anyhow::bail!(
                        "{} {} and {} {} are the same file ({}): one output would overwrite the other; give each \
                         its own path",
                        bflag.as_ref(),
                        bpath.display(),
                        aflag.as_ref(),
                        apath.display(),
                        outs[a].path.display()
                    );
                }
            }
        }
    }
    Ok(())
}

/// The first lines a `run` prints: its dataset and training set, as the provenance names them.
pub fn run_header(provenance: &synth_core::render::Provenance) -> String {
    format!("dataset:  {}\ntraining: {}\n", provenance.dataset, provenance.training)
}

/// How a `run` ends on the terminal.
pub struct RunEnd<'a> {
    pub target: &'a OutDir,
    /// Whether the inputs were the main job's defaults.
    pub main_job: bool,
    /// Whether `--out` was given.
    pub out_given: bool,
    pub check: bool,
    /// A blank line before the list of files.
    pub blank_line: bool,
    pub started: std::time::Instant,
}

/// Prints `text` followed by what [`write_run_files`] wrote (or found up to date), where and why, and the
/// total time; an error of the write (a stale file under `--check`) fails the command after the text.
pub fn finish_run(mut text: String, written: anyhow::Result<Vec<PathBuf>>, end: &RunEnd) -> anyhow::Result<()> {
    use std::fmt::Write as _;
    let verb = if end.check { "up to date" } else { "written" };
    let error = match written {
        Ok(paths) => {
            if end.blank_line {
                text.push('\n');
            }
            for f in &paths {
                let _ = writeln!(text, "{verb}: {}", real_path(f));
            }
            if !end.target.committed && !end.out_given {
                let why = if end.main_job {
                    "outside a gemm-synth checkout"
                } else {
                    "the inputs differ from the main job's"
                };
                let _ = writeln!(
                    text,
                    "(files in {}: {why}, so no committed generated/ was touched; --out DIR to choose)",
                    real_path(&end.target.dir)
                );
            }
            let _ = writeln!(text, "total {:.2} s", end.started.elapsed().as_secs_f64());
            None
        }
        Err(e) => Some(format!("{e:#}")),
    };
    super::shared::emit(&text)?;
    if let Some(error) = error {
        let hint = if end.check {
            "\nregenerate with `cargo run --release -- run` (same options) and commit the result"
        } else {
            ""
        };
        anyhow::bail!("{error}{hint}");
    }
    Ok(())
}

/// `path` as a real path for the terminal (absolute, symbolic links resolved when it exists).
pub fn real_path(path: &Path) -> String {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_patch_leaves_the_old_rule_and_patch() {
        // The rule files and the AITER patch are one transaction: once, the rule files were written first
        // and a failing patch left the new rule beside the old patch.
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("rule.json"), "old rule").unwrap();
        std::fs::write(d.join(synth_core::aiter::GENERATED_SUBDIR), "a file where the patch directory goes").unwrap();
        let patch = GeneratedFile::new(synth_core::aiter::PATCH_FILE, "new patch");
        let e = write_run_files(d, Ok(vec![GeneratedFile::new("rule.json", "new rule")]), Vec::new(), patch, false);
        assert!(format!("{:#}", e.unwrap_err()).contains("a file is in the way"));
        assert_eq!(std::fs::read_to_string(d.join("rule.json")).unwrap(), "old rule");
        // Fine once the way is clear, the patch in its directory.
        std::fs::remove_file(d.join(synth_core::aiter::GENERATED_SUBDIR)).unwrap();
        let patch = GeneratedFile::new(synth_core::aiter::PATCH_FILE, "new patch");
        let paths = write_run_files(d, Ok(vec![GeneratedFile::new("rule.json", "new rule")]), Vec::new(), patch, false)
            .unwrap();
        assert_eq!(paths[1], d.join(synth_core::aiter::GENERATED_SUBDIR).join(synth_core::aiter::PATCH_FILE));
        assert_eq!(std::fs::read_to_string(&paths[1]).unwrap(), "new patch");
    }

    /// `compare --csv --svg` stopped between its renames (a SIGINT): the next write of that directory
    /// finishes the commit, so the CSV, SVG and PNG are all new, and no staged file is left.
    #[test]
    fn named_files_stopped_between_renames_are_finished_by_the_next_writer() {
        use synth_core::render::outdir::Step;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for name in ["cmp.csv", "cmp.svg", "cmp.png"] {
            std::fs::write(d.join(name), "old").unwrap();
        }
        let files: Vec<(PathBuf, Vec<u8>)> =
            ["cmp.csv", "cmp.svg", "cmp.png"].iter().map(|n| (d.join(n), b"new".to_vec())).collect();
        let stop = &mut |s| if s == Step::PartRenamed { anyhow::bail!("interrupted") } else { Ok(()) };
        assert!(write_named_files_with(&files, stop).is_err());
        assert_eq!(std::fs::read(d.join("cmp.csv")).unwrap(), b"new");
        // The next run writing into the directory (any file) finishes the interrupted one first.
        write_named_files(&[(d.join("other.md"), b"md".to_vec())]).unwrap();
        for name in ["cmp.csv", "cmp.svg", "cmp.png"] {
            assert_eq!(std::fs::read(d.join(name)).unwrap(), b"new", "{name}");
        }
        let mut names: Vec<String> =
            std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        assert_eq!(names, ["cmp.csv", "cmp.png", "cmp.svg", "other.md"], "no staged or lock file is left");
        // Stopped before the commit: the next run removes what was staged; the old files stay.
        let stop = &mut |s| if s == Step::Staged { anyhow::bail!("interrupted") } else { Ok(()) };
        let newer: Vec<(PathBuf, Vec<u8>)> = files.iter().map(|(p, _)| (p.clone(), b"newer".to_vec())).collect();
        assert!(write_named_files_with(&newer, stop).is_err());
        write_named_files(&[(d.join("other.md"), b"md".to_vec())]).unwrap();
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 4);
        assert_eq!(std::fs::read(d.join("cmp.svg")).unwrap(), b"new");
    }

    #[test]
    fn named_files_are_written_all_or_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("a.csv"), "old").unwrap();
        std::fs::create_dir(d.join("b.png")).unwrap();
        let files = vec![(d.join("a.csv"), b"new".to_vec()), (d.join("b.png"), b"png".to_vec())];
        assert!(write_named_files(&files).unwrap_err().to_string().contains("a directory is in the way"));
        assert_eq!(std::fs::read_to_string(d.join("a.csv")).unwrap(), "old");
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 2, "nothing staged is left");
        std::fs::remove_dir(d.join("b.png")).unwrap();
        write_named_files(&files).unwrap();
        assert_eq!(std::fs::read(d.join("b.png")).unwrap(), b"png");
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 2);
    }

    /// Makes a FIFO at `path`.
    fn mkfifo(path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "{}", std::io::Error::last_os_error());
    }

    /// A thread reading `len` bytes from the FIFO at `path` (it opens it first, without waiting for a writer,
    /// and says so on the returned channel's first message).
    fn fifo_reader(path: &Path, len: usize) -> (std::sync::mpsc::Receiver<()>, std::thread::JoinHandle<Vec<u8>>) {
        use std::io::Read as _;
        use std::os::unix::fs::OpenOptionsExt;
        let path = path.to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&path).unwrap();
            tx.send(()).unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            let mut got = Vec::new();
            let mut buf = vec![0u8; 65536];
            while got.len() < len && std::time::Instant::now() < deadline {
                match f.read(&mut buf) {
                    Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                    // No writer yet (0) or nothing to read yet (WouldBlock): try again.
                    Ok(_) => std::thread::sleep(std::time::Duration::from_millis(2)),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(std::time::Duration::from_millis(2))
                    }
                    Err(e) => panic!("reading the FIFO: {e}"),
                }
            }
            got
        });
        (rx, reader)
    }

    fn is_fifo(p: &Path) -> bool {
        use std::os::unix::fs::FileTypeExt;
        std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_fifo())
    }

    #[test]
    fn a_fifo_with_a_reader_gets_the_bytes_and_stays_a_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let fifo = d.join("out.csv");
        mkfifo(&fifo);
        std::fs::write(d.join("b.svg"), "old").unwrap();
        // More than a pipe holds: the writer must wait for the reader, not fail with EAGAIN.
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let (opened, reader) = fifo_reader(&fifo, bytes.len());
        opened.recv().unwrap();
        write_named_files(&[(fifo.clone(), bytes.clone()), (d.join("b.svg"), b"new".to_vec())]).unwrap();
        assert_eq!(reader.join().unwrap(), bytes, "the reader got every byte");
        assert!(is_fifo(&fifo), "the FIFO was replaced by a file");
        assert_eq!(std::fs::read(d.join("b.svg")).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 2, "nothing staged is left");
    }

    #[test]
    fn a_fifo_nobody_reads_is_an_error_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let fifo = d.join("out.csv");
        mkfifo(&fifo);
        std::fs::write(d.join("a.svg"), "old").unwrap();
        // Either order of the two targets: the stream is written after every file is staged, before any is
        // moved into place.
        for files in [
            vec![(d.join("a.svg"), b"new".to_vec()), (fifo.clone(), b"csv".to_vec())],
            vec![(fifo.clone(), b"csv".to_vec()), (d.join("a.svg"), b"new".to_vec())],
        ] {
            let started = std::time::Instant::now();
            let e = format!("{:#}", write_named_files(&files).unwrap_err());
            assert!(e.contains("no program is reading") && e.contains(&fifo.display().to_string()), "{e}");
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "an error, not a wait");
            assert_eq!(std::fs::read_to_string(d.join("a.svg")).unwrap(), "old", "all or nothing");
            assert!(is_fifo(&fifo));
            assert_eq!(std::fs::read_dir(d).unwrap().count(), 2, "nothing staged is left");
        }
    }

    #[test]
    fn dev_null_is_written_into_and_stays_a_device() {
        use std::os::unix::fs::FileTypeExt;
        let null = Path::new("/dev/null");
        let kind = |p: &Path| std::fs::symlink_metadata(p).unwrap().file_type();
        assert!(kind(null).is_char_device());
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("a.csv");
        write_named_files(&[(null.to_path_buf(), b"to nowhere".to_vec()), (other.clone(), b"kept".to_vec())]).unwrap();
        assert!(kind(null).is_char_device(), "/dev/null was replaced");
        assert_eq!(std::fs::read(null).unwrap(), b"", "/dev/null still reads empty");
        assert_eq!(std::fs::read(&other).unwrap(), b"kept");
        let dev = std::fs::read_dir("/dev").unwrap();
        let staged: Vec<_> = dev
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| n.starts_with(".null.synth-"))
            .collect();
        assert!(staged.is_empty(), "staged files in /dev: {staged:?}");
    }

    #[test]
    fn a_socket_at_a_target_is_refused() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let sock = d.join("out.csv");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        std::fs::write(d.join("a.svg"), "old").unwrap();
        let files = vec![(d.join("a.svg"), b"new".to_vec()), (sock.clone(), b"csv".to_vec())];
        let e = format!("{:#}", write_named_files(&files).unwrap_err());
        assert!(e.contains(&format!("cannot write {}: it is a socket", sock.display())), "{e}");
        assert!(std::fs::symlink_metadata(&sock).unwrap().file_type().is_socket(), "the socket was replaced");
        assert_eq!(std::fs::read_to_string(d.join("a.svg")).unwrap(), "old");
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 2, "nothing staged is left");
    }

    #[test]
    fn a_target_with_a_long_name_is_written() {
        // Names of 240 and 250 bytes are valid; the hidden staging name beside them must fit the 255-byte
        // limit too (the long form `.{name}.synth-{pid}-{n}` of a 240-byte name fits only with a process id
        // of at most 5 digits, that of a 250-byte name never).
        for len in [240, 250] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            let name = format!("{}.csv", "n".repeat(len - 4));
            assert_eq!(name.len(), len);
            let long = d.join(&name);
            write_named_files(&[(long.clone(), b"first".to_vec())]).unwrap();
            assert_eq!(std::fs::read(&long).unwrap(), b"first");
            // Replaced too (an existing target), and nothing staged is left.
            write_named_files(&[(long.clone(), b"second".to_vec()), (d.join("b.svg"), b"svg".to_vec())]).unwrap();
            assert_eq!(std::fs::read(&long).unwrap(), b"second");
            let names: Vec<String> =
                std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
            assert_eq!(names.len(), 2, "{names:?}");
        }
    }

    #[test]
    fn an_output_inside_an_input_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("t.csv"), "x").unwrap();
        let inputs = [("--dataset", data.clone())];
        let e = check_distinct(&inputs, &[("--csv", data.join("out.csv"))]).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "--csv {} is inside the directory --dataset {}",
                data.join("out.csv").display(),
                data.display()
            )),
            "{e}"
        );
        // Also when named through `..`, and as the directory the files are written into.
        let back = data.join("../data/out.csv");
        assert!(check_distinct(&inputs, &[("--csv", back)])
            .unwrap_err()
            .to_string()
            .contains("is inside the directory"));
        check_distinct(&inputs, &[("--csv", data.join("../elsewhere.csv"))]).unwrap();
        let files = [GeneratedFile::new("rule.json", "")];
        let e = check_out_dir(&data, &files, &inputs).unwrap_err().to_string();
        assert!(e.contains("is inside the directory --dataset"), "{e}");
        // A sibling whose name starts with the directory's is outside it.
        check_distinct(&inputs, &[("--csv", dir.path().join("data2/out.csv"))]).unwrap();
        check_distinct(&inputs, &[("--csv", dir.path().join("data.csv"))]).unwrap();
        check_out_dir(&dir.path().join("out"), &files, &inputs).unwrap();
    }

    #[test]
    fn finds_this_checkout_and_nothing_outside_it() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        assert_eq!(checkout_containing(&root.join("synth/app")).as_deref(), Some(root));
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(checkout_containing(tmp.path()), None);
    }
}
