//! A dataset manifest opened for a command: its text (a file, or the copy built into the binary where no
//! file of that name exists) and its journals (files, or built-in copies for the built-in manifest only),
//! handed to the [`synth_core::manifest`] stage, which checks and loads it.

use std::path::{Path, PathBuf};

use anyhow::Context;

use synth_core::catalog::{Backends, Catalog};
use synth_core::manifest::{JournalSource, MultiData};
use synth_core::table::AiterRow;

/// The manifest read when `--manifest` is not given, relative to the crate root (embedded in the binary).
pub const DEFAULT_MANIFEST: &str = super::data::EMBEDDED_MANIFEST.0;

/// Journals read as `--dataset` reads a table: a file, or (for the built-in manifest) a built-in copy.
struct Journals {
    /// Whether the manifest is the copy built into the binary (only its journals may be built in).
    built_in: bool,
}

impl JournalSource for Journals {
    fn built_in(&self, path: &Path) -> bool {
        self.built_in && path.to_str().and_then(super::data::embedded).is_some()
    }

    fn read(&self, path: &Path, catalog: &Catalog) -> anyhow::Result<(PathBuf, Vec<AiterRow>)> {
        let source = super::data::Dataset::resolve(Some(path))?;
        Ok((PathBuf::from(source.origin()), source.rows(catalog)?))
    }
}

/// Reads the manifest and every journal it names.
pub fn open(manifest: &Path) -> anyhow::Result<MultiData> {
    open_for(manifest, None)
}

/// [`open`] for a runtime that can call `backends` ([`MultiData::load`] says what that checks).
pub fn open_for(manifest: &Path, backends: Option<&Backends>) -> anyhow::Result<MultiData> {
    // The main job's manifest where no file of that name exists (a copied binary, a working directory
    // outside the checkout): the copy built into the binary, whose journals are built in too. Only this
    // manifest reads built-in journals; a manifest file's journals are files.
    // From a subdirectory of a checkout the main job writes the checkout's generated/, so it reads the
    // checkout's manifest too (not the copy built in, which may be older than the checkout's data).
    let embedded =
        (!manifest.exists() && manifest.is_relative()).then(|| super::data::embedded_manifest(manifest)).flatten();
    let in_checkout = embedded
        .and_then(|_| std::env::current_dir().ok())
        .and_then(|cwd| super::outputs::checkout_containing(&cwd))
        .map(|root| root.join(manifest))
        .filter(|p| p.is_file());
    let manifest = in_checkout.as_deref().unwrap_or(manifest);
    let built_in = !manifest.exists() && embedded.is_some();
    let text = if let Some((_, text)) = embedded.filter(|_| built_in) {
        errln!(
            "note: no file {} here: reading the copy built into this binary (its journals built in too)",
            manifest.display()
        );
        text.to_string()
    } else {
        synth_base::input::read_text_capped(manifest, synth_base::input::MAX_SPEC_BYTES, "dataset manifest")
            .with_context(|| format!("cannot read the dataset manifest {}", manifest.display()))?
    };
    MultiData::load(manifest, &text, &Journals { built_in }, backends)
}
