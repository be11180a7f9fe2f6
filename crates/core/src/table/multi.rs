//! Several latency tables as one: the union of their shapes in one [`LatencyMatrix`] (one device), and the
//! vendor reference rows of all of them kept apart ([`VendorTimes`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::catalog::{Backends, Catalog};

use super::aiter_csv::{read_aiter_csv, AiterRow, TableError, VENDOR_LIBTYPE};
use super::matrix::{Cell, LatencyMatrix};
use super::Shape;

/// Vendor reference times per shape (`Cell::Ok` time, or `Cell::Invalid` where the vendor GEMM failed or
/// does not support the shape).
pub type VendorTimes = BTreeMap<Shape, Cell>;

/// The vendor reference rows of `rows` (recheck rows aside) by shape.
pub fn vendor_times(rows: &[AiterRow]) -> VendorTimes {
    rows.iter()
        .filter(|r| r.libtype == VENDOR_LIBTYPE && !r.is_recheck())
        .map(|r| (r.shape(), Cell::from_row(r)))
        .collect()
}

/// The files a dataset argument names: the file itself, or every `*.csv` of a directory (sorted by name).
pub fn expand_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>, TableError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let entries = std::fs::read_dir(p)
                .map_err(|e| TableError::new(p.display().to_string(), format!("cannot list the directory: {e}")))?;
            let mut files = Vec::new();
            for e in entries {
                let e =
                    e.map_err(|e| TableError::new(p.display().to_string(), format!("cannot list the directory: {e}")))?;
                let f = e.path();
                // Latency tables by name, as `synth bench` and the committed data name them: `.csv` and
                // gzip-compressed `.csv.gz`, in any letter case.
                let name = e.file_name().to_string_lossy().to_lowercase();
                if name.ends_with(".csv") || name.ends_with(".csv.gz") {
                    // A table by name that cannot be read as a file is one error, not a journal left out.
                    match std::fs::metadata(&f) {
                        Ok(m) if m.is_file() => files.push(f),
                        Ok(m) => {
                            return Err(TableError::new(
                                f.display().to_string(),
                                format!(
                                    "is {} in the dataset directory, not a latency table; move it away or pass the \
                                     tables as files",
                                    synth_base::paths::file_kind(&m)
                                ),
                            ))
                        }
                        Err(e) => {
                            return Err(TableError::new(
                                f.display().to_string(),
                                format!(
                                    "cannot be read ({e}; a dangling link?) though the dataset directory names it; \
                                     fix it or move it away"
                                ),
                            ))
                        }
                    }
                }
            }
            files.sort();
            if files.is_empty() {
                return Err(TableError::new(
                    p.display().to_string(),
                    "the directory holds no .csv or .csv.gz latency table; pass a file or a directory of journals",
                ));
            }
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Loads several AITER-format files into one matrix (their shapes' union) and their vendor reference rows.
///
/// Every file is read strictly on its own (errors name the file and line). A file may hold only vendor
/// rows. Errors: files of different devices, or a (shape, candidate) measured in two files (naming both).
pub fn load_many(paths: &[PathBuf], catalog: &Catalog) -> Result<(LatencyMatrix, VendorTimes), TableError> {
    let mut tables = Vec::with_capacity(paths.len());
    for path in paths {
        tables.push((path.clone(), read_aiter_csv(path, catalog)?));
    }
    merge_tables(&tables)
}

/// [`load_many`] over rows already read (each with the name its errors give).
pub fn merge_tables(tables: &[(PathBuf, Vec<AiterRow>)]) -> Result<(LatencyMatrix, VendorTimes), TableError> {
    merge_tables_for(tables, None)
}

/// [`merge_tables`] for a runtime that can call `backends` ([`LatencyMatrix::from_rows_for`]): with
/// `vendor` among them a file of vendor rows is a part of the matrix like any other.
pub fn merge_tables_for(
    tables: &[(PathBuf, Vec<AiterRow>)],
    backends: Option<&Backends>,
) -> Result<(LatencyMatrix, VendorTimes), TableError> {
    let vendor_is_candidate = backends.is_some_and(|b| b.contains(crate::catalog::Libtype::Vendor));
    let paths: Vec<PathBuf> = tables.iter().map(|(p, _)| p.clone()).collect();
    let mut vendor = VendorTimes::new();
    let mut parts: Vec<(&Path, LatencyMatrix)> = Vec::new();
    for (path, rows) in tables {
        let path = path.as_path();
        vendor.extend(vendor_times(rows));
        if !vendor_is_candidate && rows.iter().all(|r| r.libtype == VENDOR_LIBTYPE) {
            continue;
        }
        let m = LatencyMatrix::from_rows_for(rows, backends).map_err(|mut e| {
            e.file = path.display().to_string();
            e
        })?;
        parts.push((path, m));
    }
    let Some((first_path, first)) = parts.first() else {
        return Err(TableError::new(
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
            "no measurement rows (only vendor reference rows, or no file)",
        ));
    };
    for (path, m) in &parts[1..] {
        if m.gfx != first.gfx
            || m.cu_num != first.cu_num
            || (m.device.is_some() && first.device.is_some() && m.device != first.device)
        {
            return Err(TableError::new(
                path.display().to_string(),
                format!(
                    "device {}/{} CUs ({}) differs from {}/{} CUs ({}) of {}: one dataset holds one device",
                    m.gfx,
                    m.cu_num,
                    m.device.as_deref().unwrap_or("unnamed"),
                    first.gfx,
                    first.cu_num,
                    first.device.as_deref().unwrap_or("unnamed"),
                    first_path.display()
                ),
            ));
        }
    }
    if parts.len() == 1 {
        return Ok((parts.pop().expect("one part").1, vendor));
    }
    let mut shapes: Vec<Shape> =
        parts.iter().flat_map(|(_, m)| m.shapes.iter().copied()).collect::<BTreeSet<_>>().into_iter().collect();
    shapes.sort_by_key(|s| (s.n, s.k, s.m));
    let candidates = parts.iter().flat_map(|(_, m)| m.candidates.iter().copied()).collect::<BTreeSet<_>>();
    let device = parts.iter().find_map(|(_, m)| m.device.clone());
    let mut out = LatencyMatrix::new(&first.gfx, first.cu_num, device, shapes, candidates.into_iter().collect());
    let mut owner: BTreeMap<usize, &Path> = BTreeMap::new();
    for (path, m) in &parts {
        for (s, shape) in m.shapes.iter().enumerate() {
            let os = out.shape_index(shape).expect("shape collected above");
            for (c, cand) in m.candidates.iter().enumerate() {
                let cell = m.cell(s, c);
                if *cell == Cell::Missing {
                    continue;
                }
                let oc = out.candidate_index(cand).expect("candidate collected above");
                if let Some(prev) = owner.insert(os * out.candidates.len() + oc, path) {
                    return Err(TableError::new(
                        path.display().to_string(),
                        format!(
                            "shape {shape} candidate {cand} is also measured in {}: give each cell in one file",
                            prev.display()
                        ),
                    ));
                }
                out.set(os, oc, cell.clone());
            }
        }
    }
    Ok((out, vendor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_reads_csv_and_csv_gz_tables_in_any_case() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for name in ["a.csv", "b.csv.gz", "C.CSV", "notes.txt", "old.csv.bak", "csv"] {
            std::fs::write(d.join(name), "x").unwrap();
        }
        // A directory named like a table is an error naming it, not a table quietly left out.
        std::fs::create_dir(d.join("sub.csv")).unwrap();
        let e = expand_paths(&[d.to_path_buf()]).unwrap_err().to_string();
        assert!(e.contains("sub.csv") && e.contains("is a directory"), "{e}");
        std::fs::remove_dir(d.join("sub.csv")).unwrap();
        let got = expand_paths(&[d.to_path_buf()]).unwrap();
        assert_eq!(got, vec![d.join("C.CSV"), d.join("a.csv"), d.join("b.csv.gz")]);
        // A file named on its own is taken as given, whatever its name.
        let one = expand_paths(&[d.join("notes.txt"), d.to_path_buf()]).unwrap();
        assert_eq!(one.len(), 4);
        assert_eq!(one[0], d.join("notes.txt"));
    }

    #[test]
    fn a_directory_without_a_table_names_both_forms() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let e = expand_paths(&[dir.path().to_path_buf()]).unwrap_err().to_string();
        assert!(e.contains("holds no .csv or .csv.gz latency table"), "{e}");
    }
}
