//! Telling the service manager what the controller is doing (`sd_notify`).
//!
//! The systemd unit is `Type=notify`: `systemctl start/restart` returns only
//! once `serve` says `READY=1`, so "started" means clients can connect. What
//! must stay true: `READY=1` is sent only after the socket is bound and
//! listening (a connect succeeds from then on), `STOPPING=1` as soon as a stop
//! begins, `RELOADING=1` before a reload and `READY=1` after it. Without
//! `NOTIFY_SOCKET` (run by hand, launchd, tests) every call is a no-op. A
//! failed notification is logged, never fatal: the controller keeps serving.

use sd_notify::NotifyState;

/// Startup finished: the socket accepts connections.
pub(crate) fn ready() {
    send("ready", &[NotifyState::Ready]);
}

/// A stop began; running turns are being settled.
pub(crate) fn stopping() {
    send("stopping", &[NotifyState::Stopping]);
}

/// A reload began; [`reloaded`] ends it.
pub(crate) fn reloading() {
    send("reloading", &[NotifyState::Reloading]);
}

/// A reload ended (applied or refused): the controller serves again.
pub(crate) fn reloaded(status: &str) {
    send(
        "reloaded",
        &[NotifyState::Ready, NotifyState::Status(status)],
    );
}

fn send(what: &str, states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(notify = what, error = %e, "cannot notify the service manager");
    }
}
