//! Running without a service manager: `serve --background` detaches and
//! exits 0 only once `status` answers; `stop` ends it, and never signals a
//! process that is not this controller (a stale pid file, a foreground
//! `serve`).

use std::process::{Command, Stdio};

use serde_json::json;

use crate::serve_support::{Server, write_config};
use lapis_e2e::TestContext;
use lapis_e2e::wait::eventually;

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

#[test]
fn serve_background_answers_before_it_returns_and_stop_ends_it() {
    let ctx = TestContext::new();
    write_config(&ctx, json!({}), json!({}));
    let home = ctx.home().join(".lapis/ai-controller");
    let started = ctx.run(["serve", "--background"]);
    started.success();
    let pid: u32 = started.stdout.trim().parse().expect("the pid on stdout");
    assert!(
        started.stderr.contains("runs in the background"),
        "{}",
        started.stderr
    );
    assert!(
        started.stderr.contains("serve.log") && started.stderr.contains(" stop`"),
        "{}",
        started.stderr
    );
    // Exit 0 meant `status` answered, from this very process.
    let status = ctx.run(["status", "--json"]);
    status.success();
    assert_eq!(status.json()["pid"], json!(pid));
    // The pid file names the process and its identity: start time and
    // executable, which `stop` checks before it signals.
    let recorded = std::fs::read_to_string(home.join("serve.pid")).unwrap();
    let lines: Vec<&str> = recorded.lines().collect();
    assert_eq!(lines.len(), 3, "{recorded}");
    assert_eq!(lines[0], pid.to_string());
    assert!(lines[1].parse::<u64>().is_ok(), "{recorded}");
    assert_eq!(
        std::path::Path::new(lines[2]),
        std::fs::read_link(format!("/proc/{pid}/exe")).unwrap()
    );
    use std::os::unix::fs::PermissionsExt;
    for file in ["serve.pid", "serve.log"] {
        let mode = std::fs::metadata(home.join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }
    // `doctor` only warns about the missing service unit while the socket
    // answers without one.
    let doc = ctx.run(["doctor", "--json"]).json();
    let unit = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "unit")
        .unwrap()
        .clone();
    assert_eq!(unit["status"], "warn", "{doc}");
    assert!(
        unit["summary"]
            .as_str()
            .unwrap()
            .contains("answers on its socket without it"),
        "{doc}"
    );
    // Its advice is not to start another by hand.
    let fix = unit["fix"].as_str().unwrap();
    assert!(
        !fix.contains("by hand") && fix.contains("nothing to do while it runs"),
        "{doc}"
    );
    // `logs` reads the background controller's own log, not a journal.
    let log = std::fs::read_to_string(home.join("serve.log")).unwrap();
    let last = log.lines().last().expect("serve.log has lines");
    let logs = ctx.run(["logs", "-n", "1"]);
    logs.success();
    assert_eq!(logs.stdout, format!("{last}\n"), "{}", logs.stderr);
    // A second start finds it running and starts nothing.
    let again = ctx.run(["serve", "--background"]);
    again.success();
    assert!(
        again
            .stderr
            .contains(&format!("already running (pid {pid})")),
        "{}",
        again.stderr
    );
    // `stop` ends it and removes the pid file.
    let stopped = ctx.run(["stop"]);
    stopped.success();
    assert!(
        stopped
            .stderr
            .contains(&format!("stopped the controller (pid {pid})")),
        "{}",
        stopped.stderr
    );
    assert!(!alive(pid));
    assert!(!home.join("serve.pid").exists());
    ctx.run(["status"]).expect_code(3);
    // Nothing runs: `stop` says so and succeeds.
    let idle = ctx.run(["stop"]);
    idle.success();
    assert!(
        idle.stderr.contains("no background controller is running"),
        "{}",
        idle.stderr
    );
}

#[test]
fn stop_never_signals_a_process_that_is_not_this_controller() {
    let ctx = TestContext::new();
    write_config(&ctx, json!({}), json!({}));
    let home = ctx.home().join(".lapis/ai-controller");
    std::fs::create_dir_all(&home).unwrap();
    // A pid file naming an unrelated live process.
    let mut other = Command::new("sleep")
        .arg("300")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    std::fs::write(home.join("serve.pid"), format!("{}\n", other.id())).unwrap();
    let out = ctx.run(["stop"]);
    out.success();
    assert!(
        out.stderr.contains("stale pid file") && out.stderr.contains("nothing was stopped"),
        "{}",
        out.stderr
    );
    assert!(alive(other.id()), "an unrelated process was signalled");
    assert!(!home.join("serve.pid").exists());
    // A pid file of a gone process is stale too.
    other.kill().unwrap();
    other.wait().unwrap();
    std::fs::write(home.join("serve.pid"), format!("{}\n", other.id())).unwrap();
    let out = ctx.run(["stop"]);
    out.success();
    assert!(out.stderr.contains("stale pid file"), "{}", out.stderr);
}

/// `stop` of one instance whose pid file names another instance's running
/// controller signals nothing: this home's socket does not answer with that
/// pid, and the pid file's start time and executable (absent, or not that
/// process's) do not name it.
#[test]
fn stop_never_signals_another_instances_controller() {
    let mut server = Server::start();
    let other_home = server.ctx.home().join("other-home");
    std::fs::create_dir_all(&other_home).unwrap();
    std::fs::write(other_home.join("controller.home"), "marker").unwrap();
    let exe = std::fs::read_link(format!("/proc/{}/exe", server.pid())).unwrap();
    for record in [
        format!("{}\n", server.pid()),
        format!("{}\n1\n{}\n", server.pid(), exe.display()),
        format!("{}\n{}\n/bin/sh\n", server.pid(), start_of(server.pid())),
    ] {
        std::fs::write(other_home.join("serve.pid"), &record).unwrap();
        let out = server
            .ctx
            .run(["stop", "--home", other_home.to_str().unwrap()]);
        out.success();
        assert!(
            out.stderr.contains("stale pid file") && out.stderr.contains("nothing was stopped"),
            "{record:?}: {}",
            out.stderr
        );
        assert!(
            server.alive(),
            "{record:?}: another instance's controller was signalled"
        );
        assert!(!other_home.join("serve.pid").exists());
    }
    server.finish(&[], &[]);
}

/// A process's start time (`/proc/PID/stat` field 22).
fn start_of(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit_once(')').unwrap().1;
    rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

#[test]
fn stop_leaves_a_controller_it_did_not_start_alone() {
    let mut server = Server::start();
    let out = server.ctx.run(["stop"]);
    out.expect_code(2);
    assert!(
        out.stderr
            .contains("was not started with `serve --background`"),
        "{}",
        out.stderr
    );
    assert!(server.alive());
    // A pid file naming the very process that answers `status` does stop it.
    std::fs::write(server.home.join("serve.pid"), format!("{}\n", server.pid())).unwrap();
    server.ctx.run(["stop"]).success();
    eventually("the server to exit", || (!server.alive()).then_some(()));
}

#[test]
fn serve_background_refuses_a_directory_that_is_not_a_controller_home() {
    let ctx = TestContext::new();
    write_config(&ctx, json!({}), json!({}));
    let project = ctx.home().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("main.rs"), "fn main() {}\n").unwrap();
    let out = ctx.run(["serve", "--background", "--home", project.to_str().unwrap()]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("is not a controller home"),
        "{}",
        out.stderr
    );
    assert!(!project.join("serve.log").exists() && !project.join("serve.pid").exists());
}

#[test]
fn install_without_a_service_manager_starts_in_the_background_when_asked() {
    let ctx = TestContext::new();
    // No systemctl on PATH: no service manager answers.
    let empty = ctx.home().join("empty-path");
    std::fs::create_dir(&empty).unwrap();
    let mut cmd = ctx.command(["install", "--start", "background", "--json"]);
    cmd.env("PATH", &empty);
    let out = ctx.output(cmd);
    out.success();
    let doc = out.json();
    assert_eq!(doc["service"]["status"], "background", "{doc}");
    let pid = doc["service"]["pid"].as_u64().expect("pid");
    assert!(
        doc["service"]["stop"].as_str().unwrap().ends_with(" stop"),
        "{doc}"
    );
    assert!(out.stderr.contains("no service manager"), "{}", out.stderr);
    let status = ctx.run(["status", "--json"]);
    status.success();
    assert_eq!(status.json()["pid"], json!(pid));
    ctx.run(["stop"]).success();
    ctx.run(["status"]).expect_code(3);
}

#[test]
fn without_a_service_unit_not_running_names_serve_background() {
    let ctx = TestContext::new();
    ctx.run(["install", "--no-service"]).success();
    // `ask` (and every client command) says how to start it detached.
    let out = ctx.run(["ask", "hello", "--dir", ctx.home().to_str().unwrap()]);
    out.expect_code(3);
    assert!(
        out.stderr
            .contains("the controller is not running: start it with `")
            && out.stderr.contains(" serve --config ")
            && out
                .stderr
                .contains(" --background` (no service unit is installed"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("systemctl"), "{}", out.stderr);
    // `status` too, first.
    let out = ctx.run(["status"]);
    out.expect_code(3);
    let first = out.stderr.lines().next().unwrap_or_default().to_owned();
    assert!(
        first.contains("without a service manager, start it with `")
            && first.contains(" --background`"),
        "{}",
        out.stderr
    );
    assert!(!first.contains("systemctl"), "{first}");
    // What it names works as printed.
    let printed = first
        .split("start it with `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap()
        .to_owned();
    let words: Vec<&str> = printed.split_whitespace().collect();
    let mut cmd = ctx.command_for(std::path::Path::new(words[0]), &words[1..]);
    cmd.stdin(Stdio::null());
    let started = ctx.output(cmd);
    started.success();
    ctx.run(["status"]).success();
    ctx.run(["stop"]).success();
}

/// `serve.log` is size-capped (issue 41 item 9): a log past its cap when
/// the controller starts is rotated to `serve.log.1` at the first line the
/// new controller logs, and the live log holds only what came after.
#[test]
fn serve_background_rotates_a_log_past_its_cap() {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let ctx = TestContext::new();
    write_config(&ctx, json!({}), json!({}));
    let home = ctx.home().join(".lapis/ai-controller");
    ctx.run(["serve", "--background"]).success();
    ctx.run(["stop"]).success();
    // What weeks of running leave: past the 10 MiB cap.
    let old = "an old line of the controller's log\n".repeat(300_000);
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(home.join("serve.log"))
        .unwrap();
    log.write_all(old.as_bytes()).unwrap();
    drop(log);
    ctx.run(["serve", "--background"]).success();
    ctx.run(["stop"]).success();
    let live = std::fs::read_to_string(home.join("serve.log")).unwrap();
    assert!(
        live.len() < 1024 * 1024 && !live.contains("an old line") && !live.is_empty(),
        "{} bytes",
        live.len()
    );
    let rotated = home.join("serve.log.1");
    let kept = std::fs::metadata(&rotated).unwrap();
    assert!(kept.len() >= old.len() as u64, "{}", kept.len());
    assert_eq!(kept.permissions().mode() & 0o777, 0o600);
    assert!(!home.join("serve.log.2").exists());
    // `logs` reads the live log.
    let logs = ctx.run(["logs", "-n", "5"]);
    logs.success();
    assert!(!logs.stdout.contains("an old line"), "{}", logs.stdout);
}
