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

use crate::render::writer::GeneratedFile;

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

/// Writes (or with `check`, compares) `files` in `dir`; see [`crate::render::writer::write_files`].
pub fn write_files(dir: &Path, files: &[GeneratedFile], check: bool) -> anyhow::Result<Vec<PathBuf>> {
    crate::render::writer::write_files(dir, files, check)
}

/// The `run` outputs written as one: `files` (the rendered sources, when they rendered, plus `extra`) all or
/// nothing in `dir`, then the AITER patch in its own subdirectory. Returns every path written (or checked).
pub fn write_run_files(
    dir: &Path,
    rendered: anyhow::Result<Vec<GeneratedFile>>,
    extra: Vec<GeneratedFile>,
    aiter_patch: GeneratedFile,
    check: bool,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = rendered?;
    files.extend(extra);
    let mut paths = write_files(dir, &files, check)?;
    paths.extend(write_files(&dir.join(crate::aiter::GENERATED_SUBDIR), &[aiter_patch], check)?);
    Ok(paths)
}

/// The first lines a `run` prints: its dataset and training set, as the provenance names them.
pub fn run_header(provenance: &crate::render::Provenance) -> String {
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
    super::session::emit(&text)?;
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
    fn finds_this_checkout_and_nothing_outside_it() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        assert_eq!(checkout_containing(&root.join("synth/app")).as_deref(), Some(root));
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(checkout_containing(tmp.path()), None);
    }
}
