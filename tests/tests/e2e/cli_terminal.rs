//! A model's text cannot attack the terminal: with the fixture agent's
//! `--hostile` (ESC/CSI/OSC sequences, the one-byte CSI, a bare CR,
//! backspaces and DEL in a thought, the reply, a tool title, a permission
//! title and option names), every plain printer shows them as visible
//! stand-ins, while `--json` and NDJSON keep the bytes verbatim.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cli_permissions::fixture;
use crate::serve_support::Server;

/// Fails when `text` holds a control character a terminal would obey:
/// anything below U+0020 but `\n`, `\t` and a CR ending a line, DEL, C1.
#[track_caller]
pub fn assert_harmless(what: &str, text: &str) {
    for (i, c) in text.char_indices() {
        let code = c as u32;
        let control = code < 0x20 || (0x7f..=0x9f).contains(&code);
        let allowed = c == '\n' || c == '\t' || (c == '\r' && text[i + 1..].starts_with('\n'));
        assert!(
            !control || allowed,
            "{what}: raw {c:?} at byte {i} reaches the terminal: {text:?}"
        );
    }
}

/// The fixture's hostile suffix as [`crate`]'s printers show it.
const SHOWN: &str = "␛[2K␛[1G␛[31m␛]0;pwned␇ over␍write␈␈!␡";

#[test]
fn replies_thoughts_tool_titles_and_journal_text_are_shown_harmless() {
    let server = Server::start_full(
        json!({}),
        json!({ "hostile": fixture(&["--hostile", "--chunks", "1"]) }),
    );
    let ctx = &server.ctx;
    let t = server.cli_thread("hostile");
    let wait = ctx.run([
        "turns",
        "submit",
        &t,
        "--prompt",
        "hi\x1b[2J",
        "--wait",
        "--command-id",
        "hostile-1",
    ]);
    wait.success();
    assert_harmless("--wait stdout", &wait.stdout);
    assert_harmless("--wait stderr", &wait.stderr);
    assert!(
        wait.stdout.starts_with(&format!("reply{SHOWN}\n")),
        "{}",
        wait.stdout
    );

    let follow = ctx.run(["turns", "submit", &t, "--prompt", "hi", "--follow"]);
    follow.success();
    assert_harmless("--follow stdout", &follow.stdout);
    assert_harmless("--follow stderr", &follow.stderr);
    assert!(
        follow.stderr.contains(&format!("thinking: think{SHOWN}")),
        "{}",
        follow.stderr
    );
    assert!(
        follow
            .stderr
            .contains(&format!("tool rm -rf /{SHOWN} [execute]: completed\n")),
        "{}",
        follow.stderr
    );

    let tail = ctx.run(["journal", "tail", &t, "-n", "100"]);
    tail.success();
    assert_harmless("journal tail", &tail.stdout);
    assert!(
        tail.stdout.contains(&format!("reply{SHOWN}")),
        "{}",
        tail.stdout
    );

    // turns show echoes the prompt (the user's, but pasted text can carry
    // escapes too).
    let show = ctx.run(["turns", "show", "--command-id", "hostile-1"]);
    show.success();
    assert_harmless("turns show", &show.stdout);
    assert!(show.stdout.contains("asked     hi␛[2J"), "{}", show.stdout);

    // JSON keeps the bytes: the escapes are JSON's, the decoded text is verbatim.
    let json_wait = ctx.run(["turns", "submit", &t, "--prompt", "hi", "--wait", "--json"]);
    json_wait.success();
    assert!(
        json_wait.stdout.contains("\\u001b[2K"),
        "{}",
        json_wait.stdout
    );
    let reply = json_wait.json()["reply"].as_str().unwrap().to_owned();
    assert!(reply.contains("\x1b[2K\x1b[1G\u{9b}31m"), "{reply:?}");
    let ndjson = ctx.run([
        "turns", "submit", &t, "--prompt", "hi", "--follow", "--json",
    ]);
    ndjson.success();
    let verbatim = ndjson.stdout.lines().any(|l| {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        v["event"]["payload"].to_string().contains("\\u001b[2K")
    });
    assert!(verbatim, "{}", ndjson.stdout);
    let tail_json = ctx.run(["journal", "tail", &t, "--json"]);
    assert!(
        tail_json.stdout.contains("\\u001b]0;pwned"),
        "{}",
        tail_json.stdout
    );
}

#[test]
fn permission_titles_and_option_names_are_shown_harmless() {
    let server = Server::start_full(
        json!({}),
        json!({ "hostile": fixture(&["--hostile", "--permissions", "1", "--chunks", "1"]) }),
    );
    let ctx = &server.ctx;
    let t = server.cli_thread("hostile");
    // Watched without a terminal: the request and the commands that answer
    // it go to stderr.
    let child = ctx
        .command(["turns", "submit", &t, "--prompt", "go", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (turn, listed) = loop {
        let list = ctx.run(["permissions", "list", "--json"]).json();
        if let Some(first) = list["requests"].as_array().and_then(|a| a.first()) {
            // JSON keeps the agent's bytes.
            assert!(
                first["toolCall"]["title"]
                    .as_str()
                    .unwrap()
                    .contains('\x1b'),
                "{first}"
            );
            break (
                first["turnId"].as_str().unwrap().to_owned(),
                ctx.run(["permissions", "list"]),
            );
        }
        assert!(Instant::now() < deadline, "no request became pending");
        std::thread::sleep(Duration::from_millis(50));
    };
    listed.success();
    assert_harmless("permissions list", &listed.stdout);
    assert!(
        listed
            .stdout
            .contains(&format!("Run command{SHOWN} [execute]")),
        "{}",
        listed.stdout
    );
    assert!(
        listed
            .stdout
            .contains(&format!("opt-allow_once [allow_once] allow_once{SHOWN}")),
        "{}",
        listed.stdout
    );
    ctx.run(["permissions", "respond", &turn, "perm-0", "--allow"])
        .success();
    let (code, out, err) = crate::cli_permissions::finish(child);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert_harmless("follow stdout", &out);
    assert_harmless("follow stderr", &err);
    assert!(
        err.contains(&format!("# allow_once{SHOWN} [allow_once]")),
        "{err}"
    );
    // The request's note is for a person: stderr, beside the prompt.
    assert!(
        err.contains(&format!("permission perm-0 requested: Run command{SHOWN}")),
        "{err}"
    );
    // And its decision reads as a sentence (`DecidedBy::describe`).
    assert!(err.contains("(answered by a user)"), "{err}");
}
