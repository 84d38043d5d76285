//! The agent's own account of a failed turn: the `agent_stderr` observation
//! the runner journals when a turn fails (before or after dispatch) or its
//! outcome is unknown (its last stderr lines, redacted, at most 4 KiB; none
//! on a metadata-only thread). The follow prints it as it arrives; `turns show` and the error
//! of a watched turn that did not complete quote it. Printed terminal-safe
//! by the callers.

use lapis_protocol::client::Client;
use lapis_protocol::{JournalEvent, Note, Observation, Payload};

use super::connect::client_error;
use crate::exit::CliError;

/// The stderr lines an `agent_stderr` note carries.
pub(super) fn lines(e: &JournalEvent) -> Option<Vec<String>> {
    match e.body()? {
        Payload::Observation(Observation::Note(Note::AgentStderr(tail))) => Some(tail.lines),
        _ => None,
    }
}

/// The last stderr lines journaled for `turn` of `thread` (empty when
/// none, and when the thread is not this session's to read: another
/// application's fenced turn, which the owner's CLI sees through
/// `turns:resolve-any`, shows without them).
pub(super) fn of_turn(
    client: &mut Client,
    thread: &str,
    turn: &str,
) -> Result<Vec<String>, CliError> {
    let mut found = Vec::new();
    let mut after = 0;
    loop {
        let page = match client.journal_replay(Some(thread), after, None) {
            Ok(page) => page,
            Err(e) if e.code() == "not_found" && after == 0 => return Ok(found),
            Err(e) => return Err(client_error(e)),
        };
        for e in &page.events {
            if e.turn_id.as_deref() == Some(turn)
                && let Some(l) = lines(e)
            {
                found = l;
            }
        }
        after = page.next_after;
        if !page.more {
            return Ok(found);
        }
    }
}

/// What the agent reported about `turn`'s restricted mode request: its
/// `restricted_mode` note, journaled during setup after the turn's
/// `user_message` at thread sequence `from` (`None` when there is none or
/// its payload was not retained).
pub(super) fn restricted_mode_of_turn(
    client: &mut Client,
    thread: &str,
    turn: &str,
    from: u64,
) -> Result<Option<lapis_protocol::RestrictedMode>, CliError> {
    let mut after = from.saturating_sub(1);
    loop {
        let page = client
            .journal_replay(Some(thread), after, None)
            .map_err(client_error)?;
        for e in page
            .events
            .iter()
            .filter(|e| e.turn_id.as_deref() == Some(turn))
        {
            if let Some(Payload::Observation(Observation::Note(Note::RestrictedMode(m)))) = e.body()
            {
                return Ok(Some(m));
            }
        }
        after = page.next_after;
        if !page.more {
            return Ok(None);
        }
    }
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
