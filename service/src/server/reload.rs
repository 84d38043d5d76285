//! Reloading the configuration while serving: on SIGHUP (the unit's
//! `ExecReload`) and on the `config.reload` method.
//!
//! What a reload changes: the providers, for turns claimed from then on (a
//! running turn keeps the definition it was claimed with), the workspaces
//! (config workspaces not yet registered are registered) and the workspace
//! roots `workspaces.add` checks against (a workspace already registered
//! under a root that is gone stays registered), and the tokens (a token
//! added works at once; the sessions of a removed one are revoked at once,
//! `Authority::replace_tokens`), and the history retention policy (a pass
//! runs under a changed one at once, `crate::retention`). What it
//! does not: `server` limits and the controller home take a restart;
//! a reload that sees them changed applies the rest and names them in
//! `restartNeeded`. A workspace removed from the config stays registered,
//! like one added with `workspaces add`.
//!
//! What must stay true: a new config that does not load, validate, or whose
//! workspaces cannot be registered changes nothing — every check runs before
//! anything is applied — and the refusal is logged and kept for `status`.
//! Reloads run one at a time.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::auth::{Authority, Clock};
use crate::engine::{Engine, EngineConfig};
use crate::store::Store;
use lapis_protocol::config::{Config, EnvFile, WorkspaceRoots};
use lapis_protocol::params::ReloadResult;

use super::ECHO_PROVIDER;
use super::controller::ProviderNames;
use super::notify;

/// Runs reloads for one server.
#[derive(Debug)]
pub(crate) struct Reloader {
    /// Where the config comes from and what the reload updates; `None` when
    /// the server was started without a config file (tests), which refuses.
    source: Option<Source>,
    /// Time of each outcome.
    clock: Arc<dyn Clock>,
    /// Serialises reloads.
    running: tokio::sync::Mutex<()>,
    /// The last outcome, for `status`.
    last: Mutex<Option<ReloadResult>>,
    /// The workspace roots in effect (resolved at start and each applied
    /// reload, so `workspaces.add` only compares paths).
    roots: Mutex<Arc<WorkspaceRoots>>,
    /// The history retention policy an applied reload replaces.
    retention: Option<crate::retention::Retention>,
}

#[derive(Debug)]
struct Source {
    /// The config file, re-read on each reload.
    path: PathBuf,
    /// The config in effect (for the `restartNeeded` comparison).
    current: Mutex<Config>,
    /// The engine whose providers are replaced (none without an engine).
    engine: Option<Engine>,
    /// The executable serving the built-in `echo` provider.
    agent_exe: Option<PathBuf>,
}

/// A refusal: code and message (field names only).
struct Refused(&'static str, String);

impl Reloader {
    /// A reloader for the config at `path` (in effect: `current`, whose
    /// workspace roots resolved to `roots`).
    pub(crate) fn new(
        path: Option<PathBuf>,
        current: Config,
        roots: WorkspaceRoots,
        engine: Option<Engine>,
        agent_exe: Option<PathBuf>,
        clock: Arc<dyn Clock>,
    ) -> Reloader {
        Reloader {
            roots: Mutex::new(Arc::new(roots)),
            source: path.map(|path| Source {
                path,
                current: Mutex::new(current),
                engine,
                agent_exe,
            }),
            clock,
            running: tokio::sync::Mutex::new(()),
            last: Mutex::new(None),
            retention: None,
        }
    }

    /// Applied reloads replace `retention`'s policy.
    pub(crate) fn with_retention(mut self, retention: crate::retention::Retention) -> Reloader {
        self.retention = Some(retention);
        self
    }

    /// Whether the configuration in effect declares workspace `id` (such a
    /// workspace is registered again by every start and reload, so it is
    /// not removed at run time).
    pub(crate) fn declares_workspace(&self, id: &str) -> bool {
        self.source.as_ref().is_some_and(|s| {
            s.current
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .workspaces
                .contains_key(id)
        })
    }

    /// The workspaces the configuration in effect declares (none
    /// without a config file).
    pub(crate) fn workspace_ids(&self) -> Vec<String> {
        self.source
            .as_ref()
            .map(|s| {
                s.current
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .workspaces
                    .keys()
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The `worktrees` section in effect (empty without a config file);
    /// a reload applies it to the next worktree at once.
    pub(crate) fn worktrees(&self) -> lapis_protocol::config::WorktreesConfig {
        self.source
            .as_ref()
            .and_then(|s| {
                s.current
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .worktrees
                    .clone()
            })
            .unwrap_or_default()
    }

    /// The `defaultProvider` in effect (none without a config file); a
    /// reload changes it at once.
    pub(crate) fn default_provider(&self) -> Option<String> {
        self.source.as_ref().and_then(|s| {
            s.current
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .default_provider
                .clone()
        })
    }

    /// The workspace roots in effect.
    pub(crate) fn roots(&self) -> Arc<WorkspaceRoots> {
        self.roots.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The last reload's outcome, if any ran.
    pub(crate) fn last(&self) -> Option<ReloadResult> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Re-reads the config and applies what a reload can change, or refuses
    /// and keeps everything as it was. Tells the service manager
    /// (`RELOADING=1` … `READY=1`) and logs the outcome.
    pub(crate) async fn reload(
        &self,
        store: &Store,
        names: &ProviderNames,
        authority: &Authority,
    ) -> ReloadResult {
        let _one = self.running.lock().await;
        notify::reloading();
        let outcome = match self.try_reload(store, names, authority).await {
            Ok((added, restart_needed)) => {
                tracing::info!(
                    providers = names.list().len(),
                    workspaces_added = added.len(),
                    restart_needed = %restart_needed.join(","),
                    "configuration reloaded"
                );
                ReloadResult {
                    at: self.clock.now_ms(),
                    applied: true,
                    code: None,
                    error: None,
                    providers: names.list(),
                    workspaces_added: added,
                    restart_needed,
                }
            }
            Err(Refused(code, error)) => {
                tracing::warn!(code, error = %error, "configuration reload refused; the previous configuration stays in effect");
                ReloadResult {
                    at: self.clock.now_ms(),
                    applied: false,
                    code: Some(code.to_owned()),
                    error: Some(error),
                    providers: names.list(),
                    workspaces_added: Vec::new(),
                    restart_needed: Vec::new(),
                }
            }
        };
        notify::reloaded(if outcome.applied {
            "configuration reloaded"
        } else {
            "configuration reload refused; previous configuration kept"
        });
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome.clone());
        outcome
    }

    async fn try_reload(
        &self,
        store: &Store,
        names: &ProviderNames,
        authority: &Authority,
    ) -> Result<(Vec<String>, Vec<String>), Refused> {
        let Some(source) = &self.source else {
            return Err(Refused(
                "reload_unavailable",
                "this server was started without a config file to re-read".to_owned(),
            ));
        };
        let path = source.path.clone();
        let config = tokio::task::spawn_blocking(move || Config::load(&path))
            .await
            .map_err(|e| Refused("internal", e.to_string()))?
            .map_err(|e| Refused(e.code(), e.to_string()))?;
        // The env file is re-read with the config; a bad one refuses the
        // reload before anything changes.
        let env_path = EnvFile::path_for(&source.path);
        let secrets = tokio::task::spawn_blocking(move || EnvFile::load(&env_path))
            .await
            .map_err(|e| Refused("internal", e.to_string()))?
            .map_err(|e| Refused("invalid_env_file", e.to_string()))?;
        // Every provider must become a spec before anything changes.
        let specs = config
            .provider_specs()
            .map_err(|e| Refused("invalid_config", e.to_string()))?;
        let roots = config
            .workspace_roots()
            .map_err(|e| Refused(e.code(), e.to_string()))?;
        let new_workspaces = workspaces_to_add(store, &config).await?;

        let mut added = Vec::new();
        for (id, path) in new_workspaces {
            store
                .add_workspace(&id, &path)
                .await
                .map_err(|e| Refused(e.code(), format!("workspaces.{id}: {e}")))?;
            added.push(id);
        }
        let mut provider_names: BTreeSet<String> = specs.keys().cloned().collect();
        provider_names.insert(ECHO_PROVIDER.to_owned());
        if let Some(engine) = &source.engine {
            let mut engine_config = EngineConfig::new(specs);
            if let Some(exe) = &source.agent_exe {
                engine_config = engine_config.with_builtin_echo(exe.clone());
            }
            engine.replace_providers(engine_config.providers);
            engine.replace_secrets(secrets);
            engine.replace_budgets(config.budgets.clone());
            engine.replace_evidence(config.evidence_modes());
        }
        names.replace(provider_names);
        authority.replace_tokens(config.tokens.clone());
        if let Some(retention) = &self.retention {
            retention.replace(&config);
        }
        *self.roots.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(roots);
        let mut current = source.current.lock().unwrap_or_else(|p| p.into_inner());
        let restart_needed = restart_needed(&current, &config);
        *current = config;
        Ok((added, restart_needed))
    }
}

/// Config workspaces not registered yet. Refuses an id registered for
/// another directory and a path that is not a directory.
async fn workspaces_to_add(
    store: &Store,
    config: &Config,
) -> Result<Vec<(String, PathBuf)>, Refused> {
    let registered = store
        .list_workspaces()
        .await
        .map_err(|e| Refused(e.code(), e.to_string()))?;
    let mut out = Vec::new();
    for (id, ws) in &config.workspaces {
        let canonical = std::fs::canonicalize(&ws.path).map_err(|_| {
            Refused(
                "invalid_config",
                format!("workspaces.{id}.path does not exist"),
            )
        })?;
        match registered.iter().find(|w| &w.id == id) {
            Some(w) if std::path::Path::new(&w.path) == canonical => {}
            Some(_) => {
                return Err(Refused(
                    "conflict",
                    format!("workspaces.{id} is registered for another directory"),
                ));
            }
            None => {
                if let Some(other) = registered
                    .iter()
                    .find(|w| std::path::Path::new(&w.path) == canonical)
                {
                    return Err(Refused(
                        "workspace_alias",
                        format!(
                            "workspaces.{id}.path is already registered as workspace `{}`",
                            other.id
                        ),
                    ));
                }
                out.push((id.clone(), ws.path.clone()));
            }
        }
    }
    Ok(out)
}

/// Parts of the config a reload does not apply that differ.
fn restart_needed(old: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    if old.server != new.server {
        out.push("server".to_owned());
    }
    if old.controller_home != new.controller_home {
        out.push("controllerHome".to_owned());
    }
    out
}
