//! Property test: random interleavings of submit / claim / dispatch / complete
//! / lose / cancel / crash (drop + reopen) / resolve never dispatch a turn
//! twice and never lose an accepted one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use lapis_service::{
    Actor, ApprovalPolicy, NewThread, ResolveAs, Retention, Store, StoreOptions, SubmitTurn,
    TurnEnd, TurnFilter, TurnState,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Submit(usize),
    Claim,
    Dispatch(usize),
    Start(usize),
    Complete(usize),
    Lose(usize),
    Cancel(usize),
    Crash,
    Resolve(usize, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize).prop_map(Op::Submit),
        3 => Just(Op::Claim),
        2 => any::<usize>().prop_map(Op::Dispatch),
        1 => any::<usize>().prop_map(Op::Start),
        2 => any::<usize>().prop_map(Op::Complete),
        1 => any::<usize>().prop_map(Op::Lose),
        1 => any::<usize>().prop_map(Op::Cancel),
        1 => Just(Op::Crash),
        2 => (any::<usize>(), any::<bool>()).prop_map(|(i, b)| Op::Resolve(i, b)),
    ]
}

fn actor() -> Actor {
    Actor::new("owner", "prop")
}

fn open(home: &Path) -> Store {
    let mut o = StoreOptions::new(home);
    o.queue_capacity = 8;
    Store::open(o).unwrap()
}

fn pick(set: &BTreeSet<String>, i: usize) -> Option<String> {
    if set.is_empty() {
        None
    } else {
        set.iter().nth(i % set.len()).cloned()
    }
}

async fn all_turns(store: &Store) -> BTreeMap<String, TurnState> {
    let turns = store
        .list_turns(TurnFilter {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    turns.into_iter().map(|t| (t.id, t.state)).collect()
}

async fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let mut store = open(&home);
    let mut threads = vec![];
    for i in 0..3 {
        let p = dir.path().join(format!("ws{i}"));
        std::fs::create_dir_all(&p).unwrap();
        store.add_workspace(&format!("ws{i}"), &p).await.unwrap();
        let input = NewThread {
            command_id: None,
            workspace_id: format!("ws{i}"),
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
        threads.push(store.create_thread(&actor(), input).await.unwrap().value.id);
    }
    let mut accepted: BTreeSet<String> = BTreeSet::new();
    let mut claimed: BTreeSet<String> = BTreeSet::new();
    let mut dispatched: BTreeSet<String> = BTreeSet::new();
    let mut cmd = 0;
    for op in ops {
        let turns = all_turns(&store).await;
        let in_state = |f: fn(TurnState) -> bool| -> BTreeSet<String> {
            turns
                .iter()
                .filter(|(_, s)| f(**s))
                .map(|(id, _)| id.clone())
                .collect()
        };
        match op {
            Op::Submit(ws) => {
                cmd += 1;
                let input = SubmitTurn {
                    command_id: format!("c{cmd}"),
                    thread_id: threads[ws].clone(),
                    prompt: "p".into(),
                    continues: None,
                    max_turn_seconds: None,
                };
                match store.submit_turn(&actor(), input).await {
                    Ok(r) => {
                        assert!(accepted.insert(r.value.id));
                    }
                    Err(e) => assert!(
                        ["queue_full", "workspace_fenced"].contains(&e.code()),
                        "{e}"
                    ),
                }
            }
            Op::Claim => {
                if let Some(c) = store.try_claim().await.unwrap() {
                    assert!(claimed.insert(c.turn.id.clone()), "turn claimed twice");
                    assert!(accepted.contains(&c.turn.id));
                }
            }
            Op::Dispatch(i) => {
                if let Some(id) = pick(&in_state(|s| s == TurnState::Preparing), i) {
                    let cancel = store.get_turn(&id).await.unwrap().cancel_requested;
                    match store.mark_dispatched(&id, binding()).await {
                        Ok(t) => {
                            assert!(!cancel);
                            assert_eq!(t.state, TurnState::Dispatched);
                            assert!(dispatched.insert(id), "turn dispatched twice");
                        }
                        Err(e) => {
                            // The boundary is refused after a cancel; the runner stops.
                            assert!(cancel && e.code() == "conflict", "{e}");
                            let out = store
                                .finish_turn(
                                    &id,
                                    TurnEnd::Cancelled(lapis_protocol::OutcomeCode::Cancelled),
                                )
                                .await
                                .unwrap();
                            assert_eq!(out.turn.state, TurnState::Cancelled);
                        }
                    }
                }
            }
            Op::Start(i) => {
                if let Some(id) = pick(&in_state(|s| s == TurnState::Dispatched), i) {
                    assert!(store.mark_running(&id).await.unwrap().applied);
                }
            }
            Op::Complete(i) => {
                if let Some(id) = pick(&in_state(TurnState::is_in_flight), i) {
                    let out = store
                        .finish_turn(&id, TurnEnd::Completed("end_turn".into()))
                        .await
                        .unwrap();
                    assert_eq!(out.applied, turns[&id] != TurnState::Preparing);
                }
            }
            Op::Lose(i) => {
                if let Some(id) = pick(&in_state(TurnState::is_past_dispatch), i) {
                    let out = store
                        .finish_turn(
                            &id,
                            TurnEnd::Unknown(lapis_protocol::OutcomeCode::OutcomeLost),
                        )
                        .await
                        .unwrap();
                    assert!(out.turn.state.is_fenced());
                }
            }
            Op::Cancel(i) => {
                if let Some(id) = pick(&in_state(|_| true), i) {
                    store.request_cancel(&actor(), &id).await.unwrap();
                }
            }
            Op::Crash => {
                let before = turns;
                drop(store);
                store = open(&home);
                let after = all_turns(&store).await;
                for (id, s) in &before {
                    let now = after[id];
                    match s {
                        TurnState::Preparing => assert_eq!(now, TurnState::Failed),
                        TurnState::Dispatched | TurnState::Running => assert!(now.is_fenced()),
                        other => assert_eq!(now, *other),
                    }
                }
            }
            Op::Resolve(i, failed) => {
                if let Some(id) = pick(&in_state(TurnState::is_fenced), i) {
                    let as_ = if failed {
                        ResolveAs::Failed
                    } else {
                        ResolveAs::Cancelled
                    };
                    let t = store
                        .resolve_turn(&actor(), &id, as_, true, None)
                        .await
                        .map(|r| r.value)
                        .unwrap();
                    assert!(t.state.is_terminal());
                }
            }
        }
        // Never lost: every accepted turn is still there; one lease per workspace.
        let now = all_turns(&store).await;
        assert_eq!(now.keys().cloned().collect::<BTreeSet<_>>(), accepted);
        let status = store.status();
        let mut leased = BTreeMap::new();
        let listed = store
            .list_turns(TurnFilter {
                limit: 1000,
                ..Default::default()
            })
            .await
            .unwrap();
        for t in listed.iter().filter(|t| t.state.is_in_flight()) {
            assert!(
                leased
                    .insert(t.workspace_id.clone(), t.id.clone())
                    .is_none(),
                "two in flight"
            );
        }
        assert_eq!(
            status.running_workspaces,
            leased.keys().cloned().collect::<Vec<_>>()
        );
        for t in &listed {
            if t.state.is_past_dispatch() || t.state.is_fenced() || t.dispatched_at.is_some() {
                assert!(
                    dispatched.contains(&t.id),
                    "dispatched without the boundary"
                );
            }
        }
    }
    // Drain: resolve fences, run everything; every accepted turn ends terminal.
    loop {
        let turns = all_turns(&store).await;
        let fenced: Vec<_> = turns
            .iter()
            .filter(|(_, s)| s.is_fenced())
            .map(|(i, _)| i.clone())
            .collect();
        for id in &fenced {
            store
                .resolve_turn(&actor(), id, ResolveAs::Failed, true, None)
                .await
                .map(|r| r.value)
                .unwrap();
        }
        for (id, s) in &turns {
            if s.is_in_flight() {
                store
                    .finish_turn(
                        id,
                        TurnEnd::Failed(lapis_protocol::OutcomeCode::ControllerShutdown),
                    )
                    .await
                    .unwrap();
            }
        }
        let mut progressed = !fenced.is_empty();
        while let Some(c) = store.try_claim().await.unwrap() {
            assert!(claimed.insert(c.turn.id.clone()), "turn claimed twice");
            store
                .finish_turn(
                    &c.turn.id,
                    TurnEnd::Failed(lapis_protocol::OutcomeCode::ControllerShutdown),
                )
                .await
                .unwrap();
            progressed = true;
        }
        if !progressed {
            break;
        }
    }
    let end = all_turns(&store).await;
    assert_eq!(end.len(), accepted.len());
    assert!(end.values().all(|s| s.is_terminal()), "{end:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn interleavings_never_dispatch_twice_and_never_lose_a_turn(ops in prop::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(run(ops));
    }
}

/// A session binding as the engine passes it at the dispatch boundary.
fn binding() -> lapis_protocol::SessionBinding {
    lapis_protocol::SessionBinding {
        session_id: "sess-1".into(),
        fingerprint: "0".repeat(64),
        thread_version: 1,
    }
}
