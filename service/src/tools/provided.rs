//! The controller's own tools on the MCP bridge, beside the application's:
//! the one seam through which the bridge lists and calls them. Today: the
//! memory read tools (`memory_search`, `memory_read`) of a thread that
//! binds a memory port.
//!
//! What must stay true: a provided tool's name has no `__`, so it never
//! collides with an application tool (`<endpoint>__<tool>`); each is a read
//! tool (nothing to capture, nothing to make at most once); its callbacks
//! carry the envelope the controller makes from the thread
//! ([`super::memory::envelope`]), so nothing in the agent's arguments can
//! widen what it reads; each recall is journaled as metadata
//! (`memory_recalled`) before the agent gets its answer.

use serde::Deserialize;
use serde_json::json;

use lapis_protocol::memory::{MAX_CANDIDATES, MEMORY_READ_TOOL, MEMORY_SEARCH_TOOL, RecallVia};
use lapis_protocol::tools::{BridgeTool, ToolOutput, ToolsCall};
use lapis_protocol::{ErrorCode, Payload, RpcError};

use super::Tools;
use super::memory;
use super::registry::PortOwner;
use crate::domain::Thread;
use crate::store::Store;

/// The provided tools `thread` lists now (its memory port registered).
pub(crate) fn list(tools: &Tools, thread: &Thread) -> Vec<BridgeTool> {
    let Some(port) = &thread.ports.memory else {
        return Vec::new();
    };
    let registered = tools
        .registry
        .owned::<lapis_protocol::memory::MemoryRegister>(PortOwner::thread(thread), port)
        .is_ok();
    if !registered {
        return Vec::new();
    }
    vec![
        BridgeTool {
            name: MEMORY_SEARCH_TOOL.into(),
            description: "Search the application's memory for this thread.".into(),
            input_schema: json!({"type": "object", "required": ["query"], "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_CANDIDATES}}}),
            mutating: false,
        },
        BridgeTool {
            name: MEMORY_READ_TOOL.into(),
            description: "Read one memory item whole, by the id memory_search gave.".into(),
            input_schema: json!({"type": "object", "required": ["id"],
                "properties": {"id": {"type": "string"}}}),
            mutating: false,
        },
    ]
}

/// What the agent may say to `memory_search`; any other member is ignored
/// (it cannot reach the envelope).
#[derive(Deserialize)]
struct SearchArgs {
    /// What to look for.
    query: String,
    /// Most candidates.
    #[serde(default)]
    limit: Option<usize>,
}

/// What the agent may say to `memory_read`.
#[derive(Deserialize)]
struct ReadArgs {
    /// The item.
    id: String,
}

fn failed(message: impl Into<String>) -> RpcError {
    RpcError::new(ErrorCode::ToolCallFailed, message)
}

/// Runs `p` if it names a provided tool of `thread` (`None`: it does not,
/// the application's tools are asked).
pub(crate) async fn call(
    tools: &Tools,
    store: &Store,
    thread: &Thread,
    turn_id: &str,
    p: &ToolsCall,
) -> Option<Result<ToolOutput, RpcError>> {
    let name = p.name.as_str();
    if name != MEMORY_SEARCH_TOOL && name != MEMORY_READ_TOOL {
        return None;
    }
    let Some(port) = &thread.ports.memory else {
        return None;
    };
    let bad = |e: serde_json::Error| failed(format!("{name}: bad arguments: {e}"));
    let answer = if name == MEMORY_SEARCH_TOOL {
        let args: SearchArgs = match serde_json::from_value(p.arguments.clone()) {
            Ok(a) => a,
            Err(e) => return Some(Err(bad(e))),
        };
        let limit = args.limit.unwrap_or(5);
        memory::search(tools, thread, port, &args.query, limit, RecallVia::Search)
            .await
            .map(|(found, rec)| (memory::render(&found), rec))
    } else {
        let args: ReadArgs = match serde_json::from_value(p.arguments.clone()) {
            Ok(a) => a,
            Err(e) => return Some(Err(bad(e))),
        };
        memory::read(tools, thread, port, &args.id)
            .await
            .map(|(item, rec)| {
                let text = match item {
                    Some(c) => memory::render(&[c]),
                    None => "that item cannot be shown (it carries redacted content)".into(),
                };
                (text, rec)
            })
    };
    let (text, record) = match answer {
        Ok(a) => a,
        Err(refusal) => return Some(Err(failed(refusal.to_string()))),
    };
    // Journaled (metadata) before the agent gets it.
    match store
        .append_activity(turn_id, Payload::MemoryRecalled(record))
        .on_turn()
        .await
    {
        Ok(crate::store::Recorded::OnTurn) => {}
        _ => return Some(Err(failed("the recall could not be journaled"))),
    }
    Some(Ok(ToolOutput {
        text,
        ..Default::default()
    }))
}
