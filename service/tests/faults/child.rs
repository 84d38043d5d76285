//! The child side of the fault tests: the workloads a re-executed test
//! binary runs until it is killed, printing an `ack` line after each
//! acknowledged write.

use lapis_protocol::Payload;
use std::io::Write;
use std::path::{Path, PathBuf};

use lapis_service::{
    Actor, ApprovalPolicy, EventKind, NewAuthSession, NewThread, ResolveAs, Retention, Store,
    StoreOptions, SubmitTurn, ThreadPatch, TurnEnd, TurnFilter, TurnState,
};
use serde_json::json;

fn actor() -> Actor {
    Actor::new("owner", "faults")
}

fn ack(what: &str, id: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ack {what} {id}").unwrap();
    out.flush().unwrap();
}

async fn new_thread(store: &Store, root: &Path, ws: &str) -> String {
    let p = root.join(ws);
    std::fs::create_dir_all(&p).unwrap();
    store.add_workspace(ws, &p).await.unwrap();
    let input = NewThread {
        command_id: Some(format!("thread-{ws}")),
        workspace_id: ws.into(),
        provider: "echo".into(),
        approval: ApprovalPolicy::Ask,
        restricted: false,
        retention: Retention::Full,
        mcp_servers: Vec::new(),
        ports: Default::default(),
        thread_id: None,
        permission_timeout_seconds: None,
        budget: None,
    };
    store.create_thread(&actor(), input).await.unwrap().value.id
}

/// The child's writer loop for one mode; runs until killed.
pub(crate) async fn child(mode: &str, root: PathBuf) {
    let mut opts = StoreOptions::new(root.join("home"));
    opts.queue_capacity = 1_000_000;
    let store = Store::open(opts).unwrap();
    ack("open", "-");
    let threads: Vec<String> = {
        let mut v = vec![];
        for ws in ["w0", "w1", "w2", "w3"] {
            v.push(new_thread(&store, &root, ws).await);
        }
        v
    };
    // Like an owner after a crash: resolve what the last kill fenced.
    let fenced = store
        .list_turns(TurnFilter {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.state.is_fenced());
    for t in fenced {
        store
            .resolve_turn(&actor(), &t.id, ResolveAs::Failed, true, None)
            .await
            .map(|r| r.value)
            .unwrap();
    }
    let pid = std::process::id();
    if mode == "threads" {
        threads_and_sessions(&store, pid).await;
    }
    if mode == "cancel" {
        cancel_and_resolve(&store, &threads, pid).await;
    }
    let mut n = 0u64;
    // A dispatched turn whose completion is deferred to the next iteration,
    // so kills also find turns sitting past the dispatch boundary.
    let mut deferred: Option<String> = None;
    loop {
        if let Some(id) = deferred.take() {
            store
                .finish_turn(&id, TurnEnd::Completed("end_turn".into()))
                .await
                .unwrap();
            ack("completed", &id);
        }
        n += 1;
        let th = &threads[(n % 4) as usize];
        let input = SubmitTurn {
            command_id: format!("c{pid}-{n}"),
            thread_id: th.clone(),
            prompt: "p".into(),
            continues: None,
            max_turn_seconds: None,
        };
        let turn = store.submit_turn(&actor(), input).await.unwrap().value;
        ack("accepted", &turn.id);
        if mode == "submit" {
            continue;
        }
        let Some(claim) = store.try_claim().await.unwrap() else {
            continue;
        };
        let id = claim.turn.id.clone();
        ack("claimed", &id);
        store.mark_dispatched(&id, binding()).await.unwrap();
        ack("dispatched", &id);
        if n.is_multiple_of(3) {
            deferred = Some(id);
            continue;
        }
        store.mark_running(&id).await.unwrap();
        let mut last = None;
        let chunks = if mode == "journal" { 200 } else { 3 };
        for i in 0..chunks {
            last = Some(store.append_activity(
                &id,
                Payload::from_value(EventKind::MessageChunk, json!({ "i": i })),
            ));
        }
        let e = last.unwrap().await.unwrap();
        ack("appended", &e.seq.to_string());
        store
            .finish_turn(&id, TurnEnd::Completed("end_turn".into()))
            .await
            .unwrap();
        ack("completed", &id);
    }
}

/// Sessions the child's token keeps (`issue_session`'s bound).
pub(crate) const SESSIONS_KEPT: usize = 3;

/// The child's loop for thread creation, configuration and session writes.
async fn threads_and_sessions(store: &Store, pid: u32) -> ! {
    let mut n = 0u64;
    loop {
        n += 1;
        let input = NewThread {
            command_id: Some(format!("t{pid}-{n}")),
            workspace_id: "w0".into(),
            provider: "echo".into(),
            approval: ApprovalPolicy::Ask,
            restricted: false,
            retention: Retention::Full,
            mcp_servers: Vec::new(),
            ports: Default::default(),
            thread_id: None,
            permission_timeout_seconds: None,
            budget: None,
        };
        let th = store.create_thread(&actor(), input).await.unwrap().value;
        ack("thread", &th.id);
        let patch = ThreadPatch {
            restricted: Some(true),
            ..Default::default()
        };
        let th = store
            .configure_thread(&actor(), &th.id, th.version, patch, None)
            .await
            .map(|r| r.value)
            .unwrap();
        ack("configured", &format!("{}:{}", th.id, th.version));
        let session = NewAuthSession {
            credential: format!("owner:faults-{n}"),
            principal: "owner".into(),
            application: format!("faults-{n}"),
            scopes: vec![lapis_protocol::Scope::ThreadsRead],
            bearer_sha256: format!("{:064x}", u128::from(pid) << 64 | u128::from(n)),
            expires_at: Some(i64::MAX),
        };
        // A fresh application each time: the token's bound evicts one
        // session per issue once it is full, in the issue's transaction.
        let issued = store.issue_session(session, SESSIONS_KEPT).await.unwrap();
        ack("session", &issued.session.bearer_sha256);
    }
}

/// The child's loop for cancel requests, interrupted outcomes and resolutions.
async fn cancel_and_resolve(store: &Store, threads: &[String], pid: u32) -> ! {
    let mut n = 0u64;
    loop {
        n += 1;
        let input = SubmitTurn {
            command_id: format!("x{pid}-{n}"),
            thread_id: threads[(n % 4) as usize].clone(),
            prompt: "p".into(),
            continues: None,
            max_turn_seconds: None,
        };
        store.submit_turn(&actor(), input).await.unwrap();
        let claim = store.try_claim().await.unwrap().expect("a free workspace");
        let id = claim.turn.id;
        store.mark_dispatched(&id, binding()).await.unwrap();
        ack("c_dispatched", &id);
        store.request_cancel(&actor(), &id).await.unwrap();
        ack("cancel_requested", &id);
        let out = store
            .finish_turn(
                &id,
                TurnEnd::Unknown(lapis_protocol::OutcomeCode::CancelDeadline),
            )
            .await
            .unwrap();
        assert_eq!(out.turn.state, TurnState::Interrupted);
        ack("interrupted", &id);
        store
            .resolve_turn(&actor(), &id, ResolveAs::Cancelled, true, None)
            .await
            .map(|r| r.value)
            .unwrap();
        ack("resolved", &id);
    }
}

/// A session binding as the engine passes it at the dispatch boundary.
pub(crate) fn binding() -> lapis_protocol::SessionBinding {
    lapis_protocol::SessionBinding {
        session_id: "sess-1".into(),
        fingerprint: "0".repeat(64),
        thread_version: 1,
    }
}
