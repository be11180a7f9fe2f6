//! Synthesizer: hand-computed optimal trees, exactness against brute force, unusable cells, limits,
//! weighting, and agreement between the search's routing and the rule interpreter.

use synth_core::catalog::{Candidate, Catalog};
use synth_core::rule::{CmpOp, Cond, Expr, Leaf, Node, Var};
use synth_core::synthesize::features::{self, FeatureSet};
use synth_core::synthesize::tree::{self, Bits, Problem, SearchConfig, Searcher, Tree};
use synth_core::synthesize::{synthesize, synthesize_budgets, try_synthesize, Limits, SynthError, Weighting};
use synth_core::table::{Cell, LatencyMatrix, Shape};

fn matrix(shapes: &[Shape], cands: &[Candidate], times: &[&[Option<f64>]]) -> LatencyMatrix {
    let mut m = LatencyMatrix::new("gfx942", 304, None, shapes.to_vec(), cands.to_vec());
    for (s, row) in times.iter().enumerate() {
        for (c, t) in row.iter().enumerate() {
            m.set(s, c, t.map_or(Cell::Missing, Cell::Ok));
        }
    }
    m
}

fn limits(leaves: usize, features: FeatureSet) -> Limits {
    Limits { max_leaves: leaves, features, ..Limits::default() }
}

fn le(expr: Expr, t: i64) -> Cond {
    Cond::cmp(CmpOp::Le, expr, Expr::Lit(t))
}

/// Three shapes of one layer, three candidates (#0, #8, #14 in column order):
///
/// | M   | #0 | #8 | #14 |
/// |-----|----|----|-----|
/// | 16  | 50 | 10 | 30  |
/// | 64  | 25 | 40 | 20  |
/// | 256 | 30 | 90 | 60  |
///
/// One leaf: #0 (105 < 110 < 140). Depth 1: `M <= 40` (midpoint of 16 and 64) → #8 (10), else #0
/// (25 + 30 = 55): 65; the other split, `M <= 160`, costs min(75, 50, 50) + 30 = 80. Three leaves reach
/// the oracle (10 + 20 + 30 = 60) with `M <= 40` → #8, `M <= 160` → #14, else #0.
fn three_by_three() -> LatencyMatrix {
    let shapes = [Shape::new(16, 1024, 1024), Shape::new(64, 1024, 1024), Shape::new(256, 1024, 1024)];
    let cands = [Candidate::new(0, 0), Candidate::new(8, 0), Candidate::new(14, 0)];
    matrix(
        &shapes,
        &cands,
        &[
            &[Some(50.0), Some(10.0), Some(30.0)],
            &[Some(25.0), Some(40.0), Some(20.0)],
            &[Some(30.0), Some(90.0), Some(60.0)],
        ],
    )
}

#[test]
fn hand_computed_three_by_three() {
    let m = three_by_three();
    for set in [FeatureSet::Raw, FeatureSet::Machine] {
        let one = synthesize(&m, &[0, 1, 2], None, &limits(1, set));
        assert_eq!(one.root, Node::Leaf(Leaf::new(0, 0)));

        let two = try_synthesize(&m, &Catalog::embedded(), &[0, 1, 2], None, &limits(2, set)).unwrap();
        let expect = Node::Chain {
            branches: vec![(le(Expr::Var(Var::M), 40), Node::Leaf(Leaf::new(8, 0)))],
            otherwise: Box::new(Node::Leaf(Leaf::new(0, 0))),
        };
        assert_eq!(two.rule.root, expect, "{set:?}");
        assert_eq!(two.train_us, 65.0);
        assert_eq!((two.leaves, two.depth, two.unusable), (2, 1, 0));

        let three = try_synthesize(&m, &Catalog::embedded(), &[0, 1, 2], None, &limits(3, set)).unwrap();
        let expect = Node::Chain {
            branches: vec![
                (le(Expr::Var(Var::M), 40), Node::Leaf(Leaf::new(8, 0))),
                (le(Expr::Var(Var::M), 160), Node::Leaf(Leaf::new(14, 0))),
            ],
            otherwise: Box::new(Node::Leaf(Leaf::new(0, 0))),
        };
        assert_eq!(three.rule.root, expect, "{set:?}");
        assert_eq!(three.train_us, 60.0);
        assert_eq!(three.instances.into_iter().collect::<Vec<_>>(), vec![0, 8, 14]);
    }
}

#[test]
fn depth_limit_one_cannot_reach_the_oracle() {
    let m = three_by_three();
    let l = Limits { max_depth: 1, max_leaves: 8, ..Limits::default() };
    let s = try_synthesize(&m, &Catalog::embedded(), &[0, 1, 2], None, &l).unwrap();
    assert_eq!((s.depth, s.leaves), (1, 2));
    assert_eq!(s.train_us, 65.0);
}

#[test]
fn instance_limit_one_picks_the_best_single_instance() {
    let m = three_by_three();
    let l = Limits { max_instances: Some(1), max_leaves: 8, ..Limits::default() };
    let s = try_synthesize(&m, &Catalog::embedded(), &[0, 1, 2], None, &l).unwrap();
    assert_eq!(s.rule.root, Node::Leaf(Leaf::new(0, 0)));
    // Two instances: {#8, #0} with M <= 40 gives 65; {#14, #0}: 30 + 20 + 30 = 80 at best; {#8, #14}: 10+20+60 = 90.
    let l = Limits { max_instances: Some(2), max_leaves: 8, ..Limits::default() };
    let s = try_synthesize(&m, &Catalog::embedded(), &[0, 1, 2], None, &l).unwrap();
    assert_eq!(s.train_us, 65.0);
    assert_eq!(s.instances.into_iter().collect::<Vec<_>>(), vec![0, 8]);
}

#[test]
fn leaf_never_picks_an_unusable_cell_when_a_usable_one_exists() {
    // #3 is far faster on M=16 but missing on M=32; one leaf must take #5, usable on both.
    let shapes = [Shape::new(16, 512, 512), Shape::new(32, 512, 512)];
    let cands = [Candidate::new(3, 0), Candidate::new(5, 0)];
    let m = matrix(&shapes, &cands, &[&[Some(1.0), Some(100.0)], &[None, Some(100.0)]]);
    let s = try_synthesize(&m, &Catalog::embedded(), &[0, 1], None, &limits(1, FeatureSet::Raw)).unwrap();
    assert_eq!(s.rule.root, Node::Leaf(Leaf::new(5, 0)));
    assert_eq!((s.unusable, s.train_us), (0, 200.0));
    // Invalid cells are treated the same way.
    let mut m2 = m.clone();
    m2.set(1, 0, Cell::Invalid("errRatio 0.2 > 0.05".into()));
    let s = try_synthesize(&m2, &Catalog::embedded(), &[0, 1], None, &limits(1, FeatureSet::Raw)).unwrap();
    assert_eq!(s.rule.root, Node::Leaf(Leaf::new(5, 0)));
    // With two leaves, each shape gets its best usable candidate.
    let s = try_synthesize(&m, &Catalog::embedded(), &[0, 1], None, &limits(2, FeatureSet::Raw)).unwrap();
    assert_eq!((s.unusable, s.train_us), (0, 101.0));
}

#[test]
fn unusable_pick_is_counted_when_no_candidate_covers_the_leaf() {
    let shapes = [Shape::new(16, 512, 512), Shape::new(32, 512, 512)];
    let cands = [Candidate::new(3, 0), Candidate::new(5, 0)];
    let m = matrix(&shapes, &cands, &[&[Some(1.0), None], &[None, Some(2.0)]]);
    let s = try_synthesize(&m, &Catalog::embedded(), &[0, 1], None, &limits(1, FeatureSet::Raw)).unwrap();
    assert_eq!(s.unusable, 1);
    let s = try_synthesize(&m, &Catalog::embedded(), &[0, 1], None, &limits(2, FeatureSet::Raw)).unwrap();
    assert_eq!((s.unusable, s.train_us), (0, 3.0));
}

#[test]
fn flops_weighting_favours_small_shapes() {
    // Uniform: #3 = 30 + 1000 = 1030 < #5 = 10 + 1030 = 1040. Flops weights are 1/(2MNK) normalized,
    // so M=16 weighs 256 times M=4096: #3 = 256·30 + 1000 = 8680 > #5 = 256·10 + 1030 = 3590.
    let shapes = [Shape::new(16, 512, 512), Shape::new(4096, 512, 512)];
    let cands = [Candidate::new(3, 0), Candidate::new(5, 0)];
    let m = matrix(&shapes, &cands, &[&[Some(30.0), Some(10.0)], &[Some(1000.0), Some(1030.0)]]);
    let l = limits(1, FeatureSet::Raw);
    assert_eq!(synthesize(&m, &[0, 1], None, &l).root, Node::Leaf(Leaf::new(3, 0)));
    let w = Weighting::Flops.weights(&m, &[0, 1]).unwrap();
    assert!((w[0] / w[1] - 256.0).abs() < 1e-9);
    assert!(((w[0] + w[1]) / 2.0 - 1.0).abs() < 1e-12);
    assert_eq!(synthesize(&m, &[0, 1], Some(&w), &l).root, Node::Leaf(Leaf::new(5, 0)));
    assert!(Weighting::Uniform.weights(&m, &[0, 1]).is_none());
    // Oracle weights: 1/best time (10 and 1000), normalized to mean 1: 2·100/101 and 2·1/101.
    let w = Weighting::Oracle.weights(&m, &[0, 1]).unwrap();
    assert!((w[0] - 200.0 / 101.0).abs() < 1e-12 && (w[1] - 2.0 / 101.0).abs() < 1e-12);
    // #3: 30/10 + 1000/1000 = 4 slowdown units; #5: 1 + 1.03 → #5.
    assert_eq!(synthesize(&m, &[0, 1], Some(&w), &l).root, Node::Leaf(Leaf::new(5, 0)));
}

#[test]
fn argument_errors_are_reported() {
    let m = three_by_three();
    let c = Catalog::embedded();
    let l = Limits::default();
    assert_eq!(try_synthesize(&m, &c, &[], None, &l).unwrap_err(), SynthError::EmptyTraining);
    assert_eq!(try_synthesize(&m, &c, &[3], None, &l).unwrap_err(), SynthError::BadShapeIndex { index: 3, shapes: 3 });
    assert_eq!(
        try_synthesize(&m, &c, &[0, 1], Some(&[1.0]), &l).unwrap_err(),
        SynthError::WeightCount { got: 1, train: 2 }
    );
    assert!(matches!(try_synthesize(&m, &c, &[0], Some(&[-1.0]), &l).unwrap_err(), SynthError::BadWeight { .. }));
    let zero = Limits { max_leaves: 0, ..Limits::default() };
    assert!(matches!(try_synthesize(&m, &c, &[0], None, &zero).unwrap_err(), SynthError::BadLimits { .. }));
}

/// A deterministic latency table: 3 layers × 14 M values × 6 instances × split-K 0..2, from a
/// wave-quantized work model with per-instance efficiency (test input only).
fn synthetic() -> LatencyMatrix {
    let catalog = Catalog::embedded();
    let layers = [(5120u32, 5120u32), (25600, 5120), (5120, 12800)];
    let ms = [1u32, 8, 16, 32, 48, 64, 96, 128, 256, 512, 1024, 2048, 4096, 8192];
    let kernels = [0i32, 3, 5, 8, 10, 14];
    let mut shapes = Vec::new();
    for &(n, k) in &layers {
        for &m in &ms {
            shapes.push(Shape::new(m, n, k));
        }
    }
    let cands: Vec<Candidate> = kernels.iter().flat_map(|&id| (0..3).map(move |s| Candidate::new(id, s))).collect();
    let mut mat = LatencyMatrix::new("gfx942", 304, None, shapes.clone(), cands.clone());
    for (si, s) in shapes.iter().enumerate() {
        for (ci, c) in cands.iter().enumerate() {
            let (bm, bn, _) = catalog.legacy_by_id(c.kernel_id).unwrap().tile();
            let parts = 1u64 << c.split_k;
            let wg = u64::from(s.m.div_ceil(bm)) * u64::from(s.n.div_ceil(bn)) * parts;
            let waves = wg.div_ceil(304) as f64;
            let eff = 1.0 + 0.05 * f64::from((c.kernel_id * 7 % 5) as u8);
            let per_wave = f64::from(bm.max(32)) * f64::from(bn) * f64::from(s.k) / parts as f64 * 2e-6 * eff;
            let t = 4.0
                + waves * per_wave
                + if c.split_k > 0 { f64::from(s.m) * f64::from(s.n) * 3e-7 * parts as f64 } else { 0.0 };
            // Make one corner unusable to exercise penalties.
            if c.kernel_id == 0 && c.split_k == 2 && s.m < 64 {
                mat.set(si, ci, Cell::Invalid("run failed: test".into()));
            } else {
                mat.set(si, ci, Cell::Ok(t));
            }
        }
    }
    mat
}

#[test]
fn limits_are_respected_and_larger_budgets_never_lose() {
    let m = synthetic();
    let c = Catalog::embedded();
    let train: Vec<usize> = (0..m.shapes.len()).collect();
    for (depth, inst, exact) in [(2usize, None, 2usize), (3, Some(2usize), 1), (6, Some(3), 2), (6, None, 1)] {
        let l = Limits {
            max_depth: depth,
            max_instances: inst,
            exact_depth: Some(exact),
            lookahead: Some(1),
            ..Limits::default()
        };
        let budgets = [1, 2, 3, 4, 6, 8, 12, 16];
        let all = synthesize_budgets(&m, &c, &train, None, &l, &budgets).unwrap();
        let mut prev = f64::INFINITY;
        for (r, &b) in all.iter().zip(&budgets) {
            assert!(r.leaves <= b && r.rule.root.leaves().len() == r.leaves, "budget {b}: {} leaves", r.leaves);
            assert!(r.depth <= depth && r.rule.root.depth() == r.depth);
            if let Some(k) = inst {
                assert!(r.instances.len() <= k, "{:?} > {k}", r.instances);
            }
            assert_eq!(r.unusable, 0);
            assert!(r.train_cost <= prev * (1.0 + 1e-12), "budget {b} costs {} > {prev}", r.train_cost);
            prev = r.train_cost;
        }
        // Separate searches agree with the ordering too.
        let small = try_synthesize(&m, &c, &train, None, &Limits { max_leaves: 4, ..l.clone() }).unwrap();
        let large = try_synthesize(&m, &c, &train, None, &Limits { max_leaves: 8, ..l.clone() }).unwrap();
        assert!(large.train_cost <= small.train_cost * (1.0 + 1e-12));
    }
}

#[test]
fn rule_interpreter_agrees_with_the_search() {
    let m = synthetic();
    let c = Catalog::embedded();
    // Every third shape: small enough for the default (exact depth 3) search in a debug build.
    let train: Vec<usize> = (0..m.shapes.len()).step_by(3).collect();
    let s = try_synthesize(&m, &c, &train, None, &Limits { max_leaves: 12, ..Limits::default() }).unwrap();
    let total: f64 = train
        .iter()
        .map(|&i| {
            let sh = m.shapes[i];
            let leaf = s.rule.eval(sh.m, sh.n, sh.k);
            let col = m.candidate_index(&Candidate::new(leaf.kernel_id, leaf.split_k)).unwrap();
            m.us(i, col).unwrap()
        })
        .sum();
    assert!((total - s.train_us).abs() < 1e-9 * total);
    // Splits compare a feature expression with an integer (`expr <= literal`); split-K guards are the
    // bench's measurement condition (`grid < CU && K >= literal`).
    s.rule.root.visit_conds(&mut |cond| match cond {
        Cond::And(parts) => assert!(matches!(
            parts.as_slice(),
            [
                Cond::Cmp { op: CmpOp::Lt, rhs: Expr::Lit(_), .. },
                Cond::Cmp { op: CmpOp::Ge, lhs: Expr::Var(Var::K), rhs: Expr::Lit(_) }
            ]
        )),
        other => assert!(matches!(other, Cond::Cmp { op: CmpOp::Le, rhs: Expr::Lit(_), .. }), "{other:?}"),
    });
    // Deterministic.
    let again = try_synthesize(&m, &c, &train, None, &Limits { max_leaves: 12, ..Limits::default() }).unwrap();
    assert!(s.leaves <= 12 && s.unusable == 0);
    assert_eq!(again.rule, s.rule);
}

#[test]
fn machine_features_are_at_least_as_good_as_raw() {
    // The machine set contains M, N and K, and two leaves come from the exact phase: never worse.
    let m = synthetic();
    let c = Catalog::embedded();
    let train: Vec<usize> = (0..m.shapes.len()).collect();
    let l = |set| Limits { exact_depth: Some(1), lookahead: Some(1), ..limits(2, set) };
    let raw = try_synthesize(&m, &c, &train, None, &l(FeatureSet::Raw)).unwrap();
    let mach = try_synthesize(&m, &c, &train, None, &l(FeatureSet::Machine)).unwrap();
    assert!(mach.train_cost <= raw.train_cost * (1.0 + 1e-12), "{} > {}", mach.train_cost, raw.train_cost);
}

#[test]
fn feature_expressions_evaluate_as_documented() {
    let f = features::machine(&[(16, 64, 256)], &[0, 1], 304);
    let by_name = |n: &str| f.iter().find(|x| x.name == n).unwrap_or_else(|| panic!("no feature {n}"));
    // M=100, N=5120: tiles = cdiv(100,16)·cdiv(5120,64) = 7·80 = 560; waves = cdiv(560,304) = 2;
    // K=5120 → steps = 2·cdiv(5120,256) = 40; split-K 1: waves = cdiv(1120,304) = 4, steps = 4·cdiv(2560,256) = 40.
    assert_eq!(by_name("tiles(16x64)").eval(100, 5120, 5120), 560);
    assert_eq!(by_name("waves(16x64)").eval(100, 5120, 5120), 2);
    assert_eq!(by_name("steps(16x64x256)").eval(100, 5120, 5120), 40);
    assert_eq!(by_name("waves(16x64, sk1)").eval(100, 5120, 5120), 4);
    assert_eq!(by_name("steps(16x64x256, sk1)").eval(100, 5120, 5120), 40);
    assert_eq!(by_name("M*N").eval(100, 5120, 5120), 512_000);
    assert_eq!(features::raw().len(), 3);
}

#[test]
fn redundant_features_are_dropped() {
    // f1 = 2·f0 makes the same splits; f2 orders the shapes differently.
    let vals = vec![vec![1, 2, 3, 4], vec![2, 4, 6, 8], vec![4, 3, 2, 1], vec![1, 1, 2, 2]];
    assert_eq!(tree::useful_features(&vals), vec![0, 2]);
}

/// Every tree of depth ≤ 2 over the problem, by brute force.
fn brute_depth2(p: &Problem) -> f64 {
    let n = p.shapes();
    let leaf = |set: &[usize]| {
        (0..p.candidates()).map(|c| set.iter().map(|&s| p.cost(s, c)).sum::<f64>()).fold(f64::INFINITY, f64::min)
    };
    let splits = |set: &[usize]| -> Vec<(Vec<usize>, Vec<usize>)> {
        let mut out = Vec::new();
        for f in 0..p.num_features() {
            let mut vals: Vec<i64> = set.iter().map(|&s| p.feature(f, s)).collect();
            vals.sort_unstable();
            vals.dedup();
            for t in vals.iter().take(vals.len().saturating_sub(1)) {
                let (l, r): (Vec<usize>, Vec<usize>) = set.iter().partition(|&&s| p.feature(f, s) <= *t);
                out.push((l, r));
            }
        }
        out
    };
    let all: Vec<usize> = (0..n).collect();
    let depth1 = |set: &[usize]| splits(set).iter().map(|(l, r)| leaf(l) + leaf(r)).fold(leaf(set), f64::min);
    splits(&all).iter().map(|(l, r)| depth1(l) + depth1(r)).fold(depth1(&all), f64::min)
}

/// A fixed pseudo-random sequence in [0, 1) (a linear congruential generator from `seed`).
fn lcg(seed: u64) -> impl FnMut() -> f64 {
    let mut state = seed;
    move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as f64 / (1u64 << 31) as f64
    }
}

#[test]
fn exact_search_matches_brute_force() {
    // Pseudo-random problems (a fixed linear congruential sequence).
    let mut next = lcg(12345);
    for trial in 0..12 {
        let n = 6 + trial % 5;
        let c = 3 + trial % 3;
        let cost: Vec<f64> = (0..n * c).map(|_| (next() * 100.0).round()).collect();
        let features: Vec<Vec<i64>> = (0..3).map(|_| (0..n).map(|_| (next() * 5.0) as i64).collect()).collect();
        let p = Problem::new(n, c, cost, features);
        let s = Searcher::new(&p, (0..c).collect());
        let front = s.solve(&Bits::full(n), 2);
        let best = front.last().unwrap();
        assert!((best.cost - brute_depth2(&p)).abs() < 1e-9, "trial {trial}: {} vs {}", best.cost, brute_depth2(&p));
        assert!((best.tree.cost(&p) - best.cost).abs() < 1e-9);
        assert!(best.tree.depth() <= 2 && best.tree.leaves() <= 4);
        // The full search never does worse than the exact depth-2 front at the same budget.
        let cfg = SearchConfig { max_depth: 4, max_leaves: 8, exact_depth: 2, lookahead: 2, grow_leaves: 8 };
        let fr = tree::search(&p, &(0..c).collect::<Vec<_>>(), &cfg);
        assert!(fr[3].cost <= best.cost + 1e-9);
        for w in fr.windows(2) {
            assert!(w[1].cost <= w[0].cost + 1e-9);
        }
        for (i, sol) in fr.iter().enumerate() {
            assert!(sol.tree.leaves() <= i + 1 && sol.tree.depth() <= 4);
            assert!((sol.tree.cost(&p) - sol.cost).abs() < 1e-6);
        }
    }
}

/// Every pruning of `tree` over the rows `set` (each subtree kept or replaced by the best single leaf of its
/// rows), as (leaves, cost) pairs, by enumeration.
fn prunings(p: &Problem, tree: &Tree, set: &[usize]) -> Vec<(usize, f64)> {
    let leaf =
        (0..p.candidates()).map(|j| set.iter().map(|&s| p.cost(s, j)).sum::<f64>()).fold(f64::INFINITY, f64::min);
    let mut out = vec![(1, leaf)];
    if let Tree::Split { feature, threshold, left, right } = tree {
        let (l, r): (Vec<usize>, Vec<usize>) = set.iter().partition(|&&s| p.feature(*feature, s) <= *threshold);
        for (a, ca) in prunings(p, left, &l) {
            for (b, cb) in prunings(p, right, &r) {
                out.push((a + b, ca + cb));
            }
        }
    }
    out
}

#[test]
fn pruning_is_the_cheapest_of_every_pruning_and_never_hurts_the_search() {
    let mut next = lcg(777);
    for trial in 0..10 {
        let n = 20 + trial;
        let c = 3 + trial % 3;
        let cost: Vec<f64> = (0..n * c).map(|_| (next() * 100.0).round()).collect();
        let features: Vec<Vec<i64>> = (0..3).map(|_| (0..n).map(|_| (next() * 8.0) as i64).collect()).collect();
        let p = Problem::new(n, c, cost, features);
        let s = Searcher::new(&p, (0..c).collect());
        let grown = s.grow(Tree::Leaf(0), 5, 10, 1);
        let big = &grown.last().unwrap().tree;
        let all: Vec<usize> = (0..n).collect();
        let every = prunings(&p, big, &all);
        let pruned = s.prune(big, &Bits::full(n), 6);
        for (i, sol) in pruned.iter().enumerate() {
            let want = every.iter().filter(|(l, _)| *l <= i + 1).map(|&(_, c)| c).fold(f64::INFINITY, f64::min);
            assert!((sol.cost - want).abs() < 1e-9, "trial {trial}, {} leaves: {} vs {want}", i + 1, sol.cost);
            assert!(sol.tree.leaves() <= i + 1);
            assert!((sol.tree.cost(&p) - sol.cost).abs() < 1e-9);
        }
        // Growing further and pruning back only adds candidates to the search's pool.
        let base = SearchConfig { max_depth: 5, max_leaves: 6, exact_depth: 1, lookahead: 1, grow_leaves: 6 };
        let plain = tree::search(&p, &(0..c).collect::<Vec<_>>(), &base);
        let more = tree::search(&p, &(0..c).collect::<Vec<_>>(), &SearchConfig { grow_leaves: 12, ..base });
        for (a, b) in plain.iter().zip(&more) {
            assert!(b.cost <= a.cost + 1e-9, "trial {trial}: {} > {}", b.cost, a.cost);
        }
    }
}

#[test]
fn relabel_restricts_leaves_to_allowed_columns() {
    let p = Problem::new(2, 3, vec![1.0, 5.0, 9.0, 9.0, 5.0, 1.0], vec![vec![0, 1]]);
    let t = Tree::Split { feature: 0, threshold: 0, left: Box::new(Tree::Leaf(0)), right: Box::new(Tree::Leaf(2)) };
    assert_eq!(t.cost(&p), 2.0);
    let r = t.relabeled(&p, &[1]);
    assert_eq!(r.leaf_candidates(), vec![1, 1]);
    assert_eq!(r.simplified(), Tree::Leaf(1));
}

/// Two candidates, #2 without and with split-K 1, on one down_proj-like layer (N=5120, K=12800); split-K
/// is measured only while the 64x128 grid is under one wave of 132 CUs (M <= 192), as a bench would.
fn split_k_matrix(ms: &[u32]) -> LatencyMatrix {
    let shapes: Vec<Shape> = ms.iter().map(|&m| Shape::new(m, 5120, 12800)).collect();
    let cands = vec![Candidate::new(2, 0), Candidate::new(2, 1)];
    let mut m = LatencyMatrix::new("sm_90", 132, None, shapes.clone(), cands);
    for (s, sh) in shapes.iter().enumerate() {
        let t0 = 40.0 + f64::from(sh.m);
        m.set(s, 0, Cell::Ok(t0));
        if sh.m.div_ceil(64) * 40 < 132 {
            m.set(s, 1, Cell::Ok(t0 * 0.6));
        }
    }
    m
}

#[test]
fn split_k_leaf_is_guarded_by_the_measurement_condition() {
    use synth_core::rule::BinOp;
    use synth_core::synthesize::guard::Guards;
    let m = split_k_matrix(&[16, 96, 288]);
    let c = Catalog::embedded();
    let g = Guards::new(&m, &c, &[0, 1, 2], 6);
    // Kernel 2 is 64x128x128: split-K 1 is measured where cdiv(M, 64) * cdiv(N, 128) < 132 and K >= 256.
    let (node, added) = g.apply(&Node::Leaf(Leaf::new(2, 1)));
    let tiles = Expr::bin(
        BinOp::Mul,
        Expr::bin(BinOp::CeilDiv, Expr::Var(Var::M), Expr::Lit(64)),
        Expr::bin(BinOp::CeilDiv, Expr::Var(Var::N), Expr::Lit(128)),
    );
    let cond = Cond::And(vec![
        Cond::cmp(CmpOp::Lt, tiles, Expr::Lit(132)),
        Cond::cmp(CmpOp::Ge, Expr::Var(Var::K), Expr::Lit(256)),
    ]);
    let want = Node::Chain {
        branches: vec![(cond, Node::Leaf(Leaf::new(2, 1)))],
        otherwise: Box::new(Node::Leaf(Leaf::new(2, 0))),
    };
    assert_eq!((node.clone(), added), (want, 1));
    // N = 5120: 40 tiles per 64 rows; 3 · 40 = 120 < 132 at M = 192, 4 · 40 = 160 at M = 193.
    assert_eq!(node.eval(192, 5120, 12800), Leaf::new(2, 1));
    assert_eq!(node.eval(193, 5120, 12800), Leaf::new(2, 0));
    // K = 128 has one K step: no split is measured.
    assert_eq!(node.eval(16, 5120, 128), Leaf::new(2, 0));
    // Without a level of depth left, the leaf falls back to its instance without split-K.
    let shallow = Guards::new(&m, &c, &[0, 1, 2], 0);
    assert_eq!(shallow.apply(&Node::Leaf(Leaf::new(2, 1))), (Node::Leaf(Leaf::new(2, 0)), 1));
    // Split-K 0 leaves are never guarded.
    assert_eq!(g.apply(&Node::Leaf(Leaf::new(2, 0))).1, 0);
}

#[test]
fn synthesized_split_k_rules_stay_within_measured_cells() {
    // Trained on M = 16, 96, 288, 1024; every dataset M from 1 to 2048 is then scored: the rule must never
    // pick split-K where it was not measured.
    let train_ms = [16, 96, 288, 1024];
    let all: Vec<u32> = (1..=2048).step_by(7).chain(train_ms).collect();
    let m = split_k_matrix(&all);
    let c = Catalog::embedded();
    let train: Vec<usize> = (0..m.shapes.len()).filter(|&s| train_ms.contains(&m.shapes[s].m)).collect();
    for leaves in [2, 3, 4] {
        let s = try_synthesize(&m, &c, &train, None, &limits(leaves, FeatureSet::Machine)).unwrap();
        assert!(s.leaves <= leaves);
        for (i, sh) in m.shapes.iter().enumerate() {
            let leaf = s.rule.eval(sh.m, sh.n, sh.k);
            let col = m.candidate_index(&Candidate::new(leaf.kernel_id, leaf.split_k)).unwrap();
            assert!(m.us(i, col).is_some(), "{leaves} leaves: M={} picks unmeasured {leaf:?}\n{:?}", sh.m, s.rule);
        }
    }
}

/// Kernel 2 (64x128x128) at split-K 0, 1, 2 on N = 5120 (40 tiles per 64 rows), K = 12800: the bench
/// measures level 2 where cdiv(M, 64) · 40 · 2 < 132 (M <= 64) and level 1 where cdiv(M, 64) · 40 < 132
/// (M <= 192).
///
/// | M   | s0  | s1 | s2 |
/// |-----|-----|----|----|
/// | 16  | 100 | 60 | 40 |
/// | 128 | 100 | 70 | -  |
/// | 512 | 100 | -  | -  |
fn fallback_matrix() -> LatencyMatrix {
    let shapes = [Shape::new(16, 5120, 12800), Shape::new(128, 5120, 12800), Shape::new(512, 5120, 12800)];
    let cands = [Candidate::new(2, 0), Candidate::new(2, 1), Candidate::new(2, 2)];
    let mut m = LatencyMatrix::new("sm_90", 132, None, shapes.to_vec(), cands.to_vec());
    let times: [&[Option<f64>]; 3] =
        [&[Some(100.0), Some(60.0), Some(40.0)], &[Some(100.0), Some(70.0), None], &[Some(100.0), None, None]];
    for (s, row) in times.iter().enumerate() {
        for (c, t) in row.iter().enumerate() {
            m.set(s, c, t.map_or(Cell::Missing, Cell::Ok));
        }
    }
    m
}

#[test]
fn guard_fallback_costs_let_one_split_k_leaf_serve_every_level() {
    // Three leaves, guards included. Charged only where measured, a split-K leaf of level 2 is unusable at
    // M = 128 and 512, and a tree that names levels 2, 1 and 0 needs its guards' leaves too (5): the best
    // that fits is one level-1 leaf guarded (60 + 70 + 100 = 230, its guard running level 0 at M = 512).
    // With fallback costs, the level-2 leaf costs 40, 70 and 100 (the levels its guard runs): guarded, it is
    // the chain `cond(2) -> s2, cond(1) -> s1, else s0` (3 leaves) and reaches the oracle, 210.
    let m = fallback_matrix();
    let c = Catalog::embedded();
    let train = [0, 1, 2];
    let plain = try_synthesize(&m, &c, &train, None, &limits(3, FeatureSet::Machine)).unwrap();
    assert_eq!((plain.train_us, plain.unusable), (230.0, 0), "{:?}", plain.rule);
    for bp in [0, 200] {
        let lim = Limits { split_k_fallback_bp: Some(bp), ..limits(3, FeatureSet::Machine) };
        let s = try_synthesize(&m, &c, &train, None, &lim).unwrap();
        assert_eq!((s.train_us, s.unusable, s.leaves), (210.0, 0, 3), "margin {bp} bp: {:?}", s.rule);
        let picks: Vec<Leaf> = [16, 128, 512].iter().map(|&mm| s.rule.eval(mm, 5120, 12800)).collect();
        assert_eq!(picks, vec![Leaf::new(2, 2), Leaf::new(2, 1), Leaf::new(2, 0)]);
        // The guard holds beyond the training shapes: level 2 only to M = 64, level 1 to M = 192.
        assert_eq!(s.rule.eval(64, 5120, 12800), Leaf::new(2, 2));
        assert_eq!(s.rule.eval(65, 5120, 12800), Leaf::new(2, 1));
        assert_eq!(s.rule.eval(193, 5120, 12800), Leaf::new(2, 0));
    }
    // Without guards the fallback costs do not apply (an unguarded leaf runs the level it names).
    let unguarded = Limits { split_k_guards: false, split_k_fallback_bp: Some(0), ..limits(3, FeatureSet::Machine) };
    let s = try_synthesize(&m, &c, &train, None, &unguarded).unwrap();
    let no_fallback = Limits { split_k_guards: false, ..limits(3, FeatureSet::Machine) };
    assert_eq!(s.rule, try_synthesize(&m, &c, &train, None, &no_fallback).unwrap().rule);
}

#[test]
fn refinement_moves_thresholds_to_the_nearest_m_boundary() {
    // Layer A (N=5120) prefers #2 at M=96 and #15 at M=288; layer B (N=25600) prefers #15 at both. No
    // M threshold separates A's 96 from the rest; `waves(64x128) <= 1` does, and changes exactly at
    // M=192/193 on layer A, halfway between A's training M values (nearest-M boundary).
    let shapes = vec![
        Shape::new(96, 5120, 5120),
        Shape::new(288, 5120, 5120),
        Shape::new(96, 25600, 5120),
        Shape::new(288, 25600, 5120),
    ];
    let cands = vec![Candidate::new(2, 0), Candidate::new(15, 0)];
    let m = matrix(
        &shapes,
        &cands,
        &[&[Some(10.0), Some(20.0)], &[Some(30.0), Some(20.0)], &[Some(30.0), Some(20.0)], &[Some(60.0), Some(40.0)]],
    );
    let c = Catalog::embedded();
    let s = try_synthesize(&m, &c, &[0, 1, 2, 3], None, &limits(2, FeatureSet::Machine)).unwrap();
    assert_eq!(s.train_us, 10.0 + 20.0 + 20.0 + 40.0);
    assert_eq!(s.rule.eval(192, 5120, 5120), Leaf::new(2, 0));
    assert_eq!(s.rule.eval(193, 5120, 5120), Leaf::new(15, 0));
    assert_eq!(s.rule.eval(1, 25600, 5120), Leaf::new(15, 0));
    // Without refinement the training routing is the same.
    let plain = try_synthesize(
        &m,
        &c,
        &[0, 1, 2, 3],
        None,
        &Limits { refine_thresholds: false, ..limits(2, FeatureSet::Machine) },
    )
    .unwrap();
    assert_eq!(plain.train_us, s.train_us);
}
