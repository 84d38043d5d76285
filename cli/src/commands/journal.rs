//! `journal tail [THREAD] [-n N | --since SEQ] [--follow]`: the last events
//! (or every event after a cursor) of one thread or of all the CLI's
//! threads, then (with `--follow`) new ones as they commit. The follow
//! subscribes from the last printed cursor, so nothing is missed between
//! the replay and the live stream. With `--json --follow` the output is
//! NDJSON (one `{"event": …}` per line), the one streaming exception to
//! "one JSON document".
//!
//! `journal verify [--json]`: checks the hash chain of the controller home's
//! database directly, read-only, with no protocol method: it needs no token
//! and works while the service is stopped (and, through SQLite's WAL
//! snapshot, while it runs). A broken chain exits 2 with code
//! `journal_tampered` naming the first bad `seq` and the failed check; a
//! whole chain short of, or different at, the prefix its anchor file
//! (`controller.db-anchor`) names exits 2 with `journal_tampered`, check
//! `anchor`; a missing anchor with `store_anchor_missing`.
//!
//! `journal reanchor [--json]`: with serve stopped (it takes the instance
//! lock), checks the chain and writes a new anchor for its head: for an
//! intended restore of `controller.db` from a backup.

use std::collections::VecDeque;

use lapis_protocol::JournalEvent;
use lapis_protocol::client::JournalFollower;
use serde_json::json;

use crate::args::{GlobalArgs, JournalCommand};
use crate::exit::{CliError, CliResult};

use super::connect::{Target, client_error, client_target, connect_to};
use super::printer::{Halt, Printer, settle};

/// Events shown when neither `-n` nor `--since` is given: about a screenful.
const DEFAULT_LINES: usize = 20;

/// How long the live follow waits before checking whether stdout closed.
const IDLE: std::time::Duration = std::time::Duration::from_millis(250);

pub(super) fn run(global: &GlobalArgs, command: JournalCommand) -> CliResult {
    let (thread, lines, since, follow, no_thoughts, out) = match command {
        JournalCommand::Tail {
            thread,
            lines,
            since,
            follow,
            no_thoughts,
            out,
        } => (thread, lines, since, follow, no_thoughts, out),
        JournalCommand::Verify { out } => return verify(global, out.json),
        JournalCommand::Reanchor { out } => return reanchor(global, out.json),
    };
    let target = client_target(global)?;
    let mut client = connect_to(&target)?;
    let thread = super::ids::optional(&mut client, thread, super::ids::thread)?;
    // Where to start reading, and how many of the events read to keep.
    let (mut after, keep) = match (since, lines) {
        (Some(seq), _) => (seq, None),
        (None, n) => {
            let n = n.unwrap_or(DEFAULT_LINES);
            match &thread {
                // One thread: its last threadSeq says where the tail starts.
                Some(t) => {
                    let last = client.threads_get(t).map_err(client_error)?.last_thread_seq;
                    (last.saturating_sub(n as u64), None)
                }
                // Every thread: walk the journal, keeping the last n.
                None => (0, Some(n)),
            }
        }
    };
    let mut events: VecDeque<JournalEvent> = VecDeque::new();
    loop {
        let page = client
            .journal_replay(thread.as_deref(), after, None)
            .map_err(client_error)?;
        for e in page.events {
            events.push_back(e);
            if keep.is_some_and(|n| events.len() > n) {
                events.pop_front();
            }
        }
        after = page.next_after;
        if !page.more {
            break;
        }
    }
    if out.json && !follow {
        crate::output::json(&json!({ "events": events, "nextAfter": after }))?;
        return Ok(());
    }
    let mut printer = Printer::new(out.json, !no_thoughts, true);
    settle((|| -> Result<(), Halt> {
        for e in &events {
            printer.event(e)?;
        }
        if !follow {
            return printer.end_run();
        }
        let mut cursor = after;
        loop {
            let mut follower =
                JournalFollower::attended(&mut client, thread.as_deref(), Some(cursor))
                    .map_err(client_error)?;
            let lost = loop {
                match follower.next(Some(IDLE)) {
                    Ok(Some(e)) => printer.event(&e)?,
                    Ok(None) if crate::output::stdout_closed() => return Err(Halt::Closed),
                    Ok(None) => {}
                    Err(e) if e.is_service_unavailable() => break e,
                    Err(e) => return Err(client_error(e).into()),
                }
            };
            cursor = follower.cursor();
            client = resume(&target, &lost, cursor)?;
        }
    })())
}

/// How long a follow tries to reconnect after its connection was lost
/// (a restarting controller, a dropped ssh connection) before it fails.
const RESUME_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// A new connection after `lost`, said on stderr both when lost and when
/// resumed; the follow goes on after `cursor`, so nothing is missed or
/// shown twice. Fails with the last error once [`RESUME_FOR`] is spent.
fn resume(
    target: &Target,
    lost: &lapis_protocol::client::ClientError,
    cursor: u64,
) -> Result<lapis_protocol::client::Client, CliError> {
    eprintln!("journal: the connection to the controller was lost ({lost}); reconnecting");
    let deadline = std::time::Instant::now() + RESUME_FOR;
    let mut wait = std::time::Duration::from_millis(250);
    loop {
        match connect_to(target) {
            Ok(client) => {
                eprintln!("journal: reconnected; resuming after {cursor}");
                return Ok(client);
            }
            Err(e)
                if e.class == crate::exit::ExitClass::Unavailable
                    && std::time::Instant::now() + wait < deadline =>
            {
                std::thread::sleep(wait);
                wait = (wait * 2).min(std::time::Duration::from_secs(5));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The controller home and its database, which must exist (`not_found`
/// otherwise): `verify` and `reanchor` read the file, never the service.
pub(super) fn existing_database(
    global: &GlobalArgs,
) -> Result<(std::path::PathBuf, std::path::PathBuf), CliError> {
    let target = super::connect::target(global, None)?;
    let db = target.home.join(lapis_service::DB_FILE);
    if !db.is_file() {
        return Err(CliError::failure(
            "not_found",
            anyhow::anyhow!("no controller database at {}", db.display()),
        ));
    }
    Ok((target.home, db))
}

fn verify(global: &GlobalArgs, json_out: bool) -> CliResult {
    let (_, db) = existing_database(global)?;
    match lapis_service::verify_journal(&db) {
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
        Err(
            e @ lapis_service::StoreError::AnchorMismatch {
                anchored, found, ..
            },
        ) => Err(CliError::failure(
            "journal_tampered",
            anyhow::anyhow!("journal verification failed: {e}"),
        )
        .with_details(json!({ "check": "anchor", "anchored": anchored, "events": found }))),
        Err(e) => Err(CliError::failure(e.code(), e)),
    }
}

fn reanchor(global: &GlobalArgs, json_out: bool) -> CliResult {
    let (home, _) = existing_database(global)?;
    match lapis_service::reanchor_journal(&home) {
        Ok(report) => {
            if json_out {
                crate::output::json(&json!({
                    "anchored": true,
                    "events": report.events,
                    "head": report.head,
                }))?;
            } else {
                crate::output::line(format!(
                    "journal anchored: {} events, chain head {}",
                    report.events, report.head
                ))?;
            }
            Ok(())
        }
        Err(e) => Err(CliError::failure(e.code(), e)),
    }
}
