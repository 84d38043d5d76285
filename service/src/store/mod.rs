//! The durable store and the controller core's handle, [`Store`].
//!
//! # Shape
//! [`Store::open`] takes the instance lock (`controller.lock`, before the
//! database is touched), opens `controller.db` (WAL, `synchronous=FULL`,
//! `foreign_keys=ON`, checked `application_id`/`user_version`, migrations in
//! code), validates every retained row, rebuilds the scheduler and runs
//! recovery. It then starts ONE writer thread that owns the write connection;
//! every mutation is a message to it with a `tokio::sync::oneshot` reply.
//! Reads use their own connections (pooled) on tokio's blocking pool and see
//! the last commit. `Store` is `Clone + Send + Sync`; the last clone dropped
//! (or [`Store::close`]) stops the writer and releases the lock.
//!
//! # API overview (all `async` unless noted)
//! - Workspaces: [`add_workspace`](Store::add_workspace) (canonicalises the
//!   path; `workspace_alias` for a second id), [`list_workspaces`](Store::list_workspaces),
//!   [`remove_workspace`](Store::remove_workspace) (marks it removed; its
//!   threads stay readable; `workspace_busy`/`workspace_fenced` while a
//!   turn is queued, claimed or fenced there).
//! - Threads: [`create_thread`](Store::create_thread) (idempotent with a command id),
//!   [`get_thread`](Store::get_thread), [`list_threads`](Store::list_threads),
//!   [`configure_thread`](Store::configure_thread) (optimistic `version`;
//!   `conflict` while the thread has a non-terminal turn).
//! - Turns: [`submit_turn`](Store::submit_turn) (receipt per (principal, command
//!   id) with an input digest: same input → same turn, `replayed: true`; other
//!   input → `conflict`; `workspace_fenced`; `queue_full`),
//!   [`get_turn`](Store::get_turn), [`list_turns`](Store::list_turns),
//!   [`request_cancel`](Store::request_cancel) (the controller's cancel),
//!   [`cancel_turn`](Store::cancel_turn) (the owner's: resolves a fenced turn
//!   as `cancelled`), [`resolve_turn`](Store::resolve_turn).
//! - Runner: [`next_runnable`](Store::next_runnable) / [`try_claim`](Store::try_claim)
//!   → [`Claim`](crate::domain::Claim) (turn now `preparing`, prompt, cancel watch);
//!   [`mark_dispatched`](Store::mark_dispatched) (durable before it returns —
//!   write `session/prompt` only after `Ok`); [`mark_running`](Store::mark_running);
//!   [`finish_turn`](Store::finish_turn) with a [`TurnEnd`](crate::domain::TurnEnd);
//!   [`append_activity`](Store::append_activity) (group-committed; await the
//!   returned [`PendingAppend`] for durability or drop it to stream);
//!   [`flush`](Store::flush).
//! - Journal: [`subscribe`](Store::subscribe) (sync; committed events only),
//!   [`replay`](Store::replay) (bounded pages), [`thread_snapshot`](Store::thread_snapshot).
//!   To follow without gaps: subscribe first, replay, then skip events whose
//!   `seq` was already replayed. A lagged receiver must replay.
//! - Status (sync): [`status`](Store::status), [`commit_count`](Store::commit_count)
//!   (transactions committed, one fsync each).
//! - Auth sessions: [`issue_session`](Store::issue_session) (bounded per
//!   token: expired rows purged, the oldest evicted, in its transaction),
//!   [`find_session_by_credential`](Store::find_session_by_credential),
//!   [`find_session_by_bearer_hash`](Store::find_session_by_bearer_hash),
//!   [`revoke_session`](Store::revoke_session).
//!
//! Errors are [`StoreError`](crate::domain::StoreError) with a stable
//! [`code`](crate::domain::StoreError::code).

mod anchor;
mod api;
mod backup;
mod bundle;
mod chain;
mod command_kind;
mod compact;
mod continuation;
mod counters;
mod handle;
mod history;
mod home;
mod hot;
mod ids;
mod import;
mod inbox;
mod inbox_api;
mod integrity;
mod journal;
mod lock;
mod ops_cancel;
mod ops_delete;
mod ops_live;
mod ops_threads;
mod ops_tools;
mod ops_turns;
mod ops_workspaces;
mod pending;
mod policy;
mod ports;
mod prepared;
mod read;
mod receipts;
mod recovery;
mod replay;
mod restore;
pub(crate) mod retention;
mod row_error;
mod rows;
mod scheduler;
mod schema;
mod sessions;
mod tombstone;
mod transition;
mod usage;
mod validate;
mod verify;
mod writer;

pub(crate) use api::canonical_workspace_dir;
pub use backup::{
    BACKUPS_DIR, BackupInfo, BackupKind, Restored, create_backup, list_backups, restore_backup,
};
pub use bundle::{
    BUNDLE_FORMAT, BundleError, BundleEvent, BundleReport, Header as BundleHeader, export_thread,
    verify_bundle,
};
pub use chain::ChainReport;
#[cfg(test)]
pub(crate) use chain::GENESIS;
pub(crate) use command_kind::CommandKind;
pub use handle::{Store, StoreOptions};
pub(crate) use import::{plan as plan_import, refused as import_refused};
pub(crate) use inbox::Settled;
pub(crate) use pending::{PendingAppend, Recorded};
pub use read::TurnFilter;
pub(crate) use read::{ThreadFilter, ThreadKey};
pub use schema::DB_FILE;
#[cfg(feature = "test-support")]
pub use schema::SCHEMA_VERSION;
pub(crate) use usage::UsageScope;
pub use validate::HistoryCheck;
pub use verify::{reanchor_journal, verify_journal};

#[cfg(test)]
pub(crate) mod tests;
