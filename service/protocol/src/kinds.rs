//! The one declaration of the named port kinds, `port_kinds!` (in a file
//! of its own: it names the SDK's handlers, which the thread records in
//! `ports.rs` must not depend on), and each named kind's vocabulary, one
//! module each below (`lib.rs` re-exports them all, so a new kind's module
//! is declared here, next to its row, and nowhere else).

pub mod context;
pub mod memory;
pub mod transcript;

/// The one declaration of the *named* port kinds (a thread binds one of
/// each by name; tool endpoints, bound as a list with their own result and
/// refusal types, are the one kind spelled out where it differs): each
/// kind's [`crate::PortKind`] variant, its [`crate::ThreadPorts`] member, its
/// registration params, its `register`/`unregister` methods (wire name,
/// [`crate::call`] binding, SDK method), its SDK handler trait with the
/// function that answers its callbacks and the [`crate::client::Client`]
/// method that serves them, its callback names and what a refusal calls
/// it. The docs before a kind are its SDK `register` method's.
///
/// `port_kinds!(then)` expands to `then! { <the rows> }`: the method table
/// ([`crate::METHODS`]), the calls, the SDK's methods, kept registrations
/// and [`crate::client::PortHandlers`], and the controller's dispatch and
/// stored registrations each expand the rows instead of naming a kind, so
/// a new named kind is a row here (with its members in `ports.rs` and
/// its own modules), not a line in each of those files.
///
/// What must stay true: the wire names are the ones the methods had
/// before (`scopes/tests.rs` and the SDK's tests pin them); rows keep the
/// order of [`crate::PortKind::ALL`].
#[macro_export]
#[doc(hidden)]
macro_rules! port_kinds {
    ($then:ident) => {
        $then! {
            /// `context.register`: serves this context port to this application's
            /// threads for as long as this connection stays open. Threads bind it
            /// by name in `threads.create` (`context`); the controller then asks
            /// it, on this connection, for each turn's context (`context.prepare`)
            /// before the turn reaches its agent: answer with
            /// [`Client::serve_context`]. [`Client::reconnect`] registers it again.
            Context {
                member: context = "context",
                label: "context port",
                binding: {
                    /// The name of a context port this application registered
                    /// (`context.register`): every turn's claim asks it for context blocks
                    /// (`context.prepare`) before the dispatch boundary. A turn whose port
                    /// is gone, late or refusing fails `context_unavailable` before its
                    /// agent sees the prompt.
                },
                params: $crate::context::ContextRegister,
                register: ContextRegister = "context.register", context_register,
                unregister: ContextUnregister = "context.unregister", context_unregister,
                handler: $crate::client::ContextHandler, context, serve_context,
                    $crate::client::serve::answer_context, [$crate::context::CONTEXT_PREPARE],
            }
            /// `memory.register`: serves this memory port to this application's
            /// threads while this connection stays open; threads bind it by name
            /// (`threads.create` `memory`). Answer its callbacks with
            /// [`Client::serve_memory`]. [`Client::reconnect`] registers it again.
            Memory {
                member: memory = "memory",
                label: "memory port",
                binding: {
                    /// The name of a memory port this application registered
                    /// (`memory.register`): every turn's preparation recalls from it (a
                    /// labelled block before the prompt), and the agent gets the read tools
                    /// `memory_search` and `memory_read` on the controller's MCP bridge. A
                    /// turn whose port is gone or late fails `context_unavailable` before
                    /// dispatch. Refused on restricted threads (`tools_restricted`).
                },
                params: $crate::memory::MemoryRegister,
                register: MemoryRegister = "memory.register", memory_register,
                unregister: MemoryUnregister = "memory.unregister", memory_unregister,
                handler: $crate::client::MemoryHandler, memory, serve_memory,
                    $crate::client::serve::answer_memory,
                    [$crate::memory::MEMORY_SEARCH, $crate::memory::MEMORY_EVIDENCE],
            }
            /// `transcript.register`: serves this transcript store to this
            /// application's `metadata-only` threads while this connection stays
            /// open; threads bind it by name (`threads.create` `transcriptStore`).
            /// Answer its callbacks with [`Client::serve_transcript`] on this
            /// connection, and replay the threads it keeps from *another* one (a
            /// replay that needs the store waits for its answers).
            /// [`Client::reconnect`] registers it again.
            Transcript {
                member: transcript_store = "transcriptStore",
                label: "transcript store",
                binding: {
                    /// The name of a transcript store this application registered
                    /// (`transcript.register`), on a `metadata-only` thread only (on a
                    /// `full` one it is `invalid_request`): each turn's prompt is appended
                    /// to it before the dispatch boundary (a failed or late append fails
                    /// the turn `transcript_store_failed` before its agent sees the
                    /// prompt), the agent's output as it is journaled, and a replay after
                    /// a restart fetches content back from it, checked against the
                    /// recorded hashes. Not registered now: `transcript_store_failed`.
                },
                params: $crate::transcript::store::TranscriptRegister,
                register: TranscriptRegister = "transcript.register", transcript_register,
                unregister: TranscriptUnregister = "transcript.unregister", transcript_unregister,
                handler: $crate::client::TranscriptHandler, transcript, serve_transcript,
                    $crate::client::serve::answer_transcript,
                    [$crate::transcript::store::TRANSCRIPT_APPEND, $crate::transcript::store::TRANSCRIPT_FETCH],
            }
        }
    };
}
