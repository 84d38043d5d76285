//! A turn's context preparation: the one `context.prepare` call the claim
//! makes to the thread's context port, the controller's cut of its answer
//! to the budget, and what the journal keeps of it.
//!
//! What must stay true: this runs after the claim and before the dispatch
//! boundary, once per turn and never again (no retry); any failure — the
//! port not registered by the thread's application now, revoked while the
//! call waits, late past its deadline, answering an error or a malformed
//! answer — is a [`PortRefusal::ContextUnavailable`], which fails the turn
//! before its agent sees the prompt. The budget is the controller's: what
//! crosses it is cut here, in order, and the cut is recorded. The journal's
//! [`PreparedContext`] holds identities, digests and sizes on every thread
//! and the text only when the thread keeps content.

use std::collections::BTreeSet;

use lapis_protocol::callback;
use lapis_protocol::context::{
    CONTEXT_BUDGET_BYTES, ContextBlock, ContextPrepare, ContextPrepared, ContextRegister,
    MAX_CONTEXT_BLOCKS, PortRefusal, PreparedBlock, PreparedContext,
};
use lapis_protocol::tools::valid_tool_name;
use sha2::{Digest, Sha256};

use super::Tools;
use super::registry::PortOwner;
use crate::acp::PromptContext;
use crate::domain::{Retention, Thread};

fn unavailable(port: &str, why: &'static str) -> PortRefusal {
    PortRefusal::ContextUnavailable {
        port: port.to_owned(),
        why,
    }
}

/// What a preparation gives the turn: the blocks for the agent and the
/// record for the journal.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// In order, before the prompt text.
    pub(crate) blocks: Vec<PromptContext>,
    /// The `context_prepared` payload.
    pub(crate) record: PreparedContext,
}

/// Asks `port` (the thread's) for the context of `turn_id`.
pub(crate) async fn prepare(
    tools: &Tools,
    thread: &Thread,
    port: &str,
    turn_id: &str,
    prompt: &str,
) -> Result<Prepared, PortRefusal> {
    let endpoint = tools
        .registry
        .owned::<ContextRegister>(PortOwner::thread(thread), port)?;
    let call = ContextPrepare {
        port: port.to_owned(),
        thread_id: thread.id.clone(),
        turn_id: turn_id.to_owned(),
        workspace_id: thread.workspace_id.clone(),
        prompt: prompt.to_owned(),
        budget_bytes: CONTEXT_BUDGET_BYTES,
    };
    let answer = endpoint
        .call::<callback::ContextPrepare>(&call, endpoint.spec.deadline())
        .await
        .map_err(|e| unavailable(port, e.why()))?;
    let (kept, cut_blocks, cut_bytes) = cut_to_budget(port, answer, CONTEXT_BUDGET_BYTES)?;
    let full = thread.retention == Retention::Full;
    let record = PreparedContext {
        port: port.to_owned(),
        port_identity: endpoint.identity.clone(),
        budget_bytes: CONTEXT_BUDGET_BYTES,
        used_bytes: kept.iter().map(|(b, _)| b.text.len()).sum(),
        blocks: kept
            .iter()
            .map(|(b, cut)| PreparedBlock {
                id: b.id.clone(),
                sha256: hex::encode(Sha256::digest(b.text.as_bytes())),
                bytes: b.text.len(),
                cut: *cut,
                text: full.then(|| b.text.clone()),
            })
            .collect(),
        cut_blocks,
        cut_bytes,
    };
    let blocks = kept
        .into_iter()
        .map(|(b, _)| PromptContext {
            uri: format!("lapis://context/{port}/{}", b.id),
            text: b.text,
        })
        .collect();
    Ok(Prepared { blocks, record })
}

/// The kept blocks (each with whether it was shortened), then how many
/// blocks and bytes the budget cut.
type Cut = (Vec<(ContextBlock, bool)>, usize, usize);

/// The controller's cut of one answer to `budget` bytes of text: blocks in
/// order, the one that crosses the budget shortened on a character
/// boundary, and so on with what is left (a block that gets nothing is
/// dropped). Returns the kept blocks (each with whether it was shortened)
/// and how many blocks and bytes were cut. Refuses an answer with too many
/// blocks, or an invalid or repeated id.
pub(crate) fn cut_to_budget(
    port: &str,
    answer: ContextPrepared,
    budget: usize,
) -> Result<Cut, PortRefusal> {
    if answer.blocks.len() > MAX_CONTEXT_BLOCKS {
        return Err(unavailable(port, "its answer has more than 32 blocks"));
    }
    let mut seen = BTreeSet::new();
    if !answer
        .blocks
        .iter()
        .all(|b| valid_tool_name(&b.id) && seen.insert(b.id.as_str()))
    {
        return Err(unavailable(port, "a block id is invalid or used twice"));
    }
    let (mut left, mut cut_blocks, mut cut_bytes) = (budget, 0, 0);
    let mut kept = Vec::new();
    for mut b in answer.blocks {
        if b.text.len() <= left {
            left -= b.text.len();
            kept.push((b, false));
            continue;
        }
        cut_blocks += 1;
        let mut end = left;
        while !b.text.is_char_boundary(end) {
            end -= 1;
        }
        cut_bytes += b.text.len() - end;
        left -= end;
        if end > 0 {
            b.text.truncate(end);
            kept.push((b, true));
        }
    }
    Ok((kept, cut_blocks, cut_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(id: &str, text: &str) -> ContextBlock {
        ContextBlock {
            id: id.into(),
            text: text.into(),
        }
    }

    #[test]
    fn the_budget_cuts_in_order_on_character_boundaries() {
        let answer = ContextPrepared {
            blocks: vec![block("a", "12345"), block("b", "é€xyz"), block("c", "zz")],
        };
        // `a` fits (5 of 8); of `b` only `é` (2 of the 3 left: `€` is 3
        // bytes); the 1 byte left takes one `z` of `c`.
        let (kept, n, bytes) = cut_to_budget("p", answer.clone(), 8).unwrap();
        let want = vec![
            (block("a", "12345"), false),
            (block("b", "é"), true),
            (block("c", "z"), true),
        ];
        assert_eq!(kept, want);
        assert_eq!((n, bytes), (2, 6 + 1));
        // Nothing left after `a`: `b` and `c` are dropped whole.
        let (kept, n, bytes) = cut_to_budget("p", answer.clone(), 5).unwrap();
        assert_eq!((kept.len(), n, bytes), (1, 2, 8 + 2));
        let (all, n, _) = cut_to_budget("p", answer, 1 << 20).unwrap();
        assert_eq!((all.len(), n), (3, 0));
        assert!(all.iter().all(|(_, cut)| !cut));
    }

    #[test]
    fn malformed_answers_are_refused() {
        let twice = ContextPrepared {
            blocks: vec![block("a", ""), block("a", "")],
        };
        let e = cut_to_budget("p", twice, 10).unwrap_err();
        assert_eq!(e.code().as_str(), "context_unavailable");
        let many = ContextPrepared {
            blocks: (0..33).map(|i| block(&format!("b{i}"), "")).collect(),
        };
        assert!(cut_to_budget("p", many, 10).is_err());
        let bad_id = ContextPrepared {
            blocks: vec![block("a.b", "x")],
        };
        assert!(cut_to_budget("p", bad_id, 10).is_err());
    }
}
