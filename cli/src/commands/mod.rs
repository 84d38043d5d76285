//! One handler per command; `run` is the single dispatch point.

mod acp_echo;
mod completions;
mod version;

use crate::args::{Cli, Command};
use crate::exit::{CliError, CliResult};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> CliResult {
    let global = cli.global;
    match cli.command {
        Command::Version(out) => version::run(&global, out),
        Command::Completions(args) => completions::run(args),
        Command::AcpEcho => acp_echo::run(),
        other => Err(CliError::failure(
            "not_available",
            anyhow::anyhow!("this command is not available in this build: {other:?}",),
        )),
    }
}
