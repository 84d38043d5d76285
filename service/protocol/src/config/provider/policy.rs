//! A provider's session policy: how long an idle agent is kept for its
//! thread's next turn, how long a turn may run, and how long the agent may
//! take to answer each handshake request (`initialize`, `session/new`,
//! `session/load`). Not identity: changing it
//! never replaces a thread's agent session (the service's fingerprint of a
//! provider leaves it out).

use serde_json::{Map, Value};

/// Default `idleSeconds`: an idle agent is kept five minutes.
pub(super) const DEFAULT_IDLE_SECONDS: u64 = 300;
/// Default `maxTurnSeconds`: a turn may run one hour.
pub(super) const DEFAULT_MAX_TURN_SECONDS: u64 = 3600;
/// Default `handshakeSeconds`: each handshake request is answered within
/// 30 seconds, or the turn fails before its dispatch (`initialize_timeout`,
/// `session_new_timeout`, `session_load_timeout`).
pub(super) const DEFAULT_HANDSHAKE_SECONDS: u64 = 30;
/// Default `permissionTimeoutSeconds`: a permission request waits ten
/// minutes for an answer, then is answered by policy (`expired`).
pub(super) const DEFAULT_PERMISSION_TIMEOUT_SECONDS: u64 = 600;
/// Upper bound of `handshakeSeconds` (ten minutes).
pub(super) const MAX_HANDSHAKE_SECONDS: u64 = 600;
/// Upper bound of both (one week).
pub(super) const MAX_POLICY_SECONDS: u64 = 604_800;
/// The bounds of a permission timeout in seconds, a provider's
/// `permissionTimeoutSeconds` or a thread's (`threads.create` /
/// `threads.configure`): one second to one week.
pub const PERMISSION_TIMEOUT_SECONDS: std::ops::RangeInclusive<u64> = 1..=MAX_POLICY_SECONDS;

/// How long the agent of a thread lives and a turn may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionPolicy {
    /// An agent idle this long is stopped (0: stopped after every turn).
    pub idle_seconds: u64,
    /// A turn running this long is cancelled (`deadline_exceeded`).
    pub max_turn_seconds: u64,
    /// Deadline of each handshake request (1-600 seconds).
    pub handshake_seconds: u64,
    /// How long a permission request waits for an answer (1-604800
    /// seconds; a turn's own deadline caps it).
    pub permission_timeout_seconds: u64,
}

impl Default for SessionPolicy {
    fn default() -> Self {
        SessionPolicy {
            idle_seconds: DEFAULT_IDLE_SECONDS,
            max_turn_seconds: DEFAULT_MAX_TURN_SECONDS,
            handshake_seconds: DEFAULT_HANDSHAKE_SECONDS,
            permission_timeout_seconds: DEFAULT_PERMISSION_TIMEOUT_SECONDS,
        }
    }
}

impl SessionPolicy {
    /// The policy from the config's optional fields: `idleSeconds`
    /// (0-604800), `maxTurnSeconds` (1-604800) and `handshakeSeconds`
    /// (1-600) and `permissionTimeoutSeconds` (1-604800); the error names
    /// the field.
    pub fn from_fields(
        idle_seconds: Option<u64>,
        max_turn_seconds: Option<u64>,
        handshake_seconds: Option<u64>,
        permission_timeout_seconds: Option<u64>,
    ) -> Result<SessionPolicy, String> {
        let check = |key: &str, value: Option<u64>, min: u64, default: u64| match value {
            None => Ok(default),
            Some(n) if (min..=MAX_POLICY_SECONDS).contains(&n) => Ok(n),
            Some(_) => Err(format!(
                "`{key}` must be an integer from {min} to {MAX_POLICY_SECONDS}"
            )),
        };
        Ok(SessionPolicy {
            idle_seconds: check("idleSeconds", idle_seconds, 0, DEFAULT_IDLE_SECONDS)?,
            max_turn_seconds: check(
                "maxTurnSeconds",
                max_turn_seconds,
                1,
                DEFAULT_MAX_TURN_SECONDS,
            )?,
            handshake_seconds: match handshake_seconds {
                None => DEFAULT_HANDSHAKE_SECONDS,
                Some(n) if (1..=MAX_HANDSHAKE_SECONDS).contains(&n) => n,
                Some(_) => {
                    return Err(format!(
                        "`handshakeSeconds` must be an integer from 1 to {MAX_HANDSHAKE_SECONDS}"
                    ));
                }
            },
            permission_timeout_seconds: check(
                "permissionTimeoutSeconds",
                permission_timeout_seconds,
                *PERMISSION_TIMEOUT_SECONDS.start(),
                DEFAULT_PERMISSION_TIMEOUT_SECONDS,
            )?,
        })
    }

    /// Reads the two fields of a provider's JSON object.
    pub(super) fn from_json(obj: &Map<String, Value>) -> Result<SessionPolicy, String> {
        let field = |key: &str| -> Result<Option<u64>, String> {
            match obj.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                    format!("`{key}` must be an integer from 0 to {MAX_POLICY_SECONDS}")
                }),
            }
        };
        SessionPolicy::from_fields(
            field("idleSeconds")?,
            field("maxTurnSeconds")?,
            field("handshakeSeconds")?,
            field("permissionTimeoutSeconds")?,
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::ProviderSpec;

    #[test]
    fn policy_defaults_and_bounds() {
        let spec = |v| ProviderSpec::from_json("p", &v);
        let plain = spec(json!({"command": "a"})).unwrap();
        assert_eq!(
            (plain.session.idle_seconds, plain.session.max_turn_seconds),
            (300, 3600)
        );
        assert_eq!(plain.session.handshake_seconds, 30);
        assert_eq!(plain.session.permission_timeout_seconds, 600);
        let patient = spec(json!({"command": "a", "permissionTimeoutSeconds": 7200})).unwrap();
        assert_eq!(patient.session.permission_timeout_seconds, 7200);
        let quick = spec(json!({"command": "a", "handshakeSeconds": 1})).unwrap();
        assert_eq!(quick.session.handshake_seconds, 1);
        let set = spec(json!({"command": "a", "idleSeconds": 0, "maxTurnSeconds": 5})).unwrap();
        assert_eq!(
            (set.session.idle_seconds, set.session.max_turn_seconds),
            (0, 5)
        );
        for bad in [
            json!({"command": "a", "idleSeconds": -1}),
            json!({"command": "a", "idleSeconds": 604801}),
            json!({"command": "a", "maxTurnSeconds": 0}),
            json!({"command": "a", "maxTurnSeconds": "10"}),
            json!({"command": "a", "handshakeSeconds": 0}),
            json!({"command": "a", "handshakeSeconds": 601}),
            json!({"command": "a", "permissionTimeoutSeconds": 0}),
            json!({"command": "a", "permissionTimeoutSeconds": 604801}),
        ] {
            assert!(spec(bad.clone()).is_err(), "{bad}");
        }
    }
}
