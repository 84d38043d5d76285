//! The engine connects the scheduler to the runner: it claims runnable turns
//! from the [`Store`](crate::store::Store), runs each through
//! [`run_turn`](crate::acp::run_turn) with hooks on the store, and records
//! the outcome.
//!
//! What must stay true: the dispatch boundary is durable (the store's
//! `mark_dispatched` returned `Ok`) before `session/prompt` is written; every
//! event is journaled in order (streamed output group-committed); a turn is
//! never re-dispatched — an unknown outcome is recorded as such and fences
//! its workspace; permission answers reach only the request they name, with
//! an offered option id.

mod broker;
mod budgets;
mod claim;
mod evidence;
mod evidence_cost;
mod hooks;
mod mcp;
mod outcome;
mod pool;
mod worker;

pub(crate) use broker::PendingPermission;
use broker::Taken;
pub(crate) use mcp::{McpLease, McpRegistry};
pub use worker::{Engine, EngineConfig, EngineError, EngineHandle};

#[cfg(test)]
mod tests;
