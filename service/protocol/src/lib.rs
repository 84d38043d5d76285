//! `lapis-protocol`: the vocabulary the controller and its clients share.
//!
//! One definition per concept that crosses a process boundary: frames and
//! JSON-RPC envelopes, the stable error codes, the scopes table, the fixed
//! `hello` shape, every method's params and results, the public records
//! (workspace, thread, turn, turn state and its transition table, journal
//! events and their typed payloads), the configuration schema with its one
//! validator, the controller home rule, and the blocking client SDK built
//! on these types.
//!
//! What must stay true: this crate depends on serde, serde_json,
//! thiserror, rustix (the managed controller's process handling) and sha2
//! (the canonical transcript hash) only
//! (no SQLite, no async runtime, no server), so an application that embeds
//! the SDK compiles nothing else. CI checks it.

// Visibility is a design statement: an item another crate does not use is
// `pub(crate)`, so the compiler reports what nothing uses.
#![warn(unreachable_pub)]
// Every public item is documented: this crate is the SDK applications read.
#![warn(missing_docs)]

mod attention;
mod binding;
pub mod call;
pub mod callback;
pub mod client;
pub mod config;
mod deletion;
mod error;
mod events;
mod frame;
mod hello;
mod history;
pub mod home;
mod import;
mod invocation;
mod kinds;
pub mod mcp;
mod message;
mod names;
pub mod notifications;
mod outcome;
pub mod params;
mod payload;
mod permissions;
mod policy;
mod ports;
mod prepared;
pub mod probe;
mod records;
mod scopes;
pub mod snapshot;
mod state;
mod strict;
pub mod terminal;
pub mod time;
pub mod tools;
pub mod usage;

pub use attention::AttentionKind;
pub use binding::ThreadExpect;
pub use deletion::{DeletedBy, ThreadDeletion};
pub use error::{ErrorCode, RpcError, rpc};
pub use events::{EventKind, JournalEvent, ReplayPage, ReplayScope, ThreadSnapshot};
pub use frame::{
    DEFAULT_MAX_FRAME_BYTES, FrameError, continue_frame_blocking, encode, read_frame_blocking,
    take_line,
};
pub use hello::{
    BuildInfo, HelloParams, HelloResult, PROTOCOL, READY, Ready, STARTUP_FAILED, ServerView,
    SessionView, StartupLine,
};
pub use history::{HistoryPass, HistoryPruned, HistoryStatus};
pub use import::{MAX_IMPORT_BUNDLE_BYTES, ThreadImported};
// Each named port kind's vocabulary (`context`, `memory`, `transcript`):
// declared next to its `port_kinds!` row.
pub use invocation::{Invocation, Location, ToolKind};
pub use kinds::*;
pub use mcp::McpEndpoint;
pub use message::{BadRequest, Id, Incoming, Notification, NotificationOf, Request, Response};
pub use outcome::OutcomeCode;
pub use payload::{
    AgentNotification, AgentStderr, AskMode, CancelRequest, Chunk, ContextReset, Ignored,
    LateAppend, McpRefused, ModeResult, Note, Observation, Payload, PermissionDecided,
    PermissionRequested, Prompt, ReplaceReason, ResetReason, Resolution, ResolvedVia,
    RestrictedMode, SessionLoaded, SessionReplaced, SessionResumed, StateChange, ThreadConfigured,
    ThreadCreated, ToolCallFinished, ToolCallOutcome, ToolCallRequested, TurnSubmitted,
    UnknownToolEffect, UnsupportedRequest, unknown_effects,
};
pub use permissions::{
    Answerer, DecidedBy, PendingRequest, PermissionAnswer, PermissionOption, Settlement,
};
pub use policy::{ApprovalPolicy, Retention};
pub use ports::{PortIdentities, PortKind, PortsExpect, PortsPatch, ThreadPorts};
pub use prepared::{ApprovalSuppression, PreparedApproval, PreparedConfig};
pub use records::{ResolveAs, SessionBinding, Thread, Turn, UserMessage, Workspace};
pub use scopes::{METHODS, Method, Requirement, Scope};
pub use state::{TRANSITIONS, TurnEvent, TurnState, next_state};
pub use strict::{DUPLICATE_KEY, StrictValue, is_duplicate_key};
