//! Permission requests: the options an agent offers, the answer it gets,
//! who gave it, and the pending requests clients see (`permissions.list`).
//!
//! A request is pending exactly while the engine waits for an answer to it:
//! it disappears when answered, when its deadline passes (the engine then
//! picks a reject option or cancels) or when its turn ends. Every journaled
//! request is also a row of the controller's durable inbox, settled with
//! its decision ([`Settlement`]), so what happened to it stays answerable
//! after its turn and across restarts.
//!
//! What must stay true: one option type ([`PermissionOption`]) serves the
//! agent's request, the journal and `permissions.list`; its serialized form
//! is ACP's and the journal's (`optionId`), and `permissions.list` keeps its
//! own wire name `id` through [`listed`]. `options[].id` are the only values
//! `permissions.respond` accepts.

use serde::{Deserialize, Serialize};

use crate::invocation::Invocation;

/// One option an agent offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    /// The option id to answer with (`optionId` in ACP and the journal,
    /// `id` in `permissions.list`).
    #[serde(rename = "optionId")]
    pub id: String,
    /// Label shown to the user.
    pub name: String,
    /// `allow_once`, `allow_always`, `reject_once`, `reject_always` (or what
    /// the agent sent).
    pub kind: String,
}

impl PermissionOption {
    /// An allow option (`allow_once` / `allow_always`).
    pub fn is_allow(&self) -> bool {
        self.kind.starts_with("allow")
    }

    /// A reject option (`reject_once` / `reject_always`).
    pub fn is_reject(&self) -> bool {
        self.kind.starts_with("reject")
    }
}

/// The answer to a permission request, as sent to the agent (ACP's
/// `outcome` object) and journaled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "outcome",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum PermissionAnswer {
    /// One of the offered option ids.
    Selected {
        /// Must be one of the offered ids.
        option_id: String,
    },
    /// No option chosen; the agent must not proceed.
    Cancelled,
}

impl PermissionAnswer {
    /// The chosen option id, or `cancelled`.
    pub fn label(&self) -> &str {
        match self {
            PermissionAnswer::Selected { option_id } => option_id,
            PermissionAnswer::Cancelled => "cancelled",
        }
    }
}

/// Who produced a permission answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    /// An authorized client answered.
    User,
    /// `allow-all` approved automatically.
    Automatic,
    /// The deadline passed.
    Expired,
    /// The turn was cancelled while the request was pending.
    Cancel,
    /// The turn ended (or failed) while the request was pending.
    TurnEnded,
}

impl DecidedBy {
    /// The wire name (`user`, `automatic`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            DecidedBy::User => "user",
            DecidedBy::Automatic => "automatic",
            DecidedBy::Expired => "expired",
            DecidedBy::Cancel => "cancel",
            DecidedBy::TurnEnded => "turn_ended",
        }
    }

    /// How a person reads who decided, after the answer: `(answered by
    /// a user)`, `(its deadline passed)`, … One phrase for every view.
    pub fn describe(by: Option<DecidedBy>) -> &'static str {
        match by {
            Some(DecidedBy::User) => "answered by a user",
            Some(DecidedBy::Automatic) => "approved automatically: allow-all",
            Some(DecidedBy::Expired) => "its deadline passed",
            Some(DecidedBy::Cancel) => "the turn was cancelled",
            Some(DecidedBy::TurnEnded) => "the turn ended",
            None => "decided late",
        }
    }
}

/// How a journaled permission request was settled: the durable inbox's
/// record of its end (`permissions.list` shows only unsettled ones; an
/// answer to a settled one is `conflict` naming this).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Settlement {
    /// An authorized application answered (the inbox names which).
    Answered,
    /// `allow-all` approved it at once.
    Automatic,
    /// Nobody answered before its expiry; answered by policy (a reject
    /// option if offered, else cancelled).
    Expired,
    /// Its turn was cancelled while it waited.
    Cancelled,
    /// Its turn ended while it waited.
    TurnEnded,
    /// Its turn did not survive (a restart, a lost outcome): settled with
    /// the turn's fate, never answered.
    Abandoned,
}

impl Settlement {
    /// Every settlement.
    pub const ALL: [Settlement; 6] = [
        Settlement::Answered,
        Settlement::Automatic,
        Settlement::Expired,
        Settlement::Cancelled,
        Settlement::TurnEnded,
        Settlement::Abandoned,
    ];

    /// Stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Settlement::Answered => "answered",
            Settlement::Automatic => "automatic",
            Settlement::Expired => "expired",
            Settlement::Cancelled => "cancelled",
            Settlement::TurnEnded => "turn_ended",
            Settlement::Abandoned => "abandoned",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Settlement> {
        Settlement::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl From<DecidedBy> for Settlement {
    fn from(by: DecidedBy) -> Settlement {
        match by {
            DecidedBy::User => Settlement::Answered,
            DecidedBy::Automatic => Settlement::Automatic,
            DecidedBy::Expired => Settlement::Expired,
            DecidedBy::Cancel => Settlement::Cancelled,
            DecidedBy::TurnEnded => Settlement::TurnEnded,
        }
    }
}

/// Who answered a permission request: any authorized application of the
/// thread's principal may, not only the one that asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answerer {
    /// The answering principal.
    pub principal: String,
    /// Through which application.
    pub application: String,
}

/// One request waiting for an answer (`permissions.list`), read from the
/// durable inbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingRequest {
    /// The request id within its turn: the agent's own JSON-RPC id (a
    /// string verbatim, another id by its JSON text).
    pub id: String,
    /// The turn that asked.
    pub turn_id: String,
    /// The turn's thread.
    pub thread_id: String,
    /// The turn's workspace.
    #[serde(default)]
    pub workspace_id: String,
    /// The application whose thread asked (another application of the
    /// principal may answer).
    #[serde(default)]
    pub application: String,
    /// When it was journaled (RFC 3339 UTC with milliseconds on the wire).
    #[serde(default, with = "crate::time::rfc3339")]
    pub requested_at: i64,
    /// The tool call the request is about (the journal's tool-call envelope).
    pub tool_call: Invocation,
    /// The options offered; an answer must name one of their ids. On the
    /// wire each is `{"id", "name", "kind"}`.
    #[serde(with = "listed")]
    pub options: Vec<PermissionOption>,
    /// When the engine stops waiting and answers by itself (ms since the
    /// epoch; RFC 3339 UTC with milliseconds on the wire, like every time).
    #[serde(with = "crate::time::rfc3339")]
    pub deadline: i64,
}

/// `permissions.list`'s spelling of an option: `id` where ACP and the
/// journal say `optionId` (kept so the protocol version stays).
pub(crate) mod listed {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::PermissionOption;

    #[derive(Serialize)]
    struct Out<'a> {
        id: &'a str,
        name: &'a str,
        kind: &'a str,
    }

    #[derive(Deserialize)]
    struct In {
        id: String,
        name: String,
        kind: String,
    }

    pub(crate) fn serialize<S: Serializer>(
        options: &[PermissionOption],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let out: Vec<Out<'_>> = options
            .iter()
            .map(|o| Out {
                id: &o.id,
                name: &o.name,
                kind: &o.kind,
            })
            .collect();
        out.serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<PermissionOption>, D::Error> {
        Ok(Vec::<In>::deserialize(d)?
            .into_iter()
            .map(|o| PermissionOption {
                id: o.id,
                name: o.name,
                kind: o.kind,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn option() -> PermissionOption {
        PermissionOption {
            id: "opt-allow_once".into(),
            name: "Allow".into(),
            kind: "allow_once".into(),
        }
    }

    #[test]
    fn one_option_type_two_spellings() {
        assert_eq!(
            serde_json::to_value(option()).unwrap(),
            json!({"optionId": "opt-allow_once", "name": "Allow", "kind": "allow_once"})
        );
        let pending = PendingRequest {
            id: "r1".into(),
            turn_id: "t".into(),
            thread_id: "th".into(),
            tool_call: Invocation {
                id: "call".into(),
                ..Invocation::default()
            },
            options: vec![option()],
            workspace_id: "w".into(),
            application: "app".into(),
            requested_at: 1_000,
            deadline: 1_500,
        };
        let wire = serde_json::to_value(&pending).unwrap();
        assert_eq!(
            wire,
            json!({"id": "r1", "turnId": "t", "threadId": "th", "toolCall": {"id": "call"},
                "workspaceId": "w", "application": "app",
                "requestedAt": "1970-01-01T00:00:01.000Z",
                "options": [{"id": "opt-allow_once", "name": "Allow", "kind": "allow_once"}],
                "deadline": "1970-01-01T00:00:01.500Z"})
        );
        assert_eq!(
            serde_json::from_value::<PendingRequest>(wire).unwrap(),
            pending
        );
    }

    #[test]
    fn answers_are_acp_outcomes() {
        let a = PermissionAnswer::Selected {
            option_id: "x".into(),
        };
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            json!({"outcome": "selected", "optionId": "x"})
        );
        assert_eq!(
            serde_json::to_value(PermissionAnswer::Cancelled).unwrap(),
            json!({"outcome": "cancelled"})
        );
        for by in [
            DecidedBy::User,
            DecidedBy::Automatic,
            DecidedBy::Expired,
            DecidedBy::Cancel,
            DecidedBy::TurnEnded,
        ] {
            assert_eq!(serde_json::to_value(by).unwrap(), json!(by.as_str()));
        }
        for s in Settlement::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
            assert_eq!(Settlement::parse(s.as_str()), Some(s));
        }
    }
}
