//! `install` killed with SIGKILL at every checkpoint and at random times, and
//! two installs at once: the launcher always resolves to a complete,
//! verifying snapshot, no digest-named directory is partial, and the config
//! is absent or complete with its tokens unchanged.

use std::fs;
use std::time::Duration;

use lapis_e2e::TestContext;

use crate::install_support::*;

/// Every checkpoint of the install sequence, in order.
fn points() -> Vec<&'static str> {
    lapis_installer::Checkpoint::ALL
        .iter()
        .map(|c| c.name())
        .collect()
}

#[test]
fn kill_at_every_point_of_a_first_install() {
    for point in points() {
        let ctx = TestContext::new();
        let child = start_paused(&ctx, &TestContext::bin(), point)
            .unwrap_or_else(|| panic!("a first install passes {point}"));
        kill9(child);
        assert_consistent(&ctx, None);
        let config_after_kill = fs::read(config_path(&ctx)).ok();
        match point {
            "config-written" | "launcher-temp" | "launcher-swapped" | "state-written" => {
                assert!(config_after_kill.is_some(), "{point}: config exists")
            }
            _ => assert!(
                config_after_kill.is_none(),
                "{point}: config not yet visible"
            ),
        }
        // The next install completes, cleans up and keeps an existing config.
        let doc = install(&ctx, &TestContext::bin(), &[]);
        let active = assert_consistent(&ctx, config_after_kill.as_deref());
        assert_eq!(active.as_deref(), doc["digest"].as_str(), "{point}");
        assert!(
            leftovers(&ctx, ".staging-").is_empty(),
            "{point}: staging left"
        );
        let temp_links: Vec<_> = fs::read_dir(launcher(&ctx).parent().unwrap())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
            .collect();
        assert!(temp_links.is_empty(), "{point}: temp launcher left");
        let config_dir = config_path(&ctx).parent().unwrap().to_path_buf();
        let temp_configs: Vec<_> = fs::read_dir(&config_dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "config.json")
            .collect();
        assert!(temp_configs.is_empty(), "{point}: {temp_configs:?} left");
        if config_after_kill.is_some() {
            assert_eq!(doc["config"], "reused", "{point}");
        }
    }
}

#[test]
fn kill_at_every_point_of_an_upgrade() {
    let ctx = TestContext::new();
    let v1 = variant(&ctx, "v1");
    let first = install(&ctx, &v1, &[]);
    let mut old = first["digest"].as_str().unwrap().to_owned();
    let config = fs::read(config_path(&ctx)).unwrap();
    for (i, point) in points().into_iter().enumerate() {
        let v = variant(&ctx, &format!("up{i}"));
        let Some(child) = start_paused(&ctx, &v, point) else {
            // An upgrade keeps the existing config, so it never writes one.
            // It then ran to completion and activated its snapshot.
            assert!(point.starts_with("config-"), "{point} not reached");
            old = assert_consistent(&ctx, Some(&config)).expect("a launcher");
            continue;
        };
        kill9(child);
        let active = assert_consistent(&ctx, Some(&config)).expect("a launcher");
        let snaps = snapshots(&ctx);
        assert!(snaps.contains(&active));
        match point {
            "launcher-swapped" | "state-written" => assert_ne!(active, old, "{point}"),
            _ => assert_eq!(active, old, "{point}: launcher moved too early"),
        }
    }
    // Everything left behind is cleaned by the next install.
    let doc = install(&ctx, &v1, &[]);
    assert_eq!(doc["snapshot"], "reused");
    assert!(leftovers(&ctx, ".staging-").is_empty());
    assert_consistent(&ctx, Some(&config));
}

#[test]
fn kill_at_random_times() {
    let ctx = TestContext::new();
    let mut config: Option<Vec<u8>> = None;
    // A fixed-seed generator: the delays vary across the install's run time.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..10 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_micros(seed % 120_000);
        let v = variant(&ctx, &format!("r{i}"));
        let mut child = ctx
            .command_for(&v, ["install", "--no-service"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        child.wait().unwrap();
        assert_consistent(&ctx, config.as_deref());
        if config.is_none() {
            config = fs::read(config_path(&ctx)).ok();
        }
    }
    install(&ctx, &TestContext::bin(), &[]);
    assert_consistent(&ctx, config.as_deref());
    assert!(leftovers(&ctx, ".staging-").is_empty());
}

#[test]
fn two_installs_at_once_both_end_consistent() {
    let ctx = TestContext::new();
    let (a, b) = (variant(&ctx, "a"), variant(&ctx, "b"));
    let spawn = |p: &std::path::Path| {
        ctx.command_for(p, ["install", "--no-service", "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (ca, cb) = (spawn(&a), spawn(&b));
    let (oa, ob) = (
        ca.wait_with_output().unwrap(),
        cb.wait_with_output().unwrap(),
    );
    let parse = |o: &std::process::Output| -> serde_json::Value {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let (da, db) = (parse(&oa), parse(&ob));
    let mut configs = [
        da["config"].as_str().unwrap(),
        db["config"].as_str().unwrap(),
    ];
    configs.sort();
    assert_eq!(
        configs,
        ["created", "reused"],
        "exactly one created the config"
    );
    let active = assert_consistent(&ctx, None).unwrap();
    assert!(active == da["digest"].as_str().unwrap() || active == db["digest"].as_str().unwrap());
    assert_eq!(snapshots(&ctx).len(), 2);
    // The one that ran second saw the first as previous.
    let prevs = [da["previousDigest"].clone(), db["previousDigest"].clone()];
    assert!(
        prevs.iter().filter(|p| p.is_null()).count() == 1,
        "{prevs:?}"
    );
}

#[test]
fn rollback_killed_before_its_swap_leaves_the_launcher_alone() {
    let ctx = TestContext::new();
    let d1 = install(&ctx, &variant(&ctx, "v1"), &[])["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let d2 = install(&ctx, &variant(&ctx, "v2"), &[])["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut cmd = ctx.command(["rollback"]);
    cmd.env("LAPIS_INSTALL_FAULT_PAUSE", "launcher-temp")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let line = std::io::BufRead::lines(std::io::BufReader::new(stderr))
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(line, "lapis-fault-pause: launcher-temp");
    kill9(child);
    assert_eq!(assert_consistent(&ctx, None).as_deref(), Some(d2.as_str()));
    // The next rollback completes (and removes the stray temporary link).
    let out = ctx.run(["rollback", "--json"]);
    assert_eq!(out.success().json()["to"], d1.as_str());
    assert_eq!(assert_consistent(&ctx, None).as_deref(), Some(d1.as_str()));
    let stray: Vec<_> = fs::read_dir(launcher(&ctx).parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}
