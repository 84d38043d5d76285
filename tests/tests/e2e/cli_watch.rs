//! `watch` in a real terminal: tmux runs the built binary against a real
//! `serve` with the fixture agent; keys go in with `send-keys` and the
//! screen comes out with `capture-pane`. The view answers a permission,
//! cancels a turn and resolves a fence without being left, and the
//! controller's own records confirm each step.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::serve_support::Server;
use lapis_e2e::wait::eventually;

fn fixture(args: &[&str]) -> Value {
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"), "args": args })
}

/// A private tmux server (its own socket), killed on drop.
pub(crate) struct Tmux {
    /// `tmux -S <socket>`.
    pub(crate) socket: PathBuf,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket).arg("-f").arg("/dev/null");
        c
    }

    /// The pane's text now.
    pub(crate) fn screen(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "watch"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the pane shows every one of `texts`; returns the screen.
    pub(crate) fn shows(&self, texts: &[&str]) -> String {
        let mut last = String::new();
        let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            eventually(&format!("the screen to show {texts:?}"), || {
                last = self.screen();
                texts.iter().all(|t| last.contains(t)).then(|| last.clone())
            })
        }));
        match found {
            Ok(screen) => screen,
            Err(_) => panic!("the screen never showed {texts:?}; it shows:\n{last}"),
        }
    }

    pub(crate) fn keys(&self, keys: &[&str]) {
        let status = self
            .cmd()
            .args(["send-keys", "-t", "watch"])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub(crate) fn literal(&self, text: &str) {
        let status = self
            .cmd()
            .args(["send-keys", "-t", "watch", "-l", text])
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub(crate) fn alive(&self) -> bool {
        self.cmd()
            .args(["has-session", "-t", "watch"])
            .output()
            .is_ok_and(|o| o.status.success())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

pub(crate) fn have_tmux() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Starts `watch` in a 120x40 tmux window with `client`'s environment
/// (a server's own context, or a client context whose
/// `LAPIS_AI_CONTROLLER_HOST` names another host), its socket in `dir`.
pub(crate) fn start_watch(client: &lapis_e2e::TestContext, dir: &Path) -> Tmux {
    let tmux = Tmux {
        socket: dir.join("tmux.sock"),
    };
    // The tmux server starts from this command, so the view inherits the
    // test's environment (its temp HOME, no colour).
    let mut c = client.command_for(
        Path::new("tmux"),
        [
            "-S",
            tmux.socket.to_str().unwrap(),
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "40",
            "-s",
            "watch",
        ],
    );
    c.arg(lapis_e2e::TestContext::bin()).arg("watch");
    let out = c.output().unwrap();
    assert!(out.status.success(), "tmux: {out:?}");
    tmux
}

/// A turn's state through `turns show --json`.
fn state_of(server: &Server, turn: &str) -> String {
    let doc = server.ctx.run(["turns", "show", turn, "--json"]).json();
    doc["turn"]["state"].as_str().unwrap_or_default().to_owned()
}

pub(crate) fn submit(server: &Server, thread: &str, prompt: &str) -> String {
    server
        .ctx
        .run(["turns", "submit", thread, "--prompt", prompt])
        .success()
        .stdout
        .trim()
        .to_owned()
}

#[test]
fn watch_answers_a_permission_cancels_a_turn_and_resolves_a_fence_in_a_real_terminal() {
    if !have_tmux() {
        lapis_e2e::skip::skip("tmux is not installed");
        return;
    }
    let server = Server::start_workspaces(
        json!({}),
        json!({
            "asker": fixture(&["--permissions", "1", "--perm-kinds", "allow_once,reject_once",
                "--chunks", "2", "--thoughts", "1"]),
            "hang": fixture(&["--chunks", "1", "--hang"]),
            "dies": fixture(&["--chunks", "1", "--exit-after-stream"]),
        }),
        &["slow", "fragile"],
    );
    let scratch = tempfile::tempdir().unwrap();
    let asker = server.cli_thread("asker");
    let hang = server
        .ctx
        .run(["threads", "create", "slow", "--provider", "hang"])
        .success()
        .stdout
        .trim()
        .to_owned();
    let dies = server
        .ctx
        .run(["threads", "create", "fragile", "--provider", "dies"])
        .success()
        .stdout
        .trim()
        .to_owned();
    let tmux = start_watch(&server.ctx, scratch.path());
    tmux.shows(&[
        "lapis-ai-controller watch",
        "live",
        "WORKSPACE",
        "proj",
        "slow",
        "fragile",
    ]);

    // 0. `?` lists every key over the view; any key closes the list.
    tmux.keys(&["?"]);
    tmux.shows(&["keys (any key closes)", "filter turns by id, workspace"]);
    tmux.keys(&["x"]);
    eventually("the key list to close", || {
        (!tmux.screen().contains("keys (any key closes)")).then_some(())
    });

    // 1. A permission request shows and `a` answers it (allow once); the
    //    reply then streams into the view.
    let first = submit(&server, &asker, "go");
    tmux.shows(&[
        "1 permission request waiting",
        "permission perm-0",
        "a  allow_once",
    ]);
    tmux.keys(&["a"]);
    tmux.shows(&[
        "answered perm-0 with opt-allow_once",
        "chunk0 chunk1",
        "thinking:",
    ]);
    eventually("the answered turn to complete", || {
        (state_of(&server, &first) == "completed").then_some(())
    });
    tmux.shows(&["completed", "turn completed"]);

    // 2. A hanging turn: selected with ↑ (the newest is on top), cancelled
    //    with `c`.
    let second = submit(&server, &hang, "wait");
    tmux.shows(&["running"]);
    eventually("the hanging turn to run", || {
        (state_of(&server, &second) == "running").then_some(())
    });
    tmux.keys(&["Up"]);
    tmux.shows(&[&format!(" {second} ")]);
    tmux.keys(&["c"]);
    tmux.shows(&["y cancels, any other key keeps it"]);
    tmux.keys(&["n"]);
    tmux.shows(&["nothing cancelled"]);
    assert_eq!(state_of(&server, &second), "running");
    tmux.keys(&["c"]);
    tmux.shows(&["y cancels, any other key keeps it"]);
    tmux.keys(&["y"]);
    tmux.shows(&["cancel asked for"]);
    eventually("the cancelled turn to settle", || {
        (state_of(&server, &second) == "cancelled").then_some(())
    });
    tmux.shows(&["turn cancelled"]);

    // 3. A turn whose agent dies after streaming fences its workspace; `R`,
    //    a wrong word (nothing happens), then `cancelled` and Enter resolve it.
    let third = submit(&server, &dies, "die");
    eventually("the turn to be fenced", || {
        (state_of(&server, &third) == "submission_unknown").then_some(())
    });
    tmux.shows(&["fenced"]);
    tmux.keys(&["Up"]);
    tmux.shows(&[&format!(" {third} ")]);
    tmux.keys(&["c"]);
    tmux.shows(&["nothing to cancel (R resolves it)"]);
    tmux.keys(&["R"]);
    tmux.shows(&["type failed or cancelled"]);
    tmux.literal("cancel");
    tmux.keys(&["Enter"]);
    tmux.shows(&["type `failed` or `cancelled` (not `cancel`)"]);
    assert_eq!(state_of(&server, &third), "submission_unknown");
    tmux.literal("cancelled");
    tmux.keys(&["Enter"]);
    tmux.shows(&["resolved", "resolved as cancelled"]);
    eventually("the fence to be resolved", || {
        (state_of(&server, &third) == "cancelled").then_some(())
    });
    let status = server.ctx.run(["status", "--json"]).json();
    assert_eq!(status["fencedWorkspaces"], json!([]), "{status}");

    // 4. `/` filters the turns list as typed; Esc clears the filter.
    tmux.keys(&["/"]);
    tmux.literal("fragile");
    tmux.keys(&["Enter"]);
    let shown = tmux.shows(&["turns matching `fragile`", &third[..13]]);
    assert!(!shown.contains(&first[..13]), "{shown}");
    tmux.keys(&["/"]);
    tmux.keys(&["Escape"]);
    tmux.shows(&["filter cleared", &first[..13]]);

    // `q` leaves the view (the session ends with it).
    tmux.keys(&["q"]);
    eventually("watch to exit", || (!tmux.alive()).then_some(()));
}

#[test]
fn watch_refuses_without_a_terminal_and_names_the_streams() {
    let ctx = lapis_e2e::TestContext::new();
    let out = ctx.run(["watch"]);
    out.expect_code(2);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr.contains("needs a terminal")
            && out.stderr.contains("journal tail --follow")
            && out.stderr.contains("--json"),
        "{}",
        out.stderr
    );
}

/// A server whose presence-aware `notify` command appends each
/// `turn_finished` line to the returned file.
pub(crate) fn presence_notifier() -> (Server, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let ctx = lapis_e2e::TestContext::new();
    let record = ctx.home().join("notify.log");
    let script = ctx.home().join("notify-recorder");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ncat >> '{}'\n", record.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut server = Server::start_in(ctx, json!({}), json!({}));
    server.stop();
    server.edit_config(|doc| {
        doc["notify"] = json!({
            "command": script, "kinds": ["turn_finished"], "maxPerMinute": 600, "presence": true,
        })
    });
    server.spawn();
    (server, record)
}

/// With `notify.presence`, an open `watch` counts as a person watching every
/// thread of the session: nothing is sent while it runs, and notifications
/// resume once it is closed.
#[test]
fn an_open_watch_keeps_a_presence_aware_notifier_quiet() {
    if !have_tmux() {
        lapis_e2e::skip::skip("tmux is not installed");
        return;
    }
    let (server, record) = presence_notifier();
    let thread = server.cli_thread("echo");
    let scratch = tempfile::tempdir().unwrap();
    let tmux = start_watch(&server.ctx, scratch.path());
    tmux.shows(&["lapis-ai-controller watch", "live"]);
    let quiet = submit(&server, &thread, "while watched");
    eventually("the suppression to be logged", || {
        server
            .log_text()
            .lines()
            .any(|l| l.contains("notify: suppressed") && l.contains(&quiet))
            .then_some(())
    });
    tmux.keys(&["q"]);
    eventually("watch to exit", || (!tmux.alive()).then_some(()));
    let loud = submit(&server, &thread, "after the watch");
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
