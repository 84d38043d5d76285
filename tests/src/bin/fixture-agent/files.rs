//! The fixture agent's files: pid files, the prompt ledger, and the MCP
//! ledger and capabilities (what a test asserts the agent received).

use std::io::Write;

use serde_json::{Value, json};

use super::Script;

/// Writes this process's pid atomically (a reader never sees half a pid).
pub(crate) fn write_pid(pidfile: &str) {
    let tmp = format!("{pidfile}.tmp");
    std::fs::write(&tmp, std::process::id().to_string()).expect("pidfile");
    std::fs::rename(&tmp, pidfile).expect("pidfile rename");
}

/// Appends a line to each comma-separated path under the working
/// directory (`--touch`), creating files and directories as needed.
pub(crate) fn touch(paths: &str) {
    for path in paths.split(',').filter(|p| !p.is_empty()) {
        let path = std::path::Path::new(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("touch dir");
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("touch");
        f.write_all(b"touched by the agent\n").expect("touch write");
        f.sync_all().expect("touch fsync");
    }
}

/// The prompt's text blocks, joined, on one line.
pub(crate) fn prompt_text(params: &Value) -> String {
    let text: String = params["prompt"]
        .as_array()
        .map(|b| b.iter().filter_map(|x| x["text"].as_str()).collect())
        .unwrap_or_default();
    text.replace('\n', " ")
}

/// Appends the prompt text to the ledger and fsyncs, so chaos tests can
/// count how often a prompt really reached an agent.
pub(crate) fn record(ledger: &str, params: &Value) {
    // Content blocks apart (` || `), so a test sees a separate block; an
    // embedded resource as `[<uri>] <text>`, so a test sees its form.
    let text: Vec<String> = params["prompt"]
        .as_array()
        .map(|b| {
            b.iter()
                .filter_map(|x| match x["type"].as_str() {
                    Some("resource") => Some(format!(
                        "[{}] {}",
                        x["resource"]["uri"].as_str()?,
                        x["resource"]["text"].as_str()?
                    )),
                    _ => x["text"].as_str().map(str::to_owned),
                })
                .map(|t| t.replace('\n', " "))
                .collect()
        })
        .unwrap_or_default();
    let text = text.join(" || ");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ledger)
        .expect("ledger");
    // One write(2) per line: agents of several workspaces append at once,
    // and `writeln!` on a `File` writes the text and the newline apart, so
    // two agents' lines could interleave into one merged line and an empty
    // one (the load suite then counted the empty line as a prompt
    // delivered twice).
    f.write_all(format!("{text}\n").as_bytes())
        .expect("ledger write");
    f.sync_all().expect("ledger fsync");
}

/// `--mcp-ledger PATH`: appends `{"method", "mcpServers"}` as one JSON line
/// (fsynced) for every session the agent makes or loads.
pub(crate) fn mcp_ledger(script: &Script, method: &str, params: &Value) {
    let Some(path) = script.get("mcp-ledger") else {
        return;
    };
    let line = json!({"method": method, "mcpServers": params["mcpServers"]});
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("mcp ledger");
    writeln!(f, "{line}").expect("mcp ledger write");
    f.sync_all().expect("mcp ledger fsync");
}

/// `--mcp-caps http,sse|none`: the advertised `mcpCapabilities` (absent
/// flag: whatever the result already says).
pub(crate) fn mcp_capabilities(script: &Script, result: &mut Value) {
    let Some(caps) = script.get("mcp-caps") else {
        return;
    };
    let on = |k: &str| caps.split(',').any(|c| c == k);
    result["agentCapabilities"]["mcpCapabilities"] = json!({"http": on("http"), "sse": on("sse")});
}

/// `--resume-session` / `--close-session` advertise
/// `sessionCapabilities.resume` / `.close` (`{}` each, as ACP v1 does).
pub(crate) fn session_capabilities(script: &Script, result: &mut Value) {
    for (flag, name) in [("resume-session", "resume"), ("close-session", "close")] {
        if script.has(flag) {
            result["agentCapabilities"]["sessionCapabilities"][name] = json!({});
        }
    }
}

/// Appends `WHAT SESSION` to `--lifecycle-ledger PATH`, if given.
pub(crate) fn lifecycle(script: &Script, what: &str, session: &str) {
    let Some(path) = script.get("lifecycle-ledger") else {
        return;
    };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("lifecycle ledger");
    writeln!(f, "{what} {session}").expect("lifecycle ledger write");
}
