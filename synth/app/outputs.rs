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
