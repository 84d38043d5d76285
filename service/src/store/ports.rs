//! The one mapping between a thread's [`ThreadPorts`] and its row: the
//! columns, their values, the row's decoding, the create receipt's digest
//! parts and the startup checks of the stored names.
//!
//! The kinds the schema gave a column (tool endpoints, context, memory,
//! transcript store) keep it; every other named kind (`PortKind::ALL`
//! from `lapis_protocol::port_kinds!`) is stored in `named_ports`, one
//! JSON object by wire name (schema 22), so a new kind needs no column,
//! no migration and no line here.
//!
//! What must stay true: a receipt digest made before this mapping existed
//! is the digest made now (`tools`, `context` and `memory` were digested
//! before the permission timeout and the budget, `transcriptStore` after
//! them; a kind added later goes after the transcript store, and only when
//! bound, so older receipts still replay), and the columns keep the names
//! the schema gave them.

use rusqlite::Row;
use rusqlite::types::Value;
use serde_json::json;

use lapis_protocol::{PortKind, Retention, ThreadPorts};

use super::ids::check_name;
use super::row_error::bad;
use crate::domain::{StoreError, StoreResult};

/// The port columns of `threads`, in [`values`] and [`read`] order, as a
/// literal (the row's column list is one `concat!`).
macro_rules! port_cols {
    () => {
        "tools, context_port, memory_port, transcript_store, port_identities, named_ports"
    };
}
pub(super) use port_cols;

/// [`port_cols!`], one name each.
fn cols() -> impl Iterator<Item = &'static str> {
    port_cols!().split(", ")
}

/// The port column list.
pub(super) const COLS: &str = port_cols!();

/// `?n, ?n+1, …` for the columns, from placeholder `first`.
pub(super) fn placeholders(first: usize) -> String {
    (first..first + cols().count())
        .map(|n| format!("?{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `col = ?n, …` for the columns, from placeholder `first`.
pub(super) fn assignments(first: usize) -> String {
    cols()
        .zip(first..)
        .map(|(c, n)| format!("{c} = ?{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The kinds with a column of their own (every other kind is in
/// `named_ports`).
const COLUMNED: [PortKind; 4] = [
    PortKind::Tools,
    PortKind::Context,
    PortKind::Memory,
    PortKind::Transcript,
];

/// The bound kinds stored in `named_ports`, with their names, in kind
/// order.
fn named(ports: &ThreadPorts) -> impl Iterator<Item = (PortKind, &String)> {
    PortKind::ALL
        .into_iter()
        .filter(|k| !COLUMNED.contains(k))
        .filter_map(|k| k.bound(ports).first().map(|name| (k, name)))
}

/// The stored values of `ports`, in [`port_cols!`] order (an empty tool list is
/// `NULL`, as a thread without tools always stored it).
pub(super) fn values(ports: &ThreadPorts) -> [Value; 6] {
    let text = |s: &Option<String>| s.clone().map_or(Value::Null, Value::Text);
    [
        if ports.tools.is_empty() {
            Value::Null
        } else {
            Value::Text(json!(ports.tools).to_string())
        },
        text(&ports.context),
        text(&ports.memory),
        text(&ports.transcript_store),
        // Schema 19: NULL for name-only bindings (every older row).
        if ports.identities.is_empty() {
            Value::Null
        } else {
            Value::Text(json!(ports.identities).to_string())
        },
        // Schema 22: NULL when no kind without a column is bound.
        {
            let object: serde_json::Map<String, serde_json::Value> = named(ports)
                .map(|(k, name)| (k.wire().to_owned(), json!(name)))
                .collect();
            if object.is_empty() {
                Value::Null
            } else {
                Value::Text(serde_json::Value::Object(object).to_string())
            }
        },
    ]
}

/// Runs `sql` with `fixed`, then the values of `ports`, as its parameters
/// (the statement's port placeholders come last: [`placeholders`],
/// [`assignments`]).
pub(super) fn execute(
    conn: &rusqlite::Connection,
    sql: &str,
    fixed: &[&dyn rusqlite::ToSql],
    ports: &ThreadPorts,
) -> rusqlite::Result<usize> {
    let bound = values(ports);
    let all = fixed
        .iter()
        .copied()
        .chain(bound.iter().map(|v| v as &dyn rusqlite::ToSql));
    conn.prepare_cached(sql)?
        .execute(rusqlite::params_from_iter(all))
}

/// The ports of a thread row whose port columns start at `at`.
pub(super) fn read(r: &Row<'_>, at: usize, id: &str) -> rusqlite::Result<ThreadPorts> {
    // The kinds with a column are read from it; a kind added later starts
    // unbound and is read from `named_ports` below.
    #[allow(clippy::needless_update)]
    let mut ports = ThreadPorts {
        tools: match r.get::<_, Option<String>>(at)? {
            None => Vec::new(),
            Some(json) => serde_json::from_str(&json).map_err(|_| bad("threads", id, "tools"))?,
        },
        context: r.get(at + 1)?,
        memory: r.get(at + 2)?,
        transcript_store: r.get(at + 3)?,
        identities: match r.get::<_, Option<String>>(at + 4)? {
            None => Default::default(),
            Some(json) => {
                serde_json::from_str(&json).map_err(|_| bad("threads", id, "port_identities"))?
            }
        },
        ..ThreadPorts::default()
    };
    if let Some(json) = r.get::<_, Option<String>>(at + 5)? {
        let bad = || bad("threads", id, "named_ports");
        let object: std::collections::BTreeMap<String, String> =
            serde_json::from_str(&json).map_err(|_| bad())?;
        for (wire, name) in object {
            // A kind this build does not know, or one with a column.
            let kind = PortKind::ALL
                .into_iter()
                .find(|k| !COLUMNED.contains(k) && k.wire() == wire)
                .ok_or_else(bad)?;
            *kind.named_mut(&mut ports).ok_or_else(bad)? = Some(name);
        }
    }
    Ok(ports)
}

/// The create receipt's digest parts of `ports`: those digested before
/// the permission timeout and the budget, then those after them. Each only
/// when bound, and tagged, so it never reads as another member.
pub(super) fn receipt_parts(ports: &ThreadPorts) -> (Vec<String>, Vec<String>) {
    let mut early = Vec::new();
    if !ports.tools.is_empty() {
        early.push(format!("tools={}", json!(ports.tools)));
    }
    early.extend(ports.context.as_ref().map(|c| format!("context={c}")));
    early.extend(ports.memory.as_ref().map(|m| format!("memory={m}")));
    let late = ports
        .transcript_store
        .iter()
        .map(|s| format!("transcriptStore={s}"))
        .chain(named(ports).map(|(k, name)| format!("{}={name}", k.wire())))
        .collect();
    (early, late)
}

/// What the store itself checks of the ports a thread binds under
/// `retention` (the server checked them against the registry first): a
/// transcript store is a valid name, on a metadata-only thread only.
pub(super) fn check(ports: &ThreadPorts, retention: Retention) -> StoreResult<()> {
    if let Some(store) = &ports.transcript_store {
        check_name("transcript store", store)?;
        check_store_retention(retention)?;
    }
    for (kind, name) in named(ports) {
        check_name(kind.wire(), name)?;
    }
    Ok(())
}

/// A transcript store is bound only to a metadata-only thread: a `full`
/// one keeps its content in the journal (the server refuses it first with
/// a clearer message; this holds for every caller).
fn check_store_retention(retention: Retention) -> StoreResult<()> {
    if retention == Retention::MetadataOnly {
        Ok(())
    } else {
        Err(StoreError::invalid(
            "a transcript store needs retention `metadata-only`",
        ))
    }
}

/// Startup's checks of the stored port names (`(table, check, query
/// returning the first bad row's id)`, see `validate`): each a valid name
/// (tool endpoints a JSON array of at most eight), a transcript store only
/// on a metadata-only thread.
pub(super) fn checks() -> [(&'static str, &'static str, String); 6] {
    let name = |col: &str| {
        format!(
            "SELECT id FROM threads WHERE {col} IS NOT NULL \
             AND (typeof({col}) != 'text' OR length({col}) NOT BETWEEN 1 AND 64 \
             OR {col} GLOB '*[^A-Za-z0-9_-]*' OR {col} GLOB '[^A-Za-z0-9]*'"
        )
    };
    [
        (
            "threads",
            "tools",
            "SELECT id FROM threads WHERE tools IS NOT NULL \
             AND (NOT json_valid(tools) OR json_type(tools) != 'array' \
             OR json_array_length(tools) > 8 OR EXISTS (SELECT 1 FROM json_each(tools) e \
             WHERE e.type != 'text' OR length(e.value) NOT BETWEEN 1 AND 64 \
             OR e.value GLOB '*[^A-Za-z0-9_-]*' OR e.value GLOB '[^A-Za-z0-9]*')) LIMIT 1"
                .into(),
        ),
        (
            "threads",
            "context_port",
            format!("{}) LIMIT 1", name("context_port")),
        ),
        (
            "threads",
            "memory_port",
            format!("{}) LIMIT 1", name("memory_port")),
        ),
        (
            "threads",
            "transcript_store",
            format!(
                "{} OR retention != 'metadata-only') LIMIT 1",
                name("transcript_store")
            ),
        ),
        (
            "threads",
            "port_identities",
            "SELECT id FROM threads WHERE port_identities IS NOT NULL \
             AND (NOT json_valid(port_identities) OR json_type(port_identities) != 'object') \
             LIMIT 1"
                .into(),
        ),
        (
            "threads",
            "named_ports",
            "SELECT id FROM threads WHERE named_ports IS NOT NULL \
             AND (NOT json_valid(named_ports) OR json_type(named_ports) != 'object' \
             OR EXISTS (SELECT 1 FROM json_each(named_ports) e \
             WHERE e.type != 'text' OR length(e.value) NOT BETWEEN 1 AND 64 \
             OR e.value GLOB '*[^A-Za-z0-9_-]*' OR e.value GLOB '[^A-Za-z0-9]*')) LIMIT 1"
                .into(),
        ),
    ]
}
