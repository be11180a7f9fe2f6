//! Editing rule trees by path: the leaf a shape reaches, the leaves and chains of a tree, the node at a
//! path, replacing a subtree, and merging what an edit leaves redundant. A path ([`NodePath`]) is a list
//! of branch indices from the root; index `branches.len()` is the `otherwise` arm.

use super::ir::{Cond, Leaf, Node};
use super::source::NodePath;

/// The path (see [`NodePath`]) of the leaf that shape (m, n, k) reaches.
pub fn leaf_path(node: &Node, m: u32, n: u32, k: u32) -> NodePath {
    let mut path = Vec::new();
    let mut cur = node;
    loop {
        match cur {
            Node::Leaf(_) => return path,
            Node::Chain { branches, otherwise } => match branches.iter().position(|(c, _)| c.eval(m, n, k)) {
                Some(i) => {
                    path.push(i);
                    cur = &branches[i].1;
                }
                None => {
                    path.push(branches.len());
                    cur = otherwise;
                }
            },
        }
    }
}

/// The leaf at `path`, if the path ends at one.
pub fn leaf_at(node: &Node, path: &[usize]) -> Option<Leaf> {
    match (node, path.split_first()) {
        (Node::Leaf(l), None) => Some(*l),
        (Node::Chain { branches, otherwise }, Some((&i, rest))) => {
            if i < branches.len() {
                leaf_at(&branches[i].1, rest)
            } else if i == branches.len() {
                leaf_at(otherwise, rest)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Paths of every leaf, in source order.
pub fn leaf_paths(node: &Node) -> Vec<NodePath> {
    let mut out = Vec::new();
    walk_paths(node, &mut Vec::new(), &mut |p, n| {
        if matches!(n, Node::Leaf(_)) {
            out.push(p.to_vec())
        }
    });
    out
}

/// Paths of every chain, outermost first.
pub fn chain_paths(node: &Node) -> Vec<NodePath> {
    let mut out = Vec::new();
    walk_paths(node, &mut Vec::new(), &mut |p, n| {
        if matches!(n, Node::Chain { .. }) {
            out.push(p.to_vec())
        }
    });
    out
}

fn walk_paths(node: &Node, path: &mut Vec<usize>, f: &mut dyn FnMut(&[usize], &Node)) {
    f(path, node);
    if let Node::Chain { branches, otherwise } = node {
        for (i, (_, child)) in branches.iter().enumerate() {
            path.push(i);
            walk_paths(child, path, f);
            path.pop();
        }
        path.push(branches.len());
        walk_paths(otherwise, path, f);
        path.pop();
    }
}

/// The node at `path`.
pub fn node_at<'a>(node: &'a Node, path: &[usize]) -> Option<&'a Node> {
    match path.split_first() {
        None => Some(node),
        Some((&i, rest)) => match node {
            Node::Chain { branches, otherwise } if i < branches.len() => node_at(&branches[i].1, rest),
            Node::Chain { branches, otherwise } if i == branches.len() => node_at(otherwise, rest),
            _ => None,
        },
    }
}

/// `node` with the subtree at `path` replaced by `new` (unchanged when the path does not exist).
pub fn replace_at(node: &Node, path: &[usize], new: Node) -> Node {
    match path.split_first() {
        None => new,
        Some((&i, rest)) => match node {
            Node::Chain { branches, otherwise } if i < branches.len() => {
                let mut b = branches.clone();
                b[i].1 = replace_at(&b[i].1, rest, new);
                Node::Chain { branches: b, otherwise: otherwise.clone() }
            }
            Node::Chain { branches, otherwise } if i == branches.len() => {
                Node::Chain { branches: branches.clone(), otherwise: Box::new(replace_at(otherwise, rest, new)) }
            }
            _ => node.clone(),
        },
    }
}

/// Merges what a move can leave redundant: a chain whose branches and `otherwise` are all the same
/// leaf becomes that leaf, and trailing branches returning the same leaf as `otherwise` are dropped.
pub fn simplify(node: &Node) -> Node {
    match node {
        Node::Leaf(l) => Node::Leaf(*l),
        Node::Chain { branches, otherwise } => {
            let otherwise = simplify(otherwise);
            let mut b: Vec<(Cond, Node)> = branches.iter().map(|(c, n)| (c.clone(), simplify(n))).collect();
            while let Some((_, last)) = b.last() {
                if *last == otherwise {
                    b.pop();
                } else {
                    break;
                }
            }
            if b.is_empty() {
                otherwise
            } else {
                Node::Chain { branches: b, otherwise: Box::new(otherwise) }
            }
        }
    }
}
