//! `token show [--json]`: the only command that prints a secret.

use lapis_installer::config;
use serde_json::json;

use super::paths::{installer_error, resolve};
use crate::args::{GlobalArgs, TokenCommand};
use crate::exit::{CliError, CliResult};

pub(super) fn run(global: &GlobalArgs, command: TokenCommand) -> CliResult {
    let TokenCommand::Show(out) = command;
    let paths = resolve(global, None, None)?;
    let (config, _) =
        config::read_existing(&paths.config).map_err(|e| installer_error(e.into()))?;
    let token = config::first_token(&config).ok_or_else(|| {
        CliError::failure(
            "invalid_config",
            anyhow::anyhow!("{} has no token", paths.config.display()),
        )
    })?;
    if out.json {
        crate::output::json(&json!({
            "name": token.name,
            "principal": token.principal,
            "token": token.secret,
            "config": paths.config,
        }))?;
    } else {
        crate::output::line(&token.secret)?;
    }
    Ok(())
}
