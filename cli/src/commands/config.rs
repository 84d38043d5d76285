//! `config reload [--json]`: asks the running controller to re-read its
//! config file (`config.reload`, the same as SIGHUP). Applied: what is in
//! effect now. Refused: exit 2 with the reason (a field, never a value);
//! the previous configuration stays in effect.

use anyhow::anyhow;
use lapis_installer::unit;

use crate::args::{ConfigCommand, GlobalArgs, JsonArg};
use crate::exit::{CliError, CliResult};

pub fn run(global: &GlobalArgs, command: ConfigCommand) -> CliResult {
    match command {
        ConfigCommand::Reload(out) => reload(global, out),
    }
}

fn reload(global: &GlobalArgs, out: JsonArg) -> CliResult {
    let target = super::connect::target(global, None)?;
    let mut client = super::connect::connect_to(&target)?;
    let result = client
        .config_reload()
        .map_err(super::connect::client_error)?;
    if !result.applied {
        let details = serde_json::to_value(&result)?;
        return Err(CliError::failure(
            "reload_refused",
            anyhow!(
                "the controller refused the new configuration ({}: {}) and keeps the previous one; fix {} and reload again",
                result.code.as_deref().unwrap_or("error"),
                result.error.as_deref().unwrap_or("no reason given"),
                target.paths.config.display()
            ),
        )
        .with_details(details));
    }
    if out.json {
        crate::output::json(&result)?;
        return Ok(());
    }
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.join(", ")
        }
    };
    let mut text = format!(
        "configuration reloaded\nproviders         {}\nworkspaces added  {}",
        list(&result.providers),
        list(&result.workspaces_added)
    );
    if !result.restart_needed.is_empty() {
        text.push_str(&format!(
            "\nrestart needed    {} (run `{}`)",
            result.restart_needed.join(", "),
            unit::restart_command(&target.paths)
        ));
    }
    crate::output::line(text)?;
    Ok(())
}
