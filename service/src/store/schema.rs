//! Connection settings and schema migrations, in code.
//!
//! The database is identified by `application_id` (ASCII `LAPI`) and versioned
//! by `user_version`. A fresh file is migrated to [`SCHEMA_VERSION`]; a file
//! with another application id, or a version this build does not know, is
//! refused before anything reads or writes it. Migrations only ever append to
//! [`MIGRATIONS`]; an applied migration is never edited.

use std::path::Path;

use rusqlite::Connection;

use crate::domain::StoreResult;

/// `PRAGMA application_id` of a controller database: ASCII `LAPI`.
pub(crate) const APPLICATION_ID: i64 = 0x4C41_5049;

/// The newest schema version this build knows.
pub const SCHEMA_VERSION: i64 = 23;

/// File name of the database inside the controller home (the one
/// definition is the protocol crate's: the installer's purge checks it).
pub use lapis_protocol::home::DB_FILE;

/// One schema step: SQL, then an optional data step in the same transaction.
struct Migration {
    /// The DDL.
    sql: &'static str,
    /// Run after `sql`, before the version bump.
    then: Option<fn(&Connection) -> StoreResult<()>>,
}

/// `MIGRATIONS[i]` takes the schema from version `i` to `i + 1`. Each step
/// is self-contained (its own `user_version` bump), so steps added on other
/// branches chain by appending. A new step also adds its undo to
/// `schema/rewind.rs` (the tests do not compile until it does), so upgrade
/// tests can start from any older version with `rewind`.
const MIGRATIONS: &[Migration] = &[
    Migration {
        then: None,
        sql: r#"
CREATE TABLE workspaces (
    id          TEXT PRIMARY KEY NOT NULL,
    path        TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL
);
CREATE TABLE threads (
    id           TEXT PRIMARY KEY NOT NULL,
    principal    TEXT NOT NULL,
    application  TEXT NOT NULL,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    provider     TEXT NOT NULL,
    approval     TEXT NOT NULL,
    restricted   INTEGER NOT NULL,
    retention    TEXT NOT NULL,
    version      INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
CREATE TABLE turns (
    id               TEXT PRIMARY KEY NOT NULL,
    thread_id        TEXT NOT NULL REFERENCES threads(id),
    workspace_id     TEXT NOT NULL REFERENCES workspaces(id),
    principal        TEXT NOT NULL,
    command_id       TEXT NOT NULL,
    queue_seq        INTEGER NOT NULL UNIQUE,
    state            TEXT NOT NULL,
    outcome          TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    continues        TEXT REFERENCES turns(id),
    prompt           TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    prepared_at      INTEGER,
    dispatched_at    INTEGER,
    started_at       INTEGER,
    finished_at      INTEGER,
    resolved_at      INTEGER
);
CREATE INDEX turns_thread ON turns(thread_id, queue_seq);
CREATE TABLE receipts (
    principal   TEXT NOT NULL,
    command_id  TEXT NOT NULL,
    kind        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (principal, command_id)
) WITHOUT ROWID;
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY,
    thread_id   TEXT NOT NULL REFERENCES threads(id),
    thread_seq  INTEGER NOT NULL,
    turn_id     TEXT REFERENCES turns(id),
    kind        TEXT NOT NULL,
    at          INTEGER NOT NULL,
    payload     TEXT,
    has_payload INTEGER NOT NULL,
    UNIQUE (thread_id, thread_seq)
);
CREATE TABLE audit (
    id        INTEGER PRIMARY KEY,
    at        INTEGER NOT NULL,
    principal TEXT NOT NULL,
    action    TEXT NOT NULL,
    turn_id   TEXT REFERENCES turns(id),
    detail    TEXT NOT NULL
);
CREATE TABLE auth_sessions (
    id            TEXT PRIMARY KEY NOT NULL,
    credential    TEXT NOT NULL,
    principal     TEXT NOT NULL,
    application   TEXT NOT NULL,
    scopes        TEXT NOT NULL,
    bearer_sha256 TEXT NOT NULL UNIQUE,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER,
    revoked_at    INTEGER
);
CREATE INDEX auth_sessions_credential ON auth_sessions(credential);
"#,
    },
    Migration {
        // Agent sessions per thread (issue 11).
        then: None,
        sql: r#"
ALTER TABLE threads ADD COLUMN agent_session_id TEXT;
ALTER TABLE threads ADD COLUMN agent_fingerprint TEXT;
ALTER TABLE threads ADD COLUMN agent_thread_version INTEGER;
ALTER TABLE turns ADD COLUMN agent_session_id TEXT;
ALTER TABLE turns ADD COLUMN max_turn_seconds INTEGER;
"#,
    },
    Migration {
        // Receipts keyed by (principal, application, command id), with the
        // result as first returned. Existing receipts take their thread's
        // application (every receipt so far names a thread or a turn).
        then: None,
        sql: r#"
CREATE TABLE receipts_keyed (
    principal   TEXT NOT NULL,
    application TEXT NOT NULL,
    command_id  TEXT NOT NULL,
    kind        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    result      TEXT,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (principal, application, command_id)
) WITHOUT ROWID;
INSERT INTO receipts_keyed (principal, application, command_id, kind, digest, resource_id,
    result, created_at)
SELECT r.principal,
       coalesce(
           (SELECT t.application FROM threads t
             WHERE r.kind = 'thread.create' AND t.id = r.resource_id),
           (SELECT t.application FROM turns u JOIN threads t ON t.id = u.thread_id
             WHERE r.kind = 'turn.submit' AND u.id = r.resource_id),
           ''),
       r.command_id, r.kind, r.digest, r.resource_id, NULL, r.created_at
FROM receipts r;
DROP TABLE receipts;
ALTER TABLE receipts_keyed RENAME TO receipts;
"#,
    },
    Migration {
        // The tamper-evident journal (see `chain`) and the per-turn redaction
        // count; existing rows are chained once, here.
        sql: r#"
ALTER TABLE events ADD COLUMN hash BLOB;
ALTER TABLE turns ADD COLUMN redactions INTEGER NOT NULL DEFAULT 0;
"#,
        then: Some(super::chain::backfill),
    },
    Migration {
        // Each turn's prepared configuration (issue 14), JSON written in the
        // claim's transaction; turns claimed before it have none.
        then: None,
        sql: "ALTER TABLE turns ADD COLUMN prepared TEXT;",
    },
    Migration {
        // Version 6: the application MCP servers (names, a JSON array) a
        // thread's turns give the agent (issue 14 item 7). Only names
        // persist: the descriptions live with the registering connection.
        then: None,
        sql: "ALTER TABLE threads ADD COLUMN mcp_servers TEXT;",
    },
    Migration {
        // Version 7: a turn's prompt event found without scanning its
        // thread's journal (`turns.get` read every event of a long thread).
        // Partial: only `user_message` rows enter it, one per turn, so the
        // streamed appends pay nothing for it. Queries must name the kind
        // as a literal for SQLite to use it.
        then: None,
        sql: "CREATE INDEX events_user_message ON events(turn_id) WHERE kind = 'user_message';",
    },
    Migration {
        // Version 8 (issue 24 item 4): a queued turn's chained input digest
        // found at its claim without a scan (partial, like version 7's);
        // the raw prompts of turns past `queued` dropped (`secure_delete`
        // is on, so their bytes do not stay in free pages); and the journal
        // anchored outside the database before this step commits (see
        // `anchor`: from this version on a database without one is refused).
        then: Some(super::anchor::migrate),
        sql: r#"
CREATE INDEX events_turn_submitted ON events(turn_id) WHERE kind = 'turn_submitted';
UPDATE turns SET prompt = NULL WHERE state != 'queued' AND prompt IS NOT NULL;
"#,
    },
    Migration {
        // Version 9: `workspaces.remove` (issue 23). A removed workspace
        // keeps its row, so its threads and their journal keep every
        // reference; only new work is refused there.
        then: None,
        sql: "ALTER TABLE workspaces ADD COLUMN removed_at INTEGER;",
    },
    Migration {
        // Version 10: the application tool endpoints (names, a JSON array)
        // a thread binds (issue 25), and its turns' tool-call events found
        // without a scan (partial, like version 7's; queries name the kinds
        // as literals). Only names persist: the endpoints live with the
        // registering connection.
        then: None,
        sql: r#"
ALTER TABLE threads ADD COLUMN tools TEXT;
CREATE INDEX events_tool_calls ON events(turn_id)
    WHERE kind IN ('tool_call_requested', 'tool_call_finished');
"#,
    },
    Migration {
        // Version 11: the durable permission inbox (issue 28, see
        // `inbox`): a row per journaled request, written and settled with
        // its events. Requests journaled before it have no row (their
        // turns are long settled). And a partial index on the turns not
        // yet settled, so a turn's end knows whether it leaves its
        // workspace idle (`workspaceIdle`) without a scan.
        then: None,
        sql: r#"
CREATE TABLE permission_requests (
    turn_id       TEXT NOT NULL REFERENCES turns(id),
    request_id    TEXT NOT NULL,
    thread_id     TEXT NOT NULL REFERENCES threads(id),
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    tool_call     TEXT NOT NULL,
    options       TEXT NOT NULL,
    requested_at  INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    requested_seq INTEGER NOT NULL,
    settlement    TEXT,
    answer        TEXT,
    answered_by   TEXT,
    fate          TEXT,
    settled_at    INTEGER,
    settled_seq   INTEGER,
    PRIMARY KEY (turn_id, request_id)
) WITHOUT ROWID;
CREATE INDEX permission_requests_pending ON permission_requests(requested_at)
    WHERE settlement IS NULL;
CREATE INDEX turns_unsettled ON turns(workspace_id)
    WHERE state NOT IN ('completed', 'failed', 'cancelled');
"#,
    },
    Migration {
        // Version 12: the application context and memory ports (names) a
        // thread binds (issue 26), and thread ids reserved before their
        // thread exists
        // (`threads.reserve`), each owned by one principal + application.
        // Only the name persists: the port lives with its connection.
        then: None,
        sql: r#"
ALTER TABLE threads ADD COLUMN context_port TEXT;
ALTER TABLE threads ADD COLUMN memory_port TEXT;
CREATE TABLE thread_reservations (
    id          TEXT PRIMARY KEY,
    principal   TEXT NOT NULL,
    application TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
"#,
    },
    Migration {
        // Version 13: a thread's own permission timeout (issue 28,
        // `permissionTimeoutSeconds` of `threads.create`/`configure`),
        // seconds; NULL: the provider's.
        then: None,
        sql: r#"
ALTER TABLE threads ADD COLUMN permission_timeout_seconds INTEGER;
"#,
    },
    Migration {
        // Version 14: what each turn used (issue 29): its `TurnUsage` as
        // JSON (tokens, context, per-turn cost, the session's cumulative
        // cost), summed for thread, workspace, application and daily
        // totals and budgets; and when each budget (by key) was last reset.
        then: None,
        sql: r#"
ALTER TABLE turns ADD COLUMN usage TEXT;
CREATE TABLE budget_resets (
    key      TEXT PRIMARY KEY NOT NULL,
    reset_at INTEGER NOT NULL
) WITHOUT ROWID;
"#,
    },
    Migration {
        // Version 15: a thread's own budget (issue 29, `budget` of
        // `threads.create`/`configure`): its `ThreadBudget` as JSON
        // (tokens, cost, currency); NULL: none.
        then: None,
        sql: r#"
ALTER TABLE threads ADD COLUMN budget TEXT;
"#,
    },
    Migration {
        // Version 16: approval acceptance (issue 29 item 5): the last
        // policy probe (`providers check --policy`) per provider
        // definition fingerprint, its `PolicyProbe` as JSON.
        then: None,
        sql: r#"
CREATE TABLE policy_probes (
    fingerprint TEXT PRIMARY KEY NOT NULL,
    provider    TEXT NOT NULL,
    probe       TEXT NOT NULL,
    checked_at  INTEGER NOT NULL
) WITHOUT ROWID;
"#,
    },
    Migration {
        // Version 17: consumer transcript stores (issue 27 item 2): the
        // store (name) a metadata-only thread binds, and each event's
        // canonical hash (`lapis_protocol::transcript::event_hash`, 64
        // lowercase hex digits) where its content is kept in memory only
        // on such a thread, so a payload fetched back from the store after
        // a restart is checked against it. NULL elsewhere (content on disk
        // is covered by the chain hash).
        then: None,
        sql: r#"
ALTER TABLE threads ADD COLUMN transcript_store TEXT;
ALTER TABLE events ADD COLUMN event_hash TEXT;
"#,
    },
    Migration {
        // Version 18: `event_hash` enters the hash chain (issue 42 item 5):
        // rows from `from_seq` on are linked with `chain` version 2.
        then: None,
        sql: r#"
CREATE TABLE chain_versions (version INTEGER PRIMARY KEY NOT NULL, from_seq INTEGER NOT NULL);
INSERT INTO chain_versions (version, from_seq) SELECT 2, coalesce(max(seq), 0) + 1 FROM events;
"#,
    },
    Migration {
        // Version 19: the identity of each port a thread binds (issue 43
        // item 5), a JSON object (`lapis_protocol::PortIdentities`); NULL
        // on older rows, whose bindings are checked by name only.
        then: None,
        sql: "ALTER TABLE threads ADD COLUMN port_identities TEXT;",
    },
    Migration {
        // Version 20: `threads.delete` (issue 44): a deleted thread keeps its
        // row, marked, for its tombstones (`tombstone`); then `compact`.
        then: None,
        sql: "ALTER TABLE threads ADD COLUMN deleted_at INTEGER;",
    },
    Migration {
        // Version 21: retention's per-thread summary and its last pass
        // (issue 44 item 6; see `retention::summary`).
        then: None,
        sql: history::SCHEMA,
    },
    Migration {
        // Version 22: `threads.list` pages by keyset (issue 44): newest
        // first within a principal, the cursor `(created_at, id)`.
        then: None,
        sql: "CREATE INDEX threads_listed ON threads(principal, created_at DESC, id);",
    },
    Migration {
        // Version 23: the named ports of kinds without a column of their
        // own (every kind after the transcript store), one JSON object by
        // wire name (`store/ports.rs`); NULL when none is bound.
        then: None,
        sql: "ALTER TABLE threads ADD COLUMN named_ports TEXT;",
    },
];

/// Runs the migrations from version `from` to [`SCHEMA_VERSION`], each in
/// its own transaction.
pub(super) fn migrate(conn: &Connection, path: &Path, from: i64) -> StoreResult<()> {
    for (i, step) in MIGRATIONS.iter().enumerate().skip(from as usize) {
        injected_failure(path, i as i64 + 1)?;
        let tx = conn.unchecked_transaction()?;
        tx.execute_batch(step.sql)?;
        if let Some(then) = step.then {
            then(&tx)?;
        }
        tx.pragma_update(None, "application_id", APPLICATION_ID)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}

/// The first version whose journal is chained (`chain::backfill`).
pub(super) const CHAINED_VERSION: i64 = 4;

/// The first version whose journal is anchored (`anchor`).
pub(super) const ANCHORED_VERSION: i64 = 8;

mod fault;
mod history;
use fault::injected_failure;
pub(in crate::store) use history::checks as history_checks;

mod open;
use open::configure;
#[cfg(test)]
pub(super) use open::open_writer;
pub(super) use open::open_writer_at;

mod read;
pub(in crate::store) use read::{check_chained, check_current, open_reader};

#[cfg(test)]
mod rewind;
#[cfg(test)]
pub(super) use rewind::rewind;
#[cfg(test)]
mod tests;
