//! What a person reads wherever a command meets a fence: the turn, its
//! application, since when, where the evidence is (`turns show`) and the
//! exact command that releases it.
//!
//! One wording for every path (`status`, a refused `ask` or `turns submit`,
//! a `--follow` queued behind a fence, a watched turn that ends fenced), so
//! the resolve command a person copies is the same everywhere and runs as
//! printed (`policy::` in the e2e suite executes it verbatim).

use lapis_protocol::client::Client;
use lapis_protocol::params::StatusTurn;

use crate::exit::CliError;

/// `PREFIX turns resolve TURN --as failed --confirm-stopped`.
pub(super) fn resolve_command(prefix: &str, turn: &str) -> String {
    format!("{prefix} turns resolve {turn} --as failed --confirm-stopped")
}

/// The sentence naming `fence` and what to do about it: `workspace W is
/// fenced by turn T of application A since S: see what it did with
/// `… turns show T`; once its agent no longer runs it, resolve it with
/// `…` (or `--as cancelled`)`. `evidence` is what changed since its
/// boundary (`; …`), when read, or empty.
pub(super) fn sentence(prefix: &str, fence: &StatusTurn, evidence: &str) -> String {
    let since = lapis_protocol::time::format_ms(fence.since);
    crate::terminal::safe(&format!(
        "workspace {} is fenced by turn {} of application {} ({} since {since}){evidence}: see what it did with `{prefix} turns show {}`; once its agent no longer runs it, resolve it with `{}` (or `--as cancelled`)",
        fence.workspace,
        fence.turn,
        fence.application,
        fence.state.as_str(),
        fence.turn,
        resolve_command(prefix, &fence.turn)
    ))
    .into_owned()
}

/// The fence of `workspace`, as `status` reports it (`None` when it is not
/// fenced or `status` does not answer).
pub(super) fn of_workspace(client: &mut Client, workspace: &str) -> Option<StatusTurn> {
    client
        .status()
        .ok()?
        .fences
        .into_iter()
        .find(|f| f.workspace == workspace)
}

/// A `workspace_fenced` refusal of a turn on `thread` told in full: the
/// fence of the thread's workspace and how to release it. Any other error
/// is returned as it was.
pub(super) fn explain(client: &mut Client, thread: &str, prefix: &str, err: CliError) -> CliError {
    if err.code != "workspace_fenced" {
        return err;
    }
    let fence = client
        .threads_get(thread)
        .ok()
        .and_then(|t| of_workspace(client, &t.thread.workspace_id));
    match fence {
        Some(fence) => CliError {
            error: anyhow::anyhow!("{}", sentence(prefix, &fence, "")),
            ..err
        },
        None => err,
    }
}

/// Said once when a watched turn waits in the queue of a fenced workspace:
/// it runs only after the fence is resolved.
pub(super) fn queued_behind(prefix: &str, turn: &str, fence: &StatusTurn) -> String {
    format!(
        "turn {turn} is queued behind a fence and runs once it is resolved: {}",
        sentence(prefix, fence, "")
    )
}

/// Added to the error of a watched turn that ended fenced (its outcome is
/// unknown): the same sentence, naming the turn itself.
pub(super) fn ended_fenced(prefix: &str, turn: &lapis_protocol::Turn, application: &str) -> String {
    sentence(
        prefix,
        &StatusTurn {
            turn: turn.id.clone(),
            thread: turn.thread_id.clone(),
            workspace: turn.workspace_id.clone(),
            application: application.to_owned(),
            state: turn.state,
            since: turn.finished_at.unwrap_or(turn.created_at),
        },
        "",
    )
}

/// On a terminal, after a `workspace_fenced` refusal of a turn on
/// `thread`: offers to resolve the fence there and then, with the
/// confirmation the seed requires (the person *types* `failed` or
/// `cancelled`, confirming its agent no longer runs it; anything else
/// leaves the fence). `Ok(true)` once resolved, so the caller submits
/// again; `Ok(false)` without a terminal (scripts get the refusal), with
/// `--json`, or when declined. `said` (the refusal's sentence) is shown
/// before the question.
pub(super) fn offer_resolve(
    client: &mut Client,
    thread: &str,
    json: bool,
    said: &str,
) -> Result<bool, CliError> {
    use std::io::{BufRead, IsTerminal};
    if json || !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Ok(false);
    }
    let Some(fence) = client
        .threads_get(thread)
        .ok()
        .and_then(|t| of_workspace(client, &t.thread.workspace_id))
    else {
        return Ok(false);
    };
    eprintln!("{said}");
    eprint!(
        "{}",
        crate::terminal::safe(&format!(
            "resolve turn {} now? Type `failed` or `cancelled` once its agent no longer runs it (Enter leaves the fence): ",
            fence.turn
        ))
    );
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(CliError::from)?;
    let resolve_as = match answer.trim() {
        "failed" => lapis_protocol::ResolveAs::Failed,
        "cancelled" => lapis_protocol::ResolveAs::Cancelled,
        _ => {
            eprintln!("left turn {} fenced", fence.turn);
            return Ok(false);
        }
    };
    client
        .turns_resolve_with(&lapis_protocol::params::TurnsResolve {
            turn_id: fence.turn.clone(),
            resolve_as,
            confirm_stopped: true,
            command_id: Some(super::command_id::fresh()?),
        })
        .map_err(super::connect::client_error)?;
    eprintln!(
        "resolved turn {} as {}; submitting again",
        fence.turn,
        answer.trim()
    );
    Ok(true)
}
