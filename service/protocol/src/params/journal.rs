//! The journal: `journal.replay`, `journal.subscribe`,
//! `journal.unsubscribe`, params and results (see the module docs of
//! `params`).

use serde::{Deserialize, Serialize};

/// `journal.replay`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JournalReplay {
    /// One thread (cursor: `threadSeq`); absent = every thread of the
    /// session's principal and application (cursor: `seq`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// Return events after this cursor (0 = from the start).
    #[serde(default)]
    pub after: u64,
    /// Page size (the server bounds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `journal.subscribe`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JournalSubscribe {
    /// As for replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// Replay events after this cursor before going live; absent = live only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// Only attention events ([`crate::AttentionKind::of`]), each naming its
    /// kinds; with `permissions:respond-any` over every application of the
    /// session's principal. The cursor stays the journal's `seq`, so it
    /// resumes gap-free like any subscription.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attention: bool,
    /// A person is watching this subscription's events as they arrive
    /// (the CLI's `--follow`, a `watch` view): while it lives, a
    /// presence-aware notifier (`notify.presence`) sends nothing about the
    /// threads it covers. Ends with the subscription (unsubscribe, lag,
    /// disconnect).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub present: bool,
}

/// `journal.unsubscribe`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JournalUnsubscribe {
    /// The id `journal.subscribe` returned.
    pub subscription: String,
}

/// `journal.subscribe` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeResult {
    /// Subscription id, named in every `journal.event` notification.
    pub subscription: String,
}

/// `journal.unsubscribe` result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnsubscribeResult {
    /// Whether the subscription was live.
    pub stopped: bool,
}
