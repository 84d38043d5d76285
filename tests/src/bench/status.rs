//! `status`: `status --json` against a running serve vs process start alone
//! (`version --json`, the floor) vs `acpx status` (peer).

use anyhow::Result;

use super::acpx::Acpx;
use super::rig::{Rig, run_ok};
use super::table::{Table, Unit, time_ms};

/// Adds the suite's rows.
pub(crate) fn run(table: &mut Table, runs: usize, acpx: Option<&Acpx>) -> Result<()> {
    let mut rig = Rig::new(1, serde_json::json!({}), serde_json::json!({}))?;
    rig.start()?;
    let bin = rig.bin.clone();
    // Warm the page cache once.
    run_ok(&rig.ctx, &bin, &["version", "--json"])?;
    run_ok(&rig.ctx, &bin, &["status", "--json"])?;
    let mut version = Vec::new();
    let mut status = Vec::new();
    for _ in 0..runs {
        version.push(time_ms(|| run_ok(&rig.ctx, &bin, &["version", "--json"])).0);
        status.push(time_ms(|| run_ok(&rig.ctx, &bin, &["status", "--json"])).0);
    }
    table.add(
        "status",
        "version --json (floor: process start)",
        Unit::Ms,
        version,
        None,
    );
    table.add(
        "status",
        "status --json, running serve",
        Unit::Ms,
        status,
        Some("version --json (floor: process start)"),
    );
    match acpx {
        Some(acpx) => {
            let cwd = rig.ctx.home().join("ws0");
            acpx.run(&bin, &cwd, &["status"]);
            let samples = (0..runs.min(10))
                .map(|_| time_ms(|| acpx.run(&bin, &cwd, &["status"])).0)
                .collect();
            table.add(
                "status",
                "acpx status (peer, echo agent)",
                Unit::Ms,
                samples,
                Some("status --json, running serve"),
            );
        }
        None => table.note("status: acpx status skipped (acpx unavailable, see above)"),
    }
    rig.stop();
    Ok(())
}
