//! A thread's policies: how it answers permission requests and what its
//! journal keeps. Chosen at `threads.create`, changed by
//! `threads.configure`, recorded on the thread and in the config each turn
//! was prepared with.
//!
//! What must stay true: the wire and stored spellings (`as_str`) never
//! change; this file imports nothing of the crate, so the records and the
//! prepared config both use it without needing each other.

use serde::{Deserialize, Serialize};

/// How a thread answers agent permission requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalPolicy {
    /// Every request waits for an authorized client's answer (the default).
    Ask,
    /// Offered allow options are chosen automatically (never on restricted threads).
    AllowAll,
}

impl ApprovalPolicy {
    /// Stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Ask => "ask",
            ApprovalPolicy::AllowAll => "allow-all",
        }
    }

    /// Parse a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ask" => Some(ApprovalPolicy::Ask),
            "allow-all" => Some(ApprovalPolicy::AllowAll),
            _ => None,
        }
    }
}

/// What the journal keeps of a thread's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Retention {
    /// Payloads are stored durably.
    Full,
    /// Only sequence and metadata are stored; payloads live in memory until restart.
    MetadataOnly,
}

impl Retention {
    /// Stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Retention::Full => "full",
            Retention::MetadataOnly => "metadata-only",
        }
    }

    /// Parse a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "full" => Some(Retention::Full),
            "metadata-only" => Some(Retention::MetadataOnly),
            _ => None,
        }
    }
}
