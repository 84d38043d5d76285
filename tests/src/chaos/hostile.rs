//! Issue 15's hostile cases as measured suites (figures for docs/performance.md's
//! reliability table):
//!
//! - `flood`: 1,000 idle unauthenticated connections held, then 9,000 more
//!   connection attempts, while `status --json` is run again and again; every
//!   status must exit 0 within 1 s, and every connection the server closes
//!   must get an explicit `limit_reached` frame;
//! - `revoke`: a silent owner-wide subscriber whose session is revoked (and
//!   one whose session expires) while turns stream; no `journal.event` may
//!   follow the subscription's `journal.ended` notice;
//! - `disk-full`: the controller home on a small tmpfs (needs root), filled
//!   mid-turn; `status` must name `disk_full`, and after space returns the
//!   turn must settle and a new turn complete without a restart.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use lapis_protocol::client::{Client, Credential};
use serde_json::{Value, json};

use super::Summary;
use crate::bench::rig::{OWNER, Rig, fixture_agent, run_ok, wait_turns};

/// `flood`: see the module docs. `idle` held, `attempts` in total.
pub(crate) fn flood(idle: usize, attempts: usize) -> Result<Summary> {
    let mut summary = Summary {
        suite: "flood",
        ..Summary::default()
    };
    let mut rig = Rig::new(1, json!({}), json!({}))?;
    rig.start()?;
    // The CLI's session exists (as for any user who ran it before).
    run_ok(&rig.ctx, &rig.bin, &["status", "--json"])?;
    let socket = rig.socket();
    let mut held = Vec::with_capacity(idle);
    let mut connect_errors = 0usize;
    for _ in 0..idle {
        match UnixStream::connect(&socket) {
            Ok(s) => held.push(s),
            Err(_) => connect_errors += 1,
        }
    }
    let rest = attempts.saturating_sub(idle);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let socket = socket.clone();
            let n = rest / 4 + usize::from(w < rest % 4);
            std::thread::spawn(move || {
                let (mut ok, mut err) = (0usize, 0usize);
                for _ in 0..n {
                    match UnixStream::connect(&socket) {
                        Ok(_) => ok += 1,
                        Err(_) => err += 1,
                    }
                }
                (ok, err)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let started = Instant::now();
    while !workers.iter().all(|w| w.is_finished()) || latencies.len() < 10 {
        let t = Instant::now();
        let out = rig
            .ctx
            .output(rig.ctx.command_for(&rig.bin, ["status", "--json"]));
        let took = t.elapsed();
        if out.code != Some(0) {
            summary.violations.push(format!(
                "status exited {:?}: {}",
                out.code,
                out.stderr.trim()
            ));
        } else if took > Duration::from_secs(1) {
            summary
                .violations
                .push(format!("status took {} ms", took.as_millis()));
        }
        latencies.push(took);
        if started.elapsed() > Duration::from_secs(300) {
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (mut ok, mut err) = (0, 0);
    for w in workers {
        let (o, e) = w.join().expect("flood worker");
        ok += o;
        err += e;
    }
    // Every held connection the server closed must have been told why.
    let (mut told, mut silent, mut open) = (0usize, 0usize, 0usize);
    for s in &held {
        s.set_read_timeout(Some(Duration::from_millis(200)))?;
        let mut line = String::new();
        match BufReader::new(s).read_line(&mut line) {
            Ok(0) => silent += 1,
            Ok(_) => {
                let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                if v["error"]["data"]["code"] == "limit_reached" {
                    told += 1;
                } else {
                    summary.violations.push(format!("unexpected frame {line}"));
                }
            }
            Err(_) => open += 1,
        }
    }
    if silent > 0 {
        summary
            .violations
            .push(format!("{silent} connections closed without a frame"));
    }
    latencies.sort();
    let max = latencies.last().copied().unwrap_or_default();
    let median = latencies[latencies.len() / 2];
    summary.iterations = idle + rest;
    summary.faults = told;
    summary.detail = format!(
        "{} attempts ({} accepted by the kernel, {} refused at connect); of {} held idle: {} closed with limit_reached, {} still open; status --json x{}: median {} ms, max {} ms",
        idle + rest,
        held.len() + ok,
        connect_errors + err,
        held.len(),
        told,
        open,
        latencies.len(),
        median.as_millis(),
        max.as_millis()
    );
    Ok(summary)
}

fn client(rig: &Rig, app: &str) -> Result<Client> {
    Ok(Client::open(
        &rig.socket(),
        Credential::Token {
            token: OWNER.into(),
            application: app.into(),
        },
    )?)
}

/// Reads a silent subscriber until it has been quiet for `quiet`; returns
/// (events before the ended notice, events after it, whether it came).
fn watch(c: &mut Client, quiet: Duration) -> Result<(usize, usize, bool)> {
    let (mut before, mut after, mut ended) = (0, 0, false);
    while let Some(n) = c.next_notification(Some(quiet))? {
        match n.method.as_str() {
            "journal.event" if ended => after += 1,
            "journal.event" => before += 1,
            "journal.ended" => ended = true,
            _ => {}
        }
    }
    Ok((before, after, ended))
}

/// `revoke`: see the module docs; `turns` streaming turns per case.
pub(crate) fn revoke(turns: usize) -> Result<Summary> {
    let mut summary = Summary {
        suite: "revoke",
        ..Summary::default()
    };
    let agent =
        fixture_agent().ok_or_else(|| anyhow::anyhow!("the fixture-agent binary is missing"))?;
    let mut rig = Rig::new(
        1,
        json!({ "stream": { "command": agent, "args": ["--chunks", "50"] } }),
        json!({ "sessionTtlSeconds": 4 }),
    )?;
    rig.start()?;
    let mut figures = Vec::new();
    for case in ["revoked", "expired"] {
        let app = format!("victim-{case}");
        let mut victim = client(&rig, &app)?;
        let session = victim.session().map(|s| s.id.clone()).unwrap_or_default();
        victim.journal_subscribe(None, None)?;
        let mut actor = client(&rig, &app)?;
        let thread = actor.threads_create(
            &rig.workspaces[0],
            "stream",
            lapis_protocol::ApprovalPolicy::AllowAll,
            None,
        )?;
        let mut ids = Vec::new();
        for i in 0..turns / 2 {
            ids.push(
                actor
                    .turns_submit(&thread.id, &format!("{case}-a{i}"), "go")?
                    .id,
            );
        }
        if case == "revoked" {
            client(&rig, "admin")?.sessions_revoke(Some(&session))?;
        } else {
            std::thread::sleep(Duration::from_secs(5));
        }
        // The session's own token issues a fresh session that keeps the
        // thread busy after the end.
        let mut fresh = client(&rig, &app)?;
        for i in 0..turns - turns / 2 {
            ids.push(
                fresh
                    .turns_submit(&thread.id, &format!("{case}-b{i}"), "go")?
                    .id,
            );
        }
        wait_turns(&mut fresh, &ids, Duration::from_secs(300))?;
        let (before, after, ended) = watch(&mut victim, Duration::from_secs(2))?;
        if !ended {
            summary
                .violations
                .push(format!("{case}: no journal.ended notice"));
        }
        if after > 0 {
            summary
                .violations
                .push(format!("{case}: {after} events after journal.ended"));
        }
        summary.iterations += ids.len();
        figures.push(format!(
            "{case}: {before} events before the notice, {after} after"
        ));
    }
    summary.detail = figures.join("; ");
    Ok(summary)
}

/// `disk-full`: see the module docs.
pub(crate) fn disk_full() -> Result<Summary> {
    let mut summary = Summary {
        suite: "disk-full",
        ..Summary::default()
    };
    let agent =
        fixture_agent().ok_or_else(|| anyhow::anyhow!("the fixture-agent binary is missing"))?;
    let chunk = "x".repeat(4000);
    let mut rig = Rig::new(
        1,
        json!({
            "big": { "command": agent, "args": ["--chunks", "500", "--chunk-text", chunk] },
            "small": { "command": agent, "args": ["--chunks", "2"] },
        }),
        json!({}),
    )?;
    let mount = rig.ctx.home().join(".lapis");
    std::fs::create_dir_all(&mount)?;
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=6291456,mode=0700", "tmpfs"])
        .arg(&mount)
        .status()?;
    if !mounted.success() {
        bail!("mounting a tmpfs needs root (CAP_SYS_ADMIN)");
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mount.clone());
    rig.start()?;
    run_ok(&rig.ctx, &rig.bin, &["status", "--json"])?;
    let mut c = rig.client()?;
    // Full retention: the agent's output is written to the disk.
    let created = c.call_value(
        "threads.create",
        json!({ "workspaceId": rig.workspaces[0], "provider": "big", "retention": "full" }),
    )?;
    let thread_id = created["thread"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // Fill the file system, leaving 192 KiB.
    let filler = mount.join("filler");
    {
        let mut f = std::fs::File::create(&filler)?;
        let block = vec![0u8; 64 * 1024];
        while f.write_all(&block).is_ok() {}
        let len = f.metadata()?.len();
        f.set_len(len.saturating_sub(192 * 1024))?;
    }
    let turn = c.turns_submit(&thread_id, "full-1", "stream")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut named = false;
    while Instant::now() < deadline {
        let out = run_ok(&rig.ctx, &rig.bin, &["status", "--json"])?;
        if out.json()["storageFault"] == "disk_full" {
            named = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if !named {
        summary
            .violations
            .push("status never named disk_full".into());
    }
    let mut log = String::new();
    std::fs::File::open(rig.ctx.home().join("serve.log"))?.read_to_string(&mut log)?;
    if !log.contains("disk_full") {
        summary
            .violations
            .push("the log never named disk_full".into());
    }
    let freed = Instant::now();
    std::fs::remove_file(&filler)?;
    let state = wait_turns(
        &mut c,
        std::slice::from_ref(&turn.id),
        Duration::from_secs(60),
    )?;
    let settle_ms = freed.elapsed().as_millis();
    if state[0] == "submission_unknown" {
        c.turns_resolve(&turn.id, lapis_protocol::ResolveAs::Failed, true)?;
    }
    let small = c.threads_create(
        &rig.workspaces[0],
        "small",
        lapis_protocol::ApprovalPolicy::AllowAll,
        None,
    )?;
    let next = c.turns_submit(&small.id, "full-2", "hi")?;
    let next_state = wait_turns(&mut c, &[next.id], Duration::from_secs(60))?;
    if next_state[0] != "completed" {
        summary
            .violations
            .push(format!("the next turn ended {}", next_state[0]));
    }
    summary.iterations = 1;
    summary.faults = 1;
    summary.detail = format!(
        "turn settled {} {settle_ms} ms after space returned; next turn {}; same serve pid {}",
        state[0],
        next_state[0],
        rig.pid().unwrap_or(0)
    );
    Ok(summary)
}
