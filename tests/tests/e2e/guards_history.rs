//! A long history's guards (issue 44 item 6): what reading a page of it
//! and a retention pass over it cost, counted, never timed. One
//! `journal.replay` page (a thread's head and tail, the owner's head)
//! runs the same statements and returns the same rows with 20,000 more
//! events in the thread; a retention pass reads the
//! events appended since the previous pass (the store's per-thread
//! summary), not the whole journal again, and looks at each thread once.

use lapis_protocol::Payload;
use lapis_protocol::config::HistoryConfig;
use lapis_service::retention::Retention;
use lapis_service::{EventKind, ReplayScope, Store, StoreOptions, SubmitTurn};
use serde_json::json;

use crate::acp_commits::plain_thread;
use crate::acp_engine::owner;

/// Streams `n` chunks into a new claimed turn of `thread` (`stage` names
/// its command id); the turn stays claimed, so later growth streams into
/// it ([`stream`]).
async fn grow(store: &Store, thread: &str, stage: usize, n: usize) -> String {
    let input = SubmitTurn {
        command_id: format!("grow-{stage}"),
        thread_id: thread.to_owned(),
        prompt: "grow".into(),
        continues: None,
        max_turn_seconds: None,
    };
    let turn = store.submit_turn(&owner(), input).await.unwrap().value;
    store.try_claim().await.unwrap().unwrap();
    stream(store, &turn.id, n).await;
    turn.id
}

/// Streams `n` more chunks into the claimed `turn`.
async fn stream(store: &Store, turn: &str, n: usize) {
    let mut last = None;
    for i in 0..n {
        last = Some(store.append_activity(
            turn,
            Payload::from_value(EventKind::MessageChunk, json!({ "text": format!("c{i}") })),
        ));
    }
    last.unwrap().await.unwrap();
}

/// The cost of a page at each place, in order.
async fn page_costs(store: &Store, thread: &str, tail: u64) -> Vec<(u64, u64, u64)> {
    let mut out = Vec::new();
    for (scope, after) in [
        (ReplayScope::Thread(thread.to_owned()), 0),
        (ReplayScope::Thread(thread.to_owned()), tail),
        (
            ReplayScope::Owner {
                principal: "owner".into(),
                application: None,
            },
            0,
        ),
    ] {
        let before = store.counts();
        let page = store.replay(scope, after, 100).await.unwrap();
        assert_eq!(page.events.len(), 100);
        let after = store.counts();
        out.push((
            after.read_statements - before.read_statements,
            after.read_rows - before.read_rows,
            after.write_statements - before.write_statements,
        ));
    }
    out
}

/// The first pass of a new driver over `store` after `seen` (the
/// summary and the last pass are the store's: they carry over from the
/// previous driver's passes).
async fn one_pass(
    store: &Store,
    seen: Option<&lapis_protocol::HistoryPass>,
) -> lapis_protocol::HistoryPass {
    let retention = Retention::new(HistoryConfig {
        max_age_days: Some(36_500),
        ..Default::default()
    });
    let seen = seen.cloned();
    retention.spawn(store.clone());
    lapis_e2e::wait::until("a retention pass", || {
        let now = retention.status().last_pass;
        now.is_some() && now != seen
    });
    retention.status().last_pass.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_and_a_retention_pass_cost_the_same_however_long_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("home"))).unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    store.add_workspace("ws", &ws).await.unwrap();
    let thread = store
        .create_thread(&owner(), plain_thread("ws", "echo"))
        .await
        .unwrap()
        .value;
    let other = store
        .create_thread(&owner(), plain_thread("ws", "echo"))
        .await
        .unwrap()
        .value;
    let turn = grow(&store, &thread.id, 0, 500).await;
    let first = one_pass(&store, None).await;
    assert!(first.scanned > 500, "{first:?}");
    assert_eq!(first.candidates, 2, "{first:?}");
    let short = page_costs(&store, &thread.id, 300).await;
    stream(&store, &turn, 20_000).await;
    let long = page_costs(&store, &thread.id, 20_300).await;
    assert_eq!(short, long, "a page at 500 events against 20,500");
    // The next pass reads the 20,000 new events, nothing before them;
    // the one after, nothing.
    let second = one_pass(&store, Some(&first)).await;
    assert!(
        (20_000..20_010).contains(&second.scanned),
        "{second:?} after {first:?}"
    );
    let third = one_pass(&store, Some(&second)).await;
    assert_eq!((third.scanned, third.candidates), (0, 2), "{third:?}");
    let _ = other;
    store.close().await;
}
