//! The "Regenerate with" line: derived from the parsed command line and the clap definitions of the
//! subcommand's arguments, so it can never disagree with a default.
//!
//! An option appears when it was given on the command line with a value other than its default; paths
//! are written relative to the crate root; values that a shell would split are single-quoted. Options
//! that only choose where output goes or how it is shown (`--out`, `--check`, ...) are left out by the
//! caller's list.

use std::any::TypeId;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Command};

use super::session::display_path;

/// A parsed subcommand: its definition and what was given.
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    /// The subcommand's name (`run`, `search`, ...).
    pub name: String,
    /// The subcommand's definition (None when the command was not parsed from a command line).
    command: Option<Command>,
    matches: Option<ArgMatches>,
}

impl Invocation {
    /// The subcommand of `matches`, parsed by `cli`.
    pub fn from_matches(cli: &Command, matches: &ArgMatches) -> Invocation {
        match matches.subcommand() {
            Some((name, sub)) => Invocation {
                name: name.to_string(),
                command: cli.find_subcommand(name).cloned(),
                matches: Some(sub.clone()),
            },
            None => Invocation::default(),
        }
    }

    /// A command called without a command line (from code): every option at its default.
    pub fn defaults(name: &str) -> Invocation {
        Invocation { name: name.to_string(), command: None, matches: None }
    }

    /// Parses `argv` (without the program name) as the subcommand `sub` of `cli`; for tests and callers
    /// that build a command line.
    pub fn parse(cli: &Command, argv: &[&str]) -> Result<Invocation, clap::Error> {
        let full = std::iter::once("synth").chain(argv.iter().copied());
        let matches = cli.clone().try_get_matches_from(full)?;
        Ok(Invocation::from_matches(cli, &matches))
    }

    /// The long flags (`--name`) of every option given on the command line, in the order the subcommand
    /// defines them.
    pub fn given_flags(&self) -> Vec<String> {
        let Some(cmd) = &self.command else { return Vec::new() };
        cmd.get_arguments()
            .filter(|a| self.given(a.get_id().as_str()))
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect()
    }

    /// Whether the option with this id was given on the command line (not left at its default).
    pub fn given(&self, id: &str) -> bool {
        self.matches.as_ref().is_some_and(|m| m.value_source(id) == Some(ValueSource::CommandLine))
    }

    /// `cargo run --release -- <name>` followed by every option given with a non-default value, in the
    /// order the subcommand defines them, leaving out the options named in `skip` (by id).
    pub fn regenerate_line(&self, skip: &[&str]) -> String {
        let mut line = format!("cargo run --release -- {}", self.name);
        let (Some(cmd), Some(m)) = (&self.command, &self.matches) else { return line };
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            let Some(long) = arg.get_long() else { continue };
            if skip.contains(&id) || m.value_source(id) != Some(ValueSource::CommandLine) {
                continue;
            }
            if matches!(arg.get_action(), ArgAction::SetTrue) {
                line += &format!(" --{long}");
                continue;
            }
            let Some(raw) = m.get_raw(id) else { continue };
            let values: Vec<String> = raw.map(|v| v.to_string_lossy().into_owned()).collect();
            let defaults: Vec<String> =
                arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
            if values == defaults {
                continue;
            }
            let is_path = arg.get_value_parser().type_id() == TypeId::of::<PathBuf>();
            for v in values {
                let v = if is_path { display_path(Path::new(&v)) } else { v };
                line += &format!(" --{long} {}", shell_word(&v));
            }
        }
        line
    }
}

pub use crate::sanitize::shell_word;

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn line(argv: &[&str], skip: &[&str]) -> String {
        let cli = crate::cli::Cli::command();
        Invocation::parse(&cli, argv).unwrap().regenerate_line(skip)
    }

    #[test]
    fn defaults_are_left_out() {
        assert_eq!(line(&["run"], &[]), "cargo run --release -- run");
        // Given explicitly, but equal to the clap default.
        assert_eq!(
            line(&["run", "--tp", "2", "--sample-m", "10", "--weight", "uniform"], &[]),
            "cargo run --release -- run"
        );
    }

    #[test]
    fn non_defaults_in_definition_order() {
        assert_eq!(
            line(&["run", "--max-leaves", "12", "--tp", "4", "--model", "llama-3.1-8b", "--no-refine"], &[]),
            "cargo run --release -- run --model llama-3.1-8b --tp 4 --max-leaves 12 --no-refine"
        );
    }

    #[test]
    fn skipped_and_quoted() {
        assert_eq!(
            line(&["run", "--check", "--out", "x", "--seed", "3"], &["check", "out"]),
            "cargo run --release -- run --seed 3"
        );
        assert_eq!(
            line(&["search", "--agent", "cmd:python3 a.py", "--agent", "builtin"], &[]),
            "cargo run --release -- search --agent 'cmd:python3 a.py' --agent builtin"
        );
        assert_eq!(line(&["search", "--agent", "builtin"], &[]), "cargo run --release -- search");
    }

    #[test]
    fn paths_relative_to_the_crate_root() {
        let p = crate::app::session::crate_root().join("measurements/h200/qwen3-32b-tp2.csv");
        assert_eq!(
            line(&["run", "--dataset", p.to_str().unwrap()], &[]),
            "cargo run --release -- run --dataset measurements/h200/qwen3-32b-tp2.csv"
        );
    }

    #[test]
    fn without_a_command_line() {
        assert_eq!(Invocation::defaults("run").regenerate_line(&[]), "cargo run --release -- run");
    }
}
