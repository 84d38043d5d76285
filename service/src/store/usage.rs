//! Turn usage (schema version 14): each turn's [`TurnUsage`] on its row
//! (`turns.usage`, JSON), and totals over turns by thread, workspace,
//! application and day — read from those rows, so they survive restarts
//! and never drift from the turns they sum.
//!
//! What must stay true: a turn's usage is written once, by the writer,
//! from what its agent reported ([`TurnUsage::settle`] against the same
//! agent session's previous cumulative cost); totals are sums of per-turn
//! figures, never stored on their own.

use rusqlite::{Connection, params};

use crate::domain::StoreResult;
use lapis_protocol::config::{Budget, BudgetScope};
use lapis_protocol::usage::{ContextUsage, Cost, TokenUsage, TurnUsage, UsageTotals};

use super::writer::Writer;

/// Which turns a total covers; `None` fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UsageScope {
    /// Only turns of this thread.
    pub(crate) thread_id: Option<String>,
    /// Only turns in this workspace.
    pub(crate) workspace_id: Option<String>,
    /// Only turns of threads of this application.
    pub(crate) application: Option<String>,
    /// Only turns that ended at or after this time (ms since epoch).
    pub(crate) since: Option<i64>,
}

/// The totals of the turns in `scope`.
pub(crate) fn totals(conn: &Connection, scope: &UsageScope) -> StoreResult<UsageTotals> {
    let mut stmt = conn.prepare_cached(
        "SELECT t.usage FROM turns t JOIN threads th ON th.id = t.thread_id \
         WHERE t.usage IS NOT NULL AND (?1 IS NULL OR t.thread_id = ?1) \
         AND (?2 IS NULL OR t.workspace_id = ?2) AND (?3 IS NULL OR th.application = ?3) \
         AND (?4 IS NULL OR COALESCE(t.finished_at, t.updated_at) >= ?4)",
    )?;
    let rows = stmt.query_map(
        params![
            scope.thread_id,
            scope.workspace_id,
            scope.application,
            scope.since
        ],
        |r| r.get::<_, String>(0),
    )?;
    let mut totals = UsageTotals::default();
    for json in rows {
        // A row that does not parse was refused by startup validation;
        // skipping it here keeps a total readable.
        if let Ok(u) = serde_json::from_str::<TurnUsage>(&json?) {
            totals.add(&u);
        }
    }
    Ok(totals)
}

/// When each budget was last reset, by key.
fn resets(conn: &Connection) -> StoreResult<std::collections::HashMap<String, i64>> {
    let mut stmt = conn.prepare_cached("SELECT key, reset_at FROM budget_resets")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Totals grouped by thread, workspace or application (`status`, budgets
/// that cover each of them), of the turns since `since`.
pub(crate) fn by_key(
    conn: &Connection,
    key: &'static str,
    since: Option<i64>,
) -> StoreResult<std::collections::BTreeMap<String, UsageTotals>> {
    let column = match key {
        "thread" => "t.thread_id",
        "workspace" => "t.workspace_id",
        _ => "th.application",
    };
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {column}, t.usage FROM turns t JOIN threads th ON th.id = t.thread_id \
         WHERE t.usage IS NOT NULL \
         AND (?1 IS NULL OR COALESCE(t.finished_at, t.updated_at) >= ?1)"
    ))?;
    let rows = stmt.query_map([since], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
    })?;
    let mut out = std::collections::BTreeMap::<String, UsageTotals>::new();
    for row in rows {
        let (k, json) = row?;
        if let Ok(u) = serde_json::from_str::<TurnUsage>(&json) {
            out.entry(k).or_default().add(&u);
        }
    }
    Ok(out)
}

/// The cumulative cost last recorded for `session` on `thread` (before
/// `turn`), the base a cumulative report is counted from.
fn session_cost(
    conn: &Connection,
    thread: &str,
    session: &str,
    turn: &str,
) -> StoreResult<Option<Cost>> {
    let mut stmt = conn.prepare_cached(
        "SELECT usage FROM turns WHERE thread_id = ?1 AND agent_session_id = ?2 \
         AND id <> ?3 AND usage IS NOT NULL ORDER BY queue_seq DESC LIMIT 1",
    )?;
    let mut rows = stmt.query(params![thread, session, turn])?;
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    let json: String = row.get(0)?;
    Ok(serde_json::from_str::<TurnUsage>(&json)
        .ok()
        .and_then(|u| u.session_cost))
}

impl super::Store {
    /// Records a turn's usage (see [`Writer::record_usage`]).
    /// Queues a turn's usage record ahead of its end, unawaited: the
    /// writer runs requests in order, so it is on the turn's row in the
    /// commit that ends the turn (or one before it), never after, and a
    /// warm turn reporting usage costs no commit of its own. A failure is
    /// logged, as an awaited one was.
    pub(crate) fn record_usage_before_end(
        &self,
        turn: &str,
        context: Option<ContextUsage>,
        tokens: Option<TokenUsage>,
    ) {
        let turn = turn.to_owned();
        self.op_detached("recording the turn's usage", move |w| {
            w.record_usage(&turn, context.as_ref(), tokens.as_ref())
        });
    }

    /// The cumulative cost last recorded for agent session `session` of
    /// `thread` before `turn` (what a per-turn ceiling counts from).
    pub(crate) async fn session_cost(
        &self,
        thread: &str,
        session: &str,
        turn: &str,
    ) -> StoreResult<Option<Cost>> {
        let (thread, session, turn) = (thread.to_owned(), session.to_owned(), turn.to_owned());
        // On the writer: the session's previous turn may have ended in
        // the batch that claimed this one (see `read_in_batch`).
        self.read_in_batch(move |c| session_cost(c, &thread, &session, &turn))
            .await
    }

    /// The usage totals of the turns in `scope`.
    pub(crate) async fn usage_totals(&self, scope: UsageScope) -> StoreResult<UsageTotals> {
        self.read(move |c, _| totals(c, &scope)).await
    }

    /// When each budget was last reset, by key.
    pub(crate) async fn budget_resets(
        &self,
    ) -> StoreResult<std::collections::HashMap<String, i64>> {
        self.read(|c, _| resets(c)).await
    }

    /// The key of the first of `covering` (budgets covering one claimed
    /// turn of `thread` in `workspace` for `application`) that is spent at
    /// `now` (ms since epoch), if any. Read on the writer, in the batch
    /// that claimed the turn: the previous turn's usage and end may be in
    /// it, not yet committed (see `read_in_batch`).
    pub(crate) async fn spent_budget(
        &self,
        covering: Vec<Budget>,
        thread: &str,
        workspace: &str,
        application: &str,
        now: i64,
    ) -> StoreResult<Option<String>> {
        let (thread, workspace, application) = (
            thread.to_owned(),
            workspace.to_owned(),
            application.to_owned(),
        );
        self.read_in_batch(move |c| {
            let resets = resets(c)?;
            for b in covering {
                let key = b.key();
                let mut scope = UsageScope {
                    since: b.since(now, resets.get(&key).copied()),
                    ..UsageScope::default()
                };
                match b.per {
                    BudgetScope::All => {}
                    BudgetScope::Thread => scope.thread_id = Some(thread.clone()),
                    BudgetScope::Workspace => scope.workspace_id = Some(workspace.clone()),
                    BudgetScope::Application => scope.application = Some(application.clone()),
                }
                if b.spent_by(&totals(c, &scope)?) {
                    return Ok(Some(key));
                }
            }
            Ok(None)
        })
        .await
    }

    /// Every thread's own budget, as the budget it is
    /// ([`ThreadBudget::for_thread`]), oldest thread first.
    ///
    /// [`ThreadBudget::for_thread`]: lapis_protocol::config::ThreadBudget::for_thread
    pub(crate) async fn thread_budgets(&self) -> StoreResult<Vec<lapis_protocol::config::Budget>> {
        self.read(|c, _| {
            let mut stmt = c.prepare_cached(
                "SELECT id, budget FROM threads WHERE budget IS NOT NULL ORDER BY created_at, id",
            )?;
            let rows =
                stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
            let mut out = Vec::new();
            for row in rows {
                let (id, json) = row?;
                // Startup validation refused a budget that does not parse.
                if let Ok(b) = serde_json::from_str::<lapis_protocol::config::ThreadBudget>(&json) {
                    out.push(b.for_thread(&id));
                }
            }
            Ok(out)
        })
        .await
    }

    /// Resets a budget (by key): spending counts from now. Returns when.
    pub(crate) async fn reset_budget(&self, key: &str) -> StoreResult<i64> {
        let key = key.to_owned();
        self.op(move |w| {
            w.write(|tx, _, _, now| {
                tx.prepare_cached(
                    "INSERT INTO budget_resets (key, reset_at) VALUES (?1, ?2) \
                     ON CONFLICT(key) DO UPDATE SET reset_at = excluded.reset_at",
                )?
                .execute(params![key, now])?;
                Ok(now)
            })
        })
        .await
    }

    /// Usage totals by thread, workspace or application (`key`), of the
    /// turns since `since` (all when `None`).
    pub(crate) async fn usage_by(
        &self,
        key: &'static str,
        since: Option<i64>,
    ) -> StoreResult<std::collections::BTreeMap<String, UsageTotals>> {
        self.read(move |c, _| by_key(c, key, since)).await
    }
}

impl Writer {
    /// Records a turn's usage from its agent's reports; returns it
    /// (`None` when the turn reported nothing, and then nothing is written).
    pub(super) fn record_usage(
        &mut self,
        turn: &str,
        context: Option<&ContextUsage>,
        tokens: Option<&TokenUsage>,
    ) -> StoreResult<Option<TurnUsage>> {
        let row = self.turn_or_404(turn)?;
        let before = match &row.agent_session_id {
            Some(session) => session_cost(&self.conn, &row.thread_id, session, turn)?,
            None => None,
        };
        let Some(usage) = TurnUsage::settle(context, tokens, before.as_ref()) else {
            return Ok(None);
        };
        let json = serde_json::to_string(&usage)
            .map_err(|_| crate::domain::StoreError::invalid("usage does not serialize"))?;
        self.write(|tx, _, _, _| {
            tx.prepare_cached("UPDATE turns SET usage = ?1 WHERE id = ?2")?
                .execute(params![json, turn])?;
            Ok(())
        })?;
        Ok(Some(usage))
    }
}
