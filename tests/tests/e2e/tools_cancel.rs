//! A mutating tool call whose capture port answers `capture.begin` only
//! after the turn was cancelled (by its owner, or by its deadline) is
//! settled `failed` and never reaches `tools.invoke`: the application
//! holds `capture.begin` until the turn's durable cancel flag is set, then
//! acknowledges it, and must never see the invoke (only the capture's
//! `capture.finish`, which closes it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapis_e2e::wait::{settle, until};
use lapis_protocol::client::{CallbackError, Client, ToolHandler};
use lapis_protocol::params::TurnsSubmit;
use lapis_protocol::tools::{CaptureNotice, ToolInvoke, ToolOutput};
use lapis_protocol::{ErrorCode, Payload, ToolCallOutcome};
use serde_json::json;

use crate::policy::app;
use crate::serve_support::{OWNER, Server};
use crate::tools::{agent, create, crm, tickets};

/// What the application saw, in order.
type Seen = Arc<Mutex<Vec<String>>>;

/// A `crm` whose `capture.begin` waits for the test's word.
struct Stalled {
    /// What it saw.
    seen: Seen,
    /// One message releases one `capture.begin`.
    release: mpsc::Receiver<()>,
}

impl ToolHandler for Stalled {
    fn invoke(&mut self, call: &ToolInvoke) -> Result<ToolOutput, CallbackError> {
        self.seen
            .lock()
            .unwrap()
            .push(format!("invoke {}", call.tool));
        Ok(ToolOutput {
            text: "ran".into(),
            ..Default::default()
        })
    }
    fn capture_begin(&mut self, n: &CaptureNotice) -> Result<(), CallbackError> {
        self.seen.lock().unwrap().push(format!("begin {}", n.tool));
        // Answered late, but answered: an acknowledgement, not a refusal.
        let _ = self.release.recv();
        Ok(())
    }
    fn capture_finish(&mut self, n: &CaptureNotice) -> Result<(), CallbackError> {
        self.seen.lock().unwrap().push(format!("finish {}", n.tool));
        Ok(())
    }
}

/// Starts the turn `call crm__update` (with `max_turn_seconds`), waits until
/// `capture.begin` is held, has `stop` cancel it (or not), waits for the
/// durable cancel flag, releases `capture.begin`, and checks that the call
/// was settled `failed` with no invoke.
fn stalled_capture_past(max_turn_seconds: Option<u64>, stop: impl FnOnce(&mut Client, &str)) {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("mcp");
    let server = Server::start_full(json!({}), json!({ "tooled": agent(&ledger) }));
    let mut endpoint = app(&server, OWNER, "lapis-cli");
    endpoint.tools_register(crm()).unwrap();
    let seen: Seen = Arc::default();
    let (release, held) = mpsc::channel();
    let mut handler = Stalled {
        seen: seen.clone(),
        release: held,
    };
    let done = Arc::new(AtomicBool::new(false));
    let serving = {
        let done = done.clone();
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                if endpoint
                    .serve_tools(&mut handler, Some(Duration::from_millis(50)))
                    .is_err()
                {
                    break;
                }
            }
            endpoint
        })
    };
    let mut driver = app(&server, OWNER, "lapis-cli");
    let thread = create(&mut driver, false, &["crm"]).unwrap();
    let turn = driver
        .turns_submit_with(&TurnsSubmit {
            thread_id: thread.clone(),
            command_id: "c1".into(),
            prompt: "call crm__update {\"id\":1}".into(),
            continues: None,
            max_turn_seconds,
            expect: None,
        })
        .unwrap();
    until("capture.begin to be held", || {
        seen.lock().unwrap().iter().any(|s| s == "begin update")
    });
    stop(&mut driver, &turn.id);
    until("the turn's durable cancel flag", || {
        driver.turns_get(&turn.id).unwrap().cancel_requested
    });
    release.send(()).unwrap();
    // The call settles before the turn does: its finish is journaled.
    let finished = lapis_e2e::wait::eventually("the call's finish", || {
        let page = driver.journal_replay(Some(&thread), 0, None).unwrap();
        page.events.iter().find_map(|e| match e.body() {
            Some(Payload::ToolCallFinished(f)) => Some(f.clone()),
            Some(Payload::Observation(lapis_protocol::Observation::LateAppend(l)))
                if l.late == lapis_protocol::EventKind::ToolCallFinished =>
            {
                match Payload::from_value(l.late, l.data.clone()) {
                    Payload::ToolCallFinished(f) => Some(f),
                    _ => None,
                }
            }
            _ => None,
        })
    });
    assert_eq!(finished.outcome, ToolCallOutcome::Failed, "{finished:?}");
    assert_eq!(finished.code, Some(ErrorCode::ToolCallFailed));
    settle(&mut driver, &turn.id);
    done.store(true, Ordering::SeqCst);
    drop(serving.join().unwrap());
    // The capture that began is closed; the tool never ran.
    assert_eq!(
        *seen.lock().unwrap(),
        ["begin update", "finish update"],
        "the tool was never invoked"
    );
    let tickets = tickets(&ledger);
    server.finish(&[], &tickets);
}

#[test]
fn a_cancel_while_capture_begin_waits_settles_the_call_failed_and_never_invokes() {
    stalled_capture_past(None, |driver, turn| {
        driver.turns_cancel(turn).unwrap();
    });
}

#[test]
fn a_deadline_while_capture_begin_waits_settles_the_call_failed_and_never_invokes() {
    // Nobody cancels: the turn's one-second deadline does, while the
    // application holds `capture.begin` (for as long as it takes).
    stalled_capture_past(Some(1), |_, _| {});
}
