//! A provider's restricted mode: the ACP session mode (`session/set_mode`)
//! requested for turns of restricted threads, and whether such a turn may
//! run when the mode cannot be applied. Not identity: changing it never
//! replaces a thread's agent session.

use serde_json::{Map, Value};

/// Longest mode id accepted (ACP mode ids are short names like `plan`).
const MAX_MODE_BYTES: usize = 64;

/// The provider's restricted-mode policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestrictedPolicy {
    /// `restrictedMode`: the session mode id requested for restricted
    /// threads (`None`: the provider has none, so it is `unsupported`).
    pub mode: Option<String>,
    /// `allowUnrestricted`: a restricted turn whose mode is not applied
    /// runs anyway (never auto-approving) instead of failing with
    /// `restricted_mode_unavailable`.
    pub allow_unrestricted: bool,
}

impl RestrictedPolicy {
    /// The policy from the config's optional fields; the error names the field.
    pub fn from_fields(
        mode: Option<&str>,
        allow_unrestricted: Option<bool>,
    ) -> Result<RestrictedPolicy, String> {
        if let Some(m) = mode
            && (m.is_empty() || m.len() > MAX_MODE_BYTES || m.chars().any(char::is_control))
        {
            return Err(format!(
                "`restrictedMode` must be a session mode id of 1-{MAX_MODE_BYTES} bytes without control characters"
            ));
        }
        Ok(RestrictedPolicy {
            mode: mode.map(str::to_owned),
            allow_unrestricted: allow_unrestricted.unwrap_or(false),
        })
    }

    /// Reads the two fields of a provider's JSON object.
    pub(super) fn from_json(obj: &Map<String, Value>) -> Result<RestrictedPolicy, String> {
        let mode = match obj.get("restrictedMode") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => return Err("`restrictedMode` must be a string".into()),
        };
        let allow = match obj.get("allowUnrestricted") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => return Err("`allowUnrestricted` must be true or false".into()),
        };
        RestrictedPolicy::from_fields(mode, allow)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::ProviderSpec;

    #[test]
    fn restricted_mode_fields_are_read_and_checked() {
        let spec = |v| ProviderSpec::from_json("p", &v);
        let plain = spec(json!({"command": "a"})).unwrap();
        assert_eq!(plain.restricted.mode, None);
        assert!(!plain.restricted.allow_unrestricted);
        let set =
            spec(json!({"command": "a", "restrictedMode": "plan", "allowUnrestricted": true}))
                .unwrap();
        assert_eq!(set.restricted.mode.as_deref(), Some("plan"));
        assert!(set.restricted.allow_unrestricted);
        for bad in [
            json!({"command": "a", "restrictedMode": ""}),
            json!({"command": "a", "restrictedMode": 3}),
            json!({"command": "a", "restrictedMode": "a\nb"}),
            json!({"command": "a", "allowUnrestricted": "yes"}),
        ] {
            assert!(spec(bad.clone()).is_err(), "{bad}");
        }
    }
}
