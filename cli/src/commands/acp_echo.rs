//! `acp-echo` (hidden): the built-in deterministic agent behind the `echo`
//! provider, serving ACP on this process's stdin/stdout.

use crate::exit::{CliError, CliResult};

/// Serves until stdin closes.
pub(super) fn run() -> CliResult {
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    lapis_service::serve_echo_agent(stdin, stdout)
        .map_err(|err| CliError::failure("acp_echo_failed", err))
}
