//! `releases list` and `releases gc`: the installed snapshots.

use lapis_installer::releases;
use serde_json::json;

use super::paths::{installer_error, resolve, utc};
use crate::args::{GcArgs, GlobalArgs, JsonArg, ReleasesCommand};
use crate::exit::CliResult;
use crate::table::{Cell, Table};

pub(super) fn run(global: &GlobalArgs, command: ReleasesCommand) -> CliResult {
    match command {
        ReleasesCommand::List(out) => list(global, out),
        ReleasesCommand::Gc(args) => gc(global, args),
    }
}

fn list(global: &GlobalArgs, out: JsonArg) -> CliResult {
    let paths = resolve(global, None, None)?;
    let listing = releases::list(&paths).map_err(installer_error)?;
    if out.json {
        let snapshots: Vec<_> = listing
            .snapshots
            .iter()
            .map(|s| {
                json!({
                    "digest": s.digest,
                    "active": s.active,
                    "previous": s.previous,
                    "installedAt": s.installed_at.map(utc),
                    "build": s.build,
                    "usedBy": s.used_by,
                    "path": paths.snapshot_dir(&s.digest),
                })
            })
            .collect();
        crate::output::json(&json!({
            "active": listing.active,
            "previous": listing.previous,
            "launcher": paths.launcher,
            "launcherForeign": listing.launcher_foreign,
            "releasesRoot": paths.releases_root,
            "snapshots": snapshots,
        }))?;
        return Ok(());
    }
    if listing.snapshots.is_empty() {
        eprintln!(
            "no snapshots installed in {}",
            paths.releases_root.display()
        );
    }
    let mut table = Table::new(&["SNAPSHOT", "INSTALLED", "VERSION", "COMMIT", "NOTES"]);
    for s in &listing.snapshots {
        let mut notes = Vec::new();
        if s.active {
            notes.push("active".to_owned());
        }
        if s.previous {
            notes.push("previous".to_owned());
        }
        if !s.used_by.is_empty() {
            let pids: Vec<String> = s.used_by.iter().map(u32::to_string).collect();
            notes.push(format!("in use by pid {}", pids.join(",")));
        }
        let (version, commit) = s
            .build
            .as_ref()
            .map(|b| (b.version.as_str(), b.commit.as_str()))
            .unwrap_or(("?", "?"));
        let installed = s
            .installed_at
            .map(|secs| i64::try_from(secs).unwrap_or(i64::MAX).saturating_mul(1000));
        table.row(vec![
            s.digest[..12].into(),
            Cell::Time(installed),
            version.into(),
            commit.into(),
            notes.join(", ").into(),
        ]);
    }
    table.print()?;
    if let Some(what) = &listing.launcher_foreign {
        eprintln!(
            "note: {} is {what}, not one of these snapshots",
            paths.launcher.display()
        );
    }
    Ok(())
}

fn gc(global: &GlobalArgs, args: GcArgs) -> CliResult {
    let paths = resolve(global, None, None)?;
    let report = releases::gc(&paths, args.keep).map_err(installer_error)?;
    if args.out.json {
        let kept: Vec<_> = report
            .kept
            .iter()
            .map(|(d, why)| json!({ "digest": d, "reason": why }))
            .collect();
        crate::output::json(&json!({
            "removed": report.removed,
            "kept": kept,
            "removedQuarantine": report.removed_quarantine,
        }))?;
        return Ok(());
    }
    let mut lines = Vec::new();
    for d in &report.removed {
        lines.push(format!("removed {d}"));
    }
    for (d, why) in &report.kept {
        lines.push(format!("kept    {d} ({why})"));
    }
    for p in &report.removed_quarantine {
        lines.push(format!("removed {} (quarantined)", p.display()));
    }
    if lines.is_empty() {
        lines.push("nothing to collect".to_owned());
    }
    crate::output::line(lines.join("\n"))?;
    Ok(())
}
