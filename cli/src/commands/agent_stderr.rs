//! The agent's own account of a failed turn: the `agent_stderr` observation
//! the runner journals when a turn fails setting up or with `agent_error`
//! (its last stderr lines, redacted and bounded; none on a metadata-only
//! thread). The follow prints it as it arrives; `turns show` and the error
//! of a watched turn that did not complete quote it. Printed terminal-safe
//! by the callers.

use lapis_protocol::client::Client;
use lapis_protocol::{JournalEvent, Observation, Payload};

use super::connect::client_error;
use crate::exit::CliError;

/// The payload of the last `observation` labelled `kind` that `turn` of
/// `thread` journaled at or after thread sequence `from` (`None` when
/// there is none, or its payload was not retained).
pub(super) fn noted_of_turn(
    client: &mut Client,
    thread: &str,
    turn: &str,
    kind: &str,
    from: u64,
) -> Result<Option<serde_json::Value>, CliError> {
    let mut found = None;
    let mut after = from.saturating_sub(1);
    loop {
        let page = client
            .journal_replay(Some(thread), after, None)
            .map_err(client_error)?;
        for e in &page.events {
            if e.turn_id.as_deref() != Some(turn) {
                continue;
            }
            if let Some(Payload::Observation(Observation::Noted { kind: k, payload })) = e.body()
                && k == kind
            {
                found = Some(payload);
            }
        }
        after = page.next_after;
        if !page.more {
            return Ok(found);
        }
    }
}

/// The stderr lines an `agent_stderr` observation carries (read through the
/// typed payload; the lines are the runner's `{"lines": [...]}`).
pub(super) fn lines(e: &JournalEvent) -> Option<Vec<String>> {
    let Some(Payload::Observation(Observation::Noted { kind, payload })) = e.body() else {
        return None;
    };
    if kind != lapis_service::acp::AGENT_STDERR {
        return None;
    }
    from_payload(payload)
}

fn from_payload(payload: serde_json::Value) -> Option<Vec<String>> {
    #[derive(serde::Deserialize)]
    struct Lines {
        lines: Vec<String>,
    }
    serde_json::from_value::<Lines>(payload)
        .ok()
        .map(|l| l.lines)
}

/// The last stderr lines journaled for `turn` of `thread` (empty when none).
pub(super) fn of_turn(
    client: &mut Client,
    thread: &str,
    turn: &str,
) -> Result<Vec<String>, CliError> {
    Ok(
        noted_of_turn(client, thread, turn, lapis_service::acp::AGENT_STDERR, 0)?
            .and_then(from_payload)
            .unwrap_or_default(),
    )
}

/// `message` followed by the agent's lines, for an error.
pub(super) fn with_lines(message: String, lines: &[String]) -> String {
    if lines.is_empty() {
        return message;
    }
    let mut text = format!("{message}\n  the agent's last stderr lines:");
    for line in lines {
        text.push_str("\n    ");
        text.push_str(line);
    }
    text
}
