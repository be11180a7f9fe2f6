//! Reading and validating the catalog CSV files: every row's name must parse and agree with its parameter
//! columns, ids must be unique and contiguous, and the legacy default must alias a candidate.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::names::{self, ParsedName};
use super::{Catalog, CkTileParams, Instance, InstanceParams, LegacyParams, Role};

/// File name of the legacy instance table inside a catalog directory.
pub const LEGACY_FILE: &str = "ck_a8w8_blockscale_instances.csv";
/// File name of the CK-tile instance table inside a catalog directory.
pub const CKTILE_FILE: &str = "ck_a8w8_blockscale_cktile_instances.csv";

const LEGACY_COLUMNS: [&str; 24] = [
    "kernelId",
    "kernelName",
    "BLOCK_SIZE",
    "ScaleBlockM",
    "ScaleBlockN",
    "ScaleBlockK",
    "MPerBLOCK",
    "NPerBLOCK",
    "KPerBLOCK",
    "AK1",
    "BK1",
    "MPerXDL",
    "NPerXDL",
    "WAVE_MAP_M",
    "WAVE_MAP_N",
    "ABLOCK_TRANSFER",
    "BBLOCK_TRANSFER",
    "CSHUFFLE_MX_PER_WAVE_PERSHUFFLE",
    "CSHUFFLE_NX_PER_WAVE_PERSHUFFLE",
    "CBLOCK_TRANSFER",
    "CBLOCK_SPV",
    "PIPELINE_Sched",
    "PIPELINE_VERSION",
    "role",
];

const CKTILE_COLUMNS: [&str; 19] = [
    "arch",
    "kernelId",
    "kernelName",
    "M_Tile",
    "N_Tile",
    "K_Tile",
    "M_Warp",
    "N_Warp",
    "K_Warp",
    "M_Warp_Tile",
    "N_Warp_Tile",
    "K_Warp_Tile",
    "Scheduler",
    "TiledMMAPermuteN",
    "TransposeC",
    "UsePersistentKernel",
    "BlockPerCu",
    "AQRowMajor",
    "role",
];

/// Maps byte offsets of a text to 1-based line numbers. (The CSV reader's own line counter is off by one
/// line per record on files with CRLF line ends, so line numbers are derived from byte offsets instead.)
pub struct LineIndex<'a> {
    text: &'a [u8],
    newlines: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a [u8]) -> Self {
        LineIndex { text, newlines: text.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i).collect() }
    }

    /// 1-based line of the record the reader reports at byte `offset` (which may still point at the
    /// previous line's terminator, or at blank lines the reader skips).
    pub fn line_of(&self, offset: u64) -> usize {
        let mut at = (offset as usize).min(self.text.len());
        while at < self.text.len() && matches!(self.text[at], b'\r' | b'\n') {
            at += 1;
        }
        1 + self.newlines.partition_point(|&nl| nl < at)
    }
}

/// A problem in a catalog file, located by file, line and column where known.
pub type CatalogError = synth_base::diag::Located;

fn catalog_error(file: &str, line: Option<usize>, column: Option<&str>, message: impl Into<String>) -> CatalogError {
    CatalogError { line, column: column.map(str::to_string), ..CatalogError::new(file, message) }
}

/// One data row with access by column name.
struct Row<'a> {
    file: &'a str,
    line: usize,
    record: &'a csv::StringRecord,
    index: &'a HashMap<String, usize>,
}

impl Row<'_> {
    fn err(&self, column: &str, message: impl Into<String>) -> CatalogError {
        catalog_error(self.file, Some(self.line), Some(column), message)
    }

    fn get(&self, column: &str) -> &str {
        self.record.get(self.index[column]).unwrap_or("")
    }

    fn int<T: std::str::FromStr>(&self, column: &str, what: &str) -> Result<T, CatalogError> {
        let v = self.get(column);
        v.trim().parse().map_err(|_| self.err(column, format!("expected {what}, got \"{v}\"")))
    }

    fn u32(&self, column: &str) -> Result<u32, CatalogError> {
        self.int(column, "a non-negative integer")
    }

    fn xjoined<const N: usize>(&self, column: &str) -> Result<[u32; N], CatalogError> {
        let v = self.get(column);
        let parts: Vec<&str> = v.split('x').collect();
        let bad = || self.err(column, format!("expected {N} numbers joined by 'x', got \"{v}\""));
        if parts.len() != N {
            return Err(bad());
        }
        let mut out = [0; N];
        for (slot, p) in out.iter_mut().zip(parts) {
            *slot = p.trim().parse().map_err(|_| bad())?;
        }
        Ok(out)
    }

    fn flag(&self, column: &str) -> Result<bool, CatalogError> {
        match self.get(column).trim() {
            "0" => Ok(false),
            "1" => Ok(true),
            v => Err(self.err(column, format!("expected 0 or 1, got \"{v}\""))),
        }
    }

    fn scheduler(&self, column: &str) -> Result<String, CatalogError> {
        let v = self.get(column);
        let lower = v.trim().to_ascii_lowercase();
        if names::SCHEDULERS.contains(&lower.as_str()) {
            Ok(lower)
        } else {
            Err(self.err(column, format!("expected a scheduler ({}), got \"{v}\"", names::SCHEDULERS.join(", "))))
        }
    }

    fn role(&self, id: i32) -> Result<Role, CatalogError> {
        let role = self.get("role");
        match (role, id) {
            ("candidate", 0..) => Ok(Role::Candidate),
            ("default", -1) => Ok(Role::Default),
            ("candidate", _) => Err(self.err("role", format!("a candidate needs kernelId >= 0, got {id}"))),
            ("default", _) => Err(self.err("role", format!("the default row must have kernelId -1, got {id}"))),
            _ => Err(self.err("role", format!("expected \"candidate\" or \"default\", got \"{role}\""))),
        }
    }
}

/// Reads a CSV with exactly the `expected` columns (any order) and hands each row to `each`.
fn for_each_row(
    text: &str,
    file: &str,
    expected: &[&str],
    mut each: impl FnMut(&Row) -> Result<(), CatalogError>,
) -> Result<(), CatalogError> {
    let lines = LineIndex::new(text.as_bytes());
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).from_reader(text.as_bytes());
    let header = rdr.headers().map_err(|e| catalog_error(file, Some(1), None, format!("bad header: {e}")))?.clone();
    let mut index = HashMap::new();
    for (i, h) in header.iter().enumerate() {
        if !expected.contains(&h) {
            return Err(catalog_error(
                file,
                Some(1),
                Some(h),
                format!("unexpected column; expected {}", expected.join(",")),
            ));
        }
        if index.insert(h.to_string(), i).is_some() {
            return Err(catalog_error(file, Some(1), Some(h), "column appears twice"));
        }
    }
    if let Some(missing) = expected.iter().find(|c| !index.contains_key(**c)) {
        return Err(catalog_error(file, Some(1), Some(missing), "required column is missing from the header"));
    }
    for rec in rdr.records() {
        let rec = rec.map_err(|e| {
            let line = e.position().map(|p| lines.line_of(p.byte()));
            catalog_error(file, line, None, format!("malformed CSV row: {e}"))
        })?;
        let line = rec.position().map_or(0, |p| lines.line_of(p.byte()));
        each(&Row { file, line, record: &rec, index: &index })?;
    }
    Ok(())
}

/// Legacy parameters rendered as the CSV column strings, for the name-vs-columns check.
fn legacy_columns(p: &LegacyParams) -> Vec<(&'static str, String)> {
    let x = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join("x");
    vec![
        ("ScaleBlockM", p.scale_block_m.to_string()),
        ("ScaleBlockN", p.scale_block_n.to_string()),
        ("ScaleBlockK", p.scale_block_k.to_string()),
        ("BLOCK_SIZE", p.block_size.to_string()),
        ("MPerBLOCK", p.m_per_block.to_string()),
        ("NPerBLOCK", p.n_per_block.to_string()),
        ("KPerBLOCK", p.k_per_block.to_string()),
        ("AK1", p.ak1.to_string()),
        ("BK1", p.bk1.to_string()),
        ("MPerXDL", p.m_per_xdl.to_string()),
        ("NPerXDL", p.n_per_xdl.to_string()),
        ("WAVE_MAP_M", p.m_xdl_per_wave.to_string()),
        ("WAVE_MAP_N", p.n_xdl_per_wave.to_string()),
        ("ABLOCK_TRANSFER", x(&p.a_block_transfer)),
        ("BBLOCK_TRANSFER", x(&p.b_block_transfer)),
        ("CBLOCK_TRANSFER", x(&p.c_block_transfer)),
        ("CBLOCK_SPV", p.c_block_spv.to_string()),
        ("CSHUFFLE_MX_PER_WAVE_PERSHUFFLE", p.cshuffle_m_xdl_per_wave.to_string()),
        ("CSHUFFLE_NX_PER_WAVE_PERSHUFFLE", p.cshuffle_n_xdl_per_wave.to_string()),
        ("PIPELINE_Sched", p.scheduler.clone()),
        ("PIPELINE_VERSION", p.pipeline.to_string()),
    ]
}

fn cktile_columns(p: &CkTileParams) -> Vec<(&'static str, String)> {
    let b = |v: bool| if v { "1" } else { "0" }.to_string();
    vec![
        ("M_Tile", p.m_tile.to_string()),
        ("N_Tile", p.n_tile.to_string()),
        ("K_Tile", p.k_tile.to_string()),
        ("M_Warp", p.m_warp.to_string()),
        ("N_Warp", p.n_warp.to_string()),
        ("K_Warp", p.k_warp.to_string()),
        ("M_Warp_Tile", p.m_warp_tile.to_string()),
        ("N_Warp_Tile", p.n_warp_tile.to_string()),
        ("K_Warp_Tile", p.k_warp_tile.to_string()),
        ("Scheduler", p.scheduler.clone()),
        ("TiledMMAPermuteN", b(p.tiled_mma_permute_n)),
        ("TransposeC", b(p.transpose_c)),
        ("UsePersistentKernel", b(p.use_persistent_kernel)),
        ("BlockPerCu", p.block_per_cu.to_string()),
        ("AQRowMajor", b(p.aq_row_major)),
    ]
}

/// Reports the first column whose value disagrees with the name.
fn check_agreement(
    row: &Row,
    from_columns: Vec<(&'static str, String)>,
    from_name: Vec<(&'static str, String)>,
) -> Result<(), CatalogError> {
    for ((col, have), (_, want)) in from_columns.iter().zip(&from_name) {
        if have != want {
            return Err(row.err(
                col,
                format!(
                    "value \"{}\" contradicts kernelName \"{}\", which says \"{want}\"",
                    row.get(col),
                    row.get("kernelName")
                ),
            ));
        }
    }
    Ok(())
}

fn legacy_row(row: &Row) -> Result<Instance, CatalogError> {
    let id: i32 = row.int("kernelId", "an integer kernelId")?;
    let role = row.role(id)?;
    let name = row.get("kernelName");
    let from_name = match names::parse_name(name).map_err(|e| row.err("kernelName", e.to_string()))? {
        ParsedName::Legacy(p) => p,
        other => {
            return Err(row.err(
                "kernelName",
                format!("expected a current-grammar CK legacy name, got a {:?} name", other.grammar()),
            ))
        }
    };
    let from_cols = LegacyParams {
        scale_block_m: row.u32("ScaleBlockM")?,
        scale_block_n: row.u32("ScaleBlockN")?,
        scale_block_k: row.u32("ScaleBlockK")?,
        block_size: row.u32("BLOCK_SIZE")?,
        m_per_block: row.u32("MPerBLOCK")?,
        n_per_block: row.u32("NPerBLOCK")?,
        k_per_block: row.u32("KPerBLOCK")?,
        ak1: row.u32("AK1")?,
        bk1: row.u32("BK1")?,
        m_per_xdl: row.u32("MPerXDL")?,
        n_per_xdl: row.u32("NPerXDL")?,
        m_xdl_per_wave: row.u32("WAVE_MAP_M")?,
        n_xdl_per_wave: row.u32("WAVE_MAP_N")?,
        a_block_transfer: row.xjoined::<3>("ABLOCK_TRANSFER")?,
        b_block_transfer: row.xjoined::<3>("BBLOCK_TRANSFER")?,
        c_block_transfer: row.xjoined::<4>("CBLOCK_TRANSFER")?,
        c_block_spv: row.u32("CBLOCK_SPV")?,
        cshuffle_m_xdl_per_wave: row.u32("CSHUFFLE_MX_PER_WAVE_PERSHUFFLE")?,
        cshuffle_n_xdl_per_wave: row.u32("CSHUFFLE_NX_PER_WAVE_PERSHUFFLE")?,
        scheduler: row.scheduler("PIPELINE_Sched")?,
        pipeline: row.u32("PIPELINE_VERSION")?,
    };
    check_agreement(row, legacy_columns(&from_cols), legacy_columns(&from_name))?;
    Ok(Instance { id, name: name.to_string(), arch: None, role, params: InstanceParams::Ck(from_name) })
}

fn cktile_row(row: &Row) -> Result<Instance, CatalogError> {
    let arch = row.get("arch").trim();
    if arch.is_empty() || !arch.starts_with("gfx") {
        return Err(row.err("arch", format!("expected an architecture such as gfx942 or gfx95x, got \"{arch}\"")));
    }
    let id: i32 = row.int("kernelId", "an integer kernelId")?;
    let role = row.role(id)?;
    let name = row.get("kernelName");
    let from_name = match names::parse_name(name).map_err(|e| row.err("kernelName", e.to_string()))? {
        ParsedName::CkTile(p) => p,
        other => {
            return Err(row.err("kernelName", format!("expected a CK-tile name, got a {:?} name", other.grammar())))
        }
    };
    let from_cols = CkTileParams {
        m_tile: row.u32("M_Tile")?,
        n_tile: row.u32("N_Tile")?,
        k_tile: row.u32("K_Tile")?,
        m_warp: row.u32("M_Warp")?,
        n_warp: row.u32("N_Warp")?,
        k_warp: row.u32("K_Warp")?,
        m_warp_tile: row.u32("M_Warp_Tile")?,
        n_warp_tile: row.u32("N_Warp_Tile")?,
        k_warp_tile: row.u32("K_Warp_Tile")?,
        scheduler: row.scheduler("Scheduler")?,
        tiled_mma_permute_n: row.flag("TiledMMAPermuteN")?,
        transpose_c: row.flag("TransposeC")?,
        use_persistent_kernel: row.flag("UsePersistentKernel")?,
        block_per_cu: row.u32("BlockPerCu")?,
        aq_row_major: row.flag("AQRowMajor")?,
    };
    check_agreement(row, cktile_columns(&from_cols), cktile_columns(&from_name))?;
    Ok(Instance {
        id,
        name: name.to_string(),
        arch: Some(arch.to_string()),
        role,
        params: InstanceParams::Cktile(from_name),
    })
}

/// Checks that candidate ids of one group are exactly 0..n.
fn check_contiguous(file: &str, group: &str, ids: &[(i32, usize)]) -> Result<(), CatalogError> {
    let mut sorted: Vec<(i32, usize)> = ids.to_vec();
    sorted.sort();
    for (expect, (id, line)) in sorted.iter().enumerate() {
        if *id != expect as i32 {
            return Err(catalog_error(
                file,
                Some(*line),
                Some("kernelId"),
                format!("{group}candidate kernelIds must be 0..{} without gaps or repeats; found {id} where {expect} was expected", sorted.len() - 1),
            ));
        }
    }
    Ok(())
}

/// Parses and validates both catalog files.
pub fn parse_catalog(
    legacy_csv: &str,
    legacy_file: &str,
    cktile_csv: &str,
    cktile_file: &str,
) -> Result<Catalog, CatalogError> {
    let mut legacy = Vec::new();
    let mut default: Option<(Instance, usize)> = None;
    let mut ids = Vec::new();
    for_each_row(legacy_csv, legacy_file, &LEGACY_COLUMNS, |row| {
        let inst = legacy_row(row)?;
        if inst.role == Role::Default {
            if default.is_some() {
                return Err(row.err("role", "a second default row; the legacy table has exactly one (kernelId -1)"));
            }
            default = Some((inst, row.line));
        } else {
            ids.push((inst.id, row.line));
            legacy.push(inst);
        }
        Ok(())
    })?;
    if legacy.is_empty() {
        return Err(catalog_error(legacy_file, None, None, "no candidate rows"));
    }
    check_contiguous(legacy_file, "", &ids)?;
    legacy.sort_by_key(|i| i.id);
    let mut seen = HashSet::new();
    for inst in &legacy {
        if !seen.insert(&inst.name) {
            return Err(catalog_error(
                legacy_file,
                None,
                Some("kernelName"),
                format!("name {} appears for two candidate ids", inst.name),
            ));
        }
    }
    let (default, default_line) = default
        .ok_or_else(|| catalog_error(legacy_file, None, Some("role"), "no default row (kernelId -1, role default)"))?;
    let default_alias = legacy.iter().find(|i| i.params == default.params).map(|i| i.id).ok_or_else(|| {
        catalog_error(
            legacy_file,
            Some(default_line),
            Some("kernelName"),
            "the default must be one of the candidate kernels (an alias)",
        )
    })?;

    let mut cktile = Vec::new();
    let mut per_arch: BTreeMap<String, Vec<(i32, usize)>> = BTreeMap::new();
    let mut defaults: HashSet<String> = HashSet::new();
    for_each_row(cktile_csv, cktile_file, &CKTILE_COLUMNS, |row| {
        let inst = cktile_row(row)?;
        let arch = inst.arch.clone().unwrap_or_default();
        if inst.role == Role::Default {
            if !defaults.insert(arch.clone()) {
                return Err(row.err("role", format!("a second default row for {arch}")));
            }
        } else {
            per_arch.entry(arch).or_default().push((inst.id, row.line));
        }
        cktile.push(inst);
        Ok(())
    })?;
    for (arch, ids) in &per_arch {
        check_contiguous(cktile_file, &format!("{arch} "), ids)?;
    }
    Ok(Catalog { legacy, default_alias, cktile })
}
