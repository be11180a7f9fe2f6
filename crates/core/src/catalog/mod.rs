//! CK a8w8 blockscale instance catalog: the legacy instances (ids 0..18, default -1 = alias of 7) and the
//! CK-tile instances per architecture, loaded from `ck-instances/` (embedded at build time).

pub mod kinds;
pub mod load;
pub mod names;
pub mod triton;

use serde::{Deserialize, Serialize};

/// The deepest split-K level (log2 of KBatch) a bench cell or a rule leaf may carry: KBatch 32. AITER's
/// blockscale tuner (`compute_gemm_SplitK`, uncapped) reaches levels 4–5 on the small-N, large-K layers at
/// M ≤ 64 on the H200's 132 SMs (the zoo's table in `measurements/zoo/README.md`); `synth bench --split-k
/// aiter` measures up to here, `auto` up to 3. The AITER patch passes KBatch = 1 << splitK.
pub const MAX_SPLIT_K: u32 = 5;

/// Declares the complete legacy parameters and the older grammar's (the same fields less the XDL-per-wave
/// ones) from one field list, with the conversions between them: dropping the XDL-per-wave fields
/// (`From<&Full> for Old`) and adding them back (`Old::with_xdl_per_wave`).
macro_rules! legacy_params {
    (
        $(#[$full_meta:meta])* full $full:ident;
        $(#[$old_meta:meta])* old $old:ident;
        [$($(#[$hm:meta])* $h:ident: $ht:ty,)*]
        xdl [$($(#[$xm:meta])* $x:ident: $xt:ty,)*]
        [$($(#[$tm:meta])* $t:ident: $tt:ty,)*]
    ) => {
        $(#[$full_meta])*
        pub struct $full {
            $($(#[$hm])* pub $h: $ht,)*
            $($(#[$xm])* pub $x: $xt,)*
            $($(#[$tm])* pub $t: $tt,)*
        }

        $(#[$old_meta])*
        pub struct $old {
            $($(#[$hm])* pub $h: $ht,)*
            $($(#[$tm])* pub $t: $tt,)*
        }

        impl From<&$full> for $old {
            fn from(p: &$full) -> Self {
                let $full { $($h,)* $($t,)* .. } = p.clone();
                $old { $($h,)* $($t,)* }
            }
        }

        impl $old {
            /// Adds the MXdlPerWave x NXdlPerWave field back, giving complete parameters.
            pub fn with_xdl_per_wave(&self, $($x: $xt),*) -> $full {
                let $old { $($h,)* $($t,)* } = self.clone();
                $full { $($h,)* $($x,)* $($t,)* }
            }
        }
    };
}

legacy_params! {
    /// Parameters of a CK legacy (`libtype` = `ck`) blockscale instance, in name order.
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
    full LegacyParams;
    /// Parameters of an older-grammar legacy name: every [`LegacyParams`] field except MXdlPerWave x
    /// NXdlPerWave, which those names do not carry.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    old OldLegacyParams;
    [
        scale_block_m: u32,
        scale_block_n: u32,
        scale_block_k: u32,
        block_size: u32,
        m_per_block: u32,
        n_per_block: u32,
        k_per_block: u32,
        ak1: u32,
        bk1: u32,
        m_per_xdl: u32,
        n_per_xdl: u32,
    ]
    xdl [
        m_xdl_per_wave: u32,
        n_xdl_per_wave: u32,
    ]
    [
        a_block_transfer: [u32; 3],
        b_block_transfer: [u32; 3],
        c_block_transfer: [u32; 4],
        c_block_spv: u32,
        cshuffle_m_xdl_per_wave: u32,
        cshuffle_n_xdl_per_wave: u32,
        /// "intrawave" or "interwave" as written in names (lower case).
        scheduler: String,
        /// Pipeline version: 1 (plain) or 3 (prefetching).
        pipeline: u32,
    ]
}

/// Parameters of a CK-tile (`libtype` = `cktile`) blockscale instance.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CkTileParams {
    pub m_tile: u32,
    pub n_tile: u32,
    pub k_tile: u32,
    pub m_warp: u32,
    pub n_warp: u32,
    pub k_warp: u32,
    pub m_warp_tile: u32,
    pub n_warp_tile: u32,
    pub k_warp_tile: u32,
    pub scheduler: String,
    pub tiled_mma_permute_n: bool,
    pub transpose_c: bool,
    pub use_persistent_kernel: bool,
    pub block_per_cu: u32,
    pub aq_row_major: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "libtype", rename_all = "lowercase")]
pub enum InstanceParams {
    Ck(LegacyParams),
    Cktile(CkTileParams),
}

/// One catalog entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    /// AITER kernelId (0..18 for legacy candidates; -1 for the default alias).
    pub id: i32,
    /// Canonical (current-grammar) name.
    pub name: String,
    /// For CK-tile entries: the architecture ("gfx942" / "gfx95x"); None for legacy.
    pub arch: Option<String>,
    /// Candidate or the default alias.
    pub role: Role,
    pub params: InstanceParams,
}

impl Instance {
    /// Output tile (MPerBlock, NPerBlock, KPerBlock) for either kind.
    pub fn tile(&self) -> (u32, u32, u32) {
        match &self.params {
            InstanceParams::Ck(p) => (p.m_per_block, p.n_per_block, p.k_per_block),
            InstanceParams::Cktile(p) => (p.m_tile, p.n_tile, p.k_tile),
        }
    }
}

/// A selectable kernel: a backend (the library that runs it; CK legacy unless said otherwise), its kernel
/// id there and a split-K (`split_k` = log2 of KBatch). Ids are the backend's: CK legacy 0..18, CK-tile
/// the catalog's, a triton config's packed id ([`triton::TritonConfig::kernel_id`]), vendor 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Candidate {
    #[serde(default, skip_serializing_if = "Libtype::is_ck")]
    pub backend: Libtype,
    pub kernel_id: i32,
    pub split_k: u32,
}

impl Candidate {
    /// A CK legacy candidate.
    pub fn new(kernel_id: i32, split_k: u32) -> Self {
        Candidate { backend: Libtype::Ck, kernel_id, split_k }
    }

    /// A candidate of `backend`.
    pub fn of(backend: Libtype, kernel_id: i32, split_k: u32) -> Self {
        Candidate { backend, kernel_id, split_k }
    }

    /// The vendor GEMM (one kernel, no split).
    pub fn vendor() -> Self {
        Candidate::of(Libtype::Vendor, 0, 0)
    }
}

/// A kernel of one backend (its candidates differ only in split-K): what "instances" of a rule count.
/// Ordered CK legacy first; a CK kernel prints as its kernelId (`7`, as before backends), another
/// backend's as `vendor#0`, `triton#67703222`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct KernelRef {
    pub backend: Libtype,
    pub id: i32,
}

impl std::fmt::Debug for KernelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::fmt::Display for KernelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.backend {
            Libtype::Ck => write!(f, "{}", self.id),
            b => write!(f, "{b}#{}", self.id),
        }
    }
}

/// A CK kernel equals its kernelId.
impl PartialEq<i32> for KernelRef {
    fn eq(&self, id: &i32) -> bool {
        self.backend.is_ck() && self.id == *id
    }
}

impl Candidate {
    /// The kernel of this candidate (backend and id, without the split).
    pub fn kernel(&self) -> KernelRef {
        KernelRef { backend: self.backend, id: self.kernel_id }
    }
}

impl std::fmt::Display for Candidate {
    /// `#7`, `#4/sk3` for CK legacy (as before backends); `vendor`, `triton:#67703222`, `cktile:#3/sk1`
    /// for the others.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.backend {
            Libtype::Ck => {}
            Libtype::Vendor if self.kernel_id == 0 && self.split_k == 0 => return f.write_str("vendor"),
            b => write!(f, "{b}:")?,
        }
        if self.split_k == 0 {
            write!(f, "#{}", self.kernel_id)
        } else {
            write!(f, "#{}/sk{}", self.kernel_id, self.split_k)
        }
    }
}

/// The whole catalog.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// Legacy candidates, ids 0..18, in id order (the default alias is not in this list).
    pub legacy: Vec<Instance>,
    /// kernelId the legacy default aliases (7).
    pub default_alias: i32,
    /// CK-tile entries for every architecture, aliases included (role "default" for -1).
    pub cktile: Vec<Instance>,
}

pub use kinds::{Backends, Libtype, Role};
pub use load::{CatalogError, CKTILE_FILE, LEGACY_FILE};
pub use names::{NameError, ParsedName};

use names::Grammar;

impl Instance {
    /// "ck" for legacy instances, "cktile" for CK-tile ones (AITER's `libtype`).
    pub fn libtype(&self) -> Libtype {
        match &self.params {
            InstanceParams::Ck(_) => Libtype::Ck,
            InstanceParams::Cktile(_) => Libtype::Cktile,
        }
    }

    /// Legacy parameters, if this is a legacy instance.
    pub fn legacy_params(&self) -> Option<&LegacyParams> {
        match &self.params {
            InstanceParams::Ck(p) => Some(p),
            InstanceParams::Cktile(_) => None,
        }
    }

    /// CK-tile parameters, if this is a CK-tile instance.
    pub fn cktile_params(&self) -> Option<&CkTileParams> {
        match &self.params {
            InstanceParams::Cktile(p) => Some(p),
            InstanceParams::Ck(_) => None,
        }
    }
}

impl Catalog {
    /// The catalog shipped in `ck-instances/`, embedded at build time. Its validity is checked by tests, so
    /// a failure here means the embedded files were edited into an invalid state.
    pub fn embedded() -> Catalog {
        load::parse_catalog(
            include_str!("../../../../ck-instances/ck_a8w8_blockscale_instances.csv"),
            LEGACY_FILE,
            include_str!("../../../../ck-instances/ck_a8w8_blockscale_cktile_instances.csv"),
            CKTILE_FILE,
        )
        .unwrap_or_else(|e| panic!("embedded instance catalog is invalid: {e}"))
    }

    /// Loads a catalog from a directory holding [`LEGACY_FILE`] and [`CKTILE_FILE`], validating every row
    /// (each name must match its parameter columns).
    pub fn load_dir(dir: &std::path::Path) -> Result<Catalog, CatalogError> {
        let read = |file: &str| {
            let path = dir.join(file);
            synth_base::input::read_text_capped(&path, synth_base::input::MAX_TABLE_BYTES, "instance catalog")
                .map_err(|e| CatalogError::io(&path, e))
        };
        let legacy_path = dir.join(LEGACY_FILE);
        let cktile_path = dir.join(CKTILE_FILE);
        load::parse_catalog(
            &read(LEGACY_FILE)?,
            &legacy_path.display().to_string(),
            &read(CKTILE_FILE)?,
            &cktile_path.display().to_string(),
        )
    }

    /// Parses a catalog from the text of the two CSV files (`*_src` name them in errors).
    pub fn from_csv_text(
        legacy_csv: &str,
        legacy_src: &str,
        cktile_csv: &str,
        cktile_src: &str,
    ) -> Result<Catalog, CatalogError> {
        load::parse_catalog(legacy_csv, legacy_src, cktile_csv, cktile_src)
    }

    /// Legacy instance by AITER kernelId: 0..18 are the candidates, -1 resolves to the default alias (id 7).
    pub fn legacy_by_id(&self, id: i32) -> Option<&Instance> {
        let id = if id == -1 { self.default_alias } else { id };
        self.legacy.iter().find(|i| i.id == id)
    }

    /// The legacy default kernel (kernelId -1): the same kernel as candidate [`Catalog::default_alias`], so
    /// this returns that candidate's entry.
    pub fn default_instance(&self) -> &Instance {
        self.legacy_by_id(self.default_alias).expect("catalog validation guarantees the default alias exists")
    }

    /// The legacy candidates, ids 0..18 in order (the default alias is not repeated).
    pub fn legacy_candidates(&self) -> &[Instance] {
        &self.legacy
    }

    /// CK-tile entries of one architecture label (`gfx942`, `gfx95x`), aliases included.
    pub fn cktile_for_arch<'a>(&'a self, arch: &'a str) -> impl Iterator<Item = &'a Instance> + 'a {
        self.cktile.iter().filter(move |i| i.arch.as_deref() == Some(arch))
    }

    /// CK-tile entry by architecture label and kernelId (-1 = that architecture's default).
    pub fn cktile_by_id(&self, arch: &str, id: i32) -> Option<&Instance> {
        self.cktile.iter().find(|i| i.arch.as_deref() == Some(arch) && i.id == id)
    }

    /// The CK-tile architecture label the catalog uses for a `gfx` value (`gfx942` → `gfx942`,
    /// `gfx950` → `gfx95x`), if the catalog has CK-tile instances for it.
    pub fn cktile_arch_for_gfx(&self, gfx: &str) -> Option<&str> {
        let archs = self.cktile.iter().filter_map(|i| i.arch.as_deref());
        let mut family = None;
        for arch in archs {
            if arch == gfx {
                return Some(arch);
            }
            if let Some(stem) = arch.strip_suffix('x') {
                if gfx.starts_with(stem) && gfx.len() == arch.len() {
                    family = Some(arch);
                }
            }
        }
        family
    }

    /// Resolves an instance name in any grammar to its catalog entry.
    ///
    /// Current legacy names match by parameters; an older legacy name (no MXdlPerWave x NXdlPerWave) resolves
    /// to the one candidate whose other parameters all match (several → [`NameError::Ambiguous`]); a CK-tile
    /// name resolves to the first entry with those parameters in catalog order, preferring candidates over
    /// default aliases (the same kernel may appear under several architectures and ids).
    pub fn resolve_name(&self, name: &str) -> Result<&Instance, NameError> {
        match names::parse_name(name)? {
            ParsedName::Legacy(p) => self
                .legacy
                .iter()
                .find(|i| i.legacy_params() == Some(&p))
                .ok_or_else(|| self.unknown(name, Grammar::Legacy)),
            ParsedName::LegacyOld(p) => {
                let hits: Vec<&Instance> = self
                    .legacy
                    .iter()
                    .filter(|i| i.legacy_params().map(OldLegacyParams::from).as_ref() == Some(&p))
                    .collect();
                match hits.as_slice() {
                    [] => Err(self.unknown(name, Grammar::LegacyOld)),
                    [one] => Ok(one),
                    many => Err(NameError::Ambiguous {
                        name: name.to_string(),
                        matches: many.iter().map(|i| format!("id {} ({})", i.id, i.name)).collect(),
                    }),
                }
            }
            ParsedName::CkTile(p) => {
                let mut hits = self.cktile.iter().filter(|i| i.cktile_params() == Some(&p));
                let first = hits.clone().find(|i| i.role == Role::Candidate);
                first.or_else(|| hits.next()).ok_or_else(|| self.unknown(name, Grammar::CkTile))
            }
        }
    }

    /// Builds the "not in the catalog" error: names the first field in which the nearest catalog instance
    /// (fewest differing fields, same grammar) differs.
    fn unknown(&self, name: &str, grammar: Grammar) -> NameError {
        let tokens: Vec<&str> = name.split('_').collect();
        let pool: Vec<(&Instance, String)> = match grammar {
            Grammar::Legacy => self.legacy.iter().map(|i| (i, i.name.clone())).collect(),
            Grammar::LegacyOld => {
                self.legacy.iter().filter_map(|i| i.legacy_params().map(|p| (i, names::format_legacy_old(p)))).collect()
            }
            Grammar::CkTile => self.cktile.iter().map(|i| (i, i.name.clone())).collect(),
        };
        let mut best: Option<(usize, &Instance, Vec<String>)> = None;
        for (inst, formatted) in &pool {
            let other: Vec<String> = formatted.split('_').map(str::to_string).collect();
            let len = tokens.len().max(other.len());
            let diff = (0..len).filter(|&f| tokens.get(f).copied() != other.get(f).map(String::as_str)).count();
            if best.as_ref().is_none_or(|(d, _, _)| diff < *d) {
                best = Some((diff, inst, other));
            }
        }
        let detail = match best {
            None => "the catalog has no instances of this kind".to_string(),
            Some((diff, inst, other)) => {
                let f = (0..tokens.len().max(other.len()))
                    .find(|&f| tokens.get(f).copied() != other.get(f).map(String::as_str))
                    .unwrap_or(0);
                let theirs = other.get(f).map(String::as_str).unwrap_or("");
                let more = if diff > 1 { format!(" ({} more field(s) differ)", diff - 1) } else { String::new() };
                let where_ = match &inst.arch {
                    Some(a) => format!("{a} id {}", inst.id),
                    None => format!("id {}", inst.id),
                };
                format!(
                    "field {} ({}) is \"{}\"; the nearest catalog instance, {where_} ({}), has \"{theirs}\"{more}. \
                     Run `synth instances` to list the catalog",
                    f + 1,
                    names::field_label(grammar, f + 1),
                    tokens.get(f).copied().unwrap_or(""),
                    inst.name,
                )
            }
        };
        NameError::Unknown { name: name.to_string(), detail }
    }
}
