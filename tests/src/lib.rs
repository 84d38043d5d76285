//! Shared pieces of the end-to-end suite: the test context that owns a temp
//! HOME and runs the built CLI inside it.

// Visibility is a design statement: an item another crate does not use is
// `pub(crate)`, so the compiler reports what nothing uses.
#![warn(unreachable_pub)]

pub mod archives;
mod context;
pub mod http;
pub mod journal;
pub mod prompt;
pub mod skip;
pub mod ts_agent;
pub mod wait;
pub mod webhook;

pub use context::{Output, TestContext};
