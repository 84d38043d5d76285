//! Thread import (issue 44 item 5): `threads.import` takes a
//! `lapis-thread-bundle/1` bundle (what `threads export` writes), verifies
//! it as `threads export --verify` does, and journals its events again as
//! a new thread, closed by a content-free receipt (`thread_imported`, the
//! payload [`ThreadImported`]).

use serde::{Deserialize, Serialize};

/// The largest bundle `threads.import` takes, in bytes: it is imported in
/// one writer transaction and sent in one frame (the request, with the
/// bundle as a JSON string, must also fit `server.maxFrameBytes`, 1 MiB by
/// default). Larger bundles are refused with `bundle_too_large`.
pub const MAX_IMPORT_BUNDLE_BYTES: usize = 512 * 1024;

/// `threads.import` params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadsImport {
    /// The bundle, as the file holds it (UTF-8 JSON lines).
    pub bundle: String,
    /// The workspace the new thread belongs to. Absent: the registered
    /// workspace whose path is the bundle's `workspacePath`, else
    /// `workspace_required`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
    /// The provider of the new thread. Absent: the bundle's (its last
    /// `thread_configured`, else its `thread_created`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// The payload of `thread_imported`, the imported thread's last event:
/// where its history came from, never content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadImported {
    /// The exported thread's id (on the source controller).
    pub source_thread_id: String,
    /// The chain hash of the bundle's last event (hex).
    pub source_head: String,
    /// The source anchor's position when exported: events in its durable
    /// prefix.
    pub source_anchor_events: u64,
    /// The source anchor's chain hash at that position (hex).
    pub source_anchor_head: String,
    /// SHA-256 of the whole bundle file (hex).
    pub bundle_sha256: String,
    /// Events journaled again (before this receipt).
    pub events: u64,
    /// Events of the bundle retention had pruned (tombstones) and their
    /// `history_pruned` receipts: not imported, they stay gone.
    pub pruned: u64,
    /// Turns imported (all settled).
    pub turns: u64,
    /// When (ms since the epoch; RFC 3339 UTC on the wire).
    #[serde(with = "crate::time::rfc3339")]
    pub imported_at: i64,
}

/// `threads.import` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadImportedResult {
    /// The new thread.
    pub thread: crate::Thread,
    /// Its receipt, as journaled.
    pub receipt: ThreadImported,
    /// The receipt event's owner-wide `seq`.
    pub seq: u64,
}
