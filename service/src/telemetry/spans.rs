//! Committed journal events → spans and metrics.
//!
//! One span per turn (`lapis.turn`, claim → outcome; the queue wait is an
//! attribute and a histogram), with child spans for the preparation
//! (`lapis.turn.prepare`: claim → dispatch boundary), the agent's work
//! (`lapis.turn.agent`: dispatch → its answer, else the outcome), each
//! permission wait (`lapis.permission`: request → decision), each
//! application tool call (`lapis.tool_call`: `tool_call_requested` →
//! `tool_call_finished`, with both as span events) and the turn's
//! teardown (`lapis.turn.teardown`: the agent's answer → the outcome
//! committed: held text, usage, the outcome snapshot); evidence snapshots,
//! a cancel sent and fences are span events, a resolution its own span.
//! The turn span carries the turn's usage and cost, read from its row when
//! it ends. Times are the events' commit times; every span carries the
//! `seq`s it spans, so a trace can be checked against `journal verify`.
//!
//! Not in any span, because the journal does not record them: the capture
//! port's `capture.begin` / `tools.invoke` / `capture.finish` exchanges
//! inside a tool call (only its request and its result are journaled), and
//! the agent process's exit after the outcome (a kept agent goes back to
//! the pool; a retired one is stopped on its own task).
//!
//! What must stay true: every attribute comes from ids, the thread record's
//! workspace, provider and application, closed vocabularies (states,
//! outcome codes, tool-call outcomes, deciders) and numbers — nothing
//! from a payload's free text. Open turns are bounded ([`MAX_OPEN`]): the
//! oldest is ended as `lapis.outcome = "untracked"` when more arrive.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lapis_protocol::usage::TurnUsage;
use lapis_protocol::{JournalEvent, Observation, Payload, ToolCallOutcome, TurnState};
use opentelemetry::trace::{Span as _, TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{SdkTracerProvider, Span, Tracer as SdkTracer};
use tokio::sync::broadcast::error::RecvError;

use super::meters::Instruments;
use crate::store::Store;

/// Turns followed at once; past it the oldest is let go.
const MAX_OPEN: usize = 4096;

/// Starts the task; it ends when the store closes.
pub(super) fn spawn(store: Store, traces: &SdkTracerProvider, meters: &SdkMeterProvider) {
    let rx = store.subscribe();
    let mut feed = Feed::new(traces.tracer("lapis-ai-controller"), meters);
    tokio::spawn(async move {
        let mut rx = rx;
        loop {
            let event = match rx.recv().await {
                Ok(e) => e,
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "telemetry: fell behind the journal; events skipped");
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            if event.turn_id.is_none() {
                continue;
            }
            let thread = match feed.threads.get(&event.thread_id) {
                Some(t) => t.clone(),
                None => match store.get_thread(&event.thread_id).await {
                    Ok(t) => {
                        let attrs = ThreadAttrs {
                            workspace: t.workspace_id,
                            provider: t.provider,
                            application: t.application,
                        };
                        if feed.threads.len() >= MAX_OPEN {
                            feed.threads.clear();
                        }
                        feed.threads.insert(event.thread_id.clone(), attrs.clone());
                        attrs
                    }
                    Err(_) => continue,
                },
            };
            // What the turn used is on its row by the commit that ends it.
            let usage = match event.body() {
                Some(Payload::TurnState(c)) if c.to.is_terminal() || c.to.is_fenced() => {
                    match &event.turn_id {
                        Some(id) => store.get_turn(id).await.ok().and_then(|t| t.usage),
                        None => None,
                    }
                }
                _ => None,
            };
            feed.on(&event, &thread, usage.as_ref());
        }
    });
}

/// What every span of a thread's turns carries.
#[derive(Debug, Clone)]
struct ThreadAttrs {
    workspace: String,
    provider: String,
    application: String,
}

/// A turn being followed.
struct Open {
    /// When it was submitted (ms), if seen.
    submitted: Option<i64>,
    /// When it was claimed (ms).
    claimed: Option<i64>,
    /// The turn span, once claimed.
    turn: Option<Span>,
    /// Preparation, claim → dispatch.
    prepare: Option<Span>,
    /// The agent's work, dispatch → its answer.
    agent: Option<Span>,
    /// The teardown, the agent's answer → outcome.
    teardown: Option<Span>,
    /// Pending permission waits by request id.
    permissions: HashMap<String, (Span, i64)>,
    /// Tool calls in flight by call id.
    tools: HashMap<String, Span>,
    /// The order it was first seen in (for eviction).
    born: u64,
}

struct Feed {
    tracer: SdkTracer,
    metrics: Instruments,
    open: HashMap<String, Open>,
    threads: HashMap<String, ThreadAttrs>,
    born: u64,
}

fn time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

fn seconds(from: i64, to: i64) -> f64 {
    (to - from).max(0) as f64 / 1000.0
}

fn tool_outcome(o: ToolCallOutcome) -> &'static str {
    match o {
        ToolCallOutcome::Ok => "ok",
        ToolCallOutcome::Error => "error",
        ToolCallOutcome::Failed => "failed",
        ToolCallOutcome::EffectUnknown => "effect_unknown",
    }
}

impl Feed {
    fn new(tracer: SdkTracer, meters: &SdkMeterProvider) -> Feed {
        let metrics = Instruments::new(meters);
        Feed {
            tracer,
            metrics,
            open: HashMap::new(),
            threads: HashMap::new(),
            born: 0,
        }
    }

    fn base(&self, event: &JournalEvent, t: &ThreadAttrs) -> Vec<KeyValue> {
        vec![
            KeyValue::new("lapis.thread.id", event.thread_id.clone()),
            KeyValue::new("lapis.turn.id", event.turn_id.clone().unwrap_or_default()),
            KeyValue::new("lapis.workspace.id", t.workspace.clone()),
            KeyValue::new("lapis.provider", t.provider.clone()),
            KeyValue::new("lapis.application", t.application.clone()),
        ]
    }

    fn child(&self, parent: &Span, name: &'static str, at: i64, attrs: Vec<KeyValue>) -> Span {
        let cx = Context::new().with_remote_span_context(parent.span_context().clone());
        self.tracer
            .span_builder(name)
            .with_start_time(time(at))
            .with_attributes(attrs)
            .start_with_context(&self.tracer, &cx)
    }

    fn open_turn(&mut self, turn: &str) -> &mut Open {
        if !self.open.contains_key(turn) && self.open.len() >= MAX_OPEN {
            let oldest = self
                .open
                .iter()
                .min_by_key(|(_, o)| o.born)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest
                && let Some(mut o) = self.open.remove(&k)
                && let Some(span) = o.turn.as_mut()
            {
                span.set_attribute(KeyValue::new("lapis.outcome", "untracked"));
                span.end();
            }
        }
        self.born += 1;
        let born = self.born;
        self.open.entry(turn.to_owned()).or_insert_with(|| Open {
            submitted: None,
            claimed: None,
            turn: None,
            prepare: None,
            agent: None,
            teardown: None,
            permissions: HashMap::new(),
            tools: HashMap::new(),
            born,
        })
    }

    fn on(&mut self, event: &JournalEvent, thread: &ThreadAttrs, usage: Option<&TurnUsage>) {
        let Some(turn_id) = event.turn_id.clone() else {
            return;
        };
        let base = self.base(event, thread);
        let seq = event.seq as i64;
        let at = event.at;
        match event.body() {
            Some(Payload::TurnSubmitted(_)) => {
                self.metrics.queued.add(1, &[]);
                self.open_turn(&turn_id).submitted = Some(at);
            }
            Some(Payload::TurnState(change)) => match change.to {
                TurnState::Preparing => {
                    let mut attrs = base.clone();
                    attrs.push(KeyValue::new("lapis.seq.claim", seq));
                    let submitted = self.open_turn(&turn_id).submitted;
                    if let Some(s) = submitted {
                        self.metrics.queued.add(-1, &[]);
                        self.metrics.queue_seconds.record(seconds(s, at), &[]);
                        attrs.push(KeyValue::new("lapis.queue.seconds", seconds(s, at)));
                    }
                    let span = self
                        .tracer
                        .span_builder("lapis.turn")
                        .with_start_time(time(at))
                        .with_attributes(attrs)
                        .start_with_context(&self.tracer, &Context::new());
                    let prepare = self.child(&span, "lapis.turn.prepare", at, base);
                    let open = self.open_turn(&turn_id);
                    open.claimed = Some(at);
                    open.turn = Some(span);
                    open.prepare = Some(prepare);
                }
                TurnState::Dispatched => {
                    let Some(open) = self.open.get_mut(&turn_id) else {
                        return;
                    };
                    if let Some(mut p) = open.prepare.take() {
                        p.set_attribute(KeyValue::new("lapis.seq.dispatch", seq));
                        p.end_with_timestamp(time(at));
                    }
                    let Some(turn) = open.turn.as_ref() else {
                        return;
                    };
                    let cx = Context::new().with_remote_span_context(turn.span_context().clone());
                    let agent = self
                        .tracer
                        .span_builder("lapis.turn.agent")
                        .with_start_time(time(at))
                        .with_attributes(base)
                        .start_with_context(&self.tracer, &cx);
                    open.agent = Some(agent);
                }
                TurnState::Running => {}
                to => {
                    let outcome = change
                        .outcome
                        .clone()
                        .filter(|o| {
                            lapis_protocol::OutcomeCode::parse(o).is_some()
                                || crate::acp::STOP_REASONS.contains(&o.as_str())
                        })
                        .unwrap_or_else(|| to.as_str().to_owned());
                    let fenced =
                        matches!(to, TurnState::SubmissionUnknown | TurnState::Interrupted);
                    let state = KeyValue::new("lapis.turn.state", to.as_str());
                    self.metrics.turns.add(
                        1,
                        &[
                            KeyValue::new("lapis.outcome", outcome.clone()),
                            KeyValue::new("lapis.provider", thread.provider.clone()),
                        ],
                    );
                    let Some(mut open) = self.open.remove(&turn_id) else {
                        return;
                    };
                    if open.turn.is_none() && open.submitted.is_some() {
                        // Ended while queued (cancelled, refused at claim).
                        self.metrics.queued.add(-1, &[]);
                    }
                    for (_, (mut p, _)) in open.permissions.drain() {
                        self.metrics.permissions_pending.add(-1, &[]);
                        p.end_with_timestamp(time(at));
                    }
                    for (_, mut t) in open.tools.drain() {
                        t.end_with_timestamp(time(at));
                    }
                    for mut s in [open.prepare.take(), open.agent.take()]
                        .into_iter()
                        .flatten()
                    {
                        s.end_with_timestamp(time(at));
                    }
                    if let Some(mut t) = open.teardown.take() {
                        t.set_attribute(KeyValue::new("lapis.seq.end", seq));
                        t.end_with_timestamp(time(at));
                    }
                    if let Some(mut turn) = open.turn.take() {
                        if fenced {
                            self.metrics.fences.add(1, &[]);
                            turn.add_event_with_timestamp(
                                "lapis.fenced",
                                time(at),
                                vec![state.clone(), KeyValue::new("lapis.seq", seq)],
                            );
                        }
                        if let Some(usage) = usage {
                            for kv in self.metrics.usage(&thread.provider, usage) {
                                turn.set_attribute(kv);
                            }
                        }
                        turn.set_attribute(KeyValue::new("lapis.outcome", outcome));
                        turn.set_attribute(state);
                        turn.set_attribute(KeyValue::new("lapis.seq.end", seq));
                        if let Some(start) = open.claimed {
                            self.metrics.turn_seconds.record(seconds(start, at), &[]);
                        }
                        turn.end_with_timestamp(time(at));
                    }
                }
            },
            Some(Payload::PermissionRequested(r)) => {
                let Some(parent) = self.open.get(&turn_id).and_then(|o| o.turn.as_ref()) else {
                    return;
                };
                let mut attrs = base;
                attrs.push(KeyValue::new(
                    "lapis.permission.request_id",
                    r.request_id.clone(),
                ));
                attrs.push(KeyValue::new("lapis.seq.request", seq));
                let span = self.child(parent, "lapis.permission", at, attrs);
                self.metrics.permissions_pending.add(1, &[]);
                if let Some(open) = self.open.get_mut(&turn_id) {
                    open.permissions.insert(r.request_id.clone(), (span, at));
                }
            }
            Some(Payload::PermissionDecided(d)) => {
                let Some(open) = self.open.get_mut(&turn_id) else {
                    return;
                };
                if let Some((mut span, asked)) = open.permissions.remove(&d.request_id) {
                    self.metrics.permissions_pending.add(-1, &[]);
                    self.metrics
                        .permission_seconds
                        .record(seconds(asked, at), &[]);
                    if let Some(by) = d.decided_by {
                        span.set_attribute(KeyValue::new(
                            "lapis.permission.decided_by",
                            by.as_str(),
                        ));
                    }
                    span.set_attribute(KeyValue::new("lapis.seq.decision", seq));
                    span.end_with_timestamp(time(at));
                }
            }
            Some(Payload::ToolCallRequested(c)) => {
                let Some(parent) = self.open.get(&turn_id).and_then(|o| o.turn.as_ref()) else {
                    return;
                };
                let mut attrs = base;
                attrs.push(KeyValue::new("lapis.tool_call.id", c.call_id.clone()));
                attrs.push(KeyValue::new(
                    "lapis.tool_call.endpoint",
                    c.endpoint.clone(),
                ));
                attrs.push(KeyValue::new("lapis.tool_call.tool", c.tool.clone()));
                attrs.push(KeyValue::new("lapis.tool_call.mutating", c.mutating));
                attrs.push(KeyValue::new("lapis.seq.begin", seq));
                let mut span = self.child(parent, "lapis.tool_call", at, attrs);
                span.add_event_with_timestamp(
                    "lapis.tool_call.requested",
                    time(at),
                    vec![KeyValue::new("lapis.seq", seq)],
                );
                if let Some(open) = self.open.get_mut(&turn_id) {
                    open.tools.insert(c.call_id.clone(), span);
                }
            }
            Some(Payload::ToolCallFinished(f)) => {
                let outcome = tool_outcome(f.outcome);
                self.metrics
                    .tool_calls
                    .add(1, &[KeyValue::new("lapis.tool_call.outcome", outcome)]);
                let Some(open) = self.open.get_mut(&turn_id) else {
                    return;
                };
                if let Some(mut span) = open.tools.remove(&f.call_id) {
                    let mut step = vec![
                        KeyValue::new("lapis.seq", seq),
                        KeyValue::new("lapis.tool_call.outcome", outcome),
                    ];
                    if let Some(code) = f.code {
                        step.push(KeyValue::new("lapis.tool_call.code", code.as_str()));
                    }
                    span.add_event_with_timestamp("lapis.tool_call.finished", time(at), step);
                    span.set_attribute(KeyValue::new("lapis.tool_call.outcome", outcome));
                    span.set_attribute(KeyValue::new("lapis.seq.finish", seq));
                    span.end_with_timestamp(time(at));
                }
            }
            Some(Payload::Observation(Observation::Stopped { stop_reason, .. })) => {
                let Some(open) = self.open.get_mut(&turn_id) else {
                    return;
                };
                let Some(turn) = open.turn.as_ref() else {
                    return;
                };
                let cx = Context::new().with_remote_span_context(turn.span_context().clone());
                if let Some(mut agent) = open.agent.take() {
                    // The agent's own words: only a stop reason ACP defines.
                    if crate::acp::STOP_REASONS.contains(&stop_reason.as_str()) {
                        agent.set_attribute(KeyValue::new("lapis.stop_reason", stop_reason));
                    }
                    agent.set_attribute(KeyValue::new("lapis.seq.stopped", seq));
                    agent.end_with_timestamp(time(at));
                }
                let mut attrs = base;
                attrs.push(KeyValue::new("lapis.seq.stopped", seq));
                let teardown = self
                    .tracer
                    .span_builder("lapis.turn.teardown")
                    .with_start_time(time(at))
                    .with_attributes(attrs)
                    .start_with_context(&self.tracer, &cx);
                open.teardown = Some(teardown);
            }
            Some(Payload::Observation(Observation::CancelSent)) => {
                if let Some(turn) = self.open.get_mut(&turn_id).and_then(|o| o.turn.as_mut()) {
                    turn.add_event_with_timestamp(
                        "lapis.cancel_sent",
                        time(at),
                        vec![KeyValue::new("lapis.seq", seq)],
                    );
                }
            }
            Some(Payload::WorkspaceSnapshot(_)) => {
                if let Some(turn) = self.open.get_mut(&turn_id).and_then(|o| o.turn.as_mut()) {
                    turn.add_event_with_timestamp(
                        "lapis.evidence_snapshot",
                        time(at),
                        vec![KeyValue::new("lapis.seq", seq)],
                    );
                }
            }
            Some(Payload::TurnResolved(r)) => {
                let mut attrs = base;
                attrs.push(KeyValue::new("lapis.turn.state", r.as_state.as_str()));
                attrs.push(KeyValue::new("lapis.turn.resolved_from", r.from.as_str()));
                attrs.push(KeyValue::new("lapis.seq", seq));
                let mut span = self
                    .tracer
                    .span_builder("lapis.turn.resolve")
                    .with_start_time(time(at))
                    .with_attributes(attrs)
                    .start_with_context(&self.tracer, &Context::new());
                span.end_with_timestamp(time(at));
            }
            _ => {}
        }
    }
}
