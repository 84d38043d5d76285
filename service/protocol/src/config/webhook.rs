//! `notify.webhook`: an HTTPS POST of the controller-worded event to a
//! configured URL — a phone app (ntfy), a chat channel (Slack, Discord) or
//! anything that takes JSON.
//!
//! What must stay true: the request carries only what a
//! [`NotifyEvent`](super::NotifyEvent) carries plus the click-through line
//! the controller writes (the command that answers it); secrets — a
//! bearer header, a Slack or Discord webhook URL, which is itself the
//! credential — are named here by their env-file variable and read from
//! the env file beside the config, so they are never in the config, in a
//! log line or in an error; plain `http://` is accepted only for a
//! loopback host (a self-hosted ntfy on this machine).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The body the webhook is sent in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WebhookPreset {
    /// The event's fields as one JSON object, with `answer` (the default).
    #[default]
    Json,
    /// ntfy: the title and the answer as the plain-text message, with a
    /// `Title` header (POST to the topic's URL).
    Ntfy,
    /// A Slack incoming webhook: `{"text": …}`.
    Slack,
    /// A Discord webhook: `{"content": …}`.
    Discord,
}

impl WebhookPreset {
    /// The name in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookPreset::Json => "json",
            WebhookPreset::Ntfy => "ntfy",
            WebhookPreset::Slack => "slack",
            WebhookPreset::Discord => "discord",
        }
    }
}

/// The `notify.webhook` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookConfig {
    /// The URL to POST to: `https://…`, or `http://` to a loopback host
    /// (exactly one of `url` and `urlEnv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The env-file variable holding the URL, for URLs that are themselves
    /// the credential (Slack, Discord).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_env: Option<String>,
    /// The body's shape [default: `json`].
    #[serde(default)]
    pub preset: WebhookPreset,
    /// Request headers, each named to the env-file variable holding its
    /// value (`{"Authorization": "NTFY_AUTH"}`; at most 16).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Absolute path of a PEM file of the certificate authorities to trust
    /// instead of the built-in roots (a self-hosted server's own CA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// How a person reaches this machine in the click-through line
    /// (`ssh HOST lapis-ai-controller …`) [default: the host name].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_host: Option<String>,
}

/// Whether `name` is an env-file variable name (`[A-Za-z_][A-Za-z0-9_]*`).
pub(super) fn is_env_name(name: &str) -> bool {
    let mut b = name.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Whether `name` is an HTTP header name (an RFC 9110 token).
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
}

/// The scheme and host of `url`, if it is an absolute `http(s)` URL
/// without user information.
fn url_host(url: &str) -> Result<(&str, &str), &'static str> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or("must be an absolute http:// or https:// URL")?;
    if scheme != "https" && scheme != "http" {
        return Err("must be an absolute http:// or https:// URL");
    }
    if url.bytes().any(|c| c.is_ascii_control() || c == b' ') {
        return Err("must not contain spaces or control characters");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err("must not carry credentials (put them in `headers` via the env file)");
    }
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    if host.is_empty() {
        return Err("must name a host");
    }
    Ok((scheme, host))
}

/// Whether `host` is this machine (plain `http://` is allowed only there).
fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Checks a URL as the webhook's target (also the one read from the env
/// file at start).
pub fn check_url(url: &str) -> Result<(), &'static str> {
    let (scheme, host) = url_host(url)?;
    if scheme == "http" && !is_loopback_host(host) {
        return Err("plain http:// only to a loopback host; use https://");
    }
    Ok(())
}

impl WebhookConfig {
    /// The shape rules; the error is (field, reason).
    pub(super) fn check(&self) -> Result<(), (&'static str, String)> {
        match (&self.url, &self.url_env) {
            (Some(_), Some(_)) | (None, None) => {
                return Err((
                    "notify.webhook",
                    "needs exactly one of `url` and `urlEnv`".into(),
                ));
            }
            (Some(url), None) => {
                check_url(url).map_err(|e| ("notify.webhook.url", e.to_owned()))?;
            }
            (None, Some(name)) if !is_env_name(name) => {
                return Err((
                    "notify.webhook.urlEnv",
                    "must be a name of [A-Za-z_][A-Za-z0-9_]*".into(),
                ));
            }
            (None, Some(_)) => {}
        }
        if self.headers.len() > 16
            || !self
                .headers
                .iter()
                .all(|(h, v)| is_header_name(h) && is_env_name(v))
        {
            return Err((
                "notify.webhook.headers",
                "at most 16, each a header name mapped to an env-file variable name".into(),
            ));
        }
        if let Some(ca) = &self.ca_file
            && (!ca.starts_with('/') || ca.contains('\0'))
        {
            return Err(("notify.webhook.caFile", "must be an absolute path".into()));
        }
        if let Some(host) = &self.answer_host
            && (host.is_empty()
                || host.len() > 253
                || !host
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"-._@:[]".contains(&c)))
        {
            return Err((
                "notify.webhook.answerHost",
                "must be a host name (optionally user@host), at most 253 characters".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn hook(v: serde_json::Value) -> WebhookConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn webhook_shape_rules() {
        for ok in [
            json!({"url": "https://ntfy.sh/my-topic", "preset": "ntfy"}),
            json!({"url": "http://127.0.0.1:8080/alerts"}),
            json!({"url": "http://localhost/x"}),
            json!({"url": "http://[::1]:9/x"}),
            json!({"urlEnv": "SLACK_HOOK", "preset": "slack"}),
            json!({"url": "https://h/x", "headers": {"Authorization": "NTFY_AUTH"},
                   "caFile": "/etc/ca.pem", "answerHost": "me@box.tail-net"}),
        ] {
            assert_eq!(hook(ok.clone()).check(), Ok(()), "{ok}");
        }
        for (bad, field) in [
            (json!({}), "notify.webhook"),
            (json!({"url": "https://h", "urlEnv": "X"}), "notify.webhook"),
            (json!({"url": "http://example.com/x"}), "notify.webhook.url"),
            (json!({"url": "ftp://h/x"}), "notify.webhook.url"),
            (json!({"url": "https://u:p@h/x"}), "notify.webhook.url"),
            (json!({"url": "https:///x"}), "notify.webhook.url"),
            (json!({"urlEnv": "A-B"}), "notify.webhook.urlEnv"),
            (
                json!({"url": "https://h", "headers": {"Bad Header": "X"}}),
                "notify.webhook.headers",
            ),
            (
                json!({"url": "https://h", "headers": {"Authorization": "Bearer abc"}}),
                "notify.webhook.headers",
            ),
            (
                json!({"url": "https://h", "caFile": "ca.pem"}),
                "notify.webhook.caFile",
            ),
            (
                json!({"url": "https://h", "answerHost": "a b"}),
                "notify.webhook.answerHost",
            ),
        ] {
            assert_eq!(
                hook(bad.clone()).check().map_err(|e| e.0),
                Err(field),
                "{bad}"
            );
        }
        assert!(
            serde_json::from_value::<WebhookConfig>(json!({"url": "https://h", "preset": "teams"}))
                .is_err()
        );
    }
}
