//! `watch` in tmux over ssh, and issue 45 item 3: a remote `watch`
//! counts as presence like a local one (the relay carries the same
//! `present` subscription, so a presence-aware notifier stays quiet while
//! it is open and speaks again once it closes).

use super::Remote;
use crate::cli_watch::{have_tmux, start_watch, submit};
use lapis_e2e::wait::eventually;

#[test]
fn a_remote_watch_runs_in_a_terminal_and_counts_as_presence() {
    if !have_tmux() {
        lapis_e2e::skip::skip("tmux is not installed");
        return;
    }
    let (server, record) = crate::cli_watch::presence_notifier();
    let Some(remote) = Remote::start_server(server) else {
        return;
    };
    let server = &remote.server;
    let thread = server.cli_thread("echo");
    let scratch = tempfile::tempdir().unwrap();
    // The view runs on this side, with the client context's environment
    // (its empty HOME, LAPIS_AI_CONTROLLER_HOST naming the sshd).
    let tmux = start_watch(&remote.local, scratch.path());
    tmux.shows(&["lapis-ai-controller watch", "live"]);
    let quiet = submit(server, &thread, "while watched over ssh");
    // The turn shows up in the remote view.
    tmux.shows(&["completed"]);
    eventually("the suppression to be logged", || {
        server
            .log_text()
            .lines()
            .any(|l| l.contains("notify: suppressed") && l.contains(&quiet))
            .then_some(())
    });
    tmux.keys(&["q"]);
    eventually("watch to exit", || (!tmux.alive()).then_some(()));
    let loud = submit(server, &thread, "after the watch");
    eventually("the notification to be recorded", || {
        std::fs::read_to_string(&record)
            .unwrap_or_default()
            .contains(&loud)
            .then_some(())
    });
    assert!(
        !std::fs::read_to_string(&record)
            .unwrap_or_default()
            .contains(&quiet)
    );
}
