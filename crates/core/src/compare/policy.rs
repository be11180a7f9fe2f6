//! Selection policies: how each contender picks a candidate for a shape.
//!
//! - [`Policy::Default`]: AITER without a tuned row — the legacy default kernel (kernelId -1, the same
//!   kernel as id 7), split-K 0, for every shape; on a matrix without CK candidates the default of its
//!   backend (vLLM's default Triton config on a triton-only matrix, [`super::backends::matrix_default`]).
//! - [`Policy::Tuned`]: AITER's offline-tuned lookup over a [`TunedTable`]: the exact (M, N, K) row; else
//!   M padded fine ([`pad_fine`]); else M padded coarse ([`pad_coarse`]); else the default.
//! - [`Policy::NearestM`]: the vLLM/SGLang lookup over the same kind of table: among the tuned rows of
//!   the shape's (N, K), the one whose M is nearest; on a tie, the smaller M (the first key of an
//!   ascending list, as `min(keys, key=|x - M|)` picks it); the default when (N, K) has no row.
//! - [`Policy::TunedRule`]: the same lookup, with a rule instead of the default where it misses.
//! - [`Policy::Rule`]: a selection rule, evaluated by the rule interpreter.
//! - [`Policy::Oracle`]: the fastest usable candidate of each shape.
//! - [`Policy::Fixed`]: one candidate for every shape (`vllm-default`: the config vLLM runs where it has no
//!   tuned file for the layer).
//! - [`Policy::OracleOf`]: the fastest usable candidate of one backend (that backend alone, at its best).
//! - [`Policy::Threshold`]: one candidate below an M threshold and another from it on (two backends'
//!   defaults split at one M, as AITER PR #5586 routes untuned shapes; see [`super::backends`]).
//! - [`Policy::RuntimeFiles`]: vLLM's/SGLang's lookup over their per-(N, K) config files (`vllm-tuned`):
//!   the entry of the nearest M key, ties to the key first in the file; `fallback` where (N, K) has no file.

use std::collections::BTreeMap;

use crate::catalog::{Candidate, Catalog};
use crate::rule::Rule;
use crate::table::{AiterRow, LatencyMatrix, Shape};

/// AITER's fine M padding: M ≤ 256 → next multiple of 16; ≤ 1024 → of 32; ≤ 4096 → of 64; else of 128.
pub fn pad_fine(m: u32) -> u32 {
    let step = if m <= 256 {
        16
    } else if m <= 1024 {
        32
    } else if m <= 4096 {
        64
    } else {
        128
    };
    m.div_ceil(step).saturating_mul(step)
}

/// AITER's coarse M padding: 8192 when M > 8192 and N > 4096; otherwise the next power of two (M ≤ 1 → 1).
pub fn pad_coarse(m: u32, n: u32) -> u32 {
    if m > 8192 && n > 4096 {
        8192
    } else if m <= 1 {
        1
    } else {
        m.checked_next_power_of_two().unwrap_or(u32::MAX)
    }
}

/// How a tuned lookup found its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LookupKind {
    /// The shape's own row.
    Exact,
    /// The row of M padded fine.
    Fine,
    /// The row of M padded coarse.
    Coarse,
    /// The row of the nearest tuned M (nearest-M policy).
    Nearest,
    /// No row: the default kernel.
    Default,
}

/// A tuned entry: the kernel a tuned table names for one (M, N, K).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunedEntry {
    /// Kernel id (the default alias -1 resolved to its target) and split-K.
    pub candidate: Candidate,
    /// `false` for CK-tile rows: such a kernel is not a column of a legacy latency matrix.
    pub legacy: bool,
}

/// A tuned table: the chosen kernel per (M, N, K) of one device.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TunedTable {
    entries: BTreeMap<(u32, u32, u32), TunedEntry>,
    /// Where it came from (file or "best of N measured shapes").
    pub source: String,
}

impl TunedTable {
    /// An empty table.
    pub fn new(source: impl Into<String>) -> TunedTable {
        TunedTable { entries: BTreeMap::new(), source: source.into() }
    }

    /// Sets the entry of `shape`.
    pub fn insert(&mut self, shape: Shape, entry: TunedEntry) {
        self.entries.insert((shape.m, shape.n, shape.k), entry);
    }

    /// Removes the entry of `shape`, returning it.
    pub fn remove(&mut self, shape: Shape) -> Option<TunedEntry> {
        self.entries.remove(&(shape.m, shape.n, shape.k))
    }

    /// Number of tuned shapes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The tuned shapes, ascending (M, N, K).
    pub fn shapes(&self) -> impl Iterator<Item = Shape> + '_ {
        self.entries.keys().map(|&(m, n, k)| Shape::new(m, n, k))
    }

    /// Entry of exactly this shape.
    pub fn get(&self, m: u32, n: u32, k: u32) -> Option<TunedEntry> {
        self.entries.get(&(m, n, k)).copied()
    }

    /// A table of the rows of one device (`gfx`, `cu_num`), as AITER keys it, or of every row when
    /// `device` is None. Rows of other devices are left out and counted in the second value; a later row
    /// of the same shape replaces an earlier one (AITER builds a dict from the rows), counted in the third.
    pub fn from_rows(
        rows: &[AiterRow],
        catalog: &Catalog,
        device: Option<(&str, u32)>,
        source: &str,
    ) -> (TunedTable, usize, usize) {
        let mut t = TunedTable::new(source);
        let (mut other_device, mut replaced) = (0, 0);
        for r in rows {
            if r.libtype == crate::table::VENDOR_LIBTYPE {
                continue;
            }
            if device.is_some_and(|(gfx, cu)| r.gfx != gfx || r.cu_num != cu) {
                other_device += 1;
                continue;
            }
            let legacy = r.libtype == crate::catalog::Libtype::Ck;
            let kernel_id = if legacy && r.kernel_id < 0 { catalog.default_alias } else { r.kernel_id };
            let entry = TunedEntry { candidate: Candidate::new(kernel_id, r.split_k), legacy };
            if t.entries.insert((r.m, r.n, r.k), entry).is_some() {
                replaced += 1;
            }
        }
        (t, other_device, replaced)
    }

    /// A table tuned on the given shapes of a matrix: each shape's fastest usable candidate (shapes with
    /// no usable cell get no row), as AITER's tuner would write it from the same measurements.
    pub fn from_matrix(matrix: &LatencyMatrix, shapes: &[usize], source: &str) -> TunedTable {
        let mut t = TunedTable::new(source);
        for &s in shapes {
            if let Some((c, _)) = matrix.best(s) {
                t.insert(matrix.shapes[s], TunedEntry { candidate: matrix.candidates[c], legacy: true });
            }
        }
        t
    }

    /// AITER's lookup: exact, then fine padding, then coarse padding; `None` → the default.
    pub fn lookup_aiter(&self, m: u32, n: u32, k: u32) -> Option<(TunedEntry, LookupKind)> {
        if let Some(e) = self.get(m, n, k) {
            return Some((e, LookupKind::Exact));
        }
        if let Some(e) = self.get(pad_fine(m), n, k) {
            return Some((e, LookupKind::Fine));
        }
        self.get(pad_coarse(m, n), n, k).map(|e| (e, LookupKind::Coarse))
    }

    /// The nearest-M lookup among the rows of (N, K); ties → the smaller M. Returns the entry and its M.
    pub fn lookup_nearest(&self, m: u32, n: u32, k: u32) -> Option<(TunedEntry, u32)> {
        let mut best: Option<(u64, u32, TunedEntry)> = None;
        for (&(tm, tn, tk), e) in &self.entries {
            if tn != n || tk != k {
                continue;
            }
            let d = u64::from(tm.abs_diff(m));
            if best.is_none_or(|(bd, _, _)| d < bd) {
                best = Some((d, tm, *e));
            }
        }
        best.map(|(_, tm, e)| (e, tm))
    }
}

/// A contender in a comparison.
#[derive(Debug, Clone)]
pub enum Policy {
    /// The legacy default kernel, split-K 0.
    Default,
    /// AITER's offline-tuned lookup.
    Tuned { name: String, table: TunedTable },
    /// Nearest tuned M per (N, K).
    NearestM { name: String, table: TunedTable },
    /// AITER's lookup with a rule behind it: the tuned row as [`Policy::Tuned`] finds it, and where the
    /// lookup misses, the rule instead of the default kernel (a dispatcher compiled from the rule).
    TunedRule { name: String, table: TunedTable, rule: Rule },
    /// A selection rule.
    Rule { name: String, rule: Rule },
    /// The fastest usable candidate per shape.
    Oracle,
    /// One candidate for every shape.
    Fixed { name: String, candidate: Candidate },
    /// The fastest usable candidate of one backend per shape (the default where it has none).
    OracleOf { name: String, backend: crate::catalog::Libtype },
    /// `below` for M < `m`, `above` for M ≥ `m`.
    Threshold { name: String, below: Candidate, above: Candidate, m: u32 },
    /// Per-(N, K) files of (M key, candidate) entries in file order, looked up by nearest M as vLLM and
    /// SGLang do; `fallback` for layers without a file.
    RuntimeFiles { name: String, files: BTreeMap<(u32, u32), Vec<(u32, Candidate)>>, fallback: Candidate },
}

/// The runtimes' nearest-M pick among file-ordered entries: the first entry with the smallest |key - m|.
pub fn nearest_in_file_order(entries: &[(u32, Candidate)], m: u32) -> Option<Candidate> {
    let mut best: Option<(u32, Candidate)> = None;
    for &(key, c) in entries {
        if best.is_none_or(|(d, _)| key.abs_diff(m) < d) {
            best = Some((key.abs_diff(m), c));
        }
    }
    best.map(|(_, c)| c)
}

/// What a policy picks for one shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    /// The chosen kernel and split-K.
    pub candidate: Candidate,
    /// `false` when the kernel cannot be a column of the matrix (a CK-tile row of a tuned table).
    pub legacy: bool,
    /// How a table lookup found it (`None` for rules, the default and the oracle).
    pub lookup: Option<LookupKind>,
}

impl Policy {
    /// Display name.
    pub fn name(&self) -> &str {
        match self {
            Policy::Default => "default",
            Policy::Tuned { name, .. }
            | Policy::NearestM { name, .. }
            | Policy::TunedRule { name, .. }
            | Policy::Rule { name, .. }
            | Policy::Fixed { name, .. }
            | Policy::OracleOf { name, .. }
            | Policy::Threshold { name, .. }
            | Policy::RuntimeFiles { name, .. } => name,
            Policy::Oracle => "oracle",
        }
    }

    /// The candidate this policy picks for shape `s` of `matrix`; `default` is the default candidate.
    pub fn pick(&self, matrix: &LatencyMatrix, s: usize, default: Candidate) -> Pick {
        let Shape { m, n, k } = matrix.shapes[s];
        let plain = |candidate| Pick { candidate, legacy: true, lookup: None };
        let from_table = |found: Option<(TunedEntry, LookupKind)>| match found {
            Some((e, kind)) => Pick { candidate: e.candidate, legacy: e.legacy, lookup: Some(kind) },
            None => Pick { candidate: default, legacy: true, lookup: Some(LookupKind::Default) },
        };
        match self {
            Policy::Default => plain(default),
            Policy::Tuned { table, .. } => from_table(table.lookup_aiter(m, n, k)),
            Policy::NearestM { table, .. } => {
                from_table(table.lookup_nearest(m, n, k).map(|(e, _)| (e, LookupKind::Nearest)))
            }
            Policy::Rule { rule, .. } => {
                let leaf = rule.eval(m, n, k);
                plain(leaf.candidate())
            }
            Policy::TunedRule { table, rule, .. } => match table.lookup_aiter(m, n, k) {
                Some((e, kind)) => Pick { candidate: e.candidate, legacy: e.legacy, lookup: Some(kind) },
                None => {
                    let leaf = rule.eval(m, n, k);
                    Pick { candidate: leaf.candidate(), legacy: true, lookup: None }
                }
            },
            Policy::Oracle => plain(matrix.best(s).map_or(default, |(c, _)| matrix.candidates[c])),
            Policy::Fixed { candidate, .. } => plain(*candidate),
            Policy::OracleOf { backend, .. } => {
                plain(matrix.best_of(s, *backend).map_or(default, |(c, _)| matrix.candidates[c]))
            }
            Policy::Threshold { below, above, m: at, .. } => plain(if m < *at { *below } else { *above }),
            Policy::RuntimeFiles { files, fallback, .. } => {
                match files.get(&(n, k)).and_then(|e| nearest_in_file_order(e, m)) {
                    Some(c) => Pick { candidate: c, legacy: true, lookup: Some(LookupKind::Nearest) },
                    None => Pick { candidate: *fallback, legacy: true, lookup: Some(LookupKind::Default) },
                }
            }
        }
    }
}
