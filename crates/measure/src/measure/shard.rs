//! Splitting a plan by shape: the share of one run of a plan split over several hosts (`synth bench
//! --shard I/N`) and the share of each GPU worker of one host (`--gpus`), dealt the same way.
//!
//! The unit is a shape (M, N, K): every cell of a shape, its rechecks included, goes to one share, so one
//! GPU measures all candidates of a shape (the comparison a rule learns from is made on one device) and a
//! recheck repeats a cell on the GPU that measured it (the noise figure stays within one device). Shapes
//! are dealt longest first to the least loaded share (weights: cells per shape), ties broken by plan
//! order and by share number, so a deal is a function of the plan alone: a resumed run computes the same
//! shares from the same plan, whatever its journal already holds.

use super::plan::PlanCell;
use synth_core::table::Shape;

/// One share of a plan split over `count` runs: `I/N` on the command line, `index` from 1 to `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 1-based.
    pub index: u32,
    pub count: u32,
}

/// Most shards of one plan.
pub const MAX_SHARDS: u32 = 100_000;

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || {
            format!(
                "{:?} is not a shard: expected I/N with 1 <= I <= N <= {MAX_SHARDS}, e.g. 2/8 (the second of eight \
                 runs)",
                synth_base::sanitize::shown(s)
            )
        };
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (i.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if index == 0 || count == 0 || index > count || count > MAX_SHARDS {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Deals items of the given weights to bins that already carry `loads`: heaviest item first (ties: the
/// earlier item), each to the bin with the least load (ties: the lower bin). Returns the bin of each item.
/// Empty when there is no bin.
pub fn deal(weights: &[u64], loads: &[u64]) -> Vec<usize> {
    if loads.is_empty() {
        return Vec::new();
    }
    let mut loads = loads.to_vec();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| weights[b].cmp(&weights[a]).then(a.cmp(&b)));
    let mut bin = vec![0; weights.len()];
    for i in order {
        let (best, _) = loads.iter().enumerate().min_by(|x, y| x.1.cmp(y.1).then(x.0.cmp(&y.0))).expect("a bin");
        bin[i] = best;
        loads[best] += weights[i];
    }
    bin
}

/// The shapes of `cells` in order of first appearance, each with the indices of its cells.
fn shape_groups(cells: &[PlanCell]) -> Vec<(Shape, Vec<usize>)> {
    let mut groups: Vec<(Shape, Vec<usize>)> = Vec::new();
    let mut at: std::collections::HashMap<Shape, usize> = std::collections::HashMap::new();
    for (i, c) in cells.iter().enumerate() {
        let g = *at.entry(c.shape()).or_insert_with(|| {
            groups.push((c.shape(), Vec::new()));
            groups.len() - 1
        });
        groups[g].1.push(i);
    }
    groups
}

/// `cells` dealt by shape to bins carrying `loads` (one bin per load; weights: cells per shape). Each bin
/// keeps the order of `cells`.
pub fn deal_by_shape(cells: &[PlanCell], loads: &[u64]) -> Vec<Vec<PlanCell>> {
    let groups = shape_groups(cells);
    let weights: Vec<u64> = groups.iter().map(|(_, idx)| idx.len() as u64).collect();
    let bins = deal(&weights, loads);
    let mut bin_of = vec![0; cells.len()];
    for ((_, idx), &b) in groups.iter().zip(&bins) {
        for &i in idx {
            bin_of[i] = b;
        }
    }
    let mut out = vec![Vec::new(); loads.len()];
    if loads.is_empty() {
        return out;
    }
    for (c, &b) in cells.iter().zip(&bin_of) {
        out[b].push(c.clone());
    }
    out
}

/// The cells of `plan` in `shard`, in plan order (the whole plan dealt by shape over `shard.count` runs).
pub fn shard_plan(plan: &[PlanCell], shard: Shard) -> Vec<PlanCell> {
    deal_by_shape(plan, &vec![0; shard.count as usize]).swap_remove(shard.index as usize - 1)
}

/// The shapes of `shapes` in `shard` (each shape weighs the same), in the given order.
pub fn shard_shapes(shapes: &[Shape], shard: Shard) -> Vec<Shape> {
    let bins = deal(&vec![1; shapes.len()], &vec![0; shard.count as usize]);
    shapes.iter().zip(bins).filter(|(_, b)| *b == shard.index as usize - 1).map(|(s, _)| *s).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_print() {
        assert_eq!("2/8".parse::<Shard>(), Ok(Shard { index: 2, count: 8 }));
        assert_eq!("1/1".parse::<Shard>().unwrap().to_string(), "1/1");
        for bad in ["0/4", "5/4", "1/0", "4", "a/b", "-1/4", "1/4/2", "", "1/100001"] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert!(e.contains("expected I/N with 1 <= I <= N"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_deal_is_longest_first_to_the_least_loaded_bin() {
        // Weights 5 3 3 2 2 1 over 2 bins (loads after each): 5->0 (5,0), 3->1 (5,3), 3->1 (5,6), 2->0 (7,6),
        // 2->1 (7,8), 1->0 (8,8).
        assert_eq!(deal(&[5, 3, 3, 2, 2, 1], &[0, 0]), vec![0, 1, 1, 0, 1, 0]);
        // Ties between items keep their order; ties between bins go to the lower bin.
        assert_eq!(deal(&[1, 1, 1, 1, 1], &[0, 0, 0]), vec![0, 1, 2, 0, 1]);
        // Loads already carried count: bin 0 starts full.
        assert_eq!(deal(&[2, 2], &[10, 0, 1]), vec![1, 2]);
        assert!(deal(&[1, 2], &[]).is_empty());
    }

    #[test]
    fn shapes_shard_round_robin_when_they_weigh_the_same() {
        let shapes: Vec<Shape> = (1..=7).map(|m| Shape::new(m, 256, 512)).collect();
        let got: Vec<Vec<u32>> = (1..=3)
            .map(|i| shard_shapes(&shapes, Shard { index: i, count: 3 }).iter().map(|s| s.m).collect())
            .collect();
        assert_eq!(got, vec![vec![1, 4, 7], vec![2, 5], vec![3, 6]]);
    }
}
