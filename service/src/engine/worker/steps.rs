//! A claim's steps before its agent, in order: the provider the turn was
//! prepared with, its budgets, the `ask` probe, its MCP servers, then the
//! thread's ports (context, memory, transcript store). Each step gives its
//! value or the [`Halt`] that ends the claim there, and
//! [`Engine::halt`] is the one place a claim ends: the claiming batch is
//! told, the slot released, then the turn's end recorded.
//!
//! What must stay true: no step runs after an earlier one halted; a step
//! that waits for an application tells the claiming batch first (it
//! commits instead of waiting for a boundary that is far off); the slot is
//! free before the turn's end is written; and a turn that ended meanwhile
//! ([`Halt::EndedMeanwhile`]: a cancel committed its end first) is not
//! ended again.

use crate::acp::mcp::LaunchRefusal;
use crate::tools::transcript::Feed;
use lapis_protocol::PreparedConfig;

use super::*;

/// Why a claim goes no further.
#[derive(Debug)]
pub(super) enum Halt {
    /// The turn ends so.
    End(TurnEnd),
    /// Its MCP servers (or its tool ticket) were refused before anything
    /// was launched: observed (`mcp_refused`), then failed with the
    /// refusal's code.
    McpRefused(LaunchRefusal),
    /// The turn ended meanwhile (a cancel committed its end first):
    /// nothing is left to record.
    EndedMeanwhile,
}

impl Halt {
    /// The turn fails with `code`.
    pub(super) fn failed(code: OutcomeCode) -> Halt {
        Halt::End(TurnEnd::Failed(code))
    }
}

/// What the steps before an agent give the run.
#[derive(Debug)]
pub(super) struct Ready {
    /// The provider definition the turn was prepared with.
    pub(super) spec: ProviderSpec,
    /// Its fingerprint (with the thread's application MCP servers).
    pub(super) fingerprint: String,
    /// The policy the turn was prepared with.
    pub(super) prepared: PreparedConfig,
    /// The MCP servers its agent session gets.
    pub(super) mcp: Vec<acp::mcp::LaunchServer>,
    /// The context and memory ports' blocks, in that order.
    pub(super) context: Vec<acp::PromptContext>,
    /// The transcript store's feed, when the thread binds one: it carries
    /// the turn's output until dropped, after the turn's end is committed.
    pub(super) feed: Option<Feed>,
}

impl Engine {
    /// The claim's steps before its agent (see the module docs).
    pub(super) async fn before_agent(
        &self,
        guard: &ClaimGuard,
        claim: &mut Claim,
    ) -> Result<Ready, Halt> {
        let turn = claim.turn.id.as_str();
        // The provider and policy the turn was prepared with, as recorded
        // in the claim's transaction; a reload since does not change them.
        let (Some(facts), Some(prepared)) = (claim.provider.take(), claim.turn.prepared.clone())
        else {
            return Err(Halt::failed(OutcomeCode::UnknownProvider));
        };
        // Budgets first: a spent one, or one that cannot be read, fails
        // the turn before any port or agent is asked for anything (see
        // `budgets`).
        if let Some(code) = self.budget_refusal(&claim.thread, turn).await {
            return Err(Halt::failed(code));
        }
        // An `ask` turn of a provider found ignoring approval (see `ask`).
        if self.ask_refused(turn, &prepared, &facts).await {
            return Err(Halt::failed(OutcomeCode::AskUnavailable));
        }
        let mcp = facts.mcp.map_err(Halt::McpRefused)?;
        let ports = &claim.thread.ports;
        // A bound port registered now under another identity than the
        // thread recorded is another port behind the name: nothing is
        // asked of it.
        let owner = crate::tools::registry::PortOwner::thread(&claim.thread);
        let changed = self.config.tools.registry.changed(owner, ports);
        if !changed.is_empty() {
            tracing::warn!(turn = %turn, ports = ?changed, "a bound port's identity changed; turn not started");
            return Err(Halt::failed(OutcomeCode::Refused(
                lapis_protocol::ErrorCode::BindingMismatch,
            )));
        }
        if ports.context.is_some() || ports.memory.is_some() || ports.transcript_store.is_some() {
            // The ports below answer at the application's pace: the
            // claiming batch commits now instead of waiting for them.
            guard.boundary_later();
        }
        // The context port is asked before any agent is taken: a turn
        // without its context never reaches one.
        let mut context = match &ports.context {
            None => Vec::new(),
            Some(port) => {
                self.prepare_context(&claim.thread, turn, &claim.prompt, port)
                    .await?
            }
        };
        // Then the memory port: recalled with the prompt, after the
        // context port's blocks and before the prompt text.
        if let Some(port) = &ports.memory {
            let recalled = self
                .recall_memory(&claim.thread, turn, &claim.prompt, port)
                .await?;
            context.extend(recalled);
        }
        // Last: the transcript store keeps the prompt (acknowledged within
        // its deadline) or the turn fails here (see `tools::transcript`).
        let feed = match &ports.transcript_store {
            None => None,
            Some(port) => Some(
                self.keep_transcript(&claim.thread, turn, port, claim.cancel.clone())
                    .await?,
            ),
        };
        Ok(Ready {
            spec: facts.spec,
            fingerprint: facts.fingerprint,
            prepared,
            mcp,
            context,
            feed,
        })
    }

    /// Ends a claim (see the module docs): the claiming batch stops waiting
    /// for a boundary (a no-op once it was written), the slot is released,
    /// then the turn's end is recorded. `true` when the turn ended fenced.
    pub(super) async fn halt(&self, guard: &mut ClaimGuard, turn: &str, halt: Halt) -> bool {
        guard.boundary_later();
        guard.release();
        match halt {
            Halt::End(end) => self.finish(turn, end).await,
            Halt::McpRefused(refusal) => {
                self.refuse_mcp(turn, &refusal).await;
                false
            }
            Halt::EndedMeanwhile => false,
        }
    }
}
