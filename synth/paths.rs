//! Paths as the tool shows them: the crate root (where `measurements/` and `generated/` of a checkout live)
//! and a path relative to it for provenance text. No stage or command keeps its own copy of these rules.

use std::path::Path;

/// The crate root (where `measurements/` and `generated/` live), whatever the working directory.
pub fn crate_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
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
