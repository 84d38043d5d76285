//! `budgets show|reset`: the configured budgets with their spending (from
//! `status`, which computes it from the turns' usage records) and
//! `budgets.reset`.

use lapis_protocol::time::format_ms;
use serde_json::json;

use crate::args::{BudgetsCommand, GlobalArgs};
use crate::exit::CliResult;
use crate::table::{Cell, Table};
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
                eprintln!("no budgets configured (`budgets` in the config)");
                return Ok(());
            }
            // One row per budget and what it counts (`all`, or a
            // workspace or provider id); a budget nothing was spent
            // against yet has one row of zeros.
            let mut table = Table::new(&[
                "BUDGET", "LIMIT", "SINCE", "SPENT ON", "TOKENS", "COST", "STATE",
            ]);
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
                let since = || match b.since {
                    Some(s) => Cell::Time(Some(s)),
                    None => "all time".into(),
                };
                if b.budget.per_turn() {
                    // A ceiling on each running turn: nothing accumulates.
                    table.row(vec![
                        (&b.key).into(),
                        limit.clone().into(),
                        "per turn".into(),
                        "-".into(),
                        "-".into(),
                        "-".into(),
                        "a running turn that reaches it is stopped: budget_exhausted".into(),
                    ]);
                    continue;
                }
                if b.spent.is_empty() {
                    table.row(vec![
                        (&b.key).into(),
                        limit.clone().into(),
                        since(),
                        "-".into(),
                        "0".into(),
                        format!("{:.4} {}", 0.0, b.budget.currency()).into(),
                        "open".into(),
                    ]);
                }
                for s in &b.spent {
                    table.row(vec![
                        (&b.key).into(),
                        limit.clone().into(),
                        since(),
                        s.id.as_deref().unwrap_or("all").into(),
                        s.tokens.to_string().into(),
                        format!("{:.4} {}", s.cost.0, b.budget.currency()).into(),
                        if s.exhausted {
                            "spent: new turns fail budget_exhausted"
                        } else {
                            "open"
                        }
                        .into(),
                    ]);
                }
            }
            table.print()?;
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
