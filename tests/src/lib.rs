//! Shared pieces of the end-to-end suite: the test context that owns a temp
//! HOME and runs the built CLI inside it.

mod context;

pub use context::{Output, TestContext};
