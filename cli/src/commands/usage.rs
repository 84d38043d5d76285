//! How usage reads on a terminal (`turns show`, `threads show`, `status`,
//! `budgets show`): one line per record, the same words everywhere.

use lapis_protocol::usage::{Cost, TurnUsage, UsageTotals};

/// `0.2500 USD` (4 decimals: per-turn costs are often under a cent).
pub(crate) fn cost(c: &Cost) -> String {
    format!("{:.4} {}", c.amount.0, c.currency)
}

/// Costs in every currency, or `-`.
fn costs(list: &[Cost]) -> String {
    if list.is_empty() {
        "-".into()
    } else {
        list.iter().map(cost).collect::<Vec<_>>().join(", ")
    }
}

/// One turn's usage.
pub(crate) fn turn_line(u: &TurnUsage) -> String {
    let context = match (u.context_used, u.context_size) {
        (Some(used), Some(size)) if size > 0 => {
            format!("; context {used}/{size} ({}%)", used * 100 / size)
        }
        _ => String::new(),
    };
    format!(
        "{} tokens (in {}, out {}, cached {}, thought {}){context}; cost {}",
        u.total_tokens,
        u.input_tokens,
        u.output_tokens,
        u.cached_read_tokens + u.cached_write_tokens,
        u.thought_tokens,
        u.cost.as_ref().map_or_else(|| "-".into(), cost)
    )
}

/// Totals over turns.
pub(crate) fn totals_line(t: &UsageTotals) -> String {
    format!(
        "{} tokens (in {}, out {}, cached {}, thought {}) over {} turn{}; cost {}",
        t.total_tokens,
        t.input_tokens,
        t.output_tokens,
        t.cached_read_tokens + t.cached_write_tokens,
        t.thought_tokens,
        t.turns,
        if t.turns == 1 { "" } else { "s" },
        costs(&t.cost)
    )
}
