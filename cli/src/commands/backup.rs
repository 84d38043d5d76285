//! `backup create|list|restore`: verified copies of the controller
//! database, beside it under `<home>/backups/` (see the store's `backup`
//! module for what each guarantees).
//!
//! `create` reads the database only, so it works while `serve` runs;
//! `restore` takes the instance lock (`instance_locked` while `serve`
//! runs), refuses a backup that does not verify (`store_backup_invalid`,
//! exit 2) before anything is written, and backs the database it replaces
//! up first, so a restore can itself be undone. A restored journal opens
//! without `journal reanchor`.

use serde_json::json;

use crate::args::{BackupCommand, GlobalArgs};
use crate::exit::{CliError, CliResult};

pub(super) fn run(global: &GlobalArgs, command: BackupCommand) -> CliResult {
    let fail = |e: lapis_service::StoreError| CliError::failure(e.code(), e);
    match command {
        BackupCommand::Create { out } => {
            let (home, _) = super::journal::existing_database(global)?;
            let info = lapis_service::create_backup(&home, lapis_service::BackupKind::Manual)
                .map_err(fail)?;
            if out.json {
                crate::output::json(&info)?;
            } else {
                crate::output::line(format!(
                    "backed up: {} ({} events, schema version {}, {} bytes)",
                    info.name, info.events, info.schema_version, info.bytes
                ))?;
            }
        }
        BackupCommand::List { out } => {
            let target = super::connect::target(global, None)?;
            let backups = match lapis_service::list_backups(&target.home) {
                Err(lapis_service::StoreError::NotControllerHome { .. }) => Vec::new(),
                other => other.map_err(fail)?,
            };
            if out.json {
                crate::output::json(&json!({ "backups": backups }))?;
            } else if backups.is_empty() {
                crate::output::line("no backups")?;
            } else {
                for b in &backups {
                    crate::output::line(format!(
                        "{}  {}  {} events  schema {}  {} bytes",
                        b.name,
                        lapis_protocol::time::format_ms(b.created_ms),
                        b.events,
                        b.schema_version,
                        b.bytes
                    ))?;
                }
            }
        }
        BackupCommand::Restore { name, out } => {
            let target = super::connect::target(global, None)?;
            let done = lapis_service::restore_backup(&target.home, &name).map_err(fail)?;
            if out.json {
                crate::output::json(&done)?;
            } else {
                crate::output::line(format!(
                    "restored {} ({} events, schema version {})",
                    done.restored.name, done.restored.events, done.restored.schema_version
                ))?;
                if let Some(previous) = &done.previous {
                    crate::output::line(format!(
                        "the database it replaced is backup {}",
                        previous.name
                    ))?;
                }
                if let Some(aside) = &done.set_aside {
                    crate::output::line(format!(
                        "the database it replaced did not verify; it was moved, as it was, to {}",
                        aside.display()
                    ))?;
                }
            }
        }
    }
    Ok(())
}
