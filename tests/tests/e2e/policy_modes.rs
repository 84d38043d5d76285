//! Restricted threads through the real binary: the provider's
//! `restrictedMode` is requested with `session/set_mode` and what the agent
//! did is recorded (applied, unsupported, rejected, unreported); anything
//! but applied fails before the dispatch boundary unless allowUnrestricted.

use lapis_protocol::client::Client;
use lapis_protocol::{ModeResult, Note, RestrictedMode, TurnState};
use serde_json::{Value, json};

use crate::acp::arg;
use crate::policy::{app, fixture, settle};
use crate::serve_support::{OWNER, Server};

/// The `restricted_mode` observation of a turn.
fn mode_observation(client: &mut Client, thread: &str, turn: &str) -> Option<RestrictedMode> {
    let page = client.journal_replay(Some(thread), 0, None).unwrap();
    page.events
        .into_iter()
        .filter(|e| e.turn_id.as_deref() == Some(turn))
        .find_map(|e| match lapis_e2e::journal::note(&e)? {
            Note::RestrictedMode(m) => Some(m),
            _ => None,
        })
}

#[test]
fn restricted_threads_request_the_providers_mode_and_record_what_the_agent_did() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("modes");
    let with = |args: &[&str], extra: Value| {
        let mut p = fixture(args);
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let l = arg(&ledger);
    let server = Server::start_full(
        json!({}),
        json!({
            "plan": with(&["--advertise", "--mode-ledger", &l], json!({"restrictedMode": "plan"})),
            "absent": with(&["--advertise", "--mode-ledger", &l], json!({"restrictedMode": "read-only"})),
            "refuses": with(&["--advertise", "--reject-mode", "--mode-ledger", &l], json!({"restrictedMode": "plan"})),
            "unimplemented": with(&["--advertise", "--no-set-mode"], json!({"restrictedMode": "plan"})),
            "silent": with(&["--mode-ledger", &l], json!({"restrictedMode": "plan"})),
            "lenient": with(&["--mode-ledger", &l], json!({"restrictedMode": "plan", "allowUnrestricted": true})),
            "nomode": with(&["--advertise"], json!({})),
        }),
    );
    let mut c = app(&server, OWNER, "restricter");
    let mut run = |provider: &str, restricted: bool| {
        let t = c
            .call_value(
                "threads.create",
                json!({ "workspaceId": "proj", "provider": provider, "restricted": restricted }),
            )
            .unwrap();
        let thread = t["thread"]["id"].as_str().unwrap().to_owned();
        let turn = c
            .turns_submit(&thread, &format!("{provider}-{restricted}"), "go")
            .unwrap();
        let done = settle(&mut c, &turn.id);
        let seen = mode_observation(&mut c, &thread, &turn.id);
        (done, seen)
    };
    let (done, seen) = run("plan", true);
    assert_eq!(done.state, TurnState::Completed);
    let seen = seen.unwrap();
    assert_eq!(
        (seen.mode.as_deref(), seen.result),
        (Some("plan"), ModeResult::Applied)
    );
    for (provider, result) in [
        ("absent", ModeResult::Unsupported),
        ("refuses", ModeResult::Rejected),
        ("unimplemented", ModeResult::Unsupported),
        ("silent", ModeResult::Unreported),
        ("nomode", ModeResult::Unsupported),
    ] {
        let (done, seen) = run(provider, true);
        assert_eq!(done.state, TurnState::Failed, "{provider}");
        assert_eq!(
            done.outcome.as_deref(),
            Some("restricted_mode_unavailable"),
            "{provider}"
        );
        assert_eq!(
            done.dispatched_at, None,
            "{provider}: failed before the boundary"
        );
        assert_eq!(seen.unwrap().result, result, "{provider}");
    }
    // Allowed to run without the mode: recorded as such, still completes.
    let (done, seen) = run("lenient", true);
    assert_eq!(done.state, TurnState::Completed);
    let seen = seen.unwrap();
    assert_eq!(seen.result, ModeResult::Unreported);
    assert!(seen.runs_unrestricted);
    // An unrestricted thread never asks for a mode.
    let (done, seen) = run("refuses", false);
    assert_eq!(done.state, TurnState::Completed);
    assert!(seen.is_none());
    // Only applied/rejected requests reached the agents: the mode was never
    // asked of an agent that does not offer it or reports no modes.
    let asked = std::fs::read_to_string(&ledger).unwrap();
    assert_eq!(asked.lines().collect::<Vec<_>>(), ["plan", "plan"]);
    server.finish(&[], &[]);
}
