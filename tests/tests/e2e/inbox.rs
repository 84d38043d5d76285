//! The durable permission inbox (issue 28): a request outlives the
//! application that asked, any application of the principal holding
//! `permissions:respond-any` answers it (once, idempotently by command id),
//! an answer to a settled request is `conflict` naming how it was settled,
//! expiry answers by policy and is recorded `expired`, and a restart (kill
//! -9 of the real `serve`) settles the requests of lost turns `abandoned`;
//! the attention stream carries them across applications and resumes
//! without gaps after a reconnect.

use lapis_protocol::client::{Client, ClientError};
use lapis_protocol::notifications::JournalNotice;
use lapis_protocol::params::{JournalSubscribe, PermissionsRespond};
use lapis_protocol::{AttentionKind, EventKind, Payload, PendingRequest, Settlement};
use serde_json::{Value, json};

use crate::cli_permissions::fixture;
use crate::policy::app;
use crate::serve_support::{NARROW, OWNER, Server};
use crate::serve_turns::kill_agents_in;
use lapis_e2e::wait::{eventually, settle};

/// A server whose `asker` asks once (allow once / reject once), waiting
/// `timeout` seconds for an answer.
fn asker(timeout: u64) -> Server {
    let mut asker = fixture(&[
        "--permissions",
        "1",
        "--perm-kinds",
        "allow_once,reject_once",
        "--chunks",
        "1",
    ]);
    asker["permissionTimeoutSeconds"] = json!(timeout);
    Server::start_full(json!({}), json!({ "asker": asker }))
}

/// Submits a turn on a new `asker` thread of `client`; returns (thread, turn).
fn ask(client: &mut Client) -> (String, String) {
    let thread = client
        .threads_create("proj", "asker", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, "ask-1", "go").unwrap();
    (thread.id, turn.id)
}

/// The request once `client` sees it pending.
fn pending(client: &mut Client, turn: &str) -> PendingRequest {
    eventually("the request is listed", || {
        client
            .permissions_list(None, Some(turn))
            .unwrap()
            .into_iter()
            .next()
    })
}

fn respond(turn: &str, option: &str, command: &str) -> PermissionsRespond {
    PermissionsRespond {
        turn_id: turn.to_owned(),
        request_id: "perm-0".to_owned(),
        option_id: option.to_owned(),
        command_id: Some(command.to_owned()),
    }
}

/// The refusal of an answer: (code, message, `data.settlement`).
fn refused(client: &mut Client, p: &PermissionsRespond) -> (String, String, Value) {
    match client.permissions_respond_with(p) {
        Err(ClientError::Rpc(e)) => (
            e.error_code()
                .map(|c| c.as_str().to_owned())
                .unwrap_or_default(),
            e.message.clone(),
            e.data
                .as_ref()
                .and_then(|d| d.get("settlement"))
                .cloned()
                .unwrap_or(Value::Null),
        ),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The `permission_decided` events of `thread`.
fn decisions(client: &mut Client, thread: &str) -> Vec<lapis_protocol::PermissionDecided> {
    let page = client.journal_replay(Some(thread), 0, Some(1000)).unwrap();
    page.events
        .iter()
        .filter(|e| e.kind == EventKind::PermissionDecided)
        .filter_map(|e| match e.body() {
            Some(Payload::PermissionDecided(d)) => Some(d),
            _ => None,
        })
        .collect()
}

#[test]
fn a_second_application_answers_after_the_first_left_and_the_answer_is_journaled_once() {
    // An hour to answer: the request waits whoever is connected.
    let server = asker(3600);
    let mut editor = app(&server, OWNER, "editor");
    let (thread, turn) = ask(&mut editor);
    let seen = pending(&mut editor, &turn);
    assert_eq!(seen.application, "editor");
    drop(editor);

    // A narrow application of the same principal (no
    // `permissions:respond-any`) sees nothing of it.
    let mut bot = app(&server, NARROW, "bot");
    assert!(bot.permissions_list(None, None).unwrap().is_empty());
    let (code, _, _) = refused(&mut bot, &respond(&turn, "opt-allow_once", "bot-1"));
    assert_eq!(code, "not_found");

    // The phone sees it, with where it comes from and until when.
    let mut phone = app(&server, OWNER, "phone");
    let listed = phone.permissions_list(None, None).unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    let r = &listed[0];
    assert_eq!(
        (r.id.as_str(), r.turn_id.as_str()),
        ("perm-0", turn.as_str())
    );
    assert_eq!(
        (r.workspace_id.as_str(), r.application.as_str()),
        ("proj", "editor")
    );
    assert!(
        r.deadline - r.requested_at >= 3_000_000,
        "the provider's timeout: {r:?}"
    );
    assert_eq!(*r, seen);
    let first = phone
        .permissions_respond_with(&respond(&turn, "opt-allow_once", "phone-1"))
        .unwrap();
    assert!(first.accepted && !first.replayed);
    // The same command again replays its receipt, touching nothing.
    let again = phone
        .permissions_respond_with(&respond(&turn, "opt-allow_once", "phone-1"))
        .unwrap();
    assert!(again.accepted && again.replayed);
    // The editor comes back to find its turn done.
    let mut editor = app(&server, OWNER, "editor");
    assert_eq!(settle(&mut editor, &turn).state.as_str(), "completed");
    // Another answer is a conflict naming how it was settled.
    let (code, message, settlement) =
        refused(&mut phone, &respond(&turn, "opt-reject_once", "phone-2"));
    assert_eq!(code, "conflict", "{message}");
    assert_eq!(settlement, json!(Settlement::Answered.as_str()));
    assert!(
        message.contains("answered by application `phone` with `opt-allow_once`"),
        "{message}"
    );
    // Journaled exactly once, naming the phone.
    let decided = decisions(&mut editor, &thread);
    let real: Vec<_> = decided.iter().filter(|d| d.decided_by.is_some()).collect();
    assert_eq!(real.len(), 1, "{decided:?}");
    assert_eq!(
        real[0].answered_by.as_ref().map(|a| a.application.as_str()),
        Some("phone")
    );
    assert_eq!(real[0].answer.label(), "opt-allow_once");
    server.finish(&[], &[]);
}

#[test]
fn an_unanswered_request_expires_by_policy_and_is_recorded_expired() {
    let server = asker(1);
    let mut client = server.client("editor");
    let (thread, turn) = ask(&mut client);
    // Nobody answers: the reject option is chosen, the turn goes on.
    assert_eq!(settle(&mut client, &turn).state.as_str(), "completed");
    let decided = decisions(&mut client, &thread);
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(
        decided[0].decided_by,
        Some(lapis_protocol::DecidedBy::Expired)
    );
    assert_eq!(decided[0].answer.label(), "opt-reject_once");
    let (code, message, settlement) =
        refused(&mut client, &respond(&turn, "opt-allow_once", "late-1"));
    assert_eq!(code, "conflict", "{message}");
    assert_eq!(settlement, json!("expired"));
    server.finish(&[], &[]);
}

/// A thread on `asker` with its own permission timeout.
fn thread_waiting(client: &mut Client, seconds: Option<u64>) -> String {
    let mut p = lapis_protocol::params::ThreadsCreate::new("proj", "asker");
    p.permission_timeout_seconds = seconds;
    client.threads_create_with(&p).unwrap().thread.id
}

/// `permissionTimeoutSeconds` of a thread: its own requests expire by
/// policy after it (the provider's hour notwithstanding) and are recorded
/// `expired`; another thread of the same provider keeps the provider's
/// timeout; a turn's deadline caps it; `threads configure` changes it and
/// `provider` removes it; `threads show` shows it; out of range is refused.
#[test]
fn a_threads_own_permission_timeout_expires_its_requests_by_policy() {
    let server = asker(3600);
    let mut client = server.client("lapis-cli");
    let quick = thread_waiting(&mut client, Some(1));
    assert_eq!(
        client
            .threads_get(&quick)
            .unwrap()
            .thread
            .permission_timeout_seconds,
        Some(1)
    );
    let turn = client.turns_submit(&quick, "q-1", "go").unwrap().id;
    assert_eq!(settle(&mut client, &turn).state.as_str(), "completed");
    let decided = decisions(&mut client, &quick);
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(
        decided[0].decided_by,
        Some(lapis_protocol::DecidedBy::Expired)
    );
    assert_eq!(decided[0].answer.label(), "opt-reject_once");
    let (code, message, settlement) =
        refused(&mut client, &respond(&turn, "opt-allow_once", "late-q"));
    assert_eq!(code, "conflict", "{message}");
    assert_eq!(settlement, json!("expired"));

    // The same provider, no timeout of its own: the provider's hour.
    let (_, patient) = ask(&mut client);
    let r = pending(&mut client, &patient);
    assert!(r.deadline - r.requested_at >= 3_000_000, "{r:?}");
    client.turns_cancel(&patient).unwrap();
    settle(&mut client, &patient);

    // An hour of its own, but a turn of 2 seconds: the deadline caps it.
    let long = thread_waiting(&mut client, Some(3600));
    let capped = client
        .turns_submit_with(&lapis_protocol::params::TurnsSubmit {
            thread_id: long.clone(),
            command_id: "l-1".into(),
            prompt: "go".into(),
            continues: None,
            max_turn_seconds: Some(2),
            expect: None,
        })
        .unwrap()
        .id;
    let r = pending(&mut client, &capped);
    assert!(r.deadline - r.requested_at <= 2_000, "{r:?}");
    settle(&mut client, &capped);

    // The CLI shows it and configures it; `provider` removes it.
    let shown = server.ctx.run(["threads", "show", &quick]);
    shown.success();
    assert!(
        shown.stdout.contains("permission timeout 1s\n"),
        "{}",
        shown.stdout
    );
    let version = client.threads_get(&quick).unwrap().thread.version;
    let v = version.to_string();
    let out = server.ctx.run([
        "threads",
        "configure",
        &quick,
        "--expected-version",
        &v,
        "--permission-timeout",
        "provider",
        "--json",
    ]);
    out.success();
    assert!(
        out.json()["thread"]
            .get("permissionTimeoutSeconds")
            .is_none()
    );
    let shown = server.ctx.run(["threads", "show", &quick]);
    assert!(
        shown.stdout.contains("permission timeout the provider's\n"),
        "{}",
        shown.stdout
    );
    let v = (version + 1).to_string();
    let out = server.ctx.run([
        "threads",
        "configure",
        &quick,
        "--expected-version",
        &v,
        "--permission-timeout",
        "30",
        "--json",
    ]);
    out.success();
    assert_eq!(out.json()["thread"]["permissionTimeoutSeconds"], 30);
    // Out of range, at creation and at configure: nothing is made or changed.
    let p =
        lapis_protocol::params::ThreadsCreate::new("proj", "asker").permission_timeout_seconds(0);
    let err = client.threads_create_with(&p).unwrap_err();
    assert_eq!(err.code(), "invalid_request", "{err}");
    let configure = lapis_protocol::params::ThreadsConfigure::new(&quick, version + 2)
        .permission_timeout_seconds(Some(604_801));
    let err = client.threads_configure(&configure).unwrap_err();
    assert_eq!(err.code(), "invalid_request", "{err}");
    let now = client.threads_get(&quick).unwrap().thread;
    assert_eq!(
        (now.version, now.permission_timeout_seconds),
        (version + 2, Some(30))
    );
    server.finish(&[], &[]);
}

#[test]
fn a_restart_settles_the_requests_of_lost_turns_abandoned() {
    let mut server = asker(3600);
    let mut client = server.client("editor");
    let (_, turn) = ask(&mut client);
    pending(&mut client, &turn);
    let status = server.ctx.run(["status", "--json"]).json();
    assert_eq!(status["permissions"]["pending"], 1, "{status}");
    assert_eq!(status["permissions"]["oldest"]["turnId"], turn.as_str());
    assert_eq!(status["permissions"]["oldest"]["requestId"], "perm-0");
    drop(client);
    server.kill9();
    kill_agents_in(&server.project);
    server.spawn();
    let mut client = server.client("editor");
    assert_eq!(
        settle(&mut client, &turn).state.as_str(),
        "submission_unknown"
    );
    assert!(client.permissions_list(None, None).unwrap().is_empty());
    let status = server.ctx.run(["status", "--json"]).json();
    assert_eq!(status["permissions"]["pending"], 0, "{status}");
    assert!(status["permissions"].get("oldest").is_none(), "{status}");
    let (code, message, settlement) =
        refused(&mut client, &respond(&turn, "opt-allow_once", "after-1"));
    assert_eq!(code, "conflict", "{message}");
    assert_eq!(settlement, json!("abandoned"));
    assert!(message.contains("submission_unknown"), "{message}");
    server.finish(&[], &[]);
}

/// The next attention event on `client`: (seq, kinds).
fn next_attention(client: &mut Client) -> (u64, Vec<AttentionKind>) {
    let (seq, kinds, _) = next_attention_of(client);
    (seq, kinds)
}

/// The next attention event on `client`: (seq, kinds, turn).
fn next_attention_of(client: &mut Client) -> (u64, Vec<AttentionKind>, Option<String>) {
    loop {
        let n = client
            .next_notification(Some(std::time::Duration::from_secs(60)))
            .unwrap()
            .expect("an attention event");
        if let Some(JournalNotice::Event(e)) = JournalNotice::parse(&n) {
            assert!(!e.attention.is_empty(), "only attention events: {e:?}");
            return (e.event.seq, e.attention, e.event.turn_id);
        }
    }
}

fn attention_from(server: &Server, application: &str, after: u64) -> Client {
    let mut client = app(server, OWNER, application);
    client
        .journal_subscribe_with(&JournalSubscribe {
            thread_id: None,
            after: Some(after),
            attention: true,
            present: false,
        })
        .unwrap();
    client
}

#[test]
fn the_attention_stream_spans_applications_and_resumes_without_gaps_after_a_reconnect() {
    use AttentionKind::*;
    let server = asker(3600);
    let mut phone = attention_from(&server, "phone", 0);
    let mut editor = app(&server, OWNER, "editor");
    let (_, turn) = ask(&mut editor);
    // The editor's request reaches the phone's stream.
    let (asked_at, kinds) = next_attention(&mut phone);
    assert_eq!(kinds, [PermissionRequested]);
    // The phone goes away; the request is answered meanwhile and the
    // turn finishes.
    drop(phone);
    editor
        .permissions_respond_with(&respond(&turn, "opt-allow_once", "ed-1"))
        .unwrap();
    assert_eq!(settle(&mut editor, &turn).state.as_str(), "completed");
    // Back from where it left off: the rest, in order, nothing twice.
    let mut phone = attention_from(&server, "phone", asked_at);
    let (settled_at, kinds) = next_attention(&mut phone);
    assert!(settled_at > asked_at);
    assert_eq!(kinds, [PermissionSettled]);
    let (finished_at, kinds) = next_attention(&mut phone);
    assert!(finished_at > settled_at);
    assert_eq!(
        kinds,
        [TurnFinished, WorkspaceIdle],
        "nothing else is queued"
    );
    // From the start, the same three events: no gap between the two halves.
    let mut whole = attention_from(&server, "tablet", 0);
    let seqs: Vec<u64> = (0..3).map(|_| next_attention(&mut whole).0).collect();
    assert_eq!(seqs, [asked_at, settled_at, finished_at]);
    // An application without `permissions:respond-any` hears only its own:
    // its first attention event is its own turn's end, none of the editor's.
    let mut bot = app(&server, NARROW, "bot");
    bot.journal_subscribe_with(&JournalSubscribe {
        thread_id: None,
        after: Some(0),
        attention: true,
        present: false,
    })
    .unwrap();
    let own = bot
        .threads_create("proj", "echo", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let own = bot.turns_submit(&own.id, "bot-1", "hi").unwrap();
    let (_, kinds, of) = next_attention_of(&mut bot);
    assert_eq!(of.as_deref(), Some(own.id.as_str()));
    assert_eq!(kinds, [TurnFinished, WorkspaceIdle]);
    server.finish(&[], &[]);
}
