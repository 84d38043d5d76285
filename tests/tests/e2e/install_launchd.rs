//! The launchd code path, run on Linux: `LAPIS_AI_CONTROLLER_SERVICE_MANAGER=
//! launchd` selects it and the recording stand-in `tests/stand-ins/launchctl`
//! answers (it keeps launchd's domain, load and kickstart rules and starts
//! the plist's ProgramArguments). Also `rollback`'s service restart under
//! both managers: performed when a unit is installed, skipped with
//! `--no-restart`, nothing to do without a unit, and a failed restart keeps
//! the rollback and exits 3.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use lapis_e2e::TestContext;
use serde_json::Value;

use crate::install_support::*;

const LABEL: &str = "ai.lapis.controller";
const UNIT: &str = "lapis-ai-controller.service";

fn uid() -> String {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn plist_path(ctx: &TestContext) -> PathBuf {
    ctx.home()
        .join("Library/LaunchAgents")
        .join(format!("{LABEL}.plist"))
}

/// `program install --json` with the service step, to success.
fn install_with_service(ctx: &TestContext, program: &Path) -> Value {
    let out = ctx.output(ctx.command_for(program, ["install", "--json"]));
    out.success();
    out.json()
}

/// What the running service reports (`status --json`).
fn status(ctx: &TestContext) -> Value {
    let out = ctx.run(["status", "--json"]);
    out.success();
    out.json()
}

/// The calls logged since `from`, which must be `first` followed by at least
/// one readiness poll `poll` and nothing else.
#[track_caller]
fn assert_calls(log: &Path, from: usize, first: &[String], poll: &str) {
    let calls = log_lines(log);
    let calls = &calls[from..];
    assert!(calls.len() > first.len(), "{calls:?}");
    assert_eq!(calls[..first.len()], *first, "{calls:?}");
    // `status` (the readiness probe) also asks for `is-enabled`.
    let enabled = poll.replace(" is-active ", " is-enabled ");
    assert!(
        calls[first.len()..]
            .iter()
            .all(|c| c == poll || *c == enabled),
        "{calls:?}"
    );
}

#[test]
fn launchd_install_rollback_restart_and_uninstall_call_launchctl_exactly() {
    let mut ctx = TestContext::new();
    let log = use_launchctl_standin(&mut ctx);
    let domain = format!("gui/{}", uid());
    let target = format!("{domain}/{LABEL}");
    let print = format!("print {target}");
    let plist = plist_path(&ctx);
    let (v1, v2) = (variant(&ctx, "v1"), variant(&ctx, "v2"));

    // First install: unload (fails: nothing loaded, ignored), load, restart,
    // then poll until the controller answers.
    let doc = install_with_service(&ctx, &v1);
    let d1 = doc["digest"].as_str().unwrap().to_owned();
    assert_eq!(doc["service"]["status"], "started", "{doc}");
    assert_eq!(doc["service"]["manager"], "launchd");
    assert_eq!(doc["service"]["unit"], LABEL);
    assert_eq!(doc["paths"]["unit"], plist.display().to_string());
    assert_calls(
        &log,
        0,
        &[
            format!("bootout {target}"),
            format!("bootstrap {domain} {}", plist.display()),
            format!("kickstart -k {target}"),
        ],
        &print,
    );
    // The stand-in ran the plist's ProgramArguments: the launcher serving
    // the absolute config.
    let argv = fs::read_to_string(log.with_extension("log.argv")).unwrap();
    assert_eq!(
        argv.lines().collect::<Vec<_>>(),
        [
            launcher(&ctx).display().to_string(),
            "serve".to_owned(),
            "--config".to_owned(),
            config_path(&ctx).display().to_string(),
        ]
    );
    assert_eq!(status(&ctx)["snapshot"], d1.as_str());

    // Second install: the loaded agent is unloaded and loaded again.
    let before = log_lines(&log).len();
    let d2 = install_with_service(&ctx, &v2)["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_calls(
        &log,
        before,
        &[
            format!("bootout {target}"),
            format!("bootstrap {domain} {}", plist.display()),
            format!("kickstart -k {target}"),
        ],
        &print,
    );
    let running = status(&ctx);
    assert_eq!(running["snapshot"], d2.as_str());

    // rollback restarts the agent and waits until it serves the old snapshot.
    let before = log_lines(&log).len();
    let doc = ctx.run(["rollback", "--json"]).success().json();
    assert_eq!(doc["to"], d1.as_str());
    assert_eq!(doc["service"]["status"], "restarted", "{doc}");
    assert_eq!(doc["service"]["manager"], "launchd");
    assert_eq!(
        doc["service"]["restartCommand"],
        format!("launchctl kickstart -k {target}")
    );
    assert_calls(&log, before, &[format!("kickstart -k {target}")], &print);
    let after = status(&ctx);
    assert_eq!(after["snapshot"], d1.as_str());
    assert_ne!(after["pid"], running["pid"], "a new process serves");

    // --no-restart calls nothing and prints the command.
    let before = log_lines(&log).len();
    let out = ctx.run(["rollback", "--no-restart"]);
    out.success();
    assert!(
        out.stdout.contains(&format!(
            "restart a running service to use it: launchctl kickstart -k {target}"
        )),
        "{}",
        out.stdout
    );
    assert_eq!(log_lines(&log).len(), before);
    assert_eq!(status(&ctx)["snapshot"], d1.as_str(), "still the old one");

    // uninstall unloads the agent (which stops it) and removes the plist.
    let before = log_lines(&log).len();
    let doc = ctx.run(["uninstall", "--json"]).success().json();
    assert_eq!(doc["removedUnit"], true);
    assert_eq!(doc["serviceWarning"], Value::Null);
    assert_eq!(log_lines(&log)[before..], [format!("bootout {target}")]);
    assert!(!plist.exists());
    ctx.run(["status", "--json"]).expect_code(3);
    stop_started(&log);
}

#[test]
fn launchd_without_a_gui_domain_keeps_the_install_and_exits_3() {
    let mut ctx = TestContext::new();
    let log = use_launchctl_standin(&mut ctx);
    ctx.set_env("LAPIS_STANDIN_MODE", "nobus");
    let out = ctx.run(["install", "--json"]);
    out.expect_code(3);
    let doc = out.json();
    assert_eq!(doc["error"]["code"], "service_manager_unavailable");
    assert_eq!(doc["error"]["details"]["service"]["status"], "unavailable");
    assert!(
        out.stderr.contains("Bootstrap failed: 125"),
        "{}",
        out.stderr
    );
    let target = format!("gui/{}/{LABEL}", uid());
    assert_eq!(
        log_lines(&log),
        [
            format!("bootout {target}"),
            format!("bootstrap gui/{} {}", uid(), plist_path(&ctx).display()),
        ]
    );
    assert!(active(&ctx).is_some());
    assert!(plist_path(&ctx).is_file());
}

#[test]
fn rollback_restarts_the_systemd_unit_and_waits_for_the_old_snapshot() {
    let mut ctx = TestContext::new();
    let log = use_systemctl_standin(&mut ctx);
    let (v1, v2) = (variant(&ctx, "v1"), variant(&ctx, "v2"));
    let d1 = install_with_service(&ctx, &v1)["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let d2 = install_with_service(&ctx, &v2)["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let running = status(&ctx);
    assert_eq!(running["snapshot"], d2.as_str());

    let before = log_lines(&log).len();
    let out = ctx.run(["rollback"]);
    out.success();
    assert!(
        out.stdout
            .contains(&format!("  service   {UNIT} restarted")),
        "{}",
        out.stdout
    );
    assert_calls(
        &log,
        before,
        &[format!("--user restart {UNIT}")],
        &format!("--user is-active {UNIT}"),
    );
    let after = status(&ctx);
    assert_eq!(after["snapshot"], d1.as_str());
    assert_ne!(after["pid"], running["pid"]);

    let before = log_lines(&log).len();
    let doc = ctx
        .run(["rollback", "--no-restart", "--json"])
        .success()
        .json();
    assert_eq!(doc["to"], d2.as_str());
    assert_eq!(doc["service"]["status"], "skipped");
    assert_eq!(
        doc["service"]["restartCommand"],
        format!("systemctl --user restart {UNIT}")
    );
    assert_eq!(doc["restartService"], doc["service"]["restartCommand"]);
    assert_eq!(log_lines(&log).len(), before, "--no-restart calls nothing");
    stop_started(&log);
}

#[test]
fn rollback_without_an_installed_unit_restarts_nothing() {
    let mut ctx = TestContext::new();
    let log = use_systemctl_standin(&mut ctx);
    install(&ctx, &variant(&ctx, "v1"), &[]);
    install(&ctx, &variant(&ctx, "v2"), &[]);
    let doc = ctx.run(["rollback", "--json"]).success().json();
    assert_eq!(doc["service"]["status"], "not_installed", "{doc}");
    let out = ctx.run(["rollback"]);
    out.success();
    assert!(
        out.stdout.contains(&format!(
            "  service   {UNIT} is not installed; nothing to restart"
        )),
        "{}",
        out.stdout
    );
    assert!(log_lines(&log).is_empty(), "{:?}", log_lines(&log));
}

#[test]
fn failed_restart_keeps_the_rollback_and_exits_3() {
    let mut ctx = TestContext::new();
    let log = use_systemctl_standin(&mut ctx);
    install_with_service(&ctx, &variant(&ctx, "v1"));
    let d1 = active(&ctx).unwrap();
    install_with_service(&ctx, &variant(&ctx, "v2"));
    ctx.set_env("LAPIS_STANDIN_MODE", "nobus");
    let out = ctx.run(["rollback", "--json"]);
    stop_started(&log);
    out.expect_code(3);
    let doc = out.json();
    assert_eq!(doc["error"]["code"], "service_failed", "{doc}");
    let details = &doc["error"]["details"];
    assert_eq!(details["to"], d1.as_str());
    assert_eq!(details["service"]["status"], "failed");
    assert_eq!(active(&ctx).as_deref(), Some(d1.as_str()));
    assert!(
        out.stderr.contains(&format!(
            "restart the service by hand with: systemctl --user restart {UNIT}"
        )),
        "{}",
        out.stderr
    );
    assert_eq!(
        log_lines(&log).last().map(String::as_str),
        Some(format!("--user restart {UNIT}").as_str())
    );
}

#[test]
fn an_unknown_service_manager_is_refused_before_anything_changes() {
    let mut ctx = TestContext::new();
    ctx.set_env(lapis_installer::paths::SERVICE_MANAGER_ENV, "upstart");
    let out = ctx.run(["install", "--json"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "invalid_environment");
    assert!(out.stderr.contains("\"upstart\""), "{}", out.stderr);
    assert!(active(&ctx).is_none());
}
