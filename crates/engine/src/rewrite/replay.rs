//! The replay proposer: proposes pre-written rewrites from a directory, in file-name order, one per
//! offspring slot it serves — so the loop (build, run, measure, reflect, select) runs without a model.
//!
//! The file for a request is fixed by the request alone (iteration, offspring slot), so a run is
//! deterministic even though the engine proposes a generation's slots in parallel, and a resumed run
//! proposes the same files. With several proposers, slot `s` belongs to proposer `s % count`; the
//! replay numbers only the slots it serves. Guidance and parents are ignored; once every file has been
//! proposed, further requests fail with "exhausted" (the engine records that as a failed attempt).

use crate::engine::{ProposalRequest, ProposeError, Proposer};
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};

/// Pre-written candidates replayed in order.
#[derive(Debug, Clone)]
pub struct ReplayProposer {
    dir: PathBuf,
    files: Vec<(String, String)>,
    served_per_iteration: usize,
    position: usize,
    stride: usize,
}

impl ReplayProposer {
    /// Reads every regular file of `dir` not starting with `.` (sorted by name) and not named
    /// `README*`. `offspring` is the loop's offspring count; `position`/`count` say which of the loop's
    /// proposers this is (slot `s` is served when `s % count == position`).
    pub fn from_dir(dir: &Path, offspring: usize, position: usize, count: usize) -> anyhow::Result<Self> {
        if count == 0 || position >= count || offspring == 0 {
            bail!("replay proposer: position {position} of {count} proposers with offspring {offspring} is not valid");
        }
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot list the replay directory {}", dir.display()))?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<Result<_, _>>()
            .with_context(|| format!("cannot list the replay directory {}", dir.display()))?;
        names.retain(|n| !n.starts_with('.') && !n.starts_with("README") && dir.join(n).is_file());
        names.sort();
        if names.is_empty() {
            bail!("the replay directory {} holds no rewrite files", dir.display());
        }
        let mut files = Vec::with_capacity(names.len());
        for n in names {
            let p = dir.join(&n);
            let text =
                synth_base::input::read_text_capped(&p, synth_base::input::MAX_SOURCE_BYTES, "pre-written rewrite")
                    .with_context(|| format!("cannot read the replay file {}", p.display()))?;
            files.push((n, text));
        }
        let served_per_iteration = (0..offspring).filter(|s| s % count == position).count();
        if served_per_iteration == 0 {
            bail!(
                "replay proposer {position} serves no offspring slot (offspring {offspring}, {count} proposers): raise --offspring"
            );
        }
        Ok(ReplayProposer { dir: dir.to_path_buf(), files, served_per_iteration, position, stride: count })
    }

    /// File names in replay order.
    pub fn names(&self) -> Vec<&str> {
        self.files.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// (name, text) of every file.
    pub fn files(&self) -> &[(String, String)] {
        &self.files
    }

    /// Index of the file a request gets: iterations count from 1.
    pub fn index_for(&self, iteration: usize, slot: usize) -> Option<usize> {
        if iteration == 0 || slot % self.stride != self.position {
            return None;
        }
        Some((iteration - 1) * self.served_per_iteration + slot / self.stride)
    }
}

impl Proposer for ReplayProposer {
    fn name(&self) -> String {
        format!("replay:{}", self.dir.display())
    }

    fn propose(&self, req: &ProposalRequest) -> Result<String, ProposeError> {
        let Some(i) = self.index_for(req.iteration, req.offspring_index) else {
            return Err(ProposeError::Exhausted(format!(
                "replay asked for iteration {} slot {}, which it does not serve",
                req.iteration, req.offspring_index
            )));
        };
        match self.files.get(i) {
            Some((_, text)) => Ok(text.clone()),
            None => Err(ProposeError::Exhausted(format!(
                "replay exhausted: all {} rewrites were proposed",
                self.files.len()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_slots() {
        let d = tempfile::tempdir().unwrap();
        for (n, t) in [("b.c", "B"), ("a.c", "A"), ("c.c", "C"), (".hidden", "H"), ("README.md", "R")] {
            std::fs::write(d.path().join(n), t).unwrap();
        }
        let r = ReplayProposer::from_dir(d.path(), 2, 0, 1).unwrap();
        assert_eq!(r.names(), vec!["a.c", "b.c", "c.c"]);
        assert_eq!(r.index_for(1, 0), Some(0));
        assert_eq!(r.index_for(1, 1), Some(1));
        assert_eq!(r.index_for(2, 0), Some(2));
        // Second of two proposers with 4 offspring: serves slots 1 and 3.
        let r2 = ReplayProposer::from_dir(d.path(), 4, 1, 2).unwrap();
        assert_eq!(r2.index_for(1, 1), Some(0));
        assert_eq!(r2.index_for(1, 3), Some(1));
        assert_eq!(r2.index_for(2, 1), Some(2));
        assert_eq!(r2.index_for(1, 0), None);
    }
}
