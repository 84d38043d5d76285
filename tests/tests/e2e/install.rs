//! `install`: a fresh install, a repeated one, token handling and bad input.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use lapis_e2e::TestContext;

use crate::install_support::*;

#[test]
fn fresh_install_then_reinstall_reuses_everything() {
    let ctx = TestContext::new();
    let first = install(&ctx, &TestContext::bin(), &[]);
    let digest = first["digest"].as_str().unwrap().to_owned();
    assert_eq!(first["snapshot"], "new");
    assert_eq!(first["config"], "created");
    assert!(first["previousDigest"].is_null());
    assert_eq!(first["service"]["status"], "skipped");
    assert_eq!(
        first["paths"]["launcher"],
        launcher(&ctx).display().to_string()
    );
    assert_eq!(active(&ctx).as_deref(), Some(digest.as_str()));
    verify_snapshot(&ctx, &digest).unwrap();

    // Modes: config 0600 in a 0700 dir, controller home 0700.
    let mode = |p: &std::path::Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&config_path(&ctx)), 0o600);
    assert_eq!(mode(config_path(&ctx).parent().unwrap()), 0o700);
    assert_eq!(mode(&ctx.home().join(".lapis/ai-controller")), 0o700);
    let config_before = fs::read(config_path(&ctx)).unwrap();

    // Reinstall through the launcher itself: same digest, reused, config kept.
    let second = install(&ctx, &launcher(&ctx), &[]);
    assert_eq!(second["digest"], digest.as_str());
    assert_eq!(second["snapshot"], "reused");
    assert_eq!(second["config"], "reused");
    assert_eq!(second["previousDigest"], digest.as_str());
    assert_eq!(fs::read(config_path(&ctx)).unwrap(), config_before);

    // version reports the snapshot when run from it, nothing otherwise.
    let v = ctx.output(ctx.command_for(&launcher(&ctx), ["version", "--json"]));
    assert_eq!(v.success().json()["snapshot"], digest.as_str());
    let v = ctx.run(["version", "--json"]);
    assert!(v.success().json()["snapshot"].is_null());

    // Plain output says the same, without the token.
    let plain = ctx.output(ctx.command_for(&launcher(&ctx), ["install", "--no-service"]));
    plain.success();
    assert!(
        plain
            .stdout
            .contains(&format!("snapshot  {digest} (reused)")),
        "{}",
        plain.stdout
    );
    assert!(plain.stdout.contains("(reused)"));

    // `token show` is the only command that prints the token.
    let secret = token(&ctx);
    let shown = ctx.command(["token", "show"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&shown.stdout).trim(), secret);
    let shown = ctx.command(["token", "show", "--json"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(doc["token"], secret.as_str());
    let list = ctx.run(["releases", "list", "--json"]);
    list.success();
    ctx.assert_no_secret(&secret, &[&config_path(&ctx)]);
}

#[test]
fn workspace_option_sets_controller_home_once() {
    let ctx = TestContext::new();
    let home = ctx.home().join("custom-home");
    let doc = install(
        &ctx,
        &TestContext::bin(),
        &["--home", home.to_str().unwrap()],
    );
    assert_eq!(doc["paths"]["controllerHome"], home.display().to_string());
    let config: serde_json::Value =
        serde_json::from_slice(&fs::read(config_path(&ctx)).unwrap()).unwrap();
    assert_eq!(config["controllerHome"], home.display().to_string());
    assert_eq!(config["schema"], 1);
    assert_eq!(config["instance"], "default");
    assert!(home.is_dir());
    // The environment variable is honoured too (it comes before the config
    // in the one precedence, issue 10), but never rewrites the config.
    let other = ctx.home().join("other");
    let mut cmd = ctx.command(["install", "--no-service", "--json"]);
    cmd.env("LAPIS_AI_CONTROLLER_HOME", &other);
    let out = ctx.output(cmd);
    assert_eq!(out.success().json()["config"], "reused");
    assert_eq!(
        out.json()["paths"]["controllerHome"],
        other.display().to_string()
    );
    let config: serde_json::Value =
        serde_json::from_slice(&fs::read(config_path(&ctx)).unwrap()).unwrap();
    assert_eq!(config["controllerHome"], home.display().to_string());
}

#[test]
fn named_instance_gets_its_own_config() {
    let ctx = TestContext::new();
    let doc = install(&ctx, &TestContext::bin(), &["--instance", "work-2"]);
    let cfg = ctx
        .home()
        .join(".config/lapis-ai-controller/instances/work-2/config.json");
    assert_eq!(doc["paths"]["config"], cfg.display().to_string());
    assert_eq!(
        doc["paths"]["controllerHome"],
        ctx.home()
            .join(".lapis/ai-controller-work-2")
            .display()
            .to_string()
    );
    assert_eq!(doc["service"]["unit"], "lapis-ai-controller-work-2.service");
    assert!(cfg.is_file());
    assert!(!config_path(&ctx).exists());
}

/// Everything under HOME except the directories the context creates.
fn home_listing(ctx: &TestContext) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![ctx.home().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let meta = fs::symlink_metadata(&p).unwrap();
            out.push(format!(
                "{} {:o} {}",
                p.strip_prefix(ctx.home()).unwrap().display(),
                meta.permissions().mode(),
                meta.len()
            ));
            if meta.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn bad_instance_name_changes_nothing() {
    let ctx = TestContext::new();
    let before = home_listing(&ctx);
    for bad in ["Bad_Name", "../x", "-a", "a b", &"x".repeat(33)] {
        let out = ctx.run([
            "install",
            "--no-service",
            "--json",
            &format!("--instance={bad}"),
        ]);
        out.expect_code(2);
        assert_eq!(out.json()["error"]["code"], "invalid_instance");
        assert!(
            out.stderr.contains("invalid instance name"),
            "{}",
            out.stderr
        );
    }
    assert_eq!(home_listing(&ctx), before);
}

#[test]
fn malformed_config_is_refused_and_left_untouched() {
    let ctx = TestContext::new();
    let cfg = config_path(&ctx);
    fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    let text = "{\"schema\": 1, \"tokens\": [ {\"secret\": \"lapis_keepme\"";
    fs::write(&cfg, text).unwrap();
    let before = home_listing(&ctx);
    let out = ctx.run(["install", "--no-service", "--json"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "invalid_config");
    assert!(out.stderr.contains("is malformed"), "{}", out.stderr);
    assert!(!out.stderr.contains("keepme"), "config content leaked");
    assert_eq!(fs::read_to_string(&cfg).unwrap(), text);
    assert_eq!(home_listing(&ctx), before);
    assert!(!releases_root(&ctx).exists());
}

/// Makes `dir` unwritable even for root (immutable attribute) or, for other
/// users, by mode. Returns false when neither works here.
fn make_unwritable(dir: &std::path::Path) -> bool {
    let root = Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
    if root {
        let ok = Command::new("chattr")
            .arg("+i")
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return false;
        }
    } else {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o555)).unwrap();
    }
    fs::write(dir.join("probe"), b"x").is_err()
}

fn make_writable(dir: &std::path::Path) {
    let _ = Command::new("chattr").arg("-i").arg(dir).status();
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o755));
}

#[test]
fn unwritable_install_path_changes_nothing() {
    let ctx = TestContext::new();
    let dir = ctx.home().join("locked-bin");
    fs::create_dir(&dir).unwrap();
    if !make_unwritable(&dir) {
        make_writable(&dir);
        eprintln!("SKIPPED: cannot make a directory unwritable here (no chattr)");
        return;
    }
    let before = home_listing(&ctx);
    let target = dir.join("sub").join("lapis-ai-controller");
    let out = ctx.run([
        "install",
        "--no-service",
        "--json",
        "--install-path",
        target.to_str().unwrap(),
    ]);
    make_writable(&dir);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "install_path_unwritable");
    assert!(
        out.stderr.contains("cannot write the launcher directory"),
        "{}",
        out.stderr
    );
    assert_eq!(home_listing(&ctx), before);
}

#[test]
fn foreign_launcher_needs_force() {
    let ctx = TestContext::new();
    let path = launcher(&ctx);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, b"#!/bin/sh\necho someone else's\n").unwrap();
    let out = ctx.run(["install", "--no-service", "--json"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "launcher_conflict");
    assert!(out.stderr.contains("--force"), "{}", out.stderr);
    assert_eq!(
        fs::read(&path).unwrap(),
        b"#!/bin/sh\necho someone else's\n"
    );
    assert!(!releases_root(&ctx).exists());
    assert!(!config_path(&ctx).exists());

    let doc = install(&ctx, &TestContext::bin(), &["--force"]);
    assert_eq!(doc["replaced"], "a regular file");
    assert!(active(&ctx).is_some());
}

/// Replaces the temp HOME and 64-hex digests so output can be compared.
fn filtered(ctx: &TestContext, text: &str) -> String {
    let text = text.replace(&ctx.home().display().to_string(), "[HOME]");
    let mut out = String::new();
    for word in text.split_inclusive(|c: char| !c.is_ascii_hexdigit()) {
        let hex = word.trim_end_matches(|c: char| !c.is_ascii_hexdigit());
        if hex.len() == 64 {
            out.push_str("[DIGEST]");
            out.push_str(&word[64..]);
        } else {
            out.push_str(word);
        }
    }
    out
}

#[test]
fn plain_output_is_pinned() {
    let ctx = TestContext::new();
    let mut cmd = ctx.command(["install", "--no-service"]);
    cmd.env("PATH", "/usr/bin:/bin");
    let out = ctx.output(cmd);
    out.success();
    let build = ctx.run(["version", "--json"]).json()["build"].clone();
    let want = format!(
        "installed lapis-ai-controller {v} ({c} {d} {t})
  snapshot  [DIGEST] (new)
  previous  none
  launcher  [HOME]/.local/bin/lapis-ai-controller -> [HOME]/.local/lib/lapis-ai-controller/releases/[DIGEST]/bin/lapis-ai-controller
  config    [HOME]/.config/lapis-ai-controller/config.json (created)
  home      [HOME]/.lapis/ai-controller
  service   lapis-ai-controller.service skipped (--no-service)
note: [HOME]/.local/bin is not on PATH; add it to run `lapis-ai-controller` by name
",
        v = build["version"].as_str().unwrap(),
        c = build["commit"].as_str().unwrap(),
        d = build["date"].as_str().unwrap(),
        t = build["target"].as_str().unwrap(),
    );
    assert_eq!(filtered(&ctx, &out.stdout), want);
    assert_eq!(out.stderr, "");

    let out = ctx.run(["releases", "list"]);
    let text = filtered(&ctx, &out.success().stdout);
    // Piped: one tab-separated row per snapshot, no header, the install
    // time in RFC 3339.
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    let row: Vec<&str> = lines[0].split('\t').collect();
    assert_eq!(row.len(), 5, "{text}");
    assert_eq!(row[0].len(), 12, "{text}");
    assert!(lapis_protocol::time::parse_ms(row[1]).is_some(), "{text}");
    assert_eq!(row[4], "active", "{text}");
}
