//! The built-in deterministic agent behind the `echo` provider: it serves
//! ACP v1 on a reader/writer pair (the CLI passes stdin/stdout) and answers
//! each prompt with one thought and the prompt's text in a few chunks.
//!
//! It exists so a fresh install can run a real turn end to end with no API
//! key, and so benchmarks measure the controller rather than a model. It is
//! synchronous on purpose: it starts in microseconds and needs no runtime.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

/// Longest request line the echo agent accepts.
const MAX_LINE: u64 = 16 * 1024 * 1024;

/// How many chunks a reply is split into (at most).
const CHUNKS: usize = 3;

/// Why the echo agent stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum EchoError {
    /// Reading or writing stdio failed.
    #[error("echo agent i/o failed: {0}")]
    Io(#[from] std::io::Error),
    /// A request line exceeded the bound.
    #[error("request line longer than {MAX_LINE} bytes")]
    LineTooLong,
}

/// Serves ACP until `input` ends. Malformed lines get JSON-RPC parse errors.
pub fn serve(input: impl BufRead, mut output: impl Write) -> Result<(), EchoError> {
    let mut input = input.take(MAX_LINE + 1);
    let mut line = Vec::new();
    let mut sessions = 0u64;
    loop {
        line.clear();
        input.set_limit(MAX_LINE + 1);
        let n = input.read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        if line.last() != Some(&b'\n') && n as u64 > MAX_LINE {
            return Err(EchoError::LineTooLong);
        }
        let Ok(msg) = serde_json::from_slice::<Value>(&line) else {
            send(
                &mut output,
                &json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": "parse error"}}),
            )?;
            continue;
        };
        let (Some(method), Some(id)) = (msg.get("method").and_then(Value::as_str), msg.get("id"))
        else {
            continue; // notifications (session/cancel) and responses: nothing to do
        };
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        match method {
            "initialize" => send(
                &mut output,
                &json!({"jsonrpc": "2.0", "id": id, "result": {
                    "protocolVersion": 1,
                    "agentCapabilities": {"loadSession": false, "promptCapabilities": {}},
                    "agentInfo": {"name": "lapis-echo", "version": env!("CARGO_PKG_VERSION")},
                    "authMethods": []
                }}),
            )?,
            "session/new" => {
                sessions += 1;
                send(
                    &mut output,
                    &json!({"jsonrpc": "2.0", "id": id,
                    "result": {"sessionId": format!("echo-{sessions}")}}),
                )?;
            }
            "session/prompt" => prompt(&mut output, id, &params)?,
            _ => send(
                &mut output,
                &json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"}}),
            )?,
        }
    }
}

fn prompt(out: &mut impl Write, id: &Value, params: &Value) -> Result<(), EchoError> {
    let session = params.get("sessionId").cloned().unwrap_or(Value::Null);
    let text: String = params
        .get("prompt")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    let update = |update: Value| {
        json!({"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": session, "update": update}})
    };
    let thought = format!("echoing {} characters", text.chars().count());
    send(
        out,
        &update(json!({"sessionUpdate": "agent_thought_chunk",
        "content": {"type": "text", "text": thought}})),
    )?;
    for chunk in split(&text, CHUNKS) {
        send(
            out,
            &update(json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": chunk}})),
        )?;
    }
    send(
        out,
        &json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}),
    )
}

/// Splits `text` into at most `n` pieces on character boundaries.
fn split(text: &str, n: usize) -> Vec<&str> {
    let chars: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    if chars.is_empty() {
        return vec![""];
    }
    let per = chars.len().div_ceil(n);
    let mut out = Vec::new();
    let mut start = 0;
    for k in 1..=n {
        let end = chars.get(k * per).copied().unwrap_or(text.len());
        if end > start {
            out.push(&text[start..end]);
        }
        start = end;
    }
    out
}

fn send(out: &mut impl Write, msg: &Value) -> Result<(), EchoError> {
    let mut bytes = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    out.write_all(&bytes)?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_all_text_on_char_boundaries() {
        for text in ["", "a", "hello world", "héllo wörld ✓✓✓"] {
            let parts = split(text, CHUNKS);
            assert!(parts.len() <= CHUNKS);
            assert_eq!(parts.concat(), text);
        }
        assert_eq!(split("abcdef", 3), ["ab", "cd", "ef"]);
    }

    #[test]
    fn serves_a_whole_turn() {
        let input = [
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                "params": {"sessionId": "echo-1", "prompt": [{"type": "text", "text": "hello there"}]}}),
        ]
        .iter()
        .map(|v| format!("{v}\nnot json\n"))
        .collect::<String>();
        let mut out = Vec::new();
        serve(input.as_bytes(), &mut out).unwrap();
        let msgs: Vec<Value> = out
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        let replies: String = msgs
            .iter()
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .map(|m| m["params"]["update"]["content"]["text"].as_str().unwrap())
            .collect();
        assert_eq!(replies, "hello there");
        let thoughts = msgs
            .iter()
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_thought_chunk")
            .count();
        assert_eq!(thoughts, 1);
        let done = msgs.iter().find(|m| m["id"] == 2).unwrap();
        assert_eq!(done["result"]["stopReason"], "end_turn");
        assert_eq!(msgs.last().unwrap()["error"]["code"], -32700);
        assert_eq!(msgs[0]["result"]["protocolVersion"], 1);
    }
}
