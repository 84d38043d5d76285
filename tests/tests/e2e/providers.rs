//! `providers list|add|remove|check` and the agent-secrets env file, with the
//! real binary: atomic edits that keep tokens and every other field, bad
//! input refused with exit 2 and nothing rewritten, secrets never printed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use lapis_e2e::{Output, TestContext};
use serde_json::{Value, json};

use crate::serve_support::{GUEST, OWNER, READER, write_config_with};

/// An agent secret used by these tests; the leak check looks for it
/// everywhere once it is in an env file.
pub(crate) const SECRET: &str = "sk-e2e-agent-secret-0123456789";

pub(crate) fn fixture_bin() -> &'static str {
    env!("CARGO_BIN_EXE_fixture-agent")
}

/// A config with two tokens (one scoped), a workspace, server limits and a
/// provider with constant env and a VCS identity: content `providers add`
/// knows nothing about and must keep.
pub(crate) fn rich_config(ctx: &TestContext) -> PathBuf {
    let project = ctx.home().join("project");
    std::fs::create_dir_all(&project).unwrap();
    write_config_with(
        ctx,
        json!({"queueCapacity": 7, "maxFrameBytes": 4096}),
        json!({"proj": {"path": project}}),
        json!({"mine": {"command": fixture_bin(), "args": ["--advertise"],
            "env": {"MODE": "x"}, "envAllowlist": ["TERM"],
            "vcsIdentity": {"name": "Bot", "email": "bot@example.com"}}}),
    )
}

fn doc(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn env_path(config: &Path) -> PathBuf {
    config.parent().unwrap().join("env")
}

/// Runs `args` with `input` on stdin (from a file outside HOME, so the
/// secret is not left lying under HOME for the leak check).
pub(crate) fn run_with_stdin(ctx: &TestContext, args: &[&str], input: &str) -> Output {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), input).unwrap();
    let mut cmd = ctx.command(args);
    cmd.stdin(Stdio::from(std::fs::File::open(file.path()).unwrap()));
    ctx.output(cmd)
}

#[test]
fn add_and_remove_keep_tokens_and_every_other_field() {
    let mut ctx = TestContext::new();
    ctx.set_env("PATH", "/usr/bin:/bin");
    let config = rich_config(&ctx);
    let before = doc(&config);
    let out = ctx.run(["providers", "add", "claude"]);
    out.success();
    assert!(out.stdout.contains("claude-agent-acp"), "{}", out.stdout);
    // Not installed: stays bare, with the install hint; the shell's PATH
    // and the service's HOME are given to the agent by default.
    assert!(
        out.stdout
            .contains("`claude-agent-acp` is not on your PATH: stored as a bare name"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("needs Node >= 22"), "{}", out.stdout);
    assert!(out.stdout.contains("ANTHROPIC_BASE_URL"), "{}", out.stdout);
    assert!(
        out.stdout.contains("no service is running"),
        "{}",
        out.stdout
    );
    let after = doc(&config);
    assert_eq!(
        after["providers"]["claude"],
        json!({"command": "claude-agent-acp", "env": {"PATH": "/usr/bin:/bin"},
            "envAllowlist": ["ANTHROPIC_API_KEY", "HOME"], "restrictedMode": "plan",
            "askMode": "default"})
    );
    // The first provider added became the default of `ask`.
    assert_eq!(after["defaultProvider"], "claude");
    let mut without = after.clone();
    without["providers"]
        .as_object_mut()
        .unwrap()
        .remove("claude");
    without.as_object_mut().unwrap().remove("defaultProvider");
    assert_eq!(without, before, "every other field keeps its meaning");
    for (i, t) in [OWNER, GUEST, READER].iter().enumerate() {
        assert_eq!(after["tokens"][i]["secret"], *t);
    }
    let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    ctx.run(["config", "validate"]).success();
    ctx.run(["providers", "remove", "claude"]).success();
    assert_eq!(doc(&config), before);
    let out = ctx.run(["providers", "remove", "claude"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("`claude` is not configured"),
        "{}",
        out.stderr
    );
}

#[test]
fn add_with_own_command_args_and_allowlist() {
    let ctx = TestContext::new();
    let config = rich_config(&ctx);
    ctx.run([
        "providers",
        "add",
        "custom",
        "--command",
        fixture_bin(),
        "--arg",
        "--advertise",
        "--arg",
        "--chunks",
        "--arg",
        "2",
        "--allow-env",
        "MY_KEY",
        "--allow-env",
        "OTHER",
        "--env",
        "MODEL=qwen3-coder",
        "--env",
        "BASE_URL=http://127.0.0.1:8080/v1",
        "--no-default-env",
    ])
    .success();
    assert_eq!(
        doc(&config)["providers"]["custom"],
        json!({"command": fixture_bin(), "args": ["--advertise", "--chunks", "2"],
            "env": {"BASE_URL": "http://127.0.0.1:8080/v1", "MODEL": "qwen3-coder"},
            "envAllowlist": ["MY_KEY", "OTHER"]})
    );
    // A catalogue name with flags: the flags override or extend the defaults.
    ctx.run([
        "providers",
        "add",
        "gemini",
        "--allow-env",
        "GOOGLE_CLOUD_PROJECT",
        "--no-default-env",
    ])
    .success();
    assert_eq!(
        doc(&config)["providers"]["gemini"],
        json!({"command": "gemini", "args": ["--acp"],
            "envAllowlist": ["GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT"],
            "restrictedMode": "plan", "askMode": "default"})
    );
}

#[test]
fn bad_input_is_refused_with_exit_2_and_nothing_rewritten() {
    let ctx = TestContext::new();
    let config = rich_config(&ctx);
    let env = env_path(&config);
    std::fs::write(&env, "KEPT=value-kept-1\n").unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config_bytes = std::fs::read(&config).unwrap();
    let unchanged = |env_bytes: &[u8]| {
        assert_eq!(
            std::fs::read(&config).unwrap(),
            config_bytes,
            "config rewritten"
        );
        assert_eq!(
            std::fs::read(&env).unwrap(),
            env_bytes,
            "env file rewritten"
        );
    };
    let env_bytes = std::fs::read(&env).unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["providers", "add", "qwen", "--env", "OPENAI_MODEL"],
            "--env takes NAME=VALUE",
        ),
        (
            &["providers", "add", "no-such-agent"],
            "`no-such-agent` is not in the catalogue",
        ),
        (
            &["providers", "add", "mine", "--command", "x"],
            "`mine` is already configured",
        ),
        (
            &["providers", "add", "codex", "--secret", "NOT_ALLOWED"],
            "secret `NOT_ALLOWED` is not in provider `codex`'s envAllowlist",
        ),
        (
            &["providers", "add", "rel", "--command", "bin/agent"],
            "relative path",
        ),
    ];
    for (args, message) in cases {
        let out = run_with_stdin(&ctx, args, &format!("{SECRET}\n"));
        out.expect_code(2);
        assert!(out.stderr.contains(message), "{args:?}: {}", out.stderr);
        unchanged(&env_bytes);
    }
    // JSON error codes, with --json where the command has it.
    let out = ctx.run(["providers", "check", "no-such-agent", "--json"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "unknown_provider");
    // A bad env file line: named by line number, value never quoted.
    std::fs::write(&env, format!("KEPT=value-kept-1\n{SECRET}\n")).unwrap();
    let bad_line = std::fs::read(&env).unwrap();
    let out = run_with_stdin(
        &ctx,
        &[
            "providers",
            "add",
            "claude",
            "--secret",
            "ANTHROPIC_API_KEY",
        ],
        "sk-other-value-99\n",
    );
    out.expect_code(2);
    assert!(
        out.stderr.contains("line 2: expected NAME=VALUE"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains(SECRET));
    unchanged(&bad_line);
    // Wrong mode: named, with the fix.
    std::fs::write(&env, "KEPT=value-kept-1\n").unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run_with_stdin(
        &ctx,
        &[
            "providers",
            "add",
            "claude",
            "--secret",
            "ANTHROPIC_API_KEY",
        ],
        "sk-other-value-99\n",
    );
    out.expect_code(2);
    assert!(
        out.stderr.contains("mode 0644") && out.stderr.contains("chmod 600"),
        "{}",
        out.stderr
    );
    unchanged(b"KEPT=value-kept-1\n");
    for args in [&["config", "validate"][..], &["config", "show"], &["serve"]] {
        let out = ctx.run(args);
        out.expect_code(2);
        assert!(out.stderr.contains("mode 0644"), "{args:?}: {}", out.stderr);
    }
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[test]
fn secret_from_stdin_is_stored_0600_and_never_printed() {
    let ctx = TestContext::new();
    let config = rich_config(&ctx);
    let out = run_with_stdin(
        &ctx,
        &[
            "providers",
            "add",
            "claude",
            "--secret",
            "ANTHROPIC_API_KEY",
        ],
        &format!("{SECRET}\n"),
    );
    out.success();
    assert!(
        out.stdout.contains("secret ANTHROPIC_API_KEY stored in"),
        "{}",
        out.stdout
    );
    let env = env_path(&config);
    let meta = std::fs::metadata(&env).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let text = std::fs::read_to_string(&env).unwrap();
    assert!(
        text.lines()
            .any(|l| l == format!("ANTHROPIC_API_KEY={SECRET}")),
        "env file holds the line"
    );
    // No value in any output (the context's leak check at drop covers every
    // command's output and every file under HOME too).
    let show = ctx.run(["config", "show", "--json"]);
    show.success();
    let shown = show.json();
    assert_eq!(shown["envFile"]["names"], json!(["ANTHROPIC_API_KEY"]));
    assert_eq!(shown["config"]["tokens"][0]["secret"], "********");
    assert!(!show.stdout.contains(OWNER) && !show.stdout.contains(SECRET));
    let plain = ctx.run(["config", "show"]);
    plain.success();
    assert!(plain.stdout.contains("sets ANTHROPIC_API_KEY") && !plain.stdout.contains(OWNER));
    // An empty value is refused and nothing is written.
    let before = std::fs::read(&config).unwrap();
    let out = run_with_stdin(
        &ctx,
        &["providers", "add", "codex", "--secret", "OPENAI_API_KEY"],
        "\n",
    );
    out.expect_code(2);
    assert!(
        out.stderr
            .contains("no value was given for secret `OPENAI_API_KEY`"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read(&config).unwrap(), before);
}

#[test]
fn list_shows_catalogue_configured_and_whether_commands_are_found() {
    let mut ctx = TestContext::new();
    rich_config(&ctx);
    // `codex-acp` on PATH, `gemini` only in ~/.local/bin: the runner's lookup.
    let bin = ctx.home().join("path-bin");
    let local = ctx.home().join(".local/bin");
    for dir in [&bin, &local] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::os::unix::fs::symlink(fixture_bin(), bin.join("codex-acp")).unwrap();
    std::os::unix::fs::symlink(fixture_bin(), local.join("gemini")).unwrap();
    ctx.prepend_path(&bin);
    ctx.run(["providers", "add", "codex"]).success();
    let out = ctx.run(["providers", "list", "--json"]);
    out.success();
    let v = out.json();
    let entry = |list: &str, name: &str| -> Value {
        v[list]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {list}"))
    };
    assert!(v["catalogue"].as_array().unwrap().len() >= 26);
    assert_eq!(entry("catalogue", "codex")["found"], true);
    assert_eq!(entry("catalogue", "codex")["configured"], true);
    assert_eq!(entry("catalogue", "gemini")["found"], true);
    assert_eq!(
        entry("catalogue", "gemini")["path"],
        json!(local.join("gemini"))
    );
    assert_eq!(entry("catalogue", "claude")["command"], "claude-agent-acp");
    assert!(
        entry("catalogue", "claude")["source"]
            .as_str()
            .unwrap()
            .contains("claude-agent-acp")
    );
    assert_eq!(entry("configured", "echo")["builtin"], true);
    assert_eq!(entry("configured", "mine")["found"], true);
    assert_eq!(entry("configured", "codex")["found"], true);
    let plain = ctx.run(["providers", "list"]);
    plain.success();
    assert!(
        plain.stdout.contains("codex-acp") && plain.stdout.contains("[configured]"),
        "{}",
        plain.stdout
    );
}

#[test]
fn on_a_terminal_the_secret_is_read_from_the_hidden_prompt() {
    use std::io::{Read, Write};
    let ctx = TestContext::new();
    let config = rich_config(&ctx);
    // `script` runs the CLI on a fresh pseudo-terminal and relays our pipe to
    // its input; the terminal's output is what a person would see.
    let line = format!(
        "{} providers add claude --secret ANTHROPIC_API_KEY",
        TestContext::bin().display()
    );
    let mut cmd = ctx.command_for(Path::new("script"), ["-qec", line.as_str(), "/dev/null"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("(input hidden): ") {
        let n = out.read(&mut buf).unwrap();
        assert!(n > 0, "terminal closed: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    stdin.write_all(format!("{SECRET}\n").as_bytes()).unwrap();
    stdin.flush().unwrap();
    // Bounded, so a prompt that never returns fails instead of hanging.
    let reader = std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = out.read_to_end(&mut rest);
        rest
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "providers add did not end: {}",
                String::from_utf8_lossy(&seen)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    drop(stdin);
    seen.extend(reader.join().unwrap());
    let terminal = String::from_utf8_lossy(&seen).into_owned();
    assert!(status.success(), "{terminal}");
    // The value came from the terminal, after the hidden prompt. (Whether
    // the terminal echoed it is not asserted: input written before the
    // prompt turns echo off is echoed by the line discipline, so a test
    // that writes at once races with it; a person types after the prompt.)
    assert!(
        terminal.contains("secret ANTHROPIC_API_KEY stored"),
        "{terminal}"
    );
    let env = std::fs::read_to_string(env_path(&config)).unwrap();
    assert!(
        env.lines()
            .any(|l| l == format!("ANTHROPIC_API_KEY={SECRET}")),
        "stored: {}",
        env.lines()
            .map(|l| l.split('=').next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join(",")
    );
}

#[test]
fn add_resolves_the_command_from_this_shell_and_a_running_service_reloads() {
    use crate::serve_support::Server;
    let mut server = Server::start_full(json!({}), json!({}));
    // `qwen` on this shell's PATH only (a node agent from nvm, say).
    let bin = server.ctx.home().join("nvm-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let qwen = bin.join("qwen");
    std::fs::write(
        &qwen,
        format!(
            "#!/bin/sh\nexec {} --chunks 1 --report-env\n",
            fixture_bin()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&qwen, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    server.ctx.set_env("PATH", &path);
    let out = server.ctx.run([
        "providers",
        "add",
        "qwen",
        "--env",
        "OPENAI_BASE_URL=http://127.0.0.1:9/v1",
    ]);
    out.success();
    assert!(
        out.stdout.contains(&format!(
            "`qwen` found on your PATH at {}: stored absolute",
            qwen.display()
        )),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("the running service reloaded its configuration"),
        "{}",
        out.stdout
    );
    let stored = doc(&server.config)["providers"]["qwen"].clone();
    assert_eq!(stored["command"], json!(qwen));
    assert_eq!(stored["env"]["PATH"], path.as_str());
    // Usable at once, without a restart: the agent sees the shell's PATH,
    // the service's HOME and the setting.
    let thread = server
        .ctx
        .run(["threads", "create", "proj", "--provider", "qwen"])
        .success()
        .stdout
        .trim()
        .to_owned();
    let reply = server
        .ctx
        .run(["turns", "submit", &thread, "--prompt", "env?", "--wait"]);
    reply.success();
    assert!(
        reply.stdout.contains(&format!("PATH={path}")),
        "{}",
        reply.stdout
    );
    assert!(
        reply
            .stdout
            .contains(&format!("HOME={}", server.ctx.home().display())),
        "{}",
        reply.stdout
    );
    assert!(
        reply
            .stdout
            .contains("OPENAI_BASE_URL=http://127.0.0.1:9/v1"),
        "{}",
        reply.stdout
    );
    let removed = server.ctx.run(["providers", "remove", "qwen"]);
    removed.success();
    assert!(
        removed
            .stdout
            .contains("the running service reloaded its configuration"),
        "{}",
        removed.stdout
    );
    server.stop();
}
