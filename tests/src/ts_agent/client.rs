//! A newline-JSON client for the TypeScript SDK agent, run as its own
//! process: just enough ACP to drive it directly (requests, updates,
//! permission answers, stdin EOF), so tests can prove what the agent does
//! apart from the controller — for example that a second process restores a
//! session with `session/load`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::TsAgent;

/// Guards against a hung agent only; no test outcome depends on timing.
pub const HANG_GUARD: Duration = Duration::from_secs(30);

/// The agent process, spoken to over its stdin/stdout.
#[derive(Debug)]
pub struct AgentProcess {
    /// The `node` process.
    child: Child,
    /// Its stdin; dropped to end the conversation.
    stdin: Option<ChildStdin>,
    /// Lines of its stdout, read by a thread so reads can time out.
    lines: Receiver<String>,
    /// Next request id.
    next: u64,
    /// The option id sent back to a `session/request_permission`; `None`
    /// answers `cancelled`, as a client does for a cancelled turn.
    pub permission_answer: Option<&'static str>,
}

impl AgentProcess {
    /// Starts the agent with its history under `state`; `no_load` sets
    /// `TS_AGENT_NO_LOAD=1`. Its stderr goes to the test's.
    pub fn spawn(agent: &TsAgent, state: &Path, no_load: bool) -> AgentProcess {
        let mut cmd = agent.command(state);
        if no_load {
            cmd.env("TS_AGENT_NO_LOAD", "1");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn node");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        AgentProcess {
            stdin: child.stdin.take(),
            child,
            lines,
            next: 1,
            permission_answer: Some("allow"),
        }
    }

    /// Writes one frame as a line.
    pub fn send(&mut self, frame: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        let mut line = serde_json::to_vec(&frame).unwrap();
        line.push(b'\n');
        stdin.write_all(&line).unwrap();
        stdin.flush().unwrap();
    }

    /// Reads the next frame; panics when none comes within [`HANG_GUARD`].
    pub(crate) fn recv(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(HANG_GUARD)
            .expect("agent wrote nothing (hung or exited)");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("agent wrote non-JSON {line:?}: {e}"))
    }

    /// Sends a request; returns its id.
    pub(crate) fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        id
    }

    /// Reads until the response to `id`, answering permission requests on
    /// the way; returns the `session/update` params seen first, in order.
    pub fn until_response(&mut self, id: u64) -> (Vec<Value>, Value) {
        let mut updates = Vec::new();
        loop {
            let frame = self.recv();
            match frame["method"].as_str() {
                Some("session/update") => updates.push(frame["params"].clone()),
                Some("session/request_permission") => {
                    let outcome = match self.permission_answer {
                        Some(id) => json!({ "outcome": "selected", "optionId": id }),
                        None => json!({ "outcome": "cancelled" }),
                    };
                    self.send(json!({ "jsonrpc": "2.0", "id": frame["id"],
                        "result": { "outcome": outcome } }));
                }
                Some(other) => panic!("unexpected request from the agent: {other}"),
                None if frame["id"] == json!(id) => return (updates, frame),
                None => panic!("response to an unknown id: {frame}"),
            }
        }
    }

    /// [`AgentProcess::request`] then [`AgentProcess::until_response`].
    pub fn call(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        let id = self.request(method, params);
        self.until_response(id)
    }

    /// `initialize` as the controller sends it; returns the result.
    pub fn initialize(&mut self) -> Value {
        let (_, r) = self.call(
            "initialize",
            json!({ "protocolVersion": 1, "clientCapabilities":
                { "fs": { "readTextFile": false, "writeTextFile": false }, "terminal": false } }),
        );
        r["result"].clone()
    }

    /// A text `session/prompt`; returns (updates, response).
    pub fn prompt(&mut self, session: &str, text: &str) -> (Vec<Value>, Value) {
        self.call(
            "session/prompt",
            json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] }),
        )
    }

    /// Sends a `[slow]` prompt and reads until the agent says it waits for
    /// the cancel (it must not answer before); returns the request id.
    pub fn slow_prompt(&mut self, session: &str, text: &str) -> u64 {
        let id = self.request(
            "session/prompt",
            json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] }),
        );
        loop {
            let frame = self.recv();
            assert!(frame.get("id").is_none(), "answered before cancel: {frame}");
            let waiting = [(
                "agent_message_chunk".to_owned(),
                "waiting for cancel; ".to_owned(),
            )];
            if texts(&[frame["params"].clone()]) == waiting {
                return id;
            }
        }
    }

    /// Closes stdin and waits for the agent to exit.
    pub fn finish(mut self) -> ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + HANG_GUARD;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "agent ignored stdin EOF");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (kind, text) of each text-carrying update.
pub fn texts(updates: &[Value]) -> Vec<(String, String)> {
    updates
        .iter()
        .filter_map(|u| {
            let kind = u["update"]["sessionUpdate"].as_str()?;
            let text = u["update"]["content"]["text"].as_str()?;
            Some((kind.to_owned(), text.to_owned()))
        })
        .collect()
}

/// The concatenated `agent_message_chunk` text.
pub fn reply(updates: &[Value]) -> String {
    texts(updates)
        .into_iter()
        .filter(|(k, _)| k == "agent_message_chunk")
        .map(|(_, t)| t)
        .collect()
}

/// The history the agent stored for `session` under `state` (the lines
/// after the header of its JSON-lines file).
pub fn stored_history(state: &Path, session: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(state.join(format!("{session}.jsonl"))).unwrap();
    let mut lines = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let header = lines.next().expect("header line");
    assert_eq!(header["sessionId"], session);
    lines.collect()
}

/// `session/new` in `cwd`; returns the session id.
pub fn new_session(agent: &mut AgentProcess, cwd: &Path) -> String {
    let (_, r) = agent.call("session/new", json!({ "cwd": cwd, "mcpServers": [] }));
    r["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new failed: {r}"))
        .to_owned()
}

/// The content blocks of each prompt the agent received for `session`, in
/// order, as its history keeps them (`type`, and `text`, or a resource's
/// `uri`, `mimeType` and `text`).
pub fn stored_prompts(state: &Path, session: &str) -> Vec<Vec<Value>> {
    stored_history(state, session)
        .into_iter()
        .filter(|e| e["role"] == "user")
        .map(|e| e["blocks"].as_array().cloned().unwrap_or_default())
        .collect()
}
