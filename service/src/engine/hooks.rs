//! [`TurnHooks`] on the store: the dispatch boundary through
//! `mark_dispatched`, events through group-committed `append_activity`,
//! permissions through the [`PermissionBroker`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use lapis_protocol::{Note, Observation, Payload};

use crate::acp::{HookError, PermissionAnswer, PermissionRequest, TurnHooks, shows_agent_progress};
use crate::domain::SessionBinding;
use crate::redact::StreamHold;
use crate::store::Store;

use super::broker::PermissionBroker;
use super::budgets::TurnCeiling;
use super::claim::BoundarySignal;
use super::evidence::Evidence;

/// Every this many unawaited events the hook waits for the commit, which
/// bounds how far the writer's queue can fall behind a fast agent.
const STREAM_WINDOW: u64 = 1024;

/// The hooks of one claimed turn.
#[derive(Debug)]
pub(super) struct StoreHooks {
    /// The store.
    pub(crate) store: Store,
    /// The claimed turn.
    pub(crate) turn_id: String,
    /// Its thread.
    pub(crate) thread_id: String,
    /// Pending interactions.
    pub(crate) broker: PermissionBroker,
    /// Set once the boundary is durable (read by shutdown settling).
    pub(crate) dispatched: Arc<AtomicBool>,
    /// The claim's boundary signal: the boundary write is it unless a
    /// boundary-later notice went out first.
    boundary: BoundarySignal,
    /// The provider definition's fingerprint, bound with the session.
    pub(crate) fingerprint: String,
    /// The turn's workspace snapshots.
    pub(super) evidence: Evidence,
    /// The thread's configuration version, bound with the session.
    pub(crate) thread_version: u64,
    /// Set once the turn was marked `running`.
    running: AtomicBool,
    /// Streamed events appended so far.
    streamed: AtomicU64,
    /// Streamed appends not yet awaited: checked at every window and before
    /// the turn's end is recorded, so an append the store refused (disk
    /// full) is never lost without a word.
    unconfirmed: std::sync::Mutex<Vec<crate::store::PendingAppend>>,
    /// Text chunks held back so no secret is split across two events.
    hold: Mutex<Held>,
    /// Who answered each request a user answered, by request id: taken
    /// when its `permission_decided` is journaled, which names them.
    answerers: Mutex<std::collections::HashMap<String, lapis_protocol::Answerer>>,
    /// The per-turn budget ceilings covering the turn, if any: each
    /// `usage_update` after the boundary is checked against them.
    ceiling: Option<TurnCeiling>,
    /// The thread's transcript store's gate, when it binds one: an
    /// authorizing event reaches the agent only once the store
    /// acknowledged it (`tools::transcript::Gate`).
    gate: Option<crate::tools::transcript::Gate>,
    /// Set when the gate stayed shut: the turn fails closed with this
    /// refusal ([`Self::gate_refused`]).
    refused: Mutex<Option<lapis_protocol::context::PortRefusal>>,
}

/// The text stream being held: which one, and its chunks.
#[derive(Debug, Default)]
struct Held {
    /// (reasoning?, messageId) of the held chunks; `None` when empty.
    key: Option<(bool, Option<String>)>,
    /// The chunks, each with its event (whose text is set on release).
    hold: StreamHold<Payload>,
}

/// The stream a plain text chunk belongs to, and its text.
fn text_chunk(event: &mut Payload) -> Option<((bool, Option<String>), String)> {
    let (reasoning, c) = match event {
        Payload::MessageChunk(c) => (false, c),
        Payload::ThoughtChunk(c) => (true, c),
        _ => return None,
    };
    if c.content.is_some() {
        return None;
    }
    let text = c.text.take()?;
    Some(((reasoning, c.message_id.clone()), text))
}

/// Puts released text back into its event.
fn with_text((text, mut event): (String, Payload)) -> Payload {
    if let Payload::MessageChunk(c) | Payload::ThoughtChunk(c) = &mut event {
        c.text = Some(text);
    }
    event
}

impl StoreHooks {
    /// The hooks of turn `turn_id` of `thread` (its id and configuration
    /// version are bound with the session).
    // One argument per obligation the hooks carry; a struct of them would
    // only rename this list.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        store: Store,
        turn_id: String,
        thread: &crate::domain::Thread,
        broker: PermissionBroker,
        dispatched: Arc<AtomicBool>,
        boundary: BoundarySignal,
        fingerprint: String,
        evidence: Evidence,
    ) -> StoreHooks {
        StoreHooks {
            store,
            turn_id,
            thread_id: thread.id.clone(),
            broker,
            dispatched,
            boundary,
            fingerprint,
            evidence,
            thread_version: thread.version,
            running: AtomicBool::new(false),
            streamed: AtomicU64::new(0),
            unconfirmed: std::sync::Mutex::new(Vec::new()),
            hold: Mutex::new(Held::default()),
            answerers: Mutex::new(std::collections::HashMap::new()),
            ceiling: None,
            gate: None,
            refused: Mutex::new(None),
        }
    }

    /// Gates the turn's authorizing events on its transcript store's
    /// acknowledgement.
    pub(super) fn with_gate(mut self, gate: Option<crate::tools::transcript::Gate>) -> StoreHooks {
        self.gate = gate;
        self
    }

    /// The refusal that shut the gate, if one did: the turn then failed
    /// closed (`transcript_store_failed`), whatever the runner reports.
    pub(super) fn gate_refused(&self) -> Option<lapis_protocol::context::PortRefusal> {
        let own = self
            .refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        own.or_else(|| self.gate.as_ref().and_then(|g| g.refused()))
    }

    /// Holds the turn to these per-turn ceilings.
    pub(super) fn with_ceiling(mut self, ceiling: Option<TurnCeiling>) -> StoreHooks {
        self.ceiling = ceiling;
        self
    }

    /// Journals whatever text is still held (the turn is over).
    pub(super) async fn flush_held(&self) -> Result<(), HookError> {
        let released: Vec<Payload> = {
            let mut h = self.hold.lock().unwrap_or_else(|p| p.into_inner());
            h.key = None;
            h.hold.finish().into_iter().map(with_text).collect()
        };
        for e in released {
            self.journal(e).await?;
        }
        Ok(())
    }

    /// Keeps an append to confirm with the streamed ones.
    pub(super) fn unconfirmed_push(&self, pending: crate::store::PendingAppend) {
        self.unconfirmed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(pending);
    }

    /// Awaits every streamed append not yet confirmed; the first refusal.
    pub(super) async fn confirm_streamed(&self) -> Result<(), crate::domain::StoreError> {
        let pending: Vec<_> =
            std::mem::take(&mut *self.unconfirmed.lock().unwrap_or_else(|p| p.into_inner()));
        let mut first = Ok(());
        for p in pending {
            if let Err(e) = p.await
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }

    /// Holds a text chunk or releases what may go now, in order (see
    /// [`crate::redact`]): a different stream or any other event releases
    /// everything held first.
    fn hold_or_release(&self, mut event: Payload) -> Vec<Payload> {
        let mut h = self.hold.lock().unwrap_or_else(|p| p.into_inner());
        let chunk = text_chunk(&mut event);
        let key = chunk.as_ref().map(|(k, _)| k.clone());
        let mut out: Vec<Payload> = Vec::new();
        if h.key.is_some() && h.key != key {
            out.extend(h.hold.finish().into_iter().map(with_text));
            h.key = None;
        }
        match chunk {
            Some((key, text)) => {
                out.extend(h.hold.push(text, event).into_iter().map(with_text));
                h.key = (!h.hold.is_empty()).then_some(key);
            }
            None => out.push(event),
        }
        out
    }

    /// Appends one event to the journal (see [`TurnHooks::event`]).
    async fn journal(&self, mut event: Payload) -> Result<(), HookError> {
        if let Payload::PermissionDecided(d) = &mut event
            && d.decided_by == Some(lapis_protocol::DecidedBy::User)
        {
            d.answered_by = self
                .answerers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&d.request_id);
        }
        // Permission events are awaited: a pending interaction must never be
        // visible before its request is durable. Everything else rides the
        // group commit (the writer keeps order, and the turn's end is a later
        // write), with a wait every STREAM_WINDOW events for backpressure.
        let streamed = !matches!(
            event,
            Payload::PermissionRequested(_) | Payload::PermissionDecided(_)
        );
        let requested = match &event {
            Payload::PermissionRequested(r) => Some(r.request_id.clone()),
            _ => None,
        };
        let pending = self.store.append_activity(&self.turn_id, event);
        if streamed {
            let n = self.streamed.fetch_add(1, Ordering::Relaxed) + 1;
            if !n.is_multiple_of(STREAM_WINDOW) {
                // Committed in order with the next group commit; confirmed
                // at the next window or before the turn's end.
                self.unconfirmed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(pending);
                return Ok(());
            }
            self.confirm_streamed().await.map_err(hook_err)?;
        }
        let event = pending.await.map_err(hook_err)?;
        // An authorizing event (a selected permission answer) goes on to
        // the agent only once the thread's store acknowledged it; else the
        // runner stops here (the answer is never written) and the turn
        // fails closed.
        if let Some(gate) = &self.gate
            && crate::tools::transcript::authorizes(&event)
            && let Err(refusal) = gate.acknowledged(event.thread_seq).await
        {
            tracing::warn!(turn = %self.turn_id, thread_seq = event.thread_seq, error = %refusal,
                "the transcript store did not acknowledge an authorizing event: it does not reach the agent");
            let code = refusal.code();
            *self.refused.lock().unwrap_or_else(|p| p.into_inner()) = Some(refusal);
            return Err(HookError(format!("transcript store: {}", code.as_str())));
        }
        // Durable now: the wait the runner registered before journaling it
        // is listed from here on.
        if let Some(request_id) = requested {
            self.broker.publish(&self.turn_id, &request_id);
        }
        Ok(())
    }
}

fn hook_err(err: crate::domain::StoreError) -> HookError {
    HookError(format!("store: {}", err.code()))
}

impl TurnHooks for StoreHooks {
    async fn before_dispatch(&self, session_id: &str) -> Result<(), HookError> {
        let binding = SessionBinding {
            session_id: session_id.to_owned(),
            fingerprint: self.fingerprint.clone(),
            thread_version: self.thread_version,
        };
        // A git snapshot may take longer than the claiming batch lingers:
        // that batch commits now, and the boundary is an ordinary durable
        // write. A plain directory is answered without a git process.
        if self.evidence.may_take_long() {
            self.boundary.later();
        }
        let snapshot = self.evidence.at_boundary().await;
        // Queued before the boundary, so committed no later than it.
        self.unconfirmed_push(self.store.append_activity(&self.turn_id, snapshot));
        // A ceiling counts this turn's cost from the session's cumulative
        // cost before it (zero for a new session).
        // A store that cannot be read counts the whole cumulative figure:
        // budgets bound spending, they never fail a turn's dispatch.
        if let Some(ceiling) = &self.ceiling {
            let before = self
                .store
                .session_cost(&self.thread_id, session_id, &self.turn_id)
                .await
                .unwrap_or_else(|err| {
                    tracing::error!(turn = %self.turn_id, code = err.code(), "reading the session's cost failed");
                    None
                });
            ceiling.set_before(before);
        }
        let awaited = self.boundary.at_boundary();
        self.store
            .mark_dispatched_as(&self.turn_id, binding, awaited)
            .await
            .map_err(hook_err)?;
        self.dispatched.store(true, Ordering::SeqCst);
        Ok(())
    }

    async fn event(&self, event: Payload) -> Result<(), HookError> {
        // Only the agent's own progress marks the turn running; the
        // controller's cancel or permission answers never do. Queued before
        // the event, committed with it.
        if shows_agent_progress(&event)
            && self.dispatched.load(Ordering::SeqCst)
            && !self.running.swap(true, Ordering::SeqCst)
        {
            self.store.mark_running_detached(&self.turn_id);
        }
        // A report past a per-turn ceiling stops the turn through its
        // cancel (the report itself is journaled as any other).
        if let (Some(ceiling), Payload::Observation(Observation::Note(Note::UsageUpdate(u)))) =
            (&self.ceiling, &event)
            && self.dispatched.load(Ordering::SeqCst)
            && let Some(key) = ceiling.report(u)
        {
            tracing::warn!(turn = %self.turn_id, budget = %key, "per-turn ceiling reached; cancelling");
        }
        for e in self.hold_or_release(event) {
            self.journal(e).await?;
        }
        Ok(())
    }

    async fn ask(&self, request: PermissionRequest) -> PermissionAnswer {
        let (rx, _registration) = self
            .broker
            .register(&self.turn_id, &self.thread_id, &request);
        match rx.await {
            Ok((answer, by)) => {
                if let Some(by) = by {
                    self.answerers
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(request.request_id.clone(), by);
                }
                answer
            }
            Err(_) => PermissionAnswer::Cancelled,
        }
    }
}
