//! A retention batch's cost, counted (`store::retention::steps`): one
//! batch of 256 on a thread of 500 events and on one of 20,500 runs the
//! same SQLite VM steps (within a small constant) and no full-scan step.
//! The UPDATE without its `thread_seq` bound (before f4501d4) walked every
//! event of the thread on the index per batch: this fails then.

use super::*;
use crate::domain::*;
use crate::store::retention::{BATCH_EVENTS, Batch, Limits};
use crate::store::*;

/// One full batch of `thread`'s oldest events, and what it cost.
async fn one_batch(s: &Store, thread: &str) -> steps::Steps {
    let c = candidate(s, thread).await;
    let limits = Limits {
        max_events: Some(c.events - BATCH_EVENTS as u64),
        ..Default::default()
    };
    let (batch, steps) = s.prune_batch_counted(&c, limits, 1).await.unwrap();
    assert!(
        matches!(batch, Batch::Pruned { events, .. } if events == BATCH_EVENTS as u64),
        "{batch:?}"
    );
    steps
}

use crate::store::retention::steps;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_costs_the_same_vm_steps_at_500_events_as_at_20_500_and_scans_no_table() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let s = Store::open(options(&home)).unwrap();
    workspace(&s, dir.path(), "ws1").await;
    let short = thread(&s, "ws1", Retention::Full).await;
    let long = thread(&s, "ws1", Retention::Full).await;
    long_turn(&s, &short.id, "s", 500).await;
    long_turn(&s, &long.id, "l", 20_500).await;
    // The summary catches up first (its own cost, not a batch's).
    s.history_refresh().await.unwrap();
    let base = one_batch(&s, &short.id).await;
    // The long thread twice: its first batch and the one after it.
    for b in [one_batch(&s, &long.id).await, one_batch(&s, &long.id).await] {
        assert_eq!((base.full_scan, b.full_scan), (0, 0), "{base:?} {b:?}");
        assert!(
            base.vm > 1_000,
            "the sweep sees the batch's statements: {base:?}"
        );
        assert!(
            base.vm.abs_diff(b.vm) <= 64,
            "500 events: {base:?}, 20,500 events: {b:?}"
        );
    }
    s.close().await;
}
