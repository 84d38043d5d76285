//! A claim's port steps before the dispatch boundary (the thread's context
//! port, then its memory port): one body for both, [`Engine::port_step`].
//!
//! What must stay true: a step's record is journaled before the turn goes
//! on; a refusal or a record the journal refused ends the turn here (its
//! slot released first), and a turn that ended meanwhile goes no further.

use lapis_protocol::Payload;

use super::*;

impl Engine {
    /// The context of a turn of a thread that binds a context port, asked
    /// for now (after the claim, before the boundary) and journaled
    /// (`context_prepared`) before the turn goes on; `None` when the turn
    /// was failed `context_unavailable` instead (its agent never sees the
    /// prompt) or its record could not be journaled.
    pub(super) async fn prepare_context(
        &self,
        guard: &mut ClaimGuard,
        thread: &lapis_protocol::Thread,
        turn_id: &str,
        prompt: &str,
        port: &str,
    ) -> Option<Vec<acp::PromptContext>> {
        let tools = &self.config.tools;
        let asked = crate::tools::context::prepare(tools, thread, port, turn_id, prompt)
            .await
            .map(|p| (p.blocks, Payload::ContextPrepared(p.record)));
        self.port_step(guard, turn_id, port, PortStep::Context, asked)
            .await
    }

    /// The recall of a turn of a thread that binds a memory port, journaled
    /// (`memory_recalled`, metadata only) before the turn goes on: `Some`
    /// with the labelled block (none when nothing was found), `None` when
    /// the turn was failed `context_unavailable` instead.
    pub(super) async fn recall_memory(
        &self,
        guard: &mut ClaimGuard,
        thread: &lapis_protocol::Thread,
        turn_id: &str,
        prompt: &str,
        port: &str,
    ) -> Option<Option<acp::PromptContext>> {
        let tools = &self.config.tools;
        let asked = crate::tools::memory::recall(tools, thread, port, prompt)
            .await
            .map(|(block, record)| (block, Payload::MemoryRecalled(record)));
        self.port_step(guard, turn_id, port, PortStep::Memory, asked)
            .await
    }

    /// The shared body of a port step before the dispatch boundary: what
    /// the port answered goes on once its record is journaled; a refusal,
    /// or a record the journal refused, ends the turn here (slot released
    /// first), and a turn that ended meanwhile (a cancel: the record is
    /// observed under another kind) goes no further. `None` in each of
    /// those cases.
    async fn port_step<T>(
        &self,
        guard: &mut ClaimGuard,
        turn_id: &str,
        port: &str,
        step: PortStep,
        asked: Result<(T, Payload), lapis_protocol::context::PortRefusal>,
    ) -> Option<T> {
        let end = match asked {
            Ok((value, record)) => match self.store.append_activity(turn_id, record).await {
                Ok(e) if e.kind == step.recorded() => return Some(value),
                // The turn ended meanwhile (a cancel): nothing runs.
                Ok(_) => return None,
                Err(err) => {
                    tracing::error!(turn = %turn_id, code = err.code(), "{}", step.not_journaled());
                    TurnEnd::Failed(OutcomeCode::JournalWriteFailed)
                }
            },
            Err(refusal) => {
                let code = OutcomeCode::Refused(refusal.code());
                tracing::warn!(turn = %turn_id, port = %port, error = %refusal, "{}", step.refused());
                TurnEnd::Failed(code)
            }
        };
        guard.release();
        self.finish(turn_id, end).await;
        None
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
    /// The kind its record is journaled as.
    fn recorded(self) -> lapis_protocol::EventKind {
        match self {
            PortStep::Context => lapis_protocol::EventKind::ContextPrepared,
            PortStep::Memory => lapis_protocol::EventKind::MemoryRecalled,
        }
    }

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
