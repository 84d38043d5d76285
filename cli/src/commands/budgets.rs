//! `budgets show|reset`: the configured budgets with their spending (from
//! `status`, which computes it from the turns' usage records) and
//! `budgets.reset`.

use lapis_protocol::time::format_ms;
use serde_json::json;

use crate::args::{BudgetsCommand, GlobalArgs};
use crate::exit::CliResult;
use crate::terminal::safe;

use super::connect::{client_error, connect};

pub(super) fn run(global: &GlobalArgs, command: BudgetsCommand) -> CliResult {
    let mut client = connect(global)?;
    match command {
        BudgetsCommand::Show { out } => {
            let budgets = client.status().map_err(client_error)?.budgets;
            if out.json {
                crate::output::json(&json!({ "budgets": budgets }))?;
                return Ok(());
            }
            if budgets.is_empty() {
                crate::output::line("no budgets configured (`budgets` in the config)")?;
                return Ok(());
            }
            for b in &budgets {
                let limit = [
                    b.budget.tokens.map(|t| format!("{t} tokens")),
                    b.budget
                        .cost
                        .map(|c| format!("{:.4} {}", c.0, b.budget.currency())),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" or ");
                let since = b.since.map_or_else(
                    || "all time".to_owned(),
                    |s| format!("since {}", format_ms(s)),
                );
                if b.budget.per_turn() {
                    crate::output::line(safe(&format!(
                        "budget {}: {limit} per turn (a running turn that reaches it is stopped: budget_exhausted)",
                        b.key
                    )))?;
                    continue;
                }
                crate::output::line(safe(&format!("budget {}: {limit}, {since}", b.key)))?;
                if b.spent.is_empty() {
                    crate::output::line("  nothing spent")?;
                }
                for s in &b.spent {
                    crate::output::line(safe(&format!(
                        "  {}: {} tokens, {:.4} {}{}",
                        s.id.as_deref().unwrap_or("all"),
                        s.tokens,
                        s.cost.0,
                        b.budget.currency(),
                        if s.exhausted {
                            " — spent: new turns fail budget_exhausted"
                        } else {
                            ""
                        }
                    )))?;
                }
            }
            Ok(())
        }
        BudgetsCommand::Reset { key, out } => {
            let reset = client.budgets_reset(&key).map_err(client_error)?;
            if out.json {
                crate::output::json(&reset)?;
            } else {
                crate::output::line(safe(&format!(
                    "budget {} reset: spending counts from {}",
                    reset.key,
                    format_ms(reset.reset_at)
                )))?;
            }
            Ok(())
        }
    }
}
