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

//!
//! # Public surface
//!
//! What the `lapis-ai-controller` binary uses is re-exported here, at the
//! root, and is all a build without features sees:
//!
//! - running the controller: [`serve`] with [`ServeOptions`] and
//!   [`ServerIdentity`]; [`report_startup_failure`] for a failure before
//!   the server could start;
//! - the journal on disk: [`DB_FILE`], [`verify_journal`] (`journal
//!   verify`), [`reanchor_journal`] (`journal reanchor`), their
//!   [`ChainReport`] and [`StoreError`];
//! - providers: [`probe`] (`providers check`, `doctor`) with its
//!   request, report and errors; [`echo_smoke_turn`], the installer's smoke
//!   turn; [`serve_echo_agent`], the built-in `echo` agent; [`mcp_endpoint`],
//!   what persists of an MCP server description;
//! - [`random_hex`], the controller's random ids (command ids).
//!
//! What must stay true: the modules are `pub(crate)` in that build. With
//! the `test-support` feature (the end-to-end suite, this crate's
//! integration tests and benches, the fuzz crate; never the binary, whose
//! dependency does not enable it) they are `pub` so tests can drive the
//! store, engine, runner, auth and server directly, and entry points only
//! tests use are compiled only there.

// Visibility is a design statement: an item another crate does not use is
// `pub(crate)`, so the compiler reports what nothing uses. Checked with
// `test-support` (CI's workspace build), where the internal modules are
// public: without it their test entry points are unreachable by design.
#![warn(unreachable_pub)]
#![cfg_attr(not(feature = "test-support"), allow(unreachable_pub))]

pub(crate) mod children;
pub(crate) mod domain;
pub(crate) mod notifier;
pub(crate) mod presence;
pub(crate) mod redact;
pub(crate) mod telemetry;
pub(crate) mod tools;

// Public only to tests (see the module docs).
#[cfg(feature = "test-support")]
pub mod acp;
#[cfg(not(feature = "test-support"))]
pub(crate) mod acp;
#[cfg(feature = "test-support")]
pub mod auth;
#[cfg(not(feature = "test-support"))]
pub(crate) mod auth;
#[cfg(feature = "test-support")]
pub mod engine;
#[cfg(not(feature = "test-support"))]
pub(crate) mod engine;
#[cfg(feature = "test-support")]
pub mod git;
#[cfg(not(feature = "test-support"))]
pub(crate) mod git;
#[cfg(feature = "test-support")]
pub mod retention;
#[cfg(not(feature = "test-support"))]
pub(crate) mod retention;
#[cfg(feature = "test-support")]
pub mod server;
#[cfg(not(feature = "test-support"))]
pub(crate) mod server;
#[cfg(feature = "test-support")]
pub mod store;
#[cfg(not(feature = "test-support"))]
pub(crate) mod store;

// What the binary uses.
pub use acp::echo::serve as serve_echo_agent;
pub use acp::mcp::endpoint as mcp_endpoint;
pub use acp::{
    LaunchError, ProbeError, ProbeFailure, ProbeReport, ProbeRequest, RunnerLimits, SessionProbe,
    SmokeTurnError, echo_smoke_turn, probe, start_time,
};
pub use auth::random_hex;
pub use domain::StoreError;
pub use server::{ServeOptions, ServerIdentity, report_startup_failure, serve};
pub use store::{
    BACKUPS_DIR, BackupInfo, BackupKind, ChainReport, DB_FILE, Restored, create_backup,
    list_backups, reanchor_journal, restore_backup, verify_journal,
};

// What tests use at the root.
#[cfg(feature = "test-support")]
pub use domain::{
    Actor, ApprovalPolicy, EventKind, IssuedSession, JournalEvent, NewAuthSession, NewThread,
    ReplayScope, ResolveAs, Retention, SubmitTurn, ThreadPatch, Turn, TurnEnd, TurnState,
};
#[cfg(feature = "test-support")]
pub use store::{HistoryCheck, Store, StoreOptions, TurnFilter};

/// Entry points only tests and benches use (the fake-credential corpus),
/// compiled only with the `test-support` feature: a release build has
/// none of it.
#[cfg(feature = "test-support")]
pub mod test_support {
    pub use crate::redact::{Sample, sample_credentials};
}
