//! A thread's transcript store: the prompt appended before the dispatch
//! boundary, the agent's output fed to it as it is journaled, and content
//! fetched back (and checked) for a replay after a restart.
//!
//! What must stay true:
//! - a turn of a thread that binds a store reaches its agent only after
//!   the store acknowledged the prompt within its deadline
//!   ([`Feed::start`] answers only then); a gone, revoked, late, refusing
//!   or malformed store fails the turn before the boundary, and a cancel
//!   while it answers abandons the append (the turn is cancelled before
//!   dispatch, its feed never starts);
//! - appends to one thread's store are made in journal order, one at a
//!   time, by one task per turn holding the thread's [`Lanes`] lock, so a
//!   slow store delays only its own thread's next prompt — never the
//!   single writer, never the agent's stream; a feed that falls behind the
//!   journal's broadcast reads what it skipped back from the journal
//!   (content still in memory), never appending one event twice;
//! - an output append that fails cannot un-run the turn: the event's
//!   content is then missing from the store, the owner log says so (by
//!   sequence, never content), and a replay after a restart reports that
//!   event `payloadUnavailable` (`transcript_unavailable`);
//! - an event that authorizes something (a permission answer that selects
//!   an option) reaches the agent only once the store acknowledged its
//!   append ([`Gate::acknowledged`]): a refused, late or lost append, or a
//!   feed that ended first, fails closed; a tool result whose turn is
//!   cancelled while it waits never reaches the agent
//!   ([`Gate::result_acknowledged`]), and the turn ends cancelled;
//! - a fetched payload is shown only when the canonical hash of the event
//!   it completes is the one recorded at journaling ([`verify`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, oneshot, watch};

use lapis_protocol::callback;
use lapis_protocol::context::PortRefusal;
use lapis_protocol::transcript::event_hash;
use lapis_protocol::transcript::store::{
    MAX_FETCH, TranscriptAppend, TranscriptFetch, TranscriptPayloads, TranscriptRegister,
};

use super::Tools;
use super::memory::envelope;
use super::registry::{Endpoint, PortOwner};
use crate::domain::{EventKind, JournalEvent, Thread};
use crate::store::Store;

fn failed(port: &str, why: &'static str) -> PortRefusal {
    PortRefusal::TranscriptStoreFailed {
        port: port.to_owned(),
        why,
    }
}

/// The store `port` of `thread`'s own application, if registered now.
pub(crate) fn port_of(
    tools: &Tools,
    thread: &Thread,
    port: &str,
) -> Result<Endpoint<TranscriptRegister>, PortRefusal> {
    tools
        .registry
        .owned::<TranscriptRegister>(PortOwner::thread(thread), port)
}

/// `transcript.append` of one event, awaited (its deadline, revocation or
/// the connection's close end the wait).
async fn append(
    endpoint: &Endpoint<TranscriptRegister>,
    thread: &Thread,
    event: &JournalEvent,
) -> Result<(), PortRefusal> {
    let port = &endpoint.spec.port;
    let hash = event_hash(event).ok_or_else(|| failed(port, "the event's content is gone"))?;
    let call = TranscriptAppend {
        port: port.clone(),
        envelope: envelope(thread),
        event: event.clone(),
        hash: hash.as_str().to_owned(),
    };
    endpoint
        .call::<callback::TranscriptAppend>(&call, endpoint.spec.deadline())
        .await
        .map(|_| ())
        .map_err(|e| failed(port, e.why()))
}

/// One lock per thread: appends to a thread's store are never interleaved.
#[derive(Debug, Clone, Default)]
pub(crate) struct Lanes(Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>);

impl Lanes {
    fn lane(&self, thread: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // Lanes nobody holds or waits for are dropped as others are made.
        map.retain(|_, l| Arc::strong_count(l) > 1);
        map.entry(thread.to_owned()).or_default().clone()
    }
}

/// A turn's feed to its thread's store; dropping it (after the turn's end
/// is committed, or on any early exit) lets the feed drain what was
/// journaled so far and end.
#[derive(Debug)]
pub(crate) struct Feed {
    /// Flipped on drop.
    stop: watch::Sender<bool>,
    /// What the feed has handed on so far ([`Self::gate`]).
    acks: watch::Receiver<Acks>,
    /// The store's name, for refusals.
    port: String,
    /// Shared by the feed's gates ([`Gate::refused`]).
    refused: Arc<Mutex<Option<PortRefusal>>>,
}

/// A feed's progress: every event of the thread up to `through` was
/// handled (appended, failed, passed over or lost), and the authorizing
/// ones among them that the store acknowledged.
#[derive(Debug, Clone, Default)]
struct Acks {
    /// The last `thread_seq` handled.
    through: u64,
    /// Authorizing events ([`authorizes`]) acknowledged, by `thread_seq`.
    acked: std::collections::BTreeSet<u64>,
}

/// Whether an event authorizes something the agent acts on, so it reaches
/// the agent only after the store acknowledged it: a permission answer
/// that selects an option, and an application tool call's result (its
/// `tool_call_finished` note, outcome `ok` or `error`). (A `cancelled`
/// answer, a failed call, authorize nothing.)
pub(crate) fn authorizes(e: &JournalEvent) -> bool {
    match e.body() {
        Some(lapis_protocol::Payload::PermissionDecided(d)) => {
            matches!(d.answer, lapis_protocol::PermissionAnswer::Selected { .. })
        }
        Some(lapis_protocol::Payload::ToolCallFinished(f)) => matches!(
            f.outcome,
            lapis_protocol::ToolCallOutcome::Ok | lapis_protocol::ToolCallOutcome::Error
        ),
        _ => false,
    }
}

/// Waits for a feed's acknowledgement of one event; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    /// The feed's progress.
    acks: watch::Receiver<Acks>,
    /// The store's name, for refusals.
    port: String,
    /// The first refusal the gate answered, shared by every clone: the
    /// turn then fails closed with it, whoever waited (the permission hook
    /// or a tool call through the bridge).
    refused: Arc<Mutex<Option<PortRefusal>>>,
    /// The turn's cancel signal, for the waits that give way to it
    /// ([`Gate::result_acknowledged`]).
    cancel: Option<watch::Receiver<bool>>,
}

/// Why a tool result was withheld from the agent.
#[derive(Debug)]
pub(crate) enum Withheld {
    /// The store did not acknowledge it (the turn fails closed with this).
    Refused(PortRefusal),
    /// The turn was cancelled first: the result never reaches the agent,
    /// and the turn ends as its cancel says (not failed).
    Cancelled,
}

impl Gate {
    /// This gate, giving way to `cancel` in [`Gate::result_acknowledged`].
    #[must_use]
    pub(crate) fn with_cancel(mut self, cancel: watch::Receiver<bool>) -> Gate {
        self.cancel = Some(cancel);
        self
    }

    /// [`Gate::acknowledged`] for a tool result, unless the turn is
    /// cancelled first (before or while waiting): then the result is
    /// withheld without shutting the gate, so the turn ends cancelled and
    /// no result reaches the agent after its cancel, whenever the store
    /// answers.
    pub(crate) async fn result_acknowledged(&self, thread_seq: u64) -> Result<(), Withheld> {
        let Some(mut cancel) = self.cancel.clone() else {
            return self
                .acknowledged(thread_seq)
                .await
                .map_err(Withheld::Refused);
        };
        let cancelled = async {
            // A signal whose sender is gone never cancels.
            if cancel.wait_for(|c| *c).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            biased;
            () = cancelled => Err(Withheld::Cancelled),
            r = self.acknowledged(thread_seq) => r.map_err(Withheld::Refused),
        }
    }

    /// The first refusal this turn's gate answered, if any.
    pub(crate) fn refused(&self) -> Option<PortRefusal> {
        self.refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// `Ok` once the store acknowledged the append of the event at
    /// `thread_seq`; a refusal when it refused it, missed its deadline,
    /// lost its connection, the feed skipped it, or the feed ended first.
    /// Fail closed: only an acknowledgement opens the gate.
    pub(crate) async fn acknowledged(&self, thread_seq: u64) -> Result<(), PortRefusal> {
        let mut acks = self.acks.clone();
        // A feed that ended leaves its last progress behind.
        let _ = acks.wait_for(|a| a.through >= thread_seq).await;
        let ok = acks.borrow().acked.contains(&thread_seq);
        if ok {
            return Ok(());
        }
        let refusal = failed(&self.port, "the store did not acknowledge the event");
        self.refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(|| refusal.clone());
        Err(refusal)
    }
}

impl Feed {
    /// The gate authorizing events of this turn wait at.
    pub(crate) fn gate(&self) -> Gate {
        Gate {
            acks: self.acks.clone(),
            port: self.port.clone(),
            refused: self.refused.clone(),
            cancel: None,
        }
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

impl Feed {
    /// Appends the turn's `prompt` event, then keeps feeding the turn's
    /// content events from `events` (subscribed by the caller before the
    /// prompt was looked up) until dropped. Answers once the prompt is
    /// acknowledged, or with why it was not.
    pub(crate) async fn start(
        tools: &Tools,
        store: Store,
        thread: &Thread,
        port: &str,
        prompt: JournalEvent,
        mut events: broadcast::Receiver<Arc<JournalEvent>>,
    ) -> Result<Feed, PortRefusal> {
        let endpoint = port_of(tools, thread, port)?;
        let lane = tools.transcripts.lane(&thread.id);
        let (stop, mut stopped) = watch::channel(false);
        let (progress, acks) = watch::channel(Acks::default());
        let (acked, ack) = oneshot::channel();
        let thread = thread.clone();
        let turn = prompt.turn_id.clone();
        tokio::spawn(async move {
            let _held = lane.lock().await;
            let first = append(&endpoint, &thread, &prompt).await;
            let ok = first.is_ok();
            // Nobody waiting (the claim was cancelled or ended): the turn
            // runs no further, and nor does its feed.
            if acked.send(first).is_err() || !ok {
                return;
            }
            let ours = |e: &JournalEvent| {
                e.thread_id == thread.id
                    && e.turn_id == turn
                    && ((e.kind.is_content() && e.kind != EventKind::UserMessage) || authorizes(e))
                    && e.payload.is_some()
            };
            // The last thread_seq handed on (or passed over): the journal's
            // order, so nothing is appended twice after a catch-up.
            let mut last = prompt.thread_seq;
            let mut lost = 0u64;
            loop {
                let next = if *stopped.borrow() {
                    // The turn's end is committed (and so published, with
                    // everything before it): take what is buffered, then end.
                    match events.try_recv() {
                        Ok(e) => Ok(e),
                        Err(broadcast::error::TryRecvError::Lagged(n)) => Err(n),
                        Err(_) => break,
                    }
                } else {
                    tokio::select! {
                        r = events.recv() => match r {
                            Ok(e) => Ok(e),
                            Err(broadcast::error::RecvError::Lagged(n)) => Err(n),
                            Err(broadcast::error::RecvError::Closed) => break,
                        },
                        _ = stopped.changed() => continue,
                    }
                };
                let batch = match next {
                    Ok(e) if e.thread_id == thread.id && e.thread_seq > last => vec![e],
                    Ok(_) => Vec::new(),
                    // Fell behind the broadcast: what it skipped is read
                    // back from the journal (its content still in memory).
                    Err(n) => match catch_up(&store, &thread.id, last).await {
                        Some(events) => {
                            tracing::info!(thread = %thread.id, skipped = n, after = last,
                                "the transcript feed fell behind the journal's broadcast and read back what it skipped");
                            events
                        }
                        None => {
                            lost += n;
                            tracing::warn!(thread = %thread.id, skipped = n,
                                "the transcript feed fell behind the journal: events it skipped are not in the store");
                            Vec::new()
                        }
                    },
                };
                for e in batch {
                    last = last.max(e.thread_seq);
                    if ours(&e) {
                        match append(&endpoint, &thread, &e).await {
                            Ok(()) if authorizes(&e) => {
                                progress.send_modify(|a| {
                                    a.acked.insert(e.thread_seq);
                                });
                            }
                            Ok(()) => {}
                            Err(refusal) => {
                                lost += 1;
                                tracing::warn!(thread = %thread.id, thread_seq = e.thread_seq, error = %refusal,
                                    "content not kept by the transcript store: a replay after a restart reports it unavailable");
                            }
                        }
                    }
                    progress.send_modify(|a| a.through = a.through.max(last));
                }
            }
            if lost > 0 {
                tracing::warn!(thread = %thread.id, lost, "transcript feed ended with content missing from the store");
            }
        });
        match ack.await {
            Ok(Ok(())) => Ok(Feed {
                stop,
                acks,
                port: port.to_owned(),
                refused: Arc::default(),
            }),
            Ok(Err(refusal)) => Err(refusal),
            Err(_) => Err(failed(port, "the append was abandoned")),
        }
    }
}

/// The thread's events after `last` as the journal has them now, every
/// page of them, read back for a feed that fell behind the broadcast;
/// `None` when they cannot be read.
async fn catch_up(store: &Store, thread: &str, last: u64) -> Option<Vec<Arc<JournalEvent>>> {
    let mut out = Vec::new();
    let mut after = last;
    loop {
        let (page, _) = store.replay_flagged(thread, after, 0).await.ok()?;
        after = page.next_after;
        out.extend(page.events.into_iter().map(Arc::new));
        if !page.more {
            return Some(out);
        }
    }
}

/// The payloads `wanted` (events whose content is gone, each with the hash
/// recorded for it) asked of the store, each completing its event only if
/// it hashes to the recorded value. Returns the events completed; the rest
/// stay unavailable.
pub(crate) async fn fetch(
    endpoint: &Endpoint<TranscriptRegister>,
    thread: &Thread,
    wanted: &[(JournalEvent, Option<String>)],
) -> Result<Vec<JournalEvent>, PortRefusal> {
    let port = &endpoint.spec.port;
    let mut out = Vec::new();
    for chunk in wanted.chunks(MAX_FETCH) {
        let call = TranscriptFetch {
            port: port.clone(),
            envelope: envelope(thread),
            thread_seqs: chunk.iter().map(|(e, _)| e.thread_seq).collect(),
        };
        let found: TranscriptPayloads = endpoint
            .call::<callback::TranscriptFetch>(&call, endpoint.spec.deadline())
            .await
            .map_err(|e| failed(port, e.why()))?;
        let mut by_seq: HashMap<u64, serde_json::Value> = found
            .payloads
            .into_iter()
            .map(|p| (p.thread_seq, p.payload))
            .collect();
        for (event, recorded) in chunk {
            if let Some(payload) = by_seq.remove(&event.thread_seq)
                && let Some(done) = verify(event, recorded.as_deref(), payload)
            {
                out.push(done);
            }
        }
    }
    Ok(out)
}

/// `event` (its content gone) completed with `payload`, when the result's
/// canonical hash is `recorded`; `None` otherwise (no hash was recorded, or
/// the payload is not the one journaled).
pub(crate) fn verify(
    event: &JournalEvent,
    recorded: Option<&str>,
    payload: serde_json::Value,
) -> Option<JournalEvent> {
    let recorded = recorded?;
    let mut done = event.clone();
    done.payload = Some(payload);
    done.payload_unavailable = false;
    (event_hash(&done)?.as_str() == recorded).then_some(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gone() -> JournalEvent {
        JournalEvent {
            seq: 9,
            thread_id: "thr_1".into(),
            thread_seq: 4,
            turn_id: Some("turn_1".into()),
            kind: EventKind::MessageChunk,
            at: 1_700_000_000_000,
            payload: None,
            payload_unavailable: true,
        }
    }

    #[test]
    fn only_the_journaled_payload_completes_its_event() {
        let payload = json!({"text": "hello"});
        let mut full = gone();
        full.payload = Some(payload.clone());
        full.payload_unavailable = false;
        let recorded = event_hash(&full).unwrap();
        let done = verify(&gone(), Some(recorded.as_str()), payload.clone()).unwrap();
        assert_eq!(done, full);
        assert!(verify(&gone(), Some(recorded.as_str()), json!({"text": "hellO"})).is_none());
        assert!(verify(&gone(), None, payload.clone()).is_none());
        let mut other = gone();
        other.thread_seq = 5;
        assert!(verify(&other, Some(recorded.as_str()), payload).is_none());
    }
}
