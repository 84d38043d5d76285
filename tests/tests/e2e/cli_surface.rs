//! The CLI as users and scripts see it: shell completion through real shells,
//! and insta snapshots of every command's help and of the plain and JSON
//! output of the service commands, against the real binary.
//!
//! Snapshots live in `snapshots/` beside this file. CI runs with
//! `INSTA_UPDATE=no` (and insta treats `CI=true` the same), so a difference
//! fails and nothing is written; accept a deliberate change locally with
//! `INSTA_UPDATE=always cargo test -p lapis-e2e --test e2e cli_surface` and
//! review the diff.

use std::path::Path;
use std::process::Command;

use lapis_e2e::TestContext;

use crate::serve_support::Server;

/// Asks the bash completion function for the words after the binary name
/// (`line` ends with the word being completed, possibly empty).
pub(crate) fn bash_complete(ctx: &TestContext, line: &[&str]) -> Vec<String> {
    let bin = TestContext::bin();
    let words: Vec<String> = std::iter::once("lapis-ai-controller".to_owned())
        .chain(line.iter().map(|w| format!("'{w}'")))
        .collect();
    let script = format!(
        r#"set -u
source <('{bin}' completions bash) || exit 90
complete -p lapis-ai-controller >/dev/null || exit 91
COMP_WORDS=({words})
COMP_CWORD={cword}
COMP_LINE="${{COMP_WORDS[*]}}"
COMP_POINT=${{#COMP_LINE}}
COMP_TYPE=9
_clap_complete_lapis_ai_controller lapis-ai-controller "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}"
"#,
        bin = bin.display(),
        words = words.join(" "),
        cword = line.len(),
    );
    let out = ctx.output({
        let mut cmd = ctx.command_for(Path::new("bash"), ["--norc", "--noprofile", "-c", &script]);
        cmd.env_remove("COLUMNS");
        cmd
    });
    assert_eq!(out.code, Some(0), "bash completion failed: {out:?}");
    out.stdout
        .lines()
        .map(|l| l.trim_end().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn bash_completion_works_past_the_first_word_and_hides_acp_echo() {
    let ctx = TestContext::new();
    assert_eq!(bash_complete(&ctx, &["thr"]), ["threads"]);
    let top = bash_complete(&ctx, &[""]);
    for expected in ["install", "threads", "turns", "journal", "completions"] {
        assert!(
            top.iter().any(|w| w == expected),
            "{expected} missing: {top:?}"
        );
    }
    assert!(
        !top.iter().any(|w| w == "acp-echo"),
        "hidden command offered: {top:?}"
    );
    assert!(bash_complete(&ctx, &["acp"]).is_empty());
    // Past the first word: subcommands, then a subcommand's own flags.
    let threads = bash_complete(&ctx, &["threads", ""]);
    for expected in ["create", "list", "show"] {
        assert!(threads.iter().any(|w| w == expected), "{threads:?}");
    }
    let flags = bash_complete(&ctx, &["threads", "create", "x", "--"]);
    for expected in ["--provider", "--approval", "--json"] {
        assert!(flags.iter().any(|w| w == expected), "{flags:?}");
    }
    assert_eq!(
        bash_complete(&ctx, &["turns", "resolve", "t", "--as", "c"]),
        ["cancelled"]
    );
    // With no service, dynamic values are simply absent (no error, no noise).
    assert!(bash_complete(&ctx, &["threads", "show", "thr"]).is_empty());
    let offline = bash_complete(&ctx, &["threads", "show", ""]);
    assert!(
        !offline.iter().any(|w| w.starts_with("thr_")),
        "{offline:?}"
    );
}

#[test]
fn bash_completion_offers_live_ids_and_provider_names() {
    let server = Server::start_full(
        serde_json::json!({}),
        serde_json::json!({ "custom": { "command": "/bin/true" } }),
    );
    let ctx = &server.ctx;
    let thread = ctx.run(["threads", "create", "proj", "--approval", "allow-all"]);
    thread.success();
    let thread_id = thread.stdout.trim().to_owned();
    let turn = ctx.run([
        "turns", "submit", &thread_id, "--prompt", "hi", "--wait", "--json",
    ]);
    turn.success();
    let turn_id = turn.json()["turn"]["id"].as_str().unwrap().to_owned();

    assert_eq!(
        bash_complete(ctx, &["threads", "show", "thr"]),
        std::slice::from_ref(&thread_id)
    );
    let empty = bash_complete(ctx, &["threads", "show", ""]);
    assert!(empty.contains(&thread_id), "{empty:?}");
    assert_eq!(
        bash_complete(ctx, &["turns", "list", "--thread", "thr_"]),
        std::slice::from_ref(&thread_id)
    );
    let journal = bash_complete(ctx, &["journal", "tail", ""]);
    assert!(journal.contains(&thread_id), "{journal:?}");
    assert_eq!(
        bash_complete(ctx, &["turns", "show", "turn"]),
        std::slice::from_ref(&turn_id)
    );
    let cancel = bash_complete(ctx, &["turns", "cancel", ""]);
    assert!(cancel.contains(&turn_id), "{cancel:?}");
    assert_eq!(bash_complete(ctx, &["threads", "create", "p"]), ["proj"]);
    assert_eq!(
        bash_complete(ctx, &["threads", "create", "proj", "--provider", ""]),
        ["custom", "echo"]
    );
    server.finish(&[], &[]);
}

#[test]
fn zsh_and_fish_completion_scripts_parse() {
    let ctx = TestContext::new();
    for shell in ["zsh", "fish"] {
        let found = Command::new(shell).arg("-c").arg("exit 0").output();
        if !matches!(found, Ok(ref o) if o.status.success()) {
            lapis_e2e::skip::skip(&format!(
                "{shell} is not installed; its completion script was not parse-checked"
            ));
            continue;
        }
        let script = ctx.run(["completions", shell]);
        script.success();
        assert!(
            !script.stdout.contains("acp-echo"),
            "{shell}: {}",
            script.stdout
        );
        let file = ctx.home().join(format!("completion.{shell}"));
        std::fs::write(&file, &script.stdout).unwrap();
        let check = Command::new(shell).arg("-n").arg(&file).output().unwrap();
        assert!(
            check.status.success(),
            "{shell} -n rejected the script: {}\n{}",
            String::from_utf8_lossy(&check.stderr),
            script.stdout
        );
    }
}

/// Filters that make output independent of the temp HOME, ids and times.
fn settings(home: &Path) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("snapshots");
    s.set_prepend_module_to_snapshot(false);
    s.add_filter(&regex_escape(&home.display().to_string()), "[HOME]");
    s.add_filter(r"thr_[0-9a-f]{32}", "[THREAD]");
    s.add_filter(r"turn_[0-9a-f]{32}", "[TURN]");
    s.add_filter(r"ses_[0-9a-f]{32}", "[SESSION]");
    s.add_filter(r"cmd_[0-9a-f]{32}", "[COMMAND]");
    // The provider fingerprint hashes the built-in echo's path (the build dir).
    s.add_filter(
        r#""fingerprint": "[0-9a-f]{64}""#,
        r#""fingerprint": "[FINGERPRINT]""#,
    );
    s.add_filter(
        r#""providerFingerprint": "[0-9a-f]{64}""#,
        r#""providerFingerprint": "[FINGERPRINT]""#,
    );
    // A submission's input digest covers the (random) thread id.
    s.add_filter(
        r#""inputDigest": "[0-9a-f]{64}""#,
        r#""inputDigest": "[DIGEST]""#,
    );
    s.add_filter(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "[TIME]");
    // A turn's input digest covers its (random) thread id.
    s.add_filter(
        r#""inputDigest": "[0-9a-f]{64}""#,
        r#""inputDigest": "[DIGEST]""#,
    );
    s.add_filter(
        r#""(pid|uptimeSeconds|version|commit|date|target|build)": ("[^"]*"|\d+)"#,
        r#""$1": "[REDACTED]""#,
    );
    s.add_filter(
        r"(?m)^(pid|uptime|version|commit|date|target)(\s+).*$",
        "$1$2[REDACTED]",
    );
    // What evidence snapshots took (`status`'s `evidence`) is wall time.
    s.add_filter(
        r#""(micros|medianMicros|maxMicros)": \d+"#,
        r#""$1": "[MICROS]""#,
    );
    s.add_filter(r"\b(median|max|last) \d+\.\d ms\b", "$1 [MS]");
    s.add_filter(
        r"lapis-ai-controller \d+\.\d+\.\d+\S*",
        "lapis-ai-controller [VERSION]",
    );
    s
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$#&-~".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect()
}

/// Every command path, found by walking the real binary's help.
fn command_paths(ctx: &TestContext, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut args = prefix.clone();
    args.push("--help".into());
    let help = ctx.run(&args);
    help.success();
    out.push(prefix.clone());
    // `Commands:` below the top level; the top level groups them
    // (`Agent commands:`, `Service commands:`, `Install commands:`).
    let mut in_section = false;
    for line in help.stdout.lines() {
        if line.trim().is_empty() {
            in_section = false;
            continue;
        }
        if !line.starts_with(' ') {
            in_section = line.ends_with("ommands:");
            continue;
        }
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        if !in_section || name == "help" || line.starts_with("   ") {
            continue;
        }
        let mut next = prefix.clone();
        next.push(name.to_owned());
        command_paths(ctx, next, out);
    }
}

#[test]
fn help_of_every_command_is_snapshotted() {
    let ctx = TestContext::new();
    let mut paths = Vec::new();
    command_paths(&ctx, Vec::new(), &mut paths);
    assert!(paths.len() > 20, "{paths:?}");
    assert!(!paths.iter().any(|p| p.iter().any(|w| w == "acp-echo")));
    let settings = settings(ctx.home());
    settings.bind(|| {
        for path in paths {
            let mut args = path.clone();
            args.push("--help".into());
            let out = ctx.run(&args);
            let name = if path.is_empty() {
                "help".to_owned()
            } else {
                format!("help-{}", path.join("-"))
            };
            insta::assert_snapshot!(name, out.stdout);
        }
    });
}

/// One command's exit code, stdout and stderr as one snapshot text.
fn transcript(ctx: &TestContext, args: &[&str]) -> String {
    let out = ctx.run(args);
    format!(
        "$ lapis-ai-controller {}\nexit: {}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        out.code.map_or("signal".into(), |c| c.to_string()),
        out.stdout,
        out.stderr
    )
}

#[test]
fn output_of_service_commands_is_snapshotted() {
    let server = Server::start();
    let ctx = &server.ctx;
    let other = ctx.home().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let other = other.display().to_string();
    let thread = ctx.run(["threads", "create", "proj", "--approval", "allow-all"]);
    let thread = thread.stdout.trim().to_owned();
    let turn = ctx.run([
        "turns", "submit", &thread, "--prompt", "hello", "--wait", "--json",
    ]);
    let turn = turn.json()["turn"]["id"].as_str().unwrap().to_owned();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("workspaces-add", vec!["workspaces", "add", "other", &other]),
        ("workspaces-list", vec!["workspaces", "list"]),
        ("workspaces-list-json", vec!["workspaces", "list", "--json"]),
        ("workspaces-remove", vec!["workspaces", "remove", "other"]),
        (
            "workspaces-remove-again-json",
            vec!["workspaces", "remove", "other", "--json"],
        ),
        (
            "workspaces-remove-configured",
            vec!["workspaces", "remove", "proj"],
        ),
        (
            "threads-create-json",
            vec!["threads", "create", "proj", "--json"],
        ),
        (
            "threads-create-no-provider",
            vec!["threads", "create", "proj", "--provider", "nope"],
        ),
        (
            "threads-create-no-provider-json",
            vec!["threads", "create", "proj", "--provider", "nope", "--json"],
        ),
        ("threads-list", vec!["threads", "list"]),
        ("threads-list-json", vec!["threads", "list", "--json"]),
        ("threads-show", vec!["threads", "show", &thread]),
        (
            "threads-show-json",
            vec!["threads", "show", &thread, "--json"],
        ),
        ("turns-list", vec!["turns", "list", "--thread", &thread]),
        (
            "turns-list-json",
            vec!["turns", "list", "--thread", &thread, "--json"],
        ),
        ("turns-show", vec!["turns", "show", &turn]),
        ("turns-show-json", vec!["turns", "show", &turn, "--json"]),
        ("turns-cancel-finished", vec!["turns", "cancel", &turn]),
        (
            "turns-cancel-finished-json",
            vec!["turns", "cancel", &turn, "--json"],
        ),
        (
            "turns-resolve-unconfirmed",
            vec!["turns", "resolve", &turn, "--as", "failed"],
        ),
        (
            "turns-resolve-unconfirmed-json",
            vec!["turns", "resolve", &turn, "--as", "failed", "--json"],
        ),
        (
            "turns-resolve-not-fenced",
            vec![
                "turns",
                "resolve",
                &turn,
                "--as",
                "failed",
                "--confirm-stopped",
            ],
        ),
        (
            "journal-tail-json",
            vec!["journal", "tail", &thread, "--json"],
        ),
        (
            "usage-error-json",
            vec!["threads", "create", "--workspace", "proj", "--json"],
        ),
        ("status-json", vec!["status", "--json"]),
    ];
    let settings = settings(ctx.home());
    settings.bind(|| {
        for (name, args) in &cases {
            insta::assert_snapshot!(format!("output-{name}"), transcript(ctx, args));
        }
    });
    server.finish(&[], &[]);
}

#[test]
fn json_usage_errors_are_error_documents() {
    let ctx = TestContext::new();
    let out = ctx.run(["threads", "list", "--bogus", "--json"]);
    out.expect_code(2);
    let doc = out.json();
    assert_eq!(doc["error"]["code"], "usage");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--bogus"),
        "{doc}"
    );
    // Without --json, clap's usual text and no JSON.
    let plain = ctx.run(["threads", "list", "--bogus"]);
    plain.expect_code(2);
    assert!(plain.stdout.is_empty() && plain.stderr.contains("--bogus"));
    // Help is not an error.
    ctx.run(["threads", "--help", "--json"]).success();
}

#[test]
fn version_flag_names_the_build_commit_date_and_target() {
    let ctx = TestContext::new();
    let doc = ctx.run(["version", "--json"]).json();
    let b = &doc["build"];
    let want = format!(
        "lapis-ai-controller {} ({} {} {})\n",
        b["version"].as_str().unwrap(),
        b["commit"].as_str().unwrap(),
        b["date"].as_str().unwrap(),
        b["target"].as_str().unwrap()
    );
    for flag in ["--version", "-V"] {
        let out = ctx.run([flag]);
        out.success();
        assert_eq!(out.stdout, want, "{flag}");
    }
}
