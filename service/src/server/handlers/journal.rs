//! `journal.replay` and `journal.subscribe`.
//!
//! A subscription is gap-free: it subscribes to committed events *first*,
//! then replays the backlog after the caller's cursor, then forwards live
//! events it has not already sent. If it falls behind the bounded broadcast
//! buffer it sends one `journal.lagged` notice with the cursor to replay from
//! and ends; it never skips an event silently.
//!
//! An *attention* subscription (`attention: true`) is the same machinery
//! with a filter: only events [`AttentionKind::of`] classifies, each sent
//! with its kinds, over the threads the session sees (its application's;
//! every application's of its principal for the owner's token) — or, with
//! `permissions:respond-any`, every thread of its principal (the
//! permission inbox's reach). Its cursor is still the journal's `seq`, so
//! it resumes after a reconnect exactly like the journal, without gaps.
//!
//! A subscription lives no longer than its session: the session is checked
//! before every event is sent, at every revocation and at the session's
//! expiry, so a silent subscriber of a revoked or expired session gets not one
//! more event, only a `journal.ended` notice whose error names the reason
//! (`unauthenticated`, "session revoked" / "session expired").

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::broadcast::error::RecvError;

use std::time::Duration;

use crate::auth::{AuthSession, Authority};
use crate::domain::{JournalEvent, ReplayScope};
use crate::store::Store;
use lapis_protocol::config::TokenSpec;
use lapis_protocol::params::{SubscribeResult, UnsubscribeResult};
use lapis_protocol::{AttentionKind, ErrorCode, ReplayPage, RpcError, Scope, params};

use super::super::conn::{Conn, Outbox};
use super::super::context::ServerContext;
use super::{store_err, visible_thread};
use lapis_protocol::notifications::{
    JOURNAL_ENDED, JOURNAL_EVENT, JOURNAL_LAGGED, JournalEndedParams, JournalEventParams,
    JournalLaggedParams,
};

/// Replay page size used by subscriptions while catching up.
const CATCH_UP_PAGE: usize = 500;

fn scope(ctx: &ServerContext, session: &AuthSession, thread: Option<&String>) -> ReplayScope {
    match thread {
        Some(t) => ReplayScope::Thread(t.clone()),
        None => ReplayScope::Owner {
            principal: session.principal.clone(),
            application: super::reach(ctx, session),
        },
    }
}

/// What a present subscription of `session` covers: its thread, else
/// every thread it carries (of the session's application, or of every
/// application of its principal when `wide`).
fn attended(
    session: &AuthSession,
    thread: Option<String>,
    wide: bool,
) -> crate::presence::Attended {
    match thread {
        Some(t) => crate::presence::Attended::Thread(t),
        None => crate::presence::Attended::Principal {
            principal: session.principal.clone(),
            application: (!wide).then(|| session.application.clone()),
        },
    }
}

/// Whether a subscription of `session` covers every application of its
/// principal: the owner's token's always, an attention subscription with
/// `permissions:respond-any` (the permission inbox's reach) too.
fn principal_wide(ctx: &ServerContext, session: &AuthSession, attention: bool) -> bool {
    ctx.authority.is_owner(session)
        || (attention && session.scopes.contains(&Scope::PermissionsRespondAny))
}

/// `journal.replay`: one bounded page after a cursor.
///
/// A thread that binds a transcript store has what its journal no longer
/// holds fetched from that store (see [`super::transcript::complete`]).
/// `peer` is this connection's calling side, if it serves ports.
pub(crate) async fn journal_replay(
    ctx: &ServerContext,
    session: &AuthSession,
    peer: Option<&crate::tools::Peer>,
    p: params::JournalReplay,
) -> Result<ReplayPage, RpcError> {
    let mut owned = None;
    if let Some(thread) = &p.thread_id {
        owned = Some(visible_thread(ctx, session, thread).await?);
    }
    let mut page = match owned {
        Some(thread) if thread.ports.transcript_store.is_some() => {
            super::transcript::complete(ctx, &thread, peer, p.after, p.limit.unwrap_or(0)).await?
        }
        _ => ctx
            .core
            .store
            .replay(
                scope(ctx, session, p.thread_id.as_ref()),
                p.after,
                p.limit.unwrap_or(0),
            )
            .await
            .map_err(store_err)?,
    };
    let by_thread = p.thread_id.is_some();
    super::fit::page(&mut page, ctx.limits.max_frame_bytes, |e| {
        if by_thread { e.thread_seq } else { e.seq }
    });
    Ok(page)
}

/// `journal.subscribe`: returns the subscription id; events follow as
/// `journal.event` notifications.
pub(crate) async fn journal_subscribe(
    ctx: &ServerContext,
    conn: &mut Conn,
    session: &AuthSession,
    p: params::JournalSubscribe,
) -> Result<SubscribeResult, RpcError> {
    if let Some(thread) = &p.thread_id {
        visible_thread(ctx, session, thread).await?;
    }
    if conn.subscriptions.active() >= ctx.limits.max_subscriptions_per_connection {
        return Err(RpcError::new(
            ErrorCode::LimitReached,
            format!(
                "this connection already holds {} subscriptions (server.maxSubscriptionsPerConnection)",
                ctx.limits.max_subscriptions_per_connection
            ),
        )
        .with_data("limit", "maxSubscriptionsPerConnection".into()));
    }
    let id = conn.subscriptions.next_id();
    // Subscribe before replaying, so nothing committed in between is missed.
    let rx = ctx.core.store.subscribe();
    let wide = principal_wide(ctx, session, p.attention);
    let scope = match scope(ctx, session, p.thread_id.as_ref()) {
        ReplayScope::Owner { principal, .. } if wide => ReplayScope::Owner {
            principal,
            application: None,
        },
        other => other,
    };
    let forwarder = Forwarder {
        authority: ctx.authority.clone(),
        session: session.id.clone(),
        store: ctx.core.store.clone(),
        outbox: conn.outbox.clone(),
        subscription: id.clone(),
        scope,
        principal: session.principal.clone(),
        application: (!wide).then(|| session.application.clone()),
        grants: ctx.authority.spec_of(session),
        attention: p.attention,
        visible: HashMap::new(),
        _present: p
            .present
            .then(|| ctx.core.presence.hold(attended(session, p.thread_id, wide))),
    };
    let task = tokio::spawn(forwarder.run(rx, p.after));
    conn.subscriptions.insert(id.clone(), task);
    Ok(SubscribeResult { subscription: id })
}

/// `journal.unsubscribe`.
pub(crate) fn journal_unsubscribe(
    conn: &mut Conn,
    p: params::JournalUnsubscribe,
) -> Result<UnsubscribeResult, RpcError> {
    Ok(UnsubscribeResult {
        stopped: conn.subscriptions.stop(&p.subscription),
    })
}

/// One subscription's forwarding task.
struct Forwarder {
    /// Checks the session before each event, at revocations and at expiry.
    authority: Arc<Authority>,
    /// The subscribing session's id.
    session: String,
    /// For catch-up replay and thread lookups.
    store: Store,
    /// The connection's writer.
    outbox: Outbox,
    /// Id echoed in every notification.
    subscription: String,
    /// Which events this subscription carries.
    scope: ReplayScope,
    /// The session's principal (owner scope filter).
    principal: String,
    /// The session's application (owner scope filter); `None` for a
    /// principal-wide attention subscription.
    application: Option<String>,
    /// The session's token, for its grants (workspaces, providers) on the
    /// owner scope; `None` (a removed token) sees nothing.
    grants: Option<TokenSpec>,
    /// Only attention events (see the module docs).
    attention: bool,
    /// Owner scope: thread id → visible to this session.
    visible: HashMap<String, bool>,
    /// A present subscription's registration: released when the task
    /// ends or is aborted (unsubscribe, the connection closing).
    _present: Option<crate::presence::Hold>,
}

impl Forwarder {
    fn cursor_of(&self, e: &JournalEvent) -> u64 {
        match self.scope {
            ReplayScope::Thread(_) => e.thread_seq,
            ReplayScope::Owner { .. } => e.seq,
        }
    }

    /// The event's attention kinds when it is to be sent (empty on a plain
    /// subscription), or `None` when it is not.
    async fn wanted(&mut self, e: &JournalEvent) -> Option<Vec<AttentionKind>> {
        let kinds = if self.attention {
            let kinds = AttentionKind::of(e);
            if kinds.is_empty() {
                return None;
            }
            kinds
        } else {
            Vec::new()
        };
        self.visible_event(e).await.then_some(kinds)
    }

    async fn visible_event(&mut self, e: &JournalEvent) -> bool {
        match &self.scope {
            ReplayScope::Thread(t) => &e.thread_id == t,
            ReplayScope::Owner { .. } => {
                if let Some(v) = self.visible.get(&e.thread_id) {
                    return *v;
                }
                let v = match self.store.get_thread(&e.thread_id).await {
                    Ok(t) => {
                        t.principal == self.principal
                            && self
                                .application
                                .as_ref()
                                .is_none_or(|a| *a == t.application)
                            && self.grants.as_ref().is_some_and(|g| {
                                g.allows_workspace(&t.workspace_id)
                                    && g.allows_provider(&t.provider)
                            })
                    }
                    Err(_) => false,
                };
                self.visible.insert(e.thread_id.clone(), v);
                v
            }
        }
    }

    async fn notify(&self, method: &str, params: impl serde::Serialize) {
        self.outbox.notify(method, &params).await;
    }

    /// Whether the session is gone; if so, the subscription's last notice
    /// (`journal.ended` naming the reason) has been queued.
    async fn session_ended(&self, cursor: u64) -> bool {
        match self.authority.check(&self.session) {
            Ok(_) => false,
            Err(error) => {
                tracing::info!(subscription = %self.subscription, session = %self.session, "session ended; closing its subscription");
                let params = JournalEndedParams {
                    subscription: self.subscription.clone(),
                    resume_after: Some(cursor),
                    error: Some(error),
                };
                self.notify(JOURNAL_ENDED, params).await;
                true
            }
        }
    }

    /// Time until the session expires by the authority's clock (at least a
    /// second, so a clock that does not move cannot spin the loop; a session
    /// without an expiry is re-checked hourly).
    fn until_expiry(&self) -> Duration {
        let left_ms = match self.authority.check(&self.session) {
            Ok(s) => s
                .expires_at
                .map_or(3_600_000, |at| at.saturating_sub(self.authority.now_ms())),
            Err(_) => 0,
        };
        Duration::from_millis(u64::try_from(left_ms).unwrap_or(0).max(1000))
    }

    async fn send(&self, e: &JournalEvent, attention: Vec<AttentionKind>) -> bool {
        let params = JournalEventParams {
            subscription: self.subscription.clone(),
            event: e,
            attention,
        };
        self.outbox.notify(JOURNAL_EVENT, &params).await
    }

    async fn run(
        mut self,
        mut rx: tokio::sync::broadcast::Receiver<Arc<JournalEvent>>,
        after: Option<u64>,
    ) {
        // Highest global `seq` already sent; live events at or below it are
        // duplicates of the catch-up.
        let mut sent_seq: u64 = 0;
        let mut cursor = after.unwrap_or(0);
        if let Some(after) = after {
            let mut from = after;
            loop {
                let page = match self
                    .store
                    .replay(self.scope.clone(), from, CATCH_UP_PAGE)
                    .await
                {
                    Ok(p) => p,
                    Err(e) => {
                        let err = store_err(e);
                        let params = JournalEndedParams {
                            subscription: self.subscription.clone(),
                            resume_after: None,
                            error: Some(err),
                        };
                        self.notify(JOURNAL_ENDED, params).await;
                        return;
                    }
                };
                for e in &page.events {
                    // The replayed page is the scope's; an attention
                    // subscription sends only what it classifies.
                    let Some(kinds) = self.wanted(e).await else {
                        continue;
                    };
                    if self.session_ended(cursor).await || !self.send(e, kinds).await {
                        return;
                    }
                    sent_seq = sent_seq.max(e.seq);
                    cursor = self.cursor_of(e);
                }
                from = page.next_after;
                if !page.more {
                    break;
                }
            }
        }
        let mut revocations = Some(self.authority.revocations());
        // One timer for the session's expiry, re-armed when it fires (not
        // a new one per event forwarded).
        let expiry = tokio::time::sleep(self.until_expiry());
        tokio::pin!(expiry);
        loop {
            let received = tokio::select! {
                r = rx.recv() => r,
                changed = async {
                    match revocations.as_mut() {
                        Some(w) => w.changed().await.is_ok(),
                        None => std::future::pending().await,
                    }
                } => {
                    if !changed {
                        revocations = None;
                    }
                    if self.session_ended(cursor).await {
                        return;
                    }
                    continue;
                }
                () = &mut expiry => {
                    if self.session_ended(cursor).await {
                        return;
                    }
                    expiry.as_mut().reset(tokio::time::Instant::now() + self.until_expiry());
                    continue;
                }
            };
            match received {
                Ok(e) => {
                    if e.seq <= sent_seq {
                        continue;
                    }
                    let Some(kinds) = self.wanted(&e).await else {
                        continue;
                    };
                    if self.session_ended(cursor).await || !self.send(&e, kinds).await {
                        return;
                    }
                    sent_seq = e.seq;
                    cursor = self.cursor_of(&e);
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(subscription = %self.subscription, missed, "subscriber lagged");
                    let params = JournalLaggedParams {
                        subscription: self.subscription.clone(),
                        resume_after: cursor,
                        missed,
                    };
                    self.notify(JOURNAL_LAGGED, params).await;
                    return;
                }
                Err(RecvError::Closed) => {
                    let params = JournalEndedParams {
                        subscription: self.subscription.clone(),
                        resume_after: Some(cursor),
                        error: None,
                    };
                    self.notify(JOURNAL_ENDED, params).await;
                    return;
                }
            }
        }
    }
}
