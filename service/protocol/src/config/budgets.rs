//! `budgets`: optional ceilings on what turns may use, in tokens or cost,
//! for one thread, workspace or application (or each of them), or for
//! everything, over all time or per UTC day.
//!
//! What must stay true: a budget is checked when a turn is claimed, before
//! anything is asked of an application port or an agent; a spent budget
//! fails that turn `budget_exhausted` and never touches a running turn;
//! one whose spending cannot be read fails it `budget_unavailable` (budgets
//! fail closed).
//! The one exception is a per-turn ceiling (`period: "turn"`,
//! [`BudgetPeriod::Turn`]), never checked at the claim, which stops a
//! running turn only through the turn deadline's cancel path. A thread's
//! own budget ([`ThreadBudget`]) is the `thread:ID:total` budget.
//! Spending is read from the turns' usage records (`TurnUsage`), counted
//! from the later of the period's start and the budget's last reset
//! (`budgets reset KEY`).

use serde::{Deserialize, Serialize};

use crate::usage::{Amount, ContextUsage, Cost, TurnUsage, UsageTotals};

/// What a budget covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BudgetScope {
    /// Every turn.
    All,
    /// The turns of one thread (`id`), or of each thread.
    Thread,
    /// The turns in one workspace (`id`), or in each.
    Workspace,
    /// The turns of one application's threads (`id`), or of each.
    Application,
}

impl BudgetScope {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetScope::All => "all",
            BudgetScope::Thread => "thread",
            BudgetScope::Workspace => "workspace",
            BudgetScope::Application => "application",
        }
    }
}

/// Over which time a budget counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BudgetPeriod {
    /// Since the budget's last reset.
    #[default]
    Total,
    /// Since 00:00 UTC today (or the last reset, if later).
    Day,
    /// Each turn on its own: a *per-turn ceiling*. Never checked at the
    /// claim (a turn not started has used nothing); a running turn whose
    /// reported usage reaches it is stopped through the turn deadline's
    /// cancel path and ends with outcome `budget_exhausted`. During a turn
    /// ACP reports only `usage_update`, so `cost` is compared with the
    /// turn's cost so far (the session's cumulative cost less what it was
    /// before the turn) and `tokens` with the context in use (`used`).
    Turn,
}

/// Length of a UTC day in milliseconds.
const DAY_MS: i64 = 86_400_000;

/// One budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    /// What it covers.
    pub per: BudgetScope,
    /// The one thread, workspace or application it covers; absent: each
    /// of them separately (never with `per: "all"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Most tokens (`totalTokens`) in the period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Most cost in the period, in `currency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<f64>"))]
    pub cost: Option<Amount>,
    /// The currency of `cost` [default: `USD`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// The period [default: `total`].
    #[serde(default)]
    pub period: BudgetPeriod,
}

impl Budget {
    /// The budget's stable name, what `budgets reset` takes:
    /// `PER[:ID]:PERIOD`, e.g. `workspace:proj:day`, `thread:total`.
    pub fn key(&self) -> String {
        let period = match self.period {
            BudgetPeriod::Total => "total",
            BudgetPeriod::Day => "day",
            BudgetPeriod::Turn => "turn",
        };
        match &self.id {
            Some(id) => format!("{}:{id}:{period}", self.per.as_str()),
            None => format!("{}:{period}", self.per.as_str()),
        }
    }

    /// The currency `cost` is in.
    pub fn currency(&self) -> &str {
        self.currency.as_deref().unwrap_or("USD")
    }

    /// Whether the budget applies to a turn of this thread, workspace and
    /// application.
    pub fn covers(&self, thread: &str, workspace: &str, application: &str) -> bool {
        let id = match self.per {
            BudgetScope::All => return true,
            BudgetScope::Thread => thread,
            BudgetScope::Workspace => workspace,
            BudgetScope::Application => application,
        };
        self.id.as_deref().is_none_or(|want| want == id)
    }

    /// From when spending counts at `now` (ms since epoch), given the last
    /// reset.
    pub fn since(&self, now: i64, reset_at: Option<i64>) -> Option<i64> {
        let start = match self.period {
            BudgetPeriod::Total | BudgetPeriod::Turn => None,
            BudgetPeriod::Day => Some(now - now.rem_euclid(DAY_MS)),
        };
        match (start, reset_at) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether it is a per-turn ceiling ([`BudgetPeriod::Turn`]), checked
    /// during a turn rather than at the claim.
    pub fn per_turn(&self) -> bool {
        self.period == BudgetPeriod::Turn
    }

    /// Whether a running turn's reports so far reach this per-turn
    /// ceiling: `context` its last `usage_update`, `before` the session's
    /// cumulative cost before the turn (see [`BudgetPeriod::Turn`]).
    pub fn reached_by_turn(&self, context: &ContextUsage, before: Option<&Cost>) -> bool {
        let Some(so_far) = TurnUsage::settle(Some(context), None, before) else {
            return false;
        };
        let mut spent = UsageTotals {
            total_tokens: context.used,
            ..UsageTotals::default()
        };
        if let Some(c) = so_far.cost {
            spent.cost.push(c);
        }
        self.spent_by(&spent)
    }

    /// Whether `spent` reaches the budget.
    pub fn spent_by(&self, spent: &UsageTotals) -> bool {
        self.tokens.is_some_and(|t| spent.total_tokens >= t)
            || self
                .cost
                .is_some_and(|c| spent.cost_in(self.currency()) >= c.0)
    }

    /// `(field, reason)` when the budget is not valid.
    pub fn check(&self) -> Result<(), (&'static str, &'static str)> {
        if self.tokens.is_none() && self.cost.is_none() {
            return Err(("budgets", "a budget needs `tokens` or `cost`"));
        }
        if self.per == BudgetScope::All && self.id.is_some() {
            return Err(("budgets", "`per: \"all\"` takes no `id`"));
        }
        if self.cost.is_some_and(|c| !(c.0.is_finite() && c.0 >= 0.0)) {
            return Err(("budgets", "`cost` must be a non-negative number"));
        }
        if self
            .currency
            .as_deref()
            .is_some_and(|c| c.len() != 3 || !c.bytes().all(|b| b.is_ascii_uppercase()))
        {
            return Err(("budgets", "`currency` must be an ISO 4217 code like `USD`"));
        }
        Ok(())
    }
}

/// A thread's own budget (`threads.create`/`threads.configure`
/// `budget`): tokens or cost over the thread's whole life, checked at the
/// claim with the configured budgets as the budget `thread:ID:total`
/// ([`ThreadBudget::for_thread`]), so one key, one reset and one check
/// serve both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadBudget {
    /// Most tokens (`totalTokens`) the thread's turns may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Most cost, in `currency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<f64>"))]
    pub cost: Option<Amount>,
    /// The currency of `cost` [default: `USD`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

impl ThreadBudget {
    /// The budget it is for thread `id`: `per: "thread"`, that id, over
    /// all time (since its last reset).
    pub fn for_thread(&self, id: &str) -> Budget {
        Budget {
            per: BudgetScope::Thread,
            id: Some(id.to_owned()),
            tokens: self.tokens,
            cost: self.cost,
            currency: self.currency.clone(),
            period: BudgetPeriod::Total,
        }
    }

    /// The reason it is not valid (the rules of [`Budget::check`]).
    pub fn check(&self) -> Result<(), &'static str> {
        self.for_thread("t").check().map_err(|(_, why)| why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_cover_count_from_the_day_or_reset_and_are_spent_at_their_limit() {
        let b: Budget = serde_json::from_value(serde_json::json!(
            {"per": "workspace", "id": "proj", "cost": 0.5, "period": "day"}))
        .unwrap();
        assert_eq!(b.key(), "workspace:proj:day");
        assert!(b.covers("t1", "proj", "app"));
        assert!(!b.covers("t1", "other", "app"));
        let now = 3 * DAY_MS + 5_000;
        assert_eq!(b.since(now, None), Some(3 * DAY_MS));
        assert_eq!(b.since(now, Some(3 * DAY_MS + 10)), Some(3 * DAY_MS + 10));
        assert_eq!(b.since(now, Some(DAY_MS)), Some(3 * DAY_MS));
        let mut spent = UsageTotals::default();
        assert!(!b.spent_by(&spent));
        spent.cost.push(Cost {
            amount: Amount(0.5),
            currency: "USD".into(),
        });
        assert!(b.spent_by(&spent));
        let each: Budget =
            serde_json::from_value(serde_json::json!({"per": "thread", "tokens": 10})).unwrap();
        assert_eq!(each.key(), "thread:total");
        assert!(each.covers("any", "w", "a"));
        assert_eq!(each.since(now, None), None);
        let bad: Budget = serde_json::from_value(serde_json::json!({"per": "all"})).unwrap();
        assert!(bad.check().is_err());
    }

    /// A per-turn ceiling counts the turn's cost so far against the
    /// session's cost before it, and the context in use; it has its own key
    /// and is never a claim-time budget.
    #[test]
    fn a_per_turn_ceiling_is_reached_by_a_running_turns_reports() {
        let b: Budget = serde_json::from_value(serde_json::json!(
            {"per": "all", "cost": 0.5, "tokens": 5000, "period": "turn"}))
        .unwrap();
        assert!(b.per_turn());
        assert_eq!(b.key(), "all:turn");
        let usd = |a: f64| Cost {
            amount: Amount(a),
            currency: "USD".into(),
        };
        let report = |used: u64, cost: f64| ContextUsage {
            used,
            size: 200_000,
            cost: Some(usd(cost)),
        };
        assert!(!b.reached_by_turn(&report(1000, 0.4), None));
        assert!(b.reached_by_turn(&report(1000, 0.5), None));
        // 1.2 cumulative, 0.9 before the turn: 0.3 this turn.
        assert!(!b.reached_by_turn(&report(1000, 1.2), Some(&usd(0.9))));
        assert!(b.reached_by_turn(&report(5000, 1.2), Some(&usd(0.9))));
        let day: Budget = serde_json::from_value(serde_json::json!(
            {"per": "all", "cost": 0.5, "period": "day"}))
        .unwrap();
        assert!(!day.per_turn());
    }

    #[test]
    fn a_thread_budget_is_the_thread_scoped_total_budget_of_its_thread() {
        let own: ThreadBudget =
            serde_json::from_value(serde_json::json!({"tokens": 100, "cost": 0.5})).unwrap();
        let b = own.for_thread("th-1");
        assert_eq!(b.key(), "thread:th-1:total");
        assert!(b.covers("th-1", "w", "a") && !b.covers("th-2", "w", "a"));
        assert_eq!(b.currency(), "USD");
        assert!(own.check().is_ok());
        let empty: ThreadBudget = serde_json::from_value(serde_json::json!({})).unwrap();
        assert!(empty.check().is_err());
        let negative: ThreadBudget =
            serde_json::from_value(serde_json::json!({"cost": -1.0})).unwrap();
        assert!(negative.check().is_err());
        assert!(serde_json::from_value::<ThreadBudget>(serde_json::json!({"per": "all"})).is_err());
    }
}
