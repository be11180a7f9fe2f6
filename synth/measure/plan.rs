//! The measurement plan: which (shape, instance, split-K) cells to measure, in which order, and which
//! of them to measure a second time at the end (rechecks).

use crate::catalog::triton::TritonConfig;
use crate::catalog::{Instance, LegacyParams, Libtype};
use crate::table::Shape;
use rand::seq::index::sample;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Width of one scale group along K.
pub const SCALE_K: u32 = 128;
/// Highest split-K level (log2 KBatch) ever measured.
pub const MAX_SPLIT_K: u32 = 3;

/// Which split-K levels to plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SplitKMode {
    /// Levels 1..=3 where the output tiles do not fill the CUs (the split-K rule of the plan).
    Auto,
    /// Only splitK = 0.
    None,
}

/// One cell of the plan, as the harness reads it (one JSON object per line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanCell {
    #[serde(rename = "M")]
    pub m: u32,
    #[serde(rename = "N")]
    pub n: u32,
    #[serde(rename = "K")]
    pub k: u32,
    #[serde(rename = "kernelId")]
    pub kernel_id: i32,
    #[serde(rename = "splitK")]
    pub split_k: u32,
    #[serde(rename = "kernelName")]
    pub kernel_name: String,
    #[serde(rename = "BLOCK_SIZE")]
    pub block_size: u32,
    #[serde(rename = "MPerBLOCK")]
    pub m_per_block: u32,
    #[serde(rename = "NPerBLOCK")]
    pub n_per_block: u32,
    #[serde(rename = "KPerBLOCK")]
    pub k_per_block: u32,
    pub pipeline: u32,
    /// 1 for the second measurement of a cell (the noise estimate), else 0.
    pub recheck: u8,
    /// The config of a cell of the block-FP8 Triton family (libtype `triton`; the CK fields above then
    /// hold its tile and zeros); `None` for a CK legacy cell. See [`PlanCell::to_json_line`].
    #[serde(skip)]
    pub triton: Option<TritonConfig>,
}

/// Identity of a measurement: the journal holds at most one row per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CellKey {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub kernel_id: i32,
    pub split_k: u32,
    pub recheck: bool,
    /// The kernel's family: `ck` (legacy), `cktile` (AITER's CK-tile ids, a numbering of their own) or
    /// `triton` (packed config ids).
    pub libtype: Libtype,
}

impl PlanCell {
    /// A plan cell for a legacy instance.
    pub fn new(shape: Shape, inst: &Instance, p: &LegacyParams, split_k: u32) -> Self {
        PlanCell {
            m: shape.m,
            n: shape.n,
            k: shape.k,
            kernel_id: inst.id,
            split_k,
            kernel_name: inst.name.clone(),
            block_size: p.block_size,
            m_per_block: p.m_per_block,
            n_per_block: p.n_per_block,
            k_per_block: p.k_per_block,
            pipeline: p.pipeline,
            recheck: 0,
            triton: None,
        }
    }

    /// A plan cell for a config of the block-FP8 Triton family (no split-K).
    pub fn triton(shape: Shape, config: TritonConfig) -> Self {
        PlanCell {
            m: shape.m,
            n: shape.n,
            k: shape.k,
            kernel_id: config.kernel_id(),
            split_k: 0,
            kernel_name: config.name(),
            block_size: 0,
            m_per_block: config.block_m,
            n_per_block: config.block_n,
            k_per_block: config.block_k,
            pipeline: 0,
            recheck: 0,
            triton: Some(config),
        }
    }

    /// The cell's family: `triton` for a config of the Triton family, else `ck`.
    pub fn libtype(&self) -> Libtype {
        if self.triton.is_some() {
            Libtype::Triton
        } else {
            Libtype::Ck
        }
    }

    pub fn key(&self) -> CellKey {
        CellKey {
            m: self.m,
            n: self.n,
            k: self.k,
            kernel_id: self.kernel_id,
            split_k: self.split_k,
            recheck: self.recheck != 0,
            libtype: self.libtype(),
        }
    }

    pub fn shape(&self) -> Shape {
        Shape::new(self.m, self.n, self.k)
    }

    /// The JSON line the harness reads. A CK cell: the fields above, compact. A triton cell: the line
    /// the harness's triton planner writes for it (its `TritonCell.to_json`, Python's `json.dumps` spacing),
    /// byte for byte: `{"libtype": "triton", "M": .., "N": .., "K": .., "kernelId": .., "splitK": 0,
    /// "kernelName": "..", "BLOCK_SIZE_M": .., "BLOCK_SIZE_N": .., "BLOCK_SIZE_K": .., "GROUP_SIZE_M": ..,
    /// "num_warps": .., "num_stages": .., "recheck": ..}`.
    pub fn to_json_line(&self) -> String {
        match &self.triton {
            None => serde_json::to_string(self).expect("plan cells always serialize"),
            Some(c) => {
                let meta: Vec<String> = crate::catalog::triton::RUNTIME_KEYS
                    .iter()
                    .zip(c.values())
                    .map(|(key, v)| format!("\"{key}\": {v}"))
                    .collect();
                format!(
                    "{{\"libtype\": \"triton\", \"M\": {}, \"N\": {}, \"K\": {}, \"kernelId\": {}, \"splitK\": 0, \
                     \"kernelName\": \"{}\", {}, \"recheck\": {}}}",
                    self.m,
                    self.n,
                    self.k,
                    self.kernel_id,
                    self.kernel_name,
                    meta.join(", "),
                    self.recheck
                )
            }
        }
    }
}

fn cdiv(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

/// Workgroups of the un-split grid: ceil(M/MPerBLOCK) * ceil(N/NPerBLOCK).
pub fn output_tiles(shape: Shape, m_per_block: u32, n_per_block: u32) -> u64 {
    cdiv(shape.m as u64, m_per_block as u64) * cdiv(shape.n as u64, n_per_block as u64)
}

/// The split-K levels measured for an instance on a shape, 0 first.
///
/// Level `s >= 1` is measured only where it is valid and can matter: while the grid of the previous
/// level is smaller than the CU/SM count (`tiles * 2^(s-1) < cu_num`) and while each of the `2^s`
/// splits still gets at least one full KPerBLOCK step (`K / KPerBLOCK >= 2^s`).
pub fn split_levels(shape: Shape, m_per_block: u32, n_per_block: u32, k_per_block: u32, cu_num: u32) -> Vec<u32> {
    let tiles = output_tiles(shape, m_per_block, n_per_block);
    let steps = (shape.k / k_per_block.max(1)) as u64;
    let mut levels = vec![0];
    for s in 1..=MAX_SPLIT_K {
        if tiles << (s - 1) >= cu_num as u64 || steps < 1u64 << s {
            break;
        }
        levels.push(s);
    }
    levels
}

/// Errors building a plan.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlanError {
    #[error("instance {id} ({name}) is not a CK legacy instance; `synth bench` measures legacy instances only")]
    NotLegacy { id: i32, name: String },
    #[error("shape {shape}: K = {k} is not a multiple of {SCALE_K} (the scale group width); use a K that is")]
    BadK { shape: Shape, k: u32 },
    #[error("recheck fraction {0} is outside [0, 1]")]
    BadFraction(f64),
}

/// What to measure.
pub struct PlanSpec<'a> {
    pub shapes: Vec<Shape>,
    pub instances: Vec<&'a Instance>,
    pub split_k: SplitKMode,
    /// CUs/SMs of the device (the split-K rule needs it).
    pub cu_num: u32,
    /// Share of the measured cells measured again at the end (seeded choice).
    pub recheck_fraction: f64,
    pub seed: u64,
}

/// Builds the plan: every (shape, instance, split level) cell, sorted by (N, K, M) and then instance and
/// split, followed by the recheck cells (a seeded `recheck_fraction` sample, same order).
///
/// Shape-major order lets the harness allocate inputs and the reference once per shape; the harness
/// compiles every kernel variant of the plan once before measuring, so the order costs no compiles.
pub fn build_plan(spec: &PlanSpec) -> Result<Vec<PlanCell>, PlanError> {
    let shapes = plan_shapes(&spec.shapes, spec.recheck_fraction)?;
    let mut cells = Vec::new();
    for &shape in &shapes {
        for inst in &spec.instances {
            let p =
                inst.legacy_params().ok_or_else(|| PlanError::NotLegacy { id: inst.id, name: inst.name.clone() })?;
            let levels = match spec.split_k {
                SplitKMode::None => vec![0],
                SplitKMode::Auto => split_levels(shape, p.m_per_block, p.n_per_block, p.k_per_block, spec.cu_num),
            };
            for s in levels {
                cells.push(PlanCell::new(shape, inst, p, s));
            }
        }
    }
    Ok(with_rechecks(cells, spec.recheck_fraction, spec.seed))
}

/// The shapes of a plan, sorted by (N, K, M) without repeats, after the checks every plan makes: a recheck
/// fraction in 0..=1 and each K a positive multiple of the scale group.
fn plan_shapes(shapes: &[Shape], recheck_fraction: f64) -> Result<Vec<Shape>, PlanError> {
    if !(0.0..=1.0).contains(&recheck_fraction) || recheck_fraction.is_nan() {
        return Err(PlanError::BadFraction(recheck_fraction));
    }
    let mut shapes = shapes.to_vec();
    shapes.sort_by_key(|s| (s.n, s.k, s.m));
    shapes.dedup();
    if let Some(&shape) = shapes.iter().find(|s| s.k % SCALE_K != 0 || s.k == 0) {
        return Err(PlanError::BadK { shape, k: shape.k });
    }
    Ok(shapes)
}

/// `cells` followed by the recheck cells: a seeded sample of `fraction` of them (rounded), in plan order.
fn with_rechecks(mut cells: Vec<PlanCell>, fraction: f64, seed: u64) -> Vec<PlanCell> {
    let n_recheck = (cells.len() as f64 * fraction).round() as usize;
    if n_recheck > 0 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut picks = sample(&mut rng, cells.len(), n_recheck.min(cells.len())).into_vec();
        picks.sort_unstable();
        let rechecks: Vec<PlanCell> = picks.into_iter().map(|i| PlanCell { recheck: 1, ..cells[i].clone() }).collect();
        cells.extend(rechecks);
    }
    cells
}

/// What to measure of the block-FP8 Triton family: every config on every shape, no split-K.
pub struct TritonPlanSpec {
    pub shapes: Vec<Shape>,
    pub configs: Vec<TritonConfig>,
    /// Share of the measured cells measured again at the end (seeded choice).
    pub recheck_fraction: f64,
    pub seed: u64,
}

/// The plan of the Triton family: every (shape, config) cell, shapes sorted by (N, K, M) and each shape's
/// configs in the given order, followed by the recheck cells chosen as [`build_plan`] chooses them.
/// Configs given twice are measured once.
pub fn build_triton_plan(spec: &TritonPlanSpec) -> Result<Vec<PlanCell>, PlanError> {
    let shapes = plan_shapes(&spec.shapes, spec.recheck_fraction)?;
    let mut configs: Vec<TritonConfig> = Vec::with_capacity(spec.configs.len());
    for c in &spec.configs {
        if !configs.contains(c) {
            configs.push(*c);
        }
    }
    let mut cells = Vec::with_capacity(shapes.len() * configs.len());
    for &shape in &shapes {
        cells.extend(configs.iter().map(|&c| PlanCell::triton(shape, c)));
    }
    Ok(with_rechecks(cells, spec.recheck_fraction, spec.seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_rule_hand_computed() {
        // 16x128 tile, M=16, N=5120: 40 tiles. 40<132, 80<132, 160>=132 -> 0,1,2.
        assert_eq!(split_levels(Shape::new(16, 5120, 5120), 16, 128, 256, 132), vec![0, 1, 2]);
        // 16x256: 20 tiles -> 20, 40, 80 < 132 -> 0..=3.
        assert_eq!(split_levels(Shape::new(1, 5120, 5120), 16, 256, 128, 132), vec![0, 1, 2, 3]);
        // 128x128 at M=256, N=5120: 80 tiles -> level 1 only.
        assert_eq!(split_levels(Shape::new(256, 5120, 5120), 128, 128, 128, 132), vec![0, 1]);
        // exactly cu_num tiles: never split.
        assert_eq!(split_levels(Shape::new(128 * 66, 256, 4096), 128, 128, 128, 132), vec![0]);
        // K=512 with KPerBLOCK 256: two steps -> KBatch 2 at most.
        assert_eq!(split_levels(Shape::new(1, 256, 512), 16, 128, 256, 132), vec![0, 1]);
        // On a 304-CU MI300X the 64x64 tile at M=64, N=5120 (80 tiles) splits up to 2 (160 < 304, 320 >= 304).
        assert_eq!(split_levels(Shape::new(64, 5120, 5120), 64, 64, 128, 304), vec![0, 1, 2]);
    }
}
