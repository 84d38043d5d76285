//! Which shell completion candidates an argument takes, as data: the clap
//! types here name a [`Candidates`] kind, and the code that computes them
//! (`commands/candidates.rs`: it asks the running service and reads the
//! instance's configuration and releases) is handed in once, by the
//! completion entry point, through [`provide`]. Parsing so never reaches
//! into execution: nothing in `args/` imports `commands/`.
//!
//! What must stay true: `commands::completions::complete_env` provides the
//! source before clap's completion engine asks; without one an argument
//! offers nothing, as it does when the service is unreachable.

use std::sync::OnceLock;

use clap_complete::engine::{CompletionCandidate, ValueCandidates};

/// A kind of candidates an argument offers at TAB time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Candidates {
    /// Thread ids.
    ThreadIds,
    /// Turn ids.
    TurnIds,
    /// Registered workspace ids.
    WorkspaceIds,
    /// Configured provider names and `echo`.
    ProviderNames,
    /// Configured provider names only.
    ConfiguredProviderNames,
    /// The catalogue's entries.
    CatalogueNames,
    /// Every name `providers check` takes.
    CheckableProviderNames,
    /// Turns with a pending permission request.
    TurnsAsking,
    /// Pending request ids of the turn typed before.
    PendingRequestIds,
    /// Option ids of the request typed before.
    RequestOptionIds,
    /// Installed snapshot digests.
    SnapshotDigests,
}

/// Computes the candidates of a kind (set once per completion process).
static SOURCE: OnceLock<fn(Candidates) -> Vec<CompletionCandidate>> = OnceLock::new();

/// Hands in what computes each kind's candidates; a second call is ignored.
pub(crate) fn provide(source: fn(Candidates) -> Vec<CompletionCandidate>) {
    let _ = SOURCE.set(source);
}

impl ValueCandidates for Candidates {
    fn candidates(&self) -> Vec<CompletionCandidate> {
        SOURCE.get().map(|source| source(*self)).unwrap_or_default()
    }
}
