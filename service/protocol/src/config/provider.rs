//! Provider definitions: what the config says about one agent, validated into
//! a [`ProviderSpec`] the launcher can trust.
//!
//! Secrets reach an agent only through its environment allowlist, never argv,
//! so the spec keeps the allowlist as *names*; values are read from the
//! service's own environment at launch. Error messages name the provider and
//! the offending key, never a value (a value may be a secret).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use serde_json::Value;

use super::command::{CommandError, CommandLookup, CommandNameError, CommandRef};
use super::{ProviderConfig, VcsIdentity};
use crate::mcp::McpServer;
use crate::names::{valid_env_name, valid_name};

/// The name of the built-in deterministic provider.
pub const ECHO_PROVIDER: &str = "echo";

/// Environment variables derived from `vcsIdentity`; they may not also be set
/// through `env` or `envAllowlist`, so the identity has one source.
const VCS_VARS: [&str; 4] = [
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
];

/// Why a provider definition was refused. Messages carry names and keys only.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProviderError {
    /// The provider's name breaks the name rule.
    #[error("a provider name is invalid (expected 1-64 of [A-Za-z0-9._-], starting alphanumeric)")]
    InvalidName {},
    /// A member is missing or of the wrong shape.
    #[error("providers.{provider}: {reason}")]
    Malformed {
        /// The provider.
        provider: String,
        /// What is wrong (names keys, never values).
        reason: String,
    },
    /// `command` is a relative path.
    #[error(
        "providers.{provider}: `command` must be an absolute path or a bare name, got a relative path"
    )]
    RelativeCommand {
        /// The provider.
        provider: String,
    },
    /// An `env` or `envAllowlist` key is not a variable name.
    #[error(
        "providers.{provider}: environment key #{position} (env keys, then envAllowlist) is not a valid variable name"
    )]
    InvalidEnvName {
        /// The provider.
        provider: String,
        /// Its position (env keys, then envAllowlist), from 1.
        position: usize,
    },
    /// A variable is set twice.
    #[error(
        "providers.{provider}: environment key #{position} (env keys, then envAllowlist, then vcsIdentity) is set more than once (they must not overlap)"
    )]
    DuplicateEnv {
        /// The provider.
        provider: String,
        /// The repeat's position, from 1.
        position: usize,
    },
    /// `vcsIdentity` has an unusable name or email.
    #[error("providers.{provider}: vcsIdentity.{field} is invalid: {reason}")]
    InvalidVcsIdentity {
        /// The provider.
        provider: String,
        /// `name` or `email`.
        field: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// An MCP server description was refused.
    #[error("providers.{provider}.mcpServers: {refusal}")]
    Mcp {
        /// The provider.
        provider: String,
        /// Why.
        refusal: crate::mcp::McpRefusal,
    },
    /// A bare `command` is in neither `PATH` nor `~/.local/bin`.
    #[error("provider `{provider}`: command `{command}` not found in PATH or ~/.local/bin")]
    CommandNotFound {
        /// The provider.
        provider: String,
        /// The bare name.
        command: String,
    },
    /// An absolute `command` is not an executable file.
    #[error("provider `{provider}`: `{path}` is not an executable file")]
    NotExecutable {
        /// The provider.
        provider: String,
        /// The path.
        path: PathBuf,
    },
}

/// A validated provider definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSpec {
    /// The key under `providers` (or `echo`).
    pub name: String,
    /// The executable.
    pub command: CommandRef,
    /// Arguments, passed verbatim (never secrets).
    pub args: Vec<String>,
    /// Constant, non-secret environment.
    pub env: BTreeMap<String, String>,
    /// Names whose values are copied from the service's environment.
    pub env_allowlist: Vec<String>,
    /// Exported as `GIT_AUTHOR_*` / `GIT_COMMITTER_*`.
    pub vcs_identity: Option<VcsIdentity>,
    /// How long the agent is kept and how long a turn may run.
    pub session: SessionPolicy,
    /// MCP servers every session of this provider gets.
    pub mcp_servers: Vec<McpServer>,
    /// Environment names application MCP servers may draw.
    pub mcp_env_allowlist: Vec<String>,
    /// The session mode restricted threads request.
    pub restricted: RestrictedPolicy,
    /// The session mode `ask` threads request, so the agent asks.
    pub ask: AskPolicy,
}

impl ProviderSpec {
    /// Validates a provider as the typed config holds it. The config
    /// validator calls this, so the runner launches from exactly the rules
    /// the config was checked against.
    pub fn from_config(name: &str, config: &ProviderConfig) -> Result<ProviderSpec, ProviderError> {
        validate_name(name)?;
        let command = command_ref(name, &config.command)?;
        let session = SessionPolicy::from_fields(
            config.idle_seconds,
            config.max_turn_seconds,
            config.handshake_seconds,
            config.permission_timeout_seconds,
        )
        .map_err(|reason| ProviderError::Malformed {
            provider: name.to_string(),
            reason,
        })?;
        let restricted = RestrictedPolicy::from_fields(
            config.restricted_mode.as_deref(),
            config.allow_unrestricted,
        )
        .map_err(|reason| ProviderError::Malformed {
            provider: name.to_string(),
            reason,
        })?;
        let ask =
            AskPolicy::from_fields(config.ask_mode.as_deref(), config.allow_unasked, &command)
                .map_err(|reason| ProviderError::Malformed {
                    provider: name.to_string(),
                    reason,
                })?;
        let spec = ProviderSpec {
            name: name.to_string(),
            command,
            args: config.args.clone(),
            env: config.env.clone(),
            env_allowlist: config.env_allowlist.clone(),
            vcs_identity: config.vcs_identity.clone(),
            session,
            mcp_servers: config.mcp_servers.clone(),
            mcp_env_allowlist: config.mcp_env_allowlist.clone(),
            restricted,
            ask,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Validates the JSON object found at `providers.<name>` in the config:
    /// its shape here, every rule in [`ProviderSpec::validate`].
    pub fn from_json(name: &str, value: &Value) -> Result<ProviderSpec, ProviderError> {
        validate_name(name)?;
        let bad = |reason: String| ProviderError::Malformed {
            provider: name.to_string(),
            reason,
        };
        let obj = value
            .as_object()
            .ok_or_else(|| bad("definition must be a JSON object".into()))?;
        for key in obj.keys() {
            if !matches!(
                key.as_str(),
                "command"
                    | "args"
                    | "env"
                    | "envAllowlist"
                    | "vcsIdentity"
                    | "idleSeconds"
                    | "maxTurnSeconds"
                    | "handshakeSeconds"
                    | "permissionTimeoutSeconds"
                    | "mcpServers"
                    | "mcpEnvAllowlist"
                    | "restrictedMode"
                    | "allowUnrestricted"
                    | "askMode"
                    | "allowUnasked"
            ) {
                return Err(bad(
                    "unknown key (allowed: command, args, env, envAllowlist, vcsIdentity, idleSeconds, maxTurnSeconds, handshakeSeconds, permissionTimeoutSeconds, restrictedMode, allowUnrestricted, askMode, allowUnasked, mcpServers, mcpEnvAllowlist)".into(),
                ));
            }
        }
        let command = match obj.get("command") {
            Some(Value::String(c)) if !c.is_empty() && !c.contains('\0') => c.clone(),
            Some(Value::String(_)) => {
                return Err(bad("`command` must be a non-empty string".into()));
            }
            Some(_) => return Err(bad("`command` must be a string".into())),
            None => return Err(bad("`command` is required".into())),
        };
        let command = command_ref(name, &command)?;
        let args = string_list(obj.get("args"), "args").map_err(bad)?;
        let mut env = BTreeMap::new();
        match obj.get("env") {
            None => {}
            Some(Value::Object(map)) => {
                for (i, (k, v)) in map.iter().enumerate() {
                    let v = v.as_str().ok_or_else(|| {
                        bad(format!("the value of env key #{} must be a string", i + 1))
                    })?;
                    env.insert(k.clone(), v.to_string());
                }
            }
            Some(_) => return Err(bad("`env` must be an object of strings".into())),
        }
        let env_allowlist = string_list(obj.get("envAllowlist"), "envAllowlist").map_err(bad)?;
        let vcs_identity = match obj.get("vcsIdentity") {
            None | Some(Value::Null) => None,
            Some(Value::Object(map)) => {
                for key in map.keys() {
                    if key != "name" && key != "email" {
                        return Err(bad(
                            "unknown key in `vcsIdentity` (allowed: name, email)".into()
                        ));
                    }
                }
                let field = |f: &str| {
                    map.get(f)
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .ok_or_else(|| bad(format!("vcsIdentity.{f} must be a string")))
                };
                Some(VcsIdentity {
                    name: field("name")?,
                    email: field("email")?,
                })
            }
            Some(_) => return Err(bad("`vcsIdentity` must be an object".into())),
        };
        let session = SessionPolicy::from_json(obj).map_err(bad)?;
        let mcp_servers = match obj.get("mcpServers") {
            None => Vec::new(),
            // The shape error names the field path, never a value.
            Some(v) => serde_path_to_error::deserialize(v)
                .map_err(|e| bad(format!("`mcpServers` is malformed at {}", e.path())))?,
        };
        let mcp_env_allowlist =
            string_list(obj.get("mcpEnvAllowlist"), "mcpEnvAllowlist").map_err(bad)?;
        let restricted = RestrictedPolicy::from_json(obj).map_err(bad)?;
        let ask = AskPolicy::from_json(obj, &command).map_err(bad)?;
        let spec = ProviderSpec {
            name: name.to_string(),
            command,
            args,
            env,
            env_allowlist,
            vcs_identity,
            session,
            mcp_servers,
            mcp_env_allowlist,
            restricted,
            ask,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// The built-in `echo` provider: this binary in its hidden `acp-echo`
    /// subcommand. `exe` is the controller's own executable.
    pub fn builtin_echo(exe: PathBuf) -> ProviderSpec {
        ProviderSpec {
            name: ECHO_PROVIDER.to_string(),
            command: CommandRef::Absolute(exe),
            args: vec!["acp-echo".to_string()],
            env: BTreeMap::new(),
            env_allowlist: Vec::new(),
            vcs_identity: None,
            session: SessionPolicy::default(),
            mcp_servers: Vec::new(),
            mcp_env_allowlist: Vec::new(),
            restricted: RestrictedPolicy::default(),
            ask: AskPolicy::default(),
        }
    }

    /// Checks the invariants every spec must hold (also for specs built in
    /// code rather than parsed).
    pub fn validate(&self) -> Result<(), ProviderError> {
        validate_name(&self.name)?;
        let provider = || self.name.clone();
        let malformed = |reason: String| ProviderError::Malformed {
            provider: provider(),
            reason,
        };
        if self.args.iter().any(|a| a.contains('\0')) {
            return Err(malformed("`args` entries must not contain NUL".into()));
        }
        if self.env.values().any(|v| v.contains('\0')) {
            return Err(malformed("an `env` value must not contain NUL".into()));
        }
        if let CommandRef::Absolute(p) = &self.command
            && !p.is_absolute()
        {
            return Err(ProviderError::RelativeCommand {
                provider: provider(),
            });
        }
        let mut seen = std::collections::BTreeSet::new();
        let derived: &[&str] = if self.vcs_identity.is_some() {
            &VCS_VARS
        } else {
            &[]
        };
        let keys = self
            .env
            .keys()
            .map(String::as_str)
            .chain(self.env_allowlist.iter().map(String::as_str))
            .chain(derived.iter().copied());
        // Keys are reported by position, never quoted: a secret pasted
        // where a key belongs is still a valid variable name.
        for (i, key) in keys.enumerate() {
            if !valid_env_name(key) {
                return Err(ProviderError::InvalidEnvName {
                    provider: provider(),
                    position: i + 1,
                });
            }
            if !seen.insert(key) {
                return Err(ProviderError::DuplicateEnv {
                    provider: provider(),
                    position: i + 1,
                });
            }
        }
        crate::mcp::validate_servers(&self.mcp_servers).map_err(|refusal| ProviderError::Mcp {
            provider: provider(),
            refusal,
        })?;
        for (i, key) in self.mcp_env_allowlist.iter().enumerate() {
            if !valid_env_name(key) || crate::mcp::reserved_env(key) {
                return Err(malformed(format!(
                    "mcpEnvAllowlist entry #{} is not a variable name or is reserved (LAPIS_AI_CONTROLLER_HOME, HOME, PATH, …)",
                    i + 1
                )));
            }
        }
        if let Some(id) = &self.vcs_identity {
            let invalid = |field, reason| ProviderError::InvalidVcsIdentity {
                provider: provider(),
                field,
                reason,
            };
            if let Some(reason) = vcs_name_problem(&id.name) {
                return Err(invalid("name", reason));
            }
            if let Some(reason) = vcs_email_problem(&id.email) {
                return Err(invalid("email", reason));
            }
        }
        Ok(())
    }

    /// Resolves the executable: an absolute path is checked as is; a bare
    /// name is searched in `PATH`, then `$HOME/.local/bin`.
    pub fn resolve_command(&self, lookup: &CommandLookup) -> Result<PathBuf, ProviderError> {
        lookup.resolve(&self.command).map_err(|e| match e {
            CommandError::NotFound { command } => ProviderError::CommandNotFound {
                provider: self.name.clone(),
                command,
            },
            CommandError::NotExecutable { path } => ProviderError::NotExecutable {
                provider: self.name.clone(),
                path,
            },
        })
    }

    /// The agent's complete environment: allowlisted names with values from
    /// `service_env` (absent ones are skipped), the constant `env`, and the
    /// `GIT_*` identity. Nothing else is inherited.
    pub fn agent_env(
        &self,
        service_env: impl Fn(&str) -> Option<OsString>,
    ) -> Vec<(OsString, OsString)> {
        let mut out: Vec<(OsString, OsString)> = Vec::new();
        for name in &self.env_allowlist {
            if let Some(value) = service_env(name) {
                out.push((name.into(), value));
            }
        }
        for (k, v) in &self.env {
            out.push((k.into(), v.into()));
        }
        if let Some(id) = &self.vcs_identity {
            for (k, v) in [
                ("GIT_AUTHOR_NAME", &id.name),
                ("GIT_AUTHOR_EMAIL", &id.email),
                ("GIT_COMMITTER_NAME", &id.name),
                ("GIT_COMMITTER_EMAIL", &id.email),
            ] {
                out.push((k.into(), v.into()));
            }
        }
        out
    }
}

fn validate_name(name: &str) -> Result<(), ProviderError> {
    if valid_name(name, 64) {
        Ok(())
    } else {
        Err(ProviderError::InvalidName {})
    }
}

fn string_list(value: Option<&Value>, key: &str) -> Result<Vec<String>, String> {
    match value {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("`{key}` must be an array of strings"))
            })
            .collect(),
        Some(_) => Err(format!("`{key}` must be an array of strings")),
    }
}

fn vcs_name_problem(name: &str) -> Option<&'static str> {
    if name.trim().is_empty() {
        Some("must not be empty")
    } else if name.len() > 256 {
        Some("longer than 256 bytes")
    } else if name.chars().any(|c| c.is_control() || c == '<' || c == '>') {
        Some("must not contain control characters or angle brackets")
    } else {
        None
    }
}

fn vcs_email_problem(email: &str) -> Option<&'static str> {
    let Some((local, domain)) = email.split_once('@') else {
        return Some("must look like local@domain");
    };
    if email.len() > 254 {
        Some("longer than 254 bytes")
    } else if local.is_empty() || domain.is_empty() || domain.contains('@') {
        Some("must look like local@domain")
    } else if email
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == '<' || c == '>')
    {
        Some("must not contain whitespace, control characters or angle brackets")
    } else {
        None
    }
}

/// The config's `command`, read by the one naming rule.
fn command_ref(provider: &str, command: &str) -> Result<CommandRef, ProviderError> {
    CommandRef::parse(command).map_err(|e| match e {
        CommandNameError::Empty => ProviderError::Malformed {
            provider: provider.to_owned(),
            reason: "`command` must be a non-empty string".into(),
        },
        CommandNameError::Relative => ProviderError::RelativeCommand {
            provider: provider.to_owned(),
        },
    })
}

mod ask;
mod policy;
mod restricted;

pub use ask::AskPolicy;
pub use policy::{PERMISSION_TIMEOUT_SECONDS, SessionPolicy};
pub use restricted::RestrictedPolicy;

#[cfg(test)]
mod tests;
