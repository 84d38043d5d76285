//! `install`: `install --no-service` into a fresh HOME and `install --from
//! ARCHIVE`, smoke test excluded (the installer reports it in
//! `timings.smokeMs`), vs the shell floors of the installer and release
//! issues on the same bytes and disk (the scripts are those of
//! `installer/benches/install.rs` and `release/bench/install-from.sh`).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use lapis_e2e::TestContext;
use lapis_release::{BuildIdentity, build_archive, write_checksums};

use super::rig::{release_bin, run_ok};
use super::table::{Table, Unit, time_ms};

const FLOOR_COPY: &str = "set -e\nmkdir -p \"$2/.staging/bin\"\ncp \"$1\" \"$2/.staging/bin/lapis-ai-controller\"\n\
sha256sum \"$2/.staging/bin/lapis-ai-controller\" > /dev/null\nsync\nmv \"$2/.staging\" \"$2/snapshot\"\n";

const FLOOR_ARCHIVE: &str = "set -e\ncd \"$1\" && sha256sum -c --quiet SHA256SUMS\nmkdir -p \"$2/.staging\"\n\
tar xzf \"$3\" -C \"$2/.staging\"\nsync\nmv \"$2/.staging\" \"$2/snapshot\"\n";

fn sh(script: &str, args: &[&Path]) -> Result<()> {
    let status = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg("floor")
        .args(args)
        .status()?;
    ensure!(status.success(), "floor script failed");
    Ok(())
}

/// Wall time minus the smoke test the installer reported.
fn install_ms(ctx: &TestContext, bin: &Path, args: &[&str]) -> Result<(f64, f64)> {
    let (wall, out) = time_ms(|| run_ok(ctx, bin, args));
    let doc = out?.json();
    let smoke = doc["timings"]["smokeMs"]
        .as_f64()
        .context("timings.smokeMs")?;
    Ok((wall - smoke, smoke))
}

/// Adds the suite's rows.
pub(crate) fn run(table: &mut Table, runs: usize) -> Result<()> {
    let bin = release_bin()?;
    let work = tempfile::tempdir()?;
    let mut fresh = Vec::new();
    let mut smoke = Vec::new();
    let mut reuse = Vec::new();
    let mut floor = Vec::new();
    Command::new("sync").status()?;
    for i in 0..runs {
        let ctx = TestContext::new();
        let (t, s) = install_ms(&ctx, &bin, &["install", "--no-service", "--json"])?;
        fresh.push(t);
        smoke.push(s);
        reuse.push(install_ms(&ctx, &bin, &["install", "--no-service", "--json"])?.0);
        let dest = work.path().join(format!("floor-{i}"));
        std::fs::create_dir_all(&dest)?;
        floor.push(time_ms(|| sh(FLOOR_COPY, &[&bin, &dest])).0);
    }
    let floor_name = "floor: cp + sha256sum + sync + mv";
    table.add("install", floor_name, Unit::Ms, floor, None);
    table.add(
        "install",
        "install --no-service, fresh HOME, smoke excluded",
        Unit::Ms,
        fresh,
        Some(floor_name),
    );
    table.add(
        "install",
        "install --no-service, snapshot reused, smoke excluded (goal 20 ms)",
        Unit::Ms,
        reuse,
        None,
    );
    table.add("install", "install smoke test alone", Unit::Ms, smoke, None);

    // The release archive of this very binary.
    let probe = TestContext::new();
    let version = run_ok(&probe, &bin, &["version", "--json"])?.json();
    let build = &version["build"];
    let identity = BuildIdentity {
        version: build["version"].as_str().unwrap_or("0.0.0").to_owned(),
        commit: "dev".into(),
        date: build["date"].as_str().unwrap_or("dev").to_owned(),
        target: build["target"].as_str().context("build.target")?.to_owned(),
    };
    let dist = work.path().join("dist");
    std::fs::create_dir_all(&dist)?;
    let archive = build_archive(&bin, identity, &dist, 0)?;
    write_checksums(&dist)?;
    let sha = archive.sha256.to_string();
    let path = archive.path.display().to_string();
    let mut from = Vec::new();
    let mut floor = Vec::new();
    Command::new("sync").status()?;
    for i in 0..runs {
        let ctx = TestContext::new();
        from.push(
            install_ms(
                &ctx,
                &bin,
                &[
                    "install",
                    "--from",
                    &path,
                    "--sha256",
                    &sha,
                    "--no-service",
                    "--json",
                ],
            )?
            .0,
        );
        let dest = work.path().join(format!("afloor-{i}"));
        std::fs::create_dir_all(&dest)?;
        floor.push(time_ms(|| sh(FLOOR_ARCHIVE, &[&dist, &dest, &archive.path])).0);
    }
    let floor_name = "floor: sha256sum -c + tar xzf + sync + mv";
    table.add("install", floor_name, Unit::Ms, floor, None);
    table.add(
        "install",
        "install --from ARCHIVE --sha256, smoke excluded",
        Unit::Ms,
        from,
        Some(floor_name),
    );
    Ok(())
}
