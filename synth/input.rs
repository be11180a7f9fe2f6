//! Size-capped reading of input files. Every reader that can be handed an endless or enormous file
//! (`/dev/zero`, `/dev/full`, a FIFO, a mistyped path to a disk image) reads through here and stops with a
//! clear error at its cap instead of growing memory until the process is killed.

use std::io::Read;
use std::path::Path;

/// Cap for latency tables (AITER tuned/profile CSVs, measurement journals): 256 MiB, about 150 times the
/// full H200 dataset.
pub const MAX_TABLE_BYTES: u64 = 256 << 20;
/// Cap for rule files (C++, Rust, JSON): 4 MiB, the size agent answers are cut to.
pub const MAX_RULE_BYTES: u64 = 4 << 20;
/// Cap for model specs and task specs (TOML): 1 MiB.
pub const MAX_SPEC_BYTES: u64 = 1 << 20;

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

/// The whole file at `path`, or an error (kind `InvalidData`) when it holds more than `cap` bytes; `what`
/// names the kind of file in that message.
pub fn read_bytes_capped(path: &Path, cap: u64, what: &str) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "it holds more than {} (the cap for a {what}); is it the right file? (device files such as \
                 /dev/zero never end)",
                mib(cap)
            ),
        ));
    }
    Ok(bytes)
}

/// Like [`read_bytes_capped`], as UTF-8 text (invalid UTF-8 is an `InvalidData` error).
pub fn read_text_capped(path: &Path, cap: u64, what: &str) -> std::io::Result<String> {
    String::from_utf8(read_bytes_capped(path, cap, what)?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("it is not UTF-8 text ({e})")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endless_files_stop_at_the_cap() {
        let err = read_bytes_capped(Path::new("/dev/zero"), 1 << 20, "rule file").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("more than 1 MiB (the cap for a rule file)"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "ok").unwrap();
        assert_eq!(read_text_capped(&p, 2, "x").unwrap(), "ok");
        assert!(read_text_capped(&p, 1, "x").is_err());
        std::fs::write(&p, b"\xff").unwrap();
        assert!(read_text_capped(&p, 10, "x").unwrap_err().to_string().contains("not UTF-8"));
    }
}
