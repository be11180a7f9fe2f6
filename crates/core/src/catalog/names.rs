//! Instance-name grammars: parse a CK blockscale instance name into its template parameters and format
//! parameters back into a name.
//!
//! Three grammars are understood (fields are joined by `_`, numbers inside a field by `x`):
//!
//! * current legacy: `a8w8_blockscale_<ScaleM x ScaleN x ScaleK>_<BlockSize x MPerBlock x NPerBlock x
//!   KPerBlock>_<AK1 x BK1>_<MPerXDL x NPerXDL>_<MXdlPerWave x NXdlPerWave>_<ABlockTransfer(3)>_
//!   <BBlockTransfer(3)>_<CBlockTransfer(4)>_<CBlockSPV>_<CShuffleMXdlPerWave x CShuffleNXdlPerWave>_
//!   <scheduler>_v<pipeline>` (14 fields);
//! * older legacy: the same without the `MXdlPerWave x NXdlPerWave` field (13 fields);
//! * CK-tile: `a8w8_blockscale_cktile_<MTile x NTile x KTile>_<MWarp x NWarp x KWarp>_<MWarpTile x NWarpTile x
//!   KWarpTile>_<scheduler>_<TiledMMAPermuteN x TransposeC x UsePersistentKernel>_<BlockPerCu>[_aqrm]`.
//!
//! Field numbers in errors are 1-based positions in the `_`-separated name (`a8w8` is field 1). Numbers
//! must be written without leading zeros, so that name → parameters → name is an exact round trip.

use super::{CkTileParams, LegacyParams};

/// Why a name could not be parsed or resolved. Every variant carries the offending name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name does not have the overall shape of any grammar (prefix or number of fields).
    #[error("instance name \"{name}\": {message}")]
    Grammar { name: String, message: String },
    /// One field is malformed.
    #[error("instance name \"{name}\": field {field} ({label}) expected {expected}, got \"{got}\"")]
    Field { name: String, field: usize, label: String, expected: String, got: String },
    /// The name parses but no catalog instance has these parameters.
    #[error("instance name \"{name}\" is not in the catalog: {detail}")]
    Unknown { name: String, detail: String },
    /// An older-grammar name matches several catalog instances (they differ only in MXdlPerWave x NXdlPerWave).
    #[error("instance name \"{name}\" (older grammar, no MXdlPerWave x NXdlPerWave field) is ambiguous: it matches {}; use the current name", .matches.join(", "))]
    Ambiguous { name: String, matches: Vec<String> },
}

impl NameError {
    /// The name the error is about.
    pub fn name(&self) -> &str {
        match self {
            NameError::Grammar { name, .. }
            | NameError::Field { name, .. }
            | NameError::Unknown { name, .. }
            | NameError::Ambiguous { name, .. } => name,
        }
    }
}

pub use super::OldLegacyParams;

/// The grammar a name was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Grammar {
    /// Current CK legacy grammar (14 fields).
    Legacy,
    /// Older CK legacy grammar without MXdlPerWave x NXdlPerWave (13 fields).
    LegacyOld,
    /// CK-tile grammar (9 fields, 10 with `_aqrm`).
    CkTile,
}

/// A parsed instance name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ParsedName {
    Legacy(LegacyParams),
    LegacyOld(OldLegacyParams),
    CkTile(CkTileParams),
}

impl ParsedName {
    /// Which grammar the name used.
    pub fn grammar(&self) -> Grammar {
        match self {
            ParsedName::Legacy(_) => Grammar::Legacy,
            ParsedName::LegacyOld(_) => Grammar::LegacyOld,
            ParsedName::CkTile(_) => Grammar::CkTile,
        }
    }

    /// Formats the parameters back in the grammar they were parsed from.
    pub fn format(&self) -> String {
        match self {
            ParsedName::Legacy(p) => format_legacy(p),
            ParsedName::LegacyOld(p) => format_old_params(p),
            ParsedName::CkTile(p) => format_cktile(p),
        }
    }
}

const PREFIX: &str = "a8w8_blockscale_";
const CKTILE_PREFIX: &str = "a8w8_blockscale_cktile_";

/// Labels of the fields of the current legacy grammar, from field 3 on.
const LEGACY_LABELS: [&str; 12] = [
    "ScaleBlockM x ScaleBlockN x ScaleBlockK",
    "BlockSize x MPerBlock x NPerBlock x KPerBlock",
    "AK1 x BK1",
    "MPerXDL x NPerXDL",
    "MXdlPerWave x NXdlPerWave",
    "ABlockTransfer",
    "BBlockTransfer",
    "CBlockTransfer",
    "CBlockSPV",
    "CShuffleMXdlPerWave x CShuffleNXdlPerWave",
    "scheduler",
    "pipeline",
];

/// Index (in [`LEGACY_LABELS`]) of the field the older grammar lacks.
const XDL_PER_WAVE_FIELD: usize = 4;

/// Labels of the CK-tile fields, from field 4 on.
const CKTILE_LABELS: [&str; 7] = [
    "MTile x NTile x KTile",
    "MWarp x NWarp x KWarp",
    "MWarpTile x NWarpTile x KWarpTile",
    "scheduler",
    "TiledMMAPermuteN x TransposeC x UsePersistentKernel",
    "BlockPerCu",
    "optional suffix",
];

/// Label of field `field` (1-based) of a name in `grammar`.
pub fn field_label(grammar: Grammar, field: usize) -> &'static str {
    match grammar {
        Grammar::Legacy => match field {
            1 | 2 => "prefix",
            3..=14 => LEGACY_LABELS[field - 3],
            _ => "extra field",
        },
        Grammar::LegacyOld => match field {
            1 | 2 => "prefix",
            3..=6 => LEGACY_LABELS[field - 3],
            7..=13 => LEGACY_LABELS[field - 2],
            _ => "extra field",
        },
        Grammar::CkTile => match field {
            1..=3 => "prefix",
            4..=10 => CKTILE_LABELS[field - 4],
            _ => "extra field",
        },
    }
}

/// Schedulers CK accepts in names (lower case, as CK and AITER write them).
pub const SCHEDULERS: [&str; 2] = ["intrawave", "interwave"];

struct Fields<'a> {
    name: &'a str,
    grammar: Grammar,
    tokens: Vec<&'a str>,
}

impl<'a> Fields<'a> {
    fn err(&self, field: usize, expected: impl Into<String>) -> NameError {
        NameError::Field {
            name: self.name.to_string(),
            field,
            label: field_label(self.grammar, field).to_string(),
            expected: expected.into(),
            got: self.tokens.get(field - 1).copied().unwrap_or("").to_string(),
        }
    }

    /// Parses field `field` (1-based) as `arity` numbers joined by 'x'; `positive` rejects zeros.
    fn nums<const N: usize>(&self, field: usize, positive: bool) -> Result<[u32; N], NameError> {
        let tok = self.tokens[field - 1];
        let expected = if N == 1 {
            if positive {
                "a positive number".to_string()
            } else {
                "a number".to_string()
            }
        } else {
            format!("{N} {}numbers joined by 'x'", if positive { "positive " } else { "" })
        };
        let parts: Vec<&str> = tok.split('x').collect();
        if parts.len() != N {
            return Err(self.err(field, expected));
        }
        let mut out = [0u32; N];
        for (slot, part) in out.iter_mut().zip(&parts) {
            let ok_digits = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
            if !ok_digits {
                return Err(self.err(field, expected));
            }
            if part.len() > 1 && part.starts_with('0') {
                return Err(self.err(field, format!("{expected} without leading zeros")));
            }
            let v: u32 = part.parse().map_err(|_| self.err(field, format!("{expected} (each below 2^32)")))?;
            if positive && v == 0 {
                return Err(self.err(field, expected));
            }
            *slot = v;
        }
        Ok(out)
    }

    fn flags<const N: usize>(&self, field: usize) -> Result<[bool; N], NameError> {
        let tok = self.tokens[field - 1];
        let parts: Vec<&str> = tok.split('x').collect();
        let expected = format!("{N} flags (0 or 1) joined by 'x'");
        if parts.len() != N {
            return Err(self.err(field, expected));
        }
        let mut out = [false; N];
        for (slot, part) in out.iter_mut().zip(&parts) {
            *slot = match *part {
                "0" => false,
                "1" => true,
                _ => return Err(self.err(field, expected)),
            };
        }
        Ok(out)
    }

    fn scheduler(&self, field: usize) -> Result<String, NameError> {
        let tok = self.tokens[field - 1];
        if SCHEDULERS.contains(&tok) {
            Ok(tok.to_string())
        } else {
            Err(self.err(field, format!("one of {}", SCHEDULERS.join(", "))))
        }
    }

    fn pipeline(&self, field: usize) -> Result<u32, NameError> {
        let tok = self.tokens[field - 1];
        match tok.strip_prefix('v') {
            Some(d) if d.len() == 1 && matches!(d.as_bytes()[0], b'1'..=b'5') => Ok(u32::from(d.as_bytes()[0] - b'0')),
            _ => Err(self.err(field, "a pipeline version v1..v5")),
        }
    }
}

/// Parses an instance name in any of the three grammars.
pub fn parse_name(name: &str) -> Result<ParsedName, NameError> {
    let grammar_err = |message: String| NameError::Grammar { name: name.to_string(), message };
    if !name.starts_with(PREFIX) {
        return Err(grammar_err(format!(
            "expected a name starting with \"{PREFIX}\" (CK legacy) or \"{CKTILE_PREFIX}\" (CK-tile)"
        )));
    }
    let tokens: Vec<&str> = name.split('_').collect();
    if name.starts_with(CKTILE_PREFIX) {
        if tokens.len() != 9 && tokens.len() != 10 {
            return Err(grammar_err(format!(
                "a CK-tile name has 9 '_'-separated fields (10 with the \"_aqrm\" suffix), this one has {}",
                tokens.len()
            )));
        }
        return parse_cktile(Fields { name, grammar: Grammar::CkTile, tokens }).map(ParsedName::CkTile);
    }
    match tokens.len() {
        14 => parse_legacy(Fields { name, grammar: Grammar::Legacy, tokens }).map(ParsedName::Legacy),
        13 => parse_legacy_old(Fields { name, grammar: Grammar::LegacyOld, tokens }).map(ParsedName::LegacyOld),
        n => Err(grammar_err(format!(
            "a CK legacy name has 14 '_'-separated fields (13 in the older grammar without MXdlPerWave x \
             NXdlPerWave), this one has {n}"
        ))),
    }
}

/// Parses fields 3.. of a legacy name; `xdl` says whether the MXdlPerWave x NXdlPerWave field is present.
fn parse_legacy_common(f: &Fields, xdl: bool) -> Result<(OldLegacyParams, Option<[u32; 2]>), NameError> {
    let [scale_block_m, scale_block_n, scale_block_k] = f.nums::<3>(3, true)?;
    let [block_size, m_per_block, n_per_block, k_per_block] = f.nums::<4>(4, true)?;
    let [ak1, bk1] = f.nums::<2>(5, true)?;
    let [m_per_xdl, n_per_xdl] = f.nums::<2>(6, true)?;
    let (xdl_per_wave, o) = if xdl { (Some(f.nums::<2>(7, true)?), 8) } else { (None, 7) };
    let a_block_transfer = f.nums::<3>(o, true)?;
    let b_block_transfer = f.nums::<3>(o + 1, true)?;
    let c_block_transfer = f.nums::<4>(o + 2, true)?;
    let [c_block_spv] = f.nums::<1>(o + 3, true)?;
    let [cshuffle_m_xdl_per_wave, cshuffle_n_xdl_per_wave] = f.nums::<2>(o + 4, true)?;
    let scheduler = f.scheduler(o + 5)?;
    let pipeline = f.pipeline(o + 6)?;
    Ok((
        OldLegacyParams {
            scale_block_m,
            scale_block_n,
            scale_block_k,
            block_size,
            m_per_block,
            n_per_block,
            k_per_block,
            ak1,
            bk1,
            m_per_xdl,
            n_per_xdl,
            a_block_transfer,
            b_block_transfer,
            c_block_transfer,
            c_block_spv,
            cshuffle_m_xdl_per_wave,
            cshuffle_n_xdl_per_wave,
            scheduler,
            pipeline,
        },
        xdl_per_wave,
    ))
}

fn parse_legacy(f: Fields) -> Result<LegacyParams, NameError> {
    let (old, xdl) = parse_legacy_common(&f, true)?;
    let [m, n] = xdl.expect("current grammar always has the XDL-per-wave field");
    Ok(old.with_xdl_per_wave(m, n))
}

fn parse_legacy_old(f: Fields) -> Result<OldLegacyParams, NameError> {
    parse_legacy_common(&f, false).map(|(p, _)| p)
}

fn parse_cktile(f: Fields) -> Result<CkTileParams, NameError> {
    let [m_tile, n_tile, k_tile] = f.nums::<3>(4, true)?;
    let [m_warp, n_warp, k_warp] = f.nums::<3>(5, true)?;
    let [m_warp_tile, n_warp_tile, k_warp_tile] = f.nums::<3>(6, true)?;
    let scheduler = f.scheduler(7)?;
    let [tiled_mma_permute_n, transpose_c, use_persistent_kernel] = f.flags::<3>(8)?;
    let [block_per_cu] = f.nums::<1>(9, true)?;
    let aq_row_major = match f.tokens.get(9) {
        None => false,
        Some(&"aqrm") => true,
        Some(_) => return Err(f.err(10, "\"aqrm\" (A-scale row-major) or nothing")),
    };
    Ok(CkTileParams {
        m_tile,
        n_tile,
        k_tile,
        m_warp,
        n_warp,
        k_warp,
        m_warp_tile,
        n_warp_tile,
        k_warp_tile,
        scheduler,
        tiled_mma_permute_n,
        transpose_c,
        use_persistent_kernel,
        block_per_cu,
        aq_row_major,
    })
}

fn join(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join("x")
}

/// Formats legacy parameters in the current grammar.
pub fn format_legacy(p: &LegacyParams) -> String {
    let old = OldLegacyParams::from(p);
    let mut fields = old_fields(&old);
    fields.insert(XDL_PER_WAVE_FIELD + 2, join(&[p.m_xdl_per_wave, p.n_xdl_per_wave]));
    fields.join("_")
}

/// Formats legacy parameters in the older grammar (without MXdlPerWave x NXdlPerWave).
pub fn format_legacy_old(p: &LegacyParams) -> String {
    format_old_params(&OldLegacyParams::from(p))
}

/// Formats older-grammar parameters.
pub fn format_old_params(p: &OldLegacyParams) -> String {
    old_fields(p).join("_")
}

fn old_fields(p: &OldLegacyParams) -> Vec<String> {
    vec![
        "a8w8".to_string(),
        "blockscale".to_string(),
        join(&[p.scale_block_m, p.scale_block_n, p.scale_block_k]),
        join(&[p.block_size, p.m_per_block, p.n_per_block, p.k_per_block]),
        join(&[p.ak1, p.bk1]),
        join(&[p.m_per_xdl, p.n_per_xdl]),
        join(&p.a_block_transfer),
        join(&p.b_block_transfer),
        join(&p.c_block_transfer),
        p.c_block_spv.to_string(),
        join(&[p.cshuffle_m_xdl_per_wave, p.cshuffle_n_xdl_per_wave]),
        p.scheduler.clone(),
        format!("v{}", p.pipeline),
    ]
}

/// Formats CK-tile parameters.
pub fn format_cktile(p: &CkTileParams) -> String {
    let flag = |b: bool| if b { 1 } else { 0 };
    let mut s = format!(
        "a8w8_blockscale_cktile_{}_{}_{}_{}_{}_{}",
        join(&[p.m_tile, p.n_tile, p.k_tile]),
        join(&[p.m_warp, p.n_warp, p.k_warp]),
        join(&[p.m_warp_tile, p.n_warp_tile, p.k_warp_tile]),
        p.scheduler,
        join(&[flag(p.tiled_mma_permute_n), flag(p.transpose_c), flag(p.use_persistent_kernel)]),
        p.block_per_cu
    );
    if p.aq_row_major {
        s.push_str("_aqrm");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID8: &str =
        "a8w8_blockscale_1x128x128_256x16x64x256_16x16_16x16_1x1_16x16x1_16x16x1_1x16x1x16_4_1x1_intrawave_v1";

    #[test]
    fn current_grammar_fields() {
        let ParsedName::Legacy(p) = parse_name(ID8).unwrap() else { panic!("wrong grammar") };
        assert_eq!((p.block_size, p.m_per_block, p.n_per_block, p.k_per_block), (256, 16, 64, 256));
        assert_eq!(p.c_block_transfer, [1, 16, 1, 16]);
        assert_eq!((p.c_block_spv, p.pipeline), (4, 1));
        assert_eq!(format_legacy(&p), ID8);
        assert_eq!(
            format_legacy_old(&p),
            "a8w8_blockscale_1x128x128_256x16x64x256_16x16_16x16_16x16x1_16x16x1_1x16x1x16_4_1x1_intrawave_v1"
        );
    }

    #[test]
    fn old_grammar_labels_shift() {
        let name = "a8w8_blockscale_1x128x128_256x16x64x256_16x16_16x16_16x16x1_16x16_1x16x1x16_4_1x1_intrawave_v1";
        let e = parse_name(name).unwrap_err();
        assert!(
            e.to_string().contains("field 8 (BBlockTransfer) expected 3 positive numbers joined by 'x', got \"16x16\""),
            "{e}"
        );
    }

    #[test]
    fn leading_zero_rejected() {
        let e = parse_name(&ID8.replace("_4_1x1", "_04_1x1")).unwrap_err();
        assert!(matches!(e, NameError::Field { field: 11, .. }), "{e}");
    }
}
