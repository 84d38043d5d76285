//! The shared transcript functions (`lapis_protocol::transcript`) against a
//! journal the real server wrote: a consumer stores a thread's events (as
//! JSON, the way it would persist them), validates them against a fresh
//! replay, is told exactly where a tampered or incomplete copy differs,
//! and continues from the handoff projection.

use lapis_e2e::wait::settles_as;
use lapis_protocol::client::Client;
use lapis_protocol::transcript::{TranscriptError, assert_transcript, event_hash, handoff};
use lapis_protocol::{EventKind, JournalEvent, Retention, Thread, TurnState};
use serde_json::json;

use crate::serve_support::Server;

fn thread(client: &mut Client, retention: Option<Retention>) -> Thread {
    crate::acp_continue::thread(client, "echo", retention)
}

/// Every event of the thread, through as many replay pages as it takes.
fn replay(client: &mut Client, thread: &str) -> Vec<JournalEvent> {
    pages(client, Some(thread))
}

/// Every event of `thread` (or, with `None`, of the session's principal and
/// application), page by page.
fn pages(client: &mut Client, thread: Option<&str>) -> Vec<JournalEvent> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let page = client.journal_replay(thread, after, Some(3)).unwrap();
        out.extend(page.events);
        after = page.next_after;
        if !page.more {
            return out;
        }
    }
}

#[test]
fn a_stored_transcript_validates_against_the_servers_journal() {
    let mut server = Server::start_with(json!({}));
    let mut client = server.client("archiver");
    let t = thread(&mut client, None);
    for (n, prompt) in ["first question", "second question"].iter().enumerate() {
        let turn = client
            .turns_submit(&t.id, &format!("c-{n}"), prompt)
            .unwrap();
        settles_as(&mut client, &turn.id, "completed", Some("end_turn"));
    }
    let journal = replay(&mut client, &t.id);
    assert!(journal.len() > 6, "{journal:?}");

    // The consumer's copy went through its own storage (JSON here).
    let stored: Vec<JournalEvent> =
        serde_json::from_str(&serde_json::to_string(&journal).unwrap()).unwrap();
    let check = assert_transcript(&journal, &stored).unwrap();
    assert_eq!(check.verified, journal.len());
    assert_eq!(check.range, Some((1, journal.len() as u64)));
    assert!(check.unverified.is_empty());
    // Hashes are stable across replays and connections.
    let mut other = server.client("archiver");
    let again = replay(&mut other, &t.id);
    for (a, b) in journal.iter().zip(&again) {
        assert_eq!(event_hash(a), event_hash(b));
    }

    // A reply chunk edited in storage is found, by its sequence.
    let mut tampered = stored.clone();
    let chunk = tampered
        .iter_mut()
        .find(|e| e.kind == EventKind::MessageChunk)
        .unwrap();
    let at = chunk.thread_seq;
    chunk.payload.as_mut().unwrap()["content"]["text"] = json!("something else");
    chunk.payload.as_mut().unwrap()["text"] = json!("something else");
    assert_eq!(
        assert_transcript(&journal, &tampered),
        Err(TranscriptError::Hash { thread_seq: at })
    );
    // A lost event is a gap.
    let mut gappy = stored.clone();
    gappy.remove(2);
    assert!(matches!(
        assert_transcript(&journal, &gappy),
        Err(TranscriptError::Sequence { expected: 3, .. })
    ));

    // The handoff: what a consumer continues the thread from.
    let h = handoff(&stored);
    assert_eq!(h.thread_id, t.id);
    assert_eq!(h.last_thread_seq, journal.len() as u64);
    assert_eq!(h.turns.len(), 2);
    for (turn, prompt) in h.turns.iter().zip(["first question", "second question"]) {
        assert_eq!(turn.prompt.as_deref(), Some(prompt));
        // The echo agent replies with the prompt; its thought is left out.
        assert_eq!(turn.reply, prompt);
        assert_eq!(turn.state, Some(TurnState::Completed));
        assert_eq!(turn.outcome.as_deref(), Some("end_turn"));
        assert!(turn.unavailable.is_empty());
    }
    let text = serde_json::to_string(&h).unwrap();
    assert!(!text.contains("echoing"), "{text}");

    // Metadata-only: after a restart the journal has no content to compare,
    // and says so instead of passing it.
    let meta = thread(&mut client, Some(Retention::MetadataOnly));
    let turn = client.turns_submit(&meta.id, "m-1", "private").unwrap();
    settles_as(&mut client, &turn.id, "completed", Some("end_turn"));
    let kept = replay(&mut client, &meta.id);
    drop((client, other));
    server.stop();
    server.spawn();
    let mut client = server.client("archiver");
    // The thread's own replay refuses (it cannot be shown whole); the
    // owner-wide replay marks what is gone.
    let refused = client.journal_replay(Some(&meta.id), 0, None).unwrap_err();
    assert_eq!(refused.code(), "transcript_unavailable");
    let after_restart: Vec<JournalEvent> = pages(&mut client, None)
        .into_iter()
        .filter(|e| e.thread_id == meta.id)
        .collect();
    let check = assert_transcript(&after_restart, &kept).unwrap();
    let content: Vec<u64> = kept
        .iter()
        .filter(|e| e.kind.is_content())
        .map(|e| e.thread_seq)
        .collect();
    assert!(!content.is_empty());
    assert_eq!(check.unverified, content);
    assert_eq!(check.verified, kept.len() - content.len());
    let h = handoff(&after_restart);
    assert_eq!(h.turns[0].prompt, None);
    assert!(!h.turns[0].unavailable.is_empty());
    server.finish(&[], &[]);
}
