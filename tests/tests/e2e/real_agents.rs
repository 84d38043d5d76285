//! Real coding agents from npm against a local model stand-in (issue 40's
//! tests): qwen-code and claude-agent-acp, pinned in
//! `tests/agents/real-agents/package-lock.json` (the newest releases that
//! run on Node 20), each talking to `model-standin.mjs`, which answers like
//! the OpenAI and Anthropic APIs, refuses a tool name outside
//! `^[a-zA-Z0-9_-]{1,64}$` with 400 as they do, and records every request.
//!
//! For each agent, on an `ask` thread bound to an application's tools and
//! context port: the session is put in the provider's asking mode and that
//! is recorded; every tool name the model is offered passes the APIs' rule
//! and the application's tool is called through it once; the context
//! block reaches the model before the user's text, which is not glued to
//! anything; the usage the model reported is on the turn; and a file write
//! the agent wants is asked for, and a rejection keeps the file off disk.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lapis_protocol::client::Client;
use lapis_protocol::params::ThreadsCreate;
use lapis_protocol::{ApprovalPolicy, ModeResult, Note, Payload, TurnState};
use serde_json::{Value, json};

use crate::context::serve_notes;
use crate::policy::app;
use crate::serve_support::{OWNER, Server};
use crate::tools::serve_crm;

/// `tests/agents/real-agents`.
fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("agents/real-agents")
}

/// The agent's installed command, or `None` after saying why (a failure
/// under CI: `.ci/run` installs them with `tests/agents/install`).
fn installed(bin: &str, test: &str) -> Option<PathBuf> {
    let path = dir().join("node_modules/.bin").join(bin);
    if path.is_file() {
        return Some(path);
    }
    lapis_e2e::skip::skip(&format!(
        "{} is not installed; run tests/agents/install [{test}]",
        path.display()
    ));
    None
}

/// The model stand-in, listening on loopback; killed when dropped.
struct Standin {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Standin {
    fn start(scratch: &Path) -> Standin {
        let log = scratch.join("model.jsonl");
        let mut child = Command::new("node")
            .arg(dir().join("model-standin.mjs"))
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("node runs the model stand-in");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the stand-in said {line:?}"));
        Standin { child, port, log }
    }

    /// Every request the model was sent, in order.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Standin {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // What the model was sent, for the failure's reader: kept
            // whole beside the temp dir, summarized here.
            let kept = std::env::temp_dir().join(format!(
                "lapis-real-agents-{}-{}.jsonl",
                std::process::id(),
                self.port
            ));
            if std::fs::copy(&self.log, &kept).is_ok() {
                eprintln!("the model's requests: {}", kept.display());
            }
            for r in self.requests() {
                let last = r["body"]["messages"]
                    .as_array()
                    .and_then(|m| m.last())
                    .map(|m| m.to_string())
                    .unwrap_or_default();
                let cut: String = last.chars().take(400).collect();
                eprintln!(
                    "model request {} {}: tools {:?}; last message {cut}",
                    r["method"],
                    r["path"],
                    offered(&r)
                );
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The rule both model APIs hold function and tool names to.
fn api_accepts(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The names of the tools a request offered the model (either API).
fn offered(request: &Value) -> Vec<String> {
    request["body"]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().or(t["name"].as_str()))
        .map(str::to_owned)
        .collect()
}

/// The text parts of a request's messages, in order (either API).
fn texts(request: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in request["body"]["messages"].as_array().into_iter().flatten() {
        match &m["content"] {
            Value::String(s) => out.push(s.clone()),
            Value::Array(parts) => out.extend(
                parts
                    .iter()
                    .filter(|p| p["type"] == "text")
                    .filter_map(|p| p["text"].as_str().map(str::to_owned)),
            ),
            _ => {}
        }
    }
    out
}

/// The mode the turn's session was put in, as journaled.
fn ask_mode(client: &mut Client, thread: &str, turn: &str) -> (Option<String>, Option<ModeResult>) {
    let page = client.journal_replay(Some(thread), 0, None).unwrap();
    page.events
        .iter()
        .filter(|e| e.turn_id.as_deref() == Some(turn))
        .find_map(|e| match lapis_e2e::journal::note(e)? {
            Note::AskMode(m) => Some((m.mode.clone(), m.result)),
            _ => None,
        })
        .unwrap_or((None, None))
}

/// Waits for `turn` to settle, answering each of its permission requests
/// with the option of `kind`; returns it settled and how many were asked.
fn drive(c: &mut Client, thread: &str, turn: &str, kind: &str) -> (lapis_protocol::Turn, usize) {
    let mut answered = std::collections::BTreeSet::new();
    let done = lapis_e2e::wait::eventually("the turn settles", || {
        let now = c.turns_get(turn).unwrap();
        if lapis_e2e::wait::settled(now.state.as_str()) {
            return Some(now);
        }
        let page = c.journal_replay(Some(thread), 0, None).unwrap();
        for e in &page.events {
            let Some(Payload::PermissionRequested(r)) = e.body() else {
                continue;
            };
            if e.turn_id.as_deref() != Some(turn) || !answered.insert(r.request_id.clone()) {
                continue;
            }
            let option = r
                .options
                .iter()
                .find(|o| o.kind == kind)
                .unwrap_or_else(|| panic!("no {kind} in {:?}", r.options));
            c.permissions_respond(turn, &r.request_id, &option.id)
                .unwrap();
        }
        None
    });
    (done, answered.len())
}

/// Drives one real agent through the checks in the module docs.
fn interop(name: &str, bin: &Path, provider: impl Fn(u16) -> Value) {
    let scratch = tempfile::tempdir().unwrap();
    let standin = Standin::start(scratch.path());
    let server = Server::start_full(json!({}), json!({ name: provider(standin.port) }));
    let stop = Arc::new(AtomicBool::new(false));
    let (seen, crm) = serve_crm(&server, "interop", stop.clone());
    let (asked, notes) = serve_notes(&server, "interop", None, None, stop.clone());
    let mut c = app(&server, OWNER, "interop");
    let mut params = ThreadsCreate::new("proj", name)
        .approval(ApprovalPolicy::Ask)
        .tools(["crm"]);
    params.ports.context = Some("notes".into());
    let thread = c.threads_create_with(&params).unwrap().thread.id;
    let prompt = "CALL_TOOL crm__find for Ada";
    let turn = c.turns_submit(&thread, "ra-1", prompt).unwrap();
    // In its asking mode the agent may ask before calling the tool: allowed.
    let (done, _) = drive(&mut c, &thread, &turn.id, "allow_once");
    assert_eq!(done.state, TurnState::Completed, "{name}: {done:?}");

    // Asked for in its asking mode, and that is on the record.
    assert_eq!(
        ask_mode(&mut c, &thread, &turn.id),
        (Some("default".to_owned()), Some(ModeResult::Applied)),
        "{name}: the ask_mode observation"
    );

    // Every name offered passes the APIs' rule; the application's tool was
    // offered and called through it, once.
    let requests = standin.requests();
    let names: Vec<String> = requests.iter().flat_map(offered).collect();
    let refused: Vec<&String> = names.iter().filter(|n| !api_accepts(n)).collect();
    assert!(
        refused.is_empty(),
        "{name}: names a model API refuses: {refused:?}"
    );
    assert!(
        names.iter().any(|n| n.ends_with("crm__find")),
        "{name}: the application's tool was not offered: {names:?}"
    );
    let invoked: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.starts_with("invoke "))
        .cloned()
        .collect();
    assert_eq!(invoked.len(), 1, "{name}: {invoked:?}");
    assert!(invoked[0].starts_with("invoke find "), "{invoked:?}");

    // The context first, the user's text whole and apart.
    assert_eq!(asked.lock().unwrap().len(), 1, "{name}: context asked once");
    let first = requests
        .iter()
        .find(|r| texts(r).iter().any(|t| t.contains(prompt)))
        .unwrap_or_else(|| panic!("{name}: no request carried the prompt"));
    let all = texts(first).join("\u{0}");
    let context_at = all
        .find("Ada prefers tea")
        .unwrap_or_else(|| panic!("{name}: the context never reached the model: {all}"));
    let prompt_at = all.find(prompt).unwrap();
    assert!(
        context_at < prompt_at,
        "{name}: the prompt came first: {all}"
    );
    let before = all[..prompt_at].chars().last();
    assert!(
        before.is_none_or(|ch| ch.is_whitespace() || ch == '\u{0}'),
        "{name}: the prompt is glued to {before:?}: {all}"
    );

    // The usage the model reported is the turn's.
    let usage = done
        .usage
        .as_ref()
        .unwrap_or_else(|| panic!("{name}: no usage"));
    assert!(
        usage.input_tokens >= 100 && usage.output_tokens >= 7,
        "{name}: {usage:?}"
    );

    // `ask` is honoured: the write is asked for; rejected, it never lands.
    let target = server.project.join("asked.txt");
    let write = format!("WRITE_FILE {}", target.display());
    let turn = c.turns_submit(&thread, "ra-2", &write).unwrap();
    let (done, asked) = drive(&mut c, &thread, &turn.id, "reject_once");
    let rejected = asked > 0;
    assert!(rejected, "{name}: the write was never asked for: {done:?}");
    assert!(!target.exists(), "{name}: a rejected write landed");

    stop.store(true, Ordering::SeqCst);
    drop(crm.join().unwrap());
    drop(notes.join().unwrap());
    server.finish(&[], &[]);
    let _ = bin;
}

/// The agent's environment: the stand-in's address, a key it accepts, and
/// `PATH` for `node`.
fn env(pairs: &[(&str, String)]) -> Value {
    let mut env = json!({
        "PATH": std::env::var("PATH").unwrap_or_default(),
    });
    for (k, v) in pairs {
        env[*k] = json!(v);
    }
    env
}

#[test]
fn qwen_code_is_asked_offered_valid_names_given_context_first_and_counted() {
    let Some(bin) = installed("qwen", "qwen_code") else {
        return;
    };
    let command = bin.clone();
    interop("qwen", &bin, move |port| {
        json!({
            "command": command,
            "args": ["--acp"],
            "askMode": "default",
            "envAllowlist": ["HOME"],
            "env": env(&[
                ("OPENAI_BASE_URL", format!("http://127.0.0.1:{port}/v1")),
                ("OPENAI_MODEL", "standin".into()),
                ("OPENAI_API_KEY", "sk-standin".into()),
            ]),
        })
    });
}

#[test]
fn claude_agent_acp_is_asked_offered_valid_names_given_context_first_and_counted() {
    let Some(bin) = installed("claude-agent-acp", "claude_agent_acp") else {
        return;
    };
    let command = bin.clone();
    interop("claude", &bin, move |port| {
        json!({
            "command": command,
            "askMode": "default",
            "envAllowlist": ["HOME"],
            "env": env(&[
                ("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}")),
                ("ANTHROPIC_API_KEY", "sk-ant-standin".into()),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
                ("DISABLE_AUTOUPDATER", "1".into()),
            ]),
        })
    });
}
