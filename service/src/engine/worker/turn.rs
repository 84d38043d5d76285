//! One claimed turn's task, start to end: its refusals before any agent
//! (provider, budget, tools), its context, memory and transcript ports, the
//! run on a live or new agent, and the outcome made durable before the
//! agent is kept or torn down.
//!
//! What must stay true: every exit settles the claim through its
//! [`ClaimGuard`] (slot and boundary signal once); what the turn used and
//! its held text are queued before its end; a kept agent is back in the
//! pool before the end commits (the workspace's next turn finds it idle).

use super::*;

impl Engine {
    /// Runs one claimed turn on the thread's live agent or a new one. The
    /// outcome is made durable as soon as the runner has it; only then is
    /// the agent kept or torn down, so a crash during teardown never turns
    /// a reported outcome into an unknown one.
    pub(in crate::engine) async fn run_claim(
        self,
        claim: Claim,
        dispatched: Arc<AtomicBool>,
        settled: Arc<AtomicBool>,
        permit: OwnedSemaphorePermit,
    ) {
        // Settles the running slot and the boundary signal on every exit.
        let mut guard = ClaimGuard::new(self.store.clone(), self.running.clone(), permit);
        let turn_id = claim.turn.id.clone();
        let thread_id = claim.thread.id.clone();
        // The provider and policy the turn was prepared with, as recorded
        // in the claim's transaction; a reload since does not change them.
        let (Some(facts), Some(prepared)) = (claim.provider, claim.turn.prepared.clone()) else {
            guard.boundary_later();
            guard.release();
            self.finish(&turn_id, TurnEnd::Failed(OutcomeCode::UnknownProvider))
                .await;
            return;
        };
        // Budgets first: a spent one fails the turn before any port or
        // agent is asked for anything (see `budgets`).
        if self.budget_spent(&claim.thread, &turn_id).await {
            guard.boundary_later();
            guard.release();
            self.finish(&turn_id, TurnEnd::Failed(OutcomeCode::BudgetExhausted))
                .await;
            return;
        }
        // An `ask` turn of a provider found ignoring approval (see `ask`).
        if self.ask_refused(&turn_id, &prepared, &facts).await {
            guard.boundary_later();
            guard.release();
            self.finish(&turn_id, TurnEnd::Failed(OutcomeCode::AskUnavailable))
                .await;
            return;
        }
        let mcp = match facts.mcp {
            Ok(mcp) => mcp,
            Err(refusal) => {
                guard.boundary_later();
                guard.release();
                self.refuse_mcp(&turn_id, &refusal).await;
                return;
            }
        };
        // The thread's context port is asked now, before any agent is
        // taken: a turn without its context never reaches one. The
        // claiming batch does not wait for the application's answer.
        let mut context = match &claim.thread.ports.context {
            None => Vec::new(),
            Some(port) => {
                guard.boundary_later();
                let port = port.clone();
                let prepared = self
                    .prepare_context(&mut guard, &claim.thread, &turn_id, &claim.prompt, &port)
                    .await;
                match prepared {
                    Some(blocks) => blocks,
                    None => return,
                }
            }
        };
        // Then the thread's memory port: recalled with the prompt, after
        // the context port's blocks and before the prompt text.
        if let Some(port) = claim.thread.ports.memory.clone() {
            guard.boundary_later();
            let recalled = self
                .recall_memory(&mut guard, &claim.thread, &turn_id, &claim.prompt, &port)
                .await;
            match recalled {
                Some(block) => context.extend(block),
                None => return,
            }
        }
        // Last before the agent: the thread's transcript store keeps the
        // prompt (acknowledged within its deadline) or the turn fails here;
        // the feed then carries the turn's output until it is dropped,
        // after the turn's end is committed (see `tools::transcript`).
        let _feed = match claim.thread.ports.transcript_store.clone() {
            None => None,
            Some(port) => {
                guard.boundary_later();
                match self
                    .keep_transcript(
                        &mut guard,
                        &claim.thread,
                        &turn_id,
                        &port,
                        claim.cancel.clone(),
                    )
                    .await
                {
                    Some(feed) => Some(feed),
                    None => return,
                }
            }
        };
        let (spec, fingerprint) = (facts.spec, facts.fingerprint);
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
        let hooks = Arc::new(
            StoreHooks::new(
                self.store.clone(),
                turn_id.clone(),
                &claim.thread,
                self.broker.clone(),
                dispatched,
                guard.boundary(),
                fingerprint,
                crate::engine::evidence::Evidence::new(
                    &self.store.options().home,
                    &claim.workspace.id,
                    PathBuf::from(&claim.workspace.path),
                    self.evidence_of(&claim.workspace.id),
                    self.evidence_recorder(),
                ),
            )
            .with_ceiling(ceiling),
        );
        let mut limits = self.config.limits;
        // A metadata-only thread keeps no agent stderr, not even redacted.
        limits.stderr.keep = prepared.retention == crate::domain::Retention::Full;
        limits.setup_timeout = Duration::from_secs(spec.session.handshake_seconds);
        // A request waits the thread's own `permissionTimeoutSeconds`, else
        // the provider's, never past the turn's own deadline.
        let turn_seconds = claim
            .turn
            .max_turn_seconds
            .unwrap_or(spec.session.max_turn_seconds);
        let wait = claim
            .thread
            .permission_timeout_seconds
            .unwrap_or(spec.session.permission_timeout_seconds);
        limits.permission_timeout = Duration::from_secs(wait.min(turn_seconds));
        let generation = self.secrets_generation.load(Ordering::SeqCst);
        let agent = self.live_agent(&thread_id, bound.as_ref(), replace).await;
        // A thread with tools: a new agent session gets a fresh ticket in
        // its bridge's environment; a kept one has its own. The session's
        // calls are this turn's while `_active` lives.
        let mut mcp = mcp;
        let (ticket, session) = match self.ticket_for(&claim.thread, agent.as_ref(), &mut mcp) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(turn = %turn_id, error = %e, "cannot issue a tool ticket");
                guard.boundary_later();
                let refusal = acp::mcp::LaunchRefusal::Tools(
                    lapis_protocol::tools::ToolRefusal::Unavailable {
                        endpoint: claim
                            .thread
                            .ports
                            .tools
                            .first()
                            .cloned()
                            .unwrap_or_default(),
                    },
                );
                self.refuse_mcp(&turn_id, &refusal).await;
                return;
            }
        };
        let _active = session.map(|s| self.config.tools.active.begin(s, &thread_id, &turn_id));
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
            spec: spec.clone(),
        };
        let cancel = claim.cancel.clone();
        let limit = claim
            .turn
            .max_turn_seconds
            .unwrap_or(spec.session.max_turn_seconds);
        let deadline = Deadline::arm(stop.clone(), limit);
        let mut run = run_turn_on(
            request,
            agent,
            ticket,
            hooks.clone(),
            CancelSignal::from(claim.cancel),
        )
        .await;
        if !hooks.dispatched.load(Ordering::SeqCst) {
            // Ended before its boundary (cancelled, refused): the batch
            // that claimed it need not wait for one (a no-op after a
            // cold start's notice).
            guard.boundary_later();
        }
        let mut end = turn_end(&run.outcome, *cancel.borrow());
        deadline.disarm();
        if let Some(reason) = stop.reason() {
            end = stopped_end(end, reason);
        }
        // What the turn used is on its row before its end is told to
        // anyone, so a budget checked at the next claim counts it.
        if run.context_usage.is_some() || run.tokens.is_some() {
            self.store.record_usage_before_end(
                &turn_id,
                run.context_usage.take(),
                run.tokens.take(),
            );
        }
        // Text held back for redaction is queued before the turn's end.
        // Output the store refused or failed to write (disk full, …) makes
        // the store end the turn `journal_write_failed` instead (unknown
        // past the boundary, failed before it): the finish runs after every
        // append queued before it and commits with them, so it is not held
        // back waiting for their answers.
        if let Err(e) = hooks.flush_held().await {
            tracing::error!(turn = %turn_id, code = %e.0, "held text was not journaled");
            end = if hooks.dispatched.load(Ordering::SeqCst) {
                TurnEnd::Unknown(OutcomeCode::JournalWriteFailed)
            } else {
                TurnEnd::Failed(OutcomeCode::JournalWriteFailed)
            };
        }
        // The outcome's snapshot, queued before the end while the turn
        // still holds its workspace (see `evidence`).
        if hooks.dispatched.load(Ordering::SeqCst)
            && let Some(snapshot) = hooks.evidence.at_outcome().await
        {
            let pending = self.store.append_activity(&turn_id, snapshot);
            hooks.unconfirmed_push(pending);
        }
        // A kept agent goes back to the pool before the outcome is recorded:
        // the outcome's commit releases the workspace, and the thread's next
        // turn, claimed as soon as it is released, must find its agent idle
        // rather than start another. Nothing can take it earlier: the
        // workspace's lease (one turn at a time) is held until that commit.
        let idle = Duration::from_secs(spec.session.idle_seconds);
        let teardown = match run.after {
            AfterTurn::Keep(agent)
                if generation != self.secrets_generation.load(Ordering::SeqCst) =>
            {
                tracing::info!(thread = %thread_id, "agent not kept: agent secrets were reloaded during its turn");
                self.pool.retire(*agent);
                self.pool.checkin(&thread_id, None, &turn_id, idle);
                None
            }
            AfterTurn::Keep(agent) => {
                self.pool.checkin(&thread_id, Some(*agent), &turn_id, idle);
                None
            }
            AfterTurn::Teardown(teardown) => Some(teardown),
            AfterTurn::Gone => {
                self.pool.checkin(&thread_id, None, &turn_id, idle);
                None
            }
        };
        // Release first, then report: the slot is free before the end's
        // event can reach a subscriber (see `claim`).
        guard.release();
        let fenced = self.finish(&turn_id, end).await;
        if fenced {
            // The store recorded an unknown outcome (its journal refused
            // the turn's output): that agent is never reused.
            self.pool.discard(&thread_id);
        }
        let _ = hooks.confirm_streamed().await;
        settled.store(true, Ordering::SeqCst);
        drop(guard);
        if let Some(teardown) = teardown {
            teardown.run().await;
            self.pool.checkin(&thread_id, None, &turn_id, idle);
        }
    }
}
