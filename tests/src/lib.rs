//! Shared pieces of the end-to-end suite: the test context that owns a temp
//! HOME and runs the built CLI inside it.

pub mod archives;
mod context;
pub mod http;
pub mod ts_agent;

pub use context::{Output, TestContext};
