//! `version [--json]`: version, build identity and, when running from an
//! installed snapshot, its digest.

use serde_json::json;

use crate::args::{GlobalArgs, JsonArg};
use crate::exit::CliResult;
use crate::identity::build_identity;

pub(super) fn run(_global: &GlobalArgs, out: JsonArg) -> CliResult {
    let build = build_identity();
    // Only the manifest is read and hashed, not the binary, so this stays
    // cheap enough for every call (including the installer's smoke test).
    let snapshot: Option<String> = std::env::current_exe()
        .ok()
        .and_then(|exe| lapis_installer::releases::snapshot_of_executable(&exe, &build));
    if out.json {
        crate::output::json(&json!({
            "name": lapis_release::PRODUCT,
            "version": build.version,
            "build": build,
            "snapshot": snapshot,
        }))?;
    } else {
        crate::output::line(format!(
            "{} {} ({} {} {}){}",
            lapis_release::PRODUCT,
            build.version,
            build.commit,
            build.date,
            build.target,
            snapshot
                .map(|d| format!(" snapshot {d}"))
                .unwrap_or_default()
        ))?;
    }
    Ok(())
}
