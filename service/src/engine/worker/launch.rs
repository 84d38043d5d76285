//! A ready claim made into a run: its deadline and budget ceiling, the
//! hooks that journal it (with its evidence and transcript gate), the
//! runner limits, the thread's live agent or none, and the agent session's
//! tool ticket.
//!
//! What must stay true: the only way out before the runner is a refused
//! tool ticket ([`Halt::McpRefused`]), and a cold start tells the claiming
//! batch the boundary is far off before anything is launched.

use lapis_protocol::tools::ToolRefusal;

use crate::acp::mcp::LaunchRefusal;
use crate::tools::transcript::Feed;

use super::steps::{Halt, Ready};
use super::*;

/// What the runner is started with, and what the claim settles after it.
pub(super) struct Launch {
    /// The turn's request to the runner.
    pub(super) request: TurnRequest,
    /// The thread's live agent, when it may carry the turn.
    pub(super) agent: Option<LiveAgent>,
    /// A new agent session's tool ticket.
    pub(super) ticket: Option<crate::tools::TicketHold>,
    /// The hooks that journal the run.
    pub(super) hooks: Arc<StoreHooks>,
    /// The deadline's and budget ceiling's one way to stop the turn.
    pub(super) stop: Stop,
    /// The turn's limit in seconds (its own, else the provider's).
    pub(super) limit: u64,
    /// How long a kept agent may idle (`idleSeconds`).
    pub(super) idle: Duration,
    /// The secrets generation the agent starts under (a reload during the
    /// turn means it is not kept).
    pub(super) generation: u64,
    /// The agent session's tool calls are this turn's while it lives.
    pub(super) _active: Option<crate::tools::active::ActiveTurn>,
    /// The transcript store's feed, dropped after the turn's end commits.
    pub(super) _feed: Option<Feed>,
}

impl Engine {
    /// Makes a ready claim into a run (see the module docs).
    pub(super) async fn launch(
        &self,
        guard: &ClaimGuard,
        claim: Claim,
        ready: Ready,
        dispatched: Arc<AtomicBool>,
    ) -> Result<Launch, Halt> {
        let turn_id = claim.turn.id.clone();
        let thread_id = claim.thread.id.clone();
        let Ready {
            spec,
            fingerprint,
            prepared,
            mut mcp,
            context,
            feed,
        } = ready;
        let bound = claim.thread.agent_session.clone();
        let replace = bound.as_ref().and_then(|b| {
            if b.fingerprint != fingerprint {
                Some(ReplaceReason::ProviderChanged)
            } else if b.thread_version != claim.thread.version {
                Some(ReplaceReason::ThreadReconfigured)
            } else {
                None
            }
        });
        // The deadline and any per-turn budget ceiling stop the turn one
        // way, through its cancel; the first to fire names its end.
        let stop = Stop::new(self.store.clone(), turn_id.clone());
        let ceiling = crate::engine::budgets::TurnCeiling::covering(
            &self.budgets(),
            &claim.thread,
            stop.clone(),
        );
        let evidence = crate::engine::evidence::Evidence::new(
            &self.store.options().home,
            &claim.workspace.id,
            PathBuf::from(&claim.workspace.path),
            self.evidence_of(&claim.workspace.id),
            self.evidence_recorder(),
        );
        let hooks = StoreHooks::new(
            self.store.clone(),
            turn_id.clone(),
            &claim.thread,
            self.broker.clone(),
            dispatched,
            guard.boundary(),
            fingerprint,
            evidence,
        )
        .with_ceiling(ceiling)
        .with_gate(feed.as_ref().map(Feed::gate));
        let hooks = Arc::new(hooks);
        let limit = claim
            .turn
            .max_turn_seconds
            .unwrap_or(spec.session.max_turn_seconds);
        let mut limits = self.config.limits;
        // A metadata-only thread keeps no agent stderr, not even redacted.
        limits.stderr.keep = prepared.retention == crate::domain::Retention::Full;
        limits.setup_timeout = Duration::from_secs(spec.session.handshake_seconds);
        // A request waits the thread's own `permissionTimeoutSeconds`, else
        // the provider's, never past the turn's own deadline.
        let wait = claim
            .thread
            .permission_timeout_seconds
            .unwrap_or(spec.session.permission_timeout_seconds);
        limits.permission_timeout = Duration::from_secs(wait.min(limit));
        let generation = self.secrets_generation.load(Ordering::SeqCst);
        let agent = self.live_agent(&thread_id, bound.as_ref(), replace).await;
        // A thread with tools: a new agent session gets a fresh ticket in
        // its bridge's environment; a kept one has its own.
        let (ticket, session) = match self.ticket_for(&claim.thread, agent.as_ref(), &mut mcp) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(turn = %turn_id, error = %e, "cannot issue a tool ticket");
                let endpoint = claim
                    .thread
                    .ports
                    .tools
                    .first()
                    .cloned()
                    .unwrap_or_default();
                let refusal = LaunchRefusal::Tools(ToolRefusal::Unavailable { endpoint });
                return Err(Halt::McpRefused(refusal));
            }
        };
        // A tool result gives way to the turn's cancel (the permission
        // hook's gate does not: the runner answers those on a cancel).
        let gate = feed
            .as_ref()
            .map(|f| f.gate().with_cancel(claim.cancel.clone()));
        let active = session.map(|s| {
            self.config
                .tools
                .active
                .begin(s, &thread_id, &turn_id, gate)
        });
        if agent.is_none() {
            // A cold start: the boundary is far off, so the batch that
            // answered the claim (maybe holding the turn's submit) commits
            // now instead of waiting for it.
            guard.boundary_later();
        }
        if let (Some(reason), Some(b)) = (replace, &bound) {
            tracing::info!(thread = %thread_id, reason = reason.as_str(), "agent session replaced");
            let replaced = Note::SessionReplaced(SessionReplaced {
                reason,
                previous_session_id: b.session_id.clone(),
            });
            let _ = hooks.event(replaced.into()).await;
        }
        let resume = match (&agent, replace) {
            (None, None) => bound.map(|b| b.session_id),
            _ => None,
        };
        let idle = Duration::from_secs(spec.session.idle_seconds);
        let request = TurnRequest {
            workspace: PathBuf::from(&claim.workspace.path),
            prompt: claim.prompt,
            approval: prepared.approval.effective,
            restricted: prepared.restricted,
            limits,
            lookup: self.lookup(),
            registry: Some(self.registry.clone()),
            resume,
            keep_alive: spec.session.idle_seconds > 0,
            continuation: claim.context.map(|text| acp::PromptContext {
                uri: format!(
                    "lapis://continuation/{}",
                    claim.turn.continues.as_deref().unwrap_or_default()
                ),
                text,
            }),
            context,
            mcp,
            spec,
        };
        Ok(Launch {
            request,
            agent,
            ticket,
            hooks,
            stop,
            limit,
            idle,
            generation,
            _active: active,
            _feed: feed,
        })
    }
}
