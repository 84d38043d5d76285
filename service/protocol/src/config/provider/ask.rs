//! A provider's asking mode: the ACP session mode (`session/set_mode`)
//! requested on every new or reopened session of an unrestricted thread
//! whose approval is `ask`, so the agent asks before it acts instead of
//! acting in its own automatic mode, and whether the owner accepted the
//! provider without one. Not identity: changing it never replaces a
//! thread's agent session.
//!
//! Why: current adapters (claude-agent-acp 0.101, qwen-code 0.24) start in
//! an automatic mode and write files without a permission request, so a
//! person who chose `ask` was never asked. Without `askMode` in the config
//! the catalogue's mode for the provider's command is used, so a provider
//! added before this existed gets it too.

use serde_json::{Map, Value};

use super::CommandRef;
use crate::config::catalogue::CATALOGUE;

/// Longest mode id accepted (ACP mode ids are short names like `default`).
const MAX_MODE_BYTES: usize = 64;

/// The provider's asking-mode policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AskPolicy {
    /// `askMode` (else the catalogue's, by the command's file name): the
    /// session mode id in which the agent asks before acting (`None`:
    /// none known, nothing is requested).
    pub mode: Option<String>,
    /// `allowUnasked`: the owner accepts that this provider may act
    /// without asking: an `ask` turn runs when the mode is not applied or
    /// the policy probe found it `ignored`, instead of failing
    /// `ask_unavailable`.
    pub allow_unasked: bool,
}

impl AskPolicy {
    /// The policy from the config's optional fields; the error names the
    /// field. Without `mode`, the catalogue entry whose command is
    /// `command`'s file name gives it.
    pub fn from_fields(
        mode: Option<&str>,
        allow_unasked: Option<bool>,
        command: &CommandRef,
    ) -> Result<AskPolicy, String> {
        if let Some(m) = mode
            && (m.is_empty() || m.len() > MAX_MODE_BYTES || m.chars().any(char::is_control))
        {
            return Err(format!(
                "`askMode` must be a session mode id of 1-{MAX_MODE_BYTES} bytes without control characters"
            ));
        }
        let mode = mode.map(str::to_owned).or_else(|| catalogue_mode(command));
        Ok(AskPolicy {
            mode,
            allow_unasked: allow_unasked.unwrap_or(false),
        })
    }

    /// Reads the two fields of a provider's JSON object.
    pub(super) fn from_json(
        obj: &Map<String, Value>,
        command: &CommandRef,
    ) -> Result<AskPolicy, String> {
        let mode = match obj.get("askMode") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => return Err("`askMode` must be a string".into()),
        };
        let allow = match obj.get("allowUnasked") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => return Err("`allowUnasked` must be true or false".into()),
        };
        AskPolicy::from_fields(mode, allow, command)
    }
}

/// The catalogue's asking mode for the agent `command` runs, matched by
/// the command's file name (`/home/me/.nvm/…/bin/claude-agent-acp` is
/// the catalogue's `claude-agent-acp`).
fn catalogue_mode(command: &CommandRef) -> Option<String> {
    let name = match command {
        CommandRef::Absolute(path) => path.file_name()?.to_str()?.to_owned(),
        CommandRef::Bare(name) => name.clone(),
    };
    CATALOGUE
        .iter()
        .find(|e| e.command == name)
        .and_then(|e| e.ask_mode)
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::ProviderSpec;

    #[test]
    fn ask_mode_fields_are_read_checked_and_default_from_the_catalogue() {
        let spec = |v| ProviderSpec::from_json("p", &v);
        let plain = spec(json!({"command": "a"})).unwrap();
        assert_eq!(plain.ask.mode, None);
        assert!(!plain.ask.allow_unasked);
        let set = spec(json!({"command": "a", "askMode": "ask", "allowUnasked": true})).unwrap();
        assert_eq!(set.ask.mode.as_deref(), Some("ask"));
        assert!(set.ask.allow_unasked);
        // Known commands get the catalogue's mode, bare or absolute.
        let claude = spec(json!({"command": "/opt/node/bin/claude-agent-acp"})).unwrap();
        assert_eq!(claude.ask.mode.as_deref(), Some("default"));
        let qwen = spec(json!({"command": "qwen", "args": ["--acp"]})).unwrap();
        assert_eq!(qwen.ask.mode.as_deref(), Some("default"));
        let own = spec(json!({"command": "qwen", "askMode": "auto-edit"})).unwrap();
        assert_eq!(own.ask.mode.as_deref(), Some("auto-edit"));
        for bad in [
            json!({"command": "a", "askMode": ""}),
            json!({"command": "a", "askMode": 3}),
            json!({"command": "a", "askMode": "a\nb"}),
            json!({"command": "a", "allowUnasked": "yes"}),
        ] {
            assert!(spec(bad.clone()).is_err(), "{bad}");
        }
    }
}
