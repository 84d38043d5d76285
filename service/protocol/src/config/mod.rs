//! The configuration file: its shape, loading and full validation.
//!
//! The installer writes the file once and only checks its basic shape; this
//! module owns every other rule. What must stay true: no error produced here
//! ever quotes a value from the file (a token could be anywhere a typo put
//! it), only field names and positions.

mod budgets;
mod catalogue;
mod command;
mod envfile;
mod error;
mod history;
mod notify;
mod provider;
mod roots;
mod telemetry;
mod token;
mod validate;
mod webhook;
mod worktrees;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
#[cfg(feature = "schema")]
use serde_json::Value;

pub use crate::names::{WORKSPACE_ID_RULE, valid_application, valid_workspace_id};
pub use budgets::{Budget, BudgetPeriod, BudgetScope, ThreadBudget};
pub use catalogue::{CATALOGUE, CatalogueEntry, catalogue_entry};
pub use command::{CommandError, CommandLookup, CommandNameError, CommandRef};
pub use envfile::{ENV_FILE, EnvFile, EnvFileError};
pub use error::{ConfigError, MAX_CONFIG_BYTES, read_config_file};
use error::{error_path, named_problem};
pub use history::{
    DEFAULT_HISTORY_INTERVAL_MINUTES, HistoryConfig, MAX_HISTORY_AGE_DAYS, MIN_HISTORY_BYTES,
    MIN_HISTORY_EVENTS,
};
pub use notify::{
    DEFAULT_NOTIFY_PER_MINUTE, DEFAULT_NOTIFY_TIMEOUT_SECONDS, NotifyConfig, NotifyEvent,
};
pub use provider::{
    AskPolicy, ECHO_PROVIDER, PERMISSION_TIMEOUT_SECONDS, ProviderError, ProviderSpec,
    RestrictedPolicy, SessionPolicy,
};
pub use roots::{MAX_WORKSPACE_ROOTS, WORKSPACE_ROOTS_FIELD, WorkspaceRoots};
pub use telemetry::TelemetryConfig;
pub use token::{TokenKind, TokenSpec};
pub use webhook::{WebhookConfig, WebhookPreset, check_url as check_webhook_url};
pub use worktrees::{DEFAULT_HOOK_TIMEOUT_SECONDS, HookCommand, WorktreesConfig};

/// Lifetime of a newly issued session unless `server.sessionTtlSeconds`
/// says otherwise: 30 days.
pub const DEFAULT_SESSION_TTL_SECS: u64 = 30 * 24 * 3600;

/// Remembered sessions one config token keeps unless
/// `server.maxSessionsPerToken` says otherwise: one per application that
/// says `hello` with it, so 256 applications share a token before the
/// oldest session is evicted.
pub const DEFAULT_MAX_SESSIONS_PER_TOKEN: usize = 256;

/// [`ConfigError::Parse`]'s `kind` when the JSON is well-formed but a member
/// is missing, unknown or of the wrong type.
pub const PARSE_DATA: &str = "wrong type or unknown field";

/// [`ConfigError::Parse`]'s `kind` for a key repeated in one JSON object.
pub const PARSE_DUPLICATE_KEY: &str = "duplicate key";

/// Prefix of every bootstrap token secret (`lapis_` + 64 lowercase hex).
pub const TOKEN_PREFIX: &str = "lapis_";

/// Schema version this build reads.
pub const CONFIG_SCHEMA: u32 = 1;

/// The parsed, validated configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// Directories under which sessions may register workspaces at run
    /// time (`workspaces add`, `ask` in a new directory): absolute paths,
    /// `~` or `~/…`, at most 64. Absent means the controller user's home
    /// directory; `[]` allows only the workspaces declared here. Declared
    /// workspaces need no root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_roots: Option<Vec<String>>,
    /// The provider `ask` uses without `--provider`: a key of `providers`
    /// or `echo` [default: `echo`]. The first `providers add` sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_provider: Option<String>,
    /// Server limits.
    #[serde(default)]
    pub server: ServerLimits,
    /// The command run for attention events (see `docs/operations.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<NotifyConfig>,
    /// OpenTelemetry traces and metrics over OTLP/HTTP (off unless present;
    /// see `docs/operations.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<TelemetryConfig>,
    /// Ceilings on tokens or cost, checked when a turn is claimed, or
    /// with `period: "turn"` while it runs (at most 64; see [`Budget`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<Budget>,
    /// Where worktree workspaces go, and their setup and teardown
    /// commands (see `docs/operations.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktrees: Option<WorktreesConfig>,
    /// How long the journal keeps threads' events (see
    /// [`HistoryConfig`]; off unless present). A workspace's own
    /// `history` overrides it field by field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryConfig>,
}

/// A provider as written in the config (validated for shape here; the ACP
/// runner owns launch-time resolution).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderConfig {
    /// Absolute path or bare name resolved from `PATH`, then `~/.local/bin`.
    pub command: String,
    /// Arguments (never secrets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Constant, non-secret environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Variables whose values come from the env file beside the config,
    /// else from the service's own environment (secrets go here).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_allowlist: Vec<String>,
    /// Identity the agent commits as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcs_identity: Option<VcsIdentity>,
    /// Seconds an idle agent is kept alive for its thread's next turn
    /// (0-604800, default 300; 0 stops it after every turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_seconds: Option<u64>,
    /// Seconds a turn may run before it is cancelled with
    /// `deadline_exceeded` (1-604800, default 3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turn_seconds: Option<u64>,
    /// Seconds the agent may take to answer each handshake request
    /// (`initialize`, `session/new`, `session/load`; 1-600, default 30);
    /// past it the turn fails before its dispatch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake_seconds: Option<u64>,
    /// Seconds a permission request waits for an answer before it is
    /// answered by policy and recorded `expired` (1-604800, default 600;
    /// a turn's deadline caps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_timeout_seconds: Option<u64>,
    /// MCP servers every session of this provider gets (at most 16; see
    /// `docs/providers.md`). Restricted threads refuse them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<crate::mcp::McpServer>,
    /// Environment names an application's MCP servers (`mcp.register`)
    /// may draw from the controller's env file / environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_env_allowlist: Vec<String>,
    /// The ACP session mode (`session/set_mode`) requested for restricted
    /// threads (e.g. `plan`); without it a restricted turn fails
    /// `restricted_mode_unavailable` unless `allowUnrestricted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restricted_mode: Option<String>,
    /// Let restricted turns run when their mode cannot be applied (they
    /// still never auto-approve). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_unrestricted: Option<bool>,
    /// The ACP session mode (`session/set_mode`) in which the agent asks
    /// before acting, requested for threads whose approval is `ask` (e.g.
    /// `default`; without it the catalogue's for the command, if any). An
    /// `ask` turn whose mode is not applied fails `ask_unavailable` unless
    /// `allowUnasked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_mode: Option<String>,
    /// Accept this provider acting without asking: `ask` turns run when
    /// its asking mode cannot be applied or its policy probe found it
    /// `ignored` (recorded on the turn). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_unasked: Option<bool>,
}

/// `vcsIdentity`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct VcsIdentity {
    /// Author name.
    pub name: String,
    /// Author email.
    pub email: String,
}

/// A workspace declared in config.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// Absolute project directory (canonicalized by validation).
    pub path: PathBuf,
    /// How its turns keep evidence of the working tree: `watch` (the
    /// default), `stat` or `off` (see `EvidenceMode`).
    #[serde(
        default,
        skip_serializing_if = "crate::snapshot::EvidenceMode::is_default"
    )]
    pub evidence: crate::snapshot::EvidenceMode,
    /// This workspace's `history` limits, over the global ones field by
    /// field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryConfig>,
}

/// `server` limits, with their defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// Remembered sessions (one per application) one token keeps: issuing
    /// one more first purges the token's expired sessions, then evicts its
    /// oldest (revoked ones first); an evicted session ends at once.
    pub max_sessions_per_token: usize,
    /// Journal events buffered per subscriber before it is told it lagged.
    pub subscriber_buffer: usize,
    /// On stop, how long running turns may take to finish before their
    /// agents are killed and the turns settled.
    pub shutdown_grace_seconds: u64,
    /// How long a new socket connection may take to authenticate (`hello`)
    /// before it is closed with an explicit error frame.
    pub hello_timeout_seconds: u64,
    /// How long an authenticated connection with no subscription may stay
    /// silent before it is closed with an explicit error frame.
    pub idle_timeout_seconds: u64,
    /// Journal subscriptions one connection may hold at once; one more is
    /// refused with `limit_reached`.
    pub max_subscriptions_per_connection: usize,
    /// Agent processes kept alive at once (busy and idle); idle ones are
    /// evicted least recently used to make room.
    pub max_live_agents: usize,
    /// Turns running at once; further runnable turns wait in the queue.
    pub max_running_turns: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_frame_bytes: crate::DEFAULT_MAX_FRAME_BYTES,
            queue_capacity: 1024,
            max_connections: 256,
            session_ttl_seconds: DEFAULT_SESSION_TTL_SECS,
            max_sessions_per_token: DEFAULT_MAX_SESSIONS_PER_TOKEN,
            subscriber_buffer: 1024,
            shutdown_grace_seconds: 10,
            hello_timeout_seconds: 10,
            idle_timeout_seconds: 300,
            max_subscriptions_per_connection: 64,
            max_live_agents: 16,
            max_running_turns: 16,
        }
    }
}

impl Config {
    /// The effective `history` policy of each declared workspace with a
    /// section of its own (the global one applies to every other).
    pub fn history_policies(&self) -> BTreeMap<String, HistoryConfig> {
        self.workspaces
            .iter()
            .filter_map(|(id, w)| {
                let own = w.history.as_ref()?;
                Some((id.clone(), own.over(self.history.as_ref())))
            })
            .collect()
    }

    /// The declared workspaces whose evidence is not the default, by id.
    pub fn evidence_modes(&self) -> BTreeMap<String, crate::snapshot::EvidenceMode> {
        self.workspaces
            .iter()
            .filter(|(_, w)| !w.evidence.is_default())
            .map(|(id, w)| (id.clone(), w.evidence))
            .collect()
    }

    /// Reads (bounded, regular files only) and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let bytes = read_config_file(path)?;
        Config::parse(&bytes, path)
    }

    /// Parses file content and checks its structure: shape, names, limits,
    /// tokens. Nothing here looks at the machine, so the installer can use
    /// it; see [`Config::check_on_this_machine`]. `path` is only used in
    /// errors. Duplicate keys are refused anywhere in the document.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Config, ConfigError> {
        let parsed = match crate::StrictValue::from_slice(bytes) {
            Err(e) => Err((None, e)),
            Ok(_) => {
                let mut de = serde_json::Deserializer::from_slice(bytes);
                match serde_path_to_error::deserialize::<_, Config>(&mut de) {
                    Ok(c) => de.end().map(|()| c).map_err(|e| (None, e)),
                    Err(e) => {
                        let field = error_path(e.path());
                        Err(((field != ".").then_some(field), e.into_inner()))
                    }
                }
            }
        };
        let mut config = parsed.map_err(|(field, e)| ConfigError::Parse {
            path: path.to_owned(),
            // Only a data error sits at a field; a syntax error has none.
            field: field.filter(|_| e.classify() == serde_json::error::Category::Data),
            problem: (e.classify() == serde_json::error::Category::Data)
                .then(|| named_problem(&e))
                .flatten(),
            line: e.line(),
            column: e.column(),
            kind: match e.classify() {
                _ if crate::is_duplicate_key(&e) => PARSE_DUPLICATE_KEY,
                serde_json::error::Category::Io => "io",
                serde_json::error::Category::Syntax => "syntax",
                serde_json::error::Category::Data => PARSE_DATA,
                serde_json::error::Category::Eof => "unexpected end",
            },
        })?;
        validate::validate(&mut config)?;
        Ok(config)
    }

    /// The JSON Schema of the configuration file, generated from these
    /// types (so it cannot drift from what [`Config::parse`] accepts in
    /// shape; the value rules live in the validator and the descriptions).
    #[cfg(feature = "schema")]
    pub fn json_schema() -> Value {
        serde_json::to_value(schemars::schema_for!(Config)).unwrap_or_default()
    }

    /// The checks that depend on this machine at run time (workspace
    /// directories exist; they are stored canonical; no two ids name one
    /// directory; every workspace root is an existing directory). `serve` and clients run it after [`Config::load`]; the
    /// installer does not, so a missing workspace directory never fails an
    /// install.
    pub fn check_on_this_machine(&mut self) -> Result<(), ConfigError> {
        validate::check_on_this_machine(self)?;
        self.workspace_roots().map(drop)
    }

    /// The workspace roots resolved on this machine, `~` and the default
    /// being the `HOME` of this process (see [`WorkspaceRoots::resolve`]).
    pub fn workspace_roots(&self) -> Result<WorkspaceRoots, ConfigError> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        WorkspaceRoots::resolve(self.workspace_roots.as_deref(), home.as_deref())
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
