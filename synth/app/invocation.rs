//! The parsed command line of a subcommand: which options were given (so a job can refuse options it does
//! not read, and a tuned-table training can name the ones that do not apply). The "Regenerate with" line
//! is not derived from here but from what the job used ([`super::line`]).

use clap::parser::ValueSource;
use clap::{ArgMatches, Command};

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
}
