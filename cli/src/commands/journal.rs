//! `journal tail [THREAD] [--follow]`: every retained event of one thread or
//! of all the CLI's threads, then (with `--follow`) new ones as they commit.
//! The follow subscribes from the last printed cursor, so nothing is missed
//! between the replay and the live stream.

use std::time::Duration;

use lapis_protocol::JournalEvent;
use lapis_protocol::client::JournalFollower;
use serde_json::json;

use crate::args::{GlobalArgs, JournalCommand};
use crate::exit::{CliError, CliResult};

use super::connect::{client_error, connect};
use super::turns::print_event;

pub fn run(global: &GlobalArgs, command: JournalCommand) -> CliResult {
    let JournalCommand::Tail {
        thread,
        follow,
        out,
    } = command;
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
