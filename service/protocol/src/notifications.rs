//! Server-to-client notifications of journal subscriptions, typed on both
//! sides: the server builds them from these structs and the SDK's
//! [`crate::client::JournalFollower`] reads them back.
//!
//! What must stay true: a subscription never drops an event silently. A
//! subscriber that falls behind gets one `journal.lagged` (then the
//! subscription ends) and one that ends for another reason gets
//! `journal.ended`; both carry the cursor to replay after, so a follower
//! resubscribes gap-free.

use serde::{Deserialize, Serialize};

use crate::{AttentionKind, JournalEvent, Notification, RpcError};

/// Notification carrying one journal event.
pub const JOURNAL_EVENT: &str = "journal.event";
/// Notification telling a subscriber it fell behind and must replay.
pub const JOURNAL_LAGGED: &str = "journal.lagged";
/// Notification telling a subscriber its subscription ended for another
/// reason (catch-up replay failed, or the store closed).
pub const JOURNAL_ENDED: &str = "journal.ended";

/// `journal.event` params. Generic so the server can send a borrowed event
/// (`JournalEventParams<&JournalEvent>`) without cloning it per subscriber.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JournalEventParams<E = JournalEvent> {
    /// The subscription id.
    pub subscription: String,
    /// The event.
    pub event: E,
    /// On an attention subscription, what the event is about
    /// ([`AttentionKind::of`]; omitted on plain subscriptions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attention: Vec<AttentionKind>,
}

/// `journal.lagged` params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JournalLaggedParams {
    /// The subscription id (now ended).
    pub subscription: String,
    /// Replay after this cursor (`threadSeq` for a thread, else `seq`).
    pub resume_after: u64,
    /// How many events the server's buffer dropped for this subscriber.
    pub missed: u64,
}

/// `journal.ended` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JournalEndedParams {
    /// The subscription id.
    pub subscription: String,
    /// Replay after this cursor, when the server knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_after: Option<u64>,
    /// Why the catch-up replay failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}

/// A journal notification as a client receives it.
#[derive(Clone, Debug, PartialEq)]
pub enum JournalNotice {
    /// `journal.event`.
    Event(JournalEventParams),
    /// `journal.lagged`.
    Lagged(JournalLaggedParams),
    /// `journal.ended`.
    Ended(JournalEndedParams),
}

impl JournalNotice {
    /// The typed notice, `None` for other notifications or malformed params.
    pub fn parse(n: &Notification) -> Option<JournalNotice> {
        let params = n.params.clone();
        match n.method.as_str() {
            JOURNAL_EVENT => serde_json::from_value(params)
                .ok()
                .map(JournalNotice::Event),
            JOURNAL_LAGGED => serde_json::from_value(params)
                .ok()
                .map(JournalNotice::Lagged),
            JOURNAL_ENDED => serde_json::from_value(params)
                .ok()
                .map(JournalNotice::Ended),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn notices_round_trip_through_the_wire_shape() {
        let lagged = Notification::new(
            JOURNAL_LAGGED,
            json!({"subscription": "sub_1", "resumeAfter": 7, "missed": 3}),
        );
        assert_eq!(
            JournalNotice::parse(&lagged),
            Some(JournalNotice::Lagged(JournalLaggedParams {
                subscription: "sub_1".into(),
                resume_after: 7,
                missed: 3,
            }))
        );
        let ended = Notification::new(JOURNAL_ENDED, json!({"subscription": "sub_2"}));
        let Some(JournalNotice::Ended(e)) = JournalNotice::parse(&ended) else {
            panic!("ended");
        };
        assert_eq!((e.resume_after, e.error), (None, None));
        let other = Notification::new("ready", json!({}));
        assert_eq!(JournalNotice::parse(&other), None);
    }
}
