//! One prompt turn of the fixture agent: the scripted updates, permission
//! requests, tool calls and stop reason its flags ask for.

use super::*;

/// Prompts this process answered (`--usage` counts cumulative cost by it).
static PROMPTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// `--usage`: a `usage_update` with the session's context and its
/// *cumulative* cost (`--usage-cost C` per prompt, default 0.25 USD, so
/// the n-th prompt of this process reports n × C), sent before the reply;
/// the prompt response then carries this turn's tokens (*per turn*:
/// 100 input, 50 output, 10 thought, 20 cache read, 180 total).
fn usage_update(script: &Script, out: &Out, s: &str) -> Option<Value> {
    if !script.has("usage") {
        return None;
    }
    let n = PROMPTS.fetch_add(1, Ordering::SeqCst) + 1;
    let per: f64 = script
        .get("usage-cost")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0.25);
    update(
        out,
        s,
        json!({"sessionUpdate": "usage_update", "used": 1000 * n, "size": 200000,
            "cost": {"amount": per * n as f64, "currency": "USD"}}),
    );
    Some(
        json!({"totalTokens": 180, "inputTokens": 100, "outputTokens": 50,
        "thoughtTokens": 10, "cachedReadTokens": 20}),
    )
}

/// `--usage-meta`: usage as qwen-code reports it, only in `_meta.usage` of
/// an empty `agent_message_chunk` after each model call (two calls per
/// prompt here: 100 in, 20 out, 120 total; then 150 in, 30 out, 5 thought,
/// 40 cache read, 185 total), with no `usage_update` and no `usage` on the
/// prompt response.
fn usage_meta(script: &Script, out: &Out, s: &str) {
    if !script.has("usage-meta") {
        return;
    }
    for usage in [
        json!({"inputTokens": 100, "outputTokens": 20, "totalTokens": 120}),
        json!({"inputTokens": 150, "outputTokens": 30, "totalTokens": 185,
            "thoughtTokens": 5, "cachedReadTokens": 40}),
    ] {
        update(
            out,
            s,
            json!({"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": ""},
                "_meta": {"usage": usage, "durationMs": 7}}),
        );
    }
}

/// `--policy-probe honour|ignore|silent|unnamed`: at the prompt, the agent
/// of a policy probe. `honour` asks to write the probe file and writes it
/// only when allowed; `ignore` asks and writes it whatever the answer;
/// `silent` never asks and writes nothing; `unnamed` asks without naming
/// the file and writes nothing. Returns whether the mode was set (the
/// prompt then answers `end_turn`).
fn policy_probe(
    script: &Script,
    out: &Out,
    answers: &mpsc::Receiver<(String, Value)>,
    s: &str,
) -> bool {
    let Some(mode) = script.get("policy-probe") else {
        return false;
    };
    let file = lapis_protocol::probe::POLICY_PROBE_FILE;
    let path = std::env::current_dir().unwrap().join(file);
    if AUTO.load(Ordering::SeqCst) {
        // An automatic mode writes without asking.
        std::fs::write(&path, "written without asking\n").unwrap();
        return true;
    }
    let allowed = if mode == "silent" {
        false
    } else {
        let call = if mode == "unnamed" {
            json!({"toolCallId": "probe-write", "title": "Edit a file", "kind": "edit",
                "status": "pending"})
        } else {
            json!({"toolCallId": "probe-write", "title": format!("Write {file}"), "kind": "edit",
                "status": "pending", "locations": [{"path": path}]})
        };
        send(
            out,
            &json!({"jsonrpc": "2.0", "id": "probe-0", "method": "session/request_permission",
            "params": {"sessionId": s, "toolCall": call, "options": [
                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]}}),
        );
        matches!(answers.recv(), Ok((_, a)) if a["optionId"] == "allow")
    };
    if allowed || mode == "ignore" {
        std::fs::write(&path, "probe\n").expect("probe file");
    }
    update(
        out,
        s,
        json!({"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "I did not write anything."}}),
    );
    true
}

pub(crate) fn run_prompt(
    script: &Script,
    out: &Out,
    cancelled: &AtomicBool,
    id: Value,
    answers: mpsc::Receiver<(String, Value)>,
    s: &str,
    recall: Option<String>,
) {
    if policy_probe(script, out, &answers, s) {
        send(
            out,
            &json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}),
        );
        return;
    }
    let usage = usage_update(script, out, s);
    usage_meta(script, out, s);
    if let Some(recall) = recall {
        update(
            out,
            s,
            json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": format!("recall: {recall}\n")}}),
        );
    }
    if script.has("report-env") {
        let mut vars: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
        vars.sort();
        vars.push(format!(
            "cwd={}",
            std::env::current_dir().unwrap().display()
        ));
        for v in vars {
            update(
                out,
                s,
                json!({"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": v}}),
            );
        }
    }
    if script.has("hostile") {
        // Terminal attacks in every place a model's text reaches a person.
        update(
            out,
            s,
            json!({"sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": format!("think{HOSTILE}")}}),
        );
        update(
            out,
            s,
            json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": format!("reply{HOSTILE}\n")}}),
        );
        update(
            out,
            s,
            json!({"sessionUpdate": "tool_call", "toolCallId": "hostile-call",
            "title": format!("rm -rf /{HOSTILE}"), "kind": "execute", "status": "completed"}),
        );
    }
    for i in 0..script.num("thoughts") {
        update(
            out,
            s,
            json!({"sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": format!("thought {i}")}}),
        );
    }
    if script.has("plan") {
        update(
            out,
            s,
            json!({"sessionUpdate": "plan",
            "entries": [{"content": "step", "priority": "high", "status": "pending"}]}),
        );
    }
    for i in 0..script.num("tool-calls") {
        let tid = format!("tool-{i}");
        update(
            out,
            s,
            json!({"sessionUpdate": "tool_call", "toolCallId": tid,
            "title": format!("Edit file {i}"), "kind": "edit", "status": "pending"}),
        );
        update(
            out,
            s,
            json!({"sessionUpdate": "tool_call_update", "toolCallId": tid,
            "status": "in_progress", "locations": [{"path": format!("/w/f{i}.rs"), "line": i + 1}]}),
        );
        // `--tool-updates N`: N more updates carrying what agents stream
        // (the command it runs, a patch, then terminal-style output).
        for u in 0..script.num("tool-updates") {
            update(
                out,
                s,
                json!({"sessionUpdate": "tool_call_update", "toolCallId": tid,
                "rawInput": {"command": ["cargo", "test", format!("--step={u}")]},
                "content": [
                    {"type": "diff", "path": format!("/w/f{i}.rs"), "oldText": "old", "newText": format!("patch {u}")},
                    {"type": "content", "content": {"type": "text", "text": format!("output {u}")}}
                ]}),
            );
        }
        // `--tool-final in_progress` leaves the call without a terminal status.
        let last = script.get("tool-final").unwrap_or("completed");
        if last != "in_progress" {
            update(
                out,
                s,
                json!({"sessionUpdate": "tool_call_update", "toolCallId": tid,
                "status": last}),
            );
        }
    }
    if let Some(kind) = script.get("elicit") {
        // `elicitation/create` as ACP v1 shapes it: `empty` (form mode,
        // no fields: an approval), `fields` (a form with a field), `url`
        // (URL mode, which this client does not advertise); the answer
        // (its result or error) is reported as `elicit-0=…`.
        let params = match kind {
            "empty" => json!({"sessionId": s, "mode": "form", "message": "Apply the migration?",
                "requestedSchema": {"type": "object", "properties": {}}}),
            "fields" => json!({"sessionId": s, "mode": "form", "message": "Pick one",
                "requestedSchema": {"type": "object",
                    "properties": {"strategy": {"type": "string", "enum": ["a", "b"]}},
                    "required": ["strategy"]}}),
            _ => json!({"sessionId": s, "mode": "url", "elicitationId": "e-1",
                "url": "https://agent.example/connect", "message": "Authorize"}),
        };
        send(
            out,
            &json!({"jsonrpc": "2.0", "id": "elicit-0", "method": "elicitation/create",
            "params": params}),
        );
        if let Ok((key, outcome)) = answers.recv() {
            update(
                out,
                s,
                json!({"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": format!("{key}={outcome}")}}),
            );
        }
    }
    let perms = script.num("permissions");
    if perms > 0 && AUTO.load(Ordering::SeqCst) {
        // An automatic mode acts without asking.
        update(
            out,
            s,
            json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "acted without asking\n"}}),
        );
    } else if perms > 0 {
        let kinds = script.get("perm-kinds").unwrap_or("allow_once,reject_once");
        let hostile = if script.has("hostile") { HOSTILE } else { "" };
        let options: Vec<Value> = kinds
            .split(',')
            .map(|k| json!({"optionId": format!("opt-{k}"), "name": format!("{k}{hostile}"), "kind": k}))
            .collect();
        for i in 0..perms {
            send(
                out,
                &json!({"jsonrpc": "2.0", "id": format!("perm-{i}"),
                "method": "session/request_permission", "params": {"sessionId": s,
                "toolCall": {"toolCallId": format!("guarded-{i}"), "title": format!("Run command{hostile}"),
                    "kind": "execute", "status": "pending"},
                "options": options}}),
            );
        }
        let mut got: Vec<(String, Value)> = Vec::new();
        while got.len() < perms {
            match answers.recv() {
                Ok(a) => got.push(a),
                Err(_) => return,
            }
        }
        got.sort_by(|a, b| a.0.cmp(&b.0));
        for (key, outcome) in got {
            let text = match outcome["outcome"].as_str() {
                Some("selected") => {
                    format!("{key}={}", outcome["optionId"].as_str().unwrap_or("?"))
                }
                other => format!("{key}={}", other.unwrap_or("?")),
            };
            update(
                out,
                s,
                json!({"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text}}),
            );
        }
    }
    if script.has("secrets") {
        for sample in lapis_service::test_support::sample_credentials() {
            let text = format!("found {} in the repo; ", sample.text);
            let mut mid = text.len() / 2;
            while !text.is_char_boundary(mid) {
                mid -= 1;
            }
            for part in [&text[..mid], &text[mid..]] {
                update(
                    out,
                    s,
                    json!({"sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": part}}),
                );
            }
        }
        let token = &lapis_service::test_support::sample_credentials()[3].text;
        update(
            out,
            s,
            json!({"sessionUpdate": "tool_call", "toolCallId": "secret-call",
            "title": format!("curl -H 'Authorization: Bearer {token}'"), "status": "completed"}),
        );
    }
    let text = script.get("chunk-text").unwrap_or("chunk");
    for i in 0..script.num("chunks") {
        let mut u = json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": format!("{text}{i} ")}});
        if script.has("message-id") {
            u["messageId"] = json!("msg-1");
        }
        update(out, s, u);
    }
    if let Some(n) = script
        .get("oversized")
        .and_then(|v| v.parse::<usize>().ok())
    {
        update(
            out,
            s,
            json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "x".repeat(n)}}),
        );
    }
    if script.has("hang") {
        while !cancelled.load(Ordering::SeqCst) || script.has("ignore-cancel") {
            std::thread::sleep(Duration::from_millis(5));
        }
        let stop = script.get("cancel-stop").unwrap_or("cancelled");
        send(
            out,
            &json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": stop}}),
        );
        return;
    }
    if script.has("prompt-error") {
        send(
            out,
            &json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32603, "message": "model unavailable"}}),
        );
        return;
    }
    if script.has("exit-after-stream") {
        std::process::exit(3);
    }
    let stop = script.get("stop-reason").unwrap_or("end_turn");
    let mut result = json!({"stopReason": stop});
    if let Some(usage) = usage {
        result["usage"] = usage;
    }
    send(out, &json!({"jsonrpc": "2.0", "id": id, "result": result}));
    for i in 0..script.num("after-response") {
        update(
            out,
            s,
            json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": format!("late{i}")}}),
        );
    }
    if let Some(path) = script.get("idle-request") {
        // Between turns: a request no client serves, then the answer as
        // `key=outcome` appended to PATH the moment it arrives.
        send(
            out,
            &json!({"jsonrpc": "2.0", "id": "idle-0", "method": "fs/read_text_file",
            "params": {"sessionId": s, "path": "/etc/hostname"}}),
        );
        if let Ok((key, outcome)) = answers.recv() {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .expect("idle-request file");
            writeln!(f, "{key}={outcome}").expect("idle-request write");
        }
    }
}
