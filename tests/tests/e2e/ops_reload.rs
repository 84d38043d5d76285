//! Reloading the configuration of a running `serve` (SIGHUP; the unit's
//! `ExecReload`): providers and workspaces change for later turns; an
//! invalid new config is refused, logged, and the old one stays in effect.

use std::time::{Duration, Instant};

use lapis_protocol::client::Client;
use serde_json::{Value, json};

use crate::serve_support::Server;

fn fixture() -> Value {
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"), "args": ["--chunks", "2"] })
}

/// Sends SIGHUP and waits for the `nth` reload outcome line in the log.
fn hup_and_wait(server: &Server, nth: usize) -> String {
    std::process::Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = server.log_text();
        let outcomes: Vec<&str> = log
            .lines()
            .filter(|l| {
                l.contains("configuration reloaded") || l.contains("configuration reload refused")
            })
            .collect();
        if outcomes.len() >= nth {
            return outcomes[nth - 1].to_owned();
        }
        assert!(Instant::now() < deadline, "no reload outcome:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_turn(client: &mut Client, workspace: &str, provider: &str) -> String {
    let thread = client
        .threads_create(
            workspace,
            provider,
            lapis_protocol::ApprovalPolicy::Ask,
            None,
        )
        .unwrap();
    let command = format!("cmd-{}", thread.id);
    let turn = client.turns_submit(&thread.id, &command, "hello").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let t = client.turns_get(&turn.id).unwrap();
        let state = t.state.as_str().to_owned();
        if !matches!(
            state.as_str(),
            "queued" | "preparing" | "dispatched" | "running"
        ) {
            return state;
        }
        assert!(Instant::now() < deadline, "turn stuck in {state}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sighup_adds_a_provider_and_a_workspace_for_later_turns() {
    let server = Server::start_full(json!({}), json!({}));
    let mut client = server.client("reload-e2e");
    let before =
        client.threads_create("proj", "fixture", lapis_protocol::ApprovalPolicy::Ask, None);
    assert!(before.is_err(), "fixture is not configured yet");

    let second = server.ctx.home().join("second");
    std::fs::create_dir_all(&second).unwrap();
    server.edit_config(|doc| {
        doc["providers"]["fixture"] = fixture();
        doc["workspaces"]["second"] = json!({ "path": second });
    });
    let outcome = hup_and_wait(&server, 1);
    assert!(outcome.contains("configuration reloaded"), "{outcome}");
    assert!(outcome.contains("workspaces_added=1"), "{outcome}");

    // The same connection sees the new provider and workspace.
    assert_eq!(run_turn(&mut client, "second", "fixture"), "completed");
    assert_eq!(run_turn(&mut client, "proj", "echo"), "completed");
    drop(client);
    server.finish(&[], &[]);
}

#[test]
fn an_invalid_config_is_refused_and_the_old_one_stays_in_effect() {
    let server = Server::start_full(json!({}), json!({ "fixture": fixture() }));
    let mut client = server.client("reload-e2e");
    let good = std::fs::read(&server.config).unwrap();

    // Not JSON at all.
    std::fs::write(&server.config, b"{\"schema\": 1, \"tokens\": [").unwrap();
    let outcome = hup_and_wait(&server, 1);
    assert!(
        outcome.contains("configuration reload refused"),
        "{outcome}"
    );
    assert!(outcome.contains("malformed at line"), "{outcome}");
    assert_eq!(run_turn(&mut client, "proj", "fixture"), "completed");

    // Valid JSON, invalid provider: named by its field, nothing applied
    // (the workspace added in the same edit is not registered either).
    std::fs::write(&server.config, &good).unwrap();
    let third = server.ctx.home().join("third");
    std::fs::create_dir_all(&third).unwrap();
    server.edit_config(|doc| {
        doc["providers"]["bad"] = json!({ "command": "relative/agent" });
        doc["workspaces"]["third"] = json!({ "path": third });
        doc["providers"].as_object_mut().unwrap().remove("fixture");
    });
    let outcome = hup_and_wait(&server, 2);
    assert!(
        outcome.contains("configuration reload refused"),
        "{outcome}"
    );
    assert!(outcome.contains("providers.bad"), "{outcome}");
    assert_eq!(run_turn(&mut client, "proj", "fixture"), "completed");
    assert!(
        client
            .threads_create("third", "echo", lapis_protocol::ApprovalPolicy::Ask, None)
            .is_err()
    );

    // A workspace path that does not exist is refused by name too.
    std::fs::write(&server.config, &good).unwrap();
    server.edit_config(|doc| {
        doc["workspaces"]["gone"] = json!({ "path": server.ctx.home().join("missing") });
    });
    let outcome = hup_and_wait(&server, 3);
    assert!(outcome.contains("workspaces.gone"), "{outcome}");

    // The server still runs and a good config applies again.
    std::fs::write(&server.config, &good).unwrap();
    let outcome = hup_and_wait(&server, 4);
    assert!(outcome.contains("configuration reloaded"), "{outcome}");
    drop(client);
    server.finish(&[], &[]);
}

#[test]
fn config_reload_asks_the_running_service_and_status_shows_a_refusal() {
    let server = Server::start_full(json!({}), json!({}));
    server.edit_config(|doc| {
        doc["providers"]["fixture"] = fixture();
        doc["server"]["queueCapacity"] = json!(7);
    });
    let out = server.ctx.run(["config", "reload", "--json"]);
    let doc = out.success().json();
    assert_eq!(doc["applied"], true, "{doc}");
    assert_eq!(doc["providers"], json!(["echo", "fixture"]));
    assert_eq!(doc["restartNeeded"], json!(["server"]));
    let status = server.ctx.run(["status", "--json"]).success().json();
    assert_eq!(status["lastReload"]["applied"], true);
    // Limits are not reloaded: the queue keeps its capacity until a restart,
    // and status says so with the restart command.
    assert_eq!(status["queue"]["capacity"], 1024);
    let warnings = status["warnings"].to_string();
    assert!(warnings.contains("after a restart"), "{warnings}");

    // A file the CLI itself cannot validate is reported by the CLI (it
    // needs the file for its token); the service is not asked.
    let good = std::fs::read(&server.config).unwrap();
    server.edit_config(|doc| {
        doc["providers"]["fixture"]["envAllowlist"] = json!(["not a name"]);
    });
    let out = server.ctx.run(["config", "reload", "--json"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "invalid_config");
    assert!(out.stderr.contains("providers.fixture"), "{}", out.stderr);
    std::fs::write(&server.config, &good).unwrap();

    // A valid file the service refuses: its new workspace's directory is
    // already registered at run time under another id.
    let shared = server.ctx.home().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    server
        .ctx
        .run([
            "workspaces",
            "add",
            "runtime",
            &shared.display().to_string(),
        ])
        .success();
    server.edit_config(|doc| {
        doc["workspaces"]["dup"] = json!({ "path": shared });
    });
    let out = server.ctx.run(["config", "reload", "--json"]);
    out.expect_code(2);
    let doc = out.json();
    assert_eq!(doc["error"]["code"], "reload_refused");
    assert_eq!(doc["error"]["details"]["applied"], false);
    assert_eq!(doc["error"]["details"]["code"], "workspace_alias");
    assert!(out.stderr.contains("workspaces.dup"), "{}", out.stderr);
    assert!(
        out.stderr.contains("keeps the previous one"),
        "{}",
        out.stderr
    );

    // The refusal is visible in status (JSON and plain) and in the log.
    let status = server.ctx.run(["status", "--json"]).success().json();
    assert_eq!(status["lastReload"]["applied"], false);
    assert!(
        status["lastReload"]["error"]
            .as_str()
            .unwrap()
            .contains("workspaces.dup")
    );
    let warnings = status["warnings"].to_string();
    assert!(warnings.contains("config reload was refused"), "{warnings}");
    let plain = server.ctx.run(["status"]);
    assert!(
        plain.success().stdout.contains("\nreload    refused at "),
        "{}",
        plain.stdout
    );
    assert!(server.log_text().contains("configuration reload refused"));

    // The provider of the previous configuration still runs turns.
    let mut client = server.client("reload-e2e");
    assert_eq!(run_turn(&mut client, "proj", "fixture"), "completed");
    drop(client);
    server.finish(&[], &[]);
}
