//! Kill -9 of `serve` at every step of a mutating application tool call
//! (the controller's `LAPIS_TOOL_FAULT_PAUSE` test hook stops the call
//! exactly there): across the restart the application's handler runs at
//! most once, and the turn records an unknown tool effect exactly when the
//! journal cannot say what the call did — from the committed request up to
//! the committed finish, whether or not the handler ran (the journal holds
//! no durable mark of capture begin: proving "never ran" would cost a third
//! commit per call). Once `tool_call_finished` is committed the call is
//! finished, whatever became of the turn.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lapis_e2e::TestContext;
use lapis_e2e::wait::until;
use lapis_protocol::params::TurnsContinue;
use lapis_protocol::{Payload, ResolveAs, ToolCallOutcome, TurnState};
use serde_json::json;

use crate::policy::{app, settle};
use crate::serve_support::{OWNER, Server};
use crate::tools::{agent, create, serve_crm, tickets};

/// The hook's variable (`service/src/tools/fault.rs`).
const PAUSE: &str = "LAPIS_TOOL_FAULT_PAUSE";

/// Kills the controller at `step` of `crm__update`, restarts it with the
/// application back, and checks the call's record: `seen_before_kill` is
/// what the application saw of the call (callback and tool), `unknown`
/// whether the turn must carry an unknown tool effect.
fn kill_at(step: &str, seen_before_kill: &[&str], unknown: bool) {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("mcp");
    let mut ctx = TestContext::new();
    ctx.set_env(PAUSE, step);
    let mut server = Server::start_in(ctx, json!({}), json!({ "tooled": agent(&ledger) }));
    let stop = Arc::new(AtomicBool::new(false));
    let (seen, serving) = serve_crm(&server, "lapis-cli", stop.clone());
    let mut driver = app(&server, OWNER, "lapis-cli");
    let thread = create(&mut driver, false, &["crm"]).unwrap();
    let turn = driver
        .turns_submit(&thread, "c1", "call crm__update {\"id\":7}")
        .unwrap();
    let marker = format!("lapis-fault-pause: tool-call {step}\n");
    until(&format!("the call to pause at {step}"), || {
        server.log_text().contains(&marker)
    });
    server.kill9();
    stop.store(true, Ordering::SeqCst);
    drop(serving.join());
    let before: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        before, seen_before_kill,
        "what the application saw at {step}"
    );

    // Back without the hook, the application registered again.
    server.ctx.unset_env(PAUSE);
    server.spawn();
    let stop = Arc::new(AtomicBool::new(false));
    let (again, serving) = serve_crm(&server, "lapis-cli", stop.clone());
    let mut driver = app(&server, OWNER, "lapis-cli");
    let got = driver.turns_get(&turn.id).unwrap();
    assert_eq!(got.state, TurnState::SubmissionUnknown, "{step}: {got:?}");
    let page = driver.journal_replay(Some(&thread), 0, None).unwrap();
    let requested: Vec<_> = page
        .events
        .iter()
        .filter_map(|e| match e.body() {
            Some(Payload::ToolCallRequested(r)) => Some(r),
            _ => None,
        })
        .collect();
    let finished: Vec<_> = page
        .events
        .iter()
        .filter_map(|e| match e.body() {
            Some(Payload::ToolCallFinished(f)) => Some(f),
            _ => None,
        })
        .collect();
    assert_eq!(requested.len(), 1, "{step}: {requested:?}");
    let shown = server.ctx.run(["turns", "show", &turn.id, "--json"]).json();
    let effects = shown["unknownToolEffects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let status = server.ctx.run(["status", "--json"]).json();
    let in_status = status["unknownToolEffects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if unknown {
        assert!(finished.is_empty(), "{step}: {finished:?}");
        assert_eq!(effects.len(), 1, "{step}: {shown}");
        assert_eq!(effects[0]["callId"], requested[0].call_id.as_str());
        assert_eq!(effects[0]["tool"], "update");
        assert_eq!(in_status.len(), 1, "{step}: {status}");
    } else {
        assert_eq!(finished.len(), 1, "{step}: {finished:?}");
        assert_eq!(finished[0].outcome, ToolCallOutcome::Ok);
        assert!(effects.is_empty(), "{step}: {shown}");
        assert!(in_status.is_empty(), "{step}: {status}");
    }

    // Resolved by its owner; continued only when no effect is unknown. The
    // next turn calls the same endpoint, so a controller that would call
    // `update` again had its chance before that turn settles.
    driver
        .turns_resolve(&turn.id, ResolveAs::Failed, true)
        .unwrap();
    let next = "call crm__find {\"q\":\"after\"}";
    let continued = driver.turns_continue(&TurnsContinue {
        turn_id: turn.id.clone(),
        prompt: next.into(),
        command_id: "c2".into(),
        max_turn_seconds: None,
        expect: None,
    });
    let next_turn = match continued {
        Ok(t) => {
            assert!(!unknown, "{step}: continued past an unknown effect");
            t
        }
        Err(e) => {
            assert!(unknown, "{step}: {e}");
            assert_eq!(e.code(), "tool_effect_unknown", "{step}: {e}");
            driver.turns_submit(&thread, "c3", next).unwrap()
        }
    };
    assert_eq!(
        settle(&mut driver, &next_turn.id).state,
        TurnState::Completed
    );
    stop.store(true, Ordering::SeqCst);
    drop(serving.join());
    let after: Vec<String> = again.lock().unwrap().clone();
    assert_eq!(after.len(), 1, "{step}: only the next call: {after:?}");
    assert!(after[0].starts_with("invoke find "), "{step}: {after:?}");
    let invoked = before.iter().filter(|s| s.starts_with("invoke")).count();
    assert!(invoked <= 1, "{step}: the handler ran {invoked} times");
    let tickets = tickets(&ledger);
    server.finish(&[], &tickets);
}

#[test]
fn killed_before_capture_begin_nothing_ran_and_the_effect_is_still_unknown() {
    kill_at("before-begin", &[], true);
}

#[test]
fn killed_after_capture_begin_the_tool_never_runs_and_the_effect_is_unknown() {
    kill_at("after-begin", &["begin update"], true);
}

#[test]
fn killed_after_invoke_the_tool_ran_once_and_the_effect_is_unknown() {
    kill_at("after-invoke", &["begin update", "invoke update"], true);
}

#[test]
fn killed_after_capture_finish_before_the_result_is_journaled_the_effect_is_unknown() {
    kill_at(
        "after-capture-finish",
        &["begin update", "invoke update", "finish update"],
        true,
    );
}

#[test]
fn killed_after_the_finish_is_journaled_the_call_is_finished_and_may_be_continued() {
    kill_at(
        "after-finish",
        &["begin update", "invoke update", "finish update"],
        false,
    );
}
