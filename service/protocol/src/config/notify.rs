//! `notify`: what the controller does when something needs a person (an
//! attention event of a chosen kind) — run a command, show a desktop
//! notification or POST a webhook ([`super::webhook`]) — and the one line
//! it is given.
//!
//! What must stay true: the command receives only [`NotifyEvent`] — the
//! event kind, ids, workspace, provider and a short title the controller
//! writes from its own vocabulary (never prompt text or agent output),
//! redacted and terminal-safe — as one JSON line on stdin; argv is the
//! configured `args` alone and the environment holds only the
//! `envAllowlist` names. Runs are rate limited and time limited, and never
//! on a turn's path.

use serde::{Deserialize, Serialize};

use super::webhook::{WebhookConfig, is_env_name};
use crate::AttentionKind;

/// Default `maxPerMinute`.
pub const DEFAULT_NOTIFY_PER_MINUTE: u32 = 6;
/// Default `timeoutSeconds`.
pub const DEFAULT_NOTIFY_TIMEOUT_SECONDS: u64 = 10;

/// The `notify` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NotifyConfig {
    /// Absolute path of the command to run (exactly one of `command`,
    /// `desktop` and `webhook`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Use the built-in desktop notifier instead: `notify-send` on Linux,
    /// `osascript` on macOS (found on the service's `PATH`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub desktop: bool,
    /// POST the event to a URL instead (ntfy, Slack, Discord or JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookConfig>,
    /// Arguments of `command` (never secrets; at most 32).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment names passed through from the controller's environment
    /// (nothing else is; at most 32).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_allowlist: Vec<String>,
    /// The attention kinds that run it [default: `permission_requested`,
    /// `turn_fenced`].
    #[serde(default = "default_kinds")]
    pub kinds: Vec<AttentionKind>,
    /// At most this many runs in any minute (1-600, default 6); events
    /// past it are dropped and logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_per_minute: Option<u32>,
    /// A run still going after this many seconds is killed (1-60, default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// Presence-aware: nothing is sent about a thread while a person
    /// watches it live (a `journal.subscribe` with `present: true` covering
    /// it: the CLI's `--follow`, a `watch` view) [default: false].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub presence: bool,
}

fn default_kinds() -> Vec<AttentionKind> {
    vec![
        AttentionKind::PermissionRequested,
        AttentionKind::TurnFenced,
    ]
}

impl NotifyConfig {
    /// The shape rules; the error is (field, reason).
    pub(super) fn check(&self) -> Result<(), (&'static str, String)> {
        let chosen = [self.command.is_some(), self.desktop, self.webhook.is_some()];
        if chosen.iter().filter(|c| **c).count() != 1 {
            return Err((
                "notify",
                "needs exactly one of `command`, `desktop: true` and `webhook`".into(),
            ));
        }
        if let Some(c) = &self.command
            && (!c.starts_with('/') || c.contains('\0'))
        {
            return Err(("notify.command", "must be an absolute path".into()));
        }
        if let Some(hook) = &self.webhook {
            hook.check()?;
        }
        if self.args.len() > 32 || self.args.iter().any(|a| a.contains('\0')) {
            return Err((
                "notify.args",
                "at most 32 arguments, without NUL bytes".into(),
            ));
        }
        if self.env_allowlist.len() > 32 || !self.env_allowlist.iter().all(|n| is_env_name(n)) {
            return Err((
                "notify.envAllowlist",
                "at most 32 names of [A-Za-z_][A-Za-z0-9_]*".into(),
            ));
        }
        if self.kinds.is_empty() {
            return Err(("notify.kinds", "must name at least one kind".into()));
        }
        if !(1..=600).contains(&self.per_minute()) {
            return Err(("notify.maxPerMinute", "must be from 1 to 600".into()));
        }
        if !(1..=60).contains(&self.timeout_seconds()) {
            return Err(("notify.timeoutSeconds", "must be from 1 to 60".into()));
        }
        Ok(())
    }

    /// `maxPerMinute` with its default.
    pub fn per_minute(&self) -> u32 {
        self.max_per_minute.unwrap_or(DEFAULT_NOTIFY_PER_MINUTE)
    }

    /// `timeoutSeconds` with its default.
    pub fn timeout_seconds(&self) -> u64 {
        self.timeout_seconds
            .unwrap_or(DEFAULT_NOTIFY_TIMEOUT_SECONDS)
    }
}

/// The one JSON line a notify command reads on stdin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NotifyEvent {
    /// What happened.
    pub kind: AttentionKind,
    /// The journal event's `seq` (resume an attention subscription there).
    pub seq: u64,
    /// The thread.
    pub thread_id: String,
    /// The turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// The permission request, for the permission kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The turn's workspace.
    pub workspace_id: String,
    /// The thread's provider.
    pub provider: String,
    /// A short line in the controller's words (kind, state, outcome code,
    /// workspace), redacted and terminal-safe.
    pub title: String,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config(v: serde_json::Value) -> NotifyConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn notify_shape_rules() {
        let ok = config(json!({"command": "/usr/local/bin/ping-me"}));
        assert_eq!(ok.check(), Ok(()));
        assert_eq!(ok.kinds, default_kinds());
        assert_eq!((ok.per_minute(), ok.timeout_seconds()), (6, 10));
        assert_eq!(config(json!({"desktop": true})).check(), Ok(()));
        assert_eq!(
            config(json!({"webhook": {"url": "https://ntfy.sh/t", "preset": "ntfy"}})).check(),
            Ok(())
        );
        for bad in [
            json!({}),
            json!({"command": "/x", "desktop": true}),
            json!({"desktop": true, "webhook": {"url": "https://h/x"}}),
            json!({"webhook": {"url": "http://example.com/x"}}),
            json!({"command": "relative/x"}),
            json!({"command": "/x", "kinds": []}),
            json!({"command": "/x", "maxPerMinute": 0}),
            json!({"command": "/x", "timeoutSeconds": 61}),
            json!({"command": "/x", "envAllowlist": ["A-B"]}),
        ] {
            assert!(config(bad.clone()).check().is_err(), "{bad}");
        }
        assert!(
            serde_json::from_value::<NotifyConfig>(json!({"command": "/x", "kinds": ["nope"]}))
                .is_err()
        );
    }
}
