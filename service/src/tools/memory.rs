//! Recall from a thread's memory port: at a turn's preparation (searched
//! with the prompt, rendered into one labelled block) and from the agent's
//! `memory_search` / `memory_read` on the bridge.
//!
//! What must stay true: every callback's [`AccessEnvelope`] is made here
//! from the thread alone (principal, application, thread, workspace) —
//! never from the agent's arguments — and the port is looked up under the
//! thread's own principal and application, so another application's
//! thread can never reach it. A candidate with an invalid id or carrying
//! a redaction or omission marker ([`carries_marker`]) is rejected and
//! counted, never passed on. The record ([`PreparedMemory`]) is metadata.

use lapis_protocol::callback;
use lapis_protocol::context::PortRefusal;
use lapis_protocol::memory::{
    AccessEnvelope, MAX_CANDIDATES, MEMORY_BUDGET_BYTES, MemoryCandidate, MemoryCandidates,
    MemoryEvidence, MemoryRegister, MemorySearch, PreparedMemory, RecallVia, carries_marker,
};
use lapis_protocol::tools::valid_tool_name;

use super::Tools;
use super::registry::{Endpoint, PortOwner};
use crate::acp::PromptContext;
use crate::domain::Thread;

fn unavailable(port: &str, why: &'static str) -> PortRefusal {
    PortRefusal::MemoryUnavailable {
        port: port.to_owned(),
        why,
    }
}

/// The envelope of `thread`: the controller's, whatever anyone asked.
pub(crate) fn envelope(thread: &Thread) -> AccessEnvelope {
    AccessEnvelope {
        principal: thread.principal.clone(),
        application: thread.application.clone(),
        thread_id: thread.id.clone(),
        workspace_id: thread.workspace_id.clone(),
    }
}

fn port_of(
    tools: &Tools,
    thread: &Thread,
    port: &str,
) -> Result<Endpoint<MemoryRegister>, PortRefusal> {
    tools
        .registry
        .owned::<MemoryRegister>(PortOwner::thread(thread), port)
}

fn record(via: RecallVia, port: &str, identity: &str, candidates: usize) -> PreparedMemory {
    PreparedMemory {
        via,
        port: port.to_owned(),
        port_identity: identity.to_owned(),
        candidates,
        rejected: 0,
        rendered: Vec::new(),
        budget_bytes: MEMORY_BUDGET_BYTES,
        used_bytes: 0,
    }
}

/// Keeps the acceptable candidates, best first, at most `limit`; counts
/// the rejected ones into `rec`.
fn accept(
    rec: &mut PreparedMemory,
    found: Vec<MemoryCandidate>,
    limit: usize,
) -> Vec<MemoryCandidate> {
    let mut out = Vec::new();
    for c in found.into_iter().take(MAX_CANDIDATES) {
        if !valid_tool_name(&c.id) || carries_marker(&c.text) {
            rec.rejected += 1;
        } else if out.len() < limit {
            out.push(c);
        }
    }
    out
}

/// `memory.search` for `query` (at most `limit` candidates kept).
pub(crate) async fn search(
    tools: &Tools,
    thread: &Thread,
    port: &str,
    query: &str,
    limit: usize,
    via: RecallVia,
) -> Result<(Vec<MemoryCandidate>, PreparedMemory), PortRefusal> {
    let endpoint = port_of(tools, thread, port)?;
    let limit = limit.clamp(1, MAX_CANDIDATES);
    let call = MemorySearch {
        port: port.to_owned(),
        envelope: envelope(thread),
        query: query.to_owned(),
        limit,
    };
    let found: MemoryCandidates = endpoint
        .call::<callback::MemorySearch>(&call, endpoint.spec.deadline())
        .await
        .map_err(|e| unavailable(port, e.why()))?;
    let mut rec = record(via, port, &endpoint.identity, found.candidates.len());
    let kept = accept(&mut rec, found.candidates, limit);
    rec.rendered = kept.iter().map(|c| c.id.clone()).collect();
    rec.used_bytes = kept.iter().map(|c| c.text.len()).sum();
    Ok((kept, rec))
}

/// `memory.evidence` for one item; `None` when it was rejected.
pub(crate) async fn read(
    tools: &Tools,
    thread: &Thread,
    port: &str,
    id: &str,
) -> Result<(Option<MemoryCandidate>, PreparedMemory), PortRefusal> {
    let endpoint = port_of(tools, thread, port)?;
    let call = MemoryEvidence {
        port: port.to_owned(),
        envelope: envelope(thread),
        id: id.to_owned(),
    };
    let item: MemoryCandidate = endpoint
        .call::<callback::MemoryEvidence>(&call, endpoint.spec.deadline())
        .await
        .map_err(|e| unavailable(port, e.why()))?;
    let mut rec = record(RecallVia::Read, port, &endpoint.identity, 1);
    let mut kept = accept(&mut rec, vec![item], 1);
    rec.rendered = kept.iter().map(|c| c.id.clone()).collect();
    rec.used_bytes = kept.iter().map(|c| c.text.len()).sum();
    Ok((kept.pop(), rec))
}

/// The recall of a turn's preparation: searched with the prompt, the best
/// candidates rendered within [`MEMORY_BUDGET_BYTES`] into one labelled
/// block (`None` when nothing is left to show).
pub(crate) async fn recall(
    tools: &Tools,
    thread: &Thread,
    port: &str,
    prompt: &str,
) -> Result<(Option<PromptContext>, PreparedMemory), PortRefusal> {
    let (found, mut rec) = search(
        tools,
        thread,
        port,
        prompt,
        MAX_CANDIDATES,
        RecallVia::Preparation,
    )
    .await?;
    let mut text = format!(
        "Recalled from the application's memory `{port}` for this turn (search more with \
         the memory_search tool, read one item whole with memory_read):\n"
    );
    let (mut used, mut rendered) = (0, Vec::new());
    for c in &found {
        if used + c.text.len() > MEMORY_BUDGET_BYTES {
            break;
        }
        used += c.text.len();
        rendered.push(c.id.clone());
        text.push_str(&format!("- [{}] {}\n", c.id, c.text));
    }
    rec.rendered = rendered;
    rec.used_bytes = used;
    let block = (!rec.rendered.is_empty()).then(|| PromptContext {
        uri: format!("lapis://memory/{port}"),
        text,
    });
    Ok((block, rec))
}

/// Text for the agent: one line per candidate.
pub(crate) fn render(found: &[MemoryCandidate]) -> String {
    if found.is_empty() {
        return "no memory found".into();
    }
    found
        .iter()
        .map(|c| format!("[{}] {}", c.id, c.text))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(id: &str, text: &str) -> MemoryCandidate {
        MemoryCandidate {
            id: id.into(),
            text: text.into(),
        }
    }

    #[test]
    fn marker_carrying_and_badly_named_candidates_are_rejected_and_counted() {
        let mut rec = record(RecallVia::Search, "mem", "memory_x", 4);
        let kept = accept(
            &mut rec,
            vec![
                cand("a", "Ada prefers tea"),
                cand("b", "key [REDACTED:github-token]"),
                cand("c.d", "bad id"),
                cand("e", "[OMITTED:id] derived"),
                cand("f", "Ada lives in Lyon"),
            ],
            1,
        );
        assert_eq!(kept, vec![cand("a", "Ada prefers tea")]);
        assert_eq!(rec.rejected, 3);
        assert_eq!(render(&kept), "[a] Ada prefers tea");
        assert_eq!(render(&[]), "no memory found");
    }
}
