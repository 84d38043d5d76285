//! `completions SHELL`: shell completion scripts from the clap definitions.

use clap::CommandFactory;

use crate::args::{Cli, CompletionsArgs};
use crate::exit::CliResult;

pub fn run(args: CompletionsArgs) -> CliResult {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "lapis-ai-controller", &mut buf);
    crate::output::line(String::from_utf8_lossy(&buf).trim_end())?;
    Ok(())
}
