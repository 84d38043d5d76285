//! Answering an agent's permission requests from the CLI: `permissions
//! list/respond`, `awaitingInput` on turns and snapshots, the stderr hint
//! without a terminal, and inline answers on a real pseudo-terminal.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serve_support::Server;

pub fn fixture(args: &[&str]) -> Value {
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"), "args": args })
}

/// Opens a thread on `proj` with `provider` (an agent that asks), submits
/// `prompt` and waits until its permission request pends: (thread, turn,
/// the request).
pub fn submit_until_asked(
    client: &mut lapis_protocol::client::Client,
    provider: &str,
    command_id: &str,
    prompt: &str,
) -> (
    lapis_protocol::Thread,
    lapis_protocol::Turn,
    lapis_protocol::PendingRequest,
) {
    let thread = client
        .threads_create("proj", provider, lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, command_id, prompt).unwrap();
    let request = lapis_e2e::wait::eventually("the request pends", || {
        client
            .permissions_list(None, Some(&turn.id))
            .unwrap()
            .into_iter()
            .next()
    });
    (thread, turn, request)
}

/// A server whose `asker` provider asks once for permission with `kinds`,
/// then replies with the answer and one chunk.
fn asker(kinds: &str) -> (Server, String) {
    let server = Server::start_full(
        json!({}),
        json!({ "asker": fixture(&["--permissions", "1", "--perm-kinds", kinds, "--chunks", "1"]) }),
    );
    let thread = server
        .ctx
        .run(["threads", "create", "proj", "--provider", "asker"])
        .success()
        .stdout
        .trim()
        .to_owned();
    (server, thread)
}

/// Polls `permissions list --json` until a request is pending.
fn pending(server: &Server) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = server.ctx.run(["permissions", "list", "--json"]);
        list.success();
        let doc = list.json();
        if let Some(first) = doc["requests"].as_array().and_then(|a| a.first()) {
            return first.clone();
        }
        assert!(Instant::now() < deadline, "no request became pending");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for a child, bounded so a hang fails instead of blocking forever.
pub fn finish(mut child: Child) -> (Option<i32>, String, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the command did not end");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        o.read_to_string(&mut out).unwrap();
    }
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    (child.wait().unwrap().code(), out, err)
}

#[test]
fn permissions_are_listed_and_answered_and_turns_report_awaiting_input() {
    // The shape real agents (claude-agent-acp, codex-acp, qwen) offer.
    let (server, thread) = asker("allow_always,allow_once,reject_once");
    let ctx = &server.ctx;
    let turn = ctx
        .run(["turns", "submit", &thread, "--prompt", "go"])
        .success()
        .stdout
        .trim()
        .to_owned();
    let req = pending(&server);
    assert_eq!(req["id"], "perm-0");
    assert_eq!(req["turnId"], turn.as_str());
    assert_eq!(req["threadId"], thread.as_str());
    assert_eq!(req["toolCall"]["title"], "Run command");
    assert_eq!(req["toolCall"]["kind"], "execute");
    let ids: Vec<&str> = req["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["opt-allow_always", "opt-allow_once", "opt-reject_once"]
    );
    assert_eq!(req["options"][2]["kind"], "reject_once");
    // Like every wire time: RFC 3339 UTC with milliseconds.
    let deadline = req["deadline"].as_str().unwrap();
    assert!(
        lapis_protocol::time::parse_ms(deadline)
            .is_some_and(|ms| lapis_protocol::time::format_ms(ms) == deadline),
        "RFC 3339 UTC with milliseconds: {deadline}"
    );
    // Filters: by turn, by thread.
    let by_turn = ctx
        .run(["permissions", "list", "--turn", &turn, "--json"])
        .json();
    assert_eq!(by_turn["requests"].as_array().unwrap().len(), 1);
    let by_thread = ctx
        .run(["permissions", "list", "--thread", &thread, "--json"])
        .json();
    assert_eq!(by_thread["requests"].as_array().unwrap().len(), 1);
    // A thread of another principal (the guest's) is refused, not listed
    // as empty.
    let (mut guest, _) = server.hello(crate::serve_support::GUEST, "other");
    let foreign = guest.call(
        "threads.create",
        json!({ "workspaceId": "proj", "provider": "echo" }),
    );
    let foreign = foreign["result"]["thread"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("guest thread: {foreign}"))
        .to_owned();
    let refused = ctx.run(["permissions", "list", "--thread", &foreign, "--json"]);
    refused.expect_code(2);
    // Another principal's thread answers like an unknown one.
    assert_eq!(refused.json()["error"]["code"], "not_found");
    // The turn and the thread say they wait for input.
    let shown = ctx.run(["turns", "show", &turn, "--json"]).json();
    assert_eq!(shown["turn"]["awaitingInput"], true, "{shown}");
    let plain_turn = ctx.run(["turns", "show", &turn]);
    assert!(
        plain_turn.stdout.contains("awaiting a permission answer"),
        "{}",
        plain_turn.stdout
    );
    let snap = ctx.run(["threads", "show", &thread, "--json"]).json();
    assert_eq!(snap["awaitingInput"], true);
    assert_eq!(snap["recentTurns"][0]["awaitingInput"], true);
    // Plain listing, piped: one tab-separated row per request (no
    // header), its options in one field, the deadline in RFC 3339.
    let plain = ctx.run(["permissions", "list"]);
    plain.success();
    let row: Vec<&str> = plain.stdout.trim_end().split('\t').collect();
    assert_eq!(plain.stdout.lines().count(), 1, "{}", plain.stdout);
    assert_eq!(
        row[..4],
        [turn.as_str(), "perm-0", "proj", "Run command [execute]"],
        "{}",
        plain.stdout
    );
    assert!(
        row[4].contains("opt-reject_once [reject_once] reject_once"),
        "{}",
        row[4]
    );
    assert!(
        lapis_protocol::time::parse_ms(row[5]).is_some(),
        "{}",
        row[5]
    );
    // --allow answers allow_once, though allow_always is offered too; the
    // turn and the request are named by unambiguous prefixes.
    let answered = ctx.run([
        "permissions",
        "respond",
        &turn[..12],
        "perm",
        "--allow",
        "--json",
    ]);
    answered.success();
    assert_eq!(answered.json()["optionId"], "opt-allow_once");
    // Answered: nothing pends, the agent got the option, the turn completes.
    // Answering a settled request again is `conflict` naming how it was
    // settled (the inbox keeps the record).
    let again = ctx.run([
        "permissions",
        "respond",
        &turn,
        "perm-0",
        "opt-allow_once",
        "--json",
    ]);
    again.expect_code(2);
    let again = again.json();
    assert_eq!(again["error"]["code"], "conflict", "{again}");
    let message = again["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("answered by application `lapis-cli` with `opt-allow_once`"),
        "{message}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut state = String::new();
    while Instant::now() < deadline {
        let t = ctx.run(["turns", "show", &turn, "--json"]).json();
        state = t["turn"]["state"].as_str().unwrap().to_owned();
        if state == "completed" {
            assert_eq!(t["turn"]["awaitingInput"], false);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(state, "completed");
    let tail = ctx.run(["journal", "tail", &thread, "-n", "100"]);
    assert!(
        tail.stdout.contains("perm-0=opt-allow_once"),
        "{}",
        tail.stdout
    );
    // None pending: an empty list on stdout, the note for a person on stderr.
    let none = ctx.run(["permissions", "list"]);
    assert_eq!(none.stdout, "");
    assert_eq!(none.stderr, "no pending permission requests\n");
    server.finish(&[], &[]);
}

#[test]
fn without_a_terminal_the_exact_respond_command_is_printed_and_an_ambiguous_flag_is_refused() {
    let (server, thread) = asker("allow_once,allow_always,reject_once");
    let ctx = &server.ctx;
    let mut cmd = ctx.command(["turns", "submit", &thread, "--prompt", "go", "--wait"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    // Read the hint: one exact command per option.
    let mut commands = Vec::new();
    let mut line = String::new();
    let mut seen = String::new();
    while commands.len() < 3 {
        line.clear();
        if stderr.read_line(&mut line).unwrap() == 0 {
            let out = child.wait_with_output().unwrap();
            panic!(
                "stderr ended early: {seen:?}; exit {:?}; stdout {:?}; serve log: {}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                server.log_text()
            );
        }
        seen.push_str(&line);
        if let Some(rest) = line.trim().strip_prefix("lapis-ai-controller ") {
            commands.push(rest.split("    #").next().unwrap().trim().to_owned());
        }
    }
    let turn = ctx.run(["turns", "list", "--json"]).json()["turns"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Each printed command answers by its kind's flag.
    assert_eq!(
        commands,
        [
            format!("permissions respond {turn} perm-0 --allow"),
            format!("permissions respond {turn} perm-0 --allow-always"),
            format!("permissions respond {turn} perm-0 --reject"),
        ]
    );
    // No reject_always option: --reject-always is refused, naming what is
    // offered and the flags that do apply.
    let ambiguous = ctx.run(["permissions", "respond", &turn, "perm-0", "--reject-always"]);
    ambiguous.expect_code(2);
    for id in ["opt-allow_once", "opt-allow_always", "opt-reject_once"] {
        assert!(ambiguous.stderr.contains(id), "{}", ambiguous.stderr);
    }
    assert!(
        ambiguous
            .stderr
            .contains("use --allow or --allow-always or --reject or name the OPTION"),
        "{}",
        ambiguous.stderr
    );
    // The printed command works as printed.
    let words: Vec<&str> = commands[1].split_whitespace().collect();
    ctx.run(&words).success();
    child.stderr = Some(stderr.into_inner());
    let (code, out, err) = finish(child);
    assert_eq!(code, Some(0), "{err}");
    // --wait prints the reply: the answer the agent saw, then its chunk.
    assert_eq!(out, "perm-0=opt-allow_alwayschunk0 \n");
    assert!(err.contains("completed"), "{err}");
    server.finish(&[], &[]);
}

#[test]
fn on_a_terminal_the_request_is_answered_inline() {
    let (server, thread) = asker("allow_once,reject_once");
    let ctx = &server.ctx;
    // `script` runs the CLI on a fresh pseudo-terminal (stdin, stdout and
    // stderr are all the terminal) and relays our pipe to its input.
    let bin = lapis_e2e::TestContext::bin();
    let line = format!(
        "{} turns submit {thread} --prompt go --follow",
        bin.display()
    );
    let mut cmd = ctx.command_for(
        std::path::Path::new("script"),
        ["-qec", line.as_str(), "/dev/null"],
    );
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = child.stdout.take().unwrap();
    // Read the terminal until the numbered prompt shows, then choose 2.
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("answer [1-2]: ") {
        let n = out.read(&mut buf).unwrap();
        assert!(n > 0, "terminal closed: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(text.contains("1) allow_once [allow_once]"), "{text}");
    assert!(text.contains("2) reject_once [reject_once]"), "{text}");
    stdin.write_all(b"2\n").unwrap();
    stdin.flush().unwrap();
    child.stdout = Some(out);
    let (code, rest, _) = finish(child);
    drop(stdin);
    let all = format!("{text}{rest}");
    assert_eq!(code, Some(0), "{all}");
    assert!(all.contains("answered with opt-reject_once"), "{all}");
    assert!(all.contains("perm-0=opt-reject_once"), "{all}");
    assert!(all.contains("completed"), "{all}");
    server.finish(&[], &[]);
}
