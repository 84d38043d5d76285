//! Serving every port kind on one connection. An application that binds
//! several kinds to its threads (tools and a memory port, say) gets all
//! their callbacks on the connection that registered them; a managed
//! controller's application has only the one (its stdin/stdout), so it
//! must. [`PortHandlers`] holds one handler per kind and routes each
//! callback to its kind's handler, once for every way of serving.
//!
//! What must stay true: every callback read is answered exactly once; one
//! of a kind without a handler is refused at once (`invalid_request`, naming
//! the kind) rather than left to the controller's deadline.

use std::time::Duration;

use crate::context::CONTEXT_PREPARE;
use crate::memory::{MEMORY_EVIDENCE, MEMORY_SEARCH};
use crate::tools::callbacks::{CAPTURE_BEGIN, CAPTURE_FINISH, TOOLS_INVOKE};
use crate::transcript::store::{TRANSCRIPT_APPEND, TRANSCRIPT_FETCH};
use crate::{ErrorCode, Request, Response, RpcError};

use super::serve::{
    ContextHandler, MemoryHandler, ToolHandler, TranscriptHandler, answer, answer_context,
    answer_memory, answer_transcript,
};
use super::{Client, ClientError};

/// The handlers one connection serves its ports' callbacks with, one per
/// kind (each optional): built with [`PortHandlers::new`] and the setters,
/// used by [`Client::serve_callback`] and [`Client::serve_until_settled`].
#[derive(Default)]
pub struct PortHandlers<'a> {
    /// `tools.invoke`, `capture.begin`, `capture.finish`.
    tools: Option<&'a mut dyn ToolHandler>,
    /// `context.prepare`.
    context: Option<&'a mut dyn ContextHandler>,
    /// `memory.search`, `memory.evidence`.
    memory: Option<&'a mut dyn MemoryHandler>,
    /// `transcript.append`, `transcript.fetch`.
    transcript: Option<&'a mut dyn TranscriptHandler>,
}

impl std::fmt::Debug for PortHandlers<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortHandlers")
            .field("tools", &self.tools.is_some())
            .field("context", &self.context.is_some())
            .field("memory", &self.memory.is_some())
            .field("transcript", &self.transcript.is_some())
            .finish()
    }
}

impl<'a> PortHandlers<'a> {
    /// No handlers yet: every callback is refused until one is set.
    pub fn new() -> PortHandlers<'a> {
        PortHandlers::default()
    }

    /// Serves tool endpoints (and their capture port) with `handler`.
    pub fn tools(mut self, handler: &'a mut dyn ToolHandler) -> PortHandlers<'a> {
        self.tools = Some(handler);
        self
    }

    /// Serves context ports with `handler`.
    pub fn context(mut self, handler: &'a mut dyn ContextHandler) -> PortHandlers<'a> {
        self.context = Some(handler);
        self
    }

    /// Serves memory ports with `handler`.
    pub fn memory(mut self, handler: &'a mut dyn MemoryHandler) -> PortHandlers<'a> {
        self.memory = Some(handler);
        self
    }

    /// Serves transcript stores with `handler`.
    pub fn transcript(mut self, handler: &'a mut dyn TranscriptHandler) -> PortHandlers<'a> {
        self.transcript = Some(handler);
        self
    }

    /// The answer to one callback, from its kind's handler.
    pub(super) fn answer(&mut self, request: &Request) -> Response {
        let unserved = |kind: &str| {
            Response::err(
                Some(request.id.clone()),
                RpcError::new(
                    ErrorCode::InvalidRequest,
                    format!("this connection serves no {kind} (`{}`)", request.method),
                ),
            )
        };
        match request.method.as_str() {
            TOOLS_INVOKE | CAPTURE_BEGIN | CAPTURE_FINISH => match self.tools.as_deref_mut() {
                Some(h) => answer(request, h),
                None => unserved("tool endpoint"),
            },
            CONTEXT_PREPARE => match self.context.as_deref_mut() {
                Some(h) => answer_context(request, h),
                None => unserved("context port"),
            },
            MEMORY_SEARCH | MEMORY_EVIDENCE => match self.memory.as_deref_mut() {
                Some(h) => answer_memory(request, h),
                None => unserved("memory port"),
            },
            TRANSCRIPT_APPEND | TRANSCRIPT_FETCH => match self.transcript.as_deref_mut() {
                Some(h) => answer_transcript(request, h),
                None => unserved("transcript store"),
            },
            other => Response::err(Some(request.id.clone()), RpcError::method_not_found(other)),
        }
    }
}

impl Client {
    /// Serves one controller callback of any kind with its kind's handler
    /// in `ports`, like [`Client::serve_tools`]: one queued while a request
    /// waited, else one read within `timeout` (`None`: wait indefinitely);
    /// `Ok(false)` when none came in time.
    pub fn serve_callback(
        &mut self,
        ports: &mut PortHandlers<'_>,
        timeout: Option<Duration>,
    ) -> Result<bool, ClientError> {
        let Some(request) = self.next_callback(timeout)? else {
            return Ok(false);
        };
        self.reply(&ports.answer(&request))
    }

    /// Serves one callback: `context.*` with `context`, tool endpoints
    /// with `tools` ([`Client::serve_callback`] with those two handlers).
    pub fn serve_ports(
        &mut self,
        tools: &mut impl ToolHandler,
        context: &mut impl ContextHandler,
        timeout: Option<Duration>,
    ) -> Result<bool, ClientError> {
        let mut ports = PortHandlers::new().tools(tools).context(context);
        self.serve_callback(&mut ports, timeout)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::client::CallbackError;
    use crate::client::serve::tests::req;
    use crate::memory::{MemoryCandidate, MemoryCandidates, MemoryEvidence, MemorySearch};
    use crate::tools::{ToolInvoke, ToolOutput};

    struct Tools;

    impl ToolHandler for Tools {
        fn invoke(&mut self, call: &ToolInvoke) -> Result<ToolOutput, CallbackError> {
            Ok(ToolOutput {
                text: format!("ran {}", call.tool),
                ..Default::default()
            })
        }
    }

    struct Notes;

    impl MemoryHandler for Notes {
        fn search(&mut self, call: &MemorySearch) -> Result<MemoryCandidates, CallbackError> {
            Ok(MemoryCandidates {
                candidates: vec![MemoryCandidate {
                    id: "m1".into(),
                    text: format!("about {}", call.query),
                }],
            })
        }
        fn evidence(&mut self, call: &MemoryEvidence) -> Result<MemoryCandidate, CallbackError> {
            Err(CallbackError(format!("no {}", call.id)))
        }
    }

    #[test]
    fn each_kind_reaches_its_own_handler_and_an_unserved_kind_is_refused_by_name() {
        let (mut tools, mut notes) = (Tools, Notes);
        let mut ports = PortHandlers::new().tools(&mut tools).memory(&mut notes);
        let invoke = json!({"endpoint":"crm","tool":"find","arguments":{},
            "idempotencyKey":"turn_1:call_1","threadId":"thr_1","turnId":"turn_1","callId":"call_1","mutating":false});
        let r = ports.answer(&req(TOOLS_INVOKE, invoke));
        assert_eq!(r.result.unwrap()["text"], "ran find");
        let envelope = json!({"principal":"owner","application":"app","threadId":"thr_1","workspaceId":"proj"});
        let search = json!({"port":"mem","query":"tea","envelope":envelope,"limit":5});
        let r = ports.answer(&req(MEMORY_SEARCH, search));
        assert_eq!(
            r.result.unwrap()["candidates"][0]["text"],
            "about tea",
            "memory goes to the memory handler"
        );
        let evidence = json!({"port":"mem","id":"m9","envelope":envelope});
        let r = ports.answer(&req(MEMORY_EVIDENCE, evidence));
        assert_eq!(
            r.error.unwrap().error_code(),
            Some(ErrorCode::ContextUnavailable)
        );
        let r = ports.answer(&req(CONTEXT_PREPARE, json!({})));
        let err = r.error.unwrap();
        assert_eq!(err.error_code(), Some(ErrorCode::InvalidRequest));
        assert!(err.message.contains("no context port"), "{}", err.message);
        let r = ports.answer(&req("tools.other", json!({})));
        assert!(r.error.unwrap().message.contains("unknown method"));
    }
}
