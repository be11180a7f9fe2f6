//! CK a8w8 blockscale instance catalog: the legacy instances (ids 0..18, default -1 = alias of 7) and the
//! CK-tile instances per architecture, loaded from `ck-instances/` (embedded at build time).

pub mod names;

use serde::{Deserialize, Serialize};

/// Parameters of a CK legacy (`libtype` = `ck`) blockscale instance, in name order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LegacyParams {
    pub scale_block_m: u32,
    pub scale_block_n: u32,
    pub scale_block_k: u32,
    pub block_size: u32,
    pub m_per_block: u32,
    pub n_per_block: u32,
    pub k_per_block: u32,
    pub ak1: u32,
    pub bk1: u32,
    pub m_per_xdl: u32,
    pub n_per_xdl: u32,
    pub m_xdl_per_wave: u32,
    pub n_xdl_per_wave: u32,
    pub a_block_transfer: [u32; 3],
    pub b_block_transfer: [u32; 3],
    pub c_block_transfer: [u32; 4],
    pub c_block_spv: u32,
    pub cshuffle_m_xdl_per_wave: u32,
    pub cshuffle_n_xdl_per_wave: u32,
    /// "intrawave" or "interwave" as written in names (lower case).
    pub scheduler: String,
    /// Pipeline version: 1 (plain) or 3 (prefetching).
    pub pipeline: u32,
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
    /// "candidate" or "default".
    pub role: String,
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

/// A selectable kernel: a legacy instance id with a split-K (`split_k` = log2 of KBatch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Candidate {
    pub kernel_id: i32,
    pub split_k: u32,
}

impl Candidate {
    pub fn new(kernel_id: i32, split_k: u32) -> Self {
        Candidate { kernel_id, split_k }
    }
}

impl std::fmt::Display for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
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
pub mod cmd;
