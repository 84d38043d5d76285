//! In-process server tests over a real Unix socket, for what needs injected
//! time or a deliberately slow reader; the hardening cases (sessions ending
//! their subscriptions, deadlines, the connection cap) are in `hardening`.

mod hardening;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use super::*;
use crate::auth::ManualClock;
use crate::domain::Actor;
use crate::domain::{ApprovalPolicy, NewThread, Retention};
use lapis_protocol::client::{Client, Credential};
use lapis_protocol::config::{Config, ServerLimits, TokenSpec};
use lapis_protocol::notifications::{JOURNAL_EVENT as EVENT, JOURNAL_LAGGED as LAGGED};

const SECRET: &str = "lapis_00000000000000000000000000000000000000000000000000000000000000d4";

fn config(home: &std::path::Path, limits: ServerLimits) -> Config {
    Config {
        schema: 1,
        instance: "default".into(),
        controller_home: home.to_owned(),
        tokens: vec![TokenSpec {
            name: "owner".into(),
            principal: "owner".into(),
            secret: SECRET.into(),
            scopes: None,
            applications: None,
            workspaces: None,
            providers: None,
        }],
        providers: Default::default(),
        workspaces: Default::default(),
        workspace_roots: None,
        default_provider: None,
        server: limits,
        notify: None,
        telemetry: None,
        budgets: Vec::new(),
        worktrees: None,
        history: None,
    }
}

struct Running {
    prepared: Prepared,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    socket: std::path::PathBuf,
}

async fn start(dir: &std::path::Path, limits: ServerLimits, clock: Arc<ManualClock>) -> Running {
    start_limited(dir, limits, clock, 8).await
}

async fn start_limited(
    dir: &std::path::Path,
    limits: ServerLimits,
    clock: Arc<ManualClock>,
    connections: usize,
) -> Running {
    let home = dir.join("home");
    let build = lapis_release::BuildIdentity {
        version: "0.0.0-test".into(),
        commit: "test".into(),
        date: "test".into(),
        target: "test".into(),
    };
    let mut options = ServeOptions::new(
        config(&home, limits),
        home.clone(),
        ServerIdentity::new(build, None),
        false,
    );
    options.clock = clock;
    let prepared = prepare(&options).await.unwrap();
    let socket = home.join("controller.sock");
    let listener = bind(&socket, &prepared.store).unwrap();
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(
        Listener {
            listener,
            max_connections: connections,
            ctx: prepared.ctx.clone(),
            serves: super::Serves::Everyone,
            shutdown: stop_rx,
            drain: Duration::from_secs(5),
        }
        .run(),
    );
    Running {
        prepared,
        stop,
        task,
        socket,
    }
}

impl Running {
    async fn shutdown(self) {
        let _ = self.stop.send(true);
        self.task.await.unwrap();
        let Prepared { ctx, store, .. } = self.prepared;
        drop(ctx);
        store.close().await;
    }
}

fn token() -> Credential {
    Credential::Token {
        token: SECRET.into(),
        application: "app".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_bearer_fails_closed_with_injected_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_800_000_000));
    let limits = ServerLimits {
        session_ttl_seconds: 3600,
        ..ServerLimits::default()
    };
    let server = start(dir.path(), limits, clock.clone()).await;
    let socket = server.socket.clone();
    let (bearer, session) = tokio::task::spawn_blocking({
        let socket = socket.clone();
        move || {
            let c = Client::open(&socket, token()).unwrap();
            (
                c.bearer().unwrap().to_owned(),
                c.session().unwrap().id.clone(),
            )
        }
    })
    .await
    .unwrap();
    clock.advance(3599);
    let (live, expired, reissued) = tokio::task::spawn_blocking({
        let clock = clock.clone();
        move || {
            let mut c = Client::open(&socket, Credential::Bearer(bearer.clone())).unwrap();
            let live = c.session().unwrap().id.clone();
            clock.advance(1);
            // The open connection loses the session at once …
            let on_open = c.status().unwrap_err();
            // … and the bearer no longer authenticates.
            let mut fresh = Client::connect(&socket).unwrap();
            let expired = fresh.hello(Credential::Bearer(bearer)).unwrap_err();
            assert_eq!(on_open.code(), "unauthenticated");
            // The token issues a new session.
            let again = Client::open(&socket, token()).unwrap();
            (live, expired, again.session().unwrap().id.clone())
        }
    })
    .await
    .unwrap();
    assert_eq!(live, session);
    assert_eq!(expired.code(), "unauthenticated");
    assert!(expired.to_string().contains("expired"), "{expired}");
    assert_ne!(reissued, session);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_falls_behind_gets_a_lagged_notice() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let limits = ServerLimits {
        subscriber_buffer: 4,
        ..ServerLimits::default()
    };
    let server = start(
        dir.path(),
        limits,
        Arc::new(ManualClock::new(1_800_000_000)),
    )
    .await;
    let store = server.prepared.store.clone();
    store.add_workspace("proj", &project).await.unwrap();
    let socket = server.socket.clone();
    // Subscribe owner-wide, then stop reading.
    let mut client = tokio::task::spawn_blocking(move || {
        let mut c = Client::open(&socket, token()).unwrap();
        c.journal_subscribe(None, None).unwrap();
        c
    })
    .await
    .unwrap();
    // Far more events than the socket, the outbox and the buffer can hold.
    let actor = Actor::new("owner", "app");
    for _ in 0..1500 {
        store
            .create_thread(
                &actor,
                NewThread {
                    command_id: None,
                    workspace_id: "proj".into(),
                    provider: "echo".into(),
                    approval: ApprovalPolicy::Ask,
                    restricted: false,
                    retention: Retention::Full,
                    mcp_servers: Vec::new(),
                    ports: Default::default(),
                    thread_id: None,
                    permission_timeout_seconds: None,
                    budget: None,
                },
            )
            .await
            .unwrap();
    }
    let notices: Vec<(String, Value)> = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        while let Some(n) = client
            .next_notification(Some(Duration::from_secs(5)))
            .unwrap()
        {
            let lagged = n.method == LAGGED;
            out.push((n.method, n.params));
            if lagged {
                break;
            }
        }
        out
    })
    .await
    .unwrap();
    let (last_method, last) = notices.last().expect("notifications");
    assert_eq!(
        last_method, LAGGED,
        "the stream must end with an explicit lagged notice"
    );
    let events: Vec<u64> = notices
        .iter()
        .filter(|(m, _)| m == EVENT)
        .map(|(_, p)| p["event"]["seq"].as_u64().unwrap())
        .collect();
    assert!(events.len() < 1500, "the subscriber did fall behind");
    // What was delivered is a gap-free prefix, and the notice says where to
    // resume: nothing is dropped silently.
    for (i, seq) in events.iter().enumerate() {
        assert_eq!(*seq, events[0] + i as u64);
    }
    assert_eq!(
        last["resumeAfter"],
        json!(events.last().copied().unwrap_or(0))
    );
    assert!(last["missed"].as_u64().unwrap() > 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_mode_without_a_startup_line_fails_with_a_frame() {
    use tokio::io::AsyncReadExt;
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        ServerLimits::default(),
        Arc::new(ManualClock::new(1_800_000_000)),
    )
    .await;
    // The parent keeps its end of stdin open and never writes.
    let (_parent_stdin, child_stdin) = tokio::io::duplex(1024);
    let (child_stdout, mut parent_stdout) = tokio::io::duplex(4096);
    let (_stop, stop_rx) = watch::channel(false);
    let err = serve_stdio(
        server.prepared.ctx.clone(),
        child_stdin,
        child_stdout,
        stop_rx,
        Duration::from_millis(50),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code, lapis_protocol::ErrorCode::InvalidRequest);
    let mut out = String::new();
    parent_stdout.read_to_string(&mut out).await.unwrap();
    let frame: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(frame["method"], lapis_protocol::STARTUP_FAILED);
    assert_eq!(frame["params"]["code"], "invalid_request");
    assert_eq!(out.lines().count(), 1, "exactly one frame: {out}");
    server.shutdown().await;
}
