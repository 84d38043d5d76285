//! The claim's last step before an agent for a thread that binds a
//! transcript store: its prompt appended and acknowledged, or the claim
//! halts before the dispatch boundary (see `tools::transcript`, `steps`).

use super::steps::{ClaimStep, Gathered, Halt};
use super::*;

/// The transcript store's claim step, last: it keeps the prompt
/// (acknowledged within its deadline) or the turn fails there.
impl ClaimStep for lapis_protocol::transcript::store::TranscriptRegister {
    const WAITS: bool = true;
    async fn before_agent(
        engine: &Engine,
        claim: &Claim,
        port: &str,
        gathered: &mut Gathered,
    ) -> Result<(), Halt> {
        let feed = engine
            .keep_transcript(&claim.thread, &claim.turn.id, port, claim.cancel.clone())
            .await?;
        gathered.feed = Some(feed);
        Ok(())
    }
}

impl Engine {
    /// The prompt of a turn of a thread that binds a transcript store,
    /// appended to it and acknowledged: the feed that carries the turn's
    /// output on, or the turn fails `transcript_store_failed` instead (the
    /// agent never sees it).
    pub(super) async fn keep_transcript(
        &self,
        thread: &lapis_protocol::Thread,
        turn_id: &str,
        port: &str,
        mut cancel: tokio::sync::watch::Receiver<bool>,
    ) -> Result<crate::tools::transcript::Feed, Halt> {
        use lapis_protocol::context::PortRefusal;
        // Subscribed before the prompt is looked up: no output of the turn
        // can be journaled before it (the agent has not seen the prompt).
        let events = self.store.subscribe();
        // The claiming batch may hold the turn's submit: once the writer
        // has answered this, it is committed (the boundary-later notice
        // went out), so the prompt's event can be read.
        let committed = self.store.flush().await;
        let read = match committed {
            Ok(()) => self.store.user_event(&thread.id, turn_id).await,
            Err(e) => Err(e),
        };
        let refusal = match read {
            Ok(Some(prompt)) if prompt.payload.is_some() => {
                let tools = &self.config.tools;
                let start = crate::tools::transcript::Feed::start(
                    tools,
                    self.store.clone(),
                    thread,
                    port,
                    prompt,
                    events,
                );
                // A cancel while the store is answering abandons the append
                // (the feed ends without going on): nothing was dispatched.
                let cancelled = async {
                    // A signal whose sender is gone never cancels.
                    if cancel.wait_for(|c| *c).await.is_err() {
                        std::future::pending::<()>().await;
                    }
                };
                let started = tokio::select! {
                    r = start => Some(r),
                    () = cancelled => None,
                };
                let Some(started) = started else {
                    tracing::info!(turn = %turn_id, port = %port, "cancelled while the transcript store was answering");
                    let cancelled = TurnEnd::Cancelled(OutcomeCode::CancelledBeforeDispatch);
                    return Err(Halt::End(cancelled));
                };
                match started {
                    Ok(feed) => return Ok(feed),
                    Err(refusal) => refusal,
                }
            }
            Ok(_) => PortRefusal::TranscriptStoreFailed {
                port: port.to_owned(),
                why: "the prompt's content is no longer in memory (a restart since its submit)",
            },
            Err(err) => {
                tracing::error!(turn = %turn_id, code = err.code(), "reading the prompt for the transcript store failed");
                PortRefusal::TranscriptStoreFailed {
                    port: port.to_owned(),
                    why: "the prompt could not be read",
                }
            }
        };
        tracing::warn!(turn = %turn_id, port = %port, error = %refusal, "transcript store failed before dispatch");
        Err(Halt::failed(OutcomeCode::Refused(refusal.code())))
    }
}
