//! Budgets as `status` shows them (spent against each configured budget)
//! and `budgets.reset`. The check at the claim is the engine's
//! (`engine/budgets.rs`); both read spending from the turns' usage
//! records through the store, so they agree.

use lapis_protocol::config::{Budget, BudgetScope};
use lapis_protocol::params::{BudgetReset, BudgetSpend, BudgetStatus, BudgetsReset};
use lapis_protocol::usage::{Amount, UsageTotals};
use lapis_protocol::{ErrorCode, RpcError};

use crate::store::{Store, UsageScope};

use super::super::context::ServerContext;

/// Every budget with its spending at `now` (ms since epoch).
pub(super) async fn statuses(
    store: &Store,
    budgets: &[Budget],
    now: i64,
) -> Result<Vec<BudgetStatus>, RpcError> {
    if budgets.is_empty() {
        return Ok(Vec::new());
    }
    let resets = store.budget_resets().await.map_err(super::store_err)?;
    let mut out = Vec::new();
    for b in budgets {
        let key = b.key();
        let since = b.since(now, resets.get(&key).copied());
        let spend = |id: Option<String>, t: &UsageTotals| BudgetSpend {
            tokens: t.total_tokens,
            cost: Amount(t.cost_in(b.currency())),
            exhausted: b.spent_by(t),
            id,
        };
        let spent = match (b.per, &b.id) {
            (BudgetScope::All, _) | (_, Some(_)) => {
                let mut scope = UsageScope {
                    since,
                    ..UsageScope::default()
                };
                match b.per {
                    BudgetScope::All => {}
                    BudgetScope::Thread => scope.thread_id = b.id.clone(),
                    BudgetScope::Workspace => scope.workspace_id = b.id.clone(),
                    BudgetScope::Application => scope.application = b.id.clone(),
                }
                let t = store.usage_totals(scope).await.map_err(super::store_err)?;
                vec![spend(b.id.clone(), &t)]
            }
            (per, None) => store
                .usage_by(per.as_str(), since)
                .await
                .map_err(super::store_err)?
                .into_iter()
                .map(|(id, t)| spend(Some(id), &t))
                .collect(),
        };
        out.push(BudgetStatus {
            key,
            budget: b.clone(),
            since,
            spent,
        });
    }
    Ok(out)
}

/// `budgets.reset`: `not_found` unless `key` names a configured budget.
pub(crate) async fn budgets_reset(
    ctx: &ServerContext,
    params: BudgetsReset,
) -> Result<BudgetReset, RpcError> {
    let known = ctx
        .core
        .engine
        .as_ref()
        .is_some_and(|e| e.budgets().iter().any(|b| b.key() == params.key));
    if !known {
        return Err(RpcError::new(
            ErrorCode::NotFound,
            format!("no budget `{}` is configured", params.key),
        ));
    }
    let reset_at = ctx
        .core
        .store
        .reset_budget(&params.key)
        .await
        .map_err(super::store_err)?;
    Ok(BudgetReset {
        key: params.key,
        reset_at,
    })
}
