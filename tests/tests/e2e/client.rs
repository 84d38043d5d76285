//! The client SDK against a real server process.

use std::time::Duration;

use lapis_protocol::client::{Client, ClientError, Credential};
use lapis_protocol::notifications::JOURNAL_EVENT as EVENT;

use crate::serve_support::{OWNER, Server};

fn token(app: &str) -> Credential {
    Credential::Token {
        token: OWNER.to_owned(),
        application: app.to_owned(),
    }
}

#[test]
fn reconnect_keeps_the_session_and_never_resends() {
    let mut server = Server::start();
    let mut client = Client::open(&server.socket(), token("sdk")).unwrap();
    let session = client.session().unwrap().id.clone();
    let bearer = client
        .bearer()
        .expect("first hello issues a bearer")
        .to_owned();
    let thread = client
        .threads_create(
            "proj",
            "echo",
            lapis_protocol::ApprovalPolicy::Ask,
            Some("t-1"),
        )
        .unwrap();
    let turn = client
        .turns_submit(&thread.id, "c-1", "prompt one")
        .unwrap();

    // Restart the server: the session is persisted, so the bearer resumes it.
    server.stop();
    let err = client.status().unwrap_err();
    assert!(matches!(err, ClientError::Disconnected { .. }), "{err:?}");
    server.spawn();
    let resumed = client.reconnect().unwrap();
    assert_eq!(resumed.session.id, session);
    assert!(resumed.bearer.is_none());
    // Nothing was resent: still exactly one turn, and resubmitting with the
    // same command id returns it instead of creating another.
    assert_eq!(client.turns_list(Some(&thread.id)).unwrap().len(), 1);
    let again = client
        .turns_submit(&thread.id, "c-1", "prompt one")
        .unwrap();
    assert_eq!(again.id, turn.id);
    let clash = client
        .turns_submit(&thread.id, "c-1", "prompt two")
        .unwrap_err();
    assert_eq!(clash.code(), "conflict");
    // Idempotent thread creation too.
    let same = client
        .threads_create(
            "proj",
            "echo",
            lapis_protocol::ApprovalPolicy::Ask,
            Some("t-1"),
        )
        .unwrap();
    assert_eq!(same.id, thread.id);
    // A token hello from a second client resumes the same session.
    let other = Client::open(&server.socket(), token("sdk")).unwrap();
    assert_eq!(other.session().unwrap().id, session);
    assert!(other.bearer().is_none());
    // Once revoked, a reconnect cannot silently become another identity.
    client.sessions_revoke(None).unwrap();
    let err = client.reconnect().unwrap_err();
    assert_eq!(err.code(), "session_changed", "{err:?}");
    server.finish(&[], &[bearer]);
}

#[test]
fn subscription_streams_committed_events_in_order() {
    let server = Server::start();
    let mut writer = Client::open(&server.socket(), token("sdk")).unwrap();
    let thread = writer
        .threads_create("proj", "echo", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let mut reader = Client::open(&server.socket(), token("sdk")).unwrap();
    // Catch up from the start, then follow live.
    let sub = reader.journal_subscribe(Some(&thread.id), Some(0)).unwrap();
    for i in 0..5 {
        writer
            .turns_submit(&thread.id, &format!("s-{i}"), "p")
            .unwrap();
    }
    // The engine runs the turns meanwhile, so other kinds interleave; what
    // must hold is order without gaps or duplicates, from the first event.
    let mut seqs = Vec::new();
    let mut kinds = Vec::new();
    while kinds.iter().filter(|k| *k == "turn_submitted").count() < 5 {
        let n = reader
            .next_notification(Some(Duration::from_secs(30)))
            .unwrap()
            .expect("an event within the wait");
        assert_eq!(n.method, EVENT);
        assert_eq!(n.params["subscription"], sub.as_str());
        seqs.push(n.params["event"]["threadSeq"].as_u64().unwrap());
        kinds.push(n.params["event"]["kind"].as_str().unwrap().to_owned());
    }
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "gap-free, in order, no duplicates");
    assert_eq!(kinds[0], "thread_created");
    // Calls interleave with the stream.
    assert_eq!(reader.turns_list(Some(&thread.id)).unwrap().len(), 5);
    // Another application, with a token of its own, cannot subscribe to
    // the thread (the owner's token sees every application: `tokens::`).
    let secret = crate::tokens::add_token(&server, "other", "other-app", &[]);
    let mut intruder = Client::open(
        &server.socket(),
        Credential::Token {
            token: secret,
            application: "other-app".to_owned(),
        },
    )
    .unwrap();
    let err = intruder
        .journal_subscribe(Some(&thread.id), None)
        .unwrap_err();
    assert_eq!(err.code(), "not_found");
    server.finish(&[], &[]);
}
