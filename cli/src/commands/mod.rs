//! One handler per command; `run` is the single dispatch point.

mod completions;
mod install;
mod install_from;
mod paths;
mod releases;
mod rollback;
mod token;
mod uninstall;
mod update;
mod version;

use crate::args::{Cli, Command};
use crate::exit::{CliError, CliResult};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> CliResult {
    let global = cli.global;
    match cli.command {
        Command::Version(out) => version::run(&global, out),
        Command::Completions(args) => completions::run(args),
        Command::Install(args) if args.from.is_some() => install_from::run(&global, args),
        Command::Install(args) => install::run(&global, args),
        Command::Update(args) => update::run(&global, args),
        Command::Uninstall(args) => uninstall::run(&global, args),
        Command::Releases(command) => releases::run(&global, command),
        Command::Rollback(args) => rollback::run(&global, args),
        Command::Token(command) => token::run(&global, command),
        other => Err(CliError::failure(
            "not_available",
            anyhow::anyhow!("this command is not available in this build: {other:?}",),
        )),
    }
}
