//! The warm turn's own statements, one each where there were several
//! (issue 39): the submit reads its thread and workspace in one statement,
//! the claim reads the turn, its prompt, its chained `turn_submitted`
//! payload, its thread and its workspace in one, and a transition of a turn
//! the writer tracks updates it and returns the updated row in one
//! (`UPDATE … RETURNING`), instead of reading it first. Every statement is
//! a literal (`concat!` of the column lists), so nothing is formatted per
//! call and `prepare_cached` finds it by a pointer-sized key.
//!
//! What must stay true: each read returns exactly what the separate reads
//! returned (the same mappers, at an offset: see `super::rows`), and a
//! transition's `RETURNING` row is the row as the UPDATE left it — what a
//! read after it would return.

use rusqlite::{Connection, OptionalExtension, params};

use crate::domain::{StoreResult, Thread, Turn, TurnEvent, Workspace};

use super::read::unwrap_err;
use super::rows::{
    thread_cols, thread_row_at, turn_cols, turn_row_at, workspace_cols, workspace_row_at,
};

/// Columns of [`turn_cols`], [`thread_cols`] and [`workspace_cols`].
const TURN_N: usize = 22;
const THREAD_N: usize = 23;
const WORKSPACE_N: usize = 3;

/// A thread with its workspace (`None` when the workspace was removed or
/// is missing).
pub(super) type ThreadAndWorkspace = (Thread, Option<Workspace>);

/// One thread and its workspace, in one statement.
pub(super) fn thread_and_workspace(
    conn: &Connection,
    thread: &str,
) -> StoreResult<Option<ThreadAndWorkspace>> {
    const SQL: &str = concat!(
        "SELECT * FROM (SELECT ",
        thread_cols!(),
        " FROM threads WHERE id = ?1 AND deleted_at IS NULL) AS th LEFT JOIN (SELECT ",
        workspace_cols!(),
        ", removed_at FROM workspaces) AS w ON w.id = th.workspace_id"
    );
    conn.prepare_cached(SQL)?
        .query_row([thread], |r| {
            let thread = thread_row_at(r, 0)?;
            Ok((thread, workspace_at(r, THREAD_N)?))
        })
        .optional()
        .map_err(unwrap_err)
}

/// A workspace at column `b` of a left-joined row (`None`: no row, or removed).
fn workspace_at(r: &rusqlite::Row<'_>, b: usize) -> rusqlite::Result<Option<Workspace>> {
    let present = r.get_ref(b)?.as_str_or_null()?.is_some();
    let removed = r.get_ref(b + WORKSPACE_N)?.as_i64_or_null()?.is_some();
    Ok(if present && !removed {
        Some(workspace_row_at(r, b)?)
    } else {
        None
    })
}

/// What a claim reads of a queued turn.
pub(super) struct ClaimRead {
    /// The turn row.
    pub(super) turn: Turn,
    /// Its stored prompt (`None`: cleared, not queued).
    pub(super) prompt: Option<String>,
    /// The payload of its first `turn_submitted` event, if any.
    pub(super) submitted: Option<String>,
    /// Its thread and workspace (`None`: the thread row is missing).
    pub(super) thread: Option<ThreadAndWorkspace>,
}

/// The claim's read, in one statement (served by the primary keys and the
/// partial index `events_turn_submitted`).
pub(super) fn claim_read(conn: &Connection, turn: &str) -> StoreResult<Option<ClaimRead>> {
    const SQL: &str = concat!(
        "SELECT * FROM (SELECT ",
        turn_cols!(),
        ", prompt, (SELECT payload FROM events WHERE turn_id = ?1 AND kind = 'turn_submitted' \
         ORDER BY seq LIMIT 1) FROM turns WHERE id = ?1) AS t \
         LEFT JOIN (SELECT ",
        thread_cols!(),
        " FROM threads) AS th ON th.id = t.thread_id LEFT JOIN (SELECT ",
        workspace_cols!(),
        ", removed_at FROM workspaces) AS w ON w.id = t.workspace_id"
    );
    conn.prepare_cached(SQL)?
        .query_row([turn], |r| {
            let t = turn_row_at(r, 0)?;
            let prompt = r.get(TURN_N)?;
            let submitted = r.get(TURN_N + 1)?;
            let b = TURN_N + 2;
            let thread = match r.get_ref(b)?.as_str_or_null()? {
                None => None,
                Some(_) => Some((thread_row_at(r, b)?, workspace_at(r, b + THREAD_N)?)),
            };
            Ok(ClaimRead {
                turn: t,
                prompt,
                submitted,
                thread,
            })
        })
        .optional()
        .map_err(unwrap_err)
}

/// The transition UPDATE for `event`'s timestamp column, with `?1` the
/// new state, `?2` the outcome (kept when NULL), `?3` now, `?4` the id and
/// `?5` the state it must be in. Every transition clears the prompt (see
/// `super::transition`).
macro_rules! transition_sql {
    ($column:literal) => {
        concat!(
            "UPDATE turns SET state = ?1, outcome = coalesce(?2, outcome), updated_at = ?3, ",
            $column,
            " = ?3, prompt = NULL WHERE id = ?4 AND state = ?5"
        )
    };
}

/// [`transition_sql`] returning the updated row (columns of `turn_cols`);
/// the dispatch boundary also stores the native session (`?6`) and holds
/// unless a cancel was requested.
macro_rules! returning_sql {
    ($column:literal) => {
        concat!(transition_sql!($column), " RETURNING ", turn_cols!())
    };
}

/// The timestamp column `event` sets.
fn column(event: TurnEvent) -> usize {
    match event {
        TurnEvent::Claim => 0,
        TurnEvent::Dispatch => 1,
        TurnEvent::Start => 2,
        TurnEvent::ResolveFailed | TurnEvent::ResolveCancelled => 3,
        _ => 4,
    }
}

/// The transition UPDATE for `event` (see [`transition_sql`]); the
/// claim's has a sixth parameter, the prepared configuration.
pub(super) fn transition(event: TurnEvent) -> &'static str {
    const SQL: [&str; 5] = [
        // The claim stores the turn's prepared configuration (`?6`) with it.
        "UPDATE turns SET state = ?1, outcome = coalesce(?2, outcome), updated_at = ?3, \
         prepared_at = ?3, prompt = NULL, prepared = coalesce(?6, prepared) \
         WHERE id = ?4 AND state = ?5",
        transition_sql!("dispatched_at"),
        transition_sql!("started_at"),
        transition_sql!("resolved_at"),
        transition_sql!("finished_at"),
    ];
    SQL[column(event)]
}

/// Applies `event` to the turn `id` known to be in state `from`, returning
/// the updated row; `None` when no row matched (the turn is not in `from`,
/// or, for the dispatch boundary, a cancel was requested): nothing changed.
/// `session` is stored on the turn with the dispatch boundary.
pub(super) fn transition_returning(
    conn: &Connection,
    id: &str,
    (from, to): (crate::domain::TurnState, crate::domain::TurnState),
    event: TurnEvent,
    outcome: Option<&str>,
    now: i64,
    session: Option<&str>,
) -> StoreResult<Option<Turn>> {
    const SQL: [&str; 5] = [
        returning_sql!("prepared_at"),
        concat!(
            "UPDATE turns SET state = ?1, outcome = coalesce(?2, outcome), updated_at = ?3, \
             dispatched_at = ?3, prompt = NULL, agent_session_id = coalesce(?6, agent_session_id) \
             WHERE id = ?4 AND state = ?5 AND cancel_requested = 0 RETURNING ",
            turn_cols!()
        ),
        returning_sql!("started_at"),
        returning_sql!("resolved_at"),
        returning_sql!("finished_at"),
    ];
    let mut stmt = conn.prepare_cached(SQL[column(event)])?;
    let row = if event == TurnEvent::Dispatch {
        stmt.query_row(
            params![to.as_str(), outcome, now, id, from.as_str(), session],
            |r| turn_row_at(r, 0),
        )
    } else {
        stmt.query_row(params![to.as_str(), outcome, now, id, from.as_str()], |r| {
            turn_row_at(r, 0)
        })
    };
    row.optional().map_err(unwrap_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The column counts the joined reads use match the lists.
    #[test]
    fn column_counts_match_the_lists() {
        let n = |cols: &str| cols.split(',').count();
        assert_eq!(n(turn_cols!()), TURN_N);
        assert_eq!(n(thread_cols!()), THREAD_N);
        assert_eq!(n(workspace_cols!()), WORKSPACE_N);
    }
}
