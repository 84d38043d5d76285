//! `config path|show|validate|schema|reload`.
//!
//! `reload` asks the running controller to re-read its config file
//! (`config.reload`, the same as SIGHUP). Applied: what is in effect now.
//! Refused: exit 2 with the reason (a field, never a value); the previous
//! configuration stays in effect.
//!
//! What must stay true: nothing here prints a secret. `show` masks token
//! secrets and lists only the *names* the env file sets; `validate` reports
//! errors by JSON path (the validator never quotes values).

use anyhow::anyhow;
use lapis_installer::unit;
use lapis_protocol::config::{Config, EnvFile};
use serde_json::{Value, json};

use super::config_files::{config_path, load_config, load_env_file};
use crate::args::{ConfigCommand, GlobalArgs, JsonArg};
use crate::exit::{CliError, CliResult};
use crate::output;

/// What `config show` prints instead of a secret.
const MASK: &str = "********";

pub(super) fn run(global: &GlobalArgs, command: ConfigCommand) -> CliResult {
    match command {
        ConfigCommand::Path => {
            output::line(config_path(global)?.display().to_string())?;
            Ok(())
        }
        ConfigCommand::Show(out) => show(global, out),
        ConfigCommand::Validate(out) => validate(global, out),
        ConfigCommand::Schema => {
            output::line(schema())?;
            Ok(())
        }
        ConfigCommand::Reload(out) => reload(global, out),
    }
}

/// The configuration's JSON Schema, generated from its types (the same text
/// is committed as `docs/config.schema.json`; a test keeps them equal).
pub(super) fn schema() -> String {
    serde_json::to_string_pretty(&Config::json_schema()).expect("schema serialises")
}

/// The effective configuration with secrets masked.
fn masked(config: &Config) -> Result<Value, CliError> {
    let mut doc = serde_json::to_value(config).map_err(|e| CliError::failure("internal", e))?;
    for token in doc["tokens"].as_array_mut().into_iter().flatten() {
        token["secret"] = json!(MASK);
    }
    Ok(doc)
}

fn env_summary(env_path: &std::path::Path, env: &EnvFile) -> Value {
    json!({"path": env_path, "exists": env_path.exists(), "names": env.names().collect::<Vec<_>>()})
}

fn show(global: &GlobalArgs, out: JsonArg) -> CliResult {
    let path = config_path(global)?;
    let config = load_config(&path)?;
    let (env_path, env) = load_env_file(&path)?;
    let doc = masked(&config)?;
    if out.json {
        output::json(
            &json!({"path": path, "config": doc, "envFile": env_summary(&env_path, &env)}),
        )?;
        return Ok(());
    }
    output::line(format!("# {} (secrets masked)", path.display()))?;
    output::json(&doc)?;
    let names: Vec<&str> = env.names().collect();
    output::line(format!(
        "# env file {}: {}",
        env_path.display(),
        if names.is_empty() {
            "no secrets".to_string()
        } else {
            format!("sets {}", names.join(", "))
        }
    ))?;
    Ok(())
}

fn validate(global: &GlobalArgs, out: JsonArg) -> CliResult {
    let path = config_path(global)?;
    let config = load_config(&path)?;
    let (env_path, env) = load_env_file(&path)?;
    if out.json {
        output::json(&json!({
            "valid": true, "path": path,
            "providers": config.providers.keys().collect::<Vec<_>>(),
            "workspaces": config.workspaces.keys().collect::<Vec<_>>(),
            "envFile": env_summary(&env_path, &env),
        }))?;
    } else {
        output::line(format!(
            "{} is valid ({} providers, {} workspaces); env file {}",
            path.display(),
            config.providers.len(),
            config.workspaces.len(),
            if env_path.exists() { "valid" } else { "absent" }
        ))?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    /// `docs/config.schema.json` is what `config schema` prints; regenerate
    /// it with `cargo run -q -- config schema > docs/config.schema.json`.
    #[test]
    fn committed_schema_is_current() {
        let file =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/config.schema.json");
        let committed = std::fs::read_to_string(&file).unwrap_or_default();
        assert_eq!(
            committed.trim_end(),
            super::schema(),
            "{} is stale: regenerate it with `cargo run -q -- config schema > docs/config.schema.json`",
            file.display()
        );
    }
}
