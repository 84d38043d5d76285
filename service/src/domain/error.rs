//! The one error type of the controller core.
//!
//! Every variant maps to its typed wire code through
//! [`StoreError::error_code`] (request-level errors keep theirs, the rest is
//! `internal` to a client) and to a stable string through
//! [`StoreError::code`], which adds finer open-time codes naming what made
//! the store refuse to start.
//! Messages name tables, row ids and codes, never a row's content, a prompt or
//! a bearer: errors end up in logs.

use std::path::PathBuf;

use lapis_protocol::ErrorCode;

/// Errors returned by the store and the domain operations on it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The named resource does not exist (or is not visible to the caller).
    #[error("{kind} `{id}` not found")]
    NotFound {
        /// What was looked up: `workspace`, `thread`, `turn`, `session`.
        kind: &'static str,
        /// The id that was looked up.
        id: String,
    },
    /// The request contradicts current state: a reused command id with other
    /// input, a stale optimistic version, a thread with an active turn, …
    #[error("conflict: {reason}")]
    Conflict {
        /// A short, content-free explanation.
        reason: String,
    },
    /// The thread no longer has the binding the caller stated (`expect`).
    #[error("the thread's binding differs in: {}", .fields.join(", "))]
    BindingMismatch {
        /// The wire names of the differing fields (never their values).
        fields: Vec<&'static str>,
    },
    /// A second workspace id for a canonical path that already has one.
    #[error("path is already registered as workspace `{existing}`")]
    WorkspaceAlias {
        /// The id already registered for the path.
        existing: String,
    },
    /// A new workspace's directory is inside, contains, or is the same
    /// directory as a registered workspace's.
    #[error("the directory overlaps workspace `{existing}` ({how}): one tree has one workspace")]
    WorkspaceOverlaps {
        /// The registered workspace it overlaps.
        existing: String,
        /// `inside`, `contains` or `same directory`.
        how: &'static str,
    },
    /// The workspace has a turn whose outcome is unknown; it needs `turns resolve`.
    #[error("workspace `{workspace}` is fenced by turn `{turn}`")]
    WorkspaceFenced {
        /// The fenced workspace.
        workspace: String,
        /// The turn that fences it.
        turn: String,
    },
    /// The workspace has a queued or claimed turn (`workspaces.remove`).
    #[error("workspace `{workspace}` has turn `{turn}` {state}")]
    WorkspaceBusy {
        /// The workspace.
        workspace: String,
        /// Its first queued or claimed turn.
        turn: String,
        /// That turn's state.
        state: crate::domain::TurnState,
    },
    /// `threads.delete` of a thread with a queued or claimed turn.
    #[error("thread `{thread}` has turn `{turn}` {state}")]
    ThreadBusy {
        /// The thread.
        thread: String,
        /// Its first queued or claimed turn.
        turn: String,
        /// That turn's state.
        state: crate::domain::TurnState,
    },
    /// `threads.delete` of a thread with a turn whose outcome is unknown.
    #[error("thread `{thread}` has turn `{turn}` whose outcome is unknown")]
    ThreadFenced {
        /// The thread.
        thread: String,
        /// The fencing turn.
        turn: String,
    },
    /// The thread was deleted; `principal` and `application` are its
    /// owner's, so a handler answers a stranger as for an unknown id.
    #[error("thread `{thread}` was deleted")]
    ThreadDeleted {
        /// The thread.
        thread: String,
        /// Its principal.
        principal: String,
        /// Its application.
        application: String,
    },
    /// `threads.import` refused a bundle; nothing was written. `code` is
    /// a `bundle_*` code or `workspace_required`, `data` what names the
    /// fault (a byte range, a turn's state).
    #[error("{reason}")]
    ImportRefused {
        /// The wire code.
        code: ErrorCode,
        /// What is wrong (no content).
        reason: String,
        /// The error's `data`.
        data: serde_json::Map<String, serde_json::Value>,
    },
    /// The bounded queue of turns is full.
    #[error("turn queue is full (capacity {capacity})")]
    QueueFull {
        /// The configured capacity.
        capacity: usize,
    },
    /// The request is malformed or not allowed in the current state.
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// A short, content-free explanation.
        reason: String,
    },
    /// A payload of a metadata-only thread is gone (it lived in memory only).
    #[error("transcript of thread `{thread}` is unavailable from sequence {seq}")]
    TranscriptUnavailable {
        /// The thread whose payloads are missing.
        thread: String,
        /// The first thread sequence without its payload.
        seq: u64,
    },
    /// A mutating application tool call of the turn has an unknown effect
    /// (requested without a journaled finish): the turn is never
    /// continued, resolved or not.
    #[error(
        "turn `{turn}` has an unknown tool effect ({endpoint}.{tool} call {call}): it is never continued"
    )]
    ToolEffectUnknown {
        /// The turn.
        turn: String,
        /// The call (`tcall_…`).
        call: String,
        /// Its endpoint.
        endpoint: String,
        /// Its tool.
        tool: String,
    },
    /// Another process holds the instance lock.
    #[error("controller instance is locked by pid {}", .pid.map_or_else(|| "unknown".to_owned(), |p| p.to_string()))]
    InstanceLocked {
        /// The holder's pid as written into the lock file, if readable.
        pid: Option<u32>,
    },
    /// The database belongs to something else (wrong `application_id`).
    #[error("{path} is not a lapis-ai-controller database")]
    ForeignDatabase {
        /// The database path.
        path: PathBuf,
    },
    /// The controller home is a directory with other files in it and no
    /// database or marker: it is someone's directory, not a controller home.
    #[error(
        "{} is not a controller home (it holds other files and no controller.db); choose an empty or new directory for --home",
        .path.display()
    )]
    NotControllerHome {
        /// The directory.
        path: PathBuf,
    },
    /// The schema version is newer (or otherwise unknown) than this build knows.
    #[error(
        "database schema version {found} is not supported (this build knows up to {supported})"
    )]
    SchemaUnsupported {
        /// The `user_version` found.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// The journal is shorter than, or differs at, the prefix its anchor
    /// file names (see `store::anchor`): rows were deleted from its end, an
    /// event was rewritten and re-hashed, or the WAL lost committed frames.
    #[error(
        "the journal does not match its anchor {} ({reason}: the anchor names {anchored} events, the journal has {found}); restore controller.db from a backup that includes them, or, if this database is the one you mean to keep, stop serve and run `lapis-ai-controller journal reanchor`",
        .path.display()
    )]
    AnchorMismatch {
        /// The anchor file.
        path: PathBuf,
        /// Events the anchor names.
        anchored: u64,
        /// Events the journal holds.
        found: u64,
        /// Which of the two checks failed.
        reason: &'static str,
    },
    /// A database at schema version 8 or later without a readable anchor.
    #[error(
        "the journal anchor {} cannot be used ({reason}); restore it with controller.db, or, if this database is the one you mean to keep, stop serve and run `lapis-ai-controller journal reanchor`",
        .path.display()
    )]
    AnchorMissing {
        /// The anchor file.
        path: PathBuf,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Startup validation found a row that breaks an invariant.
    #[error("invalid row in table `{table}` (row `{row}`): {check}")]
    InvalidRow {
        /// The table holding the row.
        table: &'static str,
        /// The row's id or key (never its content).
        row: String,
        /// The name of the failed check.
        check: &'static str,
    },
    /// A backup that cannot be used: its manifest, its digest, its
    /// integrity or its chain does not check.
    #[error(
        "backup `{name}` cannot be used: {reason}; `lapis-ai-controller backup list` shows the others"
    )]
    BackupInvalid {
        /// The backup's name.
        name: String,
        /// What did not check (content-free).
        reason: String,
    },
    /// A schema migration failed, or its backup could not be taken; the
    /// database was put back from the backup taken before it when
    /// `restored` names one. Its code is the cause's when that is an
    /// open-time refusal (`store_anchor_mismatch`, …), else
    /// `store_migration_failed`.
    #[error(
        "migrating the database from schema version {from} failed ({cause}); {}",
        match .restored {
            Some(b) => format!("it was restored from backup `{b}` as it was before it, so the build that wrote it still opens it"),
            None => "the database is as the last step that committed left it".to_owned(),
        }
    )]
    MigrationFailed {
        /// The version it was at.
        from: i64,
        /// The backup it was restored from.
        restored: Option<String>,
        /// Why it failed.
        #[source]
        cause: Box<StoreError>,
    },
    /// SQLite reports the file as corrupt or not a database.
    #[error("database is corrupt or truncated")]
    Corrupt(#[source] rusqlite::Error),
    /// The store has shut down (its writer is gone).
    #[error("store is closed")]
    Closed,
    /// The operation ran, but the batch it was written in did not commit
    /// (every write of the batch rolled back). `cause` is the storage
    /// condition (`disk_full`, `read_only`, `io_error`) when the storage
    /// refused the commit, otherwise the commit error's code.
    #[error("operation rolled back with its batch ({cause})")]
    RolledBack {
        /// The storage condition or error code of the failed commit.
        cause: &'static str,
    },
    /// Any other SQLite failure.
    #[error("database error")]
    Sqlite(#[from] rusqlite::Error),
    /// File-system failure around the controller home or lock.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl StoreError {
    /// The wire code: request-level errors keep their own, a storage
    /// condition is `storage_unavailable`, everything else (a foreign or
    /// corrupt database, SQLite and I/O failures) is `internal` to a
    /// client.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            StoreError::NotFound { .. } => ErrorCode::NotFound,
            StoreError::Conflict { .. } => ErrorCode::Conflict,
            StoreError::BindingMismatch { .. } => ErrorCode::BindingMismatch,
            StoreError::WorkspaceAlias { .. } => ErrorCode::WorkspaceAlias,
            StoreError::WorkspaceOverlaps { .. } => ErrorCode::WorkspaceOverlaps,
            StoreError::WorkspaceFenced { .. } => ErrorCode::WorkspaceFenced,
            StoreError::WorkspaceBusy { .. } => ErrorCode::WorkspaceBusy,
            StoreError::ThreadBusy { .. } => ErrorCode::ThreadBusy,
            StoreError::ThreadFenced { .. } => ErrorCode::ThreadFenced,
            StoreError::ThreadDeleted { .. } => ErrorCode::ThreadDeleted,
            StoreError::ImportRefused { code, .. } => *code,
            StoreError::QueueFull { .. } => ErrorCode::QueueFull,
            StoreError::InvalidRequest { .. } => ErrorCode::InvalidRequest,
            StoreError::TranscriptUnavailable { .. } => ErrorCode::TranscriptUnavailable,
            StoreError::ToolEffectUnknown { .. } => ErrorCode::ToolEffectUnknown,
            StoreError::InstanceLocked { .. } => ErrorCode::InstanceLocked,
            _ if self.storage_condition().is_some() => ErrorCode::StorageUnavailable,
            StoreError::ForeignDatabase { .. }
            | StoreError::SchemaUnsupported { .. }
            | StoreError::NotControllerHome { .. }
            | StoreError::RolledBack { .. }
            | StoreError::InvalidRow { .. }
            | StoreError::AnchorMismatch { .. }
            | StoreError::AnchorMissing { .. }
            | StoreError::BackupInvalid { .. }
            | StoreError::MigrationFailed { .. }
            | StoreError::Corrupt(_)
            | StoreError::Closed
            | StoreError::Sqlite(_)
            | StoreError::Io { .. } => ErrorCode::Internal,
        }
    }

    /// The stable code for logs and the CLI: the wire code, or a finer one
    /// for a store that refuses to open (`store_corrupt`, …).
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::ForeignDatabase { .. } => "store_foreign",
            StoreError::SchemaUnsupported { .. } => "store_schema_unsupported",
            StoreError::NotControllerHome { .. } => "not_controller_home",
            StoreError::InvalidRow { .. } => "store_invalid_row",
            StoreError::AnchorMismatch { .. } => "store_anchor_mismatch",
            StoreError::AnchorMissing { .. } => "store_anchor_missing",
            StoreError::Corrupt(_) => "store_corrupt",
            StoreError::BackupInvalid { .. } => "store_backup_invalid",
            StoreError::MigrationFailed { cause, .. } => match cause.code() {
                code if code.starts_with("store_") => code,
                _ => "store_migration_failed",
            },
            other => other.error_code().as_str(),
        }
    }

    /// When the store could not write because of its storage, which
    /// condition: `disk_full`, `read_only` or `io_error`. These clear by
    /// themselves when the file system does; the writer keeps going and
    /// `status` names the condition meanwhile.
    pub(crate) fn storage_condition(&self) -> Option<&'static str> {
        use rusqlite::ffi::ErrorCode;
        match self {
            StoreError::Sqlite(e) => match e.sqlite_error_code() {
                Some(ErrorCode::DiskFull) => Some("disk_full"),
                Some(ErrorCode::ReadOnly) => Some("read_only"),
                Some(ErrorCode::SystemIoFailure) => Some("io_error"),
                _ => None,
            },
            StoreError::Io { source, .. } => match source.raw_os_error() {
                Some(nix::libc::ENOSPC) | Some(nix::libc::EDQUOT) | Some(nix::libc::EFBIG) => {
                    Some("disk_full")
                }
                Some(nix::libc::EROFS) => Some("read_only"),
                _ => None,
            },
            StoreError::RolledBack { cause } => {
                STORAGE_CONDITIONS.iter().find(|c| *c == cause).copied()
            }
            _ => None,
        }
    }

    /// What a failed batch commit reports to each of its operations: the
    /// storage condition when there is one (so it is retried and named as
    /// `storage_unavailable`), otherwise the error's code.
    pub(crate) fn batch_cause(&self) -> &'static str {
        self.storage_condition().unwrap_or_else(|| self.code())
    }

    /// The error each operation of a batch whose commit failed with
    /// `cause` (from [`batch_cause`](Self::batch_cause)) receives.
    pub(crate) fn rolled_back(cause: &'static str) -> Self {
        StoreError::RolledBack { cause }
    }

    pub(crate) fn not_found(kind: &'static str, id: impl Into<String>) -> Self {
        StoreError::NotFound {
            kind,
            id: id.into(),
        }
    }

    pub(crate) fn conflict(reason: impl Into<String>) -> Self {
        StoreError::Conflict {
            reason: reason.into(),
        }
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        StoreError::InvalidRequest {
            reason: reason.into(),
        }
    }

    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        StoreError::Io {
            what: what.into(),
            source,
        }
    }

    /// Classify a SQLite error: corruption gets its own code, the rest is internal.
    pub(crate) fn from_sqlite(err: rusqlite::Error) -> Self {
        use rusqlite::ffi::ErrorCode;
        match err.sqlite_error_code() {
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => StoreError::Corrupt(err),
            _ => StoreError::Sqlite(err),
        }
    }
}

/// The storage conditions a write can meet (see
/// [`StoreError::storage_condition`]).
const STORAGE_CONDITIONS: [&str; 3] = ["disk_full", "read_only", "io_error"];

/// Result alias for the controller core.
pub(crate) type StoreResult<T> = Result<T, StoreError>;
