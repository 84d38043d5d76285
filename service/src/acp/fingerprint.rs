//! The identity fingerprint of a provider definition.
//!
//! It covers what makes an agent *the same agent*: command, arguments,
//! environment names (constant and allowlisted) and `vcsIdentity`. A
//! thread's session made under another fingerprint is replaced at its next
//! turn. Environment *values* are left out (secrets never enter the hash,
//! and a rotated key is the same agent), and so is the session policy.

use serde_json::json;
use sha2::{Digest, Sha256};

use lapis_protocol::config::{CommandRef, ProviderSpec};

/// Lowercase hex SHA-256 of the definition's identity.
pub(crate) fn fingerprint(spec: &ProviderSpec) -> String {
    let command = match &spec.command {
        CommandRef::Absolute(p) => p.to_string_lossy().into_owned(),
        CommandRef::Bare(name) => name.clone(),
    };
    let mut env: Vec<&str> = spec
        .env
        .keys()
        .map(String::as_str)
        .chain(spec.env_allowlist.iter().map(String::as_str))
        .collect();
    env.sort_unstable();
    let identity = json!({
        "command": command,
        "args": spec.args,
        "env": env,
        "vcsIdentity": spec.vcs_identity.as_ref().map(|v| json!({"name": v.name, "email": v.email})),
    });
    let digest = Sha256::digest(identity.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{ProviderSpec, fingerprint};

    fn spec(v: serde_json::Value) -> ProviderSpec {
        ProviderSpec::from_json("p", &v).unwrap()
    }

    #[test]
    fn identity_changes_change_the_fingerprint_and_policy_does_not() {
        let base = spec(json!({"command": "agent", "args": ["--acp"], "envAllowlist": ["KEY"]}));
        let fp = fingerprint(&base);
        assert_eq!(fp.len(), 64);
        let same = spec(
            json!({"command": "agent", "args": ["--acp"], "envAllowlist": ["KEY"],
            "idleSeconds": 0, "maxTurnSeconds": 5}),
        );
        assert_eq!(fingerprint(&same), fp);
        for other in [
            json!({"command": "agent2", "args": ["--acp"], "envAllowlist": ["KEY"]}),
            json!({"command": "agent", "args": ["--acp", "-v"], "envAllowlist": ["KEY"]}),
            json!({"command": "agent", "args": ["--acp"], "envAllowlist": ["KEY", "OTHER"]}),
            json!({"command": "agent", "args": ["--acp"], "envAllowlist": ["KEY"],
                "vcsIdentity": {"name": "A", "email": "a@example.com"}}),
        ] {
            assert_ne!(fingerprint(&spec(other)), fp);
        }
    }
}
