//! Driving agents from the terminal and from scripts: what `--wait` and
//! `--follow` print, NDJSON, exit 1 for a turn that did not complete, a
//! closed stdout, prompts from stdin and files, `journal tail -n/--since`,
//! and `ask`.

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cli_permissions::fixture;
use crate::serve_support::Server;

fn ndjson(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect()
}

#[test]
fn wait_prints_the_reply_follow_streams_it_and_a_failed_turn_exits_1() {
    let server = Server::start_full(
        json!({}),
        json!({
            "talker": fixture(&["--thoughts", "2", "--tool-calls", "1", "--chunks", "3", "--chunk-text", "part"]),
            "broken": fixture(&["--chunks", "1", "--prompt-error"]),
        }),
    );
    let ctx = &server.ctx;
    let talker = server.cli_thread("talker");
    let wait = ctx.run(["turns", "submit", &talker, "--prompt", "hi", "--wait"]);
    wait.success();
    assert_eq!(wait.stdout, "part0 part1 part2 \n");
    assert!(
        wait.stderr.contains("completed (end_turn)"),
        "{}",
        wait.stderr
    );
    // --follow: joined chunk runs, thoughts marked apart, tool calls as status lines.
    let follow = ctx.run(["turns", "submit", &talker, "--prompt", "hi", "--follow"]);
    follow.success();
    // Thoughts go to stderr: stdout carries only what a script consumes.
    assert!(
        follow.stderr.contains("thinking: thought 0thought 1\n"),
        "{}",
        follow.stderr
    );
    assert!(!follow.stdout.contains("thinking:"), "{}", follow.stdout);
    // So do tool calls: the reply alone is on stdout.
    assert!(follow.stderr.contains("tool Edit file 0 [edit]: pending\n"));
    assert!(
        follow
            .stderr
            .contains("tool Edit file 0 [edit]: completed\n")
    );
    assert!(!follow.stdout.contains("tool "), "{}", follow.stdout);
    assert!(
        follow.stdout.ends_with("part0 part1 part2 \n"),
        "{}",
        follow.stdout
    );
    assert!(!follow.stdout.contains('\x1b'), "no colour off a terminal");
    let quiet = ctx.run([
        "turns",
        "submit",
        &talker,
        "--prompt",
        "hi",
        "--follow",
        "--no-thoughts",
    ]);
    assert!(!quiet.stdout.contains("thought"), "{}", quiet.stdout);
    // NDJSON: the submitted turn, events, the final turn; one object per line.
    let nd = ctx.run([
        "turns", "submit", &talker, "--prompt", "hi", "--follow", "--json",
    ]);
    nd.success();
    let lines = ndjson(&nd.stdout);
    assert!(lines[0]["turn"].is_object() && lines[0]["commandId"].is_string());
    assert_eq!(lines.last().unwrap()["turn"]["state"], "completed");
    let kinds: Vec<&str> = lines[1..lines.len() - 1]
        .iter()
        .map(|l| l["event"]["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"thought_chunk") && kinds.contains(&"tool_call"),
        "{kinds:?}"
    );
    // --wait --json: one document with the reply.
    let doc = ctx
        .run([
            "turns", "submit", &talker, "--prompt", "hi", "--wait", "--json",
        ])
        .json();
    assert_eq!(doc["reply"], "part0 part1 part2 ");
    // A failed turn exits 1 from --wait, --follow and --wait --json (one document).
    let broken = server.cli_thread("broken");
    let failed = ctx.run(["turns", "submit", &broken, "--prompt", "x", "--wait"]);
    failed.expect_code(1);
    assert!(failed.stderr.contains("ended failed"), "{}", failed.stderr);
    ctx.run(["turns", "submit", &broken, "--prompt", "x", "--follow"])
        .expect_code(1);
    let failed_json = ctx.run([
        "turns", "submit", &broken, "--prompt", "x", "--wait", "--json",
    ]);
    failed_json.expect_code(1);
    assert_eq!(failed_json.json()["turn"]["state"], "failed");
    server.finish(&[], &[]);
}

#[test]
fn prompts_come_from_stdin_or_a_file_and_bad_combinations_are_refused() {
    let server = Server::start();
    let ctx = &server.ctx;
    let th = server.cli_thread("echo");
    // The echo agent replies with the prompt.
    let mut cmd = ctx.command(["turns", "submit", &th, "--prompt", "-", "--wait"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"from stdin, not a dash")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "from stdin, not a dash\n"
    );
    let file = ctx.home().join("prompt.txt");
    std::fs::write(&file, "from a file").unwrap();
    let f = file.to_str().unwrap();
    let from_file = ctx.run(["turns", "submit", &th, "--prompt-file", f, "--wait"]);
    from_file.success();
    assert_eq!(from_file.stdout, "from a file\n");
    let both = ctx.run(["turns", "submit", &th, "--prompt", "a", "--prompt-file", f]);
    both.expect_code(2);
    assert!(both.stderr.contains("--prompt-file"), "{}", both.stderr);
    ctx.run(["turns", "submit", &th]).expect_code(2);
    let missing = ctx.run(["turns", "submit", &th, "--prompt-file", "/nonexistent/p"]);
    missing.expect_code(2);
    assert!(
        missing.stderr.contains("/nonexistent/p"),
        "{}",
        missing.stderr
    );
    // stdin is empty here (null): refused before anything is submitted.
    let empty = ctx.run(["turns", "submit", &th, "--prompt", "-"]);
    empty.expect_code(2);
    assert!(empty.stderr.contains("empty"), "{}", empty.stderr);
    let turns = ctx.run(["turns", "list", "--json"]).json();
    assert_eq!(turns["turns"].as_array().unwrap().len(), 2);
    server.finish(&[], &[]);
}

#[test]
fn journal_tail_shows_the_last_n_or_since_a_cursor_and_head_ends_a_follow() {
    let server = Server::start();
    let ctx = &server.ctx;
    let th = server.cli_thread("echo");
    ctx.run([
        "turns",
        "submit",
        &th,
        "--prompt",
        "hello from the bars",
        "--wait",
    ])
    .success();
    let all = ctx
        .run(["journal", "tail", &th, "-n", "1000", "--json"])
        .json();
    let events = all["events"].as_array().unwrap();
    let last = events.last().unwrap()["threadSeq"].as_u64().unwrap();
    assert!(last > 5, "{all}");
    let two = ctx
        .run(["journal", "tail", &th, "-n", "2", "--json"])
        .json();
    let seqs: Vec<u64> = two["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["threadSeq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [last - 1, last]);
    let since = ctx
        .run(["journal", "tail", &th, "--since", "3", "--json"])
        .json();
    assert_eq!(since["events"][0]["threadSeq"], 4);
    assert_eq!(since["events"].as_array().unwrap().len() as u64, last - 3);
    // Owner-wide: the last 3 of everything.
    let owner = ctx.run(["journal", "tail", "-n", "3", "--json"]).json();
    assert_eq!(owner["events"].as_array().unwrap().len(), 3);
    // Plain: the reply chunks joined on one line, not one line per chunk,
    // every line led by its event's commit time; the thread named by a
    // prefix of its id.
    let plain = ctx.run(["journal", "tail", &th[..10], "-n", "1000"]);
    assert!(
        plain.stdout.contains("hello from the bars\n"),
        "{}",
        plain.stdout
    );
    for line in plain.stdout.lines() {
        let (at, _) = line.split_once(' ').unwrap_or_default();
        assert!(lapis_protocol::time::parse_ms(at).is_some(), "{line}");
    }
    // Colour follows clap's rules through anstream: none on a pipe (or with
    // NO_COLOR), forced by CLICOLOR_FORCE, and NO_COLOR still wins over it.
    assert!(!plain.stdout.contains('\u{1b}'), "{}", plain.stdout);
    let mut forced = ctx.command(["journal", "tail", &th, "-n", "3"]);
    forced.env_remove("NO_COLOR").env("CLICOLOR_FORCE", "1");
    let forced = ctx.output(forced);
    assert!(forced.stdout.contains("\u{1b}[2m"), "{:?}", forced.stdout);
    let mut both = ctx.command(["journal", "tail", &th, "-n", "3"]);
    both.env("CLICOLOR_FORCE", "1");
    let both = ctx.output(both);
    assert!(!both.stdout.contains('\u{1b}'), "{:?}", both.stdout);
    // A prefix two threads share is refused, naming both.
    let other = server.cli_thread("echo");
    let ambiguous = ctx.run(["journal", "tail", "thr_", "--json"]);
    ambiguous.expect_code(2);
    let doc = ambiguous.json();
    assert_eq!(doc["error"]["code"], "ambiguous_id", "{doc}");
    let named = doc["error"]["details"]["candidates"].to_string();
    assert!(named.contains(&th) && named.contains(&other), "{doc}");
    // `| head -2` ends a follow at once (no new event is needed), exit 0.
    let bin = lapis_e2e::TestContext::bin();
    let line = format!(
        "{} journal tail --follow --json | head -2; echo \"status ${{PIPESTATUS[0]}}\"",
        bin.display()
    );
    let mut cmd = ctx.command_for(std::path::Path::new("bash"), ["-c", line.as_str()]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("journal tail --follow kept running after head exited");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    for _ in 0..2 {
        let l: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        assert!(l["event"]["seq"].is_u64(), "{l}");
    }
    assert_eq!(lines.next(), Some("status 0"), "{text}");
    server.finish(&[], &[]);
}

#[test]
fn ask_registers_the_directory_continues_its_thread_and_refuses_a_clashing_id() {
    let server = Server::start();
    let ctx = &server.ctx;
    let dir = ctx.home().join("work/newproj");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let first = ctx.run(["ask", "first question", "--dir", d]);
    first.success();
    // The echo agent thinks aloud, then replies with the prompt.
    assert_eq!(first.stdout, "first question\n");
    assert!(
        first.stderr.contains("thinking: echoing 14 characters\n"),
        "{}",
        first.stderr
    );
    assert!(
        first.stderr.contains("registered workspace newproj"),
        "{}",
        first.stderr
    );
    let ws = ctx.run(["workspaces", "list", "--json"]).json();
    let canonical = dir.canonicalize().unwrap();
    assert!(
        ws["workspaces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["id"] == "newproj" && w["path"] == canonical.to_str().unwrap()),
        "{ws}"
    );
    // From the directory itself, prompt on stdin: the same thread continues.
    let mut cmd = ctx.command(["ask"]);
    cmd.current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"second").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    // Only the reply on stdout (the thought went to stderr).
    assert_eq!(String::from_utf8_lossy(&out.stdout), "second\n", "{out:?}");
    let threads_of = |ctx: &lapis_e2e::TestContext| -> Vec<String> {
        ctx.run(["threads", "list", "--json"]).json()["threads"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["workspaceId"] == "newproj")
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let threads = threads_of(ctx);
    assert_eq!(threads.len(), 1);
    let turns = ctx
        .run(["turns", "list", "--thread", &threads[0], "--json"])
        .json();
    assert_eq!(turns["turns"].as_array().unwrap().len(), 2);
    // --new starts another thread.
    ctx.run(["ask", "third", "--dir", d, "--new"]).success();
    assert_eq!(threads_of(ctx).len(), 2);
    // Another directory with the same name: its derived id is taken.
    let clash = ctx.home().join("elsewhere/newproj");
    std::fs::create_dir_all(&clash).unwrap();
    let refused = ctx.run(["ask", "q", "--dir", clash.to_str().unwrap()]);
    refused.expect_code(2);
    assert!(
        refused.stderr.contains("`newproj`")
            && refused.stderr.contains(canonical.to_str().unwrap())
            && refused.stderr.contains("workspaces add"),
        "{}",
        refused.stderr
    );
    // An unknown provider fails before anything runs.
    ctx.run(["ask", "q", "--dir", d, "--provider", "nope"])
        .expect_code(2);
    server.finish(&[], &[]);
}
