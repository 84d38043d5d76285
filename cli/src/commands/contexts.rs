//! Named remote controllers: `contexts add NAME ssh://…`, `contexts use
//! NAME`, `contexts list`, `contexts remove NAME`, and the one rule that
//! says which controller a client command talks to.
//!
//! What must stay true:
//! - precedence is `--host` (or `LAPIS_AI_CONTROLLER_HOST`), then the
//!   context in use, then this host; `--host` takes a context's name too,
//!   and `default` always means this host;
//! - the file (`contexts.json` in the config directory, mode 0600) is
//!   replaced atomically, so a crash leaves the old or the new list, and it
//!   holds addresses only, never a secret;
//! - `dial-stdio` never reads it (a remote host with a context in use must
//!   not dial on).

use std::path::PathBuf;

use lapis_installer::{PathOptions, fsx};
use lapis_protocol::client::SshHost;
use serde::{Deserialize, Serialize};

use crate::args::{ContextsCommand, GlobalArgs};
use crate::exit::{CliError, CliResult};

/// The name that always means this host's controller.
pub(super) const DEFAULT: &str = "default";

/// The file's name in the config directory.
const FILE: &str = "contexts.json";

/// `contexts.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Contexts {
    /// Always 1.
    schema: u32,
    /// The context client commands use; none: this host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    current: Option<String>,
    /// Named hosts, in the order they were added.
    #[serde(default)]
    contexts: Vec<Entry>,
}

/// One named host.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Entry {
    name: String,
    /// `ssh://[user@]host[:port]`, checked when added.
    host: String,
}

/// Where the controller of a client command is: `None` for this host,
/// else the `ssh://` address (from `--host`, its variable, or the context
/// in use).
pub(super) fn remote_url(global: &GlobalArgs) -> Result<Option<String>, CliError> {
    if let Some(host) = global.host.as_deref().filter(|h| !h.is_empty()) {
        if host.starts_with("ssh://") {
            return Ok(Some(host.to_owned()));
        }
        if host == DEFAULT {
            return Ok(None);
        }
        let contexts = load()?;
        return match contexts.contexts.iter().find(|c| c.name == host) {
            Some(c) => Ok(Some(c.host.clone())),
            None => Err(unknown(host, &contexts)),
        };
    }
    let contexts = load()?;
    let Some(current) = contexts.current.as_deref() else {
        return Ok(None);
    };
    match contexts.contexts.iter().find(|c| c.name == current) {
        Some(c) => Ok(Some(c.host.clone())),
        None => Err(unknown(current, &contexts)),
    }
}

pub(super) fn run(command: ContextsCommand) -> CliResult {
    let mut contexts = load()?;
    match command {
        ContextsCommand::Add { name, url } => {
            check_name(&name)?;
            let host = SshHost::parse(&url)
                .map_err(|m| CliError::failure("invalid_host", anyhow::anyhow!("{m}")))?;
            if contexts.contexts.iter().any(|c| c.name == name) {
                return Err(CliError::failure(
                    "context_exists",
                    anyhow::anyhow!(
                        "a context `{name}` exists already: `contexts remove {name}` first to change it"
                    ),
                ));
            }
            contexts.contexts.push(Entry {
                name: name.clone(),
                host: host.url(),
            });
            save(&contexts)?;
            crate::output::line(format!(
                "added context {name} ({}); `contexts use {name}` makes client commands talk to it",
                host.url()
            ))?;
        }
        ContextsCommand::Use { name } => {
            if name == DEFAULT {
                contexts.current = None;
            } else if contexts.contexts.iter().any(|c| c.name == name) {
                contexts.current = Some(name.clone());
            } else {
                return Err(unknown(&name, &contexts));
            }
            save(&contexts)?;
            crate::output::line(format!("client commands now talk to context {name}"))?;
        }
        ContextsCommand::Remove { name } => {
            let before = contexts.contexts.len();
            contexts.contexts.retain(|c| c.name != name);
            if contexts.contexts.len() == before {
                return Err(unknown(&name, &contexts));
            }
            if contexts.current.as_deref() == Some(name.as_str()) {
                contexts.current = None;
            }
            save(&contexts)?;
            crate::output::line(format!("removed context {name}"))?;
        }
        ContextsCommand::List(out) => {
            let current = contexts.current.as_deref().unwrap_or(DEFAULT);
            let mut rows = vec![serde_json::json!({
                "name": DEFAULT, "host": null, "current": current == DEFAULT,
            })];
            rows.extend(contexts.contexts.iter().map(|c| {
                serde_json::json!({ "name": c.name, "host": c.host, "current": current == c.name })
            }));
            if out.json {
                crate::output::json(&rows)?;
            } else {
                let text = rows
                    .iter()
                    .map(|r| {
                        format!(
                            "{} {:<16} {}",
                            if r["current"] == true { "*" } else { " " },
                            r["name"].as_str().unwrap_or_default(),
                            r["host"].as_str().unwrap_or("this host"),
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                crate::output::line(text)?;
            }
        }
    }
    Ok(())
}

fn unknown(name: &str, contexts: &Contexts) -> CliError {
    let known = contexts
        .contexts
        .iter()
        .map(|c| c.name.as_str())
        .chain([DEFAULT])
        .collect::<Vec<_>>()
        .join(", ");
    CliError::failure(
        "context_unknown",
        anyhow::anyhow!(
            "no context `{name}` (known: {known}); add it with `contexts add {name} ssh://[user@]host[:port]`, or `contexts use default` for this host"
        ),
    )
}

fn check_name(name: &str) -> Result<(), CliError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name != DEFAULT
        && !name.starts_with("ssh:")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(CliError::failure(
            "invalid_context_name",
            anyhow::anyhow!(
                "`{name}` is not a context name: 1-64 of [A-Za-z0-9._-], and not `{DEFAULT}` (this host)"
            ),
        ))
    }
}

/// `contexts.json` in the config directory (beside the default
/// instance's `config.json`; every instance shares it).
fn file() -> Result<PathBuf, CliError> {
    let opts = PathOptions::from_env().map_err(|e| super::paths::installer_error(e.into()))?;
    let config_dir = opts
        .xdg_config_home
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| opts.home.join(".config"));
    Ok(config_dir.join(lapis_release::PRODUCT).join(FILE))
}

fn load() -> Result<Contexts, CliError> {
    let path = file()?;
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Contexts {
                schema: 1,
                ..Contexts::default()
            });
        }
        Err(e) => {
            return Err(CliError::failure(
                "contexts_unreadable",
                anyhow::Error::new(e).context(format!("cannot read {}", path.display())),
            ));
        }
    };
    serde_json::from_slice::<Contexts>(&bytes)
        .ok()
        .filter(|c| c.schema == 1)
        .ok_or_else(|| {
            CliError::failure(
                "contexts_invalid",
                anyhow::anyhow!(
                    "{} is not a contexts file (schema 1); fix it or remove it (`contexts add` writes a new one)",
                    path.display()
                ),
            )
        })
}

fn save(contexts: &Contexts) -> Result<(), CliError> {
    let path = file()?;
    let fail = |e: fsx::FsError| CliError::failure("contexts_write_failed", anyhow::Error::new(e));
    fsx::create_dir_all_mode(fsx::parent_of(&path), 0o700).map_err(fail)?;
    let mut bytes = serde_json::to_vec_pretty(contexts).map_err(anyhow::Error::new)?;
    bytes.push(b'\n');
    fsx::write_atomic(&path, &bytes, 0o600).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_refuse_default_and_addresses() {
        assert!(check_name("box-1.lan").is_ok());
        for bad in ["", "default", "ssh://x", "a b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
