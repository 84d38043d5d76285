//! `--mcp-tools`: the fixture agent as an MCP client of the servers its
//! session was given (the official Rust SDK, `rmcp`), so the end-to-end
//! tests drive application tools the way a real agent does. Each prompt
//! line `call NAME JSON` calls tool NAME with arguments JSON through the
//! controller's bridge (`lapis-tools`) and replies `tool NAME: TEXT` (or
//! `tool NAME error: TEXT`); a line `list` replies `tools: a, b`. The
//! client is started at the first call and kept for the session. With
//! `--mcp-timing` a call's reply names the time the MCP call took as the
//! agent saw it, in microseconds: `tool NAME [123us]: TEXT`, and the
//! replies to all lines go in one chunk after the last call (the tools
//! bench, `tests/src/bench/tools.rs`).

use std::sync::Mutex;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use super::{Out, update};

struct Connected {
    runtime: tokio::runtime::Runtime,
    client: Option<RunningService<RoleClient, ()>>,
}

/// The session's servers and its client, once started.
static SESSION: Mutex<(Value, Option<Connected>)> = Mutex::new((Value::Null, None));

/// A new session: its `mcpServers`; the previous session's client ends.
pub(crate) fn session_started(servers: &Value) {
    let mut s = SESSION.lock().unwrap_or_else(|p| p.into_inner());
    *s = (servers.clone(), None);
}

fn connect(servers: &Value) -> Result<Connected, String> {
    let bridge = servers
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == "lapis-tools"))
        .ok_or("the session has no lapis-tools server")?;
    let mut cmd = tokio::process::Command::new(bridge["command"].as_str().unwrap_or(""));
    for a in bridge["args"].as_array().into_iter().flatten() {
        cmd.arg(a.as_str().unwrap_or(""));
    }
    cmd.env_clear();
    for e in bridge["env"].as_array().into_iter().flatten() {
        cmd.env(
            e["name"].as_str().unwrap_or(""),
            e["value"].as_str().unwrap_or(""),
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let client = runtime.block_on(async {
        let transport = TokioChildProcess::new(cmd).map_err(|e| e.to_string())?;
        ().serve(transport).await.map_err(|e| e.to_string())
    })?;
    Ok(Connected {
        runtime,
        client: Some(client),
    })
}

fn one(c: &Connected, line: &str, timing: bool) -> String {
    let Some(client) = c.client.as_ref() else {
        return "error: no client".into();
    };
    if line == "list" {
        return match c.runtime.block_on(client.list_tools(None)) {
            Ok(r) => {
                let names: Vec<String> = r.tools.iter().map(|t| t.name.to_string()).collect();
                format!("tools: {}", names.join(", "))
            }
            Err(e) => format!("list error: {e}"),
        };
    }
    let rest = line.strip_prefix("call ").unwrap_or("");
    let (name, args) = rest.split_once(' ').unwrap_or((rest, "{}"));
    let args: Value = serde_json::from_str(args).unwrap_or(json!({}));
    let params: CallToolRequestParams =
        match serde_json::from_value(json!({"name": name, "arguments": args})) {
            Ok(p) => p,
            Err(e) => return format!("tool {name} error: {e}"),
        };
    let started = std::time::Instant::now();
    let result = c.runtime.block_on(client.call_tool(params));
    let took = if timing {
        format!(" [{}us]", started.elapsed().as_micros())
    } else {
        String::new()
    };
    match result {
        Ok(r) => {
            let v = serde_json::to_value(&r).unwrap_or_default();
            let text = v["content"][0]["text"].as_str().unwrap_or("").to_string();
            if v["isError"] == true {
                format!("tool {name}{took} error: {text}")
            } else {
                format!("tool {name}{took}: {text}")
            }
        }
        Err(e) => format!("tool {name} failed: {e}"),
    }
}

/// Runs the prompt's `call` and `list` lines, replying to each.
pub(crate) fn run_calls(out: &Out, session: &str, prompt: &str, timing: bool) {
    let lines: Vec<&str> = prompt
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("call ") || *l == "list")
        .collect();
    if lines.is_empty() {
        return;
    }
    let mut s = SESSION.lock().unwrap_or_else(|p| p.into_inner());
    if s.1.is_none() {
        match connect(&s.0) {
            Ok(c) => s.1 = Some(c),
            Err(e) => {
                let text = format!("mcp error: {e}\n");
                update(
                    out,
                    session,
                    json!({"sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": text}}),
                );
                return;
            }
        }
    }
    let c = s.1.as_ref().expect("connected");
    let say = |text: String| {
        update(
            out,
            session,
            json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": text}}),
        );
    };
    if timing {
        // One chunk after all calls, so a bench counts the calls' own
        // commits, not a reply chunk committed between two calls.
        let text: String = lines
            .iter()
            .map(|l| format!("{}\n", one(c, l, true)))
            .collect();
        say(text);
        return;
    }
    for line in lines {
        say(format!("{}\n", one(c, line, false)));
    }
}
