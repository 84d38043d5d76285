//! Providers: external coding agents driven over the Agent Client Protocol
//! (ACP v1, JSON-RPC 2.0 over the agent's stdio, one object per line).
//!
//! The runner knows nothing of storage: [`run_turn_on`] runs one prompt on a
//! [`LiveAgent`] (or a new agent, resuming the thread's session) and reports
//! through [`TurnHooks`] — the dispatch boundary, every event in order, and
//! permission requests — then returns a [`TurnOutcome`] and the agent, to
//! keep for the thread's next turn or to tear down. [`run_turn`] is the
//! one-shot form (fresh agent, torn down before it returns).
//!
//! Why no official crate: the schema crate ships protocol v1 and an unstable
//! v2 side by side under fast-moving major versions and pulls `schemars`,
//! `derive_more` and `serde_with`; the SDK crate owns the connection loop,
//! which is exactly where this controller needs control (bounded lines, the
//! dispatch boundary awaited between `session/new` and `session/prompt`,
//! in-order handling so no update is lost behind the prompt's response).
//! The v1 surface used here is small and tolerant: unknown fields are
//! ignored and unknown updates are kept verbatim as observations.

mod agent;
pub mod echo;
mod events;
mod fingerprint;
mod leader;
mod lines;
pub mod mcp;
mod probe;
mod process;
mod prompt;
mod registry;
mod runner;
mod session;
mod setup;
mod smoke;
mod stderr_tail;
mod turn;

pub(crate) use agent::{LiveAgent, Watched};
pub(crate) use events::{late_update, shows_agent_progress};
pub(crate) use fingerprint::{fingerprint, with_app_servers};
pub use lapis_protocol::config::{CommandLookup, ProviderSpec};
pub(crate) use lapis_protocol::config::{ECHO_PROVIDER, ProviderError};
pub use lapis_protocol::probe::{ProbeReport, SessionProbe};
#[cfg(feature = "test-support")]
pub use lapis_protocol::{DecidedBy, Payload};
pub use lapis_protocol::{Invocation, PermissionAnswer, PermissionOption};
pub use probe::{ProbeError, ProbeFailure, ProbeRequest, probe};
pub use process::LaunchError;
#[cfg(feature = "test-support")]
pub use process::Stopped;
pub(crate) use process::TeardownLimits;
pub use prompt::PromptContext;
pub use registry::AgentRegistry;
// Also the binary's: `stop` checks a pid's start time before it signals.
pub use registry::start_time;
pub(crate) use runner::STOP_REASONS;
pub(crate) use runner::{AfterTurn, TurnRun, run_turn_on};
#[cfg(feature = "test-support")]
pub use runner::{run_turn, run_turn_detached};
pub use smoke::{SmokeTurnError, echo_smoke_turn};
#[cfg(feature = "test-support")]
pub use stderr_tail::{StderrTail, TAIL_LINES};
pub(crate) use turn::CancelSignal;
#[cfg(feature = "test-support")]
pub use turn::{CancelHandle, cancel_channel};
pub use turn::{HookError, PermissionRequest, RunnerLimits, TurnHooks, TurnOutcome, TurnRequest};
