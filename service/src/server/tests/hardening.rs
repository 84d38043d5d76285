//! Issue 15 regressions over a real socket: a revoked or expired session's
//! silent subscriber gets no more events, only an explicit notice; deadlines
//! and the connection cap answer with explicit frames instead of hanging.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use super::*;
use lapis_protocol::notifications::JOURNAL_ENDED as ENDED;

fn app(name: &str) -> Credential {
    Credential::Token {
        token: SECRET.into(),
        application: name.into(),
    }
}

fn new_thread(actor: &Actor) -> NewThread {
    let _ = actor;
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
    }
}

/// Every notification until the stream is quiet for `quiet` (or closes).
fn drain(client: &mut Client, quiet: Duration) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    while let Ok(Some(n)) = client.next_notification(Some(quiet)) {
        out.push((n.method, n.params));
    }
    out
}

/// One frame from a raw connection (the server's explicit last word).
fn read_frame(stream: &UnixStream) -> Value {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

/// Subscribes owner-wide as application `app2`, ends the session with
/// `end`, then commits events that subscription would carry: the silent
/// subscriber must get exactly one `journal.ended` naming `reason`.
async fn silent_subscriber_after(
    end: impl FnOnce(std::path::PathBuf, Arc<ManualClock>, String) + Send + 'static,
    reason: &'static str,
) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let clock = Arc::new(ManualClock::new(1_800_000_000));
    let limits = ServerLimits {
        session_ttl_seconds: 3600,
        ..ServerLimits::default()
    };
    let server = start(dir.path(), limits, clock.clone()).await;
    let store = server.prepared.store.clone();
    store.add_workspace("proj", &project).await.unwrap();
    let socket = server.socket.clone();
    let (mut subscriber, session) = tokio::task::spawn_blocking(move || {
        let mut c = Client::open(&socket, app("app2")).unwrap();
        c.journal_subscribe(None, None).unwrap();
        let id = c.session().unwrap().id.clone();
        (c, id)
    })
    .await
    .unwrap();
    let actor = Actor::new("owner", "app2");
    // Live before the end: the subscription does carry these events.
    store
        .create_thread(&actor, new_thread(&actor))
        .await
        .unwrap();
    let before = tokio::task::spawn_blocking(move || {
        let n = subscriber.next_notification(Some(Duration::from_secs(10)));
        (
            subscriber,
            n.unwrap().expect("an event while the session is live"),
        )
    })
    .await
    .unwrap();
    let mut subscriber = before.0;
    assert_eq!(before.1.method, EVENT);
    let socket = server.socket.clone();
    tokio::task::spawn_blocking(move || end(socket, clock, session))
        .await
        .unwrap();
    for _ in 0..5 {
        store
            .create_thread(&actor, new_thread(&actor))
            .await
            .unwrap();
    }
    let notices =
        tokio::task::spawn_blocking(move || drain(&mut subscriber, Duration::from_secs(2)))
            .await
            .unwrap();
    let events = notices.iter().filter(|(m, _)| m == EVENT).count();
    assert_eq!(events, 0, "frames to an ended session: {notices:?}");
    assert_eq!(notices.len(), 1, "{notices:?}");
    let (method, params) = &notices[0];
    assert_eq!(method, ENDED);
    assert_eq!(params["error"]["data"]["code"], "unauthenticated");
    assert!(
        params["error"]["message"]
            .as_str()
            .unwrap()
            .contains(reason),
        "{params}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_sessions_silent_subscriber_gets_only_an_ended_notice() {
    silent_subscriber_after(
        |socket, _, session| {
            // Another connection of the same principal revokes it.
            let mut other = Client::open(&socket, app("app1")).unwrap();
            other.sessions_revoke(Some(&session)).unwrap();
        },
        "revoked",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_sessions_silent_subscriber_gets_only_an_ended_notice() {
    silent_subscriber_after(|_, clock, _| clock.advance(3600), "expired").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_cap_sheds_unauthenticated_connections_then_refuses_with_a_frame() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_limited(
        dir.path(),
        ServerLimits::default(),
        Arc::new(ManualClock::new(1_800_000_000)),
        2,
    )
    .await;
    let socket = server.socket.clone();
    tokio::task::spawn_blocking(move || {
        let _first = Client::open(&socket, token()).unwrap();
        // An idle unauthenticated connection holds the second slot …
        let idle = UnixStream::connect(&socket).unwrap();
        // … and once it has had its grace to say hello, it gives way to an
        // authenticating client, and is told so.
        std::thread::sleep(crate::server::admission::SHED_GRACE + Duration::from_millis(200));
        let second = Client::open(&socket, token()).unwrap();
        let shed = read_frame(&idle);
        assert_eq!(shed["error"]["data"]["code"], "limit_reached", "{shed}");
        assert_eq!(shed["error"]["data"]["limit"], "maxConnections");
        // Every slot authenticated: a newcomer is refused, not left hanging.
        let third = UnixStream::connect(&socket).unwrap();
        let refused = read_frame(&third);
        assert_eq!(
            refused["error"]["data"]["code"], "limit_reached",
            "{refused}"
        );
        assert!(refused["id"].is_null());
        drop(second);
    })
    .await
    .unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_without_hello_is_closed_at_the_deadline_with_a_frame() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ServerLimits {
        hello_timeout_seconds: 1,
        idle_timeout_seconds: 1,
        ..ServerLimits::default()
    };
    let server = start(
        dir.path(),
        limits,
        Arc::new(ManualClock::new(1_800_000_000)),
    )
    .await;
    let socket = server.socket.clone();
    tokio::task::spawn_blocking(move || {
        let mut silent = UnixStream::connect(&socket).unwrap();
        // Frames that are not a successful hello do not extend the deadline.
        silent
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\"}\n")
            .unwrap();
        let reader = BufReader::new(silent.try_clone().unwrap());
        let frames: Vec<Value> = reader
            .lines()
            .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
            .collect();
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert_eq!(frames[0]["error"]["data"]["code"], "unauthenticated");
        assert_eq!(frames[1]["error"]["data"]["limit"], "helloTimeoutSeconds");
        // An authenticated connection without subscriptions meets the idle
        // deadline: the next call finds the connection closed.
        let mut idle = Client::open(&socket, token()).unwrap();
        let last = idle.next_notification(Some(Duration::from_secs(30)));
        assert!(last.is_err(), "{last:?}");
    })
    .await
    .unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_per_connection_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ServerLimits {
        max_subscriptions_per_connection: 2,
        ..ServerLimits::default()
    };
    let server = start(
        dir.path(),
        limits,
        Arc::new(ManualClock::new(1_800_000_000)),
    )
    .await;
    let socket = server.socket.clone();
    tokio::task::spawn_blocking(move || {
        let mut c = Client::open(&socket, token()).unwrap();
        let a = c.journal_subscribe(None, None).unwrap();
        c.journal_subscribe(None, None).unwrap();
        let err = c.journal_subscribe(None, None).unwrap_err();
        assert_eq!(err.code(), "limit_reached");
        // Unsubscribing frees a place.
        c.call_value("journal.unsubscribe", json!({ "subscription": a }))
            .unwrap();
        c.journal_subscribe(None, None).unwrap();
    })
    .await
    .unwrap();
    server.shutdown().await;
}
