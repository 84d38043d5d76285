//! `providers add NAME [--command C] [--arg A]… [--allow-env NAME]…
//! [--env NAME=VALUE]… [--secret NAME]… [--no-default-env]`: a provider that
//! starts the way it starts from the shell you are in.
//!
//! What must stay true:
//! - a bare command name is resolved here, from this shell's `PATH` (then
//!   `~/.local/bin`), and stored as the absolute path it found, saying so:
//!   the service's own `PATH` (a user unit's is minimal) never decides which
//!   program runs. A name not found stays bare, with the install hint;
//! - unless `--no-default-env`, the agent gets this shell's `PATH` as a
//!   constant `env.PATH` (so `#!/usr/bin/env node` finds the node of nvm,
//!   volta or Homebrew that `npm install -g` used) and `HOME` through the
//!   allowlist (agents keep their state and read their own config there);
//! - `--env` settings are constant, non-secret and visible in `config show`;
//!   `--secret` values go to the env file (mode 0600) and only allowlisted
//!   names may be stored there;
//! - everything is checked, and the secrets read, before the first write; a
//!   running service is then asked to reload, so the provider is usable at
//!   once;
//! - with no `defaultProvider` set, the provider added becomes it, saying
//!   so (`ask` without `--provider` follows it).

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal};
use std::path::Path;

use anyhow::anyhow;
use lapis_installer::{config as installer_config, fsx};
use lapis_protocol::config::{
    CatalogueEntry, CommandLookup, CommandRef, EnvFile, ProviderConfig, ProviderSpec,
    catalogue_entry,
};
use serde_json::{Value, json};

use super::config_files::{EditFailure, config_path, load_config, load_env_file, reload_running};
use super::paths::installer_error;
use crate::args::{GlobalArgs, ProvidersAddArgs};
use crate::exit::{CliError, CliResult};
use crate::output;

/// The names the agent takes from the service's environment by default.
const DEFAULT_ALLOWLIST: [&str; 1] = ["HOME"];

/// What `providers add` decided about the command, to say so.
enum Resolved {
    /// Found on this shell's PATH and stored absolute.
    Found { name: String, path: String },
    /// Given absolute, or not found (stored bare).
    AsGiven,
    /// A bare name this shell cannot find either.
    NotFound { name: String },
}

/// The definition `providers add` writes: the catalogue's defaults (when
/// `name` is known) overridden by the flags, then the command resolved and
/// the default environment added.
fn definition(args: &ProvidersAddArgs) -> Result<(ProviderConfig, Resolved), CliError> {
    let entry: Option<&CatalogueEntry> = catalogue_entry(&args.name);
    let mut p = match (entry, &args.command) {
        (Some(e), _) => e.provider_config(),
        (None, Some(_)) => ProviderConfig {
            command: String::new(),
            args: Vec::new(),
            env: BTreeMap::new(),
            env_allowlist: Vec::new(),
            vcs_identity: None,
            idle_seconds: None,
            max_turn_seconds: None,
            handshake_seconds: None,
            permission_timeout_seconds: None,
            mcp_servers: Vec::new(),
            mcp_env_allowlist: Vec::new(),
            restricted_mode: None,
            allow_unrestricted: None,
            ask_mode: None,
            allow_unasked: None,
        },
        (None, None) => {
            return Err(CliError::failure(
                "unknown_provider",
                anyhow!(
                    "`{}` is not in the catalogue; give --command, or pick a name from `lapis-ai-controller providers list`",
                    args.name
                ),
            ));
        }
    };
    if let Some(c) = &args.command {
        p.command = c.clone();
    }
    if !args.args.is_empty() {
        p.args = args.args.clone();
    }
    for name in &args.allow_env {
        if !p.env_allowlist.contains(name) {
            p.env_allowlist.push(name.clone());
        }
    }
    for setting in &args.env {
        let Some((name, value)) = setting.split_once('=') else {
            return Err(CliError::failure(
                "invalid_provider",
                anyhow!("--env takes NAME=VALUE (got a value without `=`)"),
            ));
        };
        if p.env.insert(name.to_owned(), value.to_owned()).is_some() {
            return Err(CliError::failure(
                "invalid_provider",
                anyhow!("--env {name} is given twice"),
            ));
        }
    }
    if !args.no_default_env {
        for name in DEFAULT_ALLOWLIST {
            if !p.env_allowlist.iter().any(|n| n == name) && !p.env.contains_key(name) {
                p.env_allowlist.push(name.to_owned());
            }
        }
        if !p.env.contains_key("PATH")
            && !p.env_allowlist.iter().any(|n| n == "PATH")
            && let Some(path) = std::env::var_os("PATH").and_then(|v| v.into_string().ok())
        {
            p.env.insert("PATH".to_owned(), path);
        }
    }
    // Validated before resolving, so a bad flag is reported as itself.
    let spec = ProviderSpec::from_config(&args.name, &p)
        .map_err(|e| CliError::failure("invalid_provider", e))?;
    let resolved = match &spec.command {
        CommandRef::Absolute(_) => Resolved::AsGiven,
        CommandRef::Bare(name) => match spec.resolve_command(&CommandLookup::from_env()) {
            Ok(found) => {
                let found = found.to_string_lossy().into_owned();
                p.command = found.clone();
                Resolved::Found {
                    name: name.clone(),
                    path: found,
                }
            }
            Err(_) => Resolved::NotFound { name: name.clone() },
        },
    };
    ProviderSpec::from_config(&args.name, &p)
        .map_err(|e| CliError::failure("invalid_provider", e))?;
    Ok((p, resolved))
}

pub(super) fn run(global: &GlobalArgs, args: ProvidersAddArgs) -> CliResult {
    let path = config_path(global)?;
    let (provider, resolved) = definition(&args)?;
    let current = load_config(&path)?;
    if current.providers.contains_key(&args.name) {
        return Err(CliError::failure(
            "duplicate_provider",
            anyhow!(
                "provider `{}` is already configured; remove it first (`providers remove {}`)",
                args.name,
                args.name
            ),
        ));
    }
    for name in &args.secrets {
        if !provider.env_allowlist.contains(name) {
            return Err(CliError::failure(
                "secret_not_allowed",
                anyhow!(
                    "secret `{name}` is not in provider `{}`'s envAllowlist ({}); add it with --allow-env {name}",
                    args.name,
                    provider.env_allowlist.join(", ")
                ),
            ));
        }
    }
    let (env_path, mut env_file) = load_env_file(&path)?;
    if !args.secrets.is_empty() {
        let stdin = std::io::stdin();
        let tty = stdin.is_terminal();
        let mut lines = stdin.lock();
        for name in &args.secrets {
            let value = read_secret(name, tty, &mut lines)?;
            env_file
                .set(name, &value)
                .map_err(|e| CliError::failure("invalid_secret", e))?;
        }
    }
    let value = serde_json::to_value(&provider).map_err(|e| CliError::failure("internal", e))?;
    let name = args.name.clone();
    // Everything was checked and the secrets read before the first write;
    // the config goes first so a secret is never stored for a provider
    // that was refused.
    // The first provider added becomes the one `ask` uses without
    // `--provider` (unless a default is set already).
    let make_default = current.default_provider.is_none();
    installer_config::edit(&path, |doc: &mut Value| {
        insert_provider(doc, &name, value)?;
        if make_default {
            doc["defaultProvider"] = json!(name);
        }
        Ok(())
    })
    .map_err(EditFailure::into_cli)?;
    if !args.secrets.is_empty() {
        write_env_file(&env_path, &env_file)?;
    }
    let command_line = std::iter::once(provider.command.as_str())
        .chain(provider.args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    output::line(format!("added provider `{name}`: {command_line}"))?;
    match &resolved {
        Resolved::Found { name: bare, path } => output::line(format!(
            "  `{bare}` found on your PATH at {path}: stored absolute, so the service runs this very program"
        ))?,
        Resolved::NotFound { name: bare } => {
            let hint = catalogue_entry(&args.name)
                .map(|e| format!("; install it: {}", e.install))
                .unwrap_or_default();
            output::line(format!(
                "  `{bare}` is not on your PATH: stored as a bare name, looked up on the agent's PATH at each start{hint}"
            ))?;
        }
        Resolved::AsGiven => {}
    }
    if provider.env.contains_key("PATH") && !args.env.iter().any(|e| e.starts_with("PATH=")) {
        output::line(
            "  the agent gets this shell's PATH (env.PATH), so the node or python it needs is found as here",
        )?;
    }
    if !provider.env_allowlist.is_empty() {
        output::line(format!(
            "  allowed environment: {}",
            provider.env_allowlist.join(", ")
        ))?;
    }
    let settings: Vec<&str> = provider
        .env
        .keys()
        .map(String::as_str)
        .filter(|k| *k != "PATH")
        .collect();
    if !settings.is_empty() {
        output::line(format!("  settings (env): {}", settings.join(", ")))?;
    }
    for s in &args.secrets {
        output::line(format!("  secret {s} stored in {}", env_path.display()))?;
    }
    if let Some(entry) = catalogue_entry(&args.name)
        && !entry.settings.is_empty()
    {
        output::line("  this agent also reads (set with --env NAME=VALUE):")?;
        for (setting, what) in entry.settings {
            output::line(format!("    {setting:<26} {what}"))?;
        }
    }
    if make_default {
        output::line(format!(
            "  `{name}` is now the default provider: `ask` uses it without --provider (config defaultProvider)"
        ))?;
    }
    output::line(format!("  {}", reload_running(global)))?;
    Ok(())
}

fn insert_provider(doc: &mut Value, name: &str, value: Value) -> Result<(), EditFailure> {
    let invalid = |m: &str| EditFailure::Cli(CliError::failure("invalid_config", anyhow!("{m}")));
    let obj = doc
        .as_object_mut()
        .ok_or_else(|| invalid("the config is not an object"))?;
    let providers = obj.entry("providers").or_insert_with(|| json!({}));
    let providers = providers
        .as_object_mut()
        .ok_or_else(|| invalid("configuration field `providers` is not an object"))?;
    if providers.contains_key(name) {
        return Err(EditFailure::Cli(CliError::failure(
            "duplicate_provider",
            anyhow!("provider `{name}` is already configured"),
        )));
    }
    providers.insert(name.to_string(), value);
    Ok(())
}

/// One secret value: a hidden prompt on a TTY, else one line of stdin.
fn read_secret(name: &str, tty: bool, lines: &mut impl BufRead) -> Result<String, CliError> {
    let value = if tty {
        rpassword::prompt_password(format!("{name} (input hidden): "))
            .map_err(|e| CliError::failure("io", e))?
    } else {
        let mut line = String::new();
        lines
            .read_line(&mut line)
            .map_err(|e| CliError::failure("io", e))?;
        line.trim_end_matches(['\n', '\r']).to_string()
    };
    if value.is_empty() {
        return Err(CliError::failure(
            "invalid_secret",
            anyhow!("no value was given for secret `{name}`; nothing was written"),
        ));
    }
    Ok(value)
}

/// Writes the env file atomically with mode 0600 (the one write helper).
fn write_env_file(path: &Path, file: &EnvFile) -> Result<(), CliError> {
    fsx::write_atomic(path, file.render().as_bytes(), 0o600)
        .map_err(|e| installer_error(installer_config::ConfigError::from(e).into()))
}
