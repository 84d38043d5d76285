//! Around a turn: its provider and command lookup, which live agent may
//! carry it, recording its end (retried while the storage refuses writes),
//! and forgetting a finished turn task.

use std::time::Duration;

use lapis_protocol::tools::ToolRefusal;
use lapis_protocol::{McpRefused, Note, ReplaceReason, UnsupportedRequest};

use crate::acp::mcp::LaunchRefusal;

use super::*;

impl Engine {
    /// The current definition of provider `name` (config reloads replace it).
    pub fn provider_spec(&self, name: &str) -> Option<ProviderSpec> {
        let providers = self.providers.read().unwrap_or_else(|p| p.into_inner());
        providers.get(name).cloned()
    }

    /// What the store's claim records of a thread's provider: the current
    /// definition (a reload is seen by the next claim), its fingerprint
    /// (folded with the identities of the thread's application MCP
    /// servers, so a changed server replaces the session) and the MCP
    /// servers its session gets, resolved here so what is recorded is what
    /// is sent.
    pub(super) fn preparer(&self) -> Preparer {
        let providers = Arc::clone(&self.providers);
        let engine = self.clone();
        // Each provider's last definition with its fingerprint: the claim
        // runs on the store's writer, and hashing the definition at every
        // claim cost it a JSON document, a SHA-256 and its hex each turn.
        // A reload's new definition is unequal, so it is hashed again.
        let fingerprints: std::sync::Mutex<HashMap<String, (ProviderSpec, String)>> =
            std::sync::Mutex::default();
        Arc::new(move |thread: &crate::domain::Thread| {
            let providers = providers.read().unwrap_or_else(|p| p.into_inner());
            let spec = providers.get(&thread.provider)?.clone();
            drop(providers);
            let fingerprint = {
                let mut known = fingerprints.lock().unwrap_or_else(|p| p.into_inner());
                match known.get(&thread.provider) {
                    Some((seen, fp)) if *seen == spec => fp.clone(),
                    _ => {
                        let fp = acp::fingerprint(&spec);
                        known.insert(thread.provider.clone(), (spec.clone(), fp.clone()));
                        fp
                    }
                }
            };
            let mcp = engine.resolve_mcp(thread, &spec);
            let launch = mcp.as_deref().unwrap_or_default();
            let app_ids: Vec<String> = launch
                .iter()
                .skip(spec.mcp_servers.len())
                .map(|s| s.endpoint().identity)
                .collect();
            Some(ProviderFacts {
                fingerprint: acp::with_app_servers(&fingerprint, &app_ids),
                mcp_servers: launch.iter().map(|s| s.endpoint()).collect(),
                spec,
                mcp,
            })
        })
    }

    /// Replaces the providers for turns claimed from now on (config
    /// reload; the caller adds the built-in `echo` as at start).
    pub(crate) fn replace_providers(&self, providers: BTreeMap<String, ProviderSpec>) {
        *self.providers.write().unwrap_or_else(|p| p.into_inner()) = providers;
    }

    /// Replaces the budgets for turns claimed from now on (reload).
    pub(crate) fn replace_budgets(&self, budgets: Vec<lapis_protocol::config::Budget>) {
        *self.budgets.write().unwrap_or_else(|p| p.into_inner()) = budgets;
    }

    /// Replaces the workspaces' evidence modes for turns claimed from now
    /// on (reload).
    pub(crate) fn replace_evidence(&self, evidence: BTreeMap<String, EvidenceMode>) {
        *self.evidence.write().unwrap_or_else(|p| p.into_inner()) = evidence;
    }

    /// Each of `workspaces` and each workspace with snapshots since start:
    /// its evidence setting now and what its recent snapshots cost.
    pub(crate) fn evidence_costs(
        &self,
        workspaces: impl IntoIterator<Item = String>,
    ) -> Vec<lapis_protocol::snapshot::EvidenceCost> {
        let modes = workspaces
            .into_iter()
            .map(|id| {
                let mode = self.evidence_of(&id);
                (id, mode)
            })
            .collect();
        self.evidence_costs
            .report(&modes, |id| self.evidence_of(id))
    }

    /// The recorder of snapshot costs, for a turn's evidence.
    pub(super) fn evidence_recorder(&self) -> Arc<crate::engine::evidence_cost::EvidenceCosts> {
        self.evidence_costs.clone()
    }

    /// How workspace `id` keeps evidence now.
    pub(super) fn evidence_of(&self, id: &str) -> EvidenceMode {
        self.evidence
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .copied()
            .unwrap_or_default()
    }

    /// The budgets claims are checked against now.
    pub(crate) fn budgets(&self) -> Vec<lapis_protocol::config::Budget> {
        self.budgets
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The outcome a claimed turn fails with because of its budgets, if
    /// any: `budget_exhausted` when one covering it is spent (logged with
    /// its key), `budget_unavailable` when the spending cannot be read.
    /// Budgets fail closed: a turn whose budget cannot be checked never
    /// reaches a port or an agent, since an unread ceiling is no ceiling.
    pub(super) async fn budget_refusal(
        &self,
        thread: &lapis_protocol::Thread,
        turn: &str,
    ) -> Option<lapis_protocol::OutcomeCode> {
        let mut budgets = self.budgets();
        // The thread's own budget counts like a configured one.
        if let Some(own) = &thread.budget {
            budgets.push(own.for_thread(&thread.id));
        }
        let spent = super::super::budgets::spent(
            &self.store,
            &budgets,
            &thread.id,
            &thread.workspace_id,
            &thread.application,
            super::super::budgets::now_ms(),
        )
        .await;
        match spent {
            Ok(Some(key)) => {
                tracing::warn!(turn = %turn, budget = %key, "budget spent; turn not started");
                Some(lapis_protocol::OutcomeCode::BudgetExhausted)
            }
            Ok(None) => None,
            Err(err) => {
                tracing::error!(
                    turn = %turn,
                    code = err.code(),
                    "reading budgets failed; turn not started"
                );
                Some(lapis_protocol::OutcomeCode::BudgetUnavailable)
            }
        }
    }

    /// Replaces the agent secrets for turns started from now on (reload).
    pub(crate) fn replace_secrets(&self, secrets: EnvFile) {
        *self.secrets.write().unwrap_or_else(|p| p.into_inner()) = secrets;
        self.secrets_generation.fetch_add(1, Ordering::SeqCst);
        self.pool.retire_idle();
    }

    /// The lookup a turn launches with: the one at start, with the current
    /// secrets.
    pub(super) fn lookup(&self) -> CommandLookup {
        let mut lookup = self.config.lookup.clone();
        lookup.secrets = self
            .secrets
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        lookup
    }

    /// A provider as the next turn would launch it: its spec, the
    /// command lookup and secrets in effect, and the runner limits
    /// (`providers.check`). `None` for a provider that is not configured.
    pub(crate) fn launch_of(
        &self,
        name: &str,
    ) -> Option<(ProviderSpec, CommandLookup, crate::acp::RunnerLimits)> {
        let spec = self
            .providers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()?;
        Some((spec, self.lookup(), self.config.limits))
    }

    /// Application tool endpoints and bridge tickets.
    pub(crate) fn tools(&self) -> &crate::tools::Tools {
        &self.config.tools
    }

    /// The registry of application MCP servers.
    pub fn mcp(&self) -> &super::super::McpRegistry {
        &self.config.mcp
    }

    /// The MCP servers a turn of `thread` gives the agent, resolved with
    /// their environment values (the env file at this moment, then the
    /// controller's environment), or the refusal that fails the turn.
    fn resolve_mcp(
        &self,
        thread: &lapis_protocol::Thread,
        spec: &ProviderSpec,
    ) -> Result<Vec<acp::mcp::LaunchServer>, LaunchRefusal> {
        let lookup = self.lookup();
        let mut servers = self
            .config
            .mcp
            .lookup(&thread.principal, &thread.application, &thread.mcp_servers)
            .and_then(|app| {
                acp::mcp::resolve(spec, thread.restricted, &app, |n| lookup.env_value(n))
            })?;
        if let Some(bridge) = self.bridge_for(thread)? {
            servers.push(bridge);
        }
        Ok(servers)
    }

    /// The MCP bridge a turn of `thread` gives its agent (none without
    /// tools), after the claim's checks: no tools on a restricted thread,
    /// and every bound endpoint registered by the thread's application now.
    fn bridge_for(
        &self,
        thread: &lapis_protocol::Thread,
    ) -> Result<Option<acp::mcp::LaunchServer>, ToolRefusal> {
        if !thread.ports.bridged() {
            return Ok(None);
        }
        if thread.restricted {
            return Err(ToolRefusal::Restricted);
        }
        self.config.tools.registry.lookup(
            &thread.principal,
            &thread.application,
            &thread.ports.tools,
        )?;
        let Some((exe, socket)) = &self.config.bridge else {
            return Err(ToolRefusal::Unavailable {
                endpoint: thread.ports.bridge_name().to_owned(),
            });
        };
        Ok(Some(acp::mcp::LaunchServer::bridge(exe, socket)))
    }

    /// The ticket of a turn's agent session when its thread has tools: a
    /// kept agent's own (nothing new is issued), else a new one, written
    /// into the bridge's environment in `mcp`. `(hold, session number)`.
    pub(super) fn ticket_for(
        &self,
        thread: &lapis_protocol::Thread,
        agent: Option<&LiveAgent>,
        mcp: &mut [acp::mcp::LaunchServer],
    ) -> std::io::Result<(Option<crate::tools::TicketHold>, Option<u64>)> {
        if !thread.ports.bridged() {
            return Ok((None, None));
        }
        if let Some(session) = agent.and_then(LiveAgent::ticket_session) {
            return Ok((None, Some(session)));
        }
        let (secret, hold) =
            self.config
                .tools
                .tickets
                .issue(&thread.id, &thread.principal, &thread.application)?;
        for s in mcp.iter_mut().filter(|s| s.is_bridge()) {
            s.with_ticket(&secret);
        }
        let session = hold.session();
        Ok((Some(hold), Some(session)))
    }

    /// Fails a claimed turn whose MCP servers were refused, before anything
    /// is launched: the refusal's code is the outcome, and an `mcp_servers`
    /// observation says why (names and positions, never a value).
    pub(super) async fn refuse_mcp(&self, turn_id: &str, refusal: &LaunchRefusal) {
        let code = OutcomeCode::Refused(refusal.code());
        tracing::warn!(turn = %turn_id, code = code.as_str(), "mcp servers refused before dispatch");
        let event = Note::McpRefused(McpRefused {
            refused: code,
            message: refusal.to_string(),
        });
        let _ = self.store.append_activity(turn_id, event.into()).await;
        self.finish(turn_id, TurnEnd::Failed(code)).await;
    }

    /// Starts claiming and running turns on the current tokio runtime.
    /// First kills agents a previous controller left running (their turns
    /// were already settled by the store's recovery at open).
    pub fn start(&self) -> EngineHandle {
        let reaped = self.registry.reap_orphans();
        if !reaped.is_empty() {
            tracing::warn!(
                groups = reaped.len(),
                "killed orphaned agents of a previous controller"
            );
        }
        let (stop, stop_rx) = watch::channel(false);
        tokio::spawn(self.pool.clone().reap_idle(stop_rx.clone()));
        let task = tokio::spawn(self.clone().run(stop_rx));
        EngineHandle { stop, task }
    }

    /// The thread's live agent, if it may carry this turn: same session as
    /// the thread's binding, no replacement due, still running. What it said
    /// while idle is journaled as late output of the turn it last ran.
    pub(super) async fn live_agent(
        &self,
        thread: &str,
        bound: Option<&SessionBinding>,
        replace: Option<ReplaceReason>,
    ) -> Option<LiveAgent> {
        let out = self.pool.checkout(thread)?;
        let mut agent = out.agent.resume().await?;
        let stale = agent.take_stale().await;
        for msg in stale.messages {
            drop(
                self.store
                    .append_activity(&out.last_turn, acp::late_update(msg)),
            );
        }
        let same = bound.is_some_and(|b| b.session_id == agent.session_id());
        if stale.gone || replace.is_some() || !same {
            self.pool.retire(agent);
            return None;
        }
        Some(agent)
    }

    /// Records the turn's end. A write refused by the storage (disk full,
    /// read-only, I/O) is retried with a bounded backoff until it commits,
    /// so the turn settles and its workspace is released as soon as the
    /// condition clears, without a restart; the turn keeps its lease
    /// meanwhile, so nothing else runs in that workspace on a half-written
    /// record. An end the store refuses for any other reason is recorded
    /// as `submission_unknown` (`end_refused`) instead, and if even that is
    /// refused the turn is fenced in memory: no failure leaves a workspace
    /// in flight. `true` when the turn ended fenced (outcome unknown or
    /// interrupted).
    pub(super) async fn finish(&self, turn_id: &str, end: TurnEnd) -> bool {
        let mut backoff = Duration::from_millis(100);
        let mut end = end;
        loop {
            match self.store.finish_turn(turn_id, end.clone()).await {
                Ok(out) if !out.applied => {
                    tracing::warn!(turn = %turn_id, "turn end refused by the state table (recorded as observation)");
                    return out.turn.state.is_fenced();
                }
                Ok(out) => return out.turn.state.is_fenced(),
                Err(err) if err.storage_condition().is_some() => {
                    tracing::warn!(
                        turn = %turn_id,
                        condition = err.storage_condition().unwrap_or(""),
                        retry_ms = backoff.as_millis() as u64,
                        "cannot record the turn's end yet; retrying"
                    );
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
                Err(err) if end != TurnEnd::Unknown(OutcomeCode::EndRefused) => {
                    tracing::error!(turn = %turn_id, code = err.code(), "the store refused the turn's end; recording it as unknown");
                    end = TurnEnd::Unknown(OutcomeCode::EndRefused);
                    continue;
                }
                Err(err) => {
                    tracing::error!(turn = %turn_id, code = err.code(), "recording a turn's end failed");
                    if let Err(err) = self.store.fence_in_memory(turn_id).await {
                        tracing::error!(turn = %turn_id, code = err.code(), "fencing the turn in memory failed");
                    }
                    return true;
                }
            }
        }
    }
}

/// Journals what an idle agent sends, on the turn it last ran (a finished
/// turn: the store records it as a late observation that changes nothing).
/// A request (it has an id), already refused at once, is observed as an
/// `unsupported_request`; anything else as late output.
pub(super) fn idle_journal(store: Store) -> IdleJournal {
    Arc::new(move |turn: &str, msg: serde_json::Value| {
        let method = msg.get("method").and_then(serde_json::Value::as_str);
        let event = match (method, msg.get("id")) {
            (Some(method), Some(_)) => Note::UnsupportedRequest(UnsupportedRequest {
                method: method.to_owned(),
                idle: true,
            })
            .into(),
            _ => acp::late_update(msg),
        };
        drop(store.append_activity(turn, event));
    })
}

pub(super) fn forget(
    live: &mut HashMap<tokio::task::Id, Live>,
    done: Result<(tokio::task::Id, ()), tokio::task::JoinError>,
) {
    match done {
        Ok((id, ())) => {
            live.remove(&id);
        }
        Err(err) if err.is_panic() => {
            // A panicked runner left its turn unsettled; keep it in `live`
            // so shutdown settles it, and say so now.
            tracing::error!("a turn task panicked");
        }
        Err(_) => {}
    }
}
