//! The figure of issue 45: `status` over ssh next to `ssh host true` on
//! loopback, medians of alternating runs. Not a check (no threshold): run
//! it by hand, with the release binary for the shipped cost:
//!
//! ```text
//! cargo build --release -p lapis-ai-controller
//! LAPIS_BIN=target/release/lapis-ai-controller \
//!   cargo test -p lapis-e2e --test e2e ssh::bench -- --ignored --nocapture
//! ```

use std::process::Command;
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
