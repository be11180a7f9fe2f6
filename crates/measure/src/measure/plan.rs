//! The measurement plan: which (shape, instance, split-K) cells to measure, in which order, and which
//! of them to measure a second time at the end (rechecks).

use rand::seq::index::sample;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use synth_core::catalog::triton::TritonConfig;
use synth_core::catalog::{Instance, LegacyParams, Libtype};
use synth_core::table::Shape;

/// Width of one scale group along K.
pub const SCALE_K: u32 = 128;
/// Highest split-K level (log2 KBatch) the `auto` rule measures: [`MAX_SPLIT_K`], the deepest level the
/// harness and every dispatcher take. It was 3 until the H200 measurement of AITER's levels on small-N,
/// large-K shapes (`measurements/zoo/README.md`) found levels 4 and 5 up to 1.28x faster there.
pub const AUTO_MAX_SPLIT_K: u32 = MAX_SPLIT_K;
pub use synth_core::catalog::MAX_SPLIT_K;

/// Which split-K levels to plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SplitKMode {
    /// Levels 1..=5 where the output tiles do not fill the CUs (the split-K rule of the plan).
    Auto,
    /// The levels AITER's blockscale tuner tries (`compute_gemm_SplitK`, 0 ..= its level per kernel) that
    /// the harness can realize: at most `catalog::MAX_SPLIT_K` (5) and a whole KPerBLOCK step per split.
    Aiter,
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

impl CellKey {
    /// The key of the cell of `shape` and the kernel `kernel_id` of `libtype` at `split_k` (`recheck`: its
    /// second measurement).
    pub fn new(shape: Shape, libtype: Libtype, kernel_id: i32, split_k: u32, recheck: bool) -> CellKey {
        CellKey { m: shape.m, n: shape.n, k: shape.k, kernel_id, split_k, recheck, libtype }
    }
}

impl std::fmt::Display for CellKey {
    /// The cell as messages name it: `M=1 N=512 K=512 ck kernelId 0 splitK 0` (and `, recheck`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "M={} N={} K={} {} kernelId {} splitK {}{}",
            self.m,
            self.n,
            self.k,
            self.libtype,
            self.kernel_id,
            self.split_k,
            if self.recheck { ", recheck" } else { "" }
        )
    }
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
        CellKey::new(self.shape(), self.libtype(), self.kernel_id, self.split_k, self.recheck != 0)
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
                let meta: Vec<String> = synth_core::catalog::triton::RUNTIME_KEYS
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
    for s in 1..=AUTO_MAX_SPLIT_K {
        if tiles << (s - 1) >= cu_num as u64 || steps < 1u64 << s {
            break;
        }
        levels.push(s);
    }
    levels
}

/// The deepest level AITER's blockscale tuner tries for a tile on a shape: its `compute_gemm_SplitK`
/// (`aiter/ops/gemm_op_a8w8.py` at ROCm/aiter e4048607a5) grows the level while `cu_num / tiles >= 2^(s+1)`
/// and `2^(s+1) · KPerBLOCK < 2K`, with no cap; the tuner then tries every level `0 ..=` that one.
pub fn aiter_split_level(shape: Shape, m_per_block: u32, n_per_block: u32, k_per_block: u32, cu_num: u32) -> u32 {
    let tiles = output_tiles(shape, m_per_block, n_per_block);
    let (cu, bk, k) = (u128::from(cu_num), u128::from(k_per_block), u128::from(shape.k));
    let mut s = 0u32;
    // In integers: cu / tiles >= 2^(s+1)  <=>  cu >= tiles · 2^(s+1). The level is below 64 (cu is a u32).
    while s < 63 && cu >= u128::from(tiles) << (s + 1) && (bk << (s + 1)) < 2 * k {
        s += 1;
    }
    s
}

/// AITER's levels for a tile on a shape, split into the ones the bench measures and the ones it refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AiterLevels {
    /// The levels measured: `0 ..=` AITER's level, each giving every split at least one whole KPerBLOCK
    /// step (`K / KPerBLOCK >= 2^s`, the harness's split rule) and at most [`MAX_SPLIT_K`].
    pub measured: Vec<u32>,
    /// Levels AITER tries whose splits would be shorter than one KPerBLOCK step (its K condition allows
    /// half a step); the harness cannot realize them.
    pub short_k: Vec<u32>,
    /// Levels AITER tries beyond [`MAX_SPLIT_K`].
    pub beyond_cap: Vec<u32>,
}

/// [`aiter_split_level`]'s levels, sorted into measured and refused ones.
pub fn aiter_levels(shape: Shape, m_per_block: u32, n_per_block: u32, k_per_block: u32, cu_num: u32) -> AiterLevels {
    let top = aiter_split_level(shape, m_per_block, n_per_block, k_per_block, cu_num);
    let steps = u64::from(shape.k / k_per_block.max(1));
    let mut out = AiterLevels { measured: vec![0], short_k: Vec::new(), beyond_cap: Vec::new() };
    for s in 1..=top {
        if s > MAX_SPLIT_K {
            out.beyond_cap.push(s);
        } else if steps < 1u64 << s {
            out.short_k.push(s);
        } else {
            out.measured.push(s);
        }
    }
    out
}

/// The AITER levels a plan leaves out: how many (shape, instance, level) cells, and the first one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AiterRefusals {
    /// Cells whose splits would be shorter than one KPerBLOCK step.
    pub short_k: usize,
    /// Cells beyond [`MAX_SPLIT_K`].
    pub beyond_cap: usize,
    /// The deepest level AITER would try on any cell of the plan.
    pub deepest: u32,
    /// One refused cell, to name: (shape, kernelId, level).
    pub example: Option<(Shape, i32, u32)>,
}

impl AiterRefusals {
    /// One line for the user, or None when nothing was refused.
    pub fn describe(&self) -> Option<String> {
        let (shape, id, level) = self.example?;
        Some(format!(
            "split-K aiter: {} cell(s) AITER's tuner would also try are not measured: {} with splits shorter than one \
             KPerBLOCK step (the harness splits K in whole steps), {} beyond level {MAX_SPLIT_K} (KBatch {}; AITER goes \
             to level {} on this plan); e.g. kernelId {id} at level {level} on {shape}",
            self.short_k + self.beyond_cap,
            self.short_k,
            self.beyond_cap,
            1u32 << MAX_SPLIT_K,
            self.deepest
        ))
    }
}

/// What `--split-k aiter` leaves out of the plan of `spec` (empty for the other modes).
pub fn aiter_refusals(spec: &PlanSpec) -> AiterRefusals {
    let mut out = AiterRefusals::default();
    if spec.split_k != SplitKMode::Aiter {
        return out;
    }
    for &shape in &spec.shapes {
        for inst in &spec.instances {
            let Some(p) = inst.legacy_params() else { continue };
            let l = aiter_levels(shape, p.m_per_block, p.n_per_block, p.k_per_block, spec.cu_num);
            out.deepest =
                out.deepest.max(l.short_k.iter().chain(&l.beyond_cap).chain(&l.measured).copied().max().unwrap_or(0));
            out.short_k += l.short_k.len();
            out.beyond_cap += l.beyond_cap.len();
            if out.example.is_none() {
                if let Some(&s) = l.short_k.first().or(l.beyond_cap.first()) {
                    out.example = Some((shape, inst.id, s));
                }
            }
        }
    }
    out
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
                SplitKMode::Aiter => {
                    aiter_levels(shape, p.m_per_block, p.n_per_block, p.k_per_block, spec.cu_num).measured
                }
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

    #[test]
    fn aiter_rule_hand_computed() {
        // M = 1, N = 576, 16x64 tile: 9 tiles. 132 >= 18, 36, 72 but < 144 -> 3; on 304 CUs 304 >= 288 -> 5.
        assert_eq!(aiter_split_level(Shape::new(1, 576, 7168), 16, 64, 128, 132), 3);
        assert_eq!(aiter_split_level(Shape::new(1, 576, 7168), 16, 64, 128, 304), 5);
        // Exactly 2^(s+1) CUs per tile still splits: 33 tiles on 132 CUs -> 4 per tile -> level 2.
        assert_eq!(aiter_split_level(Shape::new(1, 33 * 64, 1 << 20), 16, 64, 128, 132), 2);
        // The K condition 2^(s+1) · 128 < 2K on K = 384: 256 < 768, 512 < 768, 1024 >= 768 -> 2 (KBatch 4,
        // 96 columns a split), where whole 128-deep steps allow KBatch 2 only.
        assert_eq!(aiter_split_level(Shape::new(1, 2048, 384), 16, 64, 128, 304), 2);
        let l = aiter_levels(Shape::new(1, 2048, 384), 16, 64, 128, 304);
        assert_eq!((l.measured, l.short_k, l.beyond_cap), (vec![0, 1], vec![2], vec![]));
        // One 16x64 tile (N = 64) on 304 CUs: the level grows from s to s + 1 while 304 >= 2^(s+1), so it
        // ends at 8 (256 <= 304 < 512); K = 1 << 20 is no limit.
        let l = aiter_levels(Shape::new(1, 64, 1 << 20), 16, 64, 128, 304);
        assert_eq!((l.measured, l.short_k, l.beyond_cap), (vec![0, 1, 2, 3, 4, 5], vec![], vec![6, 7, 8]));
        // A full grid: no split at all.
        assert_eq!(aiter_levels(Shape::new(4096, 8192, 8192), 128, 128, 128, 132).measured, vec![0]);
        // Where both rules split, AITER's CU condition (tiles · 2^s <= CU) is stricter than the auto rule's
        // (tiles · 2^(s-1) < CU): 128x128 at M = 256, N = 5120 is 80 tiles: auto measures level 1, AITER none.
        assert_eq!(aiter_split_level(Shape::new(256, 5120, 5120), 128, 128, 128, 132), 0);
        assert_eq!(split_levels(Shape::new(256, 5120, 5120), 128, 128, 128, 132), vec![0, 1]);
    }

    #[test]
    fn aiter_levels_are_ones_the_auto_condition_allows_up_to_the_cap() {
        // Every level `aiter` measures satisfies the auto rule's condition without its cap, so the split-K
        // guards (written from that condition) keep every leaf a rule learns from `aiter` data.
        for m in [1u32, 3, 16, 64, 100, 256, 1024] {
            for (n, k) in [(256u32, 7168u32), (576, 7168), (2304, 16384), (1536, 768), (7168, 256), (59136, 8192)] {
                for (bm, bn, bk) in [(16u32, 64u32, 128u32), (16, 128, 256), (32, 256, 128), (128, 128, 128)] {
                    for cu in [132u32, 304] {
                        let shape = Shape::new(m, n, k);
                        for s in aiter_levels(shape, bm, bn, bk, cu).measured {
                            let tiles = output_tiles(shape, bm, bn);
                            assert!(s <= MAX_SPLIT_K);
                            assert!(s == 0 || ((tiles << (s - 1)) < u64::from(cu) && k / bk >= 1 << s), "{shape} {s}");
                        }
                    }
                }
            }
        }
    }
}
