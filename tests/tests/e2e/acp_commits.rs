//! Durable commits per turn for a lone workspace: at most three (the
//! submit; the claim with the dispatch boundary; the `running` mark with the
//! turn's output and outcome), and the dispatch boundary is still committed
//! before the agent sees the prompt.

use std::collections::BTreeMap;
use std::time::Duration;

use lapis_e2e::TestContext;
use lapis_service::engine::{Engine, EngineConfig};
use lapis_service::{
    ApprovalPolicy, EventKind, NewThread, Retention, Store, StoreOptions, SubmitTurn, TurnState,
};

use crate::acp::{arg, fixture, test_limits};
use crate::acp_engine::owner;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_workspace_pays_at_most_three_commits_per_cold_turn_and_two_per_warm_turn() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = StoreOptions::new(dir.path().join("home"));
    // A long deferred linger makes the count independent of scheduling: a
    // batch that holds the claim (or the running mark) commits only with the
    // durable request that follows it, never alone because a slow machine
    // let the linger run out.
    opts.deferred_linger = Duration::from_secs(60);
    // Likewise for a batch of appends alone: an observation that is not the
    // agent's progress (it does not mark the turn running) can arrive after
    // the boundary's commit and before the first chunk; on a loaded machine
    // it committed alone (a 4th commit seen once in a full CI run). With the
    // linger it rides the turn's next write, as it does whenever the writer
    // is busy: the count then measures the design, not the scheduler.
    opts.group_commit_linger = Duration::from_secs(60);
    let store = Store::open(opts).unwrap();
    let ledger = dir.path().join("ledger");
    let mut spec = fixture(&["--chunks", "3", "--ledger", &arg(&ledger)]);
    spec.name = "fx".into();
    let mut config = EngineConfig::new(BTreeMap::from([("fx".to_string(), spec)]))
        .with_builtin_echo(TestContext::bin());
    config.limits = test_limits();
    let engine = Engine::new(store.clone(), config);
    let handle = engine.start();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    store.add_workspace("ws", &ws).await.unwrap();
    let mut per_turn = Vec::new();
    for provider in ["echo", "fx"] {
        let thread = store
            .create_thread(&owner(), plain_thread("ws", provider))
            .await
            .unwrap()
            .value;
        // The first turn starts the agent (cold), the others reuse it.
        for i in 0..3 {
            let mut events = store.subscribe();
            let before = store.commit_count();
            let turn = run_to_completed(
                &store,
                &mut events,
                &thread.id,
                &format!("{provider}-{i}"),
                &format!("prompt {i}"),
            )
            .await;
            per_turn.push((provider, i, store.commit_count() - before));
            let t = store.get_turn(&turn).await.unwrap();
            assert_eq!(t.state, TurnState::Completed);
        }
    }
    assert!(
        per_turn.iter().all(|(_, _, n)| *n <= 3),
        "commits per turn: {per_turn:?}"
    );
    // A warm turn's claim is made in its submit's batch, which waits for
    // the dispatch boundary: submit + claim + boundary, then running +
    // output + outcome.
    assert!(
        per_turn.iter().all(|(_, i, n)| *i == 0 || *n <= 2),
        "commits per warm turn: {per_turn:?}"
    );
    // The fixture received each prompt exactly once, after its boundary.
    let lines = std::fs::read_to_string(&ledger).unwrap();
    assert_eq!(lines.lines().count(), 3, "{lines}");
    handle.shutdown().await;
}

/// Turns queued back to back on one thread all run on its one agent: the
/// agent is back in the pool before the outcome's commit releases the
/// workspace, so the next turn, claimed at once, never starts another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_turns_of_a_thread_reuse_its_agent() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("home"))).unwrap();
    let mut config = EngineConfig::new(BTreeMap::new()).with_builtin_echo(TestContext::bin());
    config.limits = test_limits();
    let engine = Engine::new(store.clone(), config);
    let handle = engine.start();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    store.add_workspace("ws", &ws).await.unwrap();
    let thread = store
        .create_thread(
            &owner(),
            NewThread {
                command_id: None,
                workspace_id: "ws".into(),
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
        .unwrap()
        .value;
    let mut events = store.subscribe();
    let mut turns = Vec::new();
    for i in 0..12 {
        let turn = store
            .submit_turn(
                &owner(),
                SubmitTurn {
                    command_id: format!("q-{i}"),
                    thread_id: thread.id.clone(),
                    prompt: format!("prompt {i}"),
                    continues: None,
                    max_turn_seconds: None,
                },
            )
            .await
            .unwrap()
            .value;
        turns.push(turn.id);
    }
    let mut started = 0;
    let mut completed = 0;
    while completed < turns.len() {
        let e = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .expect("turns never completed")
            .unwrap();
        if matches!(
            lapis_e2e::journal::observation(&e),
            Some(lapis_protocol::Observation::SessionStarted { .. })
        ) {
            started += 1;
        }
        if e.kind == EventKind::TurnState {
            match lapis_e2e::journal::moved_to(&e) {
                Some(TurnState::Completed) => completed += 1,
                Some(s) if !s.is_terminal() && !s.is_fenced() => {}
                other => panic!("a turn ended {other:?}"),
            }
        }
    }
    assert_eq!(started, 1, "agent sessions started for one thread's turns");
    let s = engine.status();
    assert_eq!((s.agents.live, s.agents.idle), (1, 1), "{s:?}");
    handle.shutdown().await;
}

/// An `ask`, unrestricted, fully retained thread of `provider` in
/// `workspace`, with nothing else bound.
pub(crate) fn plain_thread(workspace: &str, provider: &str) -> NewThread {
    NewThread {
        command_id: None,
        workspace_id: workspace.into(),
        provider: provider.into(),
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

/// Submits `prompt` on `thread` and waits on `events` (subscribed before)
/// for the turn's durable `completed`; a turn ending otherwise panics.
pub(crate) async fn run_to_completed(
    store: &Store,
    events: &mut tokio::sync::broadcast::Receiver<std::sync::Arc<lapis_service::JournalEvent>>,
    thread: &str,
    command_id: &str,
    prompt: &str,
) -> String {
    let turn = store
        .submit_turn(
            &owner(),
            SubmitTurn {
                command_id: command_id.to_owned(),
                thread_id: thread.to_owned(),
                prompt: prompt.to_owned(),
                continues: None,
                max_turn_seconds: None,
            },
        )
        .await
        .unwrap()
        .value;
    // Completion is published only after its commit.
    loop {
        let e = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .expect("turn never completed")
            .unwrap();
        if e.kind == EventKind::TurnState && e.turn_id.as_deref() == Some(turn.id.as_str()) {
            match lapis_e2e::journal::moved_to(&e) {
                Some(TurnState::Completed) => return turn.id,
                Some(s) if s.is_terminal() || s.is_fenced() => {
                    panic!("turn {command_id} ended {s:?}")
                }
                _ => {}
            }
        }
    }
}
