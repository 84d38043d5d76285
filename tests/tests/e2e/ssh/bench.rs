//! The figures of issue 45: `status` over ssh next to `ssh host true` on
//! loopback, medians of alternating runs, and a `watch` redraw over ssh
//! next to a local one (both views open on one controller in tmux; the
//! time from a turn's submission, committed when `turns.submit` answers,
//! to each pane showing its row). Not checks (no threshold): run them by
//! hand, with the release binary for the shipped cost:
//!
//! ```text
//! cargo build --release -p lapis-ai-controller
//! LAPIS_BIN=target/release/lapis-ai-controller \
//!   cargo test -p lapis-e2e --test e2e ssh::bench -- --ignored --nocapture
//! ```

use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::Remote;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[test]
#[ignore = "a figure, run by hand (see the module docs)"]
fn status_over_ssh_next_to_ssh_true() {
    let Some(remote) = Remote::start(json!({})) else {
        return;
    };
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(31);
    let cfg = remote.sshd.client_config.clone();
    let port = remote.sshd.port.to_string();
    let mut ssh_true = Vec::new();
    let mut status = Vec::new();
    let mut local = Vec::new();
    remote.local.run(["status"]).success();
    for _ in 0..runs {
        let t = Instant::now();
        let out = Command::new("ssh")
            .arg("-F")
            .arg(&cfg)
            .args(["-p", &port, "127.0.0.1", "true"])
            .output()
            .unwrap();
        ssh_true.push(t.elapsed());
        assert!(out.status.success(), "{out:?}");
        let t = Instant::now();
        let out = remote.local.command(["status"]).output().unwrap();
        status.push(t.elapsed());
        assert!(out.status.success(), "{out:?}");
        let t = Instant::now();
        let out = remote.server.ctx.command(["status"]).output().unwrap();
        local.push(t.elapsed());
        assert!(out.status.success(), "{out:?}");
    }
    let (a, b, c) = (median(ssh_true), median(status), median(local));
    println!(
        "runs {runs}: `ssh host true` {:.2} ms, `status` over ssh {:.2} ms ({:.2}x), `status` on the host {:.2} ms",
        a.as_secs_f64() * 1e3,
        b.as_secs_f64() * 1e3,
        b.as_secs_f64() / a.as_secs_f64(),
        c.as_secs_f64() * 1e3
    );
}

/// Polls `tmux`'s pane for each (start, text) it is sent until the text
/// shows, answering the time since start.
fn pane_watcher(
    tmux: crate::cli_watch::Tmux,
) -> (
    mpsc::Sender<(Instant, String)>,
    mpsc::Receiver<Duration>,
    std::thread::JoinHandle<()>,
) {
    let (ask, asked) = mpsc::channel::<(Instant, String)>();
    let (tell, told) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        for (start, text) in asked {
            let deadline = start + Duration::from_secs(30);
            loop {
                let screen = tmux.screen();
                if screen.contains(&text) {
                    let _ = tell.send(start.elapsed());
                    // Select it (the newest is on top): the list scrolls
                    // to the selection, so the next row shows too.
                    tmux.keys(&["Up"]);
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{text} never showed; the pane shows:\n{screen}"
                );
            }
        }
        tmux.keys(&["q"]);
    });
    (ask, told, handle)
}

#[test]
#[ignore = "a figure, run by hand (see the module docs)"]
fn watch_redraw_over_ssh_next_to_a_local_one() {
    if !crate::cli_watch::have_tmux() {
        lapis_e2e::skip::skip("tmux is not installed");
        return;
    }
    let Some(remote) = Remote::start(json!({})) else {
        return;
    };
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(31);
    let server = &remote.server;
    let thread = server.cli_thread("echo");
    let scratch = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(scratch.path().join("local")).unwrap();
    std::fs::create_dir_all(scratch.path().join("remote")).unwrap();
    let here = crate::cli_watch::start_watch(&server.ctx, &scratch.path().join("local"));
    let there = crate::cli_watch::start_watch(&remote.local, &scratch.path().join("remote"));
    here.shows(&["lapis-ai-controller watch", "live"]);
    there.shows(&["lapis-ai-controller watch", "live"]);
    let (ask_here, told_here, h1) = pane_watcher(here);
    let (ask_there, told_there, h2) = pane_watcher(there);
    // The CLI's own application: both views list its threads.
    let mut client = server.client("lapis-cli");
    let (mut local, mut over_ssh, mut submit) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        let start = Instant::now();
        let turn = client
            .turns_submit(&thread, &format!("bench-{i}"), "redraw")
            .unwrap();
        submit.push(start.elapsed());
        // `turn_` and 8 hex digits: the turns list's column.
        let short: String = turn.id.chars().take(13).collect();
        ask_here.send((start, short.clone())).unwrap();
        ask_there.send((start, short)).unwrap();
        local.push(told_here.recv().unwrap());
        over_ssh.push(told_there.recv().unwrap());
        // Let both views settle (the turn completes) before the next.
        std::thread::sleep(Duration::from_millis(150));
    }
    drop((ask_here, ask_there));
    h1.join().unwrap();
    h2.join().unwrap();
    let (a, b, c) = (median(local), median(over_ssh), median(submit));
    println!(
        "runs {runs}: submit -> row shown: local `watch` {:.2} ms, `watch` over ssh {:.2} ms ({:.2}x); `turns.submit` itself {:.2} ms",
        a.as_secs_f64() * 1e3,
        b.as_secs_f64() * 1e3,
        b.as_secs_f64() / a.as_secs_f64(),
        c.as_secs_f64() * 1e3
    );
}
