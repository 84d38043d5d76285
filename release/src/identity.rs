//! Build identity: who built this binary, from what, for which target.
//!
//! The identity is fixed at compile time by the binary crate (environment set
//! by the build) and handed to the libraries as a value; nothing here reads the
//! live checkout or the clock.

use serde::{Deserialize, Serialize};

/// The four facts that identify a build. A plain `cargo build` reports `dev`
/// for the commit and date.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildIdentity {
    /// Semantic version of the workspace (`CARGO_PKG_VERSION` unless overridden).
    pub version: String,
    /// Source commit the build was made from, or `dev`.
    pub commit: String,
    /// Build date (UTC, `YYYY-MM-DD`, from `SOURCE_DATE_EPOCH`), or `dev`.
    pub date: String,
    /// Rust target triple the binary was compiled for.
    pub target: String,
}
