//! Shared transcript functions: what consumers that keep a thread's
//! transcript outside the controller need to agree with it about.
//!
//! - [`event_hash`]: the canonical hash of one journal event (its encoding
//!   is pinned in `hash.rs`);
//! - [`handoff`]: the projection a consumer continues a thread from;
//! - [`assert_transcript`]: validates a stored transcript against the
//!   journal's sequence and hashes;
//! - [`store`]: the transcript store port an application serves for its
//!   metadata-only threads (`transcript.register`, `transcript.append`,
//!   `transcript.fetch`).
//!
//! Pure functions over [`JournalEvent`](crate::JournalEvent)s, so the
//! controller and every consumer compute them the same way.

mod handoff;
mod hash;
pub mod store;
mod validate;

pub use handoff::{Handoff, HandoffToolCall, HandoffTurn, handoff};
pub use hash::{EventHash, event_hash};
pub use validate::{TranscriptCheck, TranscriptError, assert_transcript};
