//! `threads import FILE [--workspace ID] [--provider NAME]` (issue 44 item
//! 5): FILE is verified offline first, exactly as `threads export
//! --verify` does, so a bundle edited in any byte is refused
//! (`bundle_tampered`, naming the byte range) before anything connects;
//! then the running controller, the only writer, imports it
//! (`threads.import`, which verifies it again). Without a running
//! controller it exits 3 as every client command does: the CLI never
//! opens the database for writing.

use std::path::Path;

use serde_json::json;

use lapis_protocol::MAX_IMPORT_BUNDLE_BYTES;
use lapis_protocol::params::ThreadsImport;

use crate::args::GlobalArgs;
use crate::exit::{CliError, CliResult};

use super::connect::{client_error, connect};

pub(super) fn import(
    global: &GlobalArgs,
    file: &Path,
    workspace: Option<String>,
    provider: Option<String>,
    json_out: bool,
) -> CliResult {
    let (bytes, _) = super::threads_export::read_verified(file)?;
    if bytes.len() > MAX_IMPORT_BUNDLE_BYTES {
        return Err(CliError::failure(
            "bundle_too_large",
            anyhow::anyhow!(
                "{} is {} bytes; import takes bundles of at most {MAX_IMPORT_BUNDLE_BYTES}",
                file.display(),
                bytes.len()
            ),
        ));
    }
    // Verified: it is the UTF-8 JSON lines the export wrote.
    let bundle = String::from_utf8(bytes).map_err(|_| {
        CliError::failure(
            "bundle_tampered",
            anyhow::anyhow!("the bundle is not UTF-8"),
        )
    })?;
    let params = ThreadsImport {
        bundle,
        workspace_id: workspace,
        provider,
    };
    let mut client = connect(global)?;
    let imported = client.threads_import(&params).map_err(client_error)?;
    if json_out {
        crate::output::json(&json!({
            "imported": true,
            "thread": imported.thread,
            "receipt": imported.receipt,
            "seq": imported.seq,
        }))?;
    } else {
        let r = &imported.receipt;
        crate::output::line(format!(
            "imported thread {} (workspace {}) from thread {}: {} event(s), {} turn(s), {} pruned left out; receipt at seq {}",
            imported.thread.id,
            imported.thread.workspace_id,
            r.source_thread_id,
            r.events,
            r.turns,
            r.pruned,
            imported.seq
        ))?;
    }
    Ok(())
}
