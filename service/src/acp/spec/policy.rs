//! A provider's session policy (how long an idle agent is kept, how long a
//! turn may run) and its identity fingerprint.
//!
//! The fingerprint covers what makes an agent *the same agent*: command,
//! arguments, environment names (constant, allowlisted and derived) and
//! `vcsIdentity`. A thread's session made under another fingerprint is
//! replaced at its next turn. The policy is not identity: changing it never
//! replaces a session.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::{CommandRef, ProviderSpec};

/// Default `idleSeconds`: an idle agent is kept five minutes.
pub const DEFAULT_IDLE_SECONDS: u64 = 300;
/// Default `maxTurnSeconds`: a turn may run one hour.
pub const DEFAULT_MAX_TURN_SECONDS: u64 = 3600;
/// Upper bound of both (one week).
pub const MAX_POLICY_SECONDS: u64 = 604_800;

/// How long the agent of a thread lives and a turn may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionPolicy {
    /// An agent idle this long is stopped (0: stopped after every turn).
    pub idle_seconds: u64,
    /// A turn running this long is cancelled (`deadline_exceeded`).
    pub max_turn_seconds: u64,
}

impl Default for SessionPolicy {
    fn default() -> Self {
        SessionPolicy {
            idle_seconds: DEFAULT_IDLE_SECONDS,
            max_turn_seconds: DEFAULT_MAX_TURN_SECONDS,
        }
    }
}

impl SessionPolicy {
    /// Reads `idleSeconds` (0-604800) and `maxTurnSeconds` (1-604800).
    pub(super) fn from_json(obj: &Map<String, Value>) -> Result<SessionPolicy, String> {
        let read = |key: &str, min: u64, default: u64| -> Result<u64, String> {
            match obj.get(key) {
                None | Some(Value::Null) => Ok(default),
                Some(v) => match v.as_u64() {
                    Some(n) if (min..=MAX_POLICY_SECONDS).contains(&n) => Ok(n),
                    _ => Err(format!(
                        "`{key}` must be an integer from {min} to {MAX_POLICY_SECONDS}"
                    )),
                },
            }
        };
        Ok(SessionPolicy {
            idle_seconds: read("idleSeconds", 0, DEFAULT_IDLE_SECONDS)?,
            max_turn_seconds: read("maxTurnSeconds", 1, DEFAULT_MAX_TURN_SECONDS)?,
        })
    }
}

impl ProviderSpec {
    /// Lowercase hex SHA-256 of the definition's identity (see module docs).
    /// Environment *values* are left out: secrets never enter the hash, and
    /// a rotated key is the same agent.
    pub fn fingerprint(&self) -> String {
        let command = match &self.command {
            CommandRef::Absolute(p) => p.to_string_lossy().into_owned(),
            CommandRef::Bare(name) => name.clone(),
        };
        let mut env: Vec<&str> = self
            .env
            .keys()
            .map(String::as_str)
            .chain(self.env_allowlist.iter().map(String::as_str))
            .collect();
        env.sort_unstable();
        let identity = json!({
            "command": command,
            "args": self.args,
            "env": env,
            "vcsIdentity": self.vcs_identity.as_ref().map(|v| json!({"name": v.name, "email": v.email})),
        });
        let digest = Sha256::digest(identity.to_string().as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::ProviderSpec;

    fn spec(v: serde_json::Value) -> ProviderSpec {
        ProviderSpec::from_json("p", &v).unwrap()
    }

    #[test]
    fn identity_changes_change_the_fingerprint_and_policy_does_not() {
        let base = spec(json!({"command": "agent", "args": ["--acp"], "envAllowlist": ["KEY"]}));
        let fp = base.fingerprint();
        assert_eq!(fp.len(), 64);
        let same = spec(
            json!({"command": "agent", "args": ["--acp"], "envAllowlist": ["KEY"],
            "idleSeconds": 0, "maxTurnSeconds": 5}),
        );
        assert_eq!(same.fingerprint(), fp);
        for other in [
            json!({"command": "agent2", "args": ["--acp"], "envAllowlist": ["KEY"]}),
            json!({"command": "agent", "args": ["--acp", "-v"], "envAllowlist": ["KEY"]}),
            json!({"command": "agent", "args": ["--acp"], "envAllowlist": ["KEY", "OTHER"]}),
            json!({"command": "agent", "args": ["--acp"], "envAllowlist": ["KEY"],
                "vcsIdentity": {"name": "A", "email": "a@example.com"}}),
        ] {
            assert_ne!(spec(other).fingerprint(), fp);
        }
    }

    #[test]
    fn policy_bounds_are_checked() {
        assert_eq!(spec(json!({"command": "a"})).session.idle_seconds, 300);
        assert_eq!(spec(json!({"command": "a"})).session.max_turn_seconds, 3600);
        for bad in [
            json!({"command": "a", "idleSeconds": -1}),
            json!({"command": "a", "idleSeconds": 604801}),
            json!({"command": "a", "maxTurnSeconds": 0}),
            json!({"command": "a", "maxTurnSeconds": "10"}),
        ] {
            assert!(ProviderSpec::from_json("p", &bad).is_err(), "{bad}");
        }
    }
}
