//! Reading a prompt: the argument, stdin (`-` or no argument where allowed)
//! or a file. An empty prompt is refused before anything is submitted.

use std::io::{IsTerminal, Read};
use std::path::Path;

use crate::args::PromptArgs;
use crate::exit::CliError;

/// The prompt named by `--prompt`/`--prompt-file` (clap makes them
/// exclusive and requires one).
pub(super) fn from_args(args: &PromptArgs) -> Result<String, CliError> {
    match (&args.prompt, &args.prompt_file) {
        (Some(text), None) if text == "-" => from_stdin("--prompt -"),
        (Some(text), None) => non_empty(text.clone(), "--prompt"),
        (None, Some(path)) => from_file(path),
        _ => Err(invalid(
            "give exactly one of --prompt TEXT, --prompt - or --prompt-file PATH",
        )),
    }
}

/// Reads the whole of stdin; refuses a terminal (nothing was piped).
pub(super) fn from_stdin(what: &str) -> Result<String, CliError> {
    let mut stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err(invalid(format!(
            "{what} reads the prompt from stdin, but stdin is a terminal: pipe the prompt in"
        )));
    }
    let mut text = String::new();
    stdin.read_to_string(&mut text).map_err(|e| {
        CliError::failure(
            "invalid_request",
            anyhow::Error::new(e).context("cannot read the prompt from stdin"),
        )
    })?;
    non_empty(text, "the prompt read from stdin")
}

fn from_file(path: &Path) -> Result<String, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::failure(
            "invalid_request",
            anyhow::Error::new(e)
                .context(format!("--prompt-file {}: cannot read it", path.display())),
        )
    })?;
    non_empty(text, &format!("--prompt-file {}", path.display()))
}

fn non_empty(text: String, what: &str) -> Result<String, CliError> {
    if text.trim().is_empty() {
        Err(invalid(format!("{what}: the prompt is empty")))
    } else {
        Ok(text)
    }
}

fn invalid(msg: impl Into<String>) -> CliError {
    CliError::failure("invalid_request", anyhow::anyhow!(msg.into()))
}
