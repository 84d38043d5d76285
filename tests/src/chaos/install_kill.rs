//! kill -9 of `install --from`, `rollback` and `releases gc` at random
//! moments. Three archives of the same binary with different versions give
//! three snapshots to move between; `releases gc --keep 0` between installs
//! keeps the next install doing real work (stage, verify, smoke, swap).
//! After every kill: the launcher resolves to a complete snapshot whose
//! manifest verifies and whose digest names its directory; the config file
//! (and so every token) is byte-for-byte unchanged; the next command works.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use lapis_e2e::TestContext;
use lapis_release::{BuildIdentity, Manifest, build_archive};

use super::{Rng, Summary};
use crate::bench::rig::{release_bin, run_ok};

struct Setup {
    ctx: TestContext,
    bin: PathBuf,
    archives: Vec<(String, String)>,
    config: PathBuf,
    config_bytes: Vec<u8>,
    _dist: tempfile::TempDir,
}

fn setup() -> Result<Setup> {
    let bin = release_bin()?;
    let ctx = TestContext::new();
    run_ok(&ctx, &bin, &["install", "--no-service", "--json"])?;
    let version = run_ok(&ctx, &bin, &["version", "--json"])?.json();
    let target = version["build"]["target"]
        .as_str()
        .context("target")?
        .to_owned();
    let dist = tempfile::tempdir()?;
    let mut archives = Vec::new();
    // Three distinct snapshots with this binary's own identity (the smoke
    // test checks it against the manifest): the same executable with a
    // different trailing byte string, which does not change how it runs.
    let bytes = std::fs::read(&bin)?;
    let build = &version["build"];
    for n in 0..3u8 {
        let dir = dist.path().join(format!("a{n}"));
        std::fs::create_dir_all(&dir)?;
        let exe = dir.join("lapis-ai-controller");
        let mut variant = bytes.clone();
        variant.extend_from_slice(format!("\nchaos-variant-{n}\n").as_bytes());
        std::fs::write(&exe, variant)?;
        std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
        let identity = BuildIdentity {
            version: build["version"].as_str().context("version")?.to_owned(),
            commit: build["commit"].as_str().context("commit")?.to_owned(),
            date: build["date"].as_str().context("date")?.to_owned(),
            target: target.clone(),
        };
        let a = build_archive(&exe, identity, &dir, 0)?;
        archives.push((a.path.display().to_string(), a.sha256.to_string()));
    }
    let config = ctx.home().join(".config/lapis-ai-controller/config.json");
    let config_bytes = std::fs::read(&config)?;
    Ok(Setup {
        ctx,
        bin,
        archives,
        config,
        config_bytes,
        _dist: dist,
    })
}

/// The invariant; `Err` describes the violation.
fn check(s: &Setup) -> std::result::Result<(), String> {
    let launcher = s.ctx.home().join(".local/bin/lapis-ai-controller");
    let target =
        std::fs::read_link(&launcher).map_err(|_| "launcher is not a symlink".to_string())?;
    let target = if target.is_absolute() {
        target
    } else {
        launcher.parent().unwrap_or(Path::new("/")).join(target)
    };
    let root = target
        .parent()
        .and_then(Path::parent)
        .ok_or("launcher target has no snapshot root")?;
    let manifest =
        Manifest::read_from(root).map_err(|_| "snapshot manifest unreadable".to_string())?;
    manifest
        .verify_tree(root)
        .map_err(|_| "snapshot does not verify".to_string())?;
    if root.file_name().and_then(|n| n.to_str()) != Some(manifest.digest().as_str()) {
        return Err("snapshot directory is not named by its digest".into());
    }
    if std::fs::read(&s.config).ok().as_deref() != Some(&s.config_bytes[..]) {
        return Err("config changed".into());
    }
    Ok(())
}

/// Runs `args` to completion (not killed); Err when it fails.
fn plain(s: &Setup, args: &[&str]) -> std::result::Result<Duration, String> {
    let started = Instant::now();
    run_ok(&s.ctx, &s.bin, args).map_err(|e| format!("{e:#}"))?;
    Ok(started.elapsed())
}

/// Spawns `args` and SIGKILLs it after `delay`; true when the kill landed.
fn killed(s: &Setup, args: &[&str], delay: Duration) -> Result<bool> {
    let mut child = s
        .ctx
        .command_for(&s.bin, args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    std::thread::sleep(delay);
    let landed = child.try_wait()?.is_none() && child.kill().is_ok();
    child.wait()?;
    Ok(landed)
}

/// Runs the three suites with `iterations` each.
pub(crate) fn run(iterations: usize, rng: &mut Rng, limit: Duration) -> Result<Vec<Summary>> {
    let s = setup()?;
    let install = |i: usize| -> Vec<String> {
        let (path, sha) = &s.archives[i % s.archives.len()];
        [
            "install",
            "--from",
            path,
            "--sha256",
            sha,
            "--no-service",
            "--json",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let gc = ["releases", "gc", "--keep", "0", "--json"];
    let rollback = ["rollback", "--json"];
    // Calibrate each operation's duration so kills spread over all of it.
    let mut out = Vec::new();
    for op in ["install", "rollback", "gc"] {
        let mut summary = Summary {
            suite: match op {
                "install" => "install-kill",
                "rollback" => "rollback-kill",
                _ => "gc-kill",
            },
            ..Summary::default()
        };
        let started = Instant::now();
        let mut span = Duration::from_millis(50);
        for i in 0..iterations {
            if started.elapsed() > limit {
                break;
            }
            summary.iterations += 1;
            // Preparation (not killed): state where the op has work to do.
            let prep = match op {
                "install" => plain(&s, &gc),
                "rollback" => plain(
                    &s,
                    &install(i).iter().map(String::as_str).collect::<Vec<_>>(),
                )
                .map(|_| Duration::ZERO),
                _ => plain(
                    &s,
                    &install(i).iter().map(String::as_str).collect::<Vec<_>>(),
                )
                .map(|_| Duration::ZERO),
            };
            if let Err(e) = prep {
                summary
                    .violations
                    .push(format!("{op}: preparation failed after a kill: {e}"));
                continue;
            }
            let args: Vec<String> = match op {
                "install" => install(i + 1),
                "rollback" => rollback.iter().map(|a| a.to_string()).collect(),
                _ => gc.iter().map(|a| a.to_string()).collect(),
            };
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if i % 10 == 0 {
                // Recalibrate on an unkilled run (also proves the op works).
                match plain(&s, &args) {
                    Ok(d) => span = d.max(Duration::from_millis(2)),
                    Err(e) => summary
                        .violations
                        .push(format!("{op} failed after a kill: {e}")),
                }
                if let Err(v) = check(&s) {
                    summary.violations.push(v);
                }
                continue;
            }
            let delay = Duration::from_micros(rng.below(span.as_micros() as u64 * 12 / 10));
            if killed(&s, &args, delay)? {
                summary.faults += 1;
            }
            if let Err(v) = check(&s) {
                summary.violations.push(v);
            }
        }
        summary.detail = format!(
            "kill moments uniform over 0..1.2x the op's unkilled time ({} ms)",
            span.as_millis()
        );
        out.push(summary);
    }
    Ok(out)
}
