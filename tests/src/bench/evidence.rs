//! `evidence`: what a git workspace's evidence adds to a warm turn (issue
//! 39's figures: a warm turn in a 1.4k-file repository ≤ 1.1x the same
//! turn in a plain directory; on a 50k-file tree ≤ 10 ms added per turn).
//!
//! One serve, five workspaces: a plain directory (the floor), and a
//! generated repository of 1,400 and of 50,000 small files (100 per
//! directory, committed), each once with the default evidence (`watch`)
//! and once with `evidence: "stat"` (every snapshot states every path).
//! Each gets warm echo turns one at a time (submit → durable `completed`),
//! measured after warm-up turns (the first snapshot stages the whole tree;
//! the watch is trusted from the third). Nothing touches the trees.

use std::path::Path;
use std::process::Command;

use anyhow::{Result, ensure};
use serde_json::json;

use super::rig::Rig;
use super::table::{Table, Unit};
use super::warm::turn_latency;

/// Writes `files` small files under `dir/src` (100 per directory) and
/// commits them.
fn repository(dir: &Path, files: usize) -> Result<()> {
    for i in 0..files {
        let sub = dir.join(format!("src/d{:04}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&sub)?;
        }
        std::fs::write(
            sub.join(format!("f{:03}.txt", i % 100)),
            format!("file {i}\n"),
        )?;
    }
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &["commit", "-qm", "init"],
    ] {
        let status = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=b", "-c", "user.email=b@b"])
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()?;
        ensure!(status.success(), "git {args:?}");
    }
    Ok(())
}

pub(crate) fn run(table: &mut Table, n: usize) -> Result<()> {
    // ws0 plain; ws1/ws2 1.4k files (watch/stat); ws3/ws4 50k (watch/stat).
    let cases = [
        ("plain directory", 0, None),
        (
            "1.4k-file repository, evidence watch (default)",
            1_400,
            None,
        ),
        ("1.4k-file repository, evidence stat", 1_400, Some("stat")),
        (
            "50k-file repository, evidence watch (default)",
            50_000,
            None,
        ),
        ("50k-file repository, evidence stat", 50_000, Some("stat")),
    ];
    let mut rig = Rig::new(cases.len(), json!({}), json!({}))?;
    for (i, (_, files, _)) in cases.iter().enumerate() {
        if *files > 0 {
            repository(&rig.ctx.home().join(format!("ws{i}")), *files)?;
        }
    }
    let config = rig
        .ctx
        .home()
        .join(".config/lapis-ai-controller/config.json");
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&config)?)?;
    for (i, (_, _, mode)) in cases.iter().enumerate() {
        if let Some(mode) = mode {
            doc["workspaces"][format!("ws{i}")]["evidence"] = json!(mode);
        }
    }
    std::fs::write(&config, serde_json::to_vec_pretty(&doc)?)?;
    rig.start()?;
    let mut client = rig.client()?;
    let threads = rig.threads(&mut client, "echo")?;
    let floor = "warm turn, plain directory (submit -> completed)";
    for (i, (name, _, _)) in cases.iter().enumerate() {
        // Warm-up: the agent starts, the first snapshot stages the tree,
        // the watch covers it.
        turn_latency(&mut client, &threads[i], &format!("ev-warm-{i}"), 3)?;
        let samples = turn_latency(&mut client, &threads[i], &format!("ev-{i}"), n)?;
        let figure = match i {
            0 => floor.to_owned(),
            _ => format!("warm turn, {name}"),
        };
        table.add(
            "evidence",
            figure,
            Unit::Ms,
            samples,
            (i > 0).then_some(floor),
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    table.note(format!("evidence: load average at end {}", load.trim()));
    Ok(())
}
