//! Source positions of a parsed rule, kept beside the IR (whose serde form has no positions).
//!
//! Nodes are addressed by [`NodePath`]: the child index taken at each chain on the way down from the
//! root, where index `i < branches.len()` is branch `i` and `i == branches.len()` is `otherwise`.

use std::collections::BTreeMap;

use super::error::{Pos, RuleError};
use super::ir::{Cond, Leaf, Node, Rule, MAX_JSON_DEPTH};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
pub enum SNode {
    Leaf(Leaf, Pos),
    Chain { branches: Vec<(Pos, Cond, SNode)>, else_pos: Pos, otherwise: Box<SNode> },
}

impl SNode {
    /// Splits into the IR node and its source map.
    pub fn into_parts(self) -> (Node, SourceMap) {
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

    /// Checks that the rule fits [`MAX_JSON_DEPTH`] when this node's JSON value starts `level`
    /// levels down; the error points at the branch or leaf that goes too deep.
    pub fn check_json_depth(&self, level: usize) -> Result<(), RuleError> {
        let too_deep = |pos: Pos, what: &str| {
            RuleError::at(
                pos,
                format!(
                    "this {what} nests too deeply: a rule may nest chains, conditions and expressions at most {MAX_JSON_DEPTH} levels deep in its JSON form; split the expression or flatten the nesting"
                ),
            )
        };
        match self {
            SNode::Leaf(_, pos) => {
                if level + 2 > MAX_JSON_DEPTH {
                    return Err(too_deep(*pos, "leaf"));
                }
            }
            SNode::Chain { branches, else_pos, otherwise } => {
                for (pos, cond, child) in branches {
                    if level + 4 + cond.json_depth() > MAX_JSON_DEPTH {
                        return Err(too_deep(*pos, "branch"));
                    }
                    child.check_json_depth(level + 4)?;
                }
                if level + 2 > MAX_JSON_DEPTH {
                    return Err(too_deep(*else_pos, "branch"));
                }
                otherwise.check_json_depth(level + 2)?;
            }
        }
        Ok(())
    }
}

/// Splits the leading `//` comment block of rule text off as the rule's note.
///
/// Blank lines before the first comment are skipped; the block ends at the first line that is not
/// a `//` comment. Each line loses its `//` and one following space; lines are joined with `\n`.
/// Returns the note and the text with those comment lines blanked (same line/column positions).
pub fn split_leading_note(text: &str) -> (Option<String>, String) {
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

/// Prints `note` as a leading `//` comment block that [`split_leading_note`] reads back. Each line goes
/// through [`synth_base::sanitize::comment_line`], so no character of the note can end the comment or splice
/// the next line into it (a trailing `\`, a `\r`): the text stays a comment for g++ and rustc.
pub fn note_comment(note: &str) -> String {
    let mut out = String::new();
    for line in note.split('\n') {
        if line.is_empty() {
            out.push_str("//\n");
        } else {
            out.push_str("// ");
            out.push_str(&synth_base::sanitize::comment_line(line));
            out.push('\n');
        }
    }
    out
}

/// Deepest bracket nesting rule text may use.
pub const MAX_BRACKET_DEPTH: usize = 48;
/// Most operator characters between two braces / semicolons (one condition).
pub const MAX_OPERATOR_RUN: usize = 1000;
/// Most prefix operators (`!`, `-`) applied in a row.
pub const MAX_PREFIX_RUN: usize = 64;

/// Rejects text whose nesting or expression length would exhaust the parsers' stack: brackets
/// nested deeper than [`MAX_BRACKET_DEPTH`] or more than [`MAX_OPERATOR_RUN`] operator characters
/// in one condition or more than [`MAX_PREFIX_RUN`] `!`/`-` in a row. Comments are skipped.
pub fn check_text_limits(text: &str) -> Result<(), RuleError> {
    check_text_limits_within(text, MAX_BRACKET_DEPTH)
}

/// [`check_text_limits`] with brackets nested at most `max_depth` deep.
pub fn check_text_limits_within(text: &str, max_depth: usize) -> Result<(), RuleError> {
    let chars: Vec<char> = text.chars().collect();
    let (mut line, mut col) = (1usize, 1usize);
    let mut depth = 0usize;
    let mut run = 0usize;
    let mut run_start = Pos::new(1, 1);
    let mut prefix = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let pos = Pos::new(line, col);
        let skip_to = if c == '/' && next == Some('/') {
            (i..chars.len()).find(|&j| chars[j] == '\n').unwrap_or(chars.len())
        } else if c == '/' && next == Some('*') {
            (i + 2..chars.len())
                .find(|&j| chars[j] == '*' && chars.get(j + 1) == Some(&'/'))
                .map_or(chars.len(), |j| j + 2)
        } else {
            match c {
                '(' | '[' | '{' => {
                    depth += 1;
                    if depth > max_depth {
                        return Err(RuleError::at(
                            pos,
                            format!("brackets nest more than {max_depth} levels deep here; flatten the rule"),
                        ));
                    }
                }
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            if matches!(c, '!' | '-') {
                prefix += 1;
                if prefix > MAX_PREFIX_RUN {
                    return Err(RuleError::at(
                        pos,
                        format!("more than {MAX_PREFIX_RUN} `!`/`-` in a row; simplify the condition"),
                    ));
                }
            } else if !c.is_whitespace() && c != '(' {
                prefix = 0;
            }
            if matches!(c, '{' | '}' | ';') {
                run = 0;
            } else if matches!(c, '+' | '-' | '*' | '/' | '<' | '>' | '=' | '&' | '|' | '!') {
                if run == 0 {
                    run_start = pos;
                }
                run += 1;
                if run > MAX_OPERATOR_RUN {
                    return Err(RuleError::at(
                        run_start,
                        format!("the condition starting here has more than {MAX_OPERATOR_RUN} operator characters; split it"),
                    ));
                }
            }
            i + 1
        };
        while i < skip_to {
            if chars[i] == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
            i += 1;
        }
    }
    Ok(())
}
