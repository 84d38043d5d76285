//! `status` beside the installation: the launcher's snapshot and version,
//! the service manager's view, a warning with the restart command when the
//! service runs another snapshot than the launcher, and, when nothing
//! answers, exit 3 saying to start the unit or run `serve`.

use std::path::Path;

use lapis_e2e::TestContext;
use lapis_protocol::client::{Client, Credential};
use serde_json::json;

use crate::install_support::{install, use_systemctl_standin, variant};
use crate::serve_support::{OWNER, Server};

fn stop_service(ctx: &TestContext) {
    let systemctl = Path::new(env!("CARGO_MANIFEST_DIR")).join("stand-ins/systemctl");
    ctx.output(ctx.command_for(
        &systemctl,
        ["--user", "stop", "lapis-ai-controller.service"],
    ))
    .success();
}

#[test]
fn status_shows_launcher_and_manager_and_warns_when_the_service_runs_an_older_snapshot() {
    let mut ctx = TestContext::new();
    use_systemctl_standin(&mut ctx);
    ctx.run(["install", "--json"]).success();
    let doc = ctx.run(["status", "--json"]).success().json();
    assert_eq!(doc["protocol"], "lapis-ai-controller/1");
    assert!(doc["snapshot"].is_string(), "{doc:#}");
    assert_eq!(doc["launcher"]["snapshot"], doc["snapshot"]);
    assert_eq!(doc["launcher"]["version"], env!("CARGO_PKG_VERSION"));
    let manager = &doc["serviceManager"];
    assert_eq!(manager["unit"], "lapis-ai-controller.service");
    assert_eq!(manager["installed"], true);
    assert_eq!(manager["enabled"], "enabled");
    assert_eq!(manager["active"], "active");
    assert_eq!(doc["warnings"], serde_json::json!([]));

    // A new build becomes the launcher's target without a restart: the
    // running service is now the older snapshot.
    let newer = variant(&ctx, "newer");
    let installed = install(&ctx, &newer, &[]);
    let doc = ctx.run(["status", "--json"]).success().json();
    let plain = ctx.run(["status"]);
    stop_service(&ctx);
    assert_eq!(doc["launcher"]["snapshot"], installed["digest"]);
    assert_ne!(doc["snapshot"], doc["launcher"]["snapshot"]);
    let warning = doc["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains("restart it with `systemctl --user restart lapis-ai-controller.service`"),
        "{warning}"
    );
    plain.success();
    assert!(
        plain
            .stdout
            .contains("\nwarning: the service runs snapshot"),
        "{}",
        plain.stdout
    );
    assert!(
        plain
            .stdout
            .contains("manager   lapis-ai-controller.service: enabled, active"),
        "{}",
        plain.stdout
    );
}

#[test]
fn status_of_a_stopped_service_says_to_start_the_unit_or_run_serve() {
    let mut ctx = TestContext::new();
    use_systemctl_standin(&mut ctx);
    ctx.run(["install", "--json"]).success();
    stop_service(&ctx);
    ctx.set_env("LAPIS_STANDIN_ACTIVE", "inactive");
    let out = ctx.run(["status"]);
    out.expect_code(3);
    let first = out.stderr.lines().next().unwrap();
    assert!(
        first.contains("the unit lapis-ai-controller.service is inactive"),
        "{first}"
    );
    assert!(
        first.contains("start it with `systemctl --user start lapis-ai-controller.service`"),
        "{first}"
    );
    assert!(first.contains(" serve --config "), "{first}");
    assert!(!out.stderr.contains("try `"), "{}", out.stderr);

    let out = ctx.run(["status", "--json"]);
    out.expect_code(3);
    let doc = out.json();
    assert_eq!(doc["error"]["code"], "unavailable");
    assert_eq!(
        doc["error"]["details"]["serviceManager"]["active"],
        "inactive"
    );
    assert!(doc["error"]["details"]["launcher"]["snapshot"].is_string());
}

#[test]
fn status_names_running_turns_live_agents_and_fences_with_the_resolve_command() {
    let hang = json!({
        "command": env!("CARGO_BIN_EXE_fixture-agent"),
        "args": ["--hang"],
    });
    let mut server = Server::start_full(json!({}), json!({ "hang": hang }));
    let mut client = Client::open(
        &server.socket(),
        Credential::Token {
            token: OWNER.to_owned(),
            // The CLI's application, so the printed CLI command may resolve it.
            application: "lapis-cli".to_owned(),
        },
    )
    .unwrap();
    let thread = client
        .threads_create("proj", "hang", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, "s-1", "wait").unwrap();
    // Running: the turn, its thread and workspace, and its agent.
    let doc = lapis_e2e::wait::eventually("the turn running on its agent", || {
        let doc = server.ctx.run(["status", "--json"]).success().json();
        // `--hang` never reports progress: in flight past the boundary.
        (doc["runningTurns"][0]["state"] == "dispatched" && doc["liveAgents"] == 1).then_some(doc)
    });
    let running = &doc["runningTurns"][0];
    assert_eq!(running["turn"], turn.id.as_str());
    assert_eq!(running["thread"], thread.id.as_str());
    assert_eq!(running["workspace"], "proj");
    // RFC 3339 like every time in JSON output, and a plausible instant.
    let since = running["since"].as_str().unwrap();
    assert!(since.starts_with("20") && since.ends_with('Z'), "{since}");
    let plain = server.ctx.run(["status"]);
    assert!(
        plain
            .success()
            .stdout
            .contains("turns     1 running, 0 queued"),
        "{}",
        plain.stdout
    );
    drop(client);

    // A crash past the dispatch boundary fences the workspace; status names
    // the blocking turn, its thread, since when, and the exact command.
    server.kill9();
    server.spawn();
    let doc = server.ctx.run(["status", "--json"]).success().json();
    let fence = &doc["fences"][0];
    assert_eq!(fence["turn"], turn.id.as_str());
    assert_eq!(fence["thread"], thread.id.as_str());
    assert_eq!(fence["workspace"], "proj");
    assert_eq!(fence["state"], "submission_unknown");
    assert_eq!(doc["runningTurns"], json!([]));
    let command = format!(
        "lapis-ai-controller turns resolve {} --as failed --confirm-stopped",
        turn.id
    );
    assert!(doc["warnings"].to_string().contains(&command), "{doc:#}");
    let plain = server.ctx.run(["status"]).success().stdout.clone();
    assert!(
        plain.contains(&format!("fenced    proj: turn {}", turn.id)),
        "{plain}"
    );
    assert!(plain.contains(&command), "{plain}");

    // The command as printed releases the fence.
    let args: Vec<&str> = command.split(' ').skip(1).collect();
    server.ctx.run(args).success();
    let doc = server.ctx.run(["status", "--json"]).success().json();
    assert_eq!(doc["fences"], json!([]));
    assert_eq!(doc["fencedWorkspaces"], json!([]));
    server.finish(&[], &[]);
}

#[test]
fn a_typo_in_the_config_does_not_lock_client_commands_out_of_the_running_service() {
    let server = Server::start();
    let ctx = &server.ctx;
    let good = std::fs::read(&server.config).unwrap();
    // A typo in a provider: the whole file is refused by the strict reader.
    let mut doc: serde_json::Value = serde_json::from_slice(&good).unwrap();
    doc["providers"]["typo"] = json!({ "comand": "/bin/true" });
    std::fs::write(&server.config, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    // The error names the object and the field, not the end of the file
    // (issue 41 item 7): an unknown field, then a missing one.
    let refused = ctx.run(["config", "validate"]);
    assert!(
        refused
            .stderr
            .contains("at `providers.typo.comand`: unknown field `comand`"),
        "{}",
        refused.stderr
    );
    refused.expect_code(2);
    let mut missing = doc.clone();
    missing["providers"]["typo"] = json!({ "args": [] });
    std::fs::write(&server.config, serde_json::to_vec_pretty(&missing).unwrap()).unwrap();
    let refused = ctx.run(["config", "validate"]);
    assert!(
        refused
            .stderr
            .contains("at `providers.typo`: missing field `command`"),
        "{}",
        refused.stderr
    );
    refused.expect_code(2);
    std::fs::write(&server.config, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();

    let status = ctx.run(["status", "--json"]);
    let report = status.success().json();
    assert_eq!(report["protocol"], "lapis-ai-controller/1");
    let warnings = report["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| {
            let w = w.as_str().unwrap();
            w.contains("configuration file is refused") && w.contains("config validate")
        }),
        "{report:#}"
    );
    assert!(status.stderr.contains("warning:"), "{}", status.stderr);
    // Other client commands work too, and the refusal names the field.
    let threads = ctx.run(["threads", "list", "--json"]);
    threads.success();
    assert!(threads.stderr.contains("typo"), "{}", threads.stderr);
    // The strict readers still refuse it: a reload is not applied.
    ctx.run(["config", "reload"]).expect_code(2);

    // A file that is not JSON at all gives the client nothing to go on.
    std::fs::write(&server.config, b"{ not json").unwrap();
    let broken = ctx.run(["status", "--json"]);
    broken.expect_code(2);
    assert!(broken.json()["error"]["code"].is_string());

    std::fs::write(&server.config, &good).unwrap();
    server.finish(&[], &[]);
}
