//! A live wait with the real CLI: Ctrl-C (SIGINT sent to the CLI process)
//! cancels the watched turn on the first press and stops watching on the
//! second; `--timeout` bounds the turn; on a terminal a spinner shows the
//! turn's state and elapsed time on stderr.

use std::io::Read;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::cli_permissions::{finish, fixture};
use crate::serve_support::Server;

/// Polls the thread's only turn until `ready` holds for it.
fn turn_until(server: &Server, thread: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = server
            .ctx
            .run(["turns", "list", "--thread", thread, "--json"])
            .json();
        if let Some(t) = list["turns"].as_array().and_then(|a| a.first())
            && ready(t)
        {
            return t.clone();
        }
        assert!(
            Instant::now() < deadline,
            "the turn never got there: {list}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Dispatched to the agent (a hanging agent never reports `running`).
fn in_flight(t: &Value) -> bool {
    t["state"] == "dispatched" || t["state"] == "running"
}

fn interrupt(child: &Child) {
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
}

#[test]
fn the_first_ctrl_c_cancels_the_watched_turn() {
    let server = Server::start_full(json!({}), json!({ "slow": fixture(&["--hang"]) }));
    let t = server.cli_thread("slow");
    let child = server
        .ctx
        .command(["turns", "submit", &t, "--prompt", "go", "--wait"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    turn_until(&server, &t, in_flight);
    interrupt(&child);
    let (code, out, err) = finish(child);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(err.contains("Ctrl-C: cancelling turn turn_"), "{err}");
    assert!(err.contains("ended cancelled"), "{err}");
    let turn = turn_until(&server, &t, |_| true);
    assert_eq!(turn["state"], "cancelled", "{turn}");
}

#[test]
fn a_second_ctrl_c_stops_watching_and_says_how_to_follow_again() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("agent.pid");
    let server = Server::start_full(
        json!({}),
        json!({ "stubborn": fixture(&["--hang", "--ignore-cancel", "--pidfile", pidfile.to_str().unwrap()]) }),
    );
    let t = server.cli_thread("stubborn");
    let child = server
        .ctx
        .command(["ask", "go", "--provider", "stubborn", "--dir"])
        .arg(&server.project)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    turn_until(&server, &t, in_flight);
    interrupt(&child);
    // The first press asked for the cancel; the agent ignores it.
    turn_until(&server, &t, |t| t["cancelRequested"] == true);
    interrupt(&child);
    let (code, out, err) = finish(child);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(err.contains("Ctrl-C: cancelling turn"), "{err}");
    assert!(err.contains("stopped watching turn turn_"), "{err}");
    assert!(
        err.contains(&format!("lapis-ai-controller journal tail {t} --follow")),
        "{err}"
    );
    // Nothing else happened to the turn: it is still in flight.
    let turn = turn_until(&server, &t, |_| true);
    assert!(in_flight(&turn), "{turn}");
    // The test ends with the turn in flight: the harness takes the agent,
    // which ignores every cancel, down with the server.
    let agent = crate::acp::read_pid(&pidfile);
    assert!(crate::acp::alive(agent));
    drop(server);
    lapis_e2e::wait::until("the stubborn agent to be gone", || {
        !crate::acp::alive(agent)
    });
}

/// Submits a turn on a new `slow` thread and waits on a terminal (`script`)
/// with `TERM=term`, colour off unless `colour`, until `--timeout 2s`
/// ends it; returns the thread and what the terminal showed.
fn on_a_terminal(server: &Server, term: &str, colour: bool) -> (String, String) {
    let t = server.cli_thread("slow");
    let bin = lapis_e2e::TestContext::bin();
    let line = format!(
        "{} turns submit {t} --prompt go --wait --timeout 2s",
        bin.display()
    );
    let mut cmd = server.ctx.command_for(
        std::path::Path::new("script"),
        ["-qec", line.as_str(), "/dev/null"],
    );
    cmd.env("TERM", term);
    if colour {
        cmd.env_remove("NO_COLOR");
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut terminal = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut terminal)
        .unwrap();
    let status = child.wait().unwrap();
    let text = String::from_utf8_lossy(&terminal).into_owned();
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(text.contains("error: turn turn_"), "{text}");
    (t, text)
}

#[test]
fn on_a_terminal_a_spinner_shows_the_state_and_timeout_bounds_the_turn() {
    let server = Server::start_full(json!({}), json!({ "slow": fixture(&["--hang"]) }));
    // NO_COLOR (the test context's default): the spinner, undimmed.
    let (t, text) = on_a_terminal(&server, "xterm", false);
    assert!(text.contains(" running "), "{text}");
    assert!(text.contains("s\x1b[K"), "{text}");
    assert!(FRAMES_SHOWN.iter().any(|f| text.contains(f)), "{text}");
    assert!(!text.contains("\x1b[2m"), "{text:?}");
    // The spinner line is erased before the last line is written.
    assert!(text.contains("\r\x1b[Kerror: turn turn_"), "{text:?}");
    let turn = turn_until(&server, &t, |_| true);
    assert_eq!(turn["maxTurnSeconds"], 2, "{turn}");
    assert_eq!(turn["outcome"], "deadline_exceeded", "{turn}");
    // With colour the spinner is dimmed.
    let (_, text) = on_a_terminal(&server, "xterm", true);
    assert!(
        FRAMES_SHOWN
            .iter()
            .any(|f| text.contains(&format!("\x1b[2m{f}"))),
        "{text:?}"
    );
    // A dumb terminal cannot redraw a line: no spinner, no escape at all.
    let (_, text) = on_a_terminal(&server, "dumb", true);
    assert!(!FRAMES_SHOWN.iter().any(|f| text.contains(f)), "{text:?}");
    assert!(!text.contains('\x1b'), "{text:?}");
}

const FRAMES_SHOWN: [&str; 3] = ["⠋ running", "⠙ running", "⠹ running"];
