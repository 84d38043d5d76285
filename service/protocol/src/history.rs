//! History retention (`history` in the config): what a pass leaves in the
//! journal (`history_pruned`, the payload [`HistoryPruned`]) and what
//! `status` says about it ([`HistoryStatus`]).
//!
//! A pass turns a thread's oldest events into *tombstones* (as
//! `threads.delete` does, see [`crate::ThreadDeletion`]): the row keeps its
//! `seq`, thread, `thread_seq` and stored chain hash; its kind becomes
//! `tombstone`, its `at` the `seq` of the receipt that covers it, and
//! everything else is cleared. Each batch journals one `history_pruned`
//! receipt on the thread, in the same transaction, naming the
//! tombstones' count, first and last `seq` and digest (the same encoding
//! as [`crate::ThreadDeletion::digest`]). Receipts are never pruned.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::HistoryConfig;

/// The payload of `history_pruned`: counts and chain positions only,
/// never content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryPruned {
    /// The thread.
    pub thread_id: String,
    /// Events tombstoned by this batch.
    pub events: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// The first tombstone's `seq`.
    pub first_seq: u64,
    /// The last tombstone's `seq`.
    pub last_seq: u64,
    /// The tombstones' digest, lowercase hex.
    pub digest: String,
    /// Which limits the pruned events broke: `maxAgeDays`,
    /// `maxEventsPerThread`, `maxBytesPerThread`.
    pub limits: Vec<String>,
    /// When the pass began (ms since the epoch; RFC 3339 UTC on the wire):
    /// every receipt of one pass names the same instant.
    #[serde(with = "crate::time::rfc3339")]
    pub pass_started_at: i64,
    /// When (ms since the epoch; RFC 3339 UTC on the wire).
    #[serde(with = "crate::time::rfc3339")]
    pub pruned_at: i64,
}

/// `status.history`: the policy in force and the last pass since start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryStatus {
    /// The global policy (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<HistoryConfig>,
    /// The effective policy of each configured workspace that differs
    /// from the global one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub workspaces: BTreeMap<String, HistoryConfig>,
    /// The last finished pass (kept in the database: shown after a restart too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pass: Option<HistoryPass>,
}

/// One retention pass.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryPass {
    /// When it began (RFC 3339 UTC on the wire).
    #[serde(with = "crate::time::rfc3339")]
    pub started_at: i64,
    /// When it ended.
    #[serde(with = "crate::time::rfc3339")]
    pub finished_at: i64,
    /// Writer batches it ran (each one short transaction).
    pub batches: u64,
    /// Threads it pruned events of.
    pub threads: u64,
    /// Events it tombstoned.
    pub events: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// Threads it deleted whole (idle past `maxAgeDays`, nothing left).
    pub threads_deleted: u64,
    /// Threads it left alone because a turn was queued, running or fenced.
    pub skipped_busy: u64,
    /// Threads it looked at (read a page of threads at a time).
    #[serde(default)]
    pub candidates: u64,
    /// Journal events it read to bring its per-thread summary up to date:
    /// the events appended since the previous pass, never the whole history
    /// again (the first pass after an upgrade reads every event once).
    #[serde(default)]
    pub scanned: u64,
    /// SQLite virtual machine steps its writer batches' statements took:
    /// per batch the same however long the thread (each reads one batch
    /// of it through an index); 0 from a controller that does not count.
    #[serde(default)]
    pub batch_vm_steps: u64,
    /// Steps of those statements in a full table scan: 0 (no batch scans
    /// a table).
    #[serde(default)]
    pub batch_full_scan_steps: u64,
    /// The error code that stopped it early, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
