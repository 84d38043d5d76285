//! `notify`: runs the configured command (or the built-in desktop
//! notifier, or POSTs the webhook, [`webhook`]) for the attention events
//! it was asked for.
//!
//! What must stay true:
//! - it reads committed events from the store's broadcast on its own task,
//!   and every run is its own task with a deadline: nothing here is on the
//!   writer's or a turn's path, and a slow or failing command is only
//!   logged;
//! - the command gets exactly one [`NotifyEvent`] line on stdin: kind, ids,
//!   workspace, provider and a title the controller writes from its own
//!   words (kind, the tool call's *kind*, state and outcome codes) —
//!   never a prompt, a reply or an agent-written title — redacted and
//!   made terminal-safe; its argv is the configured `args` and its
//!   environment only the allowlisted names;
//! - at most `maxPerMinute` runs start in any 60 seconds; the rest are
//!   dropped, and logged once per minute with how many.
//!
//! - in presence-aware mode (`presence: true`) nothing runs for an event
//!   of a thread a person is watching live ([`Presence`]: a present
//!   subscription covering it); a suppressed event is logged, never
//!   counted against the rate limit.
//!
//! Which events count is [`AttentionKind::of`], the attention
//! subscription's own classification.

use std::collections::VecDeque;
use std::process::Stdio;
use std::time::Duration;

use lapis_protocol::config::{EnvFile, NotifyConfig, NotifyEvent};
use lapis_protocol::{AttentionKind, JournalEvent, OutcomeCode, Payload, ToolKind};
use tokio::io::AsyncWriteExt;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use crate::presence::Presence;
use crate::redact::redactor;
use crate::store::Store;

mod webhook;
use webhook::Webhook;

/// The window of the rate limit.
const WINDOW: Duration = Duration::from_secs(60);

/// Environment the built-in desktop notifier needs to reach the session's
/// notification service (besides `PATH`, to find its program).
const DESKTOP_ENV: [&str; 5] = [
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "DBUS_SESSION_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "PATH",
];

/// Starts the notifier; it ends when the store closes. A webhook's
/// secrets are read from `secrets` (the env file) here, once: one that
/// cannot be resolved is logged by name and nothing is sent.
pub(crate) fn spawn(
    store: Store,
    config: NotifyConfig,
    presence: Presence,
    secrets: &EnvFile,
) -> tokio::task::JoinHandle<()> {
    let rx = store.subscribe();
    let hook = match &config.webhook {
        Some(w) => {
            match Webhook::resolve(w, secrets, Duration::from_secs(config.timeout_seconds())) {
                Ok(hook) => Some(hook),
                Err(reason) => {
                    tracing::warn!(%reason, "notify: the webhook is off");
                    return tokio::spawn(async {});
                }
            }
        }
        None => None,
    };
    tokio::spawn(async move {
        // No command runs on the word of a journal not yet checked
        // (`store::history`); events committed meanwhile wait in `rx`.
        if store.history_verified().await.is_err() {
            return;
        }
        run(store, config, hook, presence, rx).await
    })
}

/// Starts of the runs of the last [`WINDOW`], oldest first.
#[derive(Debug, Default)]
struct Limiter {
    /// Start times inside the window.
    starts: VecDeque<Instant>,
    /// Events dropped since the last report.
    dropped: u64,
    /// When the last drop was reported.
    reported: Option<Instant>,
}

impl Limiter {
    /// Whether a run may start at `now` (and counts it if so).
    fn admit(&mut self, now: Instant, per_minute: u32) -> bool {
        while self
            .starts
            .front()
            .is_some_and(|t| now.duration_since(*t) >= WINDOW)
        {
            self.starts.pop_front();
        }
        if self.starts.len() < per_minute as usize {
            self.starts.push_back(now);
            return true;
        }
        self.dropped += 1;
        if self
            .reported
            .is_none_or(|t| now.duration_since(t) >= WINDOW)
        {
            tracing::warn!(
                dropped = self.dropped,
                per_minute,
                "notify: rate limit reached; attention events dropped"
            );
            self.reported = Some(now);
            self.dropped = 0;
        }
        false
    }
}

async fn run(
    store: Store,
    config: NotifyConfig,
    hook: Option<Webhook>,
    presence: Presence,
    mut rx: tokio::sync::broadcast::Receiver<std::sync::Arc<JournalEvent>>,
) {
    let mut limiter = Limiter::default();
    loop {
        let event = match rx.recv().await {
            Ok(e) => e,
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(missed, "notify: fell behind the journal; events skipped");
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        let kinds: Vec<AttentionKind> = AttentionKind::of(&event)
            .into_iter()
            .filter(|k| config.kinds.contains(k))
            .collect();
        if kinds.is_empty() {
            continue;
        }
        let thread = match store.get_thread(&event.thread_id).await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(code = e.code(), "notify: cannot read the event's thread");
                continue;
            }
        };
        if config.presence && presence.attends(&thread) {
            tracing::info!(
                seq = event.seq,
                thread = %thread.id,
                turn = ?event.turn_id,
                "notify: suppressed, the thread is being watched"
            );
            continue;
        }
        for kind in kinds {
            if !limiter.admit(Instant::now(), config.per_minute()) {
                continue;
            }
            let line = describe(&thread, &event, kind);
            match &hook {
                Some(hook) => {
                    let deadline = Duration::from_secs(config.timeout_seconds());
                    tokio::spawn(hook.clone().deliver(line, deadline));
                }
                None => {
                    tokio::spawn(deliver(config.clone(), line));
                }
            }
        }
    }
}

/// The line for `event` (of `thread`) as `kind`.
fn describe(
    thread: &lapis_protocol::Thread,
    event: &JournalEvent,
    kind: AttentionKind,
) -> NotifyEvent {
    let body = event.body();
    let request_id = match &body {
        Some(Payload::PermissionRequested(r)) => Some(r.request_id.clone()),
        Some(Payload::PermissionDecided(d)) => Some(d.request_id.clone()),
        _ => None,
    };
    let title = title(kind, body.as_ref(), &thread.workspace_id);
    let (title, _) = redactor().redact_str(&title);
    let title = lapis_protocol::terminal::safe(&title)
        .chars()
        .take(200)
        .collect();
    NotifyEvent {
        kind,
        seq: event.seq,
        thread_id: event.thread_id.clone(),
        turn_id: event.turn_id.clone(),
        request_id,
        workspace_id: thread.workspace_id.clone(),
        provider: thread.provider.clone(),
        title,
    }
}

/// A notification's title, in the controller's words only: every part is
/// the attention kind, a workspace id (a validated name) or a word of a
/// closed vocabulary — ACP's tool kinds ([`ToolKind`]), the decider, turn
/// states, outcome codes and ACP stop reasons. A tool call's agent-written
/// title never appears, nor does a `kind` (or outcome) outside those
/// vocabularies: the part is left out instead.
fn title(kind: AttentionKind, body: Option<&Payload>, ws: &str) -> String {
    let outcome = |o: &str| {
        (OutcomeCode::parse(o).is_some() || crate::acp::STOP_REASONS.contains(&o))
            .then(|| o.to_owned())
    };
    match (kind, body) {
        (AttentionKind::PermissionRequested, Some(Payload::PermissionRequested(r))) => {
            match r.invocation.kind.as_deref().and_then(ToolKind::parse) {
                Some(k) => format!("permission needed ({}) in {ws}", k.as_str()),
                None => format!("permission needed in {ws}"),
            }
        }
        (AttentionKind::PermissionRequested, _) => format!("permission needed in {ws}"),
        (AttentionKind::PermissionSettled, Some(Payload::PermissionDecided(d))) => {
            match d.decided_by {
                Some(by) => format!("permission settled ({}) in {ws}", by.as_str()),
                None => format!("permission settled in {ws}"),
            }
        }
        (AttentionKind::PermissionSettled, _) => format!("permission settled in {ws}"),
        (AttentionKind::TurnFinished, Some(Payload::TurnState(c))) => {
            match c.outcome.as_deref().and_then(outcome) {
                Some(o) => format!("turn {} ({o}) in {ws}", c.to.as_str()),
                None => format!("turn {} in {ws}", c.to.as_str()),
            }
        }
        (AttentionKind::TurnFinished, _) => format!("turn finished in {ws}"),
        (AttentionKind::TurnFenced, _) => {
            format!("workspace {ws} fenced: resolve the turn (turns resolve)")
        }
        (AttentionKind::WorkspaceIdle, _) => format!("workspace {ws} is idle"),
        (AttentionKind::BudgetExhausted, _) => {
            format!("budget spent: a turn in {ws} was not started (budgets show)")
        }
    }
}

/// The program, its arguments and the environment names it gets.
fn invocation(config: &NotifyConfig, line: &NotifyEvent) -> (String, Vec<String>, Vec<String>) {
    if !config.desktop {
        let command = config.command.clone().unwrap_or_default();
        return (command, config.args.clone(), config.env_allowlist.clone());
    }
    let env: Vec<String> = DESKTOP_ENV
        .iter()
        .map(|s| (*s).to_owned())
        .chain(config.env_allowlist.iter().cloned())
        .collect();
    let summary = "lapis-ai-controller".to_owned();
    if cfg!(target_os = "macos") {
        // An AppleScript string literal: quotes and backslashes escaped.
        let quoted = line.title.replace('\\', "\\\\").replace('"', "\\\"");
        let script = format!("display notification \"{quoted}\" with title \"{summary}\"");
        ("osascript".into(), vec!["-e".into(), script], env)
    } else {
        ("notify-send".into(), vec![summary, line.title.clone()], env)
    }
}

/// Runs the command once with `line` on stdin, within the timeout.
async fn deliver(config: NotifyConfig, line: NotifyEvent) {
    let (program, args, env) = invocation(&config, &line);
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(&args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    for name in &env {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    let kind = line.kind.as_str();
    let mut child = match crate::children::spawn(crate::children::Purpose::Notify, &mut cmd) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(kind, error = %e, "notify: the command did not start");
            return;
        }
    };
    let text = serde_json::to_string(&line).unwrap_or_default() + "\n";
    let limit = Duration::from_secs(config.timeout_seconds());
    let outcome = tokio::time::timeout(limit, async {
        if let Some(mut stdin) = child.stdin.take() {
            // A command that does not read its stdin is fine.
            let _ = stdin.write_all(text.as_bytes()).await;
        }
        child.wait().await
    })
    .await;
    match outcome {
        Ok(Ok(status)) if status.success() => {}
        Ok(Ok(status)) => tracing::warn!(kind, code = status.code(), "notify: the command failed"),
        Ok(Err(e)) => tracing::warn!(kind, error = %e, "notify: waiting for the command failed"),
        Err(_) => {
            tracing::warn!(
                kind,
                seconds = limit.as_secs(),
                "notify: the command timed out; killed"
            );
            let _ = child.kill().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapis_protocol::{Invocation, PermissionRequested, StateChange, TurnEvent, TurnState};

    fn asked(kind: &str) -> Payload {
        Payload::PermissionRequested(PermissionRequested {
            request_id: "r1".into(),
            invocation: Invocation {
                id: "call-1".into(),
                title: Some("rm -rf ~ <b>now</b>".into()),
                kind: Some(kind.into()),
                ..Default::default()
            },
            options: Vec::new(),
            expires_at: None,
        })
    }

    /// The title is the controller's words: an ACP tool kind is named, an
    /// agent's free-text kind (newlines, markup) and its tool-call title
    /// never are, nor an outcome outside the controller's codes and ACP's
    /// stop reasons.
    #[test]
    fn a_title_is_built_only_from_closed_vocabularies() {
        let p = AttentionKind::PermissionRequested;
        assert_eq!(
            title(p, Some(&asked("edit")), "w1"),
            "permission needed (edit) in w1"
        );
        for hostile in ["edit\nsudo reboot", "<b>x</b>", "execute; rm", "Edit"] {
            let t = title(p, Some(&asked(hostile)), "w1");
            assert_eq!(t, "permission needed in w1", "{hostile:?}");
        }
        let ended = |outcome: &str| {
            Payload::TurnState(StateChange {
                from: TurnState::Running,
                to: TurnState::Completed,
                event: TurnEvent::Complete,
                outcome: Some(outcome.into()),
                recovered: false,
                workspace_idle: false,
            })
        };
        let f = AttentionKind::TurnFinished;
        assert_eq!(
            title(f, Some(&ended("end_turn")), "w1"),
            "turn completed (end_turn) in w1"
        );
        assert_eq!(
            title(f, Some(&ended("deadline_exceeded")), "w1"),
            "turn completed (deadline_exceeded) in w1"
        );
        assert_eq!(
            title(f, Some(&ended("pwned\n<i>")), "w1"),
            "turn completed in w1"
        );
    }

    #[test]
    fn the_rate_limit_admits_so_many_per_minute_and_then_again() {
        let mut l = Limiter::default();
        let t0 = Instant::now();
        assert!(l.admit(t0, 2));
        assert!(l.admit(t0 + Duration::from_secs(1), 2));
        assert!(!l.admit(t0 + Duration::from_secs(2), 2));
        assert!(!l.admit(t0 + Duration::from_secs(59), 2));
        assert!(
            l.admit(t0 + Duration::from_secs(60), 2),
            "the first left the window"
        );
        assert!(!l.admit(t0 + Duration::from_secs(60), 2));
    }
}
