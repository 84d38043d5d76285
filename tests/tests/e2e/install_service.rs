//! The service step: the generated unit (checked by the real
//! `systemd-analyze verify` when it exists) and the systemctl calls (checked
//! against the recording stand-in in `tests/stand-ins/systemctl`, which also
//! starts the unit's ExecStart command).

use std::fs;
use std::process::Command;

use lapis_e2e::TestContext;

use crate::install_support::*;

#[test]
fn install_registers_restarts_and_waits_for_the_unit() {
    let mut ctx = TestContext::new();
    let log = use_systemctl_standin(&mut ctx);
    let out = ctx.run(["install", "--json"]);
    let doc = out.success().json();
    // Readiness waited for the controller itself: the service the stand-in
    // started answers `status` on its socket.
    let status = ctx.run(["status", "--json"]);
    stop_started(&log);
    assert_eq!(doc["service"]["status"], "started");
    assert_eq!(status.success().json()["protocol"], "lapis-ai-controller/1");
    let unit = "lapis-ai-controller.service";
    let calls = log_lines(&log);
    assert_eq!(
        calls[..3],
        [
            "--user daemon-reload".to_owned(),
            format!("--user enable {unit}"),
            format!("--user restart {unit}"),
        ]
    );
    // Then the manager's state is polled until the controller answers
    // `status` (at least once; `status` itself also asks the manager).
    assert!(calls.len() > 3, "{calls:?}");
    assert!(
        calls[3..]
            .iter()
            .all(|c| *c == format!("--user is-active {unit}")
                || *c == format!("--user is-enabled {unit}")),
        "{calls:?}"
    );
    // The stand-in started exactly the unit's command: the launcher serving
    // the absolute config.
    let argv = fs::read_to_string(log.with_extension("log.argv")).unwrap();
    let want = [
        launcher(&ctx).display().to_string(),
        "serve".to_owned(),
        "--config".to_owned(),
        config_path(&ctx).display().to_string(),
    ];
    assert_eq!(argv.lines().collect::<Vec<_>>(), want);
    let text = fs::read_to_string(unit_path(&ctx, unit)).unwrap();
    assert!(text.contains("Restart=on-failure"));

    // A second install rewrites nothing it does not need to and restarts.
    let before = log_lines(&log).len();
    let out = ctx.run(["install", "--json"]);
    out.success();
    stop_started(&log);
    let again = log_lines(&log);
    assert_eq!(again[before + 2], format!("--user restart {unit}"));
    assert!(again.len() > before + 3);

    // uninstall stops and disables the unit and removes it.
    let out = ctx.run(["uninstall", "--json"]);
    let doc = out.success().json();
    assert_eq!(doc["removedUnit"], true);
    assert!(log_lines(&log).contains(&format!("--user disable --now {unit}")));
    assert!(!unit_path(&ctx, unit).exists());
    let secret_free = fs::read_to_string(&log).unwrap();
    assert!(!secret_free.contains("lapis_"));
}

#[test]
fn named_instance_unit_passes_the_instance() {
    let mut ctx = TestContext::new();
    let log = use_systemctl_standin(&mut ctx);
    let out = ctx.run(["install", "--json", "--instance", "w1"]);
    out.success();
    stop_started(&log);
    let argv = fs::read_to_string(log.with_extension("log.argv")).unwrap();
    let argv: Vec<&str> = argv.lines().collect();
    assert_eq!(&argv[4..], ["--instance", "w1"]);
    assert!(argv[3].ends_with("instances/w1/config.json"));
    assert!(unit_path(&ctx, "lapis-ai-controller-w1.service").is_file());
    assert!(log_lines(&log).contains(&"--user restart lapis-ai-controller-w1.service".to_owned()));
}

#[test]
fn generated_unit_passes_systemd_analyze_verify() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: systemd-analyze is not installed");
        return;
    }
    let mut ctx = TestContext::new();
    let log = use_systemctl_standin(&mut ctx);
    ctx.run(["install", "--json"]).success();
    stop_started(&log);
    let unit = unit_path(&ctx, "lapis-ai-controller.service");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .env("HOME", ctx.home())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "systemd-analyze verify failed:\n{stderr}"
    );
    // verify exits 0 on some problems and only warns; none may name our unit.
    assert!(
        !stderr.contains("lapis-ai-controller.service"),
        "systemd-analyze warned:\n{stderr}"
    );

    // The hardening a user unit ships with: 9.7 before it. The opt-in
    // drop-in (docs/installing.md), beside the unit, goes further and
    // still verifies.
    assert!(exposure(&ctx, &unit) <= 8.7, "{}", exposure(&ctx, &unit));
    let drop_in = unit.with_extension("service.d");
    fs::create_dir_all(&drop_in).unwrap();
    fs::write(
        drop_in.join("hardening.conf"),
        lapis_installer::unit::STRICT_DROP_IN,
    )
    .unwrap();
    assert!(exposure(&ctx, &unit) <= 6.8, "{}", exposure(&ctx, &unit));
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .env("HOME", ctx.home())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "verify with the drop-in:\n{stderr}");
    assert!(!stderr.contains("hardening.conf"), "{stderr}");
}

/// `systemd-analyze security --offline=true --user`'s overall exposure
/// score for the unit file `unit` (0 safest, 10 least safe).
fn exposure(ctx: &TestContext, unit: &std::path::Path) -> f64 {
    let runtime = ctx.home().join(".runtime");
    fs::create_dir_all(&runtime).unwrap();
    fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--user", "--no-pager"])
        .arg(unit)
        .env("HOME", ctx.home())
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            l.split_once("Overall exposure level for ")?
                .1
                .split_once(": ")?
                .1
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no exposure score: {out:?}"))
}

#[test]
fn unreachable_service_manager_keeps_the_install_and_exits_3() {
    let mut ctx = TestContext::new();
    let log = use_systemctl_standin(&mut ctx);
    ctx.set_env("LAPIS_STANDIN_MODE", "nobus");
    let out = ctx.run(["install", "--json"]);
    out.expect_code(3);
    let doc = out.json();
    assert_eq!(doc["error"]["code"], "service_manager_unavailable");
    let details = &doc["error"]["details"];
    assert_eq!(details["service"]["status"], "unavailable");
    assert!(
        details["service"]["manualStart"]
            .as_str()
            .unwrap()
            .contains(" serve --config "),
        "{doc}"
    );
    assert!(
        out.stderr
            .contains("no service manager answers: start the controller in the background with `")
            && out
                .stderr
                .contains(" --background` (`install --start background` does it)"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("Failed to connect to bus"),
        "{}",
        out.stderr
    );
    // Release and config are installed and usable.
    let active = assert_consistent(&ctx, None);
    assert_eq!(active.as_deref(), details["digest"].as_str());
    assert!(config_path(&ctx).is_file());
    assert!(log_lines(&log).contains(&"--user daemon-reload".to_owned()));
    ctx.assert_no_secret(&token(&ctx), &[&config_path(&ctx)]);
}

#[test]
fn missing_systemctl_exits_3_in_plain_mode_too() {
    let ctx = TestContext::new();
    let empty = ctx.home().join("empty-path");
    fs::create_dir(&empty).unwrap();
    let mut cmd = ctx.command(["install"]);
    cmd.env("PATH", &empty);
    let out = ctx.output(cmd);
    out.expect_code(3);
    assert!(
        out.stdout.contains("installed lapis-ai-controller"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("`systemctl` is not installed"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("serve --config"), "{}", out.stderr);
    assert!(active(&ctx).is_some());
}

#[test]
fn unit_that_never_becomes_active_times_out_with_exit_3() {
    let mut ctx = TestContext::new();
    let log = use_systemctl_standin(&mut ctx);
    ctx.set_env("LAPIS_STANDIN_ACTIVE", "activating");
    let out = ctx.run(["install", "--json", "--ready-timeout", "0"]);
    stop_started(&log);
    out.expect_code(3);
    assert_eq!(out.json()["error"]["code"], "service_failed");
    assert!(
        out.stderr.contains("did not become ready"),
        "{}",
        out.stderr
    );
    ctx.set_env("LAPIS_STANDIN_ACTIVE", "failed");
    let out = ctx.run(["install", "--json"]);
    stop_started(&log);
    out.expect_code(3);
    assert!(out.stderr.contains("is failed"), "{}", out.stderr);
}

#[test]
fn uninstalling_one_instance_keeps_what_another_uses() {
    let mut ctx = TestContext::new();
    let log = use_systemctl_standin(&mut ctx);
    ctx.run(["install", "--json"]).success();
    stop_started(&log);
    ctx.run(["install", "--json", "--instance", "w1"]).success();
    stop_started(&log);
    let out = ctx.run([
        "uninstall",
        "--json",
        "--instance",
        "w1",
        "--purge",
        "--yes",
    ]);
    let doc = out.success().json();
    assert_eq!(doc["removedUnit"], true);
    assert_eq!(
        doc["keptForInstances"],
        serde_json::json!(["lapis-ai-controller.service"])
    );
    assert_eq!(doc["removedLauncher"], false);
    assert!(active(&ctx).is_some());
    assert!(!unit_path(&ctx, "lapis-ai-controller-w1.service").exists());
    assert!(!ctx.home().join(".lapis/ai-controller-w1").exists());
    assert!(
        config_path(&ctx).is_file(),
        "the default instance's config stays"
    );
    // The last instance takes the shared parts with it.
    let doc = ctx.run(["uninstall", "--json"]).success().json();
    assert_eq!(doc["removedLauncher"], true);
    assert!(snapshots(&ctx).is_empty());
}
