//! `lapis-service`: the controller as a library.
//!
//! The controller's one promise is that accepted work is never lost and never
//! run twice. Everything here is built around that: a single-writer durable
//! store, a turn state machine with a persisted dispatch boundary, and fences
//! on workspaces whose last turn's outcome is unknown.
//!
//! What clients see (wire messages, records, config schema, the home rule,
//! the SDK) is defined once in `lapis-protocol`; this crate re-uses those
//! types and adds what only the controller needs: SQLite, tokio, the server.

// Visibility is a design statement: an item another crate does not use is
// `pub(crate)`, so the compiler reports what nothing uses.
#![warn(unreachable_pub)]

pub mod acp;
pub(crate) mod domain;
pub mod engine;
pub(crate) mod redact;
pub mod store;
pub(crate) mod tools;

pub mod auth;
pub mod server;

pub use domain::{
    Actor, ApprovalPolicy, EventKind, JournalEvent, NewAuthSession, NewThread, ReplayScope,
    ResolveAs, Retention, StoreError, SubmitTurn, ThreadPatch, Turn, TurnEnd, TurnState,
};

pub use store::{Store, StoreOptions, TurnFilter};

/// Entry points only tests and benches use (the fake-credential corpus),
/// compiled only with the `test-support` feature: a release build has
/// none of it.
#[cfg(feature = "test-support")]
pub mod test_support {
    pub use crate::redact::{Sample, sample_credentials};
}
