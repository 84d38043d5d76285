//! Application tools: endpoints applications register on their connections,
//! the tickets agent sessions' MCP bridges authenticate with, and the
//! at-most-once path of one tool call.
//!
//! What must stay true (each part says its own in detail):
//! - endpoints are volatile capabilities keyed by principal + application;
//!   revoking one (unregister, connection close, takeover) fails its calls
//!   in flight at once ([`registry`]);
//! - a ticket authenticates one agent session's bridge for its thread's
//!   tools only and expires with that session ([`tickets`]);
//! - requests the controller sends to an application end on their answer,
//!   deadline, revocation or the connection's close ([`peer`]).

pub(crate) mod active;
pub(crate) mod call;
pub(crate) mod context;
pub(crate) mod fault;
pub(crate) mod memory;
pub(crate) mod peer;
pub(crate) mod provided;
pub(crate) mod registry;
pub(crate) mod tickets;
pub(crate) mod transcript;

pub(crate) use peer::Peer;
pub(crate) use registry::{PortLease, PortRegistry};
pub(crate) use tickets::{Grant, TicketHold, Tickets};

/// Everything tools share between the server and the engine; cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tools {
    /// Registered endpoints.
    pub(crate) registry: PortRegistry,
    /// Live bridge tickets.
    pub(crate) tickets: Tickets,
    /// The turn each agent session runs now.
    pub(crate) active: active::ActiveTurns,
    /// One append lane per thread with a transcript store.
    pub(crate) transcripts: transcript::Lanes,
}
