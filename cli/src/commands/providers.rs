//! `providers list|add|remove`: the catalogue and the configured providers.
//!
//! Edits go through [`lapis_installer::config::edit`] (atomic, locked,
//! tokens untouched, validated before and after) and secrets through the env
//! file beside the config, written atomically with mode 0600. Bad input
//! (unknown catalogue name, duplicate provider, a secret outside the
//! allowlist, a bad env file) fails before anything is written.

use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use lapis_installer::{config as installer_config, fsx};
use lapis_protocol::config::{
    CATALOGUE, CatalogueEntry, CommandLookup, Config, ECHO_PROVIDER, EnvFile, ProviderConfig,
    ProviderSpec, catalogue_entry,
};
use lapis_service::acp::mcp;
use serde_json::{Value, json};

use super::paths::{installer_error, resolve};
use crate::args::{GlobalArgs, JsonArg, ProvidersAddArgs, ProvidersCommand};
use crate::exit::{CliError, CliResult};
use crate::output;

pub(super) fn run(global: &GlobalArgs, command: ProvidersCommand) -> CliResult {
    match command {
        ProvidersCommand::List(out) => list(global, out),
        ProvidersCommand::Add(args) => add(global, args),
        ProvidersCommand::Remove { name } => remove(global, &name),
        ProvidersCommand::Check {
            name,
            session,
            timeout,
            out,
        } => super::providers_check::run(global, &name, session, timeout, out),
    }
}

/// The config file of the selected instance.
pub(super) fn config_path(global: &GlobalArgs) -> Result<PathBuf, CliError> {
    Ok(resolve(global, None, None)?.config)
}

/// Reads the env file beside `config`, as `serve` does.
pub(super) fn load_env_file(config: &Path) -> Result<(PathBuf, EnvFile), CliError> {
    let path = EnvFile::path_for(config);
    let file = EnvFile::load(&path).map_err(|e| CliError::failure("invalid_env_file", e))?;
    Ok((path, file))
}

/// Loads and validates the config, including the checks against this
/// machine (exit 2 naming the field when invalid).
pub(super) fn load_config(path: &Path) -> Result<Config, CliError> {
    let mut config = Config::load(path).map_err(|e| CliError::failure(e.code(), e))?;
    config
        .check_on_this_machine()
        .map_err(|e| CliError::failure(e.code(), e))?;
    Ok(config)
}

/// Where `spec`'s command resolves, with the runner's lookup.
pub(super) fn found(spec: &ProviderSpec, lookup: &CommandLookup) -> Option<PathBuf> {
    spec.resolve_command(lookup).ok()
}

fn list(global: &GlobalArgs, out: JsonArg) -> CliResult {
    let path = config_path(global)?;
    let config = if path.exists() {
        Some(load_config(&path)?)
    } else {
        None
    };
    let lookup = CommandLookup::from_env();
    let exe = std::env::current_exe().unwrap_or_default();
    let mut configured = vec![json!({
        "name": ECHO_PROVIDER, "command": exe, "args": ["acp-echo"],
        "envAllowlist": [], "builtin": true, "catalogue": false, "found": true, "path": exe,
    })];
    for (name, p) in config.iter().flat_map(|c| c.providers.iter()) {
        let spec = ProviderSpec::from_config(name, p)
            .map_err(|e| CliError::failure("invalid_config", e))?;
        let at = found(&spec, &lookup);
        if name == ECHO_PROVIDER {
            configured.remove(0);
        }
        let mut entry = json!({
            "name": name, "command": p.command, "args": p.args, "envAllowlist": p.env_allowlist,
            "builtin": false, "catalogue": catalogue_entry(name).is_some(),
            "found": at.is_some(), "path": at,
        });
        // MCP servers by name, transport and identity: never a value (the
        // config holds none), and no argv either.
        if !spec.mcp_servers.is_empty() {
            let endpoints: Vec<_> = spec.mcp_servers.iter().map(mcp::endpoint).collect();
            entry["mcpServers"] = json!(endpoints);
            entry["mcpEnvAllowlist"] = json!(spec.mcp_env_allowlist);
        }
        configured.push(entry);
    }
    let catalogue: Vec<Value> = CATALOGUE
        .iter()
        .map(|e| {
            let spec = ProviderSpec::from_config(e.name, &e.provider_config())
                .expect("catalogue entries are valid (unit-tested)");
            let at = found(&spec, &lookup);
            json!({
                "name": e.name, "command": e.command, "args": e.args, "env": e.env,
                "install": e.install, "docs": e.docs, "loadSession": e.load_session,
                "restrictedMode": e.restricted_mode, "source": e.source,
                "configured": config.as_ref().is_some_and(|c| c.providers.contains_key(e.name)),
                "found": at.is_some(), "path": at,
            })
        })
        .collect();
    if out.json {
        output::json(&json!({"config": path, "configured": configured, "catalogue": catalogue}))?;
        return Ok(());
    }
    let status = |v: &Value| {
        if v["found"] == true {
            "found"
        } else {
            "not found"
        }
    };
    let line = |v: &Value| {
        let mut cmd = v["command"].as_str().unwrap_or("").to_string();
        for a in v["args"].as_array().into_iter().flatten() {
            cmd.push(' ');
            cmd.push_str(a.as_str().unwrap_or(""));
        }
        cmd
    };
    output::line(format!("configured providers ({}):", path.display()))?;
    for v in &configured {
        let name = v["name"].as_str().unwrap_or("");
        let cmd = if v["builtin"] == true {
            "built-in".to_string()
        } else {
            line(v)
        };
        output::line(format!("  {name:<14} {cmd:<40} {}", status(v)))?;
        if let Some(servers) = v["mcpServers"].as_array() {
            let names: Vec<String> = servers
                .iter()
                .map(|s| {
                    format!(
                        "{} ({})",
                        s["name"].as_str().unwrap_or(""),
                        s["transport"].as_str().unwrap_or("")
                    )
                })
                .collect();
            output::line(format!("  {:<14} mcp: {}", "", names.join(", ")))?;
        }
    }
    output::line("catalogue (`providers add NAME`):")?;
    for v in &catalogue {
        let name = v["name"].as_str().unwrap_or("");
        let mark = if v["configured"] == true {
            "  [configured]"
        } else {
            ""
        };
        output::line(format!("  {name:<14} {:<40} {}{mark}", line(v), status(v)))?;
    }
    Ok(())
}

/// The definition `providers add` writes: the catalogue's defaults (when
/// `name` is known) overridden by the flags.
fn definition(args: &ProvidersAddArgs) -> Result<ProviderConfig, CliError> {
    let entry: Option<&CatalogueEntry> = catalogue_entry(&args.name);
    let mut p = match (entry, &args.command) {
        (Some(e), _) => e.provider_config(),
        (None, Some(_)) => ProviderConfig {
            command: String::new(),
            args: Vec::new(),
            env: Default::default(),
            env_allowlist: Vec::new(),
            vcs_identity: None,
            idle_seconds: None,
            max_turn_seconds: None,
            handshake_seconds: None,
            mcp_servers: Vec::new(),
            mcp_env_allowlist: Vec::new(),
            restricted_mode: None,
            allow_unrestricted: None,
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
    ProviderSpec::from_config(&args.name, &p)
        .map_err(|e| CliError::failure("invalid_provider", e))?;
    Ok(p)
}

fn add(global: &GlobalArgs, args: ProvidersAddArgs) -> CliResult {
    let path = config_path(global)?;
    let provider = definition(&args)?;
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
    installer_config::edit(&path, |doc: &mut Value| insert_provider(doc, &name, value))
        .map_err(EditFailure::into_cli)?;
    if !args.secrets.is_empty() {
        write_env_file(&env_path, &env_file)?;
    }
    let command_line = std::iter::once(provider.command.as_str())
        .chain(provider.args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    output::line(format!("added provider `{name}`: {command_line}"))?;
    if !provider.env_allowlist.is_empty() {
        output::line(format!(
            "  allowed environment: {}",
            provider.env_allowlist.join(", ")
        ))?;
    }
    for s in &args.secrets {
        output::line(format!("  secret {s} stored in {}", env_path.display()))?;
    }
    output::line("restart the service (or reload it) for running controllers to see it")?;
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

fn remove(global: &GlobalArgs, name: &str) -> CliResult {
    let path = config_path(global)?;
    installer_config::edit(&path, |doc: &mut Value| {
        let removed = doc
            .get_mut("providers")
            .and_then(Value::as_object_mut)
            .and_then(|p| p.remove(name));
        match removed {
            Some(_) => Ok(()),
            None => Err(EditFailure::Cli(CliError::failure(
                "not_found",
                anyhow!("provider `{name}` is not configured (see `providers list`)"),
            ))),
        }
    })
    .map_err(EditFailure::into_cli)?;
    output::line(format!(
        "removed provider `{name}` (its secrets stay in the env file)"
    ))?;
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

/// Why a config edit failed: the edit helper's own error (exit class and
/// code from the installer) or the command's.
enum EditFailure {
    Config(installer_config::ConfigError),
    Cli(CliError),
}

impl From<installer_config::ConfigError> for EditFailure {
    fn from(e: installer_config::ConfigError) -> EditFailure {
        EditFailure::Config(e)
    }
}

impl EditFailure {
    fn into_cli(self) -> CliError {
        match self {
            EditFailure::Config(e) => installer_error(e.into()),
            EditFailure::Cli(e) => e,
        }
    }
}
