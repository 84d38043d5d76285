//! Readiness notification (`Type=notify`): `serve` tells the service manager
//! through a real datagram socket (`NOTIFY_SOCKET`) when it accepts
//! connections, when it reloads and when it stops; the systemctl stand-in
//! starts the installed unit the same way and waits for `READY=1`.

use std::os::unix::net::{UnixDatagram, UnixStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use lapis_e2e::TestContext;
use serde_json::json;

use crate::install_support::{launcher, use_systemctl_standin};
use crate::serve_support::write_config;

/// The next notification, as its lines. The read timeout only guards
/// against a hang; nothing here depends on timing.
fn next(sock: &UnixDatagram) -> Vec<String> {
    let mut buf = [0u8; 4096];
    let n = sock
        .recv(&mut buf)
        .expect("a notification within the guard");
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn serve_notifies_ready_once_the_socket_answers_then_reloading_and_stopping() {
    let ctx = TestContext::new();
    write_config(&ctx, json!({}), json!({}));
    let notify_path = ctx.home().join("notify.sock");
    let sock = UnixDatagram::bind(&notify_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let socket = ctx.home().join(".lapis/ai-controller/controller.sock");
    let mut cmd = ctx.command(["serve"]);
    cmd.env("NOTIFY_SOCKET", &notify_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();

    assert_eq!(next(&sock), ["READY=1"]);
    // READY=1 comes after the socket is listening: a connect succeeds at
    // once, without any retry, and the controller answers.
    UnixStream::connect(&socket).expect("socket accepts when READY=1 arrives");
    let status = ctx.run(["status", "--json"]);
    assert_eq!(status.success().json()["protocol"], "lapis-ai-controller/1");

    // SIGHUP (the unit's ExecReload) never kills the controller: it reports
    // the reload and is ready again.
    let pid = child.id().to_string();
    Command::new("kill").args(["-HUP", &pid]).status().unwrap();
    assert_eq!(next(&sock), ["RELOADING=1"]);
    let after = next(&sock);
    assert_eq!(after[0], "READY=1", "{after:?}");
    assert!(child.try_wait().unwrap().is_none(), "SIGHUP ended serve");
    ctx.run(["status", "--json"]).success();

    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert_eq!(next(&sock), ["STOPPING=1"]);
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit}");
}

#[test]
fn serve_without_notify_socket_starts_as_before() {
    // No NOTIFY_SOCKET (run by hand): nothing to notify, nothing fails.
    let ctx = TestContext::new();
    write_config(&ctx, json!({}), json!({}));
    let mut cmd = ctx.command(["serve"]);
    cmd.env_remove("NOTIFY_SOCKET")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let socket = ctx.home().join(".lapis/ai-controller/controller.sock");
    let mut up = false;
    for _ in 0..600 {
        if UnixStream::connect(&socket).is_ok() {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(up, "serve never listened:\n{log}");
    assert!(out.status.success(), "{log}");
    assert!(!log.contains("cannot notify"), "{log}");
}

#[test]
fn installed_notify_unit_is_ready_when_restart_returns_and_stops_through_sigterm() {
    let mut ctx = TestContext::new();
    let log = use_systemctl_standin(&mut ctx);
    ctx.run(["install", "--json"]).success();
    // The stand-in's restart returned only after READY=1 reached its
    // NOTIFY_SOCKET; install then saw the controller answer.
    let record = log.with_extension("log.notify.log");
    let notes = std::fs::read_to_string(&record).unwrap();
    assert!(notes.lines().any(|l| l == "READY=1"), "{notes}");
    let argv = std::fs::read_to_string(log.with_extension("log.argv")).unwrap();
    assert_eq!(
        argv.lines().next(),
        Some(launcher(&ctx).display().to_string().as_str())
    );

    // A stop signals the controller alone (KillMode=mixed), which says so
    // and exits.
    let pid = std::fs::read_to_string(log.with_extension("log.pid")).unwrap();
    let systemctl = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("stand-ins/systemctl");
    let stop = ctx.output(ctx.command_for(
        &systemctl,
        ["--user", "stop", "lapis-ai-controller.service"],
    ));
    stop.success();
    let notes = std::fs::read_to_string(&record).unwrap();
    assert!(notes.lines().any(|l| l == "STOPPING=1"), "{notes}");
    let gone = Command::new("kill")
        .args(["-0", pid.trim()])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!gone.success(), "the controller still runs after stop");
}
