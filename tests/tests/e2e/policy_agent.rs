//! Agent requests this client does not serve (issue 14, item 8): answered
//! with a JSON-RPC error at once and observed in the journal, also when the
//! agent sends one between turns, while it waits idle in the pool.

use lapis_protocol::{Note, Observation, Payload, TurnState, UnsupportedRequest};
use serde_json::json;

use crate::acp::arg;
use crate::policy::{app, fixture, settle};
use crate::serve_support::{OWNER, Server};

#[test]
fn a_request_from_an_idle_agent_is_refused_at_once_and_journaled() {
    let scratch = tempfile::tempdir().unwrap();
    let answers = scratch.path().join("answers");
    let pidfile = scratch.path().join("pid");
    let mut idle = fixture(&[
        "--idle-request",
        &arg(&answers),
        "--pidfile",
        &arg(&pidfile),
    ]);
    idle["idleSeconds"] = json!(600);
    let server = Server::start_full(json!({}), json!({ "idle": idle }));
    let mut c = app(&server, OWNER, "idler");
    let thread = c
        .threads_create("proj", "idle", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let first = c.turns_submit(&thread.id, "i-1", "one").unwrap();
    assert_eq!(settle(&mut c, &first.id).state, TurnState::Completed);

    // No turn runs, and none is submitted: the answer still arrives (before,
    // it waited until the agent's next use).
    let answer = lapis_e2e::wait::eventually("the idle request's answer", || {
        std::fs::read_to_string(&answers)
            .ok()
            .filter(|text| !text.is_empty())
    });
    assert_eq!(answer.trim(), r#"idle-0={"error":-32603}"#);

    // Observed on the turn the agent last ran (a late observation when that
    // turn's end was recorded first: the slot is released before the end is
    // reported), naming the method and that the agent was idle.
    let observed = lapis_e2e::wait::eventually("the idle request's observation", || {
        let page = c.journal_replay(Some(&thread.id), 0, None).unwrap();
        page.events
            .iter()
            .filter(|e| e.turn_id.as_deref() == Some(first.id.as_str()))
            .filter_map(lapis_e2e::journal::observation)
            .find_map(|o| match o {
                // Late when the store had recorded the turn's end first; a
                // plain observation of that turn when the agent was idle
                // (its turn over) before the end was recorded.
                Observation::Note(Note::UnsupportedRequest(r)) => Some(r),
                Observation::LateAppend(late) => match Payload::from_value(late.late, late.data) {
                    Payload::Observation(Observation::Note(Note::UnsupportedRequest(r))) => Some(r),
                    _ => None,
                },
                _ => None,
            })
    });
    assert_eq!(
        observed,
        UnsupportedRequest {
            method: "fs/read_text_file".into(),
            idle: true
        },
        "{observed:?}"
    );
    assert_eq!(
        c.turns_get(&first.id).unwrap().state,
        TurnState::Completed,
        "an observation changes nothing"
    );

    // The agent stays usable: the next turn goes to the same process.
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    let second = c.turns_submit(&thread.id, "i-2", "two").unwrap();
    assert_eq!(settle(&mut c, &second.id).state, TurnState::Completed);
    assert_eq!(std::fs::read_to_string(&pidfile).unwrap(), pid);
    server.finish(&[], &[]);
}
