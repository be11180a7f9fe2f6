//! AITER's 13-column row ([`AITER_COLUMNS`]), the one record type of a measured (shape, kernel) row that the
//! table reader ([`super::AiterRow`]), the bench journal (`measure::CellResult`) and the tuner's profile
//! reader ([`super::aiter_profile::ProfileCell`]) each extend with their own columns, with the one writer of
//! its fields ([`AiterRecord::to_record`]) and the header index the readers look columns up through
//! ([`ColumnIndex`]).

use std::collections::HashMap;

use serde::Deserialize;

use crate::catalog::{Candidate, Libtype};

use super::Shape;

/// AITER's tuned-CSV header, in AITER's order.
pub const AITER_COLUMNS: [&str; 13] =
    ["gfx", "cu_num", "M", "N", "K", "libtype", "kernelId", "splitK", "us", "kernelName", "tflops", "bw", "errRatio"];

/// The 13 AITER columns of one measured row. Serde reads it under AITER's column names (a missing
/// `libtype` is `ck`), as the harness streams it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AiterRecord {
    pub gfx: String,
    pub cu_num: u32,
    #[serde(rename = "M")]
    pub m: u32,
    #[serde(rename = "N")]
    pub n: u32,
    #[serde(rename = "K")]
    pub k: u32,
    /// `ck`, `cktile`, `vendor` or `triton`.
    #[serde(default = "ck")]
    pub libtype: Libtype,
    #[serde(rename = "kernelId")]
    pub kernel_id: i32,
    /// log2 of KBatch.
    #[serde(rename = "splitK")]
    pub split_k: u32,
    /// Kernel time in microseconds; None only on failed rows.
    pub us: Option<f64>,
    #[serde(rename = "kernelName")]
    pub kernel_name: String,
    pub tflops: Option<f64>,
    pub bw: Option<f64>,
    /// Share of wrong output elements; None only where a failed run reported none (the readers of a table
    /// read an empty field of a failed row as 0).
    #[serde(rename = "errRatio")]
    pub err_ratio: Option<f64>,
}

fn ck() -> Libtype {
    Libtype::Ck
}

/// How [`AiterRecord::to_record`] writes the time and rate columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numbers {
    /// The shortest text that reads back as the same number (tables the tool writes).
    Shortest,
    /// `us` with 4 decimals, `tflops` and `bw` with 3 (the bench journal).
    Fixed,
}

impl AiterRecord {
    pub fn shape(&self) -> Shape {
        Shape::new(self.m, self.n, self.k)
    }

    /// The row's candidate: its libtype is the backend.
    pub fn candidate(&self) -> Candidate {
        Candidate::of(self.libtype, self.kernel_id, self.split_k)
    }

    /// The 13 column values, in [`AITER_COLUMNS`] order (empty strings for absent optional values).
    pub fn to_record(&self, numbers: Numbers) -> Vec<String> {
        let num = |v: Option<f64>, decimals: usize| match (v, numbers) {
            (None, _) => String::new(),
            (Some(x), Numbers::Shortest) => x.to_string(),
            (Some(x), Numbers::Fixed) => format!("{x:.decimals$}"),
        };
        vec![
            self.gfx.clone(),
            self.cu_num.to_string(),
            self.m.to_string(),
            self.n.to_string(),
            self.k.to_string(),
            self.libtype.to_string(),
            self.kernel_id.to_string(),
            self.split_k.to_string(),
            num(self.us, 4),
            self.kernel_name.clone(),
            num(self.tflops, 3),
            num(self.bw, 3),
            self.err_ratio.map(|e| e.to_string()).unwrap_or_default(),
        ]
    }
}

/// Gives a row type that extends [`AiterRecord`] (in its field `$field`) the record's fields and methods.
#[macro_export]
macro_rules! extends_aiter_record {
    ($row:ty, $field:ident) => {
        impl std::ops::Deref for $row {
            type Target = $crate::table::aiter_record::AiterRecord;
            fn deref(&self) -> &Self::Target {
                &self.$field
            }
        }
        impl std::ops::DerefMut for $row {
            fn deref_mut(&mut self) -> &mut Self::Target {
                &mut self.$field
            }
        }
    };
}
pub use crate::extends_aiter_record;

/// A CSV header as the readers look columns up: each name's field index.
#[derive(Debug, Clone)]
pub struct ColumnIndex {
    index: HashMap<String, usize>,
}

/// What is wrong with a header ([`ColumnIndex::new`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderFault {
    /// The 1-based field is empty.
    Empty(usize),
    /// The name appears twice.
    Twice(String),
}

impl std::fmt::Display for HeaderFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderFault::Empty(field) => write!(f, "field {field} is empty"),
            HeaderFault::Twice(name) => write!(f, "names column {} twice", synth_base::sanitize::shown(name)),
        }
    }
}

impl ColumnIndex {
    /// The index of `header`, refusing the first empty name (unless `empty_ok`: then empty names are left
    /// out) or repeated name, in header order.
    pub fn new(header: &csv::StringRecord, empty_ok: bool) -> Result<ColumnIndex, HeaderFault> {
        let mut index = HashMap::new();
        for (i, h) in header.iter().enumerate() {
            if h.trim().is_empty() {
                if empty_ok {
                    continue;
                }
                return Err(HeaderFault::Empty(i + 1));
            }
            if index.insert(h.to_string(), i).is_some() {
                return Err(HeaderFault::Twice(h.to_string()));
            }
        }
        Ok(ColumnIndex { index })
    }

    /// Whether the header has column `col`.
    pub fn has(&self, col: &str) -> bool {
        self.index.contains_key(col)
    }

    /// The first AITER column the header lacks.
    pub fn missing_aiter_column(&self) -> Option<&'static str> {
        AITER_COLUMNS.iter().copied().find(|c| !self.index.contains_key(*c))
    }

    /// The field of column `col` in `rec` ("" when the header or the record lacks it).
    pub fn get<'r>(&self, rec: &'r csv::StringRecord, col: &str) -> &'r str {
        self.index.get(col).and_then(|&i| rec.get(i)).unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> AiterRecord {
        AiterRecord {
            gfx: "gfx942".into(),
            cu_num: 304,
            m: 16,
            n: 5120,
            k: 4096,
            libtype: Libtype::Cktile,
            kernel_id: 7,
            split_k: 2,
            us: Some(16.1),
            kernel_name: "kern".into(),
            tflops: Some(41.61),
            bw: None,
            err_ratio: None,
        }
    }

    /// The tables' writer keeps the shortest text of a number, the journal's fixed decimals; absent
    /// values are empty fields in both.
    #[test]
    fn the_record_writer_writes_each_number_style() {
        let head = ["gfx942", "304", "16", "5120", "4096", "cktile", "7", "2"];
        let mut want: Vec<&str> = head.to_vec();
        want.extend(["16.1", "kern", "41.61", "", ""]);
        assert_eq!(record().to_record(Numbers::Shortest), want);
        let mut want: Vec<&str> = head.to_vec();
        want.extend(["16.1000", "kern", "41.610", "", ""]);
        assert_eq!(record().to_record(Numbers::Fixed), want);
        let r = AiterRecord { err_ratio: Some(0.0), us: None, ..record() };
        assert_eq!(r.to_record(Numbers::Fixed)[8..], ["", "kern", "41.610", "", "0"]);
    }

    /// Serde reads the harness's names; a missing libtype is ck, a missing or null errRatio absent.
    #[test]
    fn serde_reads_aiter_column_names() {
        let json = r#"{"gfx":"gfx942","cu_num":304,"M":16,"N":5120,"K":4096,"kernelId":7,"splitK":2,
            "us":16.1,"kernelName":"kern","tflops":41.61,"bw":null}"#;
        let r: AiterRecord = serde_json::from_str(json).unwrap();
        assert_eq!(r, AiterRecord { libtype: Libtype::Ck, ..record() });
    }

    /// The first fault in header order is the one reported; `empty_ok` leaves empty names out.
    #[test]
    fn the_header_index_reports_the_first_fault() {
        let header = |s: &str| csv::StringRecord::from(s.split(',').collect::<Vec<_>>());
        assert_eq!(ColumnIndex::new(&header("a,a,,b"), false).unwrap_err(), HeaderFault::Twice("a".into()));
        assert_eq!(ColumnIndex::new(&header("a,,a"), false).unwrap_err(), HeaderFault::Empty(2));
        assert!(!ColumnIndex::new(&header("a,,b,"), true).unwrap().has(""));
        assert_eq!(ColumnIndex::new(&header(",a,,a"), true).unwrap_err(), HeaderFault::Twice("a".into()));
        let index = ColumnIndex::new(&header("gfx,M,us"), false).unwrap();
        assert_eq!(index.missing_aiter_column(), Some("cu_num"));
        assert_eq!(index.get(&header("gfx942,16"), "us"), "");
        assert_eq!(index.get(&header("gfx942,16"), "M"), "16");
    }
}
