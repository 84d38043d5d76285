//! `tools`: application tool calls through the controller's MCP bridge,
//! the real path — the fixture agent's `rmcp` client → `mcp-bridge` (an
//! `rmcp` stdio server) → `serve` (`tool_call_requested` committed,
//! capture, `tools.invoke` to the application on its own connection,
//! `tool_call_finished` committed) → back.
//!
//! - **read overhead**: per call, the time the agent's MCP call took
//!   (`--mcp-timing`, measured in the agent around `call_tool`) minus the
//!   application handler's own time (measured inside the handler), median
//!   over many calls of one turn (the bridge and its MCP session are warm:
//!   a first turn starts them and is not counted). Target ≤ 2 ms.
//! - **durable commits per call**: the store logs each commit at `trace`
//!   (`LAPIS_LOG=info,lapis_commit=trace`, target `lapis_commit`, a running
//!   count); a turn of `calls` mutating calls and a turn of none on the same
//!   warm thread are counted, and the difference divided by `calls` is one
//!   sample (the agent, with `--mcp-timing`, replies once after its last
//!   call, so no reply chunk commits between two calls). Target ≤ 2 for a
//!   mutating call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lapis_protocol::client::{CallbackError, Client, ToolHandler};
use lapis_protocol::params::ThreadsCreate;
use lapis_protocol::tools::{ToolInvoke, ToolOutput, ToolsRegister};
use serde_json::json;

use super::rig::{Rig, fixture_agent, wait_turns};
use super::table::{Table, Unit};

/// The application side: answers at once and records its own time.
struct Handler(Arc<Mutex<Vec<f64>>>);

impl ToolHandler for Handler {
    fn invoke(&mut self, call: &ToolInvoke) -> Result<ToolOutput, CallbackError> {
        let started = Instant::now();
        let out = ToolOutput {
            text: format!("{} ok", call.tool),
            ..Default::default()
        };
        let took = started.elapsed().as_secs_f64() * 1e6;
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(took);
        Ok(out)
    }
}

/// The last `commits=N` the store logged.
fn commits(rig: &Rig) -> Result<u64> {
    let log = std::fs::read_to_string(rig.ctx.home().join("serve.log"))?;
    Ok(log
        .lines()
        .rev()
        .find_map(|l| {
            let (_, rest) = l.split_once("commits=")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or(0))
}

/// Runs one turn of `prompt` on `thread` to its end; returns its id.
fn turn(client: &mut Client, thread: &str, cmd: &str, prompt: &str) -> Result<String> {
    let t = client.turns_submit(thread, cmd, prompt)?;
    let states = wait_turns(
        client,
        std::slice::from_ref(&t.id),
        Duration::from_secs(600),
    )?;
    if states[0] != "completed" {
        bail!("turn {} ended {}", t.id, states[0]);
    }
    Ok(t.id)
}

/// The agent's `[Nus]` of each call of `turn`, in order.
fn agent_times(client: &mut Client, thread: &str, turn: &str) -> Result<Vec<f64>> {
    let mut text = String::new();
    let mut after = 0;
    loop {
        let page = client.journal_replay(Some(thread), after, None)?;
        for e in page
            .events
            .iter()
            .filter(|e| e.turn_id.as_deref() == Some(turn))
        {
            if let Some(t) = lapis_e2e::journal::reply_text(e) {
                text.push_str(&t);
            }
        }
        after = page.next_after;
        if !page.more {
            break;
        }
    }
    let mut out = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("tool ")) {
        let us = line
            .split_once(" [")
            .and_then(|(_, r)| r.split_once("us]"))
            .and_then(|(n, _)| n.parse::<f64>().ok())
            .with_context(|| format!("no timing in {line:?}"))?;
        if !line.contains("]: ") {
            bail!("a call failed: {line}");
        }
        out.push(us);
    }
    Ok(out)
}

/// Adds the suite's rows: `calls` calls per measured turn, `runs` pairs of
/// commit-counted turns.
pub(crate) fn run(table: &mut Table, calls: usize, runs: usize) -> Result<()> {
    let Some(agent) = fixture_agent() else {
        table.note("tools: skipped: fixture-agent is not built beside the runner");
        return Ok(());
    };
    let providers =
        json!({ "tooled": { "command": agent, "args": ["--mcp-tools", "--mcp-timing"] } });
    let mut rig = Rig::new(1, providers, json!({}))?;
    rig.ctx.set_env("LAPIS_LOG", "info,lapis_commit=trace");
    rig.start()?;

    let mut app = rig.client()?;
    let spec: ToolsRegister = serde_json::from_value(json!({"endpoint": "bench", "capture": true,
        "tools": [{"name": "find", "inputSchema": {"type": "object"}},
                  {"name": "update", "inputSchema": {"type": "object"}, "mutating": true}]}))?;
    app.tools_register(spec)?;
    let handler_us = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let serving = {
        let (stop, mut handler) = (stop.clone(), Handler(handler_us.clone()));
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if app
                    .serve_tools(&mut handler, Some(Duration::from_millis(50)))
                    .is_err()
                {
                    break;
                }
            }
        })
    };

    let mut driver = rig.client()?;
    let thread = driver
        .threads_create_with(
            &ThreadsCreate::new(&rig.workspaces[0], "tooled")
                .approval(lapis_protocol::ApprovalPolicy::AllowAll)
                .tools(["bench"]),
        )?
        .thread
        .id;
    // Warm: the agent, its bridge and the MCP session start here.
    turn(&mut driver, &thread, "warm", "call bench__find {}")?;
    handler_us.lock().unwrap_or_else(|p| p.into_inner()).clear();

    let lines = |tool: &str| -> String {
        (0..calls)
            .map(|i| format!("call bench__{tool} {{\"i\":{i}}}\n"))
            .collect()
    };
    let read = turn(&mut driver, &thread, "read", &lines("find"))?;
    let agent_us = agent_times(&mut driver, &thread, &read)?;
    let handler: Vec<f64> = handler_us
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain(..)
        .collect();
    if agent_us.len() != calls || handler.len() != calls {
        bail!(
            "{calls} calls, the agent timed {}, the handler ran {}",
            agent_us.len(),
            handler.len()
        );
    }
    let overhead: Vec<f64> = agent_us
        .iter()
        .zip(&handler)
        .map(|(a, h)| (a - h) / 1e3)
        .collect();
    let handler_ms: Vec<f64> = handler.iter().map(|h| h / 1e3).collect();
    table.add(
        "tools",
        "application handler's own time (read tool)",
        Unit::Ms,
        handler_ms,
        None,
    );
    table.add(
        "tools",
        "read tool call through the bridge, over the handler's time (target ≤ 2 ms)",
        Unit::Ms,
        overhead,
        None,
    );

    let mut mutating = Vec::new();
    let mut reading = Vec::new();
    let mut mutating_overhead = Vec::new();
    for r in 0..runs {
        let before = commits(&rig)?;
        turn(&mut driver, &thread, &format!("base-{r}"), "plain")?;
        let base = commits(&rig)? - before;
        let before = commits(&rig)?;
        handler_us.lock().unwrap_or_else(|p| p.into_inner()).clear();
        let id = turn(&mut driver, &thread, &format!("mut-{r}"), &lines("update"))?;
        let with_calls = commits(&rig)? - before;
        mutating.push((with_calls as f64 - base as f64) / calls as f64);
        let handler = handler_us.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let agent_us = agent_times(&mut driver, &thread, &id)?;
        mutating_overhead.extend(agent_us.iter().zip(&handler).map(|(a, h)| (a - h) / 1e3));
        let before = commits(&rig)?;
        turn(&mut driver, &thread, &format!("read-{r}"), &lines("find"))?;
        let with_reads = commits(&rig)? - before;
        reading.push((with_reads as f64 - base as f64) / calls as f64);
    }
    table.add(
        "tools",
        "mutating tool call (capture begin + finish) through the bridge, over the handler's time",
        Unit::Ms,
        mutating_overhead,
        None,
    );
    table.add(
        "tools",
        "durable commits per mutating call (target ≤ 2)",
        Unit::Count("commits"),
        mutating,
        None,
    );
    table.add(
        "tools",
        "durable commits per read call",
        Unit::Count("commits"),
        reading,
        None,
    );
    stop.store(true, Ordering::SeqCst);
    let _ = serving.join();
    rig.stop();
    Ok(())
}
