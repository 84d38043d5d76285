//! A `journal tail --follow` over ssh whose connection is cut mid-follow
//! says so and resumes after its cursor (nothing missed, nothing twice);
//! while it runs, no process on either side has the token in its argv or
//! environment.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;

use super::{Remote, cmdline, parent, pids};
use crate::serve_support::OWNER;
use lapis_e2e::wait::eventually;

/// The `dial-stdio` processes of the remote side (their argv names it).
fn dial_stdio_pids() -> Vec<u32> {
    pids()
        .into_iter()
        .filter(|p| {
            let c = cmdline(*p);
            c.contains("lapis-ai-controller dial-stdio") && !c.contains("ssh ")
        })
        .collect()
}

/// A turn's final state event.
fn finished(line: &str) -> bool {
    line.contains("\"turn_state\"") && line.contains("\"completed\"")
}

#[test]
fn a_follow_over_ssh_reports_a_dropped_connection_and_resumes() {
    let Some(remote) = Remote::start(json!({})) else {
        return;
    };
    let thread = remote.server.cli_thread("echo");
    let mut cmd = remote
        .local
        .command(["journal", "tail", &thread, "--follow", "--json"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let (lines, got) = mpsc::channel::<String>();
    let out = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for l in out.lines().map_while(Result::ok) {
            let _ = lines.send(l);
        }
    });
    let (errs, err_got) = mpsc::channel::<String>();
    let err = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for l in err.lines().map_while(Result::ok) {
            let _ = errs.send(l);
        }
    });
    let next = |what: &str| {
        got.recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no line: {what}"))
    };
    let seq = |line: &str| -> u64 {
        serde_json::from_str::<serde_json::Value>(line).unwrap()["event"]["threadSeq"]
            .as_u64()
            .unwrap()
    };
    let first = next("the replay");
    assert!(first.contains("thread_created"), "{first}");

    // No token in the argv or environment of any process while the
    // relay runs (the CLI here, ssh, sshd's session, dial-stdio, serve).
    let relay = eventually("the remote dial-stdio", || {
        dial_stdio_pids().first().copied()
    });
    for pid in pids() {
        let argv = cmdline(pid);
        assert!(!argv.contains(OWNER), "token in the argv of {pid}: {argv}");
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&env).contains(OWNER),
            "token in the environment of {pid} ({argv})"
        );
    }

    // One turn's events arrive live.
    remote
        .server
        .ctx
        .run(["turns", "submit", &thread, "--prompt", "before"])
        .success();
    let mut seen = vec![seq(&first)];
    loop {
        let l = next("the first turn");
        seen.push(seq(&l));
        if finished(&l) {
            break;
        }
    }
    // Cut the connection: kill the sshd session process that serves it.
    let session = {
        let mut p = parent(relay).unwrap();
        while !cmdline(p).starts_with("sshd") {
            p = parent(p).unwrap();
        }
        assert_ne!(p, remote.sshd.pid(), "the listener itself");
        p
    };
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(session as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let mut said = String::new();
    while !said.contains("resuming after") {
        let l = err_got
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no resume said; stderr so far:\n{said}"));
        said.push_str(&l);
        said.push('\n');
    }
    assert!(
        said.contains("connection to the controller was lost"),
        "{said}"
    );
    // A new relay, and the next turn's events follow with no gap or
    // repeat.
    eventually("a new dial-stdio", || {
        dial_stdio_pids().iter().any(|p| *p != relay).then_some(())
    });
    remote
        .server
        .ctx
        .run(["turns", "submit", &thread, "--prompt", "after"])
        .success();
    loop {
        let l = next("the second turn");
        seen.push(seq(&l));
        if finished(&l) {
            break;
        }
        if seen.len() > 200 {
            panic!("no end of the second turn: {seen:?}");
        }
    }
    assert!(
        seen.windows(2).all(|w| w[1] == w[0] + 1),
        "gap or repeat: {seen:?}"
    );
    let _ = child.kill();
    let _ = child.wait();
}
