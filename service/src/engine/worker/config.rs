//! The engine's configuration: what it needs besides the store (providers,
//! runner limits, pool and concurrency bounds, the ports' registries, the
//! budgets at start).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::acp::{self, CommandLookup, ProviderSpec, RunnerLimits};

/// What the engine needs besides the store.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Providers by name (validated specs).
    pub(crate) providers: BTreeMap<String, ProviderSpec>,
    /// Runner deadlines and bounds.
    pub limits: RunnerLimits,
    /// Where bare provider commands are found.
    pub(crate) lookup: CommandLookup,
    /// At shutdown, how long running turns may take to finish on their own
    /// before their agents are killed and the turns settled.
    pub shutdown_grace: Duration,
    /// Agent processes alive at once (`server.maxLiveAgents`).
    pub(crate) max_live_agents: usize,
    /// Turns running at once (`server.maxRunningTurns`).
    pub(crate) max_running_turns: usize,
    /// MCP servers applications registered on their connections (shared
    /// with the server, which registers and withdraws them).
    pub(crate) mcp: super::super::McpRegistry,
    /// Application tool endpoints and bridge tickets (shared with the
    /// server, which registers endpoints and serves bridge calls).
    pub(crate) tools: crate::tools::Tools,
    /// How agent sessions of threads with tools or memory reach them: this
    /// binary (`mcp-bridge`) and the socket it connects back to (`serve`'s
    /// controller socket, or managed mode's bridge socket). `None` (an
    /// engine without a server): such turns fail `tool_endpoint_unavailable`.
    pub(crate) bridge: Option<(PathBuf, PathBuf)>,
    /// The config's budgets at start (a reload replaces the engine's).
    pub(crate) budgets: Vec<lapis_protocol::config::Budget>,
    /// Workspaces whose evidence is not the default, by id (a reload
    /// replaces the engine's).
    pub(crate) evidence: BTreeMap<String, lapis_protocol::snapshot::EvidenceMode>,
}

impl EngineConfig {
    /// A config with these providers and default limits.
    pub fn new(providers: BTreeMap<String, ProviderSpec>) -> EngineConfig {
        EngineConfig {
            providers,
            limits: RunnerLimits::default(),
            lookup: CommandLookup::from_env(),
            shutdown_grace: Duration::from_secs(10),
            max_live_agents: 16,
            max_running_turns: 16,
            mcp: super::super::McpRegistry::default(),
            tools: crate::tools::Tools::default(),
            bridge: None,
            budgets: Vec::new(),
            evidence: BTreeMap::new(),
        }
    }

    /// How many turns may run at once: the engine keeps one claim parked
    /// on the store per free slot.
    #[cfg(any(test, feature = "test-support"))]
    pub fn max_running_turns(&self) -> usize {
        self.max_running_turns.max(1)
    }

    /// Validates the config's `providers` object (name → definition, the
    /// shape in the config docs) into specs. The server's config module can
    /// pass its parsed providers re-serialized with `serde_json::to_value`.
    #[cfg(test)]
    pub(crate) fn providers_from_json(
        providers: &serde_json::Value,
    ) -> Result<BTreeMap<String, ProviderSpec>, acp::ProviderError> {
        let mut out = BTreeMap::new();
        if let Some(map) = providers.as_object() {
            for (name, def) in map {
                out.insert(name.clone(), ProviderSpec::from_json(name, def)?);
            }
        }
        Ok(out)
    }

    /// Adds the built-in `echo` provider (this binary's `acp-echo`) unless
    /// the config defines its own `echo`.
    pub fn with_builtin_echo(mut self, exe: PathBuf) -> EngineConfig {
        self.providers
            .entry(acp::ECHO_PROVIDER.to_string())
            .or_insert_with(|| ProviderSpec::builtin_echo(exe));
        self
    }
}
