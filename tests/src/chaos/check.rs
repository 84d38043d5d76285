//! Journal checks shared by the serve suites: every turn's terminal
//! transitions and fences, read back over the SDK.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use lapis_protocol::client::Client;
use lapis_service::EventKind;

/// What the journal says about one turn.
#[derive(Debug, Default, Clone)]
pub(crate) struct TurnHistory {
    /// Terminal `turn_state` transitions (completed, failed, cancelled).
    pub(crate) terminal: Vec<String>,
    /// Whether the turn was ever fenced (submission_unknown, interrupted).
    pub(crate) fenced: bool,
    /// Whether the turn was ever dispatched (the boundary was persisted).
    pub(crate) dispatched: bool,
}

/// Replays every thread and collects each turn's history.
pub(crate) fn histories(
    client: &mut Client,
    threads: &[String],
) -> Result<BTreeMap<String, TurnHistory>> {
    let mut out: BTreeMap<String, TurnHistory> = BTreeMap::new();
    for thread in threads {
        let mut after = 0;
        loop {
            let page = client.journal_replay(Some(thread), after, Some(1000))?;
            for e in &page.events {
                let Some(turn) = &e.turn_id else { continue };
                if e.kind != EventKind::TurnState {
                    continue;
                }
                let to = lapis_e2e::journal::moved_to(e)
                    .map(|s| s.as_str().to_owned())
                    .unwrap_or_default();
                let h = out.entry(turn.clone()).or_default();
                match to.as_str() {
                    "completed" | "failed" | "cancelled" => h.terminal.push(to),
                    "submission_unknown" | "interrupted" => h.fenced = true,
                    "dispatched" | "running" => h.dispatched = true,
                    _ => {}
                }
            }
            if !page.more || page.events.is_empty() {
                break;
            }
            after = page.next_after;
        }
    }
    Ok(out)
}

/// Prompts recorded by the fixture agent's ledger (one per line) with
/// their delivery counts.
pub(crate) fn ledger(path: &std::path::Path) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
        *out.entry(line.to_owned()).or_insert(0) += 1;
    }
    out
}

/// Resolves every fenced turn of `turns` as failed (the owner confirming
/// the agent stopped); returns how many.
pub(crate) fn resolve_fenced(client: &mut Client, turns: &BTreeSet<String>) -> Result<usize> {
    let mut n = 0;
    for turn in turns {
        let t = client.turns_get(turn)?;
        if t.state.is_fenced() {
            client.turns_resolve(turn, lapis_protocol::ResolveAs::Failed, true)?;
            n += 1;
        }
    }
    Ok(n)
}
