//! The one aligned-table printer of the terminal reports (compare, drift, tuned and import summaries, the
//! bench summary, the leaves curve, ...).
//!
//! A column is as wide as its widest cell (counted in characters) and at least its minimum width; text is
//! left- or right-aligned per column; columns are separated by a fixed gap; lines never end in spaces.
//! Cells are strings, so each report keeps its own number formats.

/// How a column's cells are aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A column: its header, alignment and minimum width.
#[derive(Debug, Clone)]
pub struct Column {
    pub title: String,
    pub align: Align,
    pub min_width: usize,
}

/// A left-aligned column.
pub fn left(title: &str) -> Column {
    Column { title: title.to_string(), align: Align::Left, min_width: 0 }
}

/// A right-aligned column.
pub fn right(title: &str) -> Column {
    Column { title: title.to_string(), align: Align::Right, min_width: 0 }
}

impl Column {
    /// The same column, at least `width` characters wide.
    pub fn min(mut self, width: usize) -> Column {
        self.min_width = width;
        self
    }
}

/// Rows under a header, printed aligned.
#[derive(Debug, Clone)]
pub struct TextTable {
    columns: Vec<Column>,
    rows: Vec<Vec<String>>,
    indent: String,
    gap: usize,
    rule: bool,
}

impl TextTable {
    /// A table of `columns`, two spaces between columns, no indent, no rule under the header.
    pub fn new(columns: Vec<Column>) -> TextTable {
        TextTable { columns, rows: Vec::new(), indent: String::new(), gap: 2, rule: false }
    }

    /// Spaces between columns.
    pub fn gap(mut self, gap: usize) -> TextTable {
        self.gap = gap;
        self
    }

    /// Text before every line.
    pub fn indent(mut self, indent: &str) -> TextTable {
        self.indent = indent.to_string();
        self
    }

    /// A line of dashes under the header, as wide as the table.
    pub fn rule(mut self) -> TextTable {
        self.rule = true;
        self
    }

    /// Appends a row; missing cells are empty, cells past the last column are dropped.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let mut cells: Vec<String> = cells.into_iter().map(Into::into).collect();
        cells.resize(self.columns.len(), String::new());
        self.rows.push(cells);
    }

    /// The header and every row, one line each.
    pub fn render(&self) -> String {
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(c, col)| {
                self.rows
                    .iter()
                    .map(|r| r[c].chars().count())
                    .chain([col.title.chars().count(), col.min_width])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let gap = " ".repeat(self.gap);
        let line = |cells: &[&str]| {
            let parts: Vec<String> = cells
                .iter()
                .zip(&self.columns)
                .zip(&widths)
                .map(|((s, col), &w)| match col.align {
                    Align::Left => format!("{s:<w$}"),
                    Align::Right => format!("{s:>w$}"),
                })
                .collect();
            format!("{}{}", self.indent, parts.join(&gap)).trim_end().to_string() + "\n"
        };
        let header: Vec<&str> = self.columns.iter().map(|c| c.title.as_str()).collect();
        let mut out = line(&header);
        if self.rule {
            let total = widths.iter().sum::<usize>() + self.gap * widths.len().saturating_sub(1);
            out.push_str(&format!("{}{}\n", self.indent, "-".repeat(total)));
        }
        for r in &self.rows {
            out.push_str(&line(&r.iter().map(String::as_str).collect::<Vec<_>>()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_fit_the_widest_cell_and_lines_end_in_no_space() {
        let mut t = TextTable::new(vec![left("policy"), right("x"), left("note")]);
        t.row(["default", "1.000", ""]);
        t.row(["synthesized", "12.5", "best"]);
        assert_eq!(t.render(), "policy           x  note\ndefault      1.000\nsynthesized   12.5  best\n");
    }

    #[test]
    fn minimum_widths_indent_gap_and_rule() {
        let mut t = TextTable::new(vec![left("layer").min(8), right("N").min(4)]).gap(1).indent("  ").rule();
        t.row(["qkv", "10240"]);
        assert_eq!(t.render(), "  layer        N\n  --------------\n  qkv      10240\n");
    }

    #[test]
    fn widths_count_characters_and_short_rows_are_padded() {
        let mut t = TextTable::new(vec![left("a"), right("b")]);
        t.row(["×××"]);
        assert_eq!(t.render(), "a    b\n×××\n");
    }
}
