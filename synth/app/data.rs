//! The measurement files that travel with the binary, and where a `--dataset` value points.
//!
//! [`EMBEDDED`] lists the journals of `measurements/h200/` (one place: add a file there and it is in
//! every binary built after); each is included with `include_bytes!`, so a copied or `cargo install`ed
//! binary runs the main job anywhere. A `--dataset` value is a file when one exists at that path, else
//! the name of an embedded file. A file whose bytes are those of an embedded one is named after it, so
//! provenance (and `run --check`) is the same however the same data was named.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use anyhow::bail;

use synth_core::catalog::Catalog;
use synth_core::table::{parse_aiter_csv, LatencyMatrix};

/// The multi-model job's manifest, included in the binary (read from disk when the path exists there).
pub const EMBEDDED_MANIFEST: (&str, &str) =
    ("measurements/h200/datasets.toml", include_str!("../../measurements/h200/datasets.toml"));

/// Every manifest included in the binary, with its journals in [`EMBEDDED`]: the multi-model job's
/// default, then the two the main job trains the shipped rules on (the CK zoo and the Triton family).
pub const EMBEDDED_MANIFESTS: [(&str, &str); 4] = [
    EMBEDDED_MANIFEST,
    ("measurements/zoo/datasets.toml", include_str!("../../measurements/zoo/datasets.toml")),
    (
        "measurements/h200/triton-manifest/datasets.toml",
        include_str!("../../measurements/h200/triton-manifest/datasets.toml"),
    ),
    (
        "measurements/h100/triton-manifest/datasets.toml",
        include_str!("../../measurements/h100/triton-manifest/datasets.toml"),
    ),
];

/// The embedded manifest named `path` (its repository path, `..` and `.` resolved by name), if any.
pub fn embedded_manifest(path: &Path) -> Option<(&'static str, &'static str)> {
    let name = normalized(path)?;
    EMBEDDED_MANIFESTS.iter().copied().find(|(n, _)| *n == name)
}

/// The embedded manifest whose bytes `text` are, if any.
pub fn embedded_manifest_text(text: &str) -> Option<&'static str> {
    EMBEDDED_MANIFESTS.iter().find(|(_, t)| *t == text).map(|(n, _)| *n)
}

/// A relative path with `.` and `dir/..` removed by name (what the manifests' `../h200/x.csv` journals
/// are called in [`EMBEDDED`]); `None` for an absolute path, one that climbs above its start, or one that
/// is not UTF-8.
fn normalized(path: &Path) -> Option<String> {
    use std::path::Component;
    let mut parts: Vec<&str> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(p) => parts.push(p.to_str()?),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.join("/"))
}

/// A measurement file included in the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddedFile {
    /// Its path in the repository (also the name `--dataset` accepts).
    pub name: &'static str,
    pub bytes: &'static [u8],
}

macro_rules! embed {
    ($($name:literal),* $(,)?) => {
        &[$(EmbeddedFile { name: $name, bytes: include_bytes!(concat!("../../", $name)) }),*]
    };
}

/// The embedded measurement journals (H200, `measurements/h200/README.md`).
pub const EMBEDDED: &[EmbeddedFile] = embed![
    "measurements/h200/qwen3-32b-tp2.csv",
    "measurements/h200/qwen3-32b-tp1.csv",
    "measurements/h200/qwen3-32b-tp4.csv",
    "measurements/h200/qwen3-32b-tp2-offgrid.csv",
    "measurements/h200/vendor-qwen3-32b-tp2.csv",
    "measurements/h200/llama-3.1-8b-tp1.csv",
    "measurements/h200/llama-3.1-8b-tp2.csv",
    "measurements/h200/llama-3.1-70b-tp4.csv",
    "measurements/h200/llama-3.1-70b-tp8.csv",
    "measurements/h200/llama-3.2-3b-tp1.csv",
    "measurements/h200/qwen2.5-7b-tp1.csv",
    "measurements/h200/qwen2.5-72b-tp4.csv",
    "measurements/h200/qwen2.5-72b-tp8.csv",
    // The zoo manifest's (measurements/zoo/datasets.toml): the completions of the dense journals and the
    // zoo's own configurations, and the Triton family's journal (the main job trains on both).
    "measurements/h200/completion/qwen3-32b-tp1.csv",
    "measurements/h200/completion/qwen3-32b-tp4.csv",
    "measurements/h200/completion/llama-3.1-8b-tp1.csv",
    "measurements/h200/completion/llama-3.1-8b-tp2.csv",
    "measurements/h200/completion/llama-3.1-70b-tp4.csv",
    "measurements/h200/completion/llama-3.1-70b-tp8.csv",
    "measurements/h200/completion/llama-3.2-3b-tp1.csv",
    "measurements/h200/completion/qwen2.5-7b-tp1.csv",
    "measurements/zoo/minicpm3-4b-tp1.csv.gz",
    "measurements/zoo/deepseek-v2-lite-tp1.csv.gz",
    "measurements/zoo/qwen3-30b-a3b-tp1.csv.gz",
    "measurements/zoo/qwen3-30b-a3b-tp2.csv.gz",
    "measurements/zoo/qwen2.5-0.5b-tp1.csv.gz",
    "measurements/zoo/qwen2.5-72b-tp1.csv.gz",
    "measurements/zoo/llama-3.1-405b-tp8.csv.gz",
    "measurements/zoo/mistral-large-2411-tp8.csv.gz",
    "measurements/h200/triton-manifest/kept-journal.csv.gz",
    "measurements/h100/triton-manifest/kept-journal.csv.gz",
];

/// The name of the single-dataset job's default dataset (the first of [`EMBEDDED`]).
pub const DEFAULT_DATASET: &str = "measurements/h200/qwen3-32b-tp2.csv";

/// The dataset of the main job (the first of [`EMBEDDED`]).
pub fn default_dataset() -> &'static EmbeddedFile {
    &EMBEDDED[0]
}

/// The embedded file called `name` (`..` and `.` resolved by name), if any.
pub fn embedded(name: &str) -> Option<&'static EmbeddedFile> {
    let name = normalized(Path::new(name))?;
    EMBEDDED.iter().find(|f| f.name == name)
}

/// Where a latency table comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dataset {
    Embedded(&'static EmbeddedFile),
    /// A file with the bytes of an embedded one: named after it in provenance, by its own path in errors.
    Copy(&'static EmbeddedFile, PathBuf),
    File(PathBuf),
    /// Several tables read as one matrix, named by their names joined with " + " (already display names:
    /// never resolved against the working directory again).
    Union(String),
}

impl Dataset {
    /// `--dataset`'s value: absent → the default embedded dataset; a path where a file exists → that
    /// file (named after the embedded file with the same bytes, if any); else an embedded name; else an
    /// error naming both ways.
    pub fn resolve(arg: Option<&Path>) -> anyhow::Result<Dataset> {
        let Some(path) = arg else { return Ok(Dataset::Embedded(default_dataset())) };
        if path.is_file() {
            // Capped like every table read (a file is compared with the embedded ones byte for byte).
            let cap = synth_base::input::MAX_TABLE_BYTES;
            let too_big = std::fs::metadata(path).is_ok_and(|m| m.len() > cap);
            let bytes = if too_big {
                Err(std::io::Error::other(format!("it holds more than {} MiB, the cap for a dataset", cap >> 20)))
            } else {
                synth_base::input::read_table_capped(path, cap, "dataset")
            };
            let bytes = bytes.map_err(|e| anyhow::anyhow!("cannot read dataset {}: {e}", path.display()))?;
            return Ok(match EMBEDDED.iter().find(|f| f.bytes == bytes.as_slice()) {
                Some(f) => Dataset::Copy(f, path.to_path_buf()),
                None => Dataset::File(path.to_path_buf()),
            });
        }
        if let Some(f) = path.to_str().and_then(embedded) {
            return Ok(Dataset::Embedded(f));
        }
        if path.exists() {
            bail!("dataset {} is not a file; pass a measurement CSV (or an AITER tuned/profile CSV)", path.display());
        }
        bail!(
            "dataset {} does not exist (nor is it an embedded dataset: {}); measure one with `synth bench ... --out FILE.csv`",
            path.display(),
            EMBEDDED.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
        )
    }

    /// Whether this is the main job's dataset.
    pub fn is_default(&self) -> bool {
        matches!(self, Dataset::Embedded(f) | Dataset::Copy(f, _) if f.name == default_dataset().name)
    }

    /// The name shown in provenance: the embedded name, or the path (relative to the crate root when
    /// inside it).
    pub fn name(&self) -> String {
        match self {
            Dataset::Embedded(f) | Dataset::Copy(f, _) => f.name.to_string(),
            Dataset::File(p) => synth_base::paths::display_path(&super::line::absolute(p)),
            Dataset::Union(name) => name.clone(),
        }
    }

    /// The name errors give: [`Dataset::name`], except that a file with the bytes of an embedded one is
    /// named by its own path (the file the user gave, not the embedded file it matches).
    pub fn origin(&self) -> String {
        match self {
            Dataset::Copy(_, p) => synth_base::paths::display_path(&super::line::absolute(p)),
            _ => self.name(),
        }
    }

    /// The file's bytes.
    pub fn bytes(&self) -> anyhow::Result<Cow<'static, [u8]>> {
        match self {
            Dataset::Embedded(f) | Dataset::Copy(f, _) if synth_base::input::is_gzip(f.bytes) => gunzip_capped(f),
            Dataset::Embedded(f) | Dataset::Copy(f, _) => Ok(Cow::Borrowed(f.bytes)),
            Dataset::File(p) => synth_base::input::read_table_capped(p, synth_base::input::MAX_TABLE_BYTES, "dataset")
                .map(Cow::Owned)
                .map_err(|e| anyhow::anyhow!("cannot read dataset {}: {e}", p.display())),
            Dataset::Union(name) => bail!("{name} is several tables, read one by one"),
        }
    }

    /// The latency table (strict parse; errors name the file, line and column).
    /// Its rows, read strictly (errors name the dataset and line).
    pub fn rows(&self, catalog: &Catalog) -> anyhow::Result<Vec<synth_core::table::AiterRow>> {
        let bytes = self.bytes()?;
        parse_aiter_csv(&bytes, &self.origin(), catalog).map_err(|e| anyhow::anyhow!("{e}"))
    }

    pub fn load(&self, catalog: &Catalog) -> anyhow::Result<LatencyMatrix> {
        let name = self.origin();
        let bytes = self.bytes()?;
        let rows = parse_aiter_csv(&bytes, &name, catalog).map_err(|e| anyhow::anyhow!("{e}"))?;
        // The C++ dispatcher chooses among CK legacy instances: CK-tile rows are left out, with a note. A
        // table with triton rows is the triton family's (the matrix refuses it mixed with another family).
        let rows: Vec<_> = rows.into_iter().filter(|r| r.libtype != synth_core::catalog::Libtype::Vendor).collect();
        let (rows, cktile) = if rows.iter().any(|r| r.libtype == synth_core::catalog::Libtype::Triton) {
            (rows, None)
        } else {
            synth_core::table::registry::legacy_rows(rows)
        };
        if let Some(left) = cktile {
            if rows.is_empty() {
                anyhow::bail!(
                    "{name}: only CK-tile rows: rules for the C++ dispatcher choose among CK legacy instances; \
                     measure with libtype ck or both"
                );
            }
            errln!("note: {}", left.message(&name));
        }
        LatencyMatrix::from_rows(&rows).map_err(|mut e| {
            e.file = name.clone();
            anyhow::anyhow!("{e}")
        })
    }
}

/// An embedded gzip-compressed journal's text, capped like a table read from a file.
fn gunzip_capped(f: &EmbeddedFile) -> anyhow::Result<Cow<'static, [u8]>> {
    use std::io::Read as _;
    let cap = synth_base::input::MAX_TABLE_BYTES;
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(f.bytes)
        .take(cap + 1)
        .read_to_end(&mut out)
        .map_err(|e| anyhow::anyhow!("embedded dataset {}: it is not valid gzip ({e})", f.name))?;
    if out.len() as u64 > cap {
        bail!("embedded dataset {}: it holds more than {} MiB, the cap for a dataset", f.name, cap >> 20);
    }
    Ok(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_and_identical_files_take_the_embedded_name() {
        assert!(Dataset::resolve(None).unwrap().is_default());
        let by_name = Dataset::resolve(Some(Path::new("measurements/h200/qwen3-32b-tp1.csv"))).unwrap();
        assert_eq!(by_name.name(), "measurements/h200/qwen3-32b-tp1.csv");
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("copy.csv");
        std::fs::write(&copy, default_dataset().bytes).unwrap();
        let same = Dataset::resolve(Some(&copy)).unwrap();
        assert!(same.is_default());
        assert_eq!(same.name(), DEFAULT_DATASET, "provenance names the embedded file");
        assert!(same.origin().ends_with("copy.csv"), "errors name the file given: {}", same.origin());
        assert_eq!(by_name.origin(), by_name.name());
        let other = dir.path().join("other.csv");
        std::fs::write(&other, &default_dataset().bytes[..default_dataset().bytes.len() - 1]).unwrap();
        assert_eq!(Dataset::resolve(Some(&other)).unwrap(), Dataset::File(other.clone()));
        // A file over the table cap is refused before it is read (a sparse file: no disk, no time).
        let huge = dir.path().join("huge.csv");
        std::fs::File::create(&huge).unwrap().set_len(synth_base::input::MAX_TABLE_BYTES + 1).unwrap();
        let e = Dataset::resolve(Some(&huge)).unwrap_err().to_string();
        assert!(e.contains("huge.csv") && e.contains("256 MiB"), "{e}");
        // A manifest's `../h200/x.csv` names the embedded journal by its path.
        let climbed = Dataset::resolve(Some(Path::new("measurements/zoo/../h200/./qwen3-32b-tp1.csv"))).unwrap();
        assert_eq!(climbed.name(), "measurements/h200/qwen3-32b-tp1.csv");
        assert_eq!(
            embedded_manifest(Path::new("measurements/h200/triton-manifest/../../zoo/datasets.toml")).map(|m| m.0),
            Some("measurements/zoo/datasets.toml")
        );
        assert!(embedded("../measurements/h200/qwen3-32b-tp1.csv").is_none());
        assert!(embedded_manifest(Path::new("/measurements/zoo/datasets.toml")).is_none());
        let missing = Dataset::resolve(Some(&dir.path().join("nope.csv"))).unwrap_err().to_string();
        assert!(missing.contains("does not exist") && missing.contains("synth bench"), "{missing}");
    }

    #[test]
    fn every_embedded_file_loads() {
        let catalog = Catalog::embedded();
        for f in EMBEDDED {
            let rows = Dataset::Embedded(f).rows(&catalog).unwrap_or_else(|e| panic!("{}: {e:#}", f.name));
            if rows.iter().all(|r| r.libtype == synth_core::catalog::Libtype::Vendor) {
                continue; // a vendor reference file holds no candidate
            }
            let m = Dataset::Embedded(f).load(&catalog).unwrap_or_else(|e| panic!("{}: {e:#}", f.name));
            assert!(!m.shapes.is_empty(), "{}", f.name);
        }
    }
}
