//! `providers check` against real agent processes, env-file secrets reaching
//! the agent (in a check and in a served turn) before the service's own
//! environment, and the `config` commands.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use lapis_e2e::TestContext;
use lapis_protocol::client::{Client, Credential};
use serde_json::{Value, json};

use crate::providers::{SECRET, fixture_bin, rich_config, run_with_stdin};
use crate::serve_support::{OWNER, Server};

fn add_fixture(ctx: &TestContext, name: &str, args: &[&str]) {
    let mut cmd = vec!["providers", "add", name, "--command", fixture_bin()];
    for a in args {
        cmd.extend(["--arg", a]);
    }
    ctx.run(cmd).success();
}

#[test]
fn check_reports_capabilities_auth_methods_and_modes() {
    let ctx = TestContext::new();
    rich_config(&ctx);
    add_fixture(
        &ctx,
        "fx",
        &["--advertise", "--resume-session", "--close-session"],
    );
    let out = ctx.run(["providers", "check", "fx", "--session", "--json"]);
    out.success();
    let r = &out.json()["report"];
    assert_eq!(r["protocolVersion"], 1);
    assert_eq!(r["agentInfo"]["name"], "fixture-agent");
    assert_eq!(r["loadSession"], true);
    assert_eq!(
        r["sessionCapabilities"],
        json!({"load": true, "resume": true, "list": false, "close": true, "fork": false})
    );
    assert_eq!(r["mcpCapabilities"]["http"], true);
    assert_eq!(r["promptCapabilities"]["embeddedContext"], true);
    assert_eq!(r["authMethods"][0]["id"], "fixture-login");
    assert_eq!(r["session"]["status"], "opened");
    assert_eq!(r["session"]["modes"]["availableModes"][1]["id"], "plan");
    let plain = ctx.run(["providers", "check", "fx", "--session"]);
    plain.success();
    for want in [
        "provider fx: ok",
        "agent: fixture-agent 1.2.3",
        "loadSession: yes",
        "lifecycle: load yes, resume yes, list no, close yes, fork no",
        "MCP: http",
        "prompt: embeddedContext",
        "auth methods: fixture-login",
        "modes: default, plan (current default)",
    ] {
        assert!(plain.stdout.contains(want), "{want}:\n{}", plain.stdout);
    }
    // Without --session no session is opened; the built-in echo agent works.
    let out = ctx.run(["providers", "check", "echo", "--json"]);
    out.success();
    assert!(out.json()["report"]["session"].is_null());
}

#[test]
fn check_gives_a_clear_reason() {
    let ctx = TestContext::new();
    rich_config(&ctx);
    // Auth required at session/new: names the method, exit 2, JSON details.
    add_fixture(&ctx, "locked", &["--advertise", "--auth-required"]);
    let out = ctx.run(["providers", "check", "locked", "--session"]);
    out.expect_code(2);
    assert!(
        out.stderr
            .contains("needs a login first: auth methods: fixture-login (Fixture login)"),
        "{}",
        out.stderr
    );
    let out = ctx.run(["providers", "check", "locked", "--session", "--json"]);
    out.expect_code(2);
    let v = out.json();
    assert_eq!(v["error"]["code"], "auth_required");
    assert_eq!(
        v["error"]["details"]["report"]["session"]["status"],
        "auth_required"
    );
    // A catalogue agent that is not installed: how to install it.
    let out = ctx.run(["providers", "check", "amp"]);
    out.expect_code(2);
    assert!(
        out.stderr
            .contains("`amp-acp` not found in PATH or ~/.local/bin"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("install it: binary release from github.com/tao12345666333/amp-acp"),
        "{}",
        out.stderr
    );
    // An agent that breaks initialize.
    add_fixture(&ctx, "broken", &["--fail-initialize"]);
    let out = ctx.run(["providers", "check", "broken", "--json"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "initialize_failed");
}

#[test]
fn env_file_secret_reaches_the_agent_before_the_service_environment() {
    let mut ctx = TestContext::new();
    let config = rich_config(&ctx);
    // The expected value reaches the fixture through a file outside HOME,
    // so it is in no argv, config or output.
    let want = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(want.path(), SECRET).unwrap();
    let expect = format!("API_KEY_X=@{}", want.path().display());
    ctx.run([
        "providers",
        "add",
        "keyed",
        "--command",
        fixture_bin(),
        "--arg",
        "--expect-env",
        "--arg",
        &expect,
        "--allow-env",
        "API_KEY_X",
    ])
    .success();
    // Neither the env file nor the environment has it: initialize fails.
    let out = ctx.run(["providers", "check", "keyed", "--json"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "initialize_failed");
    // The env file wins over a different value in the service environment.
    ctx.set_env("API_KEY_X", "wrong-value-from-the-login-shell");
    run_with_stdin(&ctx, &["providers", "remove", "keyed"], "").success();
    run_with_stdin(
        &ctx,
        &[
            "providers",
            "add",
            "keyed",
            "--command",
            fixture_bin(),
            "--arg",
            "--expect-env",
            "--arg",
            &expect,
            "--allow-env",
            "API_KEY_X",
            "--secret",
            "API_KEY_X",
        ],
        &format!("{SECRET}\n"),
    )
    .success();
    ctx.run(["providers", "check", "keyed"]).success();
    let env = config.parent().unwrap().join("env");
    assert_eq!(
        std::fs::metadata(&env).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn serve_reads_the_env_file_at_start_and_at_reload() {
    let expect = format!("API_KEY_X={SECRET}");
    let providers = json!({"keyed": {"command": fixture_bin(),
        "args": ["--expect-env", expect], "envAllowlist": ["API_KEY_X"]}});
    let mut server = Server::start_full(json!({}), providers);
    server.stop();
    let env = server.config.parent().unwrap().join("env");
    std::fs::write(&env, format!("API_KEY_X={SECRET}\n")).unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o600)).unwrap();
    server.spawn();
    let mut client = Client::open(
        &server.socket(),
        Credential::Token {
            token: OWNER.to_owned(),
            application: "env-test".to_owned(),
        },
    )
    .unwrap();
    let thread = client
        .threads_create("proj", "keyed", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let run_turn = |client: &mut Client, id: &str| {
        let turn_id = client.turns_submit(&thread.id, id, "hello").unwrap().id;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let state = client
                .turns_get(&turn_id)
                .unwrap()
                .state
                .as_str()
                .to_owned();
            if matches!(state.as_str(), "completed" | "failed" | "cancelled") {
                return state;
            }
            assert!(Instant::now() < deadline, "turn stuck in {state}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    assert_eq!(
        run_turn(&mut client, "e-1"),
        "completed",
        "the agent saw the env file's value"
    );
    // A reload re-reads the env file: a changed value reaches later turns.
    std::fs::write(&env, "API_KEY_X=another-value-after-reload\n").unwrap();
    server.ctx.run(["config", "reload"]).success();
    assert_eq!(
        run_turn(&mut client, "e-2"),
        "failed",
        "the reloaded value differs"
    );
    // A bad env file refuses the reload (exit 2) and keeps the previous one.
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = server.ctx.run(["config", "reload"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("invalid_env_file") && out.stderr.contains("mode 0644"),
        "{}",
        out.stderr
    );
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o600)).unwrap();
    drop(client);
    server.finish(&[], &[]);
}

#[test]
fn config_commands_path_validate_show_schema() {
    let ctx = TestContext::new();
    let config = rich_config(&ctx);
    let out = ctx.run(["config", "path"]);
    out.success();
    assert_eq!(out.stdout.trim(), config.display().to_string());
    let out = ctx.run(["config", "validate", "--json"]);
    out.success();
    assert_eq!(out.json()["valid"], true);
    // A bad allowlist entry: the error names the JSON path, never the value.
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    doc["providers"]["mine"]["envAllowlist"] = json!(["TERM", "HOME", "sk-LEAKED=oops"]);
    // Outside HOME: the copy holds the tokens (the leak check scans HOME).
    let outside = tempfile::tempdir().unwrap();
    let bad = outside.path().join("bad.json");
    std::fs::write(&bad, serde_json::to_vec(&doc).unwrap()).unwrap();
    let out = ctx.run(["config", "validate", "--config", bad.to_str().unwrap()]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("`providers.mine.envAllowlist[2]`"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("oops"), "{}", out.stderr);
    doc["providers"]["mine"]["envAllowlist"] = json!(["TERM", 5]);
    std::fs::write(&bad, serde_json::to_vec(&doc).unwrap()).unwrap();
    let out = ctx.run([
        "config",
        "validate",
        "--config",
        bad.to_str().unwrap(),
        "--json",
    ]);
    out.expect_code(2);
    let v = out.json();
    assert_eq!(v["error"]["code"], "invalid_config");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`providers.mine.envAllowlist[1]`"),
        "{v}"
    );
    // The schema: generated, current in docs/, and it describes the file.
    let out = ctx.run(["config", "schema"]);
    out.success();
    let schema = out.json();
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/config.schema.json"
    ))
    .unwrap();
    assert_eq!(
        out.stdout.trim_end(),
        committed.trim_end(),
        "docs/config.schema.json is stale"
    );
    assert_eq!(schema["additionalProperties"], false);
    assert!(
        schema["required"]
            .as_array()
            .unwrap()
            .contains(&json!("tokens"))
    );
    assert!(schema["$defs"]["ProviderConfig"]["properties"]["envAllowlist"].is_object());
}

#[test]
fn a_failed_check_quotes_the_agents_last_stderr_lines_redacted_and_harmless() {
    let ctx = TestContext::new();
    rich_config(&ctx);
    add_fixture(
        &ctx,
        "grumpy",
        &["--stderr", "12", "--hostile", "--fail-initialize"],
    );
    add_fixture(&ctx, "leaky", &["--secrets", "--fail-initialize"]);
    let out = ctx.run(["providers", "check", "grumpy"]);
    out.expect_code(2);
    crate::cli_terminal::assert_harmless("providers check stderr", &out.stderr);
    assert!(
        out.stderr.contains("the agent's last stderr lines:"),
        "{}",
        out.stderr
    );
    // The last lines only (the earliest of the twelve are gone), each made
    // harmless on the terminal.
    assert!(
        out.stderr.contains("fixture stderr line 11␛[2K␛[1G␛[31m"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("fixture stderr line 0"),
        "{}",
        out.stderr
    );
    // Redacted: the credentials the agent printed reach no output.
    let leaky = ctx.run(["providers", "check", "leaky"]);
    leaky.expect_code(2);
    assert!(leaky.stderr.contains("[REDACTED:"), "{}", leaky.stderr);
    for sample in lapis_service::test_support::sample_credentials() {
        assert!(!leaky.stderr.contains(&sample.secret), "{}", leaky.stderr);
    }
    let json = ctx.run(["providers", "check", "grumpy", "--json"]);
    json.expect_code(2);
    let doc = json.json();
    let lines = doc["error"]["details"]["stderr"].as_array().unwrap();
    assert_eq!(lines.len(), lapis_service::acp::TAIL_LINES, "{doc}");
    // JSON keeps the bytes.
    assert!(
        lines.last().unwrap().as_str().unwrap().contains('\x1b'),
        "{doc}"
    );
    for sample in lapis_service::test_support::sample_credentials() {
        assert!(!json.stdout.contains(&sample.secret), "{}", json.stdout);
    }
    // `doctor` runs the same start and says the same.
    let doctor = ctx.run(["doctor"]);
    let line = doctor
        .stdout
        .lines()
        .find(|l| l.contains("provider:grumpy"))
        .unwrap_or_else(|| panic!("{}", doctor.stdout))
        .to_owned();
    assert!(line.starts_with("fail"), "{line}");
    assert!(line.contains("initialize failed"), "{line}");
    assert!(
        doctor.stdout.contains("fixture stderr line 11"),
        "{}",
        doctor.stdout
    );
    crate::cli_terminal::assert_harmless("doctor", &doctor.stdout);
}

/// With a controller running, `providers check` is the service's own check
/// (issue 23): a command found on this shell's `PATH` but not on the
/// service's fails, in the service's words; with none running the check
/// runs here and says so.
#[test]
fn a_running_controller_checks_with_its_own_path() {
    let mut server = Server::start_full(
        json!({}),
        json!({ "shelly": { "command": "shelly-agent" } }),
    );
    // Only the shell the CLI runs in finds `shelly-agent`; `serve` started
    // before this PATH existed.
    let bin = server.ctx.home().join("shell-only-bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(fixture_bin(), bin.join("shelly-agent")).unwrap();
    server.ctx.prepend_path(&bin);

    let refused = server.ctx.run(["providers", "check", "shelly", "--json"]);
    refused.expect_code(2);
    let doc = refused.json();
    assert_eq!(doc["error"]["code"], "command_not_found", "{doc}");
    assert_eq!(doc["error"]["details"]["checkedBy"], "service", "{doc}");
    let plain = server.ctx.run(["providers", "check", "shelly"]);
    assert!(
        plain.stderr.contains("checked by the running controller"),
        "{}",
        plain.stderr
    );
    // The echo agent, checked by the service, works.
    let echo = server.ctx.run(["providers", "check", "echo", "--json"]);
    assert_eq!(echo.success().json()["checkedBy"], "service");

    // `doctor` asks the controller too.
    let doctor = server.ctx.run(["doctor"]);
    let text = format!("{}{}", doctor.stdout, doctor.stderr);
    assert!(
        text.lines()
            .any(|l| l.contains("provider:shelly")
                && l.contains("checked by the running controller")),
        "{text}"
    );

    // No controller: the check runs here, with this shell's PATH.
    server.stop();
    let local = server.ctx.run(["providers", "check", "shelly"]);
    local.success();
    assert!(
        local.stdout.contains("provider shelly: ok"),
        "{}",
        local.stdout
    );
    assert!(local.stdout.contains("checked here"), "{}", local.stdout);
}

/// `providers check` negotiates like a turn: an agent offering v1 and v2
/// reports protocol version 1; one offering only v2 is refused with the
/// stable code `protocol_version_unsupported`.
#[test]
fn check_negotiates_down_to_v1_or_refuses_a_v2_only_agent() {
    let ctx = TestContext::new();
    rich_config(&ctx);
    add_fixture(&ctx, "both", &["--protocol-versions", "1,2"]);
    add_fixture(&ctx, "v2only", &["--protocol-versions", "2"]);
    let both = ctx
        .run(["providers", "check", "both", "--json"])
        .success()
        .json();
    assert_eq!(both["report"]["protocolVersion"], 1, "{both}");
    let refused = ctx.run(["providers", "check", "v2only", "--json"]);
    refused.expect_code(2);
    let doc = refused.json();
    assert_eq!(
        doc["error"]["code"], "protocol_version_unsupported",
        "{doc}"
    );
}
