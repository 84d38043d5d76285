//! `journal tail [THREAD] [--follow]`: every retained event of one thread or
//! of all the CLI's threads, then (with `--follow`) new ones as they commit.
//! The follow subscribes from the last printed cursor, so nothing is missed
//! between the replay and the live stream.
//!
//! `journal verify [--json]`: checks the hash chain of the controller home's
//! database directly, read-only, with no protocol method: it needs no token
//! and works while the service is stopped (and, through SQLite's WAL
//! snapshot, while it runs). A broken chain exits 2 with code
//! `journal_tampered` naming the first bad `seq` and the failed check.

use std::time::Duration;

use lapis_protocol::JournalEvent;
use lapis_protocol::client::JournalFollower;
use serde_json::json;

use crate::args::{GlobalArgs, JournalCommand};
use crate::exit::{CliError, CliResult};

use super::connect::{client_error, connect};
use super::turns::print_event;

pub fn run(global: &GlobalArgs, command: JournalCommand) -> CliResult {
    let (thread, follow, out) = match command {
        JournalCommand::Tail {
            thread,
            follow,
            out,
        } => (thread, follow, out),
        JournalCommand::Verify { out } => return verify(global, out.json),
    };
    if follow && out.json {
        return Err(CliError::failure(
            "invalid_request",
            anyhow::anyhow!(
                "--follow streams without end; it cannot be combined with --json (one document)"
            ),
        ));
    }
    let mut client = connect(global)?;
    let mut after = 0u64;
    let mut all: Vec<JournalEvent> = Vec::new();
    loop {
        let page = client
            .journal_replay(thread.as_deref(), after, None)
            .map_err(client_error)?;
        for e in page.events {
            if !out.json {
                print_event(&e)?;
            }
            if out.json {
                all.push(e);
            }
        }
        after = page.next_after;
        if !page.more {
            break;
        }
    }
    if out.json {
        crate::output::json(&json!({ "events": all, "nextAfter": after }))?;
        return Ok(());
    }
    if !follow {
        return Ok(());
    }
    let mut follower = JournalFollower::start(&mut client, thread.as_deref(), Some(after))
        .map_err(client_error)?;
    loop {
        if let Some(e) = follower
            .next(Some(Duration::from_secs(30)))
            .map_err(client_error)?
        {
            print_event(&e)?;
        }
    }
}

fn verify(global: &GlobalArgs, json_out: bool) -> CliResult {
    let target = super::connect::target(global, None)?;
    let db = target.home.join(lapis_service::store::DB_FILE);
    if !db.is_file() {
        return Err(CliError::failure(
            "not_found",
            anyhow::anyhow!("no controller database at {}", db.display()),
        ));
    }
    match lapis_service::store::verify_journal(&db) {
        Ok(report) => {
            if json_out {
                crate::output::json(&json!({
                    "verified": true,
                    "events": report.events,
                    "head": report.head,
                }))?;
            } else {
                crate::output::line(format!(
                    "journal verified: {} events, chain head {}",
                    report.events, report.head
                ))?;
            }
            Ok(())
        }
        Err(lapis_service::StoreError::InvalidRow {
            table: "events",
            row,
            check,
        }) => Err(CliError::failure(
            "journal_tampered",
            anyhow::anyhow!("journal verification failed at seq {row} ({check})"),
        )
        .with_details(json!({ "seq": row.parse::<u64>().ok(), "check": check }))),
        Err(e) => Err(CliError::failure(e.code(), e)),
    }
}
