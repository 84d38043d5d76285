//! Command ids of mutating commands.
//!
//! Every mutating command takes `--command-id ID`; without it a fresh id is
//! generated and printed on stderr *before* the request is sent, so when the
//! answer is lost (the connection dropped, the terminal closed) the same
//! command can be repeated with that id and gets the original answer
//! instead of running twice (`turns show --command-id ID` finds the turn of
//! a lost submit without resending the prompt).

use crate::exit::CliError;

/// A fresh command id (`cmd_` and 32 random hex digits).
pub(super) fn fresh() -> Result<String, CliError> {
    Ok(format!(
        "cmd_{}",
        lapis_service::random_hex(16).map_err(|e| CliError::failure("internal", e))?
    ))
}

/// The caller's id, or a fresh one announced on stderr.
pub(super) fn given_or_fresh(given: Option<String>) -> Result<String, CliError> {
    match given {
        Some(id) => Ok(id),
        None => {
            let id = fresh()?;
            eprintln!("command id {id}");
            Ok(id)
        }
    }
}
