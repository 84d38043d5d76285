//! The server: startup order, the socket listener, managed mode, and the
//! graceful stop.
//!
//! Startup order is fixed, because each step protects the next: the config
//! is validated before anything touches disk; the store takes the instance
//! lock before it opens the database, validates every row and runs recovery;
//! only then are config workspaces registered and the socket bound (a stale
//! socket can only be replaced by the lock holder; in managed mode it is the
//! agents' bridge socket, bound before readiness); only then are clients
//! served.

mod admission;
mod conn;
mod connection;
mod context;
mod controller;
mod dispatch;
mod failure;
mod frames;
mod handlers;
mod listener;
mod notify;
mod reload;
mod session_store;
mod stdio;
mod subscriptions;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::acp::ECHO_PROVIDER;
use crate::auth::{Authority, Clock, SystemClock};
use crate::engine::{Engine, EngineConfig, EngineHandle};
use crate::store::{Store, StoreOptions};
use lapis_protocol::config::{Config, EnvFile};

pub use admission::Serves;
pub(crate) use context::ServerContext;
pub use context::ServerIdentity;
pub(crate) use controller::{Core, ProviderNames};
use listener::SocketFile;
pub(crate) use listener::{InstanceLockHeld, ListenError};
pub use listener::{Listener, bind};
pub(crate) use reload::Reloader;
pub(crate) use session_store::StoreSessions;
pub(crate) use stdio::StartupError;
pub use stdio::report_startup_failure;
#[cfg(test)]
use stdio::serve_stdio;

/// The store is opened holding the instance lock for its whole life.
impl InstanceLockHeld for Store {}

/// How long open connections get to finish after a stop signal.
pub const DRAIN: Duration = Duration::from_secs(5);

/// What `serve` needs from its caller.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Validated configuration.
    pub(crate) config: Config,
    /// Controller home (config's `controllerHome` unless overridden).
    pub(crate) home: PathBuf,
    /// The running binary's identity.
    pub(crate) identity: ServerIdentity,
    /// Managed mode: serve stdin/stdout instead of the socket.
    pub(crate) stdio: bool,
    /// Time source for the store's rows and the sessions' expiry.
    pub(crate) clock: Arc<dyn Clock>,
    /// The executable that serves the built-in `echo` agent (`acp-echo`);
    /// with it an engine runs turns, without it turns stay queued (tests of
    /// the protocol alone).
    pub agent_exe: Option<PathBuf>,
    /// Agent secrets from the env file beside the config (read by the
    /// caller at start); allowlisted names take their values from it first.
    pub secrets: EnvFile,
    /// The config file `config` came from, re-read by a reload; without it a
    /// reload is refused.
    pub config_path: Option<PathBuf>,
}

impl ServeOptions {
    /// The socket this server listens on: the controller socket, or in
    /// managed mode the private one only its agents' MCP bridge connects
    /// to (applications use stdin/stdout).
    fn socket(&self) -> PathBuf {
        let name = if self.stdio {
            lapis_protocol::home::BRIDGE_SOCKET_FILE
        } else {
            lapis_protocol::home::SOCKET_FILE
        };
        self.home.join(name)
    }

    /// Options with the system clock.
    pub fn new(config: Config, home: PathBuf, identity: ServerIdentity, stdio: bool) -> Self {
        ServeOptions {
            config,
            home,
            identity,
            stdio,
            clock: Arc::new(SystemClock),
            agent_exe: None,
            secrets: EnvFile::default(),
            config_path: None,
        }
    }
}

/// Why `serve` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The store refused to open (instance lock, validation, recovery).
    #[error("cannot open the controller store")]
    Store(#[source] crate::domain::StoreError),
    /// A config workspace could not be registered.
    #[error("cannot register workspace `{id}` from the configuration")]
    Workspace {
        /// The workspace id.
        id: String,
        /// The cause (`workspace_alias`, …).
        #[source]
        source: crate::domain::StoreError,
    },
    /// The socket could not be set up.
    #[error(transparent)]
    Listen(#[from] ListenError),
    /// Managed mode did not start.
    #[error(transparent)]
    Startup(#[from] StartupError),
    /// A provider definition failed the runner's validation.
    #[error("invalid provider definition")]
    Provider(#[source] crate::acp::ProviderError),
    /// The configuration does not hold on this machine (a workspace root
    /// that is not a directory).
    #[error("invalid configuration")]
    Config(#[source] lapis_protocol::config::ConfigError),
    /// Signal handlers could not be installed.
    #[error("cannot install signal handlers")]
    Signals(#[source] std::io::Error),
}

impl ServeError {
    /// Stable code for the CLI.
    pub fn code(&self) -> &'static str {
        match self {
            ServeError::Store(e) | ServeError::Workspace { source: e, .. } => e.code(),
            ServeError::Listen(_) => "listen_failed",
            ServeError::Startup(e) => e.code.as_str(),
            ServeError::Provider(_) => "invalid_config",
            ServeError::Config(e) => e.code(),
            ServeError::Signals(_) => "internal",
        }
    }
}

/// A server that is open (store, authority) but not yet serving.
#[derive(Debug)]
pub struct Prepared {
    /// Shared state for connections.
    pub ctx: Arc<ServerContext>,
    /// The store, closed after the last connection.
    pub store: Store,
    /// The engine running turns, stopped before the store closes.
    pub(crate) engine: Option<EngineHandle>,
}

/// Opens the store and builds the context: everything up to listening.
pub async fn prepare(options: &ServeOptions) -> Result<Prepared, ServeError> {
    // Resolved before anything touches the disk, like the rest of the config.
    let roots = options
        .config
        .workspace_roots()
        .map_err(ServeError::Config)?;
    let limits = options.config.server;
    let mut store_options = StoreOptions::new(options.home.clone());
    store_options.queue_capacity = limits.queue_capacity;
    store_options.broadcast_capacity = limits.subscriber_buffer;
    store_options.clock = options.clock.clone();
    // Ready before the journal's history is read; nothing runs before it
    // passed, and a failure stops serve (`store::history`).
    store_options.history = crate::store::HistoryCheck::AfterOpen;
    let store = tokio::task::spawn_blocking(move || Store::open(store_options))
        .await
        .map_err(|e| {
            ServeError::Store(crate::domain::StoreError::Io {
                what: "store open task failed".into(),
                source: std::io::Error::other(e.to_string()),
            })
        })?
        .map_err(ServeError::Store)?;
    let report = store.open_report();
    tracing::info!(
        recovered = report.recovered.len(),
        open_ms = report.elapsed.as_millis() as u64,
        "store open"
    );
    for (id, ws) in &options.config.workspaces {
        store
            .add_workspace(id, &ws.path)
            .await
            .map_err(|source| ServeError::Workspace {
                id: id.clone(),
                source,
            })?;
    }
    let specs = options
        .config
        .provider_specs()
        .map_err(ServeError::Provider)?;
    let mut providers: BTreeSet<String> = specs.keys().cloned().collect();
    providers.insert(ECHO_PROVIDER.to_owned());
    let (engine, handle) = match &options.agent_exe {
        Some(exe) => {
            let mut config = EngineConfig::new(specs).with_builtin_echo(exe.clone());
            config.shutdown_grace = Duration::from_secs(limits.shutdown_grace_seconds);
            config.max_live_agents = limits.max_live_agents;
            config.max_running_turns = limits.max_running_turns;
            config.lookup.secrets = options.secrets.clone();
            config.budgets = options.config.budgets.clone();
            config.evidence = options.config.evidence_modes();
            // Agents reach application tools and memory through this
            // binary's bridge, connecting back to the socket.
            config.bridge = Some((exe.clone(), options.socket()));
            let engine = Engine::new(store.clone(), config);
            let handle = engine.start();
            (Some(Arc::new(engine)), Some(handle))
        }
        None => (None, None),
    };
    // Off every turn's path: its own task on the committed-event broadcast.
    let presence = crate::presence::Presence::default();
    if let Some(notify) = &options.config.notify {
        crate::notifier::spawn(
            store.clone(),
            notify.clone(),
            presence.clone(),
            &options.secrets,
        );
    }
    // Also off the turn path: spans and metrics from the committed events.
    let telemetry = match &options.config.telemetry {
        Some(config) => match crate::telemetry::Telemetry::start(
            config,
            store.clone(),
            engine.as_deref().cloned(),
        ) {
            Ok(t) => Some(t),
            Err(reason) => {
                tracing::warn!(%reason, "telemetry: off, the exporter could not be built");
                None
            }
        },
        None => None,
    };
    // Off the turn path too: bounded batches on the writer, yielding.
    let retention = crate::retention::Retention::of(&options.config);
    retention.spawn(store.clone());
    let reload = Reloader::new(
        options.config_path.clone(),
        options.config.clone(),
        roots,
        engine.as_deref().cloned(),
        options.agent_exe.clone(),
        options.clock.clone(),
    )
    .with_retention(retention.clone());
    let authority = Authority::new(
        options.config.tokens.clone(),
        limits.session_ttl_seconds,
        options.clock.clone(),
        Arc::new(StoreSessions(store.clone())),
    )
    .with_session_bound(limits.max_sessions_per_token);
    let ctx = Arc::new(ServerContext {
        authority: Arc::new(authority),
        identity: options.identity.clone(),
        limits,
        core: Core {
            store: store.clone(),
            providers: ProviderNames::new(providers),
            mcp: engine.as_ref().map(|e| e.mcp().clone()).unwrap_or_default(),
            tools: engine
                .as_ref()
                .map(|e| e.tools().clone())
                .unwrap_or_default(),
            engine,
            presence,
        },
        reload,
        telemetry,
        retention,
    });
    Ok(Prepared {
        ctx,
        store,
        engine: handle,
    })
}

/// Flips `tx` on the first SIGTERM or SIGINT (and tells the service manager
/// the controller is stopping).
pub fn stop_on_signals(tx: watch::Sender<bool>) -> Result<(), ServeError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(ServeError::Signals)?;
    let mut int = signal(SignalKind::interrupt()).map_err(ServeError::Signals)?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!(signal = "SIGTERM", "stopping"),
            _ = int.recv() => tracing::info!(signal = "SIGINT", "stopping"),
        }
        notify::stopping();
        let _ = tx.send(true);
    });
    Ok(())
}

/// An error and its causes on one line (the causes are codes, paths and
/// fixed sentences; none carries a credential).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Reloads the configuration on each SIGHUP (the unit's `ExecReload`)
/// until `stop` flips. The handler is installed by [`sighup`] before the
/// store opens, so an early SIGHUP waits for this loop instead of ending
/// the process (SIGHUP's default action).
fn reload_on_sighup(
    mut hup: tokio::signal::unix::Signal,
    ctx: Arc<ServerContext>,
    mut stop: watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        loop {
            let got = tokio::select! {
                got = hup.recv() => got.is_some(),
                _ = stop.wait_for(|s| *s) => false,
            };
            if !got {
                break;
            }
            tracing::info!(signal = "SIGHUP", "reloading the configuration");
            ctx.reload
                .reload(&ctx.core.store, &ctx.core.providers, &ctx.authority)
                .await;
        }
    });
}

/// Installs the SIGHUP handler.
fn sighup() -> Result<tokio::signal::unix::Signal, ServeError> {
    use tokio::signal::unix::{SignalKind, signal};
    signal(SignalKind::hangup()).map_err(ServeError::Signals)
}

/// Runs the server until a stop signal (or, in managed mode, until stdin
/// ends), then drains connections and closes the store.
pub async fn serve(options: ServeOptions) -> Result<(), ServeError> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let prepared = match stop_on_signals(stop_tx.clone()).and_then(|()| sighup()) {
        Ok(hup) => prepare(&options).await.map(|p| (p, hup)),
        Err(e) => Err(e),
    };
    let (Prepared { ctx, store, engine }, hup) = match prepared {
        Ok(p) => p,
        Err(e) => {
            if options.stdio {
                // Managed mode's parent waits for a frame, not an exit code.
                report_startup_failure(e.code(), &error_chain(&e));
            }
            return Err(e);
        }
    };
    reload_on_sighup(hup, ctx.clone(), stop_rx.clone());
    let history = stop_on_bad_history(&store, stop_tx);
    let path = options.socket();
    let result = if options.stdio {
        match bind(&path, &store) {
            Ok(bridge) => stdio::serve_managed(
                ctx.clone(),
                tokio::io::stdin(),
                tokio::io::stdout(),
                bridge,
                SocketFile(path),
                stop_rx,
            )
            .await
            .map_err(ServeError::from),
            Err(e) => {
                let e = ServeError::from(e);
                report_startup_failure(e.code(), &error_chain(&e));
                Err(e)
            }
        }
    } else {
        match bind(&path, &store) {
            Ok(listener) => {
                let _socket = SocketFile(path.clone());
                tracing::info!(socket = %path.display(), pid = ctx.identity.pid, "listening");
                // Bound and listening: a connect succeeds from here on.
                notify::ready();
                Listener {
                    listener,
                    max_connections: ctx.limits.max_connections,
                    ctx: ctx.clone(),
                    serves: Serves::Everyone,
                    shutdown: stop_rx,
                    drain: DRAIN,
                }
                .run()
                .await;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    };
    drop(ctx);
    if let Some(engine) = engine {
        // Running turns get the engine's bounded grace, then are settled
        // per the state machine (never left mid-flight).
        engine.shutdown().await;
    }
    store.close().await;
    tracing::info!("stopped");
    let bad_history = history.lock().unwrap_or_else(|p| p.into_inner()).take();
    match bad_history {
        Some(e) => Err(ServeError::Store(e)),
        None => result,
    }
}

/// Stops serve when the check of the journal's history fails (see
/// `store::history`), keeping its error for serve's exit.
fn stop_on_bad_history(
    store: &Store,
    stop: watch::Sender<bool>,
) -> Arc<std::sync::Mutex<Option<crate::domain::StoreError>>> {
    let failed = Arc::new(std::sync::Mutex::new(None));
    let (store, keep) = (store.clone(), failed.clone());
    tokio::spawn(async move {
        match store.history_verified().await {
            Ok(_) | Err(crate::domain::StoreError::Closed) => {}
            Err(e) => {
                *keep.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                let _ = stop.send(true);
            }
        }
    });
    failed
}
