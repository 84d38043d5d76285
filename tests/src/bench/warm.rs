//! Warm turns one at a time, as an application sees them: `turns.submit` on
//! an SDK connection that follows the thread, until the durable `completed`
//! event arrives. For the built-in echo agent and for the agent on the
//! official TypeScript ACP SDK (`tests/agents/ts-agent`), whose peer figures
//! are `acpx exec` (one-shot: agent started per prompt) and `acpx prompt` on
//! acpx's own persistent session (its queue owner keeps the agent warm)
//! driving the same agent; the agent alone on an open session is the floor.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lapis_e2e::ts_agent::TsAgent;
use lapis_protocol::EventKind;
use lapis_protocol::client::{Client, JournalFollower};
use serde_json::json;

use super::acpx::Acpx;
use super::table::{Table, Unit, time_ms};

/// `n` sequential warm turns on `thread` (one warm-up turn first, so its
/// agent is running): ms from sending `turns.submit` to receiving the
/// turn's `completed` event (published only after its commit).
pub(crate) fn turn_latency(
    client: &mut Client,
    thread: &str,
    tag: &str,
    n: usize,
) -> Result<Vec<f64>> {
    let mut follow = JournalFollower::start(client, Some(thread), None)?;
    let mut samples = Vec::with_capacity(n);
    for i in 0..=n {
        let started = Instant::now();
        let turn = follow.client().turns_submit(
            thread,
            &format!("{tag}-{i}"),
            &format!("bench prompt {i}: echo me back"),
        )?;
        let deadline = started + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let e = follow
                .next(Some(left))?
                .with_context(|| format!("turn {} did not complete in 60 s", turn.id))?;
            if e.kind != EventKind::TurnState || e.turn_id.as_deref() != Some(turn.id.as_str()) {
                continue;
            }
            match lapis_e2e::journal::moved_to(&e) {
                Some(lapis_protocol::TurnState::Completed) => break,
                Some(s) if s.is_terminal() || s.is_fenced() => {
                    bail!("turn {} ended {}", turn.id, s.as_str())
                }
                _ => {}
            }
        }
        if i > 0 {
            samples.push(started.elapsed().as_secs_f64() * 1e3);
        }
    }
    Ok(samples)
}

/// The agent's own time for a warm turn: one `session/prompt` exchange on
/// an agent already initialized with an open session; `n` samples after
/// one warm-up prompt.
pub(crate) fn agent_floor(mut cmd: Command, cwd: &Path, n: usize) -> Result<Vec<f64>> {
    let mut child = cmd
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().expect("piped");
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    let mut call =
        |id: u64, method: &str, params: serde_json::Value| -> Result<serde_json::Value> {
            let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            writeln!(stdin, "{msg}")?;
            loop {
                line.clear();
                anyhow::ensure!(out.read_line(&mut line)? > 0, "agent closed");
                let v: serde_json::Value = serde_json::from_str(&line)?;
                if v["id"] == id && v.get("method").is_none() {
                    anyhow::ensure!(v.get("error").is_none(), "{method}: {v}");
                    return Ok(v);
                }
            }
        };
    call(
        0,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )?;
    let s = call(1, "session/new", json!({"cwd": cwd, "mcpServers": []}))?;
    let sid = s["result"]["sessionId"].clone();
    let mut samples = Vec::with_capacity(n);
    for i in 0..=n {
        let prompt = json!({"sessionId": sid, "prompt": [{"type": "text", "text": format!("bench prompt {i}: echo me back")}]});
        let (t, r) = time_ms(|| call(2 + i as u64, "session/prompt", prompt));
        r?;
        if i > 0 {
            samples.push(t);
        }
    }
    drop(stdin);
    child.wait()?;
    Ok(samples)
}

/// What the disk under the home charges for one durable commit, with no
/// database: 9 pages of 4 KiB (about half a warm turn's WAL frames)
/// written at a rolling offset of a preallocated file, then `fdatasync`
/// (the WAL is reused in place after a checkpoint, so its size rarely
/// changes). A warm turn one at a time waits for two such commits on its
/// path (the submit's, the outcome's): twice this is the durability floor
/// under its overhead. `n` samples after one warm-up.
pub(crate) fn fsync_floor(dir: &Path, n: usize) -> Result<Vec<f64>> {
    use std::os::unix::fs::FileExt;
    const PAGE: usize = 4096;
    const PAGES: usize = 9;
    const SLOTS: u64 = 64;
    let file = tempfile::tempfile_in(dir)?;
    file.set_len(SLOTS * (PAGE * PAGES) as u64)?;
    file.sync_all()?;
    let buf = vec![0x5a_u8; PAGE];
    let mut samples = Vec::with_capacity(n);
    for i in 0..=n {
        let at = (i as u64 % SLOTS) * (PAGE * PAGES) as u64;
        let (t, r) = time_ms(|| -> std::io::Result<()> {
            for p in 0..PAGES {
                file.write_all_at(&buf, at + (p * PAGE) as u64)?;
            }
            file.sync_data()
        });
        r?;
        if i > 0 {
            samples.push(t);
        }
    }
    Ok(samples)
}

/// The TypeScript SDK agent's rows: its floor, a warm turn through serve,
/// and acpx `exec` and persistent `prompt` on the same agent.
pub(crate) fn ts_agent_rows(
    table: &mut Table,
    client: &mut Client,
    thread: &str,
    (agent, state): (&TsAgent, &Path),
    cwd: &Path,
    n: usize,
    acpx: Option<&Acpx>,
) -> Result<()> {
    let floor = "TS SDK agent alone, one prompt on an open session (warm floor, per turn)";
    table.add(
        "turns",
        floor,
        Unit::Ms,
        agent_floor(agent.command(state), cwd, n)?,
        None,
    );
    let ours = "TS SDK agent, warm turn through serve (SDK: submit -> completed event)";
    table.add(
        "turns",
        ours,
        Unit::Ms,
        turn_latency(client, thread, "ts", n)?,
        Some(floor),
    );
    let Some(acpx) = acpx else {
        table.note("turns: acpx on the TS SDK agent skipped (acpx unavailable, see above)");
        return Ok(());
    };
    let cmd = format!("node {}", agent.script().display());
    let env = [("TS_AGENT_STATE_DIR", state)];
    // A short TTL: acpx's queue owner (which keeps the agent warm between
    // `prompt`s) exits soon after the last one instead of after 300 s.
    let quiet = ["--approve-all", "--format", "quiet", "--ttl", "5"];
    let prompt = |i: usize| format!("bench prompt {i}: echo me back");
    let run = |args: &[&str]| acpx.run_agent(&cmd, &env, cwd, args);
    run(&[&quiet[..], &["exec", "warm"]].concat());
    let exec = (0..n.min(15))
        .map(|i| time_ms(|| run(&[&quiet[..], &["exec", &prompt(i)]].concat())).0)
        .collect();
    table.add(
        "turns",
        "acpx exec, same TS SDK agent (per turn, peer)",
        Unit::Ms,
        exec,
        Some(ours),
    );
    run(&["sessions", "new"]);
    run(&[&quiet[..], &["prompt", "warm"]].concat());
    let persistent = (0..n)
        .map(|i| time_ms(|| run(&[&quiet[..], &["prompt", &prompt(i)]].concat())).0)
        .collect();
    table.add(
        "turns",
        "acpx prompt, persistent session, same TS SDK agent (per turn, peer)",
        Unit::Ms,
        persistent,
        Some(ours),
    );
    Ok(())
}
