//! Paths as the tool shows them: the crate root (where `measurements/` and `generated/` of a checkout live)
//! and a path relative to it for provenance text. No stage or command keeps its own copy of these rules.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// The checkout's root (where `measurements/` and `generated/` live, two levels above this crate's
/// manifest in `crates/base/`), whatever the working directory.
pub fn crate_root() -> &'static Path {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    base.parent().and_then(Path::parent).unwrap_or(base)
}

/// `path` relative to the crate root when it is inside it, else as given (for provenance text).
pub fn display_path(path: &Path) -> String {
    let root = crate_root();
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map(|d| d.join(path)).unwrap_or_else(|_| path.to_path_buf())
    };
    match abs.strip_prefix(root) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

/// What `meta` (from `lstat`, so a link is a link) describes, for messages: "a directory", "a FIFO", ...
pub fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device file"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}
