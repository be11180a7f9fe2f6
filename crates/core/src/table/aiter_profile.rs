//! AITER's tuner profile file (`-o2` of `gemm_a8w8_blockscale_tune.py`), read incrementally: one row per
//! measured candidate in AITER's columns, as pandas writes them (ints that may read `3.0`, floats, `inf`,
//! `Null`), failed candidates with `us` -1 (error) or inf (timeout) and kernelName `None`.
//!
//! [`ProfileReader`] is fed the file's complete lines in order (the caller keeps the byte offset, so a
//! file that grows by one batch at a time is parsed once, not whole on every poll) and turns each CK
//! legacy or CK-tile row into a [`ProfileCell`]: kernel names resolved through the catalog (a `None` name
//! through the kernelId), failures and rows over the errRatio tolerance as failed cells with their reason.
//! asm and opus rows have no catalog instances; they are counted and left out. Errors name the file, line,
//! column and value.

use anyhow::{anyhow, bail, Result};

use super::aiter_record::{extends_aiter_record, AiterRecord, ColumnIndex};
use super::RowStatus;
use crate::catalog::{Catalog, Libtype};
use synth_base::diag::Located;

/// One CK legacy or CK-tile row of the profile file, checked against the catalog: AITER's columns (its
/// fields, through [`std::ops::Deref`]: `us` is `None` for a failed run (us -1 or inf), `kernel_name` the
/// catalog's name of the instance, `err_ratio` always known) and the outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileCell {
    pub record: AiterRecord,
    /// Ok, or the failure (run error, timeout, errRatio over the tolerance).
    pub status: RowStatus,
}

extends_aiter_record!(ProfileCell, record);

/// What one [`ProfileReader::read_lines`] call found.
#[derive(Debug, Default)]
pub struct ProfileChunk {
    /// CK legacy and CK-tile rows, each with its line number in the file.
    pub cells: Vec<(usize, ProfileCell)>,
    /// asm / opus rows (no catalog instances).
    pub other_libtype: usize,
}

/// One row of AITER's profile file, as text: its fields by column name.
struct ProfileRow<'a> {
    rec: &'a csv::StringRecord,
    index: &'a ColumnIndex,
}

impl ProfileRow<'_> {
    fn get(&self, col: &str) -> &str {
        self.index.get(self.rec, col)
    }
}

/// Reads a profile file's lines as they are appended (see the module docs).
#[derive(Debug, Clone)]
pub struct ProfileReader {
    src: String,
    /// The errRatio tolerance the tuner ran with: a row above it is a failed correctness check.
    err_ratio: f64,
    /// The header's field count and index, once read.
    header: Option<(usize, ColumnIndex)>,
    /// Lines read so far.
    lines: usize,
}

impl ProfileReader {
    /// A reader for the file named `src` in messages, for a tuner run with tolerance `err_ratio`.
    pub fn new(src: impl Into<String>, err_ratio: f64) -> ProfileReader {
        ProfileReader { src: src.into(), err_ratio, header: None, lines: 0 }
    }

    /// Lines read so far.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Parses `bytes`, the next complete lines of the file (each ending in a newline).
    pub fn read_lines(&mut self, bytes: &[u8], catalog: &Catalog) -> Result<ProfileChunk> {
        let mut chunk = ProfileChunk::default();
        let base = self.lines;
        self.lines += bytes.iter().filter(|&&b| b == b'\n').count();
        let mut rdr = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(bytes);
        for rec in rdr.records() {
            let rec = rec.map_err(|e| {
                let line = base + e.position().map_or(1, |p| p.line() as usize);
                line_error(&self.src, line, e.to_string())
            })?;
            let line = base + rec.position().map_or(1, |p| p.line() as usize);
            let Some((fields, index)) = &self.header else {
                self.header = Some(check_header(&self.src, &rec)?);
                continue;
            };
            if rec.len() < *fields {
                let message = format!("the row has {} fields but the header has {fields}", rec.len());
                return Err(line_error(&self.src, line, message));
            }
            let r = ProfileRow { rec: &rec, index };
            if r.get("libtype") == "asm" || r.get("libtype") == "opus" {
                chunk.other_libtype += 1;
                continue;
            }
            chunk.cells.push((line, self.cell(&r, line, catalog)?));
        }
        Ok(chunk)
    }

    fn cell(&self, r: &ProfileRow, line: usize, catalog: &Catalog) -> Result<ProfileCell> {
        let src = self.src.as_str();
        let field = |col: &'static str| (col, r.get(col));
        let u32_of = |(col, v): (&str, &str)| -> Result<u32> {
            let x = int_field(src, line, col, v)?;
            u32::try_from(x).map_err(|_| cell_error(src, line, col, v, "expected a non-negative integer"))
        };
        let (m, n, k) = (u32_of(field("M"))?, u32_of(field("N"))?, u32_of(field("K"))?);
        let cu_num = u32_of(field("cu_num"))?;
        let id_text = r.get("kernelId");
        let kernel_id = i32::try_from(int_field(src, line, "kernelId", id_text)?)
            .map_err(|_| cell_error(src, line, "kernelId", id_text, "out of range"))?;
        let split_k = u32_of(field("splitK"))?;
        let libtype = match Libtype::parse(r.get("libtype")) {
            Some(t @ (Libtype::Ck | Libtype::Cktile)) => t,
            _ => return Err(cell_error(src, line, "libtype", r.get("libtype"), "expected ck, cktile, asm or opus")),
        };
        let gfx = r.get("gfx").to_string();
        let kernel_name = catalog_name(r, src, line, libtype, kernel_id, catalog)?;
        let err_ratio = float_field(r.get("errRatio"))
            .filter(|e| (0.0..=1.0).contains(e))
            .ok_or_else(|| cell_error(src, line, "errRatio", r.get("errRatio"), "expected a share in [0, 1]"))?;
        let (us, status) = self.outcome(r.get("us"), err_ratio, line)?;
        let rate = |col| float_field(r.get(col)).filter(|_| us.is_some());
        let (tflops, bw, err_ratio) = (rate("tflops"), rate("bw"), Some(err_ratio));
        let record =
            AiterRecord { gfx, cu_num, m, n, k, libtype, kernel_id, split_k, us, kernel_name, tflops, bw, err_ratio };
        Ok(ProfileCell { record, status })
    }

    /// The time and outcome of a row: `us` -1 (run error) and inf (timeout) are failures without a time, an
    /// errRatio over the tolerance a failure with one.
    fn outcome(&self, us_text: &str, err_ratio: f64, line: usize) -> Result<(Option<f64>, RowStatus)> {
        let src = self.src.as_str();
        let us_raw = us_text.trim();
        let us_val: f64 = match us_raw {
            "inf" | "Infinity" => f64::INFINITY,
            t => t.parse().map_err(|_| cell_error(src, line, "us", us_raw, "expected a time, -1 or inf"))?,
        };
        Ok(if us_val == -1.0 {
            (None, RowStatus::Fail("tuner reported us=-1 (run error or unsupported shape)".into()))
        } else if us_val.is_infinite() {
            (None, RowStatus::Fail("tuner reported us=inf (timeout)".into()))
        } else if us_val.is_nan() || us_val <= 0.0 {
            return Err(cell_error(src, line, "us", us_raw, "expected a positive time, -1 or inf"));
        } else if err_ratio > self.err_ratio {
            (Some(us_val), RowStatus::Fail(format!("errRatio {err_ratio} > {} (wrong output)", self.err_ratio)))
        } else {
            (Some(us_val), RowStatus::Ok)
        })
    }
}

/// The header record: every AITER column present, none twice. Returns its field count and index.
fn check_header(src: &str, rec: &csv::StringRecord) -> Result<(usize, ColumnIndex)> {
    let shown_header = || synth_base::sanitize::shown(&rec.iter().collect::<Vec<_>>().join(","));
    let index = ColumnIndex::new(rec, true)
        .map_err(|fault| anyhow!("{src}:1: the tuner's profile file's header {fault} ({})", shown_header()))?;
    if let Some(col) = index.missing_aiter_column() {
        bail!(
            "{src}:1: the tuner's profile file has no {col} column (header: {}); is this AITER's blockscale tuner?",
            shown_header()
        );
    }
    Ok((rec.len(), index))
}

/// The catalog's name of the row's instance (by kernelId; a name other than `None` must agree).
fn catalog_name(
    r: &ProfileRow,
    src: &str,
    line: usize,
    libtype: Libtype,
    kernel_id: i32,
    catalog: &Catalog,
) -> Result<String> {
    let by_id = match libtype {
        Libtype::Ck => catalog.legacy_by_id(kernel_id).filter(|_| kernel_id >= 0),
        _ => {
            let arch = catalog.cktile_arch_for_gfx(r.get("gfx")).ok_or_else(|| {
                cell_error(src, line, "gfx", r.get("gfx"), "the catalog has no CK-tile instances for this architecture")
            })?;
            catalog.cktile_by_id(arch, kernel_id).filter(|_| kernel_id >= 0)
        }
    }
    .ok_or_else(|| {
        anyhow!(
            "{src}:{line}: {libtype} kernelId {kernel_id} has no catalog instance; this AITER checkout's instance list \
             differs from ck-instances/ (update the catalog from its gemm_a8w8_blockscale_*instance.py)"
        )
    })?;
    let kernel_name = r.get("kernelName");
    if kernel_name != "None" {
        let inst = catalog
            .resolve_name(kernel_name)
            .map_err(|e| anyhow::Error::from(Located::new(src, e.to_string()).line(line).column("kernelName")))?;
        if inst.libtype() != libtype || inst.params != by_id.params {
            bail!(
                "{src}:{line}: kernelName {} is not {libtype} kernelId {kernel_id} of the catalog ({}); the checkout's \
                 instance list differs from ck-instances/",
                synth_base::sanitize::shown(kernel_name),
                by_id.name
            );
        }
    }
    Ok(by_id.name.clone())
}

/// A bad value in a column of the profile file.
fn cell_error(src: &str, line: usize, col: &str, v: &str, message: &str) -> anyhow::Error {
    Located::new(src, message).line(line).column(col).value(v).into()
}

/// A problem of a line of the profile file.
fn line_error(src: &str, line: usize, message: impl Into<String>) -> anyhow::Error {
    Located::new(src, message).line(line).into()
}

fn int_field(src: &str, line: usize, col: &str, v: &str) -> Result<i64> {
    let x: f64 = v.trim().parse().map_err(|_| cell_error(src, line, col, v, "expected an integer"))?;
    if x.fract() != 0.0 || !x.is_finite() {
        return Err(cell_error(src, line, col, v, "expected an integer"));
    }
    Ok(x as i64)
}

fn float_field(v: &str) -> Option<f64> {
    match v.trim() {
        "" | "Null" | "nan" | "NaN" => None,
        t => t.parse::<f64>().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio\n";

    #[test]
    fn lines_fed_in_pieces_keep_their_numbers() {
        let cat = Catalog::embedded();
        let ck3 = &cat.legacy_by_id(3).unwrap().name;
        let mut r = ProfileReader::new("p.csv", 0.05);
        let first =
            r.read_lines(format!("{HEADER}gfx942,304,16,5120,5120,ck,3,0,12.5,{ck3},1,1,0.0\n").as_bytes(), &cat);
        let first = first.unwrap();
        assert_eq!(first.cells.len(), 1);
        assert_eq!(first.cells[0].0, 2);
        assert_eq!(first.cells[0].1.status, RowStatus::Ok);
        let second = r
            .read_lines(
                b"gfx942,304,32,5120,5120,asm,0,0,8.0,x,1,1,0.0\ngfx942,304,32,5120,5120,ck,4,0,-1,None,0,0,1.0\n",
                &cat,
            )
            .unwrap();
        assert_eq!((second.other_libtype, second.cells[0].0), (1, 4));
        assert_eq!(second.cells[0].1.kernel_name, cat.legacy_by_id(4).unwrap().name);
        let e = r.read_lines(b"gfx942,304,32,5120,5120,ck,4,0,abc,None,0,0,1.0\n", &cat).unwrap_err();
        assert!(format!("{e:#}").contains("p.csv:5") && format!("{e:#}").contains("column us"), "{e:#}");
    }

    /// A header naming a column twice, and a row shorter than the header, are refused on their line (a
    /// second `us` column would otherwise leave which time is read to chance).
    #[test]
    fn a_repeated_column_and_a_short_row_are_refused() {
        let cat = Catalog::embedded();
        let mut r = ProfileReader::new("p.csv", 0.05);
        let e = r.read_lines(format!("{}us\n", HEADER.trim_end().to_owned() + ",").as_bytes(), &cat).unwrap_err();
        assert!(
            format!("{e:#}").starts_with("p.csv:1: the tuner's profile file's header names column us twice"),
            "{e:#}"
        );
        let mut r = ProfileReader::new("p.csv", 0.05);
        let e = r.read_lines(format!("{HEADER}gfx942,304,16,5120,5120,ck,3,0,12.5\n").as_bytes(), &cat).unwrap_err();
        assert!(format!("{e:#}").contains("p.csv:2: the row has 9 fields but the header has 13"), "{e:#}");
    }
}
