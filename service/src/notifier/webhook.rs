//! `notify.webhook`: the event POSTed to a URL (ntfy, Slack, Discord or
//! plain JSON).
//!
//! What must stay true:
//! - the body holds only a [`NotifyEvent`]'s fields and the click-through
//!   line [`answer`] writes from ids and this machine's name — never a
//!   prompt, a reply or agent-written text;
//! - the URL (when it comes from the env file) and every header value are
//!   read from the env file once, at start, and appear in no log line and
//!   no error: failures are logged by their class ([`failure`]) and the
//!   HTTP status only;
//! - a delivery is bounded: at most [`ATTEMPTS`] requests (a retry only
//!   after a connection failure, a 429 or a 5xx), no redirect followed,
//!   and all of it within the section's `timeoutSeconds`; it runs on its
//!   own task, off every turn's path.

use std::time::Duration;

use lapis_protocol::AttentionKind;
use lapis_protocol::config::{
    EnvFile, NotifyEvent, WebhookConfig, WebhookPreset, check_webhook_url,
};
use serde::Serialize;
use tokio::time::Instant;

/// Requests per delivery, the first included.
pub(crate) const ATTEMPTS: u32 = 3;

/// The pause before the second attempt; each later one doubles it.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// A webhook ready to send: its secrets resolved from the env file.
#[derive(Clone)]
pub(crate) struct Webhook {
    url: String,
    preset: WebhookPreset,
    headers: Vec<(String, String)>,
    host: String,
    agent: ureq::Agent,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL and the header values may be credentials.
        f.debug_struct("Webhook")
            .field("preset", &self.preset)
            .field(
                "headers",
                &self.headers.iter().map(|h| &h.0).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Webhook {
    /// Resolves `config` against the env file; the error names what is
    /// missing (a variable's name, the CA file), never a value.
    pub(crate) fn resolve(
        config: &WebhookConfig,
        secrets: &EnvFile,
        timeout: Duration,
    ) -> Result<Webhook, String> {
        let url = match (&config.url, &config.url_env) {
            (Some(url), _) => url.clone(),
            (None, Some(name)) => {
                let url = secrets.get(name).ok_or_else(|| {
                    format!("`{name}` (notify.webhook.urlEnv) is not in the env file")
                })?;
                check_webhook_url(url)
                    .map_err(|e| format!("the URL in `{name}` (notify.webhook.urlEnv) {e}"))?;
                url.to_owned()
            }
            (None, None) => return Err("notify.webhook has no URL".into()),
        };
        let mut headers = Vec::new();
        for (header, name) in &config.headers {
            let value = secrets.get(name).ok_or_else(|| {
                format!("`{name}` (notify.webhook.headers.{header}) is not in the env file")
            })?;
            if value.bytes().any(|c| c.is_ascii_control()) {
                return Err(format!(
                    "`{name}` (notify.webhook.headers.{header}) holds a control character"
                ));
            }
            headers.push((header.clone(), value.to_owned()));
        }
        let mut tls = ureq::tls::TlsConfig::builder();
        if let Some(path) = &config.ca_file {
            let pem = std::fs::read(path)
                .map_err(|e| format!("cannot read notify.webhook.caFile {path}: {e}"))?;
            let certs: Vec<_> = ureq::tls::parse_pem(&pem)
                .filter_map(|item| match item {
                    Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
                    _ => None,
                })
                .collect();
            if certs.is_empty() {
                return Err(format!("notify.webhook.caFile {path} holds no certificate"));
            }
            tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&certs));
        }
        let agent = ureq::Agent::config_builder()
            .tls_config(tls.build())
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(concat!("lapis-ai-controller/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        let host = config.answer_host.clone().unwrap_or_else(host_name);
        Ok(Webhook {
            url,
            preset: config.preset,
            headers,
            host,
            agent,
        })
    }

    /// Sends `line`, retrying within `deadline`; the outcome is logged.
    pub(crate) async fn deliver(self, line: NotifyEvent, deadline: Duration) {
        let kind = line.kind.as_str();
        let (content_type, body, extra) = request(self.preset, &line, &answer(&line, &self.host));
        let until = Instant::now() + deadline;
        let mut backoff = FIRST_BACKOFF;
        for attempt in 1..=ATTEMPTS {
            let hook = self.clone();
            let (body, extra) = (body.clone(), extra.clone());
            let sent = tokio::task::spawn_blocking(move || {
                let mut req = hook.agent.post(&hook.url).content_type(content_type);
                for (name, value) in hook.headers.iter().chain(extra.iter()) {
                    req = req.header(name.as_str(), value.as_str());
                }
                req.send(&body[..]).map(|r| r.status().as_u16())
            })
            .await;
            let retry = match sent {
                Ok(Ok(status)) if (200..300).contains(&status) => return,
                Ok(Ok(status)) => {
                    tracing::warn!(
                        kind,
                        status,
                        attempt,
                        "notify: the webhook refused the event"
                    );
                    status == 429 || status >= 500
                }
                Ok(Err(e)) => {
                    tracing::warn!(
                        kind,
                        error = failure(&e),
                        attempt,
                        "notify: the webhook could not be reached"
                    );
                    !matches!(e, ureq::Error::Timeout(_))
                }
                Err(_) => return,
            };
            if !retry || attempt == ATTEMPTS || Instant::now() + backoff >= until {
                tracing::warn!(
                    kind,
                    attempts = attempt,
                    "notify: the webhook event was dropped"
                );
                return;
            }
            tokio::time::sleep(backoff).await;
            backoff *= 2;
        }
    }
}

/// A transport failure's class: ureq's own messages can name the URL,
/// which may be the credential.
fn failure(e: &ureq::Error) -> &'static str {
    match e {
        ureq::Error::Timeout(_) => "timeout",
        ureq::Error::HostNotFound => "host not found",
        ureq::Error::ConnectionFailed => "connection failed",
        ureq::Error::Io(_) => "i/o error",
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) => "tls error (certificate not trusted?)",
        ureq::Error::TooManyRedirects | ureq::Error::RedirectFailed => {
            "redirected (redirects are not followed)"
        }
        _ => "request failed",
    }
}

/// This machine's name for the click-through line.
fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_owned())
        .find(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"-._".contains(&c))
        })
        .unwrap_or_else(|| "HOST".into())
}

/// The command that answers `line`, run from anywhere that reaches this
/// machine over SSH.
pub(crate) fn answer(line: &NotifyEvent, host: &str) -> String {
    let cli = format!("ssh {host} lapis-ai-controller");
    match (line.kind, &line.turn_id, &line.request_id) {
        (AttentionKind::PermissionRequested, Some(turn), Some(request)) => {
            format!("answer: {cli} permissions respond {turn} {request} --allow (or --reject)")
        }
        (AttentionKind::TurnFenced, Some(turn), _) => format!(
            "resolve: {cli} turns resolve {turn} --as <outcome> --confirm-stopped (see `turns show {turn}`)"
        ),
        (AttentionKind::BudgetExhausted, _, _) => format!("see: {cli} budgets show"),
        _ => format!("watch: ssh -t {host} lapis-ai-controller watch"),
    }
}

/// The JSON preset's body: the event's fields and the answer.
#[derive(Serialize)]
struct JsonBody<'a> {
    #[serde(flatten)]
    event: &'a NotifyEvent,
    answer: &'a str,
}

/// Content type, body and the preset's own headers.
fn request(
    preset: WebhookPreset,
    line: &NotifyEvent,
    answer: &str,
) -> (&'static str, Vec<u8>, Vec<(String, String)>) {
    let text = format!("{}\n{answer}", line.title);
    let json = |v: serde_json::Value| serde_json::to_vec(&v).unwrap_or_default();
    match preset {
        WebhookPreset::Json => (
            "application/json",
            serde_json::to_vec(&JsonBody {
                event: line,
                answer,
            })
            .unwrap_or_default(),
            Vec::new(),
        ),
        WebhookPreset::Ntfy => (
            "text/plain; charset=utf-8",
            text.into_bytes(),
            vec![
                ("Title".into(), "lapis-ai-controller".into()),
                ("Tags".into(), line.kind.as_str().into()),
            ],
        ),
        WebhookPreset::Slack => (
            "application/json",
            json(serde_json::json!({ "text": text })),
            Vec::new(),
        ),
        WebhookPreset::Discord => (
            "application/json",
            json(serde_json::json!({ "content": text })),
            Vec::new(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(kind: AttentionKind) -> NotifyEvent {
        NotifyEvent {
            kind,
            seq: 7,
            thread_id: "thr_1".into(),
            turn_id: Some("turn_1".into()),
            request_id: Some("perm-0".into()),
            workspace_id: "proj".into(),
            provider: "claude".into(),
            title: "permission needed (execute) in proj".into(),
        }
    }

    #[test]
    fn the_answer_names_the_command_that_answers() {
        let asked = line(AttentionKind::PermissionRequested);
        assert_eq!(
            answer(&asked, "box"),
            "answer: ssh box lapis-ai-controller permissions respond turn_1 perm-0 --allow (or --reject)"
        );
        assert!(
            answer(&line(AttentionKind::TurnFenced), "me@box")
                .starts_with("resolve: ssh me@box lapis-ai-controller turns resolve turn_1 --as")
        );
        assert_eq!(
            answer(&line(AttentionKind::WorkspaceIdle), "box"),
            "watch: ssh -t box lapis-ai-controller watch"
        );
    }

    #[test]
    fn each_preset_carries_the_title_and_the_answer_only() {
        let asked = line(AttentionKind::PermissionRequested);
        let (ct, body, extra) = request(WebhookPreset::Json, &asked, "A");
        assert_eq!(ct, "application/json");
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["answer"], "A");
        assert_eq!(v["requestId"], "perm-0");
        assert_eq!(v.as_object().unwrap().len(), 9, "{v}");
        assert!(extra.is_empty());
        let (_, body, extra) = request(WebhookPreset::Ntfy, &asked, "A");
        assert_eq!(body, b"permission needed (execute) in proj\nA");
        assert_eq!(extra[1], ("Tags".into(), "permission_requested".into()));
        let (_, body, _) = request(WebhookPreset::Slack, &asked, "A");
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&body).unwrap(),
            serde_json::json!({"text": "permission needed (execute) in proj\nA"})
        );
        let (_, body, _) = request(WebhookPreset::Discord, &asked, "A");
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&body).unwrap(),
            serde_json::json!({"content": "permission needed (execute) in proj\nA"})
        );
    }

    #[test]
    fn a_missing_secret_is_named_never_shown() {
        let config: WebhookConfig = serde_json::from_value(serde_json::json!({
            "urlEnv": "HOOK_URL", "headers": {"Authorization": "HOOK_AUTH"}
        }))
        .unwrap();
        let path = std::path::Path::new("/x/env");
        let none = EnvFile::parse(b"", path).unwrap();
        let err = Webhook::resolve(&config, &none, Duration::from_secs(1)).unwrap_err();
        assert!(err.contains("`HOOK_URL`"), "{err}");
        let bad = EnvFile::parse(b"HOOK_URL=http://example.com/secret-path\n", path).unwrap();
        let err = Webhook::resolve(&config, &bad, Duration::from_secs(1)).unwrap_err();
        assert!(
            !err.contains("secret-path") && err.contains("https"),
            "{err}"
        );
        let half = EnvFile::parse(b"HOOK_URL=https://h/secret-path\n", path).unwrap();
        let err = Webhook::resolve(&config, &half, Duration::from_secs(1)).unwrap_err();
        assert!(err.contains("`HOOK_AUTH`"), "{err}");
        let whole = EnvFile::parse(
            b"HOOK_URL=https://h/secret-path\nHOOK_AUTH=Bearer tok-123\n",
            path,
        )
        .unwrap();
        let hook = Webhook::resolve(&config, &whole, Duration::from_secs(1)).unwrap();
        let shown = format!("{hook:?}");
        assert!(
            !shown.contains("secret-path") && !shown.contains("tok-123"),
            "{shown}"
        );
    }
}
