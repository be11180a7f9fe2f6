//! The torn-line rule of the append-only logs (the bench journal of `measure::journal` and the search
//! trace of `engine::trace`).
//!
//! Both logs append one record per line and flush it whole, so a run killed during an append leaves at
//! most one incomplete line: the last, without its newline. Those bytes after the last newline are torn:
//! the reader drops them and the file is cut back to its last newline before anything is appended, so the
//! record is written again whole. A record counts only once its newline is written (a CSV row cut inside
//! its last number still parses, so no parser can tell a torn row from a whole one). Every line before
//! the last newline must be whole: a bad one there is not a torn write but a damaged log, and its reader
//! names it as an error.

/// Where the whole lines of an append-only log end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Torn {
    /// Length of the whole lines (up to and including the last newline): what to read and keep.
    pub keep: usize,
    /// The torn last line (its first 200 characters, lossily decoded), when there is one.
    pub tail: Option<String>,
}

impl Torn {
    /// Bytes cut off the end of the log.
    pub fn cut(&self, len: usize) -> usize {
        len - self.keep
    }
}

/// Applies the torn-line rule to a log's bytes.
pub fn torn_tail(bytes: &[u8]) -> Torn {
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let tail = (keep < bytes.len()).then(|| String::from_utf8_lossy(&bytes[keep..]).chars().take(200).collect());
    Torn { keep, tail }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_after_the_last_newline_are_torn() {
        assert_eq!(torn_tail(b"a\nb\n"), Torn { keep: 4, tail: None });
        assert_eq!(torn_tail(b"a\nb\nc,1"), Torn { keep: 4, tail: Some("c,1".into()) });
        assert_eq!(torn_tail(b"a\nb\nc,1").cut(7), 3);
        assert_eq!(torn_tail(b"half"), Torn { keep: 0, tail: Some("half".into()) });
        assert_eq!(torn_tail(b""), Torn { keep: 0, tail: None });
        // A complete-looking record without its newline is still torn.
        assert_eq!(torn_tail(b"{\"id\":1}\n{\"id\":2}").keep, 9);
    }

    #[test]
    fn the_tail_shown_is_short_and_printable_text() {
        let long = [b"x\n".as_slice(), &[b'y'; 1000], &[0xff]].concat();
        let t = torn_tail(&long);
        assert_eq!(t.keep, 2);
        assert_eq!(t.tail.unwrap().chars().count(), 200);
    }
}
