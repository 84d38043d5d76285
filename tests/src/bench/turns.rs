//! `turns`: N sequential `turns submit --wait` with the built-in echo agent
//! vs the same prompts through `acpx exec` on the same agent; then
//! throughput over one persistent SDK connection with 1 and 8 workspaces
//! (warm turns: each thread's agent stays alive between turns), and the
//! time from the agent's answer to the durable `completed` for the echo
//! agent, the lingering fixture agent torn down after every turn and the
//! TypeScript SDK agent; warm turns one at a time (see [`super::warm`]).

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use super::acpx::Acpx;
use super::warm;
use anyhow::Context;
use lapis_e2e::ts_agent::TsAgent;
use lapis_protocol::client::Client;

use super::rig::{Rig, fixture_agent, run_ok, wait_turns};
use super::table::{Table, Unit, time_ms};

/// The agent's own time: one raw ACP exchange with the echo agent (spawn,
/// initialize, session/new, prompt, close, wait), no controller at all; the
/// same floor as `tests/benches/acp.rs`.
fn floor_turn(bin: &Path, cwd: &Path, prompt: &str) -> Result<()> {
    let mut child = Command::new(bin)
        .arg("acp-echo")
        .env_clear()
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
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
                anyhow::ensure!(out.read_line(&mut line)? > 0, "echo agent closed");
                let v: serde_json::Value = serde_json::from_str(&line)?;
                if v["id"] == id {
                    return Ok(v);
                }
            }
        };
    call(0, "initialize", json!({"protocolVersion": 1}))?;
    let s = call(1, "session/new", json!({"cwd": cwd, "mcpServers": []}))?;
    let sid = s["result"]["sessionId"].clone();
    call(
        2,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": prompt}]}),
    )?;
    drop(stdin);
    child.wait()?;
    Ok(())
}

/// Runs `n` sequential turns on `thread` and returns, per turn, the ms from
/// the agent's answer (the journaled `stopped` marker) to the durable
/// `completed` (the turn's `finishedAt`); both from the store's clock, so
/// the resolution is 1 ms.
fn answer_to_completed(client: &mut Client, thread: &str, tag: &str, n: usize) -> Result<Vec<f64>> {
    let mut samples = Vec::with_capacity(n);
    let mut cursor = 0;
    for i in 0..n {
        let turn = client.turns_submit(thread, &format!("{tag}-{i}"), "answer me")?;
        let states = wait_turns(
            client,
            std::slice::from_ref(&turn.id),
            Duration::from_secs(60),
        )?;
        anyhow::ensure!(states == ["completed"], "turn ended {states:?}");
        let done = client.turns_get(&turn.id)?;
        // Page from the last cursor: the thread's journal only grows.
        let mut stopped = None;
        loop {
            let page = client.journal_replay(Some(thread), cursor, None)?;
            cursor = page.next_after;
            stopped = stopped.or(page
                .events
                .iter()
                .find(|e| {
                    e.turn_id.as_deref() == Some(turn.id.as_str())
                        && matches!(
                            lapis_e2e::journal::observation(e),
                            Some(lapis_protocol::Observation::Stopped { .. })
                        )
                })
                .map(|e| e.at));
            if !page.more {
                break;
            }
        }
        let stopped = stopped.context("no stopped marker journaled")?;
        let finished = done
            .finished_at
            .context("completed turn without finishedAt")?;
        samples.push((finished - stopped) as f64);
    }
    Ok(samples)
}

/// CPU time (user + system) a process has used, in ms (from
/// /proc/<pid>/stat; clock ticks assumed 100/s, Linux's USER_HZ).
fn cpu_ms(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) * 10.0)
}

/// Adds the suite's rows; `warm_only` (suite `warm`) keeps the echo warm
/// floor, warm turns one at a time and the 1 / 8 workspace throughput.
pub(crate) fn run(
    table: &mut Table,
    n: usize,
    batch: usize,
    acpx: Option<&Acpx>,
    warm_only: bool,
) -> Result<()> {
    let lingering = fixture_agent()
        .map(|agent| json!({"command": agent, "args": ["--linger"], "idleSeconds": 0}));
    let ts = TsAgent::find("bench turns");
    let ts_state = tempfile::tempdir()?;
    let mut providers = serde_json::Map::new();
    if let Some(linger) = &lingering {
        providers.insert("linger".into(), linger.clone());
    }
    if let Some(ts) = &ts {
        providers.insert("ts".into(), ts.provider(ts_state.path()));
    }
    let mut rig = Rig::new(8, providers.into(), json!({}))?;
    rig.start()?;
    let bin = rig.bin.clone();
    let mut client = rig.client()?;
    let threads = rig.threads(&mut client, "echo")?;
    let prompt = |i: usize| format!("bench prompt {i}: echo me back");

    if !warm_only {
        cli_and_cold_rows(table, &mut rig, n, acpx)?;
    }
    let cwd = rig.ctx.home().join("ws0");
    let floor_name = "echo agent alone, one prompt on an open session (warm floor, per turn)";
    let mut echo = Command::new(&bin);
    echo.arg("acp-echo").env_clear();
    table.add(
        "turns",
        floor_name,
        Unit::Ms,
        warm::agent_floor(echo, &cwd, n)?,
        None,
    );
    table.add(
        "turns",
        "durability floor: one commit's write (9 pages of 4 KiB) + fdatasync, the home's disk",
        Unit::Ms,
        warm::fsync_floor(rig.ctx.home(), n.max(50))?,
        None,
    );
    let thread = client.threads_create(
        &rig.workspaces[2],
        "echo",
        lapis_protocol::ApprovalPolicy::Ask,
        None,
    )?;
    table.add(
        "turns",
        "SDK, 1 workspace, warm turn one at a time: submit -> completed event",
        Unit::Ms,
        warm::turn_latency(&mut client, &thread.id, "lat-echo", n.max(50))?,
        Some(floor_name),
    );

    for ws in [1usize, 8] {
        let mut rates = Vec::new();
        let mut cpu = Vec::new();
        // Per-turn counts from `status`'s `work` (a build without it adds
        // no count rows): the guards' figures, measured at scale.
        let mut counts: Vec<[f64; 5]> = Vec::new();
        for round in 0..3 {
            let work_before = client.status()?.work;
            let cpu_before = rig.pid().and_then(cpu_ms);
            let started = Instant::now();
            let mut last = vec![String::new(); ws];
            for i in 0..batch {
                let w = i % ws;
                let turn = client.turns_submit(
                    &threads[w],
                    &format!("tp-{ws}-{round}-{i}"),
                    &prompt(i),
                )?;
                last[w] = turn.id;
            }
            let states = wait_turns(&mut client, &last, Duration::from_secs(600))?;
            anyhow::ensure!(
                states.iter().all(|s| s == "completed"),
                "turns ended {states:?}"
            );
            rates.push(batch as f64 / started.elapsed().as_secs_f64());
            if let (Some(a), Some(b)) = (cpu_before, rig.pid().and_then(cpu_ms)) {
                cpu.push((b - a) / batch as f64);
            }
            if let (Some(a), Some(b)) = (work_before, client.status()?.work) {
                let per = |x: u64, y: u64| (y - x) as f64 / batch as f64;
                counts.push([
                    per(a.store.commits, b.store.commits),
                    per(a.store.write_pages, b.store.write_pages),
                    per(a.store.write_statements, b.store.write_statements),
                    per(a.store.read_statements, b.store.read_statements),
                    per(
                        a.processes.agents + a.processes.git,
                        b.processes.agents + b.processes.git,
                    ),
                ]);
            }
        }
        if !counts.is_empty() {
            let names = [
                ("durable commits per warm turn", "commits"),
                ("pages written per warm turn (WAL frames), writer", "pages"),
                ("SQL statements per warm turn, writer", "statements"),
                (
                    "SQL statements per warm turn, readers (incl. the bench's polling)",
                    "statements",
                ),
                (
                    "processes started per warm turn (agents + git)",
                    "processes",
                ),
            ];
            for (k, (name, unit)) in names.into_iter().enumerate() {
                // A controller that does not count pages reports none.
                if k == 1 && counts.iter().all(|c| c[k] == 0.0) {
                    continue;
                }
                table.add(
                    "turns",
                    format!("{name}, {ws} workspace{}", if ws == 1 { "" } else { "s" }),
                    Unit::Count(unit),
                    counts.iter().map(|c| c[k]).collect(),
                    None,
                );
            }
        }
        if ws == 1 && !cpu.is_empty() {
            table.add(
                "turns",
                "serve's own CPU time per turn, 1 workspace (utime+stime)",
                Unit::Ms,
                cpu,
                None,
            );
        }
        if ws == 1 {
            let per_turn = rates.iter().map(|r| 1e3 / r).collect();
            table.add(
                "turns",
                "SDK, 1 workspace, ms per warm turn (overhead = this - warm floor)",
                Unit::Ms,
                per_turn,
                Some(floor_name),
            );
        }
        let against = (ws == 8).then_some("SDK throughput, 1 workspace");
        let figure = if ws == 1 {
            "SDK throughput, 1 workspace".to_owned()
        } else {
            format!("SDK throughput, {ws} workspaces")
        };
        table.add("turns", figure, Unit::PerSec("turns"), rates, against);
    }

    if !warm_only {
        let fresh = client.threads_create(
            &rig.workspaces[0],
            "echo",
            lapis_protocol::ApprovalPolicy::Ask,
            None,
        )?;
        let echo = answer_to_completed(&mut client, &fresh.id, "ac-echo", n)?;
        table.add(
            "turns",
            "agent answer -> durable completed, echo (warm)",
            Unit::Ms,
            echo,
            None,
        );
        if lingering.is_some() {
            let thread = client.threads_create(
                &rig.workspaces[1],
                "linger",
                lapis_protocol::ApprovalPolicy::Ask,
                None,
            )?;
            let linger = answer_to_completed(&mut client, &thread.id, "ac-linger", n.min(20))?;
            table.add(
                "turns",
                "agent answer -> durable completed, lingering agent (idleSeconds 0: torn down after every turn)",
                Unit::Ms,
                linger,
                None,
            );
        } else {
            table.note("turns: lingering agent skipped (build the fixture agent: cargo build --release -p lapis-e2e)");
        }
        match &ts {
            Some(ts) => {
                let thread = client.threads_create(
                    &rig.workspaces[3],
                    "ts",
                    lapis_protocol::ApprovalPolicy::Ask,
                    None,
                )?;
                let cwd = rig.ctx.home().join("ws3");
                warm::ts_agent_rows(
                    table,
                    &mut client,
                    &thread.id,
                    (ts, ts_state.path()),
                    &cwd,
                    n,
                    acpx,
                )?;
                let echo = answer_to_completed(&mut client, &thread.id, "ac-ts", n)?;
                table.add(
                    "turns",
                    "agent answer -> durable completed, TS SDK agent (warm)",
                    Unit::Ms,
                    echo,
                    None,
                );
            }
            None => table.note(
                "turns: TS SDK agent skipped (node or its SDK missing: tests/agents/install)",
            ),
        }
    }
    rig.stop();
    Ok(())
}

/// The CLI's `turns submit --wait` against `acpx exec`, and the echo
/// agent's cold floor (spawn + initialize + session + prompt).
fn cli_and_cold_rows(
    table: &mut Table,
    rig: &mut Rig,
    n: usize,
    acpx: Option<&Acpx>,
) -> Result<()> {
    let bin = rig.bin.clone();
    let cwd = rig.ctx.home().join("ws0");
    let prompt = |i: usize| format!("bench prompt {i}: echo me back");
    // Threads belong to their application: the CLI opens its own.
    let created = run_ok(&rig.ctx, &bin, &["threads", "create", "ws0", "--json"])?;
    let cli_thread = created.json()["thread"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    run_ok(
        &rig.ctx,
        &bin,
        &[
            "turns",
            "submit",
            &cli_thread,
            "--prompt",
            "warm",
            "--wait",
            "--json",
        ],
    )?;
    let mut cli = Vec::new();
    for i in 0..n {
        let p = prompt(i);
        let (t, out) = time_ms(|| {
            run_ok(
                &rig.ctx,
                &bin,
                &[
                    "turns",
                    "submit",
                    &cli_thread,
                    "--prompt",
                    &p,
                    "--wait",
                    "--json",
                ],
            )
        });
        let out = out?;
        anyhow::ensure!(
            out.stdout.contains("completed"),
            "turn did not complete: {}",
            out.stdout
        );
        cli.push(t);
    }
    table.add(
        "turns",
        "turns submit --wait, echo (per turn)",
        Unit::Ms,
        cli,
        None,
    );

    match acpx {
        Some(acpx) => {
            acpx.run(
                &bin,
                &cwd,
                &["--approve-all", "--format", "quiet", "exec", "warm"],
            );
            let samples = (0..n)
                .map(|i| {
                    let p = prompt(i);
                    time_ms(|| {
                        acpx.run(
                            &bin,
                            &cwd,
                            &["--approve-all", "--format", "quiet", "exec", &p],
                        )
                    })
                    .0
                })
                .collect();
            table.add(
                "turns",
                "acpx exec, same echo agent (per turn, peer)",
                Unit::Ms,
                samples,
                Some("turns submit --wait, echo (per turn)"),
            );
        }
        None => table.note("turns: acpx exec skipped (acpx unavailable, see above)"),
    }

    let mut floor = Vec::new();
    for i in 0..n {
        let (t, r) = time_ms(|| floor_turn(&bin, &cwd, &prompt(i)));
        r?;
        floor.push(t);
    }
    table.add(
        "turns",
        "echo agent alone, raw ACP exchange with spawn (cold floor, per turn)",
        Unit::Ms,
        floor,
        None,
    );
    Ok(())
}
