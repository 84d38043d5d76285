//! A claim's steps before its agent, in order: the provider the turn was
//! prepared with, its budgets, the `ask` probe, its MCP servers, then the
//! thread's named ports, each kind's [`ClaimStep`] in the order of
//! `lapis_protocol::port_kinds!` (context, memory, transcript store). Each step gives its
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

/// A named port kind's step in a claim before its agent (implemented for
/// the kind's registration params, the type its `port_kinds!` row names):
/// nothing by default. A kind asked at the claim waits for the
/// application ([`ClaimStep::WAITS`]) and adds what its port answered to
/// [`Gathered`], or halts the claim.
pub(crate) trait ClaimStep {
    /// Whether the step waits for the application (the claiming batch
    /// then commits before the steps run).
    const WAITS: bool = false;
    /// The step for a thread that binds `port` of this kind.
    async fn before_agent(
        engine: &Engine,
        claim: &Claim,
        port: &str,
        gathered: &mut Gathered,
    ) -> Result<(), Halt> {
        let _ = (engine, claim, port, gathered);
        Ok(())
    }
}

/// What the named ports' claim steps give the run.
#[derive(Debug, Default)]
pub(crate) struct Gathered {
    /// The ports' context blocks, in kind order.
    pub(crate) context: Vec<acp::PromptContext>,
    /// The transcript store's feed, when the thread binds one: it carries
    /// the turn's output until dropped, after the turn's end is committed.
    pub(crate) feed: Option<Feed>,
}

/// Each named kind's claim step, from the one declaration of the kinds.
macro_rules! claim_steps {
    ($(
        $(#[$doc:meta])*
        $Kind:ident {
            member: $member:ident = $wire:literal,
            label: $label:literal,
            binding: { $(#[$bdoc:meta])* },
            params: $params:ty,
            $($rest:tt)*
        }
    )*) => {
        impl Engine {
            /// The named ports' claim steps, in kind order (see [`ClaimStep`]).
            async fn port_steps(&self, guard: &ClaimGuard, claim: &Claim) -> Result<Gathered, Halt> {
                let ports = &claim.thread.ports;
                if false $(|| (<$params as ClaimStep>::WAITS && ports.$member.is_some()))* {
                    // These ports answer at the application's pace: the
                    // claiming batch commits now instead of waiting for them.
                    guard.boundary_later();
                }
                let mut gathered = Gathered::default();
                $(
                    if let Some(port) = &ports.$member {
                        <$params as ClaimStep>::before_agent(self, claim, port, &mut gathered).await?;
                    }
                )*
                Ok(gathered)
            }
        }
    };
}

lapis_protocol::port_kinds!(claim_steps);

use super::*;

/// Why a claim goes no further.
#[derive(Debug)]
pub(crate) enum Halt {
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
    pub(crate) fn failed(code: OutcomeCode) -> Halt {
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
        // The context port is asked before any agent is taken (a turn
        // without its context never reaches one), then the memory port,
        // last the transcript store (see each kind's `ClaimStep`).
        let Gathered { context, feed } = self.port_steps(guard, claim).await?;
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
