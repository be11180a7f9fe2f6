//! The documentation book's result tables: the committed result CSVs rendered as markdown pages that the
//! book's chapters `{{#include}}` (`synth book`, wired in `app/book.rs`). Nothing here reads or writes a
//! file: the command hands in each CSV's text and writes the pages this returns.
//!
//! Which CSVs are rendered, and how, is the small list [`TABLES`]; the directories searched for them are
//! [`SOURCE_DIRS`]. A page names the CSV it was rendered from and holds no timestamp, so rendering the
//! same CSVs again gives the same bytes (`synth book --check`). Every cell passes
//! [`synth_base::sanitize::shown`] and a markdown escape, so no text of a CSV becomes markup in the book.

use anyhow::{bail, Context, Result};

use super::file::GeneratedFile;

/// How one CSV becomes markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Every row in one table, columns as in the file.
    Rows,
    /// One table per distinct value of the named column (in the order the values first appear), under a
    /// line naming the value; the column itself is left out of the tables.
    GroupedBy(&'static str),
    /// One row per distinct value of the `keys` columns (in the order they first appear), one column per
    /// distinct value of `across` (likewise), each cell the `value` column of the row with both; a pair
    /// two rows hold is an error naming the second row's line.
    Pivot { keys: &'static [&'static str], across: &'static str, value: &'static str },
    /// A per-(shape, policy) comparison (`compare.csv`) summed up: one row per policy with its shapes,
    /// unusable picks, geomean fraction of the oracle and speed-ups over the default.
    PolicySummary,
}

/// One page the book shows: the CSV it is rendered from, by file name, the page's name and its layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSpec {
    /// File name inside a source directory, e.g. `evaluations.csv`.
    pub csv: &'static str,
    /// The page's file name, e.g. `evaluations.md`.
    pub page: &'static str,
    /// How it is rendered.
    pub layout: Layout,
}

/// The pages rendered wherever their CSV exists in a source directory.
pub const TABLES: &[TableSpec] = &[
    TableSpec {
        csv: "evaluations.csv",
        page: "evaluations.md",
        layout: Layout::Pivot { keys: &["evaluation", "config", "shapes"], across: "policy", value: "of_oracle" },
    },
    TableSpec { csv: "evaluations.csv", page: "evaluations-full.md", layout: Layout::GroupedBy("evaluation") },
    TableSpec { csv: "leaves_curve.csv", page: "leaves_curve.md", layout: Layout::Rows },
    TableSpec { csv: "compare.csv", page: "compare-summary.md", layout: Layout::PolicySummary },
];

/// The committed result directories, relative to the checkout root, searched for the CSVs of [`TABLES`].
/// A page of `generated/X.csv` is written at its name; one of `generated/D/X.csv` under `D/`; one of
/// `measurements/zoo/folds/X.csv` (the shipped CK rule's job with its leave-one-model-out folds, which the
/// main job leaves out) under `zoo-folds/`.
pub const SOURCE_DIRS: &[&str] = &["generated", "generated/triton", "generated/triton-h100", "measurements/zoo/folds"];

/// Where the pages of a directory of [`SOURCE_DIRS`] go, relative to the output directory.
fn page_dir(dir: &str) -> &str {
    match dir {
        "measurements/zoo/folds" => "zoo-folds",
        _ => dir.strip_prefix("generated").and_then(|d| d.strip_prefix('/')).unwrap_or(""),
    }
}

/// One CSV handed in: its path as shown on the page (relative to the checkout root) and its text.
#[derive(Debug, Clone)]
pub struct Source<'a> {
    /// The directory of [`SOURCE_DIRS`] it was read from.
    pub dir: &'a str,
    /// Its entry in [`TABLES`].
    pub spec: TableSpec,
    /// The file's text.
    pub text: &'a str,
}

impl Source<'_> {
    /// The CSV's path relative to the checkout root.
    pub fn path(&self) -> String {
        format!("{}/{}", self.dir, self.spec.csv)
    }

    /// The page's name inside the output directory.
    pub fn page_name(&self) -> String {
        let page = self.spec.page;
        match page_dir(self.dir) {
            "" => page.to_string(),
            sub => format!("{sub}/{page}"),
        }
    }
}

/// The page of every source, in the order given.
pub fn render_pages(sources: &[Source<'_>]) -> Result<Vec<GeneratedFile>> {
    sources.iter().map(|s| Ok(GeneratedFile::new(s.page_name(), render_page(s)?))).collect()
}

/// One source's page: a comment naming the CSV and the command, then its table(s).
pub fn render_page(source: &Source<'_>) -> Result<String> {
    let path = source.path();
    let csv = Csv::parse(&path, source.text)?;
    let body = match source.spec.layout {
        Layout::Rows => table(&csv.header, &csv.rows),
        Layout::GroupedBy(column) => grouped(&csv, &path, column)?,
        Layout::Pivot { keys, across, value } => pivot(&csv, &path, keys, across, value)?,
        Layout::PolicySummary => policy_summary(&csv, &path)?,
    };
    Ok(format!(
        "<!-- Rendered by `synth book` from {path} (checked by `synth book --check`); do not edit by hand. -->\n\n{body}"
    ))
}

/// A CSV read whole: header and rows, every row as long as the header.
struct Csv {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Csv {
    fn parse(path: &str, text: &str) -> Result<Csv> {
        let mut reader = ::csv::ReaderBuilder::new().has_headers(true).from_reader(text.as_bytes());
        let header: Vec<String> = reader
            .headers()
            .with_context(|| format!("{path}: cannot read the header"))?
            .iter()
            .map(String::from)
            .collect();
        if header.iter().all(|h| h.trim().is_empty()) {
            bail!("{path}: line 1: no header (the file is empty or its first line is blank)");
        }
        let mut rows = Vec::new();
        for record in reader.records() {
            let record = record.map_err(|e| match e.position() {
                Some(p) => anyhow::anyhow!("{path}: line {}: {e}", p.line()),
                None => anyhow::anyhow!("{path}: {e}"),
            })?;
            rows.push(record.iter().map(String::from).collect());
        }
        Ok(Csv { header, rows })
    }

    fn column(&self, path: &str, name: &str) -> Result<usize> {
        self.header
            .iter()
            .position(|h| h == name)
            .with_context(|| format!("{path}: line 1: no column {name:?} (the columns are {})", self.header.join(", ")))
    }
}

/// A markdown table of `header` and `rows`; a column whose every cell is a number is right-aligned.
fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let numeric: Vec<bool> = (0..header.len())
        .map(|c| !rows.is_empty() && rows.iter().all(|r| r[c].is_empty() || r[c].parse::<f64>().is_ok()))
        .collect();
    let mut out = String::new();
    push_row(&mut out, header.iter().map(|h| cell(h)));
    push_row(&mut out, numeric.iter().map(|&n| if n { "---:" } else { "---" }.to_string()));
    for row in rows {
        push_row(&mut out, row.iter().map(|c| cell(c)));
    }
    out
}

fn push_row(out: &mut String, cells: impl Iterator<Item = String>) {
    out.push('|');
    for c in cells {
        out.push(' ');
        out.push_str(&c);
        out.push_str(" |");
    }
    out.push('\n');
}

/// A CSV cell as markdown text: hazards written as code points, markdown punctuation escaped, so a value
/// shows as itself and never as a link, emphasis, HTML or a column break.
pub fn cell(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in synth_base::sanitize::shown(text).chars() {
        if matches!(c, '\\' | '|' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '&' | '#' | '!' | '~' | '$' | '{' | '}') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn grouped(csv: &Csv, path: &str, column: &str) -> Result<String> {
    let key = csv.column(path, column)?;
    let mut groups: Vec<(&str, Vec<Vec<String>>)> = Vec::new();
    for row in &csv.rows {
        let rest: Vec<String> = row.iter().enumerate().filter(|&(i, _)| i != key).map(|(_, v)| v.clone()).collect();
        match groups.iter_mut().find(|(k, _)| *k == row[key]) {
            Some((_, rows)) => rows.push(rest),
            None => groups.push((&row[key], vec![rest])),
        }
    }
    let header: Vec<String> =
        csv.header.iter().enumerate().filter(|&(i, _)| i != key).map(|(_, h)| h.clone()).collect();
    let parts: Vec<String> =
        groups.iter().map(|(k, rows)| format!("{} = {}:\n\n{}", cell(column), cell(k), table(&header, rows))).collect();
    Ok(parts.join("\n"))
}

fn pivot(csv: &Csv, path: &str, keys: &[&str], across: &str, value: &str) -> Result<String> {
    let key_cols = keys.iter().map(|k| csv.column(path, k)).collect::<Result<Vec<_>>>()?;
    let (across_col, value_col) = (csv.column(path, across)?, csv.column(path, value)?);
    let mut columns: Vec<&str> = Vec::new();
    let mut rows: Vec<(Vec<&str>, Vec<Option<&str>>)> = Vec::new();
    for (i, row) in csv.rows.iter().enumerate() {
        let key: Vec<&str> = key_cols.iter().map(|&c| row[c].as_str()).collect();
        let col = columns.iter().position(|c| *c == row[across_col]).unwrap_or_else(|| {
            columns.push(&row[across_col]);
            columns.len() - 1
        });
        let at = rows.iter().position(|(k, _)| *k == key).unwrap_or_else(|| {
            rows.push((key, Vec::new()));
            rows.len() - 1
        });
        let cells = &mut rows[at].1;
        cells.resize(columns.len(), None);
        if cells[col].replace(&row[value_col]).is_some() {
            bail!("{path}: line {}: a second row for {} with {across} = {:?}", i + 2, keys.join(", "), row[across_col]);
        }
    }
    let header: Vec<String> = keys.iter().chain(&columns).map(|s| s.to_string()).collect();
    let body: Vec<Vec<String>> = rows
        .into_iter()
        .map(|(key, cells)| {
            let values = (0..columns.len()).map(|c| cells.get(c).copied().flatten().unwrap_or("").to_string());
            key.into_iter().map(String::from).chain(values).collect()
        })
        .collect();
    Ok(format!("{} by {}:\n\n{}", cell(value), cell(across), table(&header, &body)))
}

/// Per policy (in the order policies first appear): shapes, unusable picks (status other than `ok`),
/// geomean of `of_oracle`, geomean of `speedup_vs_default`, and total default time over total time.
fn policy_summary(csv: &Csv, path: &str) -> Result<String> {
    let [policy, status, of_oracle, speedup, us, default_us] =
        ["policy", "status", "of_oracle", "speedup_vs_default", "us", "default_us"].map(|c| csv.column(path, c));
    let (policy, status, of_oracle, speedup, us, default_us) =
        (policy?, status?, of_oracle?, speedup?, us?, default_us?);
    let mut acc: Vec<(String, PolicyTotals)> = Vec::new();
    for (i, row) in csv.rows.iter().enumerate() {
        let num = |c: usize| -> Result<f64> {
            let v: f64 = row[c].parse().ok().filter(|v: &f64| v.is_finite() && *v > 0.0).with_context(|| {
                format!("{path}: line {}: column {} = {:?}: not a positive number", i + 2, csv.header[c], row[c])
            })?;
            Ok(v)
        };
        let entry = match acc.iter().position(|(p, _)| *p == row[policy]) {
            Some(at) => &mut acc[at].1,
            None => {
                acc.push((row[policy].clone(), PolicyTotals::default()));
                &mut acc.last_mut().expect("just pushed").1
            }
        };
        entry.shapes += 1;
        entry.unusable += usize::from(row[status] != "ok");
        entry.ln_of_oracle += num(of_oracle)?.ln();
        entry.ln_speedup += num(speedup)?.ln();
        entry.us += num(us)?;
        entry.default_us += num(default_us)?;
    }
    let header: Vec<String> =
        ["policy", "shapes", "unusable picks", "of oracle (geomean)", "x default (geomean)", "x default (total)"]
            .map(String::from)
            .to_vec();
    let rows: Vec<Vec<String>> = acc
        .iter()
        .map(|(p, t)| {
            let n = t.shapes as f64;
            vec![
                p.clone(),
                t.shapes.to_string(),
                t.unusable.to_string(),
                format!("{:.3}", (t.ln_of_oracle / n).exp()),
                format!("{:.3}", (t.ln_speedup / n).exp()),
                format!("{:.3}", t.default_us / t.us),
            ]
        })
        .collect();
    Ok(table(&header, &rows))
}

#[derive(Debug, Default)]
struct PolicyTotals {
    shapes: usize,
    unusable: usize,
    ln_of_oracle: f64,
    ln_speedup: f64,
    us: f64,
    default_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source<'a>(dir: &'a str, csv: &'static str, layout: Layout, text: &'a str) -> Source<'a> {
        Source { dir, spec: TableSpec { csv, page: "p.md", layout }, text }
    }

    #[test]
    fn page_names_follow_the_directory() {
        assert_eq!(source("generated", "evaluations.csv", Layout::Rows, "").page_name(), "p.md");
        assert_eq!(source("generated/triton", "compare.csv", Layout::Rows, "").page_name(), "triton/p.md");
        assert_eq!(source("measurements/zoo/folds", "compare.csv", Layout::Rows, "").page_name(), "zoo-folds/p.md");
    }

    #[test]
    fn a_pivot_puts_each_value_under_its_column_and_refuses_a_pair_twice() {
        let layout = Layout::Pivot { keys: &["e"], across: "p", value: "v" };
        let page = render_page(&source("generated", "x.csv", layout, "e,p,v\na,x,1\nb,y,2\na,y,3\n")).unwrap();
        assert!(
            page.ends_with("v by p:\n\n| e | x | y |\n| --- | ---: | ---: |\n| a | 1 | 3 |\n| b |  | 2 |\n"),
            "{page}"
        );
        let err = render_page(&source("generated", "x.csv", layout, "e,p,v\na,x,1\na,x,2\n")).unwrap_err();
        assert!(format!("{err:#}").contains("generated/x.csv: line 3"), "{err:#}");
    }

    #[test]
    fn cells_never_become_markup() {
        assert_eq!(cell("a|b"), "a\\|b");
        assert_eq!(cell("<script>"), "\\<script\\>");
        assert_eq!(cell("[x](y)"), "\\[x\\](y)");
        assert_eq!(cell("\u{1b}[31m"), "\\<U+001B\\>\\[31m");
        assert_eq!(cell("qwen3-32b-tp2"), "qwen3-32b-tp2");
    }

    #[test]
    fn a_ragged_row_is_an_error_naming_file_and_line() {
        let err = render_page(&source("generated", "leaves_curve.csv", Layout::Rows, "a,b\n1,2\n3\n")).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("generated/leaves_curve.csv: line 3"), "{msg}");
    }

    #[test]
    fn a_missing_column_is_named() {
        let err =
            render_page(&source("generated", "compare.csv", Layout::PolicySummary, "policy,us\nx,1\n")).unwrap_err();
        assert!(format!("{err:#}").contains("no column \"status\""), "{err:#}");
    }
}
