//! Thread deletion: the content-free receipt a deleted thread leaves in
//! the journal (`thread_deleted`, the payload [`ThreadDeletion`]) and the
//! `threads.delete` result.
//!
//! A deleted thread's events stay in the journal as *tombstones*: the row
//! keeps its `seq`, its thread and `thread_seq` and its stored chain hash;
//! its kind becomes `tombstone` and everything else is cleared. The
//! receipt names the tombstones' count, their first and last `seq` and
//! [`ThreadDeletion::digest`], SHA-256 over the domain tag
//! `lapis-tombstones/1` and one `0x00`, then, for each tombstone in `seq`
//! order, its `seq` (i64, 8 bytes big-endian) and its stored hash (32
//! bytes), in lowercase hex. `journal verify` links through a tombstone by
//! its stored hash and requires every tombstone to be covered by its
//! thread's receipt with a matching digest.

use serde::{Deserialize, Serialize};

/// Who deleted a thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletedBy {
    /// The principal.
    pub principal: String,
    /// The application of the session.
    pub application: String,
    /// The name of the token the session authenticated with, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// The payload of `thread_deleted`: counts and chain positions only,
/// never content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadDeletion {
    /// The deleted thread.
    pub thread_id: String,
    /// Events tombstoned (every event of the thread before this one but
    /// what history retention pruned already and its receipts).
    pub events: u64,
    /// Turns removed.
    pub turns: u64,
    /// The first tombstone's `seq` (0 when none).
    pub first_seq: u64,
    /// The last tombstone's `seq` (0 when none).
    pub last_seq: u64,
    /// The tombstones' digest (see the module docs), lowercase hex.
    pub digest: String,
    /// Who deleted it.
    pub by: DeletedBy,
    /// When (ms since the epoch; RFC 3339 UTC on the wire).
    #[serde(with = "crate::time::rfc3339")]
    pub deleted_at: i64,
}

/// `threads.delete` result: the receipt as journaled, and its `seq`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadDeletedResult {
    /// The receipt.
    pub receipt: ThreadDeletion,
    /// The receipt event's owner-wide `seq`.
    pub seq: u64,
}
