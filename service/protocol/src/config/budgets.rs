//! `budgets`: optional ceilings on what turns may use, in tokens or cost,
//! for one thread, workspace or application (or each of them), or for
//! everything, over all time or per UTC day.
//!
//! What must stay true: a budget is checked when a turn is claimed, before
//! anything is asked of an application port or an agent; a spent budget
//! fails that turn `budget_exhausted` and never touches a running turn.
//! Spending is read from the turns' usage records (`TurnUsage`), counted
//! from the later of the period's start and the budget's last reset
//! (`budgets reset KEY`).

use serde::{Deserialize, Serialize};

use crate::usage::{Amount, UsageTotals};

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
            BudgetPeriod::Total => None,
            BudgetPeriod::Day => Some(now - now.rem_euclid(DAY_MS)),
        };
        match (start, reset_at) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::Cost;

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
}
