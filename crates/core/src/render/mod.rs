//! Renderers: AITER C++ dispatcher (minijinja templates in templates/) and a self-contained Rust module
//! (quote + prettyplease).
//!
//! [`write_generated`] produces the three files of `generated/`:
//! - [`CPP_HEADER`]: `a8w8_blockscale_heuristic_dispatch<DDataType, EDataType>(M, N, K)` returning a
//!   `BlockscaleChoice{kernel, splitK}`, included by AITER's `gemm_a8w8_blockscale.cu` where
//!   `BlockwiseKernel` and the instance templates are already declared;
//! - [`INSTANCES_CSV`]: the instances the rule needs, in AITER's tuned-CSV shape, so AITER's instance
//!   generator compiles exactly those kernels (plus the default);
//! - [`RUST_MODULE`]: `select(m, n, k) -> Selection`, with no dependencies.
//!
//! Both code renderers implement the i64 semantics of [`crate::rule::ir`] exactly; `tests/render.rs`
//! compiles them with g++ and rustc and checks them against the interpreter.

pub mod book;
pub mod cpp;
pub mod csv;
pub mod file;
pub mod jinja;
pub mod outdir;
pub mod python;
pub mod rust;
pub mod staging;
pub mod writer;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, Instance};
use crate::rule::{Leaf, Node, Rule};
use crate::table::LatencyMatrix;

pub use self::cpp::render_cpp;
pub use self::csv::render_instances_csv;
pub use self::python::{render_python, PYTHON_MODULE};
pub use self::rust::render_rust;
pub use writer::{Freshness, StaleFiles};

/// File name of the generated AITER C++ header.
pub const CPP_HEADER: &str = "gemm_a8w8_blockscale_heuristic.h";
/// File name of the generated instance list (AITER tuned-CSV columns).
pub const INSTANCES_CSV: &str = "gemm_a8w8_blockscale_heuristic_instances.csv";
/// File name of the generated Rust module.
pub const RUST_MODULE: &str = "dispatch.rs";

/// Where a rule came from; written as comments at the top of the generated sources.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The latency data the rule was fitted on (file, device).
    pub dataset: String,
    /// The training shapes (how they were sampled, how many).
    pub training: String,
    /// Headline figures (e.g. speed-up against the default and against the tuned table).
    pub figures: Vec<String>,
    /// The command that regenerates the files.
    pub command: String,
}

/// Renders the three generated files for `rule` and writes them into `dir`, touching only files whose
/// contents change; returns their paths. With `check`, compares with the files in `dir` instead, writes
/// nothing, and fails with [`StaleFiles`] (listing every missing or differing file) when regenerating
/// would change anything.
pub fn write_generated(
    rule: &Rule,
    catalog: &Catalog,
    matrix: &LatencyMatrix,
    provenance: &Provenance,
    dir: &Path,
    check: bool,
) -> anyhow::Result<Vec<PathBuf>> {
    writer::write_files(dir, &generated_files(rule, catalog, matrix, provenance)?, check)
}

/// The three generated files for `rule`, rendered and not written.
pub fn generated_files(
    rule: &Rule,
    catalog: &Catalog,
    matrix: &LatencyMatrix,
    provenance: &Provenance,
) -> anyhow::Result<Vec<writer::GeneratedFile>> {
    let instances = match no_instances_reason(rule, catalog, matrix)? {
        None => writer::GeneratedFile::new(INSTANCES_CSV, render_instances_csv(rule, catalog, matrix)?),
        Some(why) => writer::GeneratedFile::new(NO_INSTANCES_NOTE, why),
    };
    Ok(vec![
        writer::GeneratedFile::new(CPP_HEADER, render_cpp(rule, catalog, provenance)?),
        instances,
        writer::GeneratedFile::new(RUST_MODULE, render_rust(rule, catalog, provenance)?),
    ])
}

/// The file written in place of [`INSTANCES_CSV`] when a rule has no CK leaf to build.
pub const NO_INSTANCES_NOTE: &str = "NO-INSTANCES.txt";

/// Why no instance CSV is written for `rule` on `matrix`, as the text of [`NO_INSTANCES_NOTE`]; `None` when
/// it is written. It is not when the rule returns no CK legacy instance and the matrix holds no CK
/// candidate (a triton-only run): AITER's generator would have nothing to build but its default, and
/// the default's row needs a CK measurement the data does not have.
pub fn no_instances_reason(rule: &Rule, catalog: &Catalog, matrix: &LatencyMatrix) -> anyhow::Result<Option<String>> {
    let ck_leaves = resolved(rule, catalog)?.instances_used().into_iter().filter(Leaf::is_ck).count();
    let ck_rows = matrix.candidates.iter().any(|c| c.backend == crate::catalog::Libtype::Ck);
    if ck_leaves > 0 || ck_rows {
        return Ok(None);
    }
    let backends: std::collections::BTreeSet<String> = rule.leaves().iter().map(|l| l.backend.to_string()).collect();
    Ok(Some(format!(
        "No AITER instance CSV ({INSTANCES_CSV}) was written for this rule: it returns no CK legacy instance \
         (its leaves are {} kernels) and the latency data holds no CK measurement, so AITER's kernel \
         generator has nothing of the rule's to build and no measured row for its default kernel.\n\
         The C++ header returns \"no CK pick\" (nullptr) at every leaf, where AITER runs its default kernel; the \
         rule's picks are in rule.json, dispatch.rs and, with --backends, select_kernel.py.\n",
        backends.into_iter().collect::<Vec<_>>().join(", ")
    )))
}

/// The rule as the renderers emit it: conditions in [`Rule::canonical`] shape and every CK leaf's kernelId
/// replaced by its catalog instance's id (the default alias -1 becomes the kernel it names), so equal
/// kernels are one leaf; an id the catalog does not have is an error. Leaves of other backends are kept
/// as they are once [`crate::rule::validate::other_backend_issue`] finds nothing wrong with them.
pub fn resolved(rule: &Rule, catalog: &Catalog) -> anyhow::Result<Rule> {
    fn walk(node: &Node, catalog: &Catalog) -> anyhow::Result<Node> {
        Ok(match node {
            Node::Leaf(leaf) if !leaf.is_ck() => {
                if let Some(issue) = crate::rule::validate::other_backend_issue(leaf) {
                    anyhow::bail!("the rule returns {}: {issue}; fix the rule", leaf.candidate());
                }
                Node::Leaf(*leaf)
            }
            Node::Leaf(leaf) => Node::Leaf(Leaf::new(leaf_instance(catalog, leaf)?.id, leaf.split_k)),
            Node::Chain { branches, otherwise } => Node::Chain {
                branches: branches
                    .iter()
                    .map(|(c, n)| Ok((c.clone(), walk(n, catalog)?)))
                    .collect::<anyhow::Result<_>>()?,
                otherwise: Box::new(walk(otherwise, catalog)?),
            },
        })
    }
    let rule = rule.canonical();
    Ok(Rule { root: walk(&rule.root, catalog)?, note: rule.note })
}

/// The catalog instance a leaf selects, or an error naming the leaf.
pub fn leaf_instance<'c>(catalog: &'c Catalog, leaf: &Leaf) -> anyhow::Result<&'c Instance> {
    if !leaf.is_ck() {
        anyhow::bail!(
            "the rule returns {} (a {} kernel), which is no CK legacy instance: this output holds CK leaves only",
            leaf.candidate(),
            leaf.backend
        );
    }
    let inst = catalog.legacy_by_id(leaf.kernel_id).ok_or_else(|| {
        anyhow::anyhow!(
            "the rule returns kernelId {} (splitK {}), which is not a legacy instance of the catalog (ids 0..{}); \
             fix the rule or the catalog",
            leaf.kernel_id,
            leaf.split_k,
            catalog.legacy_candidates().len().saturating_sub(1)
        )
    })?;
    synth_base::sanitize::cpp_identifier(&inst.name)?;
    Ok(inst)
}
