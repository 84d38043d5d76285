//! Startup validation: every retained row is checked before anything runs.
//!
//! Each check of the small tables is one SQL query that scans the table once
//! and returns the id of the first offending row. The events table (the big
//! one) is checked in ONE streaming scan in `seq` order with borrowed column
//! values — no per-row allocation — which also proves what aggregates cannot:
//! every thread's sequence grows by exactly one in global order. A failure names the table, the row id
//! and the check — never the row's content. The journal's hash chain is
//! followed in the same scan ([`super::chain::ChainCheck`], which hashes
//! batches of rows on a helper thread beside the scan): an edited,
//! inserted or deleted event fails the open naming the first bad `seq`
//! (check `chain`), and a whole chain that stops short of, or differs at,
//! the prefix its anchor file names fails as `store_anchor_mismatch`
//! (`super::anchor`). SQLite's own corruption errors
//! (truncated or damaged pages met during the scans) fail as `store_corrupt`.

use std::collections::HashMap;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension};

use lapis_protocol::config::PERMISSION_TIMEOUT_SECONDS;
use serde::de::IgnoredAny;

use crate::domain::{EventKind, StoreError, StoreResult};

use super::anchor::Anchor;
use super::command_kind::CommandKind;
use super::ids::sql_name_ok;

/// Row counts seen by validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValidationReport {
    /// Rows in `workspaces`.
    pub(crate) workspaces: u64,
    /// Rows in `threads`.
    pub(crate) threads: u64,
    /// Rows in `turns`.
    pub turns: u64,
    /// Rows in `events`.
    pub events: u64,
}

const TURN_STATES: &str = "('queued','preparing','dispatched','running','completed','failed',\
    'cancelled','submission_unknown','interrupted')";
const HEX64: &str = "length({c}) = 64 AND {c} NOT GLOB '*[^0-9a-f]*'";

fn hex64(col: &str) -> String {
    format!("(typeof({col}) = 'text' AND {})", HEX64.replace("{c}", col))
}

/// A stored native session id: text of 1-512 bytes without control bytes.
fn session_id(col: &str) -> String {
    format!(
        "(typeof({col}) = 'text' AND length(CAST({col} AS BLOB)) BETWEEN 1 AND 512 \
         AND {col} NOT GLOB '*[' || char(1) || '-' || char(31) || char(127) || ']*')"
    )
}

/// `(table, check, query returning the first bad row's id)`.
fn checks() -> Vec<(&'static str, &'static str, String)> {
    let ws_id = sql_name_ok("id");
    let cmd = sql_name_ok("command_id");
    let th_ws = sql_name_ok("workspace_id");
    let provider = sql_name_ok("provider");
    let outcome = sql_name_ok("outcome");
    let cred = sql_name_ok("credential");
    let bearer = hex64("bearer_sha256");
    let digest = hex64("digest");
    // A receipt's kind is known and its resource exists.
    let kind_resource = format!(
        "CASE kind {} ELSE 1 END",
        CommandKind::ALL
            .iter()
            .map(|k| format!(
                "WHEN '{}' THEN NOT EXISTS (SELECT 1 FROM {} x WHERE x.id = r.resource_id) ",
                k.as_str(),
                k.resource_table()
            ))
            .collect::<String>()
    );
    let settlements = lapis_protocol::Settlement::ALL
        .iter()
        .map(|s| format!("'{}'", s.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    let mut checks = vec![
        ("workspaces", "fields", format!(
            "SELECT id FROM workspaces WHERE NOT {ws_id} OR typeof(path) != 'text' \
             OR substr(path, 1, 1) != '/' OR typeof(created_at) != 'integer' \
             OR (removed_at IS NOT NULL AND typeof(removed_at) != 'integer') LIMIT 1")),
        // A removed workspace has nothing waiting on it (`workspaces.remove`
        // refuses while a turn is queued, claimed or fenced).
        ("workspaces", "removed", "SELECT w.id FROM workspaces w WHERE w.removed_at IS NOT NULL \
             AND EXISTS (SELECT 1 FROM turns u WHERE u.workspace_id = w.id \
                 AND u.state NOT IN ('completed', 'failed', 'cancelled')) LIMIT 1".into()),
        ("threads", "fields", format!(
            "SELECT id FROM threads WHERE typeof(id) != 'text' OR id NOT GLOB 'thr_*' \
             OR typeof(principal) != 'text' OR principal = '' OR typeof(application) != 'text' \
             OR application = '' OR NOT {th_ws} OR NOT {provider} \
             OR approval NOT IN ('ask', 'allow-all') OR retention NOT IN ('full', 'metadata-only') \
             OR restricted NOT IN (0, 1) OR typeof(version) != 'integer' OR version < 1 \
             OR typeof(created_at) != 'integer' OR typeof(updated_at) != 'integer' LIMIT 1")),
        ("threads", "agent_session", format!(
            "SELECT id FROM threads WHERE NOT ((agent_session_id IS NULL AND agent_fingerprint IS NULL \
             AND agent_thread_version IS NULL) OR ({sid} AND {fp} \
             AND typeof(agent_thread_version) = 'integer' AND agent_thread_version >= 1 \
             AND agent_thread_version <= version)) LIMIT 1",
            sid = session_id("agent_session_id"), fp = hex64("agent_fingerprint"))),
        ("threads", "mcp_servers", "SELECT id FROM threads WHERE mcp_servers IS NOT NULL \
             AND (NOT json_valid(mcp_servers) OR json_type(mcp_servers) != 'array' \
             OR json_array_length(mcp_servers) > 16 OR EXISTS (SELECT 1 FROM json_each(mcp_servers) e \
             WHERE e.type != 'text' OR length(e.value) NOT BETWEEN 1 AND 64 \
             OR e.value GLOB '*[^A-Za-z0-9._-]*' OR e.value GLOB '[^A-Za-z0-9]*')) LIMIT 1".into()),
    ];
    // The stored port names, checked where the ports are mapped.
    checks.extend(super::ports::checks());
    checks.extend(super::schema::history_checks());
    checks.extend([
        ("threads", "permission_timeout", format!(
            "SELECT id FROM threads WHERE permission_timeout_seconds IS NOT NULL \
             AND (typeof(permission_timeout_seconds) != 'integer' \
             OR permission_timeout_seconds NOT BETWEEN {} AND {}) LIMIT 1",
            PERMISSION_TIMEOUT_SECONDS.start(), PERMISSION_TIMEOUT_SECONDS.end())),
        ("policy_probes", "fields", format!(
            "SELECT fingerprint FROM policy_probes WHERE NOT {fp} OR typeof(provider) != 'text' \
             OR typeof(checked_at) != 'integer' OR typeof(probe) != 'text' OR NOT json_valid(probe) \
             OR (CASE WHEN json_valid(probe) THEN json_extract(probe, '$.verdict') END) \
             NOT IN ('honoured', 'ignored', 'inconclusive') LIMIT 1",
            fp = hex64("fingerprint"))),
        // A deleted thread has no turn left and its receipt (`tombstone`).
        ("threads", "deleted", "SELECT id FROM threads t WHERE deleted_at IS NOT NULL \
             AND (typeof(deleted_at) != 'integer' OR EXISTS (SELECT 1 FROM turns u \
             WHERE u.thread_id = t.id) OR NOT EXISTS (SELECT 1 FROM events e \
             WHERE e.thread_id = t.id AND e.kind = 'thread_deleted')) LIMIT 1".into()),
        ("threads", "workspace", "SELECT id FROM threads t WHERE NOT EXISTS \
             (SELECT 1 FROM workspaces w WHERE w.id = t.workspace_id) LIMIT 1".into()),
        ("turns", "fields", format!(
            "SELECT id FROM turns WHERE typeof(id) != 'text' OR id NOT GLOB 'turn_*' \
             OR state NOT IN {TURN_STATES} OR NOT {cmd} OR typeof(principal) != 'text' \
             OR typeof(queue_seq) != 'integer' OR queue_seq < 1 \
             OR cancel_requested NOT IN (0, 1) OR typeof(created_at) != 'integer' \
             OR typeof(updated_at) != 'integer' OR (outcome IS NOT NULL AND NOT {outcome}) LIMIT 1")),
        ("turns", "state", "SELECT id FROM turns WHERE \
             (state = 'queued' AND (prompt IS NULL OR prepared_at IS NOT NULL OR outcome IS NOT NULL)) \
             OR (state != 'queued' AND state != 'cancelled' AND prepared_at IS NULL) \
             OR (state IN ('dispatched','running','completed','submission_unknown','interrupted') \
                 AND dispatched_at IS NULL) \
             OR ((started_at IS NOT NULL OR resolved_at IS NOT NULL) AND dispatched_at IS NULL) \
             OR (state IN ('completed','failed','cancelled','submission_unknown','interrupted') \
                 AND (finished_at IS NULL OR outcome IS NULL)) \
             OR (state IN ('queued','preparing','dispatched','running') AND finished_at IS NOT NULL) \
             OR (resolved_at IS NOT NULL AND state NOT IN ('failed', 'cancelled')) LIMIT 1".into()),
        ("turns", "agent_session", format!(
            "SELECT id FROM turns WHERE (agent_session_id IS NOT NULL AND (NOT {sid} \
             OR dispatched_at IS NULL)) OR (max_turn_seconds IS NOT NULL \
             AND (typeof(max_turn_seconds) != 'integer' OR max_turn_seconds < 1 \
             OR max_turn_seconds > 604800)) LIMIT 1",
            sid = session_id("agent_session_id"))),
        // The prepared configuration is an object written at claim: never
        // on a turn that was not claimed (the record itself is parsed where
        // it is read, failing closed on a malformed one).
        ("turns", "prepared", "SELECT id FROM turns WHERE prepared IS NOT NULL \
             AND (typeof(prepared) != 'text' OR NOT json_valid(prepared) \
             OR json_type(prepared) != 'object' OR prepared_at IS NULL) LIMIT 1".into()),
        // Usage is reported by an agent the prompt reached (schema
        // version 14).
        ("turns", "usage", "SELECT id FROM turns WHERE usage IS NOT NULL \
             AND (typeof(usage) != 'text' OR NOT json_valid(usage) \
             OR json_type(usage) != 'object' OR dispatched_at IS NULL) LIMIT 1".into()),
        ("turns", "references", "SELECT id FROM turns u WHERE NOT EXISTS \
             (SELECT 1 FROM threads t WHERE t.id = u.thread_id AND t.workspace_id = u.workspace_id) \
             OR (continues IS NOT NULL AND NOT EXISTS \
                 (SELECT 1 FROM turns p WHERE p.id = u.continues AND p.thread_id = u.thread_id)) \
             OR NOT EXISTS (SELECT 1 FROM receipts r WHERE r.principal = u.principal \
                 AND r.application = (SELECT t.application FROM threads t WHERE t.id = u.thread_id) \
                 AND r.command_id = u.command_id AND r.kind = 'turn.submit' AND r.resource_id = u.id) \
             LIMIT 1".into()),
        ("receipts", "fields", format!(
            "SELECT principal || '/' || command_id FROM receipts r WHERE NOT {cmd} \
             OR typeof(principal) != 'text' OR typeof(application) != 'text' \
             OR typeof(created_at) != 'integer' OR NOT {digest} \
             OR (result IS NOT NULL AND NOT json_valid(result)) \
             OR {kind_resource} LIMIT 1")),
        ("audit", "fields", "SELECT id FROM audit WHERE action NOT IN ('turn.resolve', 'workspace.remove') \
             OR typeof(at) != 'integer' OR typeof(principal) != 'text' OR NOT json_valid(detail) \
             OR (turn_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = audit.turn_id \
                 AND t.resolved_at IS NOT NULL)) LIMIT 1".into()),
        // The inbox (see `inbox`): a known settlement with its fields, a
        // pending row only on a turn in flight (recovery then abandons it).
        ("permission_requests", "fields", format!("SELECT turn_id FROM permission_requests p \
             WHERE typeof(request_id) != 'text' OR typeof(requested_at) != 'integer' \
             OR typeof(expires_at) != 'integer' OR typeof(requested_seq) != 'integer' \
             OR NOT json_valid(tool_call) OR json_type(tool_call) != 'object' \
             OR NOT json_valid(options) OR json_type(options) != 'array' \
             OR (settlement IS NULL AND (answer IS NOT NULL OR settled_at IS NOT NULL)) \
             OR (settlement IS NOT NULL AND (settlement NOT IN ({settlements}) OR typeof(settled_at) != 'integer')) \
             OR (answered_by IS NOT NULL AND NOT json_valid(answered_by)) \
             OR NOT EXISTS (SELECT 1 FROM turns u WHERE u.id = p.turn_id \
                 AND u.thread_id = p.thread_id AND u.workspace_id = p.workspace_id \
                 AND (p.settlement IS NOT NULL \
                     OR u.state IN ('preparing', 'dispatched', 'running'))) LIMIT 1")),
        ("auth_sessions", "fields", format!(
            "SELECT id FROM auth_sessions WHERE typeof(id) != 'text' OR id NOT GLOB 'ses_*' \
             OR NOT {cred} OR typeof(principal) != 'text' OR typeof(application) != 'text' \
             OR NOT json_valid(scopes) OR json_type(scopes) != 'array' OR NOT {bearer} \
             OR typeof(created_at) != 'integer' \
             OR (expires_at IS NOT NULL AND typeof(expires_at) != 'integer') \
             OR (revoked_at IS NOT NULL AND typeof(revoked_at) != 'integer') LIMIT 1")),
    ]);
    checks
}

/// When [`Store::open`](super::Store::open) checks the journal's retained
/// events (the check after open is `super::history`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HistoryCheck {
    /// Inside open: a bad event fails the open.
    #[default]
    AtOpen,
    /// On a thread of its own after open, over a snapshot pinned at open;
    /// claims and anchor checkpoints wait for it (see the module docs).
    AfterOpen,
}

/// Check every row, and that the journal reaches `anchor` (the anchor of
/// the database at `db`); the first failure stops the open. With
/// [`HistoryCheck::AfterOpen`] the events are left to `super::history`
/// (read after open, over a snapshot pinned now), and `events` is the
/// last `seq` found: nothing here then reads more rows as the journal
/// grows.
pub(super) fn validate(
    conn: &Connection,
    db: &std::path::Path,
    anchor: &Anchor,
    history: HistoryCheck,
) -> StoreResult<ValidationReport> {
    for (table, check, sql) in checks() {
        let bad: Option<rusqlite::types::Value> = conn
            .query_row(&sql, [], |r| r.get(0))
            .optional()
            .map_err(StoreError::from_sqlite)?;
        if let Some(v) = bad {
            let row = match v {
                rusqlite::types::Value::Integer(i) => i.to_string(),
                rusqlite::types::Value::Text(t) if t.len() <= 200 && !t.contains('\n') => t,
                _ => "?".to_owned(),
            };
            return Err(StoreError::InvalidRow { table, row, check });
        }
    }
    validate_prepared(conn)?;
    validate_budgets(conn)?;
    let events = match history {
        HistoryCheck::AtOpen => validate_events(conn, db, anchor)?,
        HistoryCheck::AfterOpen => conn
            .query_row("SELECT coalesce(max(seq), 0) FROM events", [], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| n.max(0) as u64)
            .map_err(StoreError::from_sqlite)?,
    };
    let count = |t: &str| -> StoreResult<u64> {
        conn.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| {
            r.get::<_, i64>(0)
        })
        .map(|n| n as u64)
        .map_err(StoreError::from_sqlite)
    };
    Ok(ValidationReport {
        workspaces: count("workspaces")?,
        threads: count("threads")?,
        turns: count("turns")?,
        events,
    })
}

/// Every stored prepared configuration parses as the record it claims to
/// be (one scan of the claimed turns; the object check is SQL's).
fn validate_prepared(conn: &Connection) -> StoreResult<()> {
    let mut stmt = conn.prepare("SELECT id, prepared FROM turns WHERE prepared IS NOT NULL")?;
    let mut rows = stmt.query([]).map_err(StoreError::from_sqlite)?;
    while let Some(r) = rows.next().map_err(StoreError::from_sqlite)? {
        let json = r.get_ref(1)?.as_bytes().unwrap_or_default();
        if serde_json::from_slice::<lapis_protocol::PreparedConfig>(json).is_err() {
            return Err(StoreError::InvalidRow {
                table: "turns",
                row: r.get::<_, String>(0).unwrap_or_else(|_| "?".to_owned()),
                check: "prepared",
            });
        }
    }
    Ok(())
}

/// Every thread's own budget parses and is valid ([`ThreadBudget::check`]):
/// a budget that no longer holds must not silently stop counting.
///
/// [`ThreadBudget::check`]: lapis_protocol::config::ThreadBudget::check
fn validate_budgets(conn: &Connection) -> StoreResult<()> {
    let mut stmt = conn.prepare("SELECT id, budget FROM threads WHERE budget IS NOT NULL")?;
    let mut rows = stmt.query([]).map_err(StoreError::from_sqlite)?;
    while let Some(r) = rows.next().map_err(StoreError::from_sqlite)? {
        let json = r.get_ref(1)?.as_bytes().unwrap_or_default();
        let valid = serde_json::from_slice::<lapis_protocol::config::ThreadBudget>(json)
            .is_ok_and(|b| b.check().is_ok());
        if !valid {
            return Err(StoreError::InvalidRow {
                table: "threads",
                row: r.get::<_, String>(0).unwrap_or_else(|_| "?".to_owned()),
                check: "budget",
            });
        }
    }
    Ok(())
}

/// The event checks, in one scan (see module docs). Returns the row count.
pub(super) fn validate_events(
    conn: &Connection,
    db: &std::path::Path,
    anchor: &Anchor,
) -> StoreResult<u64> {
    let mut turns: HashMap<String, String> = HashMap::new();
    {
        let mut stmt = conn.prepare("SELECT id, thread_id FROM turns")?;
        let mut rows = stmt.query([]).map_err(StoreError::from_sqlite)?;
        while let Some(r) = rows.next().map_err(StoreError::from_sqlite)? {
            turns.insert(r.get(0)?, r.get(1)?);
        }
    }
    let mut threads: HashMap<String, i64> = HashMap::new();
    {
        let mut stmt = conn.prepare("SELECT id FROM threads")?;
        let mut rows = stmt.query([]).map_err(StoreError::from_sqlite)?;
        while let Some(r) = rows.next().map_err(StoreError::from_sqlite)? {
            threads.insert(r.get(0)?, 0);
        }
    }
    // Validation runs after the migrations: the database is current.
    let v2_from = super::chain::v2_from(conn, super::schema::SCHEMA_VERSION)?;
    let mut stmt = conn.prepare(&format!(
        "SELECT {} FROM events ORDER BY seq",
        super::chain::COLUMNS
    ))?;
    let mut rows = stmt.query([]).map_err(StoreError::from_sqlite)?;
    std::thread::scope(|scope| {
        let mut chain = super::chain::ChainCheck::new(scope, v2_from);
        chain.watch(anchor.events);
        let mut marks = super::tombstone::Tombstones::default();
        let scanned = scan_events(&mut rows, &turns, &mut threads, &mut chain, &mut marks);
        let watched = chain.watched();
        // Every row before the one the scan stopped at was handed to the
        // chain check: a bad link among them is the first failure.
        match chain.finish() {
            Err(seq) => Err(StoreError::InvalidRow {
                table: "events",
                row: seq.to_string(),
                check: "chain",
            }),
            Ok(report) => {
                let events = scanned?;
                marks.check().map_err(|seq| StoreError::InvalidRow {
                    table: "events",
                    row: seq.to_string(),
                    check: "tombstone",
                })?;
                // A whole chain that stops short of (or differs at) its
                // anchor lost its tail or was re-hashed.
                super::anchor::check(db, anchor, report.events, watched)?;
                Ok(events)
            }
        }
    })
}

/// The per-row event checks of [`validate_events`]; each row that passes
/// them goes to `chain`.
fn scan_events(
    rows: &mut rusqlite::Rows<'_>,
    turns: &HashMap<String, String>,
    threads: &mut HashMap<String, i64>,
    chain: &mut super::chain::ChainCheck<'_, '_>,
    marks: &mut super::tombstone::Tombstones,
) -> StoreResult<u64> {
    let mut expected: i64 = 1;
    while let Some(r) = rows.next().map_err(StoreError::from_sqlite)? {
        let seq: i64 = r.get(0)?;
        let bad = |check: &'static str| StoreError::InvalidRow {
            table: "events",
            row: seq.to_string(),
            check,
        };
        if seq != expected {
            return Err(bad("sequence"));
        }
        expected += 1;
        let thread = r.get_ref(1)?.as_str().map_err(|_| bad("thread"))?;
        let last = threads.get_mut(thread).ok_or_else(|| bad("thread"))?;
        let thread_seq = r.get_ref(2)?.as_i64().map_err(|_| bad("thread_sequence"))?;
        if thread_seq != *last + 1 {
            return Err(bad("thread_sequence"));
        }
        *last = thread_seq;
        match r.get_ref(3)?.as_str_or_null().map_err(|_| bad("turn"))? {
            Some(turn) if turns.get(turn).is_none_or(|t| t != thread) => return Err(bad("turn")),
            _ => {}
        }
        let kind = r.get_ref(4)?.as_str().map_err(|_| bad("kind"))?;
        if kind == super::tombstone::KIND {
            // Everything but its place and hash cleared (`tombstone`).
            let cleared = r.get_ref(3)? == ValueRef::Null
                // `at`: 0 (a deletion's) or its pass receipt's later `seq`.
                && matches!(r.get_ref(5)?, ValueRef::Integer(at) if at == 0 || at > seq)
                && r.get_ref(6)? == ValueRef::Integer(0)
                && r.get_ref(7)? == ValueRef::Null
                && r.get_ref(9)? == ValueRef::Null;
            if !cleared || !marks.row(r, chain).map_err(StoreError::from_sqlite)? {
                return Err(bad("tombstone"));
            }
            continue;
        }
        let kind = EventKind::parse(kind).ok_or_else(|| bad("kind"))?;
        if !matches!(r.get_ref(5)?, ValueRef::Integer(_)) {
            return Err(bad("at"));
        }
        let has_payload = match r.get_ref(6)? {
            ValueRef::Integer(0) => false,
            ValueRef::Integer(1) => true,
            _ => return Err(bad("has_payload")),
        };
        match r.get_ref(7)? {
            ValueRef::Null if kind.is_content() => {}
            ValueRef::Text(t) if has_payload => {
                if serde_json::from_slice::<IgnoredAny>(t).is_err() {
                    return Err(bad("payload"));
                }
                // Lifecycle kinds carry a metadata object.
                let object = t.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
                if !kind.is_content() && !object {
                    return Err(bad("payload_shape"));
                }
            }
            _ => return Err(bad("payload")),
        }
        if !marks.row(r, chain).map_err(StoreError::from_sqlite)? {
            return Err(bad("chain"));
        }
    }
    Ok((expected - 1) as u64)
}
