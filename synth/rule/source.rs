//! Source positions of a parsed rule, kept beside the IR (whose serde form has no positions).
//!
//! Nodes are addressed by [`NodePath`]: the child index taken at each chain on the way down from the
//! root, where index `i < branches.len()` is branch `i` and `i == branches.len()` is `otherwise`.

use std::collections::BTreeMap;

use super::error::Pos;
use super::ir::{Cond, Leaf, Node, Rule};

/// Child indices from the root to a node (see the module docs).
pub type NodePath = Vec<usize>;

/// Where the branches and leaves of a parsed rule came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceMap {
    /// Position of the `if` guarding the node at this path (for an `otherwise` node: the `else`,
    /// or the statement after the `if` when the C++ text falls through to it).
    pub guards: BTreeMap<NodePath, Pos>,
    /// Position of each leaf (the `return` or the leaf expression).
    pub leaves: BTreeMap<NodePath, Pos>,
}

impl SourceMap {
    /// Line of the guard of the node at `path`, if known.
    pub fn guard_line(&self, path: &[usize]) -> Option<usize> {
        self.guards.get(path).map(|p| p.line)
    }

    /// Line of the leaf at `path`, if known.
    pub fn leaf_line(&self, path: &[usize]) -> Option<usize> {
        self.leaves.get(path).map(|p| p.line)
    }
}

/// Which text form a rule was read from or is printed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Form {
    Cpp,
    Rust,
    Json,
}

impl std::fmt::Display for Form {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Form::Cpp => "cpp",
            Form::Rust => "rust",
            Form::Json => "json",
        })
    }
}

/// A parsed rule with the positions of its parts (empty for JSON) and the form it was read from.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub rule: Rule,
    pub source: SourceMap,
    pub form: Form,
}

/// A node under construction by a parser, carrying positions.
#[derive(Debug, Clone)]
pub(crate) enum SNode {
    Leaf(Leaf, Pos),
    Chain { branches: Vec<(Pos, Cond, SNode)>, else_pos: Pos, otherwise: Box<SNode> },
}

impl SNode {
    /// Splits into the IR node and its source map.
    pub(crate) fn into_parts(self) -> (Node, SourceMap) {
        let mut map = SourceMap::default();
        let mut path = Vec::new();
        let node = self.build(&mut path, &mut map);
        (node, map)
    }

    fn build(self, path: &mut NodePath, map: &mut SourceMap) -> Node {
        match self {
            SNode::Leaf(leaf, pos) => {
                map.leaves.insert(path.clone(), pos);
                Node::Leaf(leaf)
            }
            SNode::Chain { branches, else_pos, otherwise } => {
                let count = branches.len();
                let mut out = Vec::with_capacity(count);
                for (i, (pos, cond, child)) in branches.into_iter().enumerate() {
                    path.push(i);
                    map.guards.insert(path.clone(), pos);
                    out.push((cond, child.build(path, map)));
                    path.pop();
                }
                path.push(count);
                map.guards.insert(path.clone(), else_pos);
                let otherwise = otherwise.build(path, map);
                path.pop();
                Node::Chain { branches: out, otherwise: Box::new(otherwise) }
            }
        }
    }

    /// Number of nodes (to bound the growth of C++ fall-through expansion).
    pub(crate) fn size(&self) -> usize {
        match self {
            SNode::Leaf(..) => 1,
            SNode::Chain { branches, otherwise, .. } => {
                1 + otherwise.size() + branches.iter().map(|(_, _, n)| n.size()).sum::<usize>()
            }
        }
    }
}

/// Splits the leading `//` comment block of rule text off as the rule's note.
///
/// Blank lines before the first comment are skipped; the block ends at the first line that is not
/// a `//` comment. Each line loses its `//` and one following space; lines are joined with `\n`.
/// Returns the note and the text with those comment lines blanked (same line/column positions).
pub(crate) fn split_leading_note(text: &str) -> (Option<String>, String) {
    let mut note_lines: Vec<String> = Vec::new();
    let mut out = String::with_capacity(text.len());
    let mut in_block = true;
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let trimmed = line.trim_start();
        if in_block {
            if let Some(rest) = trimmed.strip_prefix("//") {
                let rest = rest.strip_suffix('\r').unwrap_or(rest);
                note_lines.push(rest.strip_prefix(' ').unwrap_or(rest).to_string());
                out.extend(line.chars().map(|c| if c == '\r' { '\r' } else { ' ' }));
                continue;
            }
            if !trimmed.trim().is_empty() || !note_lines.is_empty() {
                in_block = false;
            }
        }
        out.push_str(line);
    }
    let note = (!note_lines.is_empty()).then(|| note_lines.join("\n"));
    (note, out)
}

/// Prints `note` as a leading `//` comment block that [`split_leading_note`] reads back.
pub(crate) fn note_comment(note: &str) -> String {
    let mut out = String::new();
    for line in note.split('\n') {
        if line.is_empty() {
            out.push_str("//\n");
        } else {
            out.push_str("// ");
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}
