//! AITER's tuned/profile CSV format, the canonical long format of measurements here: a strict reader that
//! checks every field of every row (and every kernel name against the catalog) and a writer.
//!
//! Columns: `gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio`, in any order,
//! plus optional extra columns. Extra columns the measurement harness writes and this reader checks:
//! `status` (`ok` or `fail:<reason>`), `recheck` (0/1: a deliberate re-measurement of a row already in the
//! file), `reps` (positive integer), `us_min`, `us_max`, `us_p10`, `us_p90` (finite non-negative numbers),
//! `device`, `backend` (free text). Other extra columns are kept as text. Empty extra values count as absent.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::Path;

use crate::catalog::{Catalog, Instance, Libtype, NameError};

pub use super::aiter_record::AITER_COLUMNS;
use super::aiter_record::{extends_aiter_record, AiterRecord, ColumnIndex, HeaderFault, Numbers};
use super::Shape;

/// Largest splitK (log2 of KBatch) accepted.
pub const MAX_SPLIT_K: u32 = 16;
/// Range a kernel time (`us`) must lie in: the one range of every latency the tool reads
/// ([`synth_base::input::US_RANGE`]).
pub use synth_base::input::US_RANGE;

/// Rows whose errRatio exceeds this are Invalid in the matrix (AITER's tuner default tolerance).
pub const ERR_RATIO_LIMIT: f64 = 0.05;

/// Extra columns whose values must be finite non-negative numbers when present.
const NUMERIC_EXTRAS: [&str; 4] = ["us_min", "us_max", "us_p10", "us_p90"];

/// One measured (shape, kernel) row: AITER's columns (its fields, through [`std::ops::Deref`]; the reader
/// reads an empty errRatio of a failed row as 0, so `err_ratio` is always known) and the extra columns.
#[derive(Debug, Clone, PartialEq)]
pub struct AiterRow {
    /// 1-based line in the source file (0 for rows built in code).
    pub line: usize,
    pub record: AiterRecord,
    /// Extra columns by header name (non-empty values only).
    pub extra: BTreeMap<String, String>,
}

extends_aiter_record!(AiterRow, record);
/// Outcome a row records, from its `status` column: `ok` or `fail:<reason>` (a non-blank reason). Serde
/// reads and writes it as that word.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RowStatus {
    Ok,
    Fail(String),
}

impl RowStatus {
    pub fn is_ok(&self) -> bool {
        *self == RowStatus::Ok
    }
}

impl std::str::FromStr for RowStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<RowStatus, String> {
        match s.strip_prefix("fail:") {
            Some(reason) if !reason.trim().is_empty() => Ok(RowStatus::Fail(reason.to_string())),
            _ if s == "ok" => Ok(RowStatus::Ok),
            _ => Err(format!("status {s:?} is neither \"ok\" nor \"fail:<reason>\"")),
        }
    }
}

impl serde::Serialize for RowStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for RowStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RowStatus, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl std::fmt::Display for RowStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RowStatus::Ok => f.write_str("ok"),
            RowStatus::Fail(reason) => write!(f, "fail:{reason}"),
        }
    }
}

impl AiterRow {
    /// `status` column: absent or `ok` → Ok, `fail:<reason>` → Fail(reason).
    pub fn status(&self) -> RowStatus {
        self.extra.get("status").and_then(|s| s.parse().ok()).unwrap_or(RowStatus::Ok)
    }

    /// Whether the row is a deliberate re-measurement (`recheck` = 1).
    pub fn is_recheck(&self) -> bool {
        self.extra.get("recheck").map(String::as_str) == Some("1")
    }

    /// The `device` extra column, if present.
    pub fn device(&self) -> Option<&str> {
        self.extra.get("device").map(String::as_str)
    }

    /// The 13 AITER column values, in [`AITER_COLUMNS`] order (empty strings for absent optional values).
    pub fn to_record(&self) -> Vec<String> {
        self.record.to_record(Numbers::Shortest)
    }
}

/// A problem in a latency table: where (file, line, column, value) and what was expected.
pub type TableError = synth_base::diag::Located;

/// `libtype` of a vendor reference row (e.g. cuBLAS's own blockwise FP8 GEMM measured on the same shapes):
/// read and kept apart as a reference, never a candidate of a rule or a tuned table.
pub const VENDOR_LIBTYPE: Libtype = Libtype::Vendor;

/// Reads and validates an AITER-format CSV file (every kernel name is checked against `catalog`).
pub fn read_aiter_csv(path: &Path, catalog: &Catalog) -> Result<Vec<AiterRow>, TableError> {
    let file = path.display().to_string();
    let bytes = synth_base::input::read_table_capped(path, synth_base::input::MAX_TABLE_BYTES, "latency table")
        .map_err(|e| TableError::new(file.clone(), format!("cannot read the file: {e}")))?;
    parse_aiter_csv(&bytes, &file, catalog)
}

/// Parses AITER-format CSV text; `file` names the source in errors.
pub fn parse_aiter_csv(text: &[u8], file: &str, catalog: &Catalog) -> Result<Vec<AiterRow>, TableError> {
    let lines = crate::catalog::load::LineIndex::new(text);
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).from_reader(text);
    let header = Header::read(&mut rdr, file)?;
    let mut rows = Vec::new();
    let mut seen = SeenCells::default();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| header.record_error(&e, &lines, file))?;
        let line = rec.position().map_or(0, |p| lines.line_of(p.byte()));
        let row = RowReader { file, line, rec: &rec, index: &header.index };
        let parsed = row.parse(catalog, &header.extras)?;
        seen.check(&parsed, file)?;
        rows.push(parsed);
    }
    Ok(rows)
}

/// A table error at `line`, in `column`, of `value`.
fn located(file: &str, line: Option<usize>, column: Option<&str>, value: Option<&str>, message: String) -> TableError {
    TableError {
        file: file.to_string(),
        line,
        column: column.map(str::to_string),
        value: value.map(str::to_string),
        message,
        ..Default::default()
    }
}

/// A table's checked header: every AITER column once, and the extra columns with their field indices.
struct Header {
    record: csv::StringRecord,
    index: ColumnIndex,
    extras: Vec<(String, usize)>,
}

impl Header {
    fn read(rdr: &mut csv::Reader<&[u8]>, file: &str) -> Result<Header, TableError> {
        let err = |column: Option<&str>, message: String| located(file, Some(1), column, None, message);
        let record = rdr.headers().map_err(|e| err(None, format!("cannot read the header: {e}")))?.clone();
        if record.is_empty() || (record.len() == 1 && record[0].is_empty()) {
            return Err(err(None, format!("empty file: expected the header {}", AITER_COLUMNS.join(","))));
        }
        let index = ColumnIndex::new(&record, false).map_err(|fault| match fault {
            HeaderFault::Empty(field) => err(None, format!("header field {field} is empty")),
            HeaderFault::Twice(h) => err(Some(&h), "column appears twice in the header".into()),
        })?;
        if let Some(missing) = index.missing_aiter_column() {
            return Err(err(
                Some(missing),
                format!("required column is missing from the header; expected {}", AITER_COLUMNS.join(",")),
            ));
        }
        let extras = record
            .iter()
            .enumerate()
            .filter(|(_, h)| !AITER_COLUMNS.contains(h))
            .map(|(i, h)| (h.to_string(), i))
            .collect();
        Ok(Header { record, index, extras })
    }

    /// The error of a record the CSV reader refused (a row of another length than the header, ...).
    fn record_error(&self, e: &csv::Error, lines: &crate::catalog::load::LineIndex, file: &str) -> TableError {
        let line = e.position().map(|p| lines.line_of(p.byte()));
        let fields = self.record.len();
        match e.kind() {
            csv::ErrorKind::UnequalLengths { len, .. } => {
                let missing = self.record.get(*len as usize);
                let what = match missing {
                    Some(col) => format!(
                        "the row has {len} fields but the header has {fields}: column {col} and later are missing"
                    ),
                    None => format!("the row has {len} fields but the header has {fields}"),
                };
                located(file, line, missing, None, what)
            }
            _ => located(file, line, None, None, format!("malformed CSV: {e}")),
        }
    }
}

/// The cells measured so far: one measurement and at most one recheck of a cell (as `synth bench` writes
/// and `synth merge` requires).
#[derive(Default)]
struct SeenCells {
    /// Each cell's key -> the line that measured it first.
    first: HashMap<CellOfRow, usize>,
}

/// A row's cell: (gfx, CU count, shape, libtype, kernelId, splitK, recheck).
type CellOfRow = (String, u32, Shape, Libtype, i32, u32, bool);

impl SeenCells {
    fn check(&mut self, row: &AiterRow, file: &str) -> Result<(), TableError> {
        let recheck = row.is_recheck();
        let key = (row.gfx.clone(), row.cu_num, row.shape(), row.libtype, row.kernel_id, row.split_k, recheck);
        let Some(first) = self.first.insert(key, row.line) else { return Ok(()) };
        let message = if recheck {
            format!(
                "duplicate recheck row: shape {} kernelId {} splitK {} was already re-measured on line {first}; a \
                 cell has at most one recheck row",
                row.shape(),
                row.kernel_id,
                row.split_k
            )
        } else {
            format!(
                "duplicate row: shape {} kernelId {} splitK {} was already measured on line {first}; mark a \
                 deliberate re-measurement with recheck=1",
                row.shape(),
                row.kernel_id,
                row.split_k
            )
        };
        Err(located(file, Some(row.line), Some("kernelId"), Some(&row.kernel_id.to_string()), message))
    }
}

struct RowReader<'a> {
    file: &'a str,
    line: usize,
    rec: &'a csv::StringRecord,
    index: &'a ColumnIndex,
}

impl RowReader<'_> {
    fn get(&self, col: &str) -> &str {
        self.index.get(self.rec, col)
    }

    fn err(&self, col: &str, value: &str, message: impl Into<String>) -> TableError {
        located(self.file, Some(self.line), Some(col), Some(value), message.into())
    }

    fn positive_u32(&self, col: &str) -> Result<u32, TableError> {
        let v = self.get(col);
        match v.parse::<u32>() {
            Ok(x) if x > 0 => Ok(x),
            _ => Err(self.err(col, v, "expected a positive integer")),
        }
    }

    /// A finite float, or None for an empty field when `optional`.
    fn float(&self, col: &str, optional: bool) -> Result<Option<f64>, TableError> {
        let v = self.get(col);
        if v.is_empty() {
            return if optional {
                Ok(None)
            } else {
                let hint = if col == "us" { " (a failed run needs status=fail:<reason>)" } else { "" };
                Err(self.err(col, v, format!("expected a number, got an empty field{hint}")))
            };
        }
        match v.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(Some(x)),
            Ok(_) => Err(self.err(col, v, "expected a finite number (NaN and infinities are not measurements)")),
            Err(_) => Err(self.err(col, v, "expected a number")),
        }
    }

    fn non_negative(&self, col: &str) -> Result<Option<f64>, TableError> {
        let x = self.float(col, true)?;
        if matches!(x, Some(v) if v < 0.0) {
            return Err(self.err(col, self.get(col), "expected a non-negative number"));
        }
        Ok(x)
    }

    fn parse(&self, catalog: &Catalog, extras: &[(String, usize)]) -> Result<AiterRow, TableError> {
        let mut record = self.cell_columns()?;
        let extra = self.extras(extras)?;
        let failed = extra.get("status").is_some_and(|s| s.starts_with("fail:"));
        self.read_times(&mut record, failed)?;
        record.kernel_name = self.get("kernelName").to_string();
        let name = record.kernel_name.as_str();
        if record.libtype == VENDOR_LIBTYPE {
            // A reference measurement of the vendor's own GEMM: named freely, never a catalog kernel.
            if name.is_empty() || record.kernel_id != 0 || record.split_k != 0 {
                return Err(self.err(
                    "libtype",
                    self.get("libtype"),
                    "a vendor reference row needs a kernelName, kernelId 0 and splitK 0",
                ));
            }
        } else if record.libtype == Libtype::Triton {
            self.check_triton(record.kernel_id, record.split_k, name)?;
        } else {
            self.check_kernel(catalog, &record.gfx, record.libtype, record.kernel_id, name)?;
        }
        Ok(AiterRow { line: self.line, record, extra })
    }

    /// The columns that name the cell (gfx, cu_num, the shape, libtype, kernelId, splitK), checked; the
    /// time columns and the kernel name are left empty.
    fn cell_columns(&self) -> Result<AiterRecord, TableError> {
        let gfx = self.get("gfx");
        if !is_arch_name(gfx) {
            return Err(self.err("gfx", gfx, "expected an architecture name such as gfx942, gfx950 or sm_90"));
        }
        let cu_num = self.positive_u32("cu_num")?;
        let (m, n, k) = (self.positive_u32("M")?, self.positive_u32("N")?, self.positive_u32("K")?);
        let libtype_text = self.get("libtype");
        let libtype = match Libtype::parse(libtype_text) {
            Some(t) => t,
            _ => {
                return Err(self.err("libtype", libtype_text, "expected \"ck\", \"cktile\", \"vendor\" or \"triton\""))
            }
        };
        let id_text = self.get("kernelId");
        let kernel_id: i32 = id_text.parse().map_err(|_| self.err("kernelId", id_text, "expected an integer"))?;
        let sk_text = self.get("splitK");
        let split_k = match sk_text.parse::<u32>() {
            Ok(s) if s <= MAX_SPLIT_K => s,
            _ => {
                return Err(self.err(
                    "splitK",
                    sk_text,
                    format!("expected log2 of the K split, an integer 0..={MAX_SPLIT_K}"),
                ))
            }
        };
        let (gfx, kernel_name) = (gfx.to_string(), String::new());
        let (us, tflops, bw, err_ratio) = (None, None, None, None);
        Ok(AiterRecord { gfx, cu_num, m, n, k, libtype, kernel_id, split_k, us, kernel_name, tflops, bw, err_ratio })
    }

    /// The non-empty extra columns, checked.
    fn extras(&self, extras: &[(String, usize)]) -> Result<BTreeMap<String, String>, TableError> {
        let mut extra = BTreeMap::new();
        for (name, i) in extras {
            let v = self.rec.get(*i).unwrap_or("");
            if !v.is_empty() {
                extra.insert(name.clone(), v.to_string());
            }
        }
        self.check_extras(&extra)?;
        Ok(extra)
    }

    /// `us`, `tflops`, `bw` and `errRatio` into `record` (only a `failed` row may leave us and errRatio
    /// empty; an empty errRatio reads as 0).
    fn read_times(&self, record: &mut AiterRecord, failed: bool) -> Result<(), TableError> {
        // A time, when given, must be a positive finite number; only failed rows may leave it empty.
        let us = self.float("us", failed)?;
        if matches!(us, Some(t) if t <= 0.0) {
            return Err(self.err(
                "us",
                self.get("us"),
                "expected a positive kernel time in microseconds (rows of failed runs need status=fail:<reason> and may leave us empty)",
            ));
        }
        if let Some(t) = us.filter(|t| !US_RANGE.contains(t)) {
            return Err(self.err(
                "us",
                self.get("us"),
                format!(
                    "kernel time {t:e} us is outside {:e}..={:e} us, the range of real measurements; fix or remove the row",
                    US_RANGE.start(),
                    US_RANGE.end()
                ),
            ));
        }
        record.us = us;
        record.tflops = self.non_negative("tflops")?;
        record.bw = self.non_negative("bw")?;
        let err_ratio = self.float("errRatio", failed)?.unwrap_or_default();
        if !(0.0..=1.0).contains(&err_ratio) {
            return Err(self.err("errRatio", self.get("errRatio"), "expected a share of elements in [0, 1]"));
        }
        record.err_ratio = Some(err_ratio);
        Ok(())
    }

    fn check_extras(&self, extra: &BTreeMap<String, String>) -> Result<(), TableError> {
        if let Some(s) = extra.get("status") {
            if s.parse::<RowStatus>().is_err() {
                return Err(self.err("status", s, "expected \"ok\" or \"fail:<reason>\""));
            }
        }
        if let Some(t) = extra.get("timing") {
            if t == "estimate" {
                // The harness's screening figure (two warm-up launches, `--slow-reps 0`): not a latency.
                return Err(self.err(
                    "timing",
                    t,
                    "a screening estimate, not a measured latency: measure the cell again (harness \
                     triton_plan.py --done-rescreen) or drop the row",
                ));
            }
        }
        if let Some(r) = extra.get("recheck") {
            if r != "0" && r != "1" {
                return Err(self.err("recheck", r, "expected 0 or 1"));
            }
        }
        if let Some(r) = extra.get("reps") {
            // A failed run may have timed nothing (reps = 0).
            let failed = extra.get("status").is_some_and(|s| s.starts_with("fail:"));
            if !r.parse::<u32>().is_ok_and(|x| x > 0 || failed) {
                return Err(self.err("reps", r, "expected a positive integer (0 only with status=fail:<reason>)"));
            }
        }
        for col in NUMERIC_EXTRAS {
            if let Some(v) = extra.get(col) {
                if !v.parse::<f64>().is_ok_and(|x| x.is_finite() && x >= 0.0) {
                    return Err(self.err(col, v, "expected a finite non-negative number of microseconds"));
                }
            }
        }
        Ok(())
    }

    /// A triton row: the name must be a config of the family, kernelId its packed id, splitK 0.
    fn check_triton(&self, kernel_id: i32, split_k: u32, name: &str) -> Result<(), TableError> {
        let cfg = crate::catalog::triton::TritonConfig::parse_name(name)
            .map_err(|e| self.err("kernelName", name, e.to_string()))?;
        if cfg.kernel_id() != kernel_id {
            return Err(self.err(
                "kernelId",
                &kernel_id.to_string(),
                format!("contradicts kernelName, whose kernelId is {}", cfg.kernel_id()),
            ));
        }
        if split_k != 0 {
            return Err(self.err("splitK", &split_k.to_string(), "a triton config has no split-K (expected 0)"));
        }
        Ok(())
    }

    /// The name must be a catalog instance of the row's libtype, and kernelId must denote the same kernel.
    fn check_kernel(
        &self,
        catalog: &Catalog,
        gfx: &str,
        libtype: Libtype,
        kernel_id: i32,
        name: &str,
    ) -> Result<(), TableError> {
        let inst: &Instance =
            catalog.resolve_name(name).map_err(|e: NameError| self.err("kernelName", name, format!("{e}")))?;
        if inst.libtype() != libtype {
            return Err(self.err("libtype", libtype.as_str(), format!("kernelName is a {} instance", inst.libtype())));
        }
        let by_id = match libtype {
            Libtype::Ck => catalog.legacy_by_id(kernel_id),
            _ => {
                let arch = catalog.cktile_arch_for_gfx(gfx).ok_or_else(|| {
                    self.err("gfx", gfx, "the catalog has no CK-tile instances for this architecture")
                })?;
                catalog.cktile_by_id(arch, kernel_id)
            }
        };
        match by_id {
            None => {
                Err(self.err("kernelId", &kernel_id.to_string(), format!("no {libtype} instance has this kernelId")))
            }
            Some(i) if i.params != inst.params => Err(self.err(
                "kernelId",
                &kernel_id.to_string(),
                format!(
                    "contradicts kernelName, which is the kernel of kernelId {} (kernelId {kernel_id} is {})",
                    inst.id, i.name
                ),
            )),
            Some(_) => Ok(()),
        }
    }
}

/// Writes rows in AITER's format: the 13 AITER columns, then the union of the rows' extra columns (sorted).
pub fn write_aiter_csv<W: Write>(w: W, rows: &[AiterRow]) -> std::io::Result<()> {
    let extra_cols: BTreeSet<&String> = rows.iter().flat_map(|r| r.extra.keys()).collect();
    let mut out = csv::Writer::from_writer(w);
    let mut header: Vec<&str> = AITER_COLUMNS.to_vec();
    header.extend(extra_cols.iter().map(|s| s.as_str()));
    out.write_record(&header)?;
    for r in rows {
        let mut rec = r.to_record();
        rec.extend(extra_cols.iter().map(|c| r.extra.get(*c).cloned().unwrap_or_default()));
        out.write_record(&rec)?;
    }
    out.flush()?;
    Ok(())
}

/// Whether `gfx` names an architecture as a journal's `gfx` column holds it: a ROCm architecture (gfx942)
/// or, for measurements on NVIDIA GPUs, the CUDA compute capability (sm_90).
pub fn is_arch_name(gfx: &str) -> bool {
    let cuda_arch =
        gfx.strip_prefix("sm_").is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_alphanumeric()));
    cuda_arch || (gfx.starts_with("gfx") && gfx.len() > 3)
}

#[cfg(test)]
mod tests {
    use super::RowStatus;

    #[test]
    fn status_words_parse_print_and_serde_round_trip() {
        assert_eq!("ok".parse::<RowStatus>(), Ok(RowStatus::Ok));
        assert_eq!("fail:oom".parse::<RowStatus>(), Ok(RowStatus::Fail("oom".into())));
        assert_eq!(RowStatus::Fail("compile".into()).to_string(), "fail:compile");
        for bad in ["", "OK", "fail:", "fail:  ", "failed"] {
            let e = bad.parse::<RowStatus>().unwrap_err();
            assert!(e.contains("neither \"ok\" nor \"fail:<reason>\""), "{bad:?}: {e}");
        }
        let s = RowStatus::Fail("timeout".into());
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"fail:timeout\"");
        assert_eq!(serde_json::from_str::<RowStatus>("\"fail:timeout\"").unwrap(), s);
        assert!(serde_json::from_str::<RowStatus>("\"bogus\"").is_err());
    }

    /// A cell holds one measurement and at most one recheck: a second recheck row of the same cell (the
    /// same device, shape, libtype, kernelId and splitK) is refused on its own line; rechecks of other
    /// cells, of another splitK or of a cell without a measurement row are fine.
    #[test]
    fn a_second_recheck_row_of_a_cell_is_refused() {
        let catalog = crate::catalog::Catalog::embedded();
        let name = catalog.legacy_by_id(8).unwrap().name.clone();
        let header = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio,recheck";
        let row = |m: u32, split_k: u32, us: &str, recheck: u8| {
            format!("gfx942,304,{m},5120,4096,ck,8,{split_k},{us},{name},1,1,0.0,{recheck}")
        };
        let table = |rows: &[String]| format!("{header}\n{}\n", rows.join("\n"));
        let ok = table(&[row(16, 0, "16.0", 0), row(16, 0, "16.5", 1), row(16, 1, "17.0", 1), row(32, 0, "18.0", 1)]);
        assert_eq!(super::parse_aiter_csv(ok.as_bytes(), "j.csv", &catalog).unwrap().len(), 4);
        for rows in [
            vec![row(16, 0, "16.0", 0), row(16, 0, "16.5", 1), row(32, 0, "18.0", 0), row(16, 0, "16.7", 1)],
            vec![row(32, 0, "18.0", 0), row(16, 0, "16.5", 1), row(32, 0, "18.1", 1), row(16, 0, "16.7", 1)],
        ] {
            let e = super::parse_aiter_csv(table(&rows).as_bytes(), "j.csv", &catalog).unwrap_err();
            assert_eq!(
                (e.line, e.column.as_deref(), e.value.as_deref()),
                (Some(5), Some("kernelId"), Some("8")),
                "{e}"
            );
            let shown = e.to_string();
            assert!(shown.contains("duplicate recheck row"), "{shown}");
            assert!(shown.contains("already re-measured on line 3"), "{shown}");
            assert!(shown.contains("at most one recheck row"), "{shown}");
        }
    }
}
