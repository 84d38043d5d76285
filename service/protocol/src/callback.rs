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
    ($( $(#[$doc:meta])* $name:ident = $method:expr => $params:ty => $result:ty, $refused:ident; )*) => {
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
    };
}
/// A kind's own module binds its callbacks with this macro (the named
/// kinds' callback names are also in their `crate::port_kinds!` row).
#[allow(unused_imports)] // for the next kind's module; today's kinds are bound above
pub(crate) use callbacks;

/// The wire name of every callback: the tool endpoints', then each named
/// port kind's (`crate::port_kinds!`), so a kind that binds its
/// callbacks in its own module is still checked below.
macro_rules! callback_names {
    ($(
        $(#[$doc:meta])*
        $Kind:ident {
            member: $member:ident = $wire:literal,
            label: $label:literal,
            binding: { $(#[$bdoc:meta])* },
            params: $params:ty,
            register: $Reg:ident = $reg:literal, $reg_fn:ident,
            unregister: $Unreg:ident = $unreg:literal, $unreg_fn:ident,
            handler: $Handler:path, $setter:ident, $serve:ident, $answer:path, [$($cb:path),+ $(,)?],
        }
    )*) => {

        /// The wire name of every callback, in declaration order.
        pub const CALLBACKS: &[&str] = &[
            crate::tools::callbacks::TOOLS_INVOKE,
            crate::tools::callbacks::CAPTURE_BEGIN,
            crate::tools::callbacks::CAPTURE_FINISH,
            $($($cb),+),*
        ];
    };
}

crate::port_kinds!(callback_names);

callbacks! {
    /// `tools.invoke`: run one tool of an endpoint once.
    ToolsInvoke = crate::tools::callbacks::TOOLS_INVOKE => crate::tools::ToolInvoke => crate::tools::ToolOutput, ToolCallFailed;
    /// `capture.begin`: a mutating call is about to run.
    CaptureBegin = crate::tools::callbacks::CAPTURE_BEGIN => crate::tools::CaptureNotice => crate::tools::CaptureAck, ToolCallFailed;
    /// `capture.finish`: a mutating call has its result.
    CaptureFinish = crate::tools::callbacks::CAPTURE_FINISH => crate::tools::CaptureNotice => crate::tools::CaptureAck, ToolCallFailed;
    /// `context.prepare`: the context blocks of one turn.
    ContextPrepare = crate::context::CONTEXT_PREPARE => crate::context::ContextPrepare => crate::context::ContextPrepared, ContextUnavailable;
    /// `memory.search`: candidates for a query, best first.
    MemorySearch = crate::memory::MEMORY_SEARCH => crate::memory::MemorySearch => crate::memory::MemoryCandidates, ContextUnavailable;
    /// `memory.evidence`: one item, whole.
    MemoryEvidence = crate::memory::MEMORY_EVIDENCE => crate::memory::MemoryEvidence => crate::memory::MemoryCandidate, ContextUnavailable;
    /// `transcript.append`: keep one content event (answered once durable).
    TranscriptAppend = crate::transcript::store::TRANSCRIPT_APPEND => crate::transcript::store::TranscriptAppend => crate::transcript::store::TranscriptAck, TranscriptStoreFailed;
    /// `transcript.fetch`: stored payloads of the events asked for.
    TranscriptFetch = crate::transcript::store::TRANSCRIPT_FETCH => crate::transcript::store::TranscriptFetch => crate::transcript::store::TranscriptPayloads, TranscriptStoreFailed;
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
