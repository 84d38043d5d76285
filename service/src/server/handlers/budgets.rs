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
        // A per-turn ceiling counts each turn on its own: nothing is
        // spent against it between turns.
        if b.per_turn() {
            out.push(BudgetStatus {
                key,
                budget: b.clone(),
                since: None,
                spent: Vec::new(),
            });
            continue;
        }
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

/// The configured budgets, then every thread's own budget (as the
/// `thread:ID:total` budget it is checked as at the claim).
pub(super) async fn all(store: &Store, configured: &[Budget]) -> Result<Vec<Budget>, RpcError> {
    let mut all = configured.to_vec();
    all.extend(store.thread_budgets().await.map_err(super::store_err)?);
    Ok(all)
}

/// `budgets.reset`: `not_found` unless `key` names a configured budget or
/// a thread's own.
pub(crate) async fn budgets_reset(
    ctx: &ServerContext,
    params: BudgetsReset,
) -> Result<BudgetReset, RpcError> {
    let configured = ctx
        .core
        .engine
        .as_ref()
        .map(|e| e.budgets())
        .unwrap_or_default();
    let known = all(&ctx.core.store, &configured)
        .await?
        .iter()
        .any(|b| b.key() == params.key);
    if configured
        .iter()
        .any(|b| b.per_turn() && b.key() == params.key)
    {
        return Err(RpcError::new(
            ErrorCode::InvalidRequest,
            format!(
                "`{}` is a per-turn ceiling: each turn counts on its own, there is nothing to reset",
                params.key
            ),
        ));
    }
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
