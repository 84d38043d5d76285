//! One real ACP turn against a controller binary's built-in `echo` agent,
//! for the installer's smoke test of a staged release: it proves the staged
//! binary can serve a whole turn (initialize, session, streamed reply, stop
//! reason), not merely start. Blocking and dependency-free on purpose: the
//! install command calls it before any runtime or store exists.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The prompt sent; the reply must be exactly this text.
const SMOKE_PROMPT: &str = "lapis-ai-controller smoke test: echo this back";

/// Most stdout bytes read from the agent.
const MAX_OUTPUT: u64 = 1024 * 1024;

/// Why the smoke turn failed. Messages carry no payload.
#[derive(Debug, thiserror::Error)]
pub enum SmokeTurnError {
    /// The binary could not be started.
    #[error("could not start `{bin} acp-echo`: {source}")]
    Spawn {
        /// The binary.
        bin: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// No complete turn within the deadline; the agent was killed.
    #[error("the echo turn did not finish within {0:?}")]
    Timeout(Duration),
    /// The exchange was incomplete or wrong.
    #[error("the echo turn was wrong: {0}")]
    Protocol(&'static str),
}

/// Runs one echo turn through `bin acp-echo` and checks every step.
pub fn echo_smoke_turn(bin: &Path, timeout: Duration) -> Result<(), SmokeTurnError> {
    let mut cmd = Command::new(bin);
    cmd.arg("acp-echo")
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = crate::children::spawn_std(crate::children::Purpose::Agent, &mut cmd).map_err(
        |source| SmokeTurnError::Spawn {
            bin: bin.display().to_string(),
            source,
        },
    )?;
    let requests = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
            "params": {"cwd": "/", "mcpServers": []}}),
    ];
    let stdout = child.stdout.take();
    let mut stdin = child.stdin.take();
    // Read on a thread so the deadline holds even if the agent stalls.
    let reader = std::thread::spawn(move || -> Vec<Value> {
        let Some(out) = stdout else { return Vec::new() };
        BufReader::new(out.take(MAX_OUTPUT))
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str(&l).ok())
            .collect()
    });
    let write = |stdin: &mut Option<std::process::ChildStdin>, msg: &Value| {
        if let Some(s) = stdin.as_mut() {
            let _ = writeln!(s, "{msg}");
        }
    };
    for r in &requests {
        write(&mut stdin, r);
    }
    // The session id is known in advance only for the echo agent; send the
    // prompt with the id it assigns to the first session.
    write(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
            "params": {"sessionId": "echo-1", "prompt": [{"type": "text", "text": SMOKE_PROMPT}]}}),
    );
    drop(stdin);
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SmokeTurnError::Timeout(timeout));
            }
        }
    }
    let msgs = reader
        .join()
        .map_err(|_| SmokeTurnError::Protocol("reader failed"))?;
    check(&msgs)
}

fn check(msgs: &[Value]) -> Result<(), SmokeTurnError> {
    let response = |id: u64| msgs.iter().find(|m| m.get("id") == Some(&json!(id)));
    let bad = SmokeTurnError::Protocol;
    if response(0).and_then(|m| m.pointer("/result/protocolVersion")) != Some(&json!(1)) {
        return Err(bad("initialize did not answer protocol version 1"));
    }
    if response(1)
        .and_then(|m| m.pointer("/result/sessionId"))
        .and_then(Value::as_str)
        != Some("echo-1")
    {
        return Err(bad("session/new did not open a session"));
    }
    if response(2)
        .and_then(|m| m.pointer("/result/stopReason"))
        .and_then(Value::as_str)
        != Some("end_turn")
    {
        return Err(bad("the prompt did not end with stopReason end_turn"));
    }
    let updates = |kind: &str| {
        msgs.iter()
            .filter(|m| {
                m.pointer("/params/update/sessionUpdate")
                    .and_then(Value::as_str)
                    == Some(kind)
            })
            .filter_map(|m| {
                m.pointer("/params/update/content/text")
                    .and_then(Value::as_str)
            })
            .collect::<Vec<_>>()
    };
    if updates("agent_message_chunk").concat() != SMOKE_PROMPT {
        return Err(bad("the streamed reply is not the prompt"));
    }
    if updates("agent_thought_chunk").len() != 1 {
        return Err(bad("expected exactly one thought"));
    }
    Ok(())
}
