//! The owner scope's replay page (`replay::OWNER_PAGE`): events walked in
//! `seq` order from the cursor, each joined to its thread. A page of 100
//! costs the same SQLite VM steps after 150 of the owner's events as after
//! 4,150, and sorts nothing. With the plan SQLite chose once schema 22
//! indexed `threads(principal, …)` (the owner's threads first, then every
//! event they hold, sorted) this fails: the scale bench read 17.5 ms per
//! page at 10k events and 159 ms at 1M.

use std::path::Path;

use rusqlite::Connection;

use super::*;
use crate::domain::*;
use crate::store::journal::MemoryPayloads;
use crate::store::replay::{OWNER_PAGE, replay};
use crate::store::retention::steps;
use crate::store::*;

/// The owner's first page on a connection of its own, what it cost, and
/// the statement's plan.
fn first_page(db: &Path) -> (ReplayPage, steps::Steps, String) {
    let conn = Connection::open(db).unwrap();
    let scope = ReplayScope::Owner {
        principal: owner().principal.clone(),
        application: None,
    };
    steps::sweep(&conn);
    let page = replay(&conn, &MemoryPayloads::new(16), &scope, 0, 100).unwrap();
    let cost = steps::sweep(&conn);
    let mut stmt = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {}", *OWNER_PAGE))
        .unwrap();
    let plan: Vec<String> = stmt
        .query_map(rusqlite::params![0, "owner", None::<String>, 101], |r| {
            r.get(3)
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    (page, cost, plan.join("; "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_page_costs_the_same_after_4_150_events_as_after_150_and_sorts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let s = Store::open(options(&home)).unwrap();
    workspace(&s, dir.path(), "ws1").await;
    let first = thread(&s, "ws1", Retention::Full).await;
    let second = thread(&s, "ws1", Retention::Full).await;
    long_turn(&s, &first.id, "a", 150).await;
    let db = home.join(DB_FILE);
    let (short, base, plan) = first_page(&db);
    long_turn(&s, &second.id, "b", 4_000).await;
    let (long, cost, _) = first_page(&db);
    assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    assert!(
        plan.starts_with("SEARCH e USING INTEGER PRIMARY KEY"),
        "{plan}"
    );
    assert_eq!((short.events.len(), long.events.len()), (100, 100));
    let seqs = |p: &ReplayPage| p.events.iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(seqs(&short), seqs(&long), "the same oldest events");
    assert!(
        base.vm > 500,
        "the sweep sees the page's statement: {base:?}"
    );
    assert!(
        base.vm.abs_diff(cost.vm) <= 64,
        "150 events: {base:?}, 4,150 events: {cost:?}"
    );
    s.close().await;
}
