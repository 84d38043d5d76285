//! `serve` and the CLI service commands, end to end.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::process::Stdio;

use lapis_e2e::TestContext;
use serde_json::{Value, json};

use crate::serve_support::{OWNER, Server, write_config};

#[test]
fn status_reports_identity_and_counters() {
    let server = Server::start();
    let out = server.ctx.run(["status", "--json"]);
    out.success();
    let doc = out.json();
    assert_eq!(doc["protocol"], "lapis-ai-controller/1");
    assert_eq!(doc["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(doc["pid"], server.pid());
    assert_eq!(doc["queue"]["depth"], 0);
    assert_eq!(doc["queue"]["capacity"], 1024);
    assert_eq!(doc["runningWorkspaces"], json!([]));
    assert_eq!(doc["fencedWorkspaces"], json!([]));
    assert!(doc["build"]["target"].is_string());
    assert!(doc.get("snapshot").is_some());
    assert!(doc["uptimeSeconds"].is_u64());
    let text = server.ctx.run(["status"]);
    text.success();
    assert!(
        text.stdout.contains("lapis-ai-controller/1"),
        "{}",
        text.stdout
    );
    server.finish(&[], &[]);
}

#[test]
fn status_exits_3_when_the_service_is_not_running() {
    let ctx = TestContext::new();
    write_config(&ctx, json!({}), json!({}));
    let out = ctx.run(["status", "--json"]);
    out.expect_code(3);
    assert_eq!(out.json()["error"]["code"], "unavailable");
    // What to do, never "try status": start the unit or run `serve`.
    assert!(out.stderr.contains("not running"), "{}", out.stderr);
    assert!(out.stderr.contains(" serve --config "), "{}", out.stderr);
    assert!(!out.stderr.contains("try `"), "{}", out.stderr);
    ctx.assert_no_secret(
        OWNER,
        &[&ctx.home().join(".config/lapis-ai-controller/config.json")],
    );
}

#[test]
fn socket_is_private_and_sigterm_stops_cleanly() {
    let mut server = Server::start();
    let meta = std::fs::metadata(server.socket()).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(server.stop(), Some(0), "{}", server.log_text());
    assert!(!server.socket().exists(), "socket removed on stop");
    let log = server.log_text();
    assert!(
        log.contains("listening") && log.contains("stopped"),
        "{log}"
    );
    server.finish(&[], &[]);
}

#[test]
fn stale_socket_is_replaced_and_a_second_server_is_refused() {
    let mut server = Server::start();
    server.stop();
    // Leave a stale socket file behind (bound, then the listener dropped).
    let stale = std::os::unix::net::UnixListener::bind(server.socket()).unwrap();
    drop(stale);
    assert!(server.socket().exists());
    server.spawn();
    server.ctx.run(["status"]).success();
    // A second server on the same home fails on the instance lock and does
    // not disturb the running one's socket.
    let second = server.ctx.run(["serve"]);
    second.expect_code(2);
    assert!(second.stderr.contains("locked"), "{}", second.stderr);
    server.ctx.run(["status"]).success();
    assert!(server.alive());
    server.finish(&[], &[]);
}

#[test]
fn config_workspace_alias_and_runtime_alias_are_refused() {
    let ctx = TestContext::new();
    let dir = ctx.home().join("p");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&dir, ctx.home().join("link")).unwrap();
    write_config(
        &ctx,
        json!({}),
        json!({ "a": { "path": dir }, "b": { "path": ctx.home().join("link") } }),
    );
    let out = ctx.run(["serve"]);
    out.expect_code(2);
    assert!(out.stderr.contains("workspace_alias"), "{}", out.stderr);

    let server = Server::start();
    let proj = server.project.to_str().unwrap().to_owned();
    let out = server
        .ctx
        .run(["workspaces", "add", "again", &proj, "--json"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "workspace_alias");
    let other = server.ctx.home().join("other");
    std::fs::create_dir_all(&other).unwrap();
    server
        .ctx
        .run(["workspaces", "add", "other", other.to_str().unwrap()])
        .success();
    let list = server.ctx.run(["workspaces", "list", "--json"]);
    let ids: Vec<String> = list.json()["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.contains(&"proj".to_owned()) && ids.contains(&"other".to_owned()));
    server.finish(&[], &[]);
}

#[test]
fn cli_threads_turns_and_journal() {
    let server = Server::start();
    let ctx = &server.ctx;
    let thread = ctx.run(["threads", "create", "proj", "--json"]);
    thread.success();
    let thread_id = thread.json()["thread"]["id"].as_str().unwrap().to_owned();
    let plain = ctx.run(["threads", "create", "proj", "--approval", "allow-all"]);
    plain.success();
    assert!(plain.stdout.trim().starts_with("thr_"), "{}", plain.stdout);
    let list = ctx.run(["threads", "list", "--json"]).json();
    assert_eq!(list["threads"].as_array().unwrap().len(), 2);

    let submit = ctx.run([
        "turns",
        "submit",
        &thread_id,
        "--prompt",
        "do the thing",
        "--command-id",
        "cmd-1",
        "--json",
    ]);
    submit.success();
    let turn = submit.json()["turn"].clone();
    let turn_id = turn["id"].as_str().unwrap().to_owned();
    assert_eq!(turn["threadId"], thread_id.as_str());
    // Idempotent: the same command id and input give the same turn …
    let again = ctx.run([
        "turns",
        "submit",
        &thread_id,
        "--prompt",
        "do the thing",
        "--command-id",
        "cmd-1",
        "--json",
    ]);
    assert_eq!(again.json()["turn"]["id"], turn_id.as_str());
    // … and different input is a conflict.
    let clash = ctx.run([
        "turns",
        "submit",
        &thread_id,
        "--prompt",
        "other",
        "--command-id",
        "cmd-1",
        "--json",
    ]);
    clash.expect_code(2);
    assert_eq!(clash.json()["error"]["code"], "conflict");

    let show = ctx.run(["turns", "show", &turn_id, "--json"]).json();
    assert_eq!(show["turn"]["id"], turn_id.as_str());
    let turns = ctx
        .run(["turns", "list", "--thread", &thread_id, "--json"])
        .json();
    assert_eq!(turns["turns"].as_array().unwrap().len(), 1);
    let snapshot = ctx.run(["threads", "show", &thread_id, "--json"]).json();
    assert_eq!(snapshot["thread"]["id"], thread_id.as_str());

    // Resolution without confirmation is refused in CLI terms, naming the flag.
    let resolve = ctx.run(["turns", "resolve", &turn_id, "--as", "failed", "--json"]);
    resolve.expect_code(2);
    let err = resolve.json();
    assert_eq!(err["error"]["code"], "usage");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--confirm-stopped"),
        "{err}"
    );

    let journal = ctx.run(["journal", "tail", &thread_id, "--json"]).json();
    let kinds: Vec<&str> = journal["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds[0], "thread_created");
    assert!(kinds.contains(&"turn_submitted"), "{kinds:?}");
    let text = ctx.run(["journal", "tail", &thread_id]);
    text.success();
    assert!(text.stdout.contains("turn_submitted"));
    // The prompt is a payload: not in the journal's submission event (the
    // echo agent's reply, joined, may well repeat it), not in logs.
    let submitted = text
        .stdout
        .lines()
        .find(|l| l.contains("turn_submitted"))
        .unwrap();
    assert!(!submitted.contains("do the thing"), "{submitted}");
    assert!(!server.log_text().contains("do the thing"));
    server.finish(&[], &[]);
}

/// Reads one JSON line from the child's stdout.
fn read_json(reader: &mut impl BufRead) -> Value {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad frame {line:?}: {e}"))
}

#[test]
fn managed_mode_reads_the_credential_from_stdin_only() {
    let ctx = TestContext::new();
    let config = write_config(&ctx, json!({}), json!({}));
    let mut cmd = ctx.command(["serve", "--stdio"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let startup =
        json!({ "protocol": "lapis-ai-controller/1", "token": OWNER, "application": "parent" });
    writeln!(stdin, "{startup}").unwrap();
    stdin.flush().unwrap();
    let ready = read_json(&mut stdout);
    assert_eq!(ready["method"], "ready", "{ready}");
    assert_eq!(
        ready["params"]["server"]["protocol"],
        "lapis-ai-controller/1"
    );
    assert_eq!(ready["params"]["session"]["application"], "parent");
    let text = ready.to_string();
    assert!(
        !text.contains(OWNER) && !text.contains("lapis_s_"),
        "{text}"
    );
    // The protocol follows on the same pipes, already authenticated; stdin
    // stays open the whole time.
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"status"}}"#).unwrap();
    stdin.flush().unwrap();
    let status = read_json(&mut stdout);
    assert_eq!(
        status["result"]["protocol"], "lapis-ai-controller/1",
        "{status}"
    );
    assert_eq!(status["result"]["pid"], child.id());
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    ctx.capture(&text);
    ctx.capture(&status.to_string());
    ctx.capture(&String::from_utf8_lossy(&out.stderr));
    ctx.assert_no_secret(OWNER, &[&config]);
    drop(stdin);
}

#[test]
fn managed_mode_wrong_credential_gets_a_failure_frame() {
    let ctx = TestContext::new();
    let config = write_config(&ctx, json!({}), json!({}));
    let wrong = "lapis_ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
    let mut cmd = ctx.command(["serve", "--stdio"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        "{}",
        json!({ "protocol": "lapis-ai-controller/1", "token": wrong, "application": "parent" })
    )
    .unwrap();
    stdin.flush().unwrap();
    // The child exits on its own although stdin is still open.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let frame: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(frame["method"], "startupFailed");
    assert_eq!(frame["params"]["code"], "unauthenticated");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    for text in [&stdout, &stderr] {
        assert!(!text.contains(wrong));
        ctx.capture(text);
    }
    ctx.assert_no_secret(OWNER, &[&config]);
    drop(stdin);
}

#[test]
fn submit_wait_and_follow_run_a_turn_through_the_echo_agent() {
    let server = Server::start();
    let ctx = &server.ctx;
    let thread = ctx.run(["threads", "create", "proj"]);
    thread.success();
    let thread_id = thread.stdout.trim().to_owned();
    let out = ctx.run([
        "turns",
        "submit",
        &thread_id,
        "--prompt",
        "hello echo",
        "--wait",
        "--json",
    ]);
    out.success();
    let doc = out.json();
    assert_eq!(doc["turn"]["state"], "completed", "{doc}");
    let follow = ctx.run([
        "turns",
        "submit",
        &thread_id,
        "--prompt",
        "follow me",
        "--follow",
        "--json",
    ]);
    follow.success();
    // NDJSON: the submitted turn, its events, the final turn.
    let lines: Vec<Value> = follow
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let doc = lines.last().unwrap().clone();
    assert_eq!(doc["turn"]["state"], "completed", "{doc}");
    let events: Vec<Value> = lines
        .iter()
        .filter_map(|l| l.get("event").cloned())
        .collect();
    assert!(
        events.iter().any(|e| e["kind"] == "message_chunk"),
        "the agent's reply streams: {}",
        follow.stdout
    );
    let turn_id = doc["turn"]["id"].as_str().unwrap();
    assert!(events.iter().all(|e| e["turnId"] == turn_id));
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| e["threadSeq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    // Text mode prints the reply on stdout, the id and final state on stderr.
    let text = ctx.run([
        "turns", "submit", &thread_id, "--prompt", "plain", "--follow",
    ]);
    text.success();
    assert!(text.stderr.contains("completed"), "{}", text.stderr);
    let status = ctx.run(["status", "--json"]).json();
    assert_eq!(status["queue"]["depth"], 0);
    assert_eq!(status["fencedWorkspaces"], json!([]));
    // Prompts are payloads: never in the server log.
    assert!(!server.log_text().contains("follow me"));
    server.finish(&[], &[]);
}

#[test]
fn journal_tail_follow_prints_new_events() {
    let server = Server::start();
    let ctx = &server.ctx;
    let first = ctx.run(["threads", "create", "proj"]);
    first.success();
    let mut cmd = ctx.command(["journal", "tail", "--follow"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("thread_created"), "replayed first: {line}");
    // A thread created now arrives through the live subscription.
    let second = ctx.run(["threads", "create", "proj", "--json"]).json();
    let id = second["thread"]["id"].as_str().unwrap().to_owned();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("thread_created"), "{line}");
    let _ = child.kill();
    let _ = child.wait();
    let listed = ctx.run(["threads", "list", "--json"]).json();
    assert!(
        listed["threads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == id.as_str())
    );
    server.finish(&[], &[]);
}
