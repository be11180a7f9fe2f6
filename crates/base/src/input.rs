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
/// Cap for a source file a rewrite reads (its target, a pre-written rewrite) and for an agent's answer:
/// 4 MiB, the size of the largest rule file.
pub const MAX_SOURCE_BYTES: u64 = MAX_RULE_BYTES;

/// Range a kernel time in microseconds must lie in wherever one enters the tool (a journal's `us`, a
/// rewrite test's result line): from a picosecond to about 11.6 days. Every sum and ratio of such times
/// over any table that fits in memory stays finite.
pub const US_RANGE: std::ops::RangeInclusive<f64> = 1e-6..=1e12;

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

/// The whole file at `path`, or an error (kind `InvalidData`) when it holds more than `cap` bytes; `what`
/// names the kind of file in that message.
///
/// A FIFO (named pipe) is read as a pipe from a program (`--rule <(...)`) is, but never waited on: opening
/// it does not block for a writer, and one that no program writes to is an error naming it.
pub fn read_bytes_capped(path: &Path, cap: u64, what: &str) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let meta = file.metadata()?;
    let fifo = meta.file_type().is_fifo();
    if fifo {
        // Reads block again (for data of the program writing), only the open above did not.
        set_blocking(&file)?;
    }
    let mut bytes = Vec::new();
    (&file).take(cap + 1).read_to_end(&mut bytes)?;
    if fifo && bytes.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "it is a FIFO (named pipe) that no program is writing to; pass the file itself",
        ));
    }
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

/// Clears `O_NONBLOCK` on an open file.
pub fn set_blocking(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function's caller owns; F_GETFL/F_SETFL read and set its flags only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
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

    /// A FIFO no program writes to is an error at once, not a wait for a writer; a pipe a program writes
    /// (what `--rule <(...)` passes) is read to its end.
    #[test]
    fn a_fifo_is_never_waited_on_and_a_pipe_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let started = std::time::Instant::now();
        let err = read_bytes_capped(&fifo, 1 << 20, "rule file").unwrap_err();
        assert!(err.to_string().contains("FIFO (named pipe) that no program is writing to"), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe() writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let writer = std::thread::spawn(move || {
            use std::io::Write as _;
            use std::os::fd::FromRawFd;
            // SAFETY: the write end is this thread's alone from here on; File closes it when dropped.
            let mut w = unsafe { std::fs::File::from_raw_fd(fds[1]) };
            w.write_all(&b"x".repeat(100_000)).unwrap();
        });
        let read = read_bytes_capped(Path::new(&format!("/dev/fd/{}", fds[0])), 1 << 20, "rule file").unwrap();
        writer.join().unwrap();
        // SAFETY: the read end was opened by pipe() above and is closed once.
        unsafe { libc::close(fds[0]) };
        assert_eq!(read.len(), 100_000);
    }
}
