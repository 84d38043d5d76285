//! A scripted ACP v1 agent for the end-to-end tests. Each test picks its
//! behaviour with arguments (the controller clears the agent's environment,
//! so arguments are the one reliable channel):
//!
//! `--chunks N` `--chunk-text T` `--thoughts N` `--tool-calls N`
//! `--tool-final STATUS` (the calls' last status; `in_progress` sends none)
//! `--tool-updates N` (N more updates per call: a command, a patch, output) `--plan`
//! `--message-id` `--permissions N` `--perm-kinds k1,k2` `--hang`
//! `--ignore-cancel` `--cancel-stop R` `--stop-reason R`
//! `--exit-at initialize|session_new|prompt` `--fail-initialize`
//! `--never-initialize` (reads `initialize` and never answers)
//! `--close-stdout-at prompt` (closes stdout at the prompt and keeps running)
//! `--exit-leaving-stdout PIDFILE` (at the prompt, leaves a descendant
//! holding stdout open and exits)
//! `--auth-required` `--protocol-version N` (answers N whatever was asked)
//! `--protocol-versions 1,2` (speaks those: answers the client's version
//! when it is one of them, else the latest, as ACP's negotiation says)
//! `--after-response N`
//! `--oversized BYTES` `--grandchild PIDFILE` `--linger` `--ledger PATH`
//! `--embedded-context` (advertise `promptCapabilities.embeddedContext`;
//! `--advertise` does unless `--no-embedded-context`)
//! `--report-env` `--stderr N` (`--stderr-bytes N` pads each line)
//! `--exit-after-stream` `--prompt-error`
//! `--elicit empty|fields|url` (see `prompt.rs`) `--pidfile PATH` `--load-session` `--history PATH`
//! `--hostile` (puts [`HOSTILE`], terminal control sequences, into a thought,
//! the reply, a tool call's title, permission titles and option names and
//! its stderr lines)
//! `--recall` `--advertise` (agent info, capabilities, an auth method and
//! session modes) `--expect-env NAME=VALUE` (initialize fails unless the
//! environment has exactly that; `VALUE` `@PATH` reads it from a file, so it
//! need not appear in argv or output; never echoed) `--secrets` (prints
//! every sample credential of `lapis_service::redact` to stderr and streams
//! each as two message chunks split in its middle, plus one tool call whose
//! title carries one); `--sleeper PIDFILE` is the grandchild itself.
//! `session/set_mode` accepts `default` and `plan` (with a
//! `current_mode_update`); `--start-mode auto` starts every session in an
//! automatic mode `auto` (modes advertised: `auto`, `default`, `plan`), like
//! claude-agent-acp 0.101 and qwen-code 0.24: there it asks no permission
//! (`--permissions` and `--policy-probe` act without asking) until a
//! `session/set_mode` to another mode, which `--ignore-mode` answers with
//! success while staying in `auto`; `--reject-mode` refuses every request,
//! `--no-set-mode` answers "method not found", `--mode-ledger PATH` appends
//! each requested mode id. `--mcp-ledger PATH` appends the `mcpServers` of
//! every `session/new` and `session/load` (one JSON line each);
//! `--mcp-caps http,sse|none` sets the advertised `mcpCapabilities`.
//! `--mcp-tools`: an MCP client (`rmcp`) of the session's `lapis-tools`
//! bridge; prompt lines `call NAME JSON` and `list` use it (see `mcp.rs`;
//! `--mcp-timing` adds each call's time as the agent saw it).
//! `--policy-probe honour|ignore|silent|unnamed`: the agent a policy probe
//! (`providers check --policy`) meets (see `prompt.rs`).
//! `--idle-request PATH`: after answering a prompt, sends a
//! `fs/read_text_file` request and appends `idle-0=<outcome>` to PATH when
//! its answer arrives.
//!
//! Sessions: each `session/new` gets an id unique to this process
//! (`fx-<pid>-<n>`); a prompt naming another session is refused. `--history
//! PATH` keeps every prompt of the session in a file (the agent's own
//! session store, surviving the process); `--load-session` advertises
//! `loadSession` and replays that history on `session/load` as
//! `user_message_chunk` updates; `--recall` makes the reply start with
//! `recall: p1 | p2 | …`, every prompt the session has seen.
//!
//! `--touch a.txt,dir/b.txt`: at each prompt, appends a line to each of
//! those files (relative to the agent's working directory, its
//! workspace), creating them and their directories, before it answers
//! (or hangs): the agent's edits that workspace snapshots must show.
//!
//! `--linger` is the third-party agent that keeps running after its stdin
//! closes but dies at once of SIGTERM (the default action: no handler is
//! installed). `--pidfile PATH` writes the agent's own pid before it reads
//! anything, so a test can watch the process itself.

// Visibility is a design statement: an item another crate does not use is
// `pub(crate)`, so the compiler reports what nothing uses.
#![warn(unreachable_pub)]

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

#[path = "fixture-agent/files.rs"]
mod files;
#[path = "fixture-agent/mcp.rs"]
mod mcp;
#[path = "fixture-agent/prompt.rs"]
mod prompt;

use files::{prompt_text, record, write_pid};
use prompt::run_prompt;

/// Whether the agent is in its automatic mode now (`--start-mode auto`,
/// until a `session/set_mode` it honours): it then acts without asking.
static AUTO: AtomicBool = AtomicBool::new(false);

#[derive(Debug, Default, Clone)]
struct Script {
    flags: HashMap<String, String>,
}

impl Script {
    fn parse() -> Script {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut flags = HashMap::new();
        let mut i = 0;
        while i < args.len() {
            let key = args[i].trim_start_matches("--").to_string();
            match args.get(i + 1) {
                Some(v) if !v.starts_with("--") => {
                    flags.insert(key, v.clone());
                    i += 2;
                }
                _ => {
                    flags.insert(key, String::new());
                    i += 1;
                }
            }
        }
        Script { flags }
    }
    fn has(&self, k: &str) -> bool {
        self.flags.contains_key(k)
    }
    fn get(&self, k: &str) -> Option<&str> {
        self.flags.get(k).map(String::as_str)
    }
    fn num(&self, k: &str) -> usize {
        self.get(k).and_then(|v| v.parse().ok()).unwrap_or(0)
    }
}

/// What a hostile model writes to take over a terminal: erase the line and
/// rewrite it (CSI 2K, CSI 1G), the one-byte CSI, an OSC window title, a
/// bare CR, backspaces and DEL.
pub(crate) const HOSTILE: &str = "\x1b[2K\x1b[1G\u{9b}31m\x1b]0;pwned\x07 over\rwrite\x08\x08!\x7f";

type Out = Arc<Mutex<std::io::Stdout>>;

fn send(out: &Out, msg: &Value) {
    let mut line = serde_json::to_vec(msg).expect("serialize");
    line.push(b'\n');
    let mut o = out.lock().expect("stdout lock");
    // A closed pipe means the controller is gone; exit quietly.
    if o.write_all(&line).and_then(|_| o.flush()).is_err() {
        std::process::exit(0);
    }
}

fn update(out: &Out, session: &str, update: Value) {
    send(
        out,
        &json!({"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": session, "update": update}}),
    );
}

/// Closes stdout (the controller reads EOF) and keeps running, reading
/// stdin, until the controller kills the process group.
fn close_stdout_and_linger() -> ! {
    let _ = nix::unistd::close(1);
    std::thread::sleep(Duration::from_secs(600));
    std::process::exit(0)
}

fn main() {
    let script = Script::parse();
    if let Some(pidfile) = script.get("sleeper") {
        write_pid(pidfile);
        std::thread::sleep(Duration::from_secs(600));
        return;
    }
    if let Some(pidfile) = script.get("pidfile") {
        write_pid(pidfile);
    }
    for i in 0..script.num("stderr") {
        let hostile = if script.has("hostile") { HOSTILE } else { "" };
        // `--stderr-bytes N` pads each line to N bytes.
        let line = format!("fixture stderr line {i}{hostile}");
        let pad = script.num("stderr-bytes").saturating_sub(line.len());
        eprintln!("{line}{}", ".".repeat(pad));
    }
    if script.has("secrets") {
        for sample in lapis_service::test_support::sample_credentials() {
            eprintln!("debug: {}", sample.text);
        }
    }
    let out: Out = Arc::new(Mutex::new(std::io::stdout()));
    let cancelled = Arc::new(AtomicBool::new(false));
    let mut answers: Option<mpsc::Sender<(String, Value)>> = None;
    let mut session: Option<String> = None;
    let mut sessions = 0u32;
    let mut memory: Vec<String> = Vec::new();
    let mut worker: Option<std::thread::JoinHandle<()>> = None;
    let stdin = std::io::stdin().lock();
    for line in stdin.lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
        let id = msg.get("id").cloned();
        match (method, id) {
            ("initialize", Some(id)) => {
                if script.get("exit-at") == Some("initialize") {
                    std::process::exit(3);
                }
                if script.has("never-initialize") {
                    // Reads on (so stdin never blocks the controller) and
                    // never answers.
                    continue;
                }
                if script.has("fail-initialize") {
                    send(
                        &out,
                        &json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32603, "message": "init broke"}}),
                    );
                    continue;
                }
                let expected = script
                    .get("expect-env")
                    .and_then(|e| e.split_once('='))
                    .map(|(n, v)| {
                        let v = match v.strip_prefix('@') {
                            Some(file) => std::fs::read_to_string(file).expect("expect-env file"),
                            None => v.to_string(),
                        };
                        (n.to_string(), v)
                    });
                if let Some((name, want)) = expected
                    && std::env::var(&name).ok() != Some(want)
                {
                    send(
                        &out,
                        &json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32603, "message": format!("{name} is missing or differs")}}),
                    );
                    continue;
                }
                // `--protocol-versions 1,2`: the versions it speaks, chosen
                // as ACP says (the client's when it speaks it, else its
                // latest); `--protocol-version N` answers N whatever asked.
                let requested = msg["params"]["protocolVersion"].as_u64();
                let offered: Vec<u64> = script
                    .get("protocol-versions")
                    .map(|v| v.split(',').filter_map(|n| n.parse().ok()).collect())
                    .unwrap_or_default();
                let version = if offered.is_empty() {
                    script
                        .get("protocol-version")
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(1)
                } else if let Some(r) = requested.filter(|r| offered.contains(r)) {
                    r
                } else {
                    offered.iter().copied().max().unwrap_or(1)
                };
                let result = if script.has("advertise") {
                    json!({"protocolVersion": version,
                        "agentInfo": {"name": "fixture-agent", "version": "1.2.3"},
                        "agentCapabilities": {"loadSession": true,
                            "mcpCapabilities": {"http": true, "sse": false},
                            "promptCapabilities": {"image": false, "audio": false,
                                "embeddedContext": !script.has("no-embedded-context")}},
                        "authMethods": [{"id": "fixture-login", "name": "Fixture login", "description": "run fixture login"}]})
                } else {
                    json!({"protocolVersion": version,
                        "agentCapabilities": {"loadSession": script.has("load-session"),
                            "promptCapabilities": {"embeddedContext": script.has("embedded-context")}},
                        "authMethods": []})
                };
                let mut result = result;
                files::mcp_capabilities(&script, &mut result);
                files::session_capabilities(&script, &mut result);
                send(&out, &json!({"jsonrpc": "2.0", "id": id, "result": result}));
            }
            ("session/new", Some(id)) => {
                files::mcp_ledger(&script, "session/new", &msg["params"]);
                mcp::session_started(&msg["params"]["mcpServers"]);
                if script.get("exit-at") == Some("session_new") {
                    std::process::exit(3);
                }
                if script.has("auth-required") {
                    send(
                        &out,
                        &json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32000, "message": "Authentication required"}}),
                    );
                    continue;
                }
                if let Some(pidfile) = script.get("grandchild") {
                    let exe = std::env::current_exe().expect("current exe");
                    // Deliberately never waited for: it must outlive this
                    // agent unless the controller kills the whole group.
                    let _grandchild = std::process::Command::new(exe)
                        .args(["--sleeper", pidfile])
                        .stdin(std::process::Stdio::null())
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .spawn()
                        .expect("spawn grandchild");
                    std::mem::forget(_grandchild);
                    // Answer only once the grandchild is up, so a test can
                    // always find its pid.
                    while !std::path::Path::new(pidfile).exists() {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
                sessions += 1;
                let sid = format!("fx-{}-{sessions}", std::process::id());
                memory.clear();
                session = Some(sid.clone());
                let mut result = json!({"sessionId": sid});
                if script.has("advertise") {
                    result["modes"] = json!({"currentModeId": "default", "availableModes": [
                        {"id": "default", "name": "Default"}, {"id": "plan", "name": "Plan"}]});
                }
                let auto = script.get("start-mode") == Some("auto");
                AUTO.store(auto, Ordering::SeqCst);
                if auto {
                    result["modes"] = json!({"currentModeId": "auto", "availableModes": [
                        {"id": "auto", "name": "Auto"}, {"id": "default", "name": "Default"},
                        {"id": "plan", "name": "Plan"}]});
                }
                send(&out, &json!({"jsonrpc": "2.0", "id": id, "result": result}));
            }
            ("session/resume", Some(id)) if script.has("resume-session") => {
                files::mcp_ledger(&script, "session/resume", &msg["params"]);
                let sid = msg["params"]["sessionId"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                files::lifecycle(&script, "resume", &sid);
                if script.has("refuse-resume") {
                    send(
                        &out,
                        &json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32603, "message": "cannot resume"}}),
                    );
                    continue;
                }
                mcp::session_started(&msg["params"]["mcpServers"]);
                // The history comes back into memory; nothing is replayed.
                memory = script
                    .get("history")
                    .and_then(|h| std::fs::read_to_string(h).ok())
                    .map(|t| t.lines().map(str::to_string).collect())
                    .unwrap_or_default();
                session = Some(sid);
                send(&out, &json!({"jsonrpc": "2.0", "id": id, "result": {}}));
            }
            ("session/close", Some(id)) if script.has("close-session") => {
                let sid = msg["params"]["sessionId"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                files::lifecycle(&script, "close", &sid);
                if session.as_deref() == Some(sid.as_str()) {
                    session = None;
                }
                send(&out, &json!({"jsonrpc": "2.0", "id": id, "result": {}}));
            }
            ("session/load", Some(id)) if script.has("load-session") => {
                files::mcp_ledger(&script, "session/load", &msg["params"]);
                files::lifecycle(
                    &script,
                    "load",
                    msg["params"]["sessionId"].as_str().unwrap_or(""),
                );
                mcp::session_started(&msg["params"]["mcpServers"]);
                let sid = msg["params"]["sessionId"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                memory = script
                    .get("history")
                    .and_then(|h| std::fs::read_to_string(h).ok())
                    .map(|t| t.lines().map(str::to_string).collect())
                    .unwrap_or_default();
                for text in &memory {
                    update(
                        &out,
                        &sid,
                        json!({"sessionUpdate": "user_message_chunk",
                        "content": {"type": "text", "text": text}}),
                    );
                }
                session = Some(sid);
                send(&out, &json!({"jsonrpc": "2.0", "id": id, "result": {}}));
            }
            ("session/prompt", Some(id)) => {
                let params = msg.get("params").cloned().unwrap_or(Value::Null);
                if params["sessionId"].as_str() != session.as_deref() {
                    send(
                        &out,
                        &json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32602, "message": "unknown session"}}),
                    );
                    continue;
                }
                let text = prompt_text(&params);
                if let Some(history) = script.get("history") {
                    let mut f = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(history)
                        .expect("history");
                    writeln!(f, "{text}").expect("history write");
                }
                // The prompt's own lines (`text` has them joined), each
                // block on its own lines: a block before the user's text
                // (continuation, context) must not run into its first line.
                let calls = script.has("mcp-tools").then(|| -> String {
                    params["prompt"]
                        .as_array()
                        .map(|b| {
                            b.iter()
                                .filter_map(|x| x["text"].as_str())
                                .collect::<Vec<_>>()
                                .join("\n")
                        })
                        .unwrap_or_default()
                });
                memory.push(text);
                let recall = script.has("recall").then(|| memory.join(" | "));
                let sid = session.clone().unwrap_or_default();
                if let Some(ledger) = script.get("ledger") {
                    record(ledger, &params);
                }
                if let Some(paths) = script.get("touch") {
                    files::touch(paths);
                }
                if script.get("exit-at") == Some("prompt") {
                    std::process::exit(3);
                }
                if script.get("close-stdout-at") == Some("prompt") {
                    close_stdout_and_linger();
                }
                if let Some(pidfile) = script.get("exit-leaving-stdout") {
                    // A descendant inherits stdout and keeps it open; the
                    // leader exits without answering.
                    let exe = std::env::current_exe().expect("current exe");
                    let _keeper = std::process::Command::new(exe)
                        .args(["--sleeper", pidfile])
                        .stdin(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .spawn()
                        .expect("spawn stdout keeper");
                    std::process::exit(3);
                }
                let (tx, rx) = mpsc::channel();
                answers = Some(tx);
                let timing = script.has("mcp-timing");
                let (s, o, c) = (script.clone(), out.clone(), cancelled.clone());
                cancelled.store(false, Ordering::SeqCst);
                if let Some(previous) = worker.take() {
                    let _ = previous.join();
                }
                worker = Some(std::thread::spawn(move || {
                    if let Some(calls) = calls {
                        mcp::run_calls(&o, &sid, &calls, timing);
                    }
                    run_prompt(&s, &o, &c, id, rx, &sid, recall)
                }));
            }
            ("session/cancel", None) => cancelled.store(true, Ordering::SeqCst),
            ("session/set_mode", Some(id)) => {
                // Modes `default` and `plan` (see --advertise); --reject-mode
                // refuses every request; --no-set-mode does not implement it.
                let mode = msg.pointer("/params/modeId").and_then(Value::as_str);
                let session = msg.pointer("/params/sessionId").and_then(Value::as_str);
                if let Some(ledger) = script.get("mode-ledger") {
                    let line = format!("{}\n", mode.unwrap_or("?"));
                    let mut f = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(ledger)
                        .expect("mode ledger");
                    f.write_all(line.as_bytes()).expect("mode ledger write");
                }
                let error = if script.has("no-set-mode") {
                    Some(json!({"code": -32601, "message": "method not found"}))
                } else if script.has("reject-mode") || !matches!(mode, Some("default" | "plan")) {
                    Some(json!({"code": -32602, "message": "mode refused"}))
                } else {
                    None
                };
                match error {
                    Some(error) => send(&out, &json!({"jsonrpc": "2.0", "id": id, "error": error})),
                    None if script.has("ignore-mode") => {
                        // Success, and nothing changes.
                        send(&out, &json!({"jsonrpc": "2.0", "id": id, "result": {}}));
                    }
                    None => {
                        AUTO.store(false, Ordering::SeqCst);
                        update(
                            &out,
                            session.unwrap_or("fx-1"),
                            json!({"sessionUpdate": "current_mode_update", "currentModeId": mode}),
                        );
                        send(&out, &json!({"jsonrpc": "2.0", "id": id, "result": {}}));
                    }
                }
            }
            ("", Some(id)) => {
                // A response to one of our permission requests.
                let key = id.as_str().unwrap_or_default().to_string();
                if let (Some(tx), Some(result)) = (&answers, msg.get("result")) {
                    // A permission's `outcome`, else (an elicitation) the
                    // whole result.
                    let answer = result.get("outcome").unwrap_or(result).clone();
                    let _ = tx.send((key, answer));
                } else if let (Some(tx), Some(err)) = (&answers, msg.get("error")) {
                    let _ = tx.send((key, json!({"error": err["code"]})));
                }
            }
            (_, Some(id)) => send(
                &out,
                &json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"}}),
            ),
            _ => {}
        }
    }
    if script.has("linger") {
        std::thread::sleep(Duration::from_secs(600));
    }
    // Finish what the prompt started (late updates) before exiting; a
    // hanging worker is ended by the controller's teardown.
    if let Some(worker) = worker {
        let _ = worker.join();
    }
}
