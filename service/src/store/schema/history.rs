//! Schema version 21's tables (issue 44 item 6): here, not beside the
//! summary's code, so the schema depends on no store module.

/// Migration 21's DDL: retention's per-thread summary and its last pass
/// (`super::super::retention::summary` keeps them current).
pub(crate) const SCHEMA: &str = r#"
CREATE TABLE history_summary (
    thread_id TEXT PRIMARY KEY NOT NULL REFERENCES threads(id),
    events    INTEGER NOT NULL,
    bytes     INTEGER NOT NULL,
    oldest_at INTEGER NOT NULL,
    live_from INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE history_state (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    through_seq INTEGER NOT NULL,
    last_pass   TEXT
);
INSERT INTO history_state (id, through_seq) VALUES (1, 0);
CREATE INDEX events_receipts ON events(thread_id, thread_seq)
    WHERE kind IN ('history_pruned', 'thread_deleted');
"#;

/// Startup validation's checks of the summary (`super::super::validate`):
/// whole numbers, not negative, of a thread that exists, and a state row
/// not past the journal's end.
pub(in crate::store) fn checks() -> [(&'static str, &'static str, String); 2] {
    [
        (
            "history_summary",
            "fields",
            "SELECT thread_id FROM history_summary s WHERE typeof(events) != 'integer' \
             OR events < 0 OR typeof(bytes) != 'integer' OR bytes < 0 \
             OR typeof(oldest_at) != 'integer' OR typeof(live_from) != 'integer' \
             OR live_from < 0 OR NOT EXISTS (SELECT 1 FROM threads t WHERE t.id = s.thread_id) \
             LIMIT 1"
                .into(),
        ),
        (
            "history_state",
            "fields",
            "SELECT 1 WHERE (SELECT count(*) FROM history_state) != 1 OR EXISTS \
             (SELECT 1 FROM history_state WHERE id != 1 OR typeof(through_seq) != 'integer' \
             OR through_seq < 0 OR through_seq > (SELECT coalesce(max(seq), 0) FROM events) \
             OR (last_pass IS NOT NULL AND NOT json_valid(last_pass)))"
                .into(),
        ),
    ]
}
