//! A generated file: its name inside the output directory and its contents (text or bytes).

/// A file to be written into the output directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    /// File name relative to the output directory.
    pub name: String,
    /// Full contents.
    pub contents: Contents,
}

/// What a generated file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contents {
    /// Text (sources, CSV, JSON, SVG).
    Text(String),
    /// Bytes that are not text (a PNG); `--check` names such a file when it differs but shows none of it.
    Binary(Vec<u8>),
}

impl Contents {
    /// The bytes written to disk.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Contents::Text(t) => t.as_bytes(),
            Contents::Binary(b) => b,
        }
    }
}

impl GeneratedFile {
    /// A text file named `name` holding `contents`.
    pub fn new(name: impl Into<String>, contents: impl Into<String>) -> Self {
        GeneratedFile { name: name.into(), contents: Contents::Text(contents.into()) }
    }

    /// A binary file named `name` holding `bytes`.
    pub fn binary(name: impl Into<String>, bytes: Vec<u8>) -> Self {
        GeneratedFile { name: name.into(), contents: Contents::Binary(bytes) }
    }
}
