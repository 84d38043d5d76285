//! The configuration file: its shape, loading and full validation.
//!
//! The installer writes the file once and only checks its basic shape; this
//! module owns every other rule. What must stay true: no error produced here
//! ever quotes a value from the file (a token could be anywhere a typo put
//! it), only field names and positions.

mod provider;
mod validate;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Scope;

pub use provider::{CommandLookup, CommandRef, ECHO_PROVIDER, ProviderError, ProviderSpec};
pub use validate::{WORKSPACE_ID_RULE, valid_workspace_id};

/// Lifetime of a newly issued session unless `server.sessionTtlSeconds`
/// says otherwise: 30 days.
pub const DEFAULT_SESSION_TTL_SECS: u64 = 30 * 24 * 3600;

/// Schema version this build reads.
pub const CONFIG_SCHEMA: u32 = 1;

/// The parsed, validated configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Always [`CONFIG_SCHEMA`].
    pub schema: u32,
    /// Instance name (`default` or `--instance NAME`).
    pub instance: String,
    /// Controller home (database, lock, socket).
    pub controller_home: PathBuf,
    /// Bootstrap tokens; at least one.
    pub tokens: Vec<TokenSpec>,
    /// Agent providers by name.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Agent workspaces by id.
    #[serde(default)]
    pub workspaces: BTreeMap<String, WorkspaceConfig>,
    /// Server limits.
    #[serde(default)]
    pub server: ServerLimits,
}

/// One bootstrap token. `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenSpec {
    /// Unique name of the credential (sessions are keyed by it).
    pub name: String,
    /// Principal sessions of this token act for.
    pub principal: String,
    /// The secret (`lapis_` + 64 lowercase hex digits).
    pub secret: String,
    /// Granted scopes; absent means every scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<Scope>>,
}

impl TokenSpec {
    /// The scopes a session of this token gets.
    pub fn effective_scopes(&self) -> Vec<Scope> {
        let mut scopes = self.scopes.clone().unwrap_or_else(|| Scope::ALL.to_vec());
        scopes.sort();
        scopes.dedup();
        scopes
    }
}

impl fmt::Debug for TokenSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSpec")
            .field("name", &self.name)
            .field("principal", &self.principal)
            .field("secret", &"<redacted>")
            .field("scopes", &self.scopes)
            .finish()
    }
}

/// A provider as written in the config (validated for shape here; the ACP
/// runner owns launch-time resolution).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderConfig {
    /// Absolute path or bare name resolved from `PATH`, then `~/.local/bin`.
    pub command: String,
    /// Arguments (never secrets).
    #[serde(default)]
    pub args: Vec<String>,
    /// Constant, non-secret environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables copied from the service's own environment.
    #[serde(default)]
    pub env_allowlist: Vec<String>,
    /// Identity the agent commits as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcs_identity: Option<VcsIdentity>,
}

/// `vcsIdentity`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VcsIdentity {
    /// Author name.
    pub name: String,
    /// Author email.
    pub email: String,
}

/// A workspace declared in config.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// Absolute project directory (canonicalized by validation).
    pub path: PathBuf,
}

/// `server` limits, with their defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ServerLimits {
    /// Largest accepted frame in bytes.
    pub max_frame_bytes: usize,
    /// Bound of the scheduler queue.
    pub queue_capacity: usize,
    /// Concurrent socket connections.
    pub max_connections: usize,
    /// Lifetime of a newly issued session.
    pub session_ttl_seconds: u64,
    /// Journal events buffered per subscriber before it is told it lagged.
    pub subscriber_buffer: usize,
    /// On stop, how long running turns may take to finish before their
    /// agents are killed and the turns settled.
    pub shutdown_grace_seconds: u64,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_frame_bytes: crate::DEFAULT_MAX_FRAME_BYTES,
            queue_capacity: 1024,
            max_connections: 256,
            session_ttl_seconds: DEFAULT_SESSION_TTL_SECS,
            subscriber_buffer: 1024,
            shutdown_grace_seconds: 10,
        }
    }
}

/// Why the configuration cannot be used. Never quotes file content.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read configuration {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Not JSON of the expected shape.
    #[error("configuration {} is malformed at line {line}, column {column} ({kind})", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Line of the problem.
        line: usize,
        /// Column of the problem.
        column: usize,
        /// `syntax`, `data` (wrong type or unknown field) or `eof`.
        kind: &'static str,
    },
    /// A rule is broken; `field` names where, `problem` says what.
    #[error("configuration field `{field}` {problem}")]
    Invalid {
        /// JSON path of the offending field (`tokens[0].secret`).
        field: String,
        /// What is wrong, without the value.
        problem: String,
    },
    /// Two workspace ids name one canonical path.
    #[error("workspaces `{first}` and `{second}` name the same directory (workspace_alias)")]
    WorkspaceAlias {
        /// The id kept.
        first: String,
        /// The id refused.
        second: String,
    },
}

impl ConfigError {
    /// The stable code for scripts.
    pub fn code(&self) -> &'static str {
        match self {
            ConfigError::WorkspaceAlias { .. } => "workspace_alias",
            _ => "invalid_config",
        }
    }
}

impl Config {
    /// Reads and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let bytes = std::fs::read(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::parse(&bytes, path)
    }

    /// Parses and validates file content; `path` is only used in errors.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Config, ConfigError> {
        let mut config: Config = serde_json::from_slice(bytes).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            line: e.line(),
            column: e.column(),
            kind: match e.classify() {
                serde_json::error::Category::Io => "io",
                serde_json::error::Category::Syntax => "syntax",
                serde_json::error::Category::Data => "wrong type or unknown field",
                serde_json::error::Category::Eof => "unexpected end",
            },
        })?;
        validate::validate(&mut config)?;
        Ok(config)
    }

    /// The configured providers as the runner launches them (the rules were
    /// checked when the config was validated).
    pub fn provider_specs(&self) -> Result<BTreeMap<String, ProviderSpec>, ProviderError> {
        self.providers
            .iter()
            .map(|(name, p)| Ok((name.clone(), ProviderSpec::from_config(name, p)?)))
            .collect()
    }

    /// The first token (the CLI's own credential).
    pub fn primary_token(&self) -> &TokenSpec {
        &self.tokens[0]
    }
}
