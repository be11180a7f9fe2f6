//! Rules learned from AITER's own tuned tables (classification against the tuned choice).
//!
//! A tuned table holds, per shape, only the kernel AITER's tuner found fastest and its time: no latency of
//! the other candidates. Training is therefore classification: a rule should return the tuned
//! (kernel, splitK) of each row. The synthesizer ([`crate::synthesize`]) expresses it as a cost matrix over
//! the union of the tuned candidates: cell (shape, candidate) = `w · (1 + wrong)`, where `wrong` is 0 for
//! the tuned candidate and 1 for every other, and `w` is the row's weight ([`AgreeWeight`]: 1, or the
//! tuned time over the mean tuned time). The constant 1 keeps every cell a positive "latency" and changes
//! no choice (every candidate of a shape pays it), so the tree with the least cost is the one with the most
//! (weighted) agreement. A shape in several tables sums its rows' costs. CK-tile rows count as a class no
//! legacy rule can return (every candidate is wrong on them).
//!
//! Every cell is usable (any kernel runs on any shape; only its time is unknown), so the split-K guards of
//! the latency synthesis, which read unusable cells, have nothing to guard and are off.
//!
//! [`leave_one_out`] trains on all tables but one and scores agreement on the held-out one, next to always
//! returning AITER's default kernel and always returning kernel 0.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::bail;
use rayon::prelude::*;

use crate::catalog::{Candidate, Catalog};
use crate::compare::{TunedEntry, TunedTable};
use crate::rule::{Leaf, Rule};
use crate::synthesize::{try_synthesize, Limits, Synthesized};
use crate::table::bands::BAND_EDGES;
use crate::table::{read_aiter_csv, AiterRow, Cell, LatencyMatrix, Shape};

/// M at or below which a shape counts as small (decode and short prefill) in the agreement figures.
pub const SMALL_M: u32 = 1024;

/// One tuned row of one device.
#[derive(Debug, Clone, PartialEq)]
pub struct TunedRow {
    pub shape: Shape,
    /// The tuned choice (default alias resolved; `legacy` false for CK-tile rows).
    pub entry: TunedEntry,
    /// The tuned time (us).
    pub us: f64,
    /// 1-based line in the file.
    pub line: usize,
}

/// The rows of one tuned table for one device.
#[derive(Debug, Clone, PartialEq)]
pub struct TunedSet {
    /// Short name (the file stem).
    pub name: String,
    /// The file as given.
    pub source: String,
    pub gfx: String,
    pub cu_num: u32,
    /// One row per shape, ascending (M, N, K); a later row of a shape replaces an earlier one, as AITER's
    /// lookup dictionary does.
    pub rows: Vec<TunedRow>,
    /// Rows of other devices in the file (left out).
    pub other_device: usize,
    /// The file's rows of this device as read (for the sparse latency matrix of the instance list).
    pub raw: Vec<AiterRow>,
}

/// Parses `GFX:CU` (e.g. `gfx942:304`).
pub fn parse_device(text: &str) -> anyhow::Result<(String, u32)> {
    let (gfx, cu) = text.split_once(':').unwrap_or((text, ""));
    let cu: u32 = cu.parse().ok().filter(|c| *c > 0).ok_or_else(|| {
        anyhow::anyhow!("device \"{text}\": expected GFX:CU with a positive CU count, e.g. gfx942:304")
    })?;
    if !gfx.starts_with("gfx") || gfx.len() <= 3 {
        bail!("device \"{text}\": expected an architecture name such as gfx942 before the colon");
    }
    Ok((gfx.to_string(), cu))
}

impl TunedSet {
    /// Loads the rows of `device` from an AITER tuned CSV; an error when the file has none.
    pub fn load(path: &Path, catalog: &Catalog, device: (&str, u32)) -> anyhow::Result<TunedSet> {
        let rows = read_aiter_csv(path, catalog).map_err(|e| anyhow::anyhow!("{e}"))?;
        let name = path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into_owned());
        TunedSet::from_rows(&name, &path.display().to_string(), &rows, catalog, device)
    }

    /// The set of `device`'s rows among `rows`.
    pub fn from_rows(
        name: &str,
        source: &str,
        rows: &[AiterRow],
        catalog: &Catalog,
        device: (&str, u32),
    ) -> anyhow::Result<TunedSet> {
        let (gfx, cu) = device;
        let mut by_shape: BTreeMap<Shape, TunedRow> = BTreeMap::new();
        let mut raw = Vec::new();
        let mut other = 0;
        let mut devices = BTreeSet::new();
        for r in rows {
            devices.insert(format!("{}:{}", r.gfx, r.cu_num));
            if r.gfx != gfx || r.cu_num != cu {
                other += 1;
                continue;
            }
            let legacy = r.libtype == crate::catalog::Libtype::Ck;
            let kernel_id = if legacy && r.kernel_id < 0 { catalog.default_alias } else { r.kernel_id };
            let Some(us) = r.us else {
                return Err(synth_base::diag::Located::new(
                    source.to_string(),
                    "a tuned row without a time (us) cannot be a tuned choice",
                )
                .line(r.line)
                .hint("remove the row")
                .into());
            };
            let entry = TunedEntry { candidate: Candidate::new(kernel_id, r.split_k), legacy };
            by_shape.insert(r.shape(), TunedRow { shape: r.shape(), entry, us, line: r.line });
            raw.push(r.clone());
        }
        if by_shape.is_empty() {
            bail!(
                "{source}: no row for device {gfx}:{cu} (the file has {}); pick its device with --train-device / --device",
                devices.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
        Ok(TunedSet {
            name: name.to_string(),
            source: source.to_string(),
            gfx: gfx.to_string(),
            cu_num: cu,
            rows: by_shape.into_values().collect(),
            other_device: other,
            raw,
        })
    }

    /// The set as a tuned table (AITER's lookup).
    pub fn table(&self) -> TunedTable {
        let mut t = TunedTable::new(&self.source);
        for r in &self.rows {
            t.insert(r.shape, r.entry);
        }
        t
    }
}

/// How rows weigh in the agreement objective and figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum AgreeWeight {
    /// Every row counts once.
    #[default]
    Uniform,
    /// Each row counts by its tuned time (a wrong pick on a long GEMM weighs more).
    Time,
    /// Every M band (1-64, 65-256, 257-1024, 1025-4096, 4097-16384, >16384) with training
    /// rows weighs the same in total, shared equally by its rows: the few small-M rows, where the winners
    /// differ, are not drowned by the many large-M rows that kernel 0 wins.
    Band,
    /// Every (table, M band) with training rows weighs the same in total: as `band`, and besides each
    /// table counts alike, so a small table (e.g. one tuned with split-K candidates) is not drowned by
    /// large ones.
    #[value(name = "table-band")]
    TableBand,
}

impl AgreeWeight {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            AgreeWeight::Uniform => "uniform",
            AgreeWeight::Time => "time",
            AgreeWeight::Band => "band",
            AgreeWeight::TableBand => "table-band",
        }
    }

    /// Every objective, in the order the leave-one-table-out figures list them.
    pub const ALL: [AgreeWeight; 4] =
        [AgreeWeight::Uniform, AgreeWeight::Time, AgreeWeight::Band, AgreeWeight::TableBand];

    /// The weight of each row of `rows` (in order; `tables[i]` is the table row `i` comes from),
    /// normalized so they sum to the number of rows.
    pub fn weights(self, rows: &[&TunedRow], tables: &[usize]) -> Vec<f64> {
        debug_assert_eq!(rows.len(), tables.len());
        let n = rows.len() as f64;
        let band = |m: u32| BAND_EDGES.iter().filter(|&&e| m > e).count();
        // Rows in the group of each row, for the group-balanced objectives.
        let balanced = |group: &dyn Fn(usize) -> (usize, usize)| {
            let mut counts: BTreeMap<(usize, usize), usize> = BTreeMap::new();
            for i in 0..rows.len() {
                *counts.entry(group(i)).or_default() += 1;
            }
            let groups = counts.len() as f64;
            (0..rows.len()).map(|i| n / (groups * counts[&group(i)] as f64)).collect()
        };
        match self {
            AgreeWeight::Uniform => vec![1.0; rows.len()],
            AgreeWeight::Time => {
                let mean_us = rows.iter().map(|r| r.us).sum::<f64>() / n;
                rows.iter().map(|r| r.us / mean_us).collect()
            }
            AgreeWeight::Band => balanced(&|i| (0, band(rows[i].shape.m))),
            AgreeWeight::TableBand => balanced(&|i| (tables[i], band(rows[i].shape.m))),
        }
    }
}

/// The candidates a rule trained on `sets` can return: every legacy tuned choice of their rows, kernel 0
/// and AITER's default kernel.
pub fn training_candidates(sets: &[&TunedSet], catalog: &Catalog) -> Vec<Candidate> {
    let mut cands: BTreeSet<Candidate> =
        sets.iter().flat_map(|s| &s.rows).filter(|r| r.entry.legacy).map(|r| r.entry.candidate).collect();
    cands.insert(Candidate::new(0, 0));
    cands.insert(Candidate::new(catalog.default_alias, 0));
    cands.into_iter().collect()
}

/// The classification cost matrix of `sets` (see the module documentation), on the sets' device.
pub fn class_matrix(sets: &[&TunedSet], catalog: &Catalog, weight: AgreeWeight) -> anyhow::Result<LatencyMatrix> {
    let Some(first) = sets.first() else { bail!("no tuned table to train on: pass at least one --train-tuned FILE") };
    if let Some(s) = sets.iter().find(|s| s.gfx != first.gfx || s.cu_num != first.cu_num) {
        bail!(
            "{} is for {}:{} but {} is for {}:{}; train on tables of one device",
            s.source,
            s.gfx,
            s.cu_num,
            first.source,
            first.gfx,
            first.cu_num
        );
    }
    let candidates = training_candidates(sets, catalog);
    let rows: Vec<&TunedRow> = sets.iter().flat_map(|s| &s.rows).collect();
    let tables: Vec<usize> = sets.iter().enumerate().flat_map(|(t, s)| std::iter::repeat_n(t, s.rows.len())).collect();
    let weights = weight.weights(&rows, &tables);
    // (N, K, M) → the (tuned column, weight) of each row of that shape.
    type Votes = Vec<(Option<usize>, f64)>;
    let mut by_shape: BTreeMap<(u32, u32, u32), Votes> = BTreeMap::new();
    for (r, &w) in rows.iter().zip(&weights) {
        let col = if r.entry.legacy { candidates.iter().position(|c| *c == r.entry.candidate) } else { None };
        by_shape.entry((r.shape.n, r.shape.k, r.shape.m)).or_default().push((col, w));
    }
    let shapes: Vec<Shape> = by_shape.keys().map(|&(n, k, m)| Shape::new(m, n, k)).collect();
    let mut m = LatencyMatrix::new(&first.gfx, first.cu_num, None, shapes, candidates.clone());
    for (s, votes) in by_shape.values().enumerate() {
        for c in 0..candidates.len() {
            let cost: f64 = votes.iter().map(|&(col, w)| w * if col == Some(c) { 1.0 } else { 2.0 }).sum();
            m.set(s, c, Cell::Ok(cost));
        }
    }
    Ok(m)
}

/// The limits of a classification training: the given ones without split-K guards (see the module doc).
pub fn class_limits(limits: &Limits) -> Limits {
    Limits { split_k_guards: false, ..limits.clone() }
}

/// Trains a rule on every row of `sets` with the agreement objective `weight`.
pub fn train(
    sets: &[&TunedSet],
    catalog: &Catalog,
    limits: &Limits,
    weight: AgreeWeight,
) -> anyhow::Result<Synthesized> {
    let matrix = class_matrix(sets, catalog, weight)?;
    let all: Vec<usize> = (0..matrix.shapes.len()).collect();
    Ok(try_synthesize(&matrix, catalog, &all, None, &class_limits(limits))?)
}

/// The candidate a rule leaf names (the default alias resolved).
pub fn leaf_candidate(leaf: &Leaf, catalog: &Catalog) -> Candidate {
    let id = if leaf.kernel_id < 0 { catalog.default_alias } else { leaf.kernel_id };
    Candidate::new(id, leaf.split_k)
}

/// Whether a legacy pick equals a tuned entry (same kernel, same splitK; CK-tile entries never match).
pub fn agrees(pick: Candidate, entry: &TunedEntry) -> bool {
    entry.legacy && entry.candidate == pick
}

/// Agreement of a policy with one table's tuned choices.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Agreement {
    pub rows: usize,
    pub agree: usize,
    /// Rows with M ≤ [`SMALL_M`], and how many of them agree.
    pub small_rows: usize,
    pub small_agree: usize,
    /// Summed tuned time of all rows and of the agreeing rows (time-weighted agreement).
    pub us: f64,
    pub agree_us: f64,
}

impl Agreement {
    /// Share of rows that agree (1.0 for no rows).
    pub fn overall(&self) -> f64 {
        ratio(self.agree, self.rows)
    }
    /// Share of the M ≤ 1024 rows that agree.
    pub fn small(&self) -> f64 {
        ratio(self.small_agree, self.small_rows)
    }
    /// Share of tuned time on agreeing rows.
    pub fn time_weighted(&self) -> f64 {
        if self.us > 0.0 {
            self.agree_us / self.us
        } else {
            1.0
        }
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

/// Agreement of `pick` (shape → legacy candidate) with the rows of `set`.
pub fn agreement(set: &TunedSet, pick: impl Fn(Shape) -> Candidate) -> Agreement {
    let mut a = Agreement::default();
    for r in &set.rows {
        let ok = agrees(pick(r.shape), &r.entry);
        a.rows += 1;
        a.agree += usize::from(ok);
        a.us += r.us;
        if ok {
            a.agree_us += r.us;
        }
        if r.shape.m <= SMALL_M {
            a.small_rows += 1;
            a.small_agree += usize::from(ok);
        }
    }
    a
}

/// Agreement of an oracle that returns each row's tuned choice when it is one of `candidates` (and a
/// wrong one otherwise): the ceiling of any rule over `candidates`.
pub fn ceiling(set: &TunedSet, candidates: &[Candidate]) -> Agreement {
    let tuned: BTreeMap<Shape, Candidate> = set
        .rows
        .iter()
        .filter(|r| r.entry.legacy && candidates.contains(&r.entry.candidate))
        .map(|r| (r.shape, r.entry.candidate))
        .collect();
    // A CK-tile candidate no legacy rule returns stands for "none of them".
    agreement(set, |s| tuned.get(&s).copied().unwrap_or(Candidate::new(-2, 0)))
}

/// Agreement of a rule with a table.
pub fn rule_agreement(rule: &Rule, set: &TunedSet, catalog: &Catalog) -> Agreement {
    agreement(set, |s| leaf_candidate(&rule.eval(s.m, s.n, s.k), catalog))
}

/// One held-out table of a leave-one-table-out evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct LotoRow {
    /// The held-out table's name.
    pub held_out: String,
    /// The objective the rule was trained with.
    pub objective: AgreeWeight,
    /// The rule trained on the other tables, and its agreement with the held-out one.
    pub rule: Rule,
    pub leaves: usize,
    pub rule_agreement: Agreement,
    /// Always AITER's default kernel, and always kernel 0.
    pub default_agreement: Agreement,
    pub kernel0_agreement: Agreement,
    /// The most any rule over the training candidates can agree: held-out rows whose tuned choice is a
    /// legacy candidate of the training tables ([`training_candidates`]).
    pub ceiling: Agreement,
    /// A rule trained on the held-out table alone (same objective and limits), scored on it: what a rule
    /// of this size reaches on the table when transfer between tables is not asked of it.
    pub in_table: Agreement,
}

/// Leave-one-table-out: for each table and each objective, train on the other tables and score the
/// held-out one. Needs at least two tables.
pub fn leave_one_out(
    sets: &[TunedSet],
    catalog: &Catalog,
    limits: &Limits,
    objectives: &[AgreeWeight],
) -> anyhow::Result<Vec<LotoRow>> {
    if sets.len() < 2 {
        bail!("leave-one-table-out needs at least two tuned tables ({} given)", sets.len());
    }
    let jobs: Vec<(usize, AgreeWeight)> =
        (0..sets.len()).flat_map(|i| objectives.iter().map(move |&w| (i, w))).collect();
    let default = Candidate::new(catalog.default_alias, 0);
    jobs.par_iter()
        .map(|&(i, w)| {
            let others: Vec<&TunedSet> = sets.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, s)| s).collect();
            let synth = train(&others, catalog, limits, w)?;
            let held = &sets[i];
            let own = train(&[held], catalog, limits, w)?;
            Ok(LotoRow {
                held_out: held.name.clone(),
                objective: w,
                rule_agreement: rule_agreement(&synth.rule, held, catalog),
                leaves: synth.leaves,
                rule: synth.rule,
                default_agreement: agreement(held, |_| default),
                kernel0_agreement: agreement(held, |_| Candidate::new(0, 0)),
                ceiling: ceiling(held, &training_candidates(&others, catalog)),
                in_table: rule_agreement(&own.rule, held, catalog),
            })
        })
        .collect()
}

/// The leave-one-table-out rows as CSV.
pub fn loto_csv(rows: &[LotoRow]) -> anyhow::Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "held_out",
        "objective",
        "leaves",
        "rows",
        "rows_m_le_1024",
        "rule",
        "rule_m_le_1024",
        "rule_time_weighted",
        "default",
        "default_m_le_1024",
        "kernel0",
        "kernel0_m_le_1024",
        "ceiling",
        "ceiling_m_le_1024",
        "in_table",
        "in_table_m_le_1024",
    ])?;
    for r in rows {
        w.write_record(loto_cells(r))?;
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}

/// One leave-one-table-out row in the CSV's column order (agreements to 4 decimals).
fn loto_cells(r: &LotoRow) -> Vec<String> {
    let f = |x: f64| format!("{x:.4}");
    vec![
        r.held_out.clone(),
        r.objective.as_str().to_string(),
        r.leaves.to_string(),
        r.rule_agreement.rows.to_string(),
        r.rule_agreement.small_rows.to_string(),
        f(r.rule_agreement.overall()),
        f(r.rule_agreement.small()),
        f(r.rule_agreement.time_weighted()),
        f(r.default_agreement.overall()),
        f(r.default_agreement.small()),
        f(r.kernel0_agreement.overall()),
        f(r.kernel0_agreement.small()),
        f(r.ceiling.overall()),
        f(r.ceiling.small()),
        f(r.in_table.overall()),
        f(r.in_table.small()),
    ]
}

/// The leave-one-table-out rows as an aligned text table.
pub fn loto_table(rows: &[LotoRow]) -> String {
    use synth_base::textable::{left, right, TextTable};
    let columns = vec![
        left("held-out table").min(44),
        left("weight").min(8),
        right("leaves").min(6),
        right("rows").min(6),
        right("rule").min(8),
        right("rule M<=1k"),
        right("rule(t)").min(8),
        right("default").min(8),
        right("def M<=1k").min(10),
        right("kernel0").min(8),
        right("k0 M<=1k").min(10),
        right("ceiling").min(8),
        right("ceil M<=1k").min(10),
        right("in-table").min(8),
        right("in-t M<=1k").min(10),
    ];
    let mut t = TextTable::new(columns).gap(1);
    for r in rows {
        let mut cells = loto_cells(r);
        cells.remove(4); // the terminal table leaves out the count of M <= 1024 rows
        t.row(cells);
    }
    t.render()
}

/// Whether a latency matrix reads as a tuned table: every shape has exactly one usable cell (its winner).
pub fn is_tuned_matrix(matrix: &LatencyMatrix) -> bool {
    let nc = matrix.candidates.len();
    !matrix.shapes.is_empty()
        && (0..matrix.shapes.len()).all(|s| (0..nc).filter(|&c| matrix.us(s, c).is_some()).count() == 1)
}

/// Agreement of each rule policy (and the default) with a tuned table loaded as a matrix ([`is_tuned_matrix`]),
/// over the shapes `scored`: the text `synth compare` prints after its table. Empty when the matrix is not a
/// tuned table.
pub fn agreement_text(
    matrix: &LatencyMatrix,
    catalog: &Catalog,
    policies: &[crate::compare::Policy],
    scored: &[usize],
) -> String {
    use crate::compare::Policy;
    if !is_tuned_matrix(matrix) {
        return String::new();
    }
    let rows: Vec<TunedRow> = scored
        .iter()
        .filter_map(|&s| {
            matrix.best(s).map(|(c, us)| TunedRow {
                shape: matrix.shapes[s],
                entry: TunedEntry { candidate: matrix.candidates[c], legacy: true },
                us,
                line: 0,
            })
        })
        .collect();
    let set = TunedSet {
        name: "table".into(),
        source: String::new(),
        gfx: matrix.gfx.clone(),
        cu_num: matrix.cu_num,
        rows,
        other_device: 0,
        raw: Vec::new(),
    };
    let default = Candidate::new(catalog.default_alias, 0);
    let out = format!(
        "\nagreement with the tuned (kernel, splitK) of {} rows (a tuned table holds only each shape's winner: agreement, not latency):\n",
        set.rows.len(),
    );
    let columns = vec![
        synth_base::textable::left("policy").min(28),
        synth_base::textable::right("agree").min(8),
        synth_base::textable::right("agree M<=1k").min(12),
        synth_base::textable::right("time-weighted").min(14),
    ];
    let mut t = synth_base::textable::TextTable::new(columns).gap(1);
    let mut line = |name: &str, a: Agreement| {
        t.row([
            name.to_string(),
            format!("{:.4}", a.overall()),
            format!("{:.4}", a.small()),
            format!("{:.4}", a.time_weighted()),
        ]);
    };
    line("default", agreement(&set, |_| default));
    line("kernel 0", agreement(&set, |_| Candidate::new(0, 0)));
    for p in policies {
        if let Policy::Rule { name, rule } = p {
            line(name, rule_agreement(rule, &set, catalog));
        }
    }
    out + &t.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(m: u32, n: u32, k: u32, kid: i32, us: f64) -> TunedRow {
        TunedRow {
            shape: Shape::new(m, n, k),
            entry: TunedEntry { candidate: Candidate::new(kid, 0), legacy: true },
            us,
            line: 0,
        }
    }

    fn set(name: &str, rows: Vec<TunedRow>) -> TunedSet {
        TunedSet {
            name: name.into(),
            source: name.into(),
            gfx: "gfx942".into(),
            cu_num: 304,
            rows,
            other_device: 0,
            raw: vec![],
        }
    }

    #[test]
    fn class_matrix_costs_one_for_the_tuned_choice_and_two_otherwise_summed_over_tables() {
        let cat = Catalog::embedded();
        let a = set("a", vec![row(16, 512, 512, 8, 1.0), row(32, 512, 512, 0, 3.0)]);
        let b = set("b", vec![row(16, 512, 512, 0, 2.0)]);
        let m = class_matrix(&[&a, &b], &cat, AgreeWeight::Uniform).unwrap();
        // Candidates: #0, default alias #7, #8.
        assert_eq!(m.candidates, vec![Candidate::new(0, 0), Candidate::new(7, 0), Candidate::new(8, 0)]);
        let s16 = m.shape_index(&Shape::new(16, 512, 512)).unwrap();
        // Shape 16 is in both tables: #0 agrees with b (1) and not a (2) = 3; #7 = 4; #8 = 1 + 2 = 3.
        assert_eq!((m.us(s16, 0), m.us(s16, 1), m.us(s16, 2)), (Some(3.0), Some(4.0), Some(3.0)));
        // Time weighting: mean tuned time 2.0, so the rows weigh 0.5, 1.5 and 1.0.
        let t = class_matrix(&[&a, &b], &cat, AgreeWeight::Time).unwrap();
        let s32 = t.shape_index(&Shape::new(32, 512, 512)).unwrap();
        assert_eq!((t.us(s32, 0), t.us(s32, 2)), (Some(1.5), Some(3.0)));
        assert_eq!(t.us(s16, 2), Some(0.5 + 2.0));
    }

    #[test]
    fn band_weights_share_each_m_band_equally() {
        let ms = [16, 32, 100, 2000, 3000, 4000, 5000, 20000];
        let rows: Vec<TunedRow> = ms.iter().map(|&m| row(m, 512, 512, 0, 1.0)).collect();
        let refs: Vec<&TunedRow> = rows.iter().collect();
        // Bands 1-64 {16, 32}, 65-256 {100}, 1025-4096 {2000, 3000, 4000}, 4097-16384 {5000}, >16384
        // {20000}: five bands of total weight 8 / 5 each.
        let band = AgreeWeight::Band.weights(&refs, &[0; 8]);
        let want = [0.8, 0.8, 1.6, 8.0 / 15.0, 8.0 / 15.0, 8.0 / 15.0, 1.6, 1.6];
        for (got, want) in band.iter().zip(want) {
            assert!((got - want).abs() < 1e-12, "{band:?}");
        }
        assert_eq!(AgreeWeight::Uniform.weights(&refs, &[0; 8]), vec![1.0; 8]);
        // Two tables: rows 0..6 from table 0, rows 6 and 7 (M 5000 and 20000) from table 1. Groups
        // (0, 1-64) {16, 32}, (0, 65-256) {100}, (0, 1025-4096) {2000, 3000, 4000}, (1, 4097-16384) {5000},
        // (1, >16384) {20000}: five groups of 8 / 5 each, the same as band here.
        let tb = AgreeWeight::TableBand.weights(&refs, &[0, 0, 0, 0, 0, 0, 1, 1]);
        for (got, want) in tb.iter().zip(want) {
            assert!((got - want).abs() < 1e-12, "{tb:?}");
        }
        // Table 1 holding M 16 as well: groups (0, 1-64) {32} and (1, 1-64) {16} split the first band.
        let tb = AgreeWeight::TableBand.weights(&refs, &[1, 0, 0, 0, 0, 0, 1, 1]);
        let want6 = [8.0 / 6.0, 8.0 / 6.0, 8.0 / 6.0, 8.0 / 18.0, 8.0 / 18.0, 8.0 / 18.0, 8.0 / 6.0, 8.0 / 6.0];
        for (got, want) in tb.iter().zip(want6) {
            assert!((got - want).abs() < 1e-12, "{tb:?}");
        }
        // In the cost matrix: M = 100 (alone in its band) tuned #8 costs 1.6 on #8 and 3.2 elsewhere.
        let cat = Catalog::embedded();
        let mut rows = rows.clone();
        rows[2] = row(100, 512, 512, 8, 1.0);
        let s = set("s", rows);
        let m = class_matrix(&[&s], &cat, AgreeWeight::Band).unwrap();
        let i = m.shape_index(&Shape::new(100, 512, 512)).unwrap();
        let c8 = m.candidates.iter().position(|c| *c == Candidate::new(8, 0)).unwrap();
        let c0 = m.candidates.iter().position(|c| *c == Candidate::new(0, 0)).unwrap();
        assert!((m.us(i, c8).unwrap() - 1.6).abs() < 1e-12);
        assert!((m.us(i, c0).unwrap() - 3.2).abs() < 1e-12);
    }

    #[test]
    fn the_ceiling_counts_rows_whose_tuned_choice_is_a_training_candidate() {
        let cat = Catalog::embedded();
        let train = set("train", vec![row(16, 512, 512, 8, 1.0), row(4096, 512, 512, 0, 1.0)]);
        let cands = training_candidates(&[&train], &cat);
        assert_eq!(cands, vec![Candidate::new(0, 0), Candidate::new(7, 0), Candidate::new(8, 0)]);
        let mut split = row(32, 256, 7168, 8, 1.0);
        split.entry.candidate = Candidate::new(8, 2);
        let mut tile = row(64, 256, 7168, 0, 1.0);
        tile.entry.legacy = false;
        let held = set("held", vec![row(16, 256, 7168, 8, 1.0), split, tile, row(2048, 256, 7168, 0, 1.0)]);
        let c = ceiling(&held, &cands);
        // #8 and #0 are reachable; (8, sk 2) is not a training candidate and CK-tile never agrees.
        assert_eq!((c.rows, c.agree, c.small_rows, c.small_agree), (4, 2, 3, 1));
    }

    #[test]
    fn training_recovers_a_threshold_rule_and_agreement_counts_it() {
        let cat = Catalog::embedded();
        let mut rows = Vec::new();
        for m in (16..=4096).step_by(16) {
            rows.push(row(m, 4096, 4096, if m <= 256 { 8 } else { 0 }, m as f64));
        }
        let s = set("t", rows);
        let limits = Limits { max_leaves: 4, ..Limits::default() };
        let synth = train(&[&s], &cat, &limits, AgreeWeight::Uniform).unwrap();
        let a = rule_agreement(&synth.rule, &s, &cat);
        assert_eq!((a.agree, a.rows), (256, 256));
        // 16 rows at M <= 256 pick #8; M <= 1024: 64 rows, 16 of them #8.
        let k0 = agreement(&s, |_| Candidate::new(0, 0));
        assert_eq!((k0.agree, k0.small_rows, k0.small_agree), (240, 64, 48));
        let total: f64 = (16..=4096).step_by(16).map(f64::from).sum();
        let small: f64 = (16..=256).step_by(16).map(f64::from).sum();
        assert!((k0.time_weighted() - (total - small) / total).abs() < 1e-12);
    }

    #[test]
    fn devices_parse_and_bad_ones_are_named() {
        assert_eq!(parse_device("gfx942:304").unwrap(), ("gfx942".to_string(), 304));
        assert!(parse_device("gfx942").unwrap_err().to_string().contains("GFX:CU"));
        assert!(parse_device("mi300:304").unwrap_err().to_string().contains("architecture"));
    }
}
