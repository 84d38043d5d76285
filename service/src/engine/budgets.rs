//! Budgets at the claim: the first configured budget covering a claimed
//! turn that is already spent, read from the turns' usage records.
//!
//! What must stay true: this runs in the claim path before the context and
//! memory ports are asked and before any agent is taken (`run_claim`), so a
//! spent budget never calls a port or reaches an agent; it reads only, so a
//! running turn is never touched by it.

use lapis_protocol::config::{Budget, BudgetScope};

use crate::domain::StoreResult;
use crate::store::{Store, UsageScope};

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
    let covering: Vec<&Budget> = budgets
        .iter()
        .filter(|b| b.covers(thread, workspace, application))
        .collect();
    if covering.is_empty() {
        return Ok(None);
    }
    let resets = store.budget_resets().await?;
    for b in covering {
        let key = b.key();
        let mut scope = UsageScope {
            since: b.since(now, resets.get(&key).copied()),
            ..UsageScope::default()
        };
        match b.per {
            BudgetScope::All => {}
            BudgetScope::Thread => scope.thread_id = Some(thread.to_owned()),
            BudgetScope::Workspace => scope.workspace_id = Some(workspace.to_owned()),
            BudgetScope::Application => scope.application = Some(application.to_owned()),
        }
        if b.spent_by(&store.usage_totals(scope).await?) {
            return Ok(Some(key));
        }
    }
    Ok(None)
}

/// Milliseconds since the epoch now.
pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
