//! `logs` (through the recording `journalctl` stand-in, whose journal is the
//! output of the service the systemctl stand-in started) and `doctor`
//! (against a real install with the systemctl and loginctl stand-ins).

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lapis_e2e::TestContext;
use serde_json::{Value, json};

use crate::install_support::{config_path, use_systemctl_standin};

fn standin(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("stand-ins")
        .join(name)
}

/// Stops the service the systemctl stand-in started (SIGTERM, waits).
fn stop_service(ctx: &TestContext) {
    ctx.output(ctx.command_for(
        &standin("systemctl"),
        ["--user", "stop", "lapis-ai-controller.service"],
    ))
    .success();
}

/// Installs with the stand-ins and the launcher's directory on PATH.
fn installed() -> (TestContext, PathBuf) {
    let mut ctx = TestContext::new();
    let log = use_systemctl_standin(&mut ctx);
    let bin = ctx.home().join(".local/bin");
    ctx.prepend_path(bin);
    ctx.run(["install", "--json"]).success();
    (ctx, log)
}

/// Adds providers to the installed config (tokens and the rest kept).
fn add_providers(ctx: &TestContext, providers: Value) {
    let path = config_path(ctx);
    let mut doc: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    doc["providers"] = providers;
    fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
}

#[test]
fn logs_prints_the_unit_journal_without_per_request_lines() {
    let (ctx, log) = installed();
    let out = ctx.run(["logs", "-n", "50"]);
    stop_service(&ctx);
    out.success();
    let calls = fs::read_to_string(log.with_extension("log.journalctl")).unwrap();
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        ["--user --unit lapis-ai-controller.service --no-pager --lines 50"]
    );
    // The real service's log: startup at info ...
    assert!(out.stdout.contains("listening"), "{}", out.stdout);
    // ... but install's `status` probes (hello + status requests) are
    // per-request lines, at debug, so not in the default log.
    assert!(!out.stdout.contains("method="), "{}", out.stdout);
    let last = ctx.run(["logs", "-n", "1"]);
    last.success();
    assert_eq!(last.stdout.lines().count(), 1, "{}", last.stdout);
}

#[test]
fn logs_follow_streams_what_the_service_logs_next() {
    let (ctx, _log) = installed();
    let mut cmd = ctx.command(["logs", "--follow", "-n", "0"]);
    // Its own process group, so the test can end `logs` and the journal
    // reader it runs together.
    cmd.stdout(Stdio::piped()).process_group(0);
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // A reload makes the service log a line now. Reloads repeat until one
    // is seen, since the reader may start after the first.
    let done = Arc::new(AtomicBool::new(false));
    let reload = ctx.command_for(
        &standin("systemctl"),
        ["--user", "reload", "lapis-ai-controller.service"],
    );
    let reloader = {
        let done = done.clone();
        let (program, args, envs) = (
            reload.get_program().to_owned(),
            reload.get_args().map(|a| a.to_owned()).collect::<Vec<_>>(),
            reload
                .get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
                .collect::<Vec<_>>(),
        );
        std::thread::spawn(move || {
            for _ in 0..300 {
                if done.load(Ordering::SeqCst) {
                    break;
                }
                let status = Command::new(&program)
                    .args(&args)
                    .envs(envs.clone())
                    .status();
                assert!(status.unwrap().success());
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        })
    };
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let hit = line.contains("SIGHUP");
        seen.push(line);
        if hit {
            break;
        }
    }
    done.store(true, Ordering::SeqCst);
    reloader.join().unwrap();
    let _ = Command::new("kill")
        .args(["-TERM", "--", &format!("-{}", child.id())])
        .status();
    let _ = child.wait();
    stop_service(&ctx);
    assert!(seen.iter().any(|l| l.contains("SIGHUP")), "{seen:?}");
    assert!(
        !seen.iter().any(|l| l.contains("listening")),
        "-n 0 showed old lines: {seen:?}"
    );
}

#[test]
fn logs_without_a_journal_exits_3_and_says_where_the_log_goes() {
    let ctx = TestContext::new();
    let empty = ctx.home().join("empty-path");
    fs::create_dir(&empty).unwrap();
    let mut cmd = ctx.command(["logs"]);
    cmd.env("PATH", &empty);
    let out = ctx.output(cmd);
    out.expect_code(3);
    assert!(
        out.stderr.contains("`journalctl` is not installed"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(" serve --config "), "{}", out.stderr);

    // A journal that cannot be read is also "unavailable".
    let mut ctx = TestContext::new();
    use_systemctl_standin(&mut ctx);
    ctx.set_env("LAPIS_STANDIN_JOURNAL", "fail");
    let out = ctx.run(["logs"]);
    out.expect_code(3);
    assert!(
        out.stderr.contains("`journalctl --user --unit"),
        "{}",
        out.stderr
    );
}

#[test]
fn doctor_passes_every_check_on_a_healthy_install() {
    let (ctx, log) = installed();
    add_providers(
        &ctx,
        json!({
            "fixture": { "command": env!("CARGO_BIN_EXE_fixture-agent") },
            // A bare name, found on PATH, that starts the agent.
            "shell": { "command": "sh",
                "args": ["-c", "exec \"$0\"", env!("CARGO_BIN_EXE_fixture-agent")] },
        }),
    );
    let out = ctx.run(["doctor", "--json"]);
    let plain = ctx.run(["doctor"]);
    stop_service(&ctx);
    let doc = out.success().json();
    plain.success();
    assert_eq!(doc["ok"], true, "{doc:#}");
    let checks = doc["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "launcher",
            "snapshot",
            "unit",
            "enabled",
            "active",
            "linger",
            "config",
            "provider:fixture",
            "provider:shell",
            "socket",
            "telemetry",
            "disk"
        ]
    );
    for c in checks {
        // Free space depends on the machine; everything else must be ok.
        if c["name"] != "disk" {
            assert_eq!(c["status"], "ok", "{c}");
        }
        assert_ne!(c["status"], "fail", "{c}");
    }
    assert_eq!(
        plain.stdout.lines().count(),
        checks.len(),
        "{}",
        plain.stdout
    );
    assert!(
        plain.stdout.starts_with("ok    launcher"),
        "{}",
        plain.stdout
    );
    let linger = fs::read_to_string(log.with_extension("log.loginctl")).unwrap();
    assert!(
        linger
            .lines()
            .all(|l| l.starts_with("show-user ") && l.ends_with(" --property=Linger")),
        "{linger}"
    );
}

#[test]
fn doctor_fails_on_a_missing_provider_command_and_a_stopped_service() {
    let (mut ctx, _log) = installed();
    add_providers(&ctx, json!({ "ghost": { "command": "no-such-agent-h8" } }));
    stop_service(&ctx);
    ctx.set_env("LAPIS_STANDIN_ACTIVE", "inactive");
    ctx.set_env("LAPIS_STANDIN_LINGER", "no");

    let out = ctx.run(["doctor"]);
    out.expect_code(1);
    let line = |name: &str| -> String {
        out.stdout
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("no {name} line:\n{}", out.stdout))
            .to_owned()
    };
    let ghost = line("provider:ghost");
    assert!(ghost.starts_with("fail"), "{ghost}");
    assert!(ghost.contains("no-such-agent-h8"), "{ghost}");
    assert!(ghost.contains("providers.ghost.command"), "{ghost}");
    let active = line("active");
    assert!(
        active.starts_with("fail") && active.contains("inactive"),
        "{active}"
    );
    let socket = line("socket");
    assert!(socket.starts_with("fail"), "{socket}");
    assert!(
        socket.contains("systemctl --user start lapis-ai-controller.service"),
        "{socket}"
    );
    assert!(socket.contains(" serve --config "), "{socket}");
    let linger = line("linger");
    assert!(
        linger.starts_with("warn") && linger.contains("loginctl enable-linger"),
        "{linger}"
    );
    assert!(line("config").starts_with("ok"));
    assert!(out.stderr.contains("3 checks failed"), "{}", out.stderr);

    // --json: the report itself (not an error document), still exit 1.
    let out = ctx.run(["doctor", "--json"]);
    out.expect_code(1);
    let doc = out.json();
    assert_eq!(doc["ok"], false);
    let failed: Vec<&str> = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["active", "provider:ghost", "socket"]);
    assert!(doc["checks"][0]["fix"].is_null());
}

#[test]
fn doctor_on_an_empty_home_says_to_install() {
    let mut ctx = TestContext::new();
    use_systemctl_standin(&mut ctx);
    let out = ctx.run(["doctor", "--json"]);
    out.expect_code(1);
    let doc = out.json();
    let status = |name: &str| -> Value {
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} check: {doc:#}"))
    };
    for name in ["launcher", "unit", "config"] {
        let c = status(name);
        assert_eq!(c["status"], "fail", "{c}");
        assert!(c["fix"].as_str().unwrap().contains("install"), "{c}");
    }
}
