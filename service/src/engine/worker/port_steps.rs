//! A claim's port steps before the dispatch boundary (the thread's context
//! port, then its memory port): one body for both, [`Engine::port_step`].
//!
//! What must stay true: a step's record is journaled before the turn goes
//! on; a refusal or a record the journal refused halts the claim, and a
//! turn that ended meanwhile goes no further (see `steps`).

use lapis_protocol::Payload;

use crate::store::Recorded;

use super::steps::{ClaimStep, Gathered, Halt};
use super::*;

/// The context port's claim step: asked for its blocks, first.
impl ClaimStep for lapis_protocol::context::ContextRegister {
    const WAITS: bool = true;
    async fn before_agent(
        engine: &Engine,
        claim: &Claim,
        port: &str,
        gathered: &mut Gathered,
    ) -> Result<(), Halt> {
        let blocks = engine
            .prepare_context(&claim.thread, &claim.turn.id, &claim.prompt, port)
            .await?;
        gathered.context.extend(blocks);
        Ok(())
    }
}

/// The memory port's claim step: recalled with the prompt, after the
/// context port's blocks and before the prompt text.
impl ClaimStep for lapis_protocol::memory::MemoryRegister {
    const WAITS: bool = true;
    async fn before_agent(
        engine: &Engine,
        claim: &Claim,
        port: &str,
        gathered: &mut Gathered,
    ) -> Result<(), Halt> {
        let recalled = engine
            .recall_memory(&claim.thread, &claim.turn.id, &claim.prompt, port)
            .await?;
        gathered.context.extend(recalled);
        Ok(())
    }
}

impl Engine {
    /// The context of a turn of a thread that binds a context port, asked
    /// for now (after the claim, before the boundary) and journaled
    /// (`context_prepared`) before the turn goes on; the turn fails
    /// `context_unavailable` instead (its agent never sees the prompt), or
    /// `journal_write_failed` when its record could not be journaled.
    pub(super) async fn prepare_context(
        &self,
        thread: &lapis_protocol::Thread,
        turn_id: &str,
        prompt: &str,
        port: &str,
    ) -> Result<Vec<acp::PromptContext>, Halt> {
        let tools = &self.config.tools;
        let asked = crate::tools::context::prepare(tools, thread, port, turn_id, prompt)
            .await
            .map(|p| (p.blocks, Payload::ContextPrepared(p.record)));
        self.port_step(turn_id, port, PortStep::Context, asked)
            .await
    }

    /// The recall of a turn of a thread that binds a memory port, journaled
    /// (`memory_recalled`, metadata only) before the turn goes on: the
    /// labelled block (none when nothing was found), or the turn fails
    /// `context_unavailable` instead.
    pub(super) async fn recall_memory(
        &self,
        thread: &lapis_protocol::Thread,
        turn_id: &str,
        prompt: &str,
        port: &str,
    ) -> Result<Option<acp::PromptContext>, Halt> {
        let tools = &self.config.tools;
        let asked = crate::tools::memory::recall(tools, thread, port, prompt)
            .await
            .map(|(block, record)| (block, Payload::MemoryRecalled(record)));
        self.port_step(turn_id, port, PortStep::Memory, asked).await
    }

    /// The shared body of a port step before the dispatch boundary: what
    /// the port answered goes on once its record is journaled on the turn;
    /// a refusal, or a record the journal refused, halts the claim, and so
    /// does a turn that ended meanwhile (a cancel).
    async fn port_step<T>(
        &self,
        turn_id: &str,
        port: &str,
        step: PortStep,
        asked: Result<(T, Payload), lapis_protocol::context::PortRefusal>,
    ) -> Result<T, Halt> {
        match asked {
            Ok((value, record)) => {
                match self.store.append_activity(turn_id, record).on_turn().await {
                    Ok(Recorded::OnTurn) => Ok(value),
                    Ok(Recorded::TurnEnded) => Err(Halt::EndedMeanwhile),
                    Err(err) => {
                        tracing::error!(turn = %turn_id, code = err.code(), "{}", step.not_journaled());
                        Err(Halt::failed(OutcomeCode::JournalWriteFailed))
                    }
                }
            }
            Err(refusal) => {
                tracing::warn!(turn = %turn_id, port = %port, error = %refusal, "{}", step.refused());
                Err(Halt::failed(OutcomeCode::Refused(refusal.code())))
            }
        }
    }
}

/// The port steps of a claim before the dispatch boundary: what each
/// journals and how its failures are logged.
#[derive(Debug, Clone, Copy)]
enum PortStep {
    /// The context port's `context.prepare`.
    Context,
    /// The memory port's recall.
    Memory,
}

impl PortStep {
    fn not_journaled(self) -> &'static str {
        match self {
            PortStep::Context => "the prepared context was not journaled",
            PortStep::Memory => "the memory recall was not journaled",
        }
    }

    fn refused(self) -> &'static str {
        match self {
            PortStep::Context => "context refused before dispatch",
            PortStep::Memory => "memory refused before dispatch",
        }
    }
}
