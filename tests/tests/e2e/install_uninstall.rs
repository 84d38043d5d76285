//! `uninstall --purge` asks before it deletes when a person is at a
//! terminal (tmux gives it one), does not when told `--yes`, and refuses
//! without a terminal unless told `--yes`; it stops the controller of the
//! home it deletes first.

use std::path::{Path, PathBuf};
use std::process::Command;

use lapis_e2e::TestContext;
use lapis_e2e::wait::eventually;

use crate::install_support::config_path;

/// One command in a private tmux server (its own socket), killed on drop.
struct Terminal {
    /// `tmux -S <socket>`.
    socket: PathBuf,
}

impl Terminal {
    /// Runs the built binary with `args` in a new 120x20 tmux session.
    fn start(ctx: &TestContext, args: &[&str]) -> Terminal {
        let socket = ctx.home().join("tmux.sock");
        let mut c = ctx.command_for(Path::new("tmux"), ["-S", socket.to_str().unwrap()]);
        c.args([
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "20",
            "-s",
            "t",
        ])
        .arg(TestContext::bin())
        .args(args);
        let out = c.output().unwrap();
        assert!(out.status.success(), "tmux: {out:?}");
        Terminal { socket }
    }

    fn tmux(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket).arg("-f").arg("/dev/null");
        c
    }

    /// Waits until the screen shows `text`.
    fn shows(&self, text: &str) {
        eventually(&format!("the terminal to show {text:?}"), || {
            let out = self
                .tmux()
                .args(["capture-pane", "-p", "-t", "t"])
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout)
                .contains(text)
                .then_some(())
        });
    }

    /// Types `text` and Enter.
    fn answer(&self, text: &str) {
        let status = self
            .tmux()
            .args(["send-keys", "-t", "t", "-l", text])
            .status()
            .unwrap();
        assert!(status.success());
        let status = self
            .tmux()
            .args(["send-keys", "-t", "t", "Enter"])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits until the command has ended (its session is gone).
    fn ended(&self) {
        eventually("the command to end", || {
            let alive = self
                .tmux()
                .args(["has-session", "-t", "t"])
                .output()
                .is_ok_and(|o| o.status.success());
            (!alive).then_some(())
        });
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").output();
    }
}

fn have_tmux() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn purge_asks_on_a_terminal_and_deletes_only_on_yes() {
    if !have_tmux() {
        lapis_e2e::skip::skip("tmux is not installed");
        return;
    }
    let ctx = TestContext::new();
    ctx.run(["install", "--no-service"]).success();
    let config = config_path(&ctx);
    let home = ctx.home().join(".lapis/ai-controller");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("controller.home"), "").unwrap();
    assert!(config.is_file());

    // No: nothing is removed, not even the launcher.
    let term = Terminal::start(&ctx, &["uninstall", "--purge"]);
    term.shows("Delete them? [y/N]");
    term.answer("n");
    term.ended();
    drop(term);
    assert!(config.is_file(), "the config stays after no");
    assert!(home.is_dir(), "the controller home stays after no");
    assert!(ctx.home().join(".local/bin/lapis-ai-controller").exists());

    // Yes: both go.
    let term = Terminal::start(&ctx, &["uninstall", "--purge"]);
    term.shows(&format!("{}", config.display()));
    term.answer("yes");
    term.ended();
    drop(term);
    assert!(!config.exists(), "the config is removed after yes");
    assert!(!home.exists(), "the controller home is removed after yes");

    // --yes on a terminal: no question.
    ctx.run(["install", "--no-service"]).success();
    let term = Terminal::start(&ctx, &["uninstall", "--purge", "--yes"]);
    term.ended();
    drop(term);
    assert!(!config.exists());
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

#[test]
fn purge_without_a_terminal_needs_yes_and_stops_its_background_controller_first() {
    let ctx = TestContext::new();
    ctx.run(["install", "--no-service"]).success();
    let config = config_path(&ctx);
    let home = ctx.home().join(".lapis/ai-controller");
    let started = ctx.run(["serve", "--background"]);
    started.success();
    let pid: u32 = started.stdout.trim().parse().expect("the pid on stdout");

    // No terminal, no --yes: refused, nothing removed, nothing stopped.
    let out = ctx.run(["uninstall", "--purge", "--json"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "confirmation_required");
    assert!(!out.stderr.contains("Delete them?"), "{}", out.stderr);
    let plain = ctx.run(["uninstall", "--purge"]);
    plain.expect_code(2);
    assert!(plain.stderr.contains("pass --yes"), "{}", plain.stderr);
    assert!(config.is_file(), "the config stays");
    assert!(
        home.join("controller.db").is_file(),
        "the controller home stays"
    );
    assert!(ctx.home().join(".local/bin/lapis-ai-controller").exists());
    assert!(alive(pid), "the controller still runs");
    ctx.run(["status"]).success();

    // --yes: the controller is stopped first, then everything goes.
    let out = ctx.run(["uninstall", "--purge", "--yes", "--json"]);
    out.success();
    let doc = out.json();
    assert_eq!(doc["stoppedController"], serde_json::json!(pid), "{doc}");
    assert!(!alive(pid), "the background controller was stopped");
    assert!(!config.exists());
    assert!(!home.exists());
}

#[test]
fn purge_refuses_while_a_foreground_controller_runs_from_the_home() {
    let mut server = crate::serve_support::Server::start();
    let out = server.ctx.run(["uninstall", "--purge", "--yes"]);
    out.expect_code(2);
    assert!(out.stderr.contains("stop it first"), "{}", out.stderr);
    assert!(server.alive());
    assert!(server.config.is_file(), "nothing was removed");
    assert!(server.home.join("controller.db").is_file());
}
