//! The wire protocol: frames, JSON-RPC envelopes, stable error codes, the
//! scopes table and the fixed `hello` shape. Pure data and parsing; no I/O
//! beyond the frame reader, so it can be fuzzed.

mod error;
mod frame;
mod hello;
mod message;
pub mod params;
mod scopes;

pub use error::{ErrorCode, RpcError, rpc};
pub use frame::{
    DEFAULT_MAX_FRAME_BYTES, FrameError, continue_frame_blocking, encode, read_frame,
    read_frame_blocking,
};
pub use hello::{
    HelloParams, HelloResult, PROTOCOL, READY, Ready, STARTUP_FAILED, ServerView, SessionView,
    StartupLine,
};
pub use message::{BadRequest, Id, Incoming, Notification, Request, Response};
pub use scopes::{METHODS, Method, Requirement, Scope};
