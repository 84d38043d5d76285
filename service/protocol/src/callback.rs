//! Every server → client request bound to its params and result, once:
//! the controller's callbacks to the ports an application registered
//! (tool endpoints and their capture port, context ports, memory ports,
//! transcript stores).
//!
//! [`crate::call`] binds the requests a client sends; this module binds
//! the other direction the same way (the ACP SDK's pattern): a
//! [`Callback`] ties a wire name to the type its params decode into, the
//! type its result decodes into, and the error code a handler's refusal is
//! answered with. The controller sends `C::Params` and decodes `C::Result`;
//! the SDK's serve loop decodes `C::Params` and encodes `C::Result`, so the
//! two sides cannot pair a method with different types.
//!
//! What must stay true (tested below): every callback's name is distinct
//! and none is a method of [`crate::METHODS`] (those are answered by the
//! controller, these by the application).

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ErrorCode;

/// One server → client request: its wire name, what it takes and what it
/// returns.
pub trait Callback {
    /// The wire name (`tools.invoke`, `context.prepare`, …).
    const METHOD: &'static str;
    /// The `params` member.
    type Params: Serialize + DeserializeOwned;
    /// The `result` member.
    type Result: Serialize + DeserializeOwned;
    /// The code the SDK answers a handler's refusal with.
    const REFUSED: ErrorCode;
}

macro_rules! callbacks {
    ($( $(#[$doc:meta])* $name:ident = $method:literal: $params:ty => $result:ty, $refused:ident; )*) => {
        $(
            $(#[$doc])*
            #[derive(Clone, Copy, Debug, PartialEq, Eq)]
            pub struct $name;

            impl Callback for $name {
                const METHOD: &'static str = $method;
                type Params = $params;
                type Result = $result;
                const REFUSED: ErrorCode = ErrorCode::$refused;
            }
        )*

        /// The wire name of every callback, in declaration order.
        pub const CALLBACKS: &[&str] = &[$($method),*];
    };
}

callbacks! {
    /// `tools.invoke`: run one tool of an endpoint once.
    ToolsInvoke = "tools.invoke": crate::tools::ToolInvoke => crate::tools::ToolOutput, ToolCallFailed;
    /// `capture.begin`: a mutating call is about to run.
    CaptureBegin = "capture.begin": crate::tools::CaptureNotice => crate::tools::CaptureAck, ToolCallFailed;
    /// `capture.finish`: a mutating call has its result.
    CaptureFinish = "capture.finish": crate::tools::CaptureNotice => crate::tools::CaptureAck, ToolCallFailed;
    /// `context.prepare`: the context blocks of one turn.
    ContextPrepare = "context.prepare": crate::context::ContextPrepare => crate::context::ContextPrepared, ContextUnavailable;
    /// `memory.search`: candidates for a query, best first.
    MemorySearch = "memory.search": crate::memory::MemorySearch => crate::memory::MemoryCandidates, ContextUnavailable;
    /// `memory.evidence`: one item, whole.
    MemoryEvidence = "memory.evidence": crate::memory::MemoryEvidence => crate::memory::MemoryCandidate, ContextUnavailable;
    /// `transcript.append`: keep one content event (answered once durable).
    TranscriptAppend = "transcript.append": crate::transcript::store::TranscriptAppend => crate::transcript::store::TranscriptAck, TranscriptStoreFailed;
    /// `transcript.fetch`: stored payloads of the events asked for.
    TranscriptFetch = "transcript.fetch": crate::transcript::store::TranscriptFetch => crate::transcript::store::TranscriptPayloads, TranscriptStoreFailed;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Callback names are distinct and never a controller method.
    #[test]
    fn callbacks_are_distinct_and_not_methods() {
        for (i, name) in CALLBACKS.iter().enumerate() {
            assert!(!CALLBACKS[..i].contains(name), "{name} twice");
            assert!(
                crate::METHODS.iter().all(|(_, m, _)| m != name),
                "{name} is a controller method"
            );
        }
    }

    /// The names the modules export are the bound ones.
    #[test]
    fn exported_names_are_the_bindings() {
        assert_eq!(crate::tools::callbacks::TOOLS_INVOKE, ToolsInvoke::METHOD);
        assert_eq!(crate::tools::callbacks::CAPTURE_BEGIN, "capture.begin");
        assert_eq!(crate::tools::callbacks::CAPTURE_FINISH, "capture.finish");
        assert_eq!(crate::context::CONTEXT_PREPARE, "context.prepare");
        assert_eq!(crate::memory::MEMORY_SEARCH, "memory.search");
        assert_eq!(crate::memory::MEMORY_EVIDENCE, "memory.evidence");
        assert_eq!(
            crate::transcript::store::TRANSCRIPT_APPEND,
            "transcript.append"
        );
        assert_eq!(
            crate::transcript::store::TRANSCRIPT_FETCH,
            "transcript.fetch"
        );
    }
}
