//! Sets of M (token counts): decode sizes, AITER's fine tuning grid, powers of two, a seeded log-uniform
//! sample, the measurement grid, and a stratified sample of a grid.

use std::collections::BTreeSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Decode batch sizes: {1, 2, 4, 8}.
pub fn m_decode() -> Vec<u32> {
    vec![1, 2, 4, 8]
}

/// AITER's fine padding grid up to `max`: multiples of 16 up to 256, of 32 up to 1024, of 64 up to 4096,
/// of 128 beyond (the values an untuned M is rounded up to before the tuned-table lookup).
pub fn m_aiter_grid(max: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut m: u32 = 16;
    while m <= max {
        out.push(m);
        let step = match m {
            0..=255 => 16,
            256..=1023 => 32,
            1024..=4095 => 64,
            _ => 128,
        };
        match m.checked_add(step) {
            Some(next) => m = next,
            None => break,
        }
    }
    out
}

/// Powers of two from 1 up to `max`.
pub fn m_pow2(max: u32) -> Vec<u32> {
    (0..32).map(|e| 1u32 << e).take_while(|&m| m <= max).collect()
}

/// `count` distinct M values drawn log-uniformly from `lo..=hi` with a seeded generator, sorted. `lo` is
/// raised to 1; when the range holds at most `count` values, all of them are returned; `lo > hi` gives none.
pub fn m_log_uniform(count: usize, lo: u32, hi: u32, seed: u64) -> Vec<u32> {
    let lo = lo.max(1);
    if lo > hi {
        return Vec::new();
    }
    let span = (hi - lo) as u64 + 1;
    if count as u64 >= span {
        return (lo..=hi).collect();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (a, b) = ((lo as f64).ln(), (hi as f64 + 1.0).ln());
    let mut picked = BTreeSet::new();
    // Each draw lands in integer bin floor(exp(u)); bins near the top are least likely, so bound the draws and
    // fill any remainder with the smallest unused values (deterministic for a seed either way).
    let mut draws = 0usize;
    while picked.len() < count && draws < count.saturating_mul(1000) {
        let u: f64 = rng.gen_range(a..b);
        let m = (u.exp().floor() as u64).clamp(lo as u64, hi as u64) as u32;
        picked.insert(m);
        draws += 1;
    }
    let mut fill = lo;
    while picked.len() < count {
        picked.insert(fill);
        fill += 1;
    }
    picked.into_iter().collect()
}

/// The measurement grid: {1,2,4,8} ∪ 16..=256 step 16 ∪ 288..=1024 step 32 ∪ 1152..=4096 step 128 ∪
/// 5120..=16384 step 1024 (80 values).
pub fn m_dataset_grid() -> Vec<u32> {
    let mut out = m_decode();
    out.extend((16..=256).step_by(16));
    out.extend((288..=1024).step_by(32));
    out.extend((1152..=4096).step_by(128));
    out.extend((5120..=16384).step_by(1024));
    out
}

/// True when AITER's fine padding leaves `m` unchanged: a multiple of 16 up to 256, of 32 up to 1024, of 64 up
/// to 4096, of 128 beyond (REFERENCE §4). Tuning grids live on these values.
pub fn on_aiter_grid(m: u32) -> bool {
    let step = match m {
        0..=256 => 16,
        257..=1024 => 32,
        1025..=4096 => 64,
        _ => 128,
    };
    m.is_multiple_of(step)
}

/// `count` distinct off-grid M values: seeded log-uniform draws over `1..=max` that are neither on AITER's
/// fine padding grid ([`on_aiter_grid`]) nor in the measurement grid ([`m_dataset_grid`]), sorted. These are
/// the token counts serving produces that no tuning run measured. Fewer than `count` only when `max` leaves
/// fewer such values.
pub fn m_off_grid(count: usize, max: u32, seed: u64) -> Vec<u32> {
    let grid: BTreeSet<u32> = m_dataset_grid().into_iter().collect();
    let off = |m: u32| !on_aiter_grid(m) && !grid.contains(&m);
    let available = (1..=max).filter(|&m| off(m)).count();
    let want = count.min(available);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (a, b) = (0f64, ((max as f64) + 1.0).ln());
    let mut picked = BTreeSet::new();
    let mut draws = 0usize;
    while picked.len() < want && draws < want.saturating_mul(10_000) {
        let u: f64 = rng.gen_range(a..b);
        let m = (u.exp().floor() as u64).clamp(1, max as u64) as u32;
        if off(m) {
            picked.insert(m);
        }
        draws += 1;
    }
    let mut fill = 1;
    while picked.len() < want {
        if off(fill) {
            picked.insert(fill);
        }
        fill += 1;
    }
    picked.into_iter().collect()
}

/// A 30-value subset of the measurement grid for measuring many models within a GPU budget: {1,2,4,8},
/// 16..=256 at 16, 32, 48, 64, 96, 128, 160, 192, 224, 256, then 320, 384, 512, 640, 768, 1024, 1280, 1536,
/// 2048, 2560, 3072, 4096, 5120, 8192, 12288, 16384.
pub fn m_sparse_grid() -> Vec<u32> {
    vec![
        1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 512, 640, 768, 1024, 1280, 1536, 2048, 2560,
        3072, 4096, 5120, 8192, 12288, 16384,
    ]
}

/// Stratified sample of `count` values of `available`, in log2(M): `count` equal-width strata over
/// [log2 min, log2 max]; one seeded pick per stratum among the available values in it; a stratum with no
/// values borrows the unused value nearest (in log2) to its centre (ties: the smaller). Zeros and repeats in
/// `available` are ignored; asking for at least as many values as there are returns them all. Sorted.
pub fn sample_m(available: &[u32], count: usize, seed: u64) -> Vec<u32> {
    let vals: Vec<u32> = available.iter().copied().filter(|&m| m > 0).collect::<BTreeSet<_>>().into_iter().collect();
    if count == 0 || vals.is_empty() {
        return Vec::new();
    }
    if count >= vals.len() {
        return vals;
    }
    let log = |m: u32| (m as f64).log2();
    let lo = log(vals[0]);
    let width = (log(*vals.last().unwrap()) - lo) / count as f64;
    let stratum = |m: u32| (((log(m) - lo) / width).floor() as usize).min(count - 1);
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); count];
    for &m in &vals {
        members[stratum(m)].push(m);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut picked = BTreeSet::new();
    for group in members.iter().filter(|g| !g.is_empty()) {
        picked.insert(group[rng.gen_range(0..group.len())]);
    }
    for (i, _) in members.iter().enumerate().filter(|(_, g)| g.is_empty()) {
        let centre = lo + (i as f64 + 0.5) * width;
        let nearest = vals
            .iter()
            .copied()
            .filter(|m| !picked.contains(m))
            .min_by(|a, b| (log(*a) - centre).abs().total_cmp(&(log(*b) - centre).abs()).then(a.cmp(b)));
        if let Some(m) = nearest {
            picked.insert(m);
        }
    }
    picked.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_strata_borrow_nearest_unused() {
        // log2 range [0, 10] in 5 strata of width 2: {1,2} {4,8} {} {} {1024}; strata 2 and 3 (centres 5, 7)
        // borrow the unused values nearest to 32 and 128.
        let s = sample_m(&[1, 2, 4, 8, 1024], 5, 7);
        assert_eq!(s.len(), 5);
        assert_eq!(s, vec![1, 2, 4, 8, 1024]);
        let s = sample_m(&[1, 2, 3, 4, 5, 6, 7, 8, 1024], 3, 1);
        assert_eq!(s.len(), 3);
        assert!(s.contains(&1024));
    }

    #[test]
    fn off_grid_values_avoid_both_grids() {
        let v = m_off_grid(20, 16384, 0);
        assert_eq!(v.len(), 20);
        assert_eq!(v, m_off_grid(20, 16384, 0), "seeded");
        let grid = m_dataset_grid();
        for m in &v {
            assert!(!grid.contains(m) && !on_aiter_grid(*m), "{m} is on a grid");
        }
        assert!(on_aiter_grid(16) && on_aiter_grid(288) && on_aiter_grid(1088) && on_aiter_grid(4224));
        assert!(!on_aiter_grid(17) && !on_aiter_grid(272) && !on_aiter_grid(1056) && !on_aiter_grid(4160));
        // 1..=16 holds 11 off-grid values (3, 5, 6, 7, 9..15 less none of the grid's {1, 2, 4, 8, 16}).
        assert_eq!(m_off_grid(50, 16, 1), vec![3, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15]);
    }

    #[test]
    fn sparse_grid_is_a_subset_of_the_dataset_grid() {
        let grid = m_dataset_grid();
        let s = m_sparse_grid();
        assert_eq!(s.len(), 30);
        assert!(s.iter().all(|m| grid.contains(m)));
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn log_uniform_small_range_returns_all() {
        assert_eq!(m_log_uniform(10, 3, 6, 0), vec![3, 4, 5, 6]);
        assert!(m_log_uniform(3, 9, 2, 0).is_empty());
    }
}
