//! Budgets at the claim: the first configured budget covering a claimed
//! turn that is already spent, read from the turns' usage records; and the
//! per-turn ceilings a running turn is held to ([`TurnCeiling`]).
//!
//! What must stay true: the claim check runs in the claim path before the
//! context and memory ports are asked and before any agent is taken
//! (`run_claim`), so a spent budget never calls a port or reaches an agent;
//! it reads only, so a running turn is never touched by it; a read that
//! fails refuses the turn (`budget_unavailable`), never lets it run. The one way a
//! budget stops a running turn is a per-turn ceiling, and it stops it only
//! through the deadline's cancel path ([`super::outcome::Stop`]).

use lapis_protocol::config::Budget;

use crate::domain::StoreResult;
use crate::store::Store;

/// The key of the first budget covering this turn (its thread, workspace
/// and application) that is spent at `now` (ms since epoch), if any.
pub(super) async fn spent(
    store: &Store,
    budgets: &[Budget],
    thread: &str,
    workspace: &str,
    application: &str,
    now: i64,
) -> StoreResult<Option<String>> {
    let covering: Vec<Budget> = budgets
        .iter()
        .filter(|b| !b.per_turn() && b.covers(thread, workspace, application))
        .cloned()
        .collect();
    if covering.is_empty() {
        return Ok(None);
    }
    store
        .spent_budget(covering, thread, workspace, application, now)
        .await
}

/// The per-turn ceilings (`period: "turn"`) covering one running turn,
/// checked at each `usage_update` it reports after its dispatch boundary.
#[derive(Debug)]
pub(super) struct TurnCeiling {
    /// The ceilings covering the turn (never empty).
    ceilings: Vec<Budget>,
    /// The agent session's cumulative cost before the turn (read at the
    /// boundary, when the session is known); `None` until then or when the
    /// session never reported one.
    before: std::sync::Mutex<Option<lapis_protocol::usage::Cost>>,
    /// How the turn is stopped when one is reached (the deadline's path).
    stop: super::outcome::Stop,
}

impl TurnCeiling {
    /// The ceilings among `budgets` covering this turn, or `None` when
    /// none does.
    pub(super) fn covering(
        budgets: &[Budget],
        thread: &lapis_protocol::Thread,
        stop: super::outcome::Stop,
    ) -> Option<TurnCeiling> {
        let ceilings: Vec<Budget> = budgets
            .iter()
            .filter(|b| {
                b.per_turn() && b.covers(&thread.id, &thread.workspace_id, &thread.application)
            })
            .cloned()
            .collect();
        (!ceilings.is_empty()).then(|| TurnCeiling {
            ceilings,
            before: std::sync::Mutex::new(None),
            stop,
        })
    }

    /// The session's cumulative cost before this turn (see `before`).
    pub(super) fn set_before(&self, cost: Option<lapis_protocol::usage::Cost>) {
        *self.before.lock().unwrap_or_else(|p| p.into_inner()) = cost;
    }

    /// A `usage_update` of the running turn: the key of the first ceiling
    /// it reaches, after asking the stop to cancel the turn (only the
    /// first reached ceiling stops it; later reports change nothing).
    pub(super) fn report(&self, usage: &lapis_protocol::usage::ContextUsage) -> Option<String> {
        let before = self
            .before
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let reached = self
            .ceilings
            .iter()
            .find(|b| b.reached_by_turn(usage, before.as_ref()))?;
        let key = reached.key();
        self.stop
            .fire(lapis_protocol::OutcomeCode::BudgetExhausted, "budget")
            .then_some(key)
    }
}

/// Milliseconds since the epoch now.
pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
