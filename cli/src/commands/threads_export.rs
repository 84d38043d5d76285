//! `threads export ID -o FILE [--force]` and `threads export --verify FILE`
//! (issue 44 item 5): a thread's journal as a `lapis-thread-bundle/1`
//! bundle (`lapis_service::export_thread`), and its offline check
//! (`lapis_service::verify_bundle`).
//!
//! The export reads the controller home's database directly, read-only, as
//! `journal verify` does: no token, no protocol method, works while `serve`
//! runs or is stopped. FILE is written atomically (a temporary file beside
//! it, mode 0600, synced, then renamed; without `--force` linked into place
//! so an existing FILE is never replaced: `file_exists`). `--verify` reads
//! nothing but FILE: a bundle edited in any byte exits 2 with
//! `bundle_tampered` and `details: {"start", "end", "reason"}`.

use std::io::Write;
use std::path::Path;

use serde_json::json;

use crate::exit::{CliError, CliResult};

use crate::args::GlobalArgs;

pub(super) fn export(
    global: &GlobalArgs,
    thread: &str,
    file: &Path,
    force: bool,
    json_out: bool,
) -> CliResult {
    if !force && file.symlink_metadata().is_ok() {
        return Err(exists(file));
    }
    let (_, db) = super::journal::existing_database(global)?;
    let bundle = lapis_service::export_thread(&db, thread).map_err(|e| {
        let code = match e.code() {
            "invalid_request" => "ambiguous_id",
            code => code,
        };
        CliError::failure(code, e)
    })?;
    let report = lapis_service::verify_bundle(&bundle).map_err(|e| {
        CliError::failure(
            "internal",
            anyhow::anyhow!("the export does not verify: {e}"),
        )
    })?;
    write(file, &bundle, force)?;
    let h = &report.header;
    if json_out {
        crate::output::json(&json!({
            "exported": true,
            "file": file,
            "thread": h.thread,
            "events": report.events,
            "retention": h.retention,
            "anchorEvents": h.anchor_events,
            "anchorHead": h.anchor_head,
            "bytes": bundle.len(),
        }))?;
    } else {
        crate::output::line(format!(
            "exported thread {}: {} events ({}), {} bytes to {}",
            h.thread,
            report.events,
            h.retention,
            bundle.len(),
            file.display()
        ))?;
    }
    Ok(())
}

pub(super) fn verify(file: &Path, json_out: bool) -> CliResult {
    let (_, report) = read_verified(file)?;
    let h = &report.header;
    if json_out {
        crate::output::json(&json!({
            "verified": true,
            "format": h.format,
            "thread": h.thread,
            "events": report.events,
            "retention": h.retention,
            "anchorEvents": h.anchor_events,
            "anchorHead": h.anchor_head,
        }))?;
    } else {
        crate::output::line(format!(
            "bundle verified: thread {}, {} events ({}), exported at anchor {} events, head {}",
            h.thread, report.events, h.retention, h.anchor_events, h.anchor_head
        ))?;
    }
    Ok(())
}

/// FILE's bytes, verified offline (`bundle_tampered` with `details:
/// {"start", "end", "reason"}`, or `bundle_unsupported`).
pub(super) fn read_verified(
    file: &Path,
) -> Result<(Vec<u8>, lapis_service::BundleReport), CliError> {
    let bytes = std::fs::read(file).map_err(|e| {
        let code = if e.kind() == std::io::ErrorKind::NotFound {
            "not_found"
        } else {
            "io_error"
        };
        CliError::failure(code, anyhow::anyhow!("cannot read {}: {e}", file.display()))
    })?;
    match lapis_service::verify_bundle(&bytes) {
        Ok(report) => Ok((bytes, report)),
        Err(e) => Err(CliError::failure(e.code(), anyhow::anyhow!("{e}"))
            .with_details(json!({ "start": e.start, "end": e.end, "reason": e.reason }))),
    }
}

fn exists(file: &Path) -> CliError {
    CliError::failure(
        "file_exists",
        anyhow::anyhow!("{} exists; pass --force to replace it", file.display()),
    )
}

/// `bytes` into `file` atomically, mode 0600.
fn write(file: &Path, bytes: &[u8], force: bool) -> Result<(), CliError> {
    let io = |what: &str, e: std::io::Error| {
        CliError::failure(
            "io_error",
            anyhow::anyhow!("{what} {}: {e}", file.display()),
        )
    };
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // tempfile creates its file with mode 0600.
    let mut tmp = tempfile::Builder::new()
        .prefix(".lapis-bundle-")
        .tempfile_in(dir)
        .map_err(|e| io("cannot create a file beside", e))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| io("cannot write", e))?;
    if force {
        tmp.persist(file).map_err(|e| io("cannot write", e.error))?;
    } else {
        tmp.persist_noclobber(file).map_err(|e| {
            if e.error.kind() == std::io::ErrorKind::AlreadyExists {
                exists(file)
            } else {
                io("cannot write", e.error)
            }
        })?;
    }
    Ok(())
}
