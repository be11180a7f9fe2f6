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

/// The two bytes every gzip member starts with (RFC 1952).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Whether `bytes` start like a gzip file.
pub fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&GZIP_MAGIC)
}

/// A latency table's bytes: like [`read_bytes_capped`], and a gzip-compressed file (recognized by its
/// first bytes, whatever its name) is decompressed, its decompressed size capped by `cap` too, so a
/// committed `journal.csv.gz` reads as the journal itself.
pub fn read_table_capped(path: &Path, cap: u64, what: &str) -> std::io::Result<Vec<u8>> {
    let bytes = read_bytes_capped(path, cap, what)?;
    if !is_gzip(&bytes) {
        return Ok(bytes);
    }
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes.as_slice())
        .take(cap + 1)
        .read_to_end(&mut out)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("it is not valid gzip ({e})")))?;
    if out.len() as u64 > cap {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("it decompresses to more than {} (the cap for a {what})", mib(cap)),
        ));
    }
    Ok(out)
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

    #[test]
    fn gzip_tables_read_as_their_text_and_stay_capped() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let text = "M,N,K\n1,2,3\n".repeat(100);
        let gz = dir.path().join("t.csv.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(text.as_bytes()).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        assert_eq!(read_table_capped(&gz, 1 << 20, "dataset").unwrap(), text.as_bytes());
        // the cap holds for the decompressed size: 1,300 bytes of text from a far smaller file
        let err = read_table_capped(&gz, 1000, "dataset").unwrap_err();
        assert!(err.to_string().contains("decompresses to more than 0 MiB (the cap for a dataset)"), "{err}");
        // plain text is returned as is; a file that starts like gzip but is not is a clear error
        let plain = dir.path().join("t.csv");
        std::fs::write(&plain, &text).unwrap();
        assert_eq!(read_table_capped(&plain, 1 << 20, "dataset").unwrap(), text.as_bytes());
        std::fs::write(&gz, [0x1f, 0x8b, 0, 1, 2]).unwrap();
        let err = read_table_capped(&gz, 1 << 20, "dataset").unwrap_err();
        assert!(err.to_string().starts_with("it is not valid gzip"), "{err}");
    }
}
