//! Small dead ends a person meets at the terminal (issue 41 items 6 and
//! 9): a duration written as people write it, a "did you mean" for a
//! mistyped provider or workspace, and tables that fit 80 columns.

use std::path::Path;
use std::process::Command;

use lapis_e2e::TestContext;
use lapis_e2e::wait::eventually;
use serde_json::json;

use crate::policy::fixture;
use crate::serve_support::Server;

#[test]
fn timeout_takes_compound_durations() {
    let server = Server::start();
    let ctx = &server.ctx;
    let dir = ctx.home().join("work/d");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let out = ctx.run(["ask", "in time", "--dir", d, "--timeout", "1h30m"]);
    out.success();
    let th = ctx.run(["threads", "list", "--json"]).success().json();
    let thread = th["threads"][0]["id"].as_str().unwrap().to_owned();
    let turns = ctx
        .run(["turns", "list", "--thread", &thread, "--json"])
        .success()
        .json();
    assert_eq!(turns["turns"][0]["maxTurnSeconds"], json!(5400), "{turns}");
    // Every flag that takes a duration takes one written this way.
    let created = ctx
        .run([
            "threads",
            "create",
            "proj",
            "--permission-timeout",
            "2m",
            "--json",
        ])
        .success()
        .json();
    assert_eq!(
        created["thread"]["permissionTimeoutSeconds"],
        json!(120),
        "{created}"
    );
    let id = created["thread"]["id"].as_str().unwrap();
    let version = created["thread"]["version"].to_string();
    let changed = ctx
        .run([
            "threads",
            "configure",
            id,
            "--expected-version",
            &version,
            "--permission-timeout",
            "1h 30m",
            "--json",
        ])
        .success()
        .json();
    assert_eq!(
        changed["thread"]["permissionTimeoutSeconds"],
        json!(5400),
        "{changed}"
    );
    ctx.run(["providers", "check", "echo", "--timeout", "1m30s"])
        .success();
    for flags in [
        ["install", "--ready-timeout"],
        ["update", "--ready-timeout"],
    ] {
        // Parsed before anything is installed: a usage error naming the
        // duration (a bare-seconds parser says "invalid digit").
        let bad = ctx.run([flags[0], flags[1], "soon"]);
        bad.expect_code(2);
        assert!(
            bad.stderr.contains("`soon` is not a duration"),
            "{}",
            bad.stderr
        );
    }
    let bad = ctx.run(["ask", "x", "--dir", d, "--timeout", "1.5s"]);
    bad.expect_code(2);
    assert!(
        bad.stderr.contains("whole number of seconds"),
        "{}",
        bad.stderr
    );
    server.finish(&[], &[]);
}

#[test]
fn a_mistyped_provider_or_workspace_gets_a_did_you_mean() {
    let server = Server::start_full(json!({}), json!({ "claude": fixture(&["--chunks", "1"]) }));
    let ctx = &server.ctx;
    let dir = ctx.home().join("work/d");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let out = ctx.run(["ask", "hi", "--dir", d, "--provider", "cluade"]);
    out.expect_code(2);
    assert!(
        out.stderr
            .contains("provider `cluade` is not configured (did you mean `claude`?)"),
        "{}",
        out.stderr
    );
    let out = ctx.run(["threads", "create", "proj", "--provider", "cluade"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("(did you mean `claude`?)"),
        "{}",
        out.stderr
    );
    let out = ctx.run(["threads", "create", "porj", "--provider", "claude"]);
    out.expect_code(2);
    assert!(
        out.stderr
            .contains("workspace `porj` is not registered (did you mean `proj`?)"),
        "{}",
        out.stderr
    );
    let json = ctx
        .run([
            "threads",
            "create",
            "porj",
            "--provider",
            "claude",
            "--json",
        ])
        .json();
    assert_eq!(json["error"]["code"], "not_found");
    // Nothing close: the service's own answer, no guess.
    let out = ctx.run(["threads", "create", "zzzzzzzz", "--provider", "claude"]);
    out.expect_code(2);
    assert!(!out.stderr.contains("did you mean"), "{}", out.stderr);
    server.finish(&[], &[]);
}

/// `turns list` on an 80-column terminal (tmux): short unique ids, every
/// line within 80 columns; `--wide` shows the whole ids (issue 41 item 6).
#[test]
fn turns_list_fits_80_columns_and_wide_shows_whole_ids() {
    let have_tmux = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_tmux {
        lapis_e2e::skip::skip("tmux is not installed");
        return;
    }
    let server = Server::start();
    let ctx = &server.ctx;
    let dir = server.project.to_str().unwrap().to_owned();
    for prompt in ["one", "two"] {
        ctx.run(["ask", prompt, "--dir", &dir]).success();
    }
    let listed = ctx.run(["turns", "list", "--json"]).success().json();
    let ids: Vec<String> = listed["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 2);
    let screen = |args: &str| -> String {
        let socket = ctx.home().join(format!("tmux-{}.sock", args.len()));
        let line = format!(
            "{} {args}; echo END-OF-TABLE; read",
            TestContext::bin().display()
        );
        let mut c = ctx.command_for(Path::new("tmux"), ["-S", socket.to_str().unwrap()]);
        c.args([
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "80",
            "-y",
            "60",
            "-s",
            "t",
        ])
        .args(["bash", "-c", &line]);
        assert!(c.output().unwrap().status.success());
        let capture = || {
            let out = Command::new("tmux")
                .arg("-S")
                .arg(&socket)
                .args(["capture-pane", "-p", "-t", "t"])
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.contains("END-OF-TABLE").then_some(text)
        };
        let text = eventually("the table on the terminal", capture);
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .arg("kill-server")
            .output();
        text
    };
    let text = screen("turns list");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("turn_")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    for (row, id) in rows.iter().zip(&ids) {
        // One line per row: the short id, the short thread id, no wrap.
        assert!(row.starts_with(&id[..13]), "{text}");
        assert!(!row.contains(id.as_str()), "{text}");
        assert!(row.contains("thr_") && row.contains("completed"), "{text}");
        assert!(row.chars().count() <= 80, "{text}");
    }
    // What a person copies from the table is an id every command takes.
    let short = rows[0].split_whitespace().next().unwrap();
    let shown = ctx.run(["turns", "show", short, "--json"]).success().json();
    assert_eq!(shown["turn"]["id"], ids[0].as_str());
    let wide = screen("turns list --wide");
    assert!(wide.contains(ids[0].as_str()), "{wide}");
    // `providers list` (the catalogue's 30-odd rows): one line per row at
    // 80 columns, as many lines as the piped table has rows.
    let piped = ctx.run(["providers", "list"]).success().stdout.clone();
    let names: Vec<&str> = piped
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    let text = screen("providers list");
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("NAME"))
        .take_while(|l| !l.starts_with("END-OF-TABLE"))
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(table.len(), names.len(), "{text}");
    for (row, name) in table.iter().zip(&names) {
        assert!(row.starts_with(&format!("{name} ")), "{text}");
        assert!(row.chars().count() <= 80, "{text}");
    }
    server.finish(&[], &[]);
}

/// A mistyped command or subcommand name gets clap's suggestion (item 9's
/// "did you mean" for command names), exit 2, before anything runs.
#[test]
fn a_mistyped_command_gets_a_did_you_mean() {
    let ctx = TestContext::new();
    for (args, similar) in [
        (&["staus"][..], "'status'"),
        (&["turns", "lsit"][..], "'list'"),
        (&["providers", "ad", "claude"][..], "'add'"),
    ] {
        let out = ctx.run(args);
        out.expect_code(2);
        assert!(
            out.stderr.contains("similar subcommand") && out.stderr.contains(similar),
            "{args:?}: {}",
            out.stderr
        );
    }
}
