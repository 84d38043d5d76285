//! Every rule the configuration must satisfy. Messages name fields, never values.
//!
//! Two steps, kept apart on purpose: [`validate`] is structural (shape,
//! names, limits, tokens) and depends on nothing but the document, so the
//! installer can check a config on a machine where its workspaces do not
//! exist yet; [`check_on_this_machine`] is what depends on the machine at run
//! time (workspace directories exist, are canonicalized, name no directory
//! twice) and runs where the config is used (`serve` and clients).

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use super::{
    CONFIG_SCHEMA, Config, ConfigError, ProviderConfig, ProviderError, ProviderSpec, TokenSpec,
};
use crate::names::{WORKSPACE_ID_RULE, valid_application, valid_name, valid_workspace_id};

fn invalid(field: impl Into<String>, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        problem: problem.into(),
    }
}

fn valid_secret(s: &str) -> bool {
    s.strip_prefix(super::TOKEN_PREFIX).is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

pub(super) fn validate(config: &mut Config) -> Result<(), ConfigError> {
    if config.schema != CONFIG_SCHEMA {
        return Err(invalid("schema", format!("must be {CONFIG_SCHEMA}")));
    }
    let instance_ok = {
        let s = &config.instance;
        let mut b = s.bytes();
        matches!(b.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
            && s.len() <= 32
            && b.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    };
    if !instance_ok {
        return Err(invalid("instance", "must match ^[a-z0-9][a-z0-9-]{0,31}$"));
    }
    if !config.controller_home.is_absolute() {
        return Err(invalid("controllerHome", "must be an absolute path"));
    }
    validate_tokens(config)?;
    validate_providers(&config.providers)?;
    if let Some(name) = &config.default_provider
        && name != super::ECHO_PROVIDER
        && !config.providers.contains_key(name)
    {
        return Err(invalid(
            "defaultProvider",
            "must name a configured provider (a key of `providers`) or `echo`",
        ));
    }
    validate_workspace_ids(config)?;
    super::roots::validate(config.workspace_roots.as_deref())?;
    if let Some(notify) = &config.notify {
        notify
            .check()
            .map_err(|(field, reason)| invalid(field, reason))?;
    }
    if let Some(telemetry) = &config.telemetry {
        telemetry
            .check()
            .map_err(|(field, reason)| invalid(field, reason))?;
    }
    if config.budgets.len() > 64 {
        return Err(invalid("budgets", "at most 64 budgets"));
    }
    let mut keys = HashSet::new();
    for budget in &config.budgets {
        budget
            .check()
            .map_err(|(field, reason)| invalid(field, reason))?;
        if !keys.insert(budget.key()) {
            return Err(invalid(
                "budgets",
                "two budgets with one key (per, id, period)",
            ));
        }
    }
    if let Some(worktrees) = &config.worktrees {
        worktrees
            .check()
            .map_err(|(field, reason)| invalid(field, reason))?;
    }
    if let Some(history) = &config.history {
        history
            .check("history", true)
            .map_err(|(field, reason)| invalid(field, reason))?;
    }
    for (id, ws) in &config.workspaces {
        if let Some(history) = &ws.history {
            history
                .check(&format!("workspaces.{id}.history"), false)
                .map_err(|(field, reason)| invalid(field, reason))?;
        }
    }
    validate_limits(config)
}

fn validate_tokens(config: &Config) -> Result<(), ConfigError> {
    if config.tokens.is_empty() {
        return Err(invalid("tokens", "must hold at least one token"));
    }
    let mut names = HashSet::new();
    let mut secrets = HashSet::new();
    for (i, t) in config.tokens.iter().enumerate() {
        if !valid_name(&t.name, 64) {
            return Err(invalid(
                format!("tokens[{i}].name"),
                "must be 1-64 of [A-Za-z0-9._-]",
            ));
        }
        if !names.insert(t.name.as_str()) {
            return Err(invalid(
                format!("tokens[{i}].name"),
                "repeats another token's name",
            ));
        }
        if !valid_name(&t.principal, 64) {
            return Err(invalid(
                format!("tokens[{i}].principal"),
                "must be 1-64 of [A-Za-z0-9._-]",
            ));
        }
        if !valid_secret(&t.secret) {
            return Err(invalid(
                format!("tokens[{i}].secret"),
                "must be `lapis_` followed by 64 lowercase hex digits",
            ));
        }
        if !secrets.insert(t.secret.as_str()) {
            return Err(invalid(
                format!("tokens[{i}].secret"),
                "repeats another token's secret",
            ));
        }
        if t.scopes.as_ref().is_some_and(|s| s.is_empty()) {
            return Err(invalid(
                format!("tokens[{i}].scopes"),
                "must not be empty (omit it for every scope)",
            ));
        }
        if let Some(apps) = &t.applications {
            if apps.is_empty() {
                return Err(invalid(
                    format!("tokens[{i}].applications"),
                    "must not be empty (omit it for any application)",
                ));
            }
            if let Some(j) = apps.iter().position(|a| !valid_application(a)) {
                return Err(invalid(
                    format!("tokens[{i}].applications[{j}]"),
                    "must be 1-64 of [A-Za-z0-9._-]",
                ));
            }
        }
        validate_grants(i, t)?;
    }
    Ok(())
}

/// A token's grants: only on an application token, never empty, each entry
/// a valid name (a workspace registered later may be named already).
fn validate_grants(i: usize, t: &TokenSpec) -> Result<(), ConfigError> {
    for (field, list) in [("workspaces", &t.workspaces), ("providers", &t.providers)] {
        let Some(list) = list else { continue };
        if t.applications.is_none() {
            return Err(invalid(
                format!("tokens[{i}].{field}"),
                "limits an application token only (the owner's token sees everything); add `applications` or remove it",
            ));
        }
        if list.is_empty() {
            return Err(invalid(
                format!("tokens[{i}].{field}"),
                "must not be empty (omit it for every one)",
            ));
        }
        if let Some(j) = list.iter().position(|n| !valid_name(n, 64)) {
            return Err(invalid(
                format!("tokens[{i}].{field}[{j}]"),
                "must be 1-64 of [A-Za-z0-9._-]",
            ));
        }
    }
    Ok(())
}

/// Every provider through [`ProviderSpec::from_config`]: one set of rules for
/// the config and the runner. Commands are resolved at launch, not here.
fn validate_providers(providers: &BTreeMap<String, ProviderConfig>) -> Result<(), ConfigError> {
    for (i, (name, p)) in providers.iter().enumerate() {
        ProviderSpec::from_config(name, p)
            .map_err(|e| invalid(provider_field(name, i, p, &e), format!("is invalid ({e})")))?;
    }
    Ok(())
}

/// How an error names the entry `key` (the `index`th in sorted order) of the
/// map `map`: by key when the key passes the name rule (a token secret is
/// longer than a name may be, so it never does), by position otherwise.
fn map_key(map: &str, key: &str, index: usize) -> String {
    if valid_name(key, 64) {
        format!("{map}.{key}")
    } else {
        format!("{map} (key #{} in sorted order)", index + 1)
    }
}

/// The JSON path a provider error is about, as precise as the error allows
/// (`providers.claude.envAllowlist[2]`) without quoting a key: environment
/// keys are located by the error's position (env keys, then envAllowlist,
/// then the vcsIdentity variables).
fn provider_field(name: &str, index: usize, p: &ProviderConfig, e: &ProviderError) -> String {
    let base = map_key("providers", name, index);
    let env_key = |position: usize| {
        let i = position.saturating_sub(1);
        if i < p.env.len() {
            format!("{base}.env")
        } else if i - p.env.len() < p.env_allowlist.len() {
            format!("{base}.envAllowlist[{}]", i - p.env.len())
        } else {
            format!("{base}.vcsIdentity")
        }
    };
    match e {
        ProviderError::RelativeCommand { .. } => format!("{base}.command"),
        ProviderError::InvalidEnvName { position, .. }
        | ProviderError::DuplicateEnv { position, .. } => env_key(*position),
        ProviderError::InvalidVcsIdentity { field, .. } => format!("{base}.vcsIdentity.{field}"),
        _ => base,
    }
}

fn validate_workspace_ids(config: &Config) -> Result<(), ConfigError> {
    for (i, (id, ws)) in config.workspaces.iter().enumerate() {
        if !valid_workspace_id(id) {
            return Err(invalid(
                map_key("workspaces", id, i),
                format!("id must be {WORKSPACE_ID_RULE}"),
            ));
        }
        if !ws.path.is_absolute() {
            return Err(invalid(
                format!("workspaces.{id}.path"),
                "must be an absolute path",
            ));
        }
    }
    Ok(())
}

/// The machine-dependent step: every workspace is an existing directory,
/// stored canonical, and no two ids name one directory (`workspace_alias`).
pub(super) fn check_on_this_machine(config: &mut Config) -> Result<(), ConfigError> {
    let mut seen: BTreeMap<PathBuf, String> = BTreeMap::new();
    for (id, ws) in config.workspaces.iter_mut() {
        let canonical = std::fs::canonicalize(&ws.path).map_err(|_| {
            invalid(
                format!("workspaces.{id}.path"),
                "is not an existing directory",
            )
        })?;
        if !canonical.is_dir() {
            return Err(invalid(
                format!("workspaces.{id}.path"),
                "is not a directory",
            ));
        }
        if let Some(first) = seen.get(&canonical) {
            return Err(ConfigError::WorkspaceAlias {
                first: first.clone(),
                second: id.clone(),
            });
        }
        seen.insert(canonical.clone(), id.clone());
        ws.path = canonical;
    }
    Ok(())
}

fn validate_limits(config: &Config) -> Result<(), ConfigError> {
    let s = &config.server;
    if !(1024..=64 * 1024 * 1024).contains(&s.max_frame_bytes) {
        return Err(invalid(
            "server.maxFrameBytes",
            "must be between 1024 and 67108864",
        ));
    }
    if !(1..=1_000_000).contains(&s.queue_capacity) {
        return Err(invalid(
            "server.queueCapacity",
            "must be between 1 and 1000000",
        ));
    }
    if !(1..=65_536).contains(&s.max_connections) {
        return Err(invalid(
            "server.maxConnections",
            "must be between 1 and 65536",
        ));
    }
    if s.session_ttl_seconds == 0 {
        return Err(invalid("server.sessionTtlSeconds", "must be at least 1"));
    }
    if !(1..=100_000).contains(&s.max_sessions_per_token) {
        return Err(invalid(
            "server.maxSessionsPerToken",
            "must be between 1 and 100000",
        ));
    }
    if s.shutdown_grace_seconds > 3600 {
        return Err(invalid(
            "server.shutdownGraceSeconds",
            "must be at most 3600",
        ));
    }
    if !(1..=3600).contains(&s.hello_timeout_seconds) {
        return Err(invalid(
            "server.helloTimeoutSeconds",
            "must be between 1 and 3600",
        ));
    }
    if !(1..=30 * 24 * 3600).contains(&s.idle_timeout_seconds) {
        return Err(invalid(
            "server.idleTimeoutSeconds",
            "must be between 1 and 2592000",
        ));
    }
    if !(1..=100_000).contains(&s.max_subscriptions_per_connection) {
        return Err(invalid(
            "server.maxSubscriptionsPerConnection",
            "must be between 1 and 100000",
        ));
    }
    if !(1..=1_000_000).contains(&s.subscriber_buffer) {
        return Err(invalid(
            "server.subscriberBuffer",
            "must be between 1 and 1000000",
        ));
    }
    if !(1..=4096).contains(&s.max_live_agents) {
        return Err(invalid(
            "server.maxLiveAgents",
            "must be between 1 and 4096",
        ));
    }
    if !(1..=4096).contains(&s.max_running_turns) {
        return Err(invalid(
            "server.maxRunningTurns",
            "must be between 1 and 4096",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
