//! `journal`: events/s for one turn whose agent streams 100,000 chunks,
//! through serve (durable, group-committed), measured from submission to
//! the turn's completion over the SDK.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use super::rig::{Rig, fixture_agent, wait_turns};
use super::table::{Table, Unit};

/// Adds the suite's rows.
pub(crate) fn run(table: &mut Table, chunks: usize, runs: usize) -> Result<()> {
    let Some(agent) = fixture_agent() else {
        table.note(
            "journal: skipped: target/release/fixture-agent is missing (`cargo build --release -p lapis-e2e --bin fixture-agent`)",
        );
        return Ok(());
    };
    let providers =
        json!({ "chunks": { "command": agent, "args": ["--chunks", chunks.to_string()] } });
    let mut rig = Rig::new(1, providers, json!({}))?;
    rig.start()?;
    let mut client = rig.client()?;
    let thread = rig.threads(&mut client, "chunks")?.remove(0);
    let mut rates = Vec::new();
    for round in 0..runs {
        let started = Instant::now();
        let turn = client.turns_submit(&thread, &format!("j{round}"), "stream")?;
        let states = wait_turns(&mut client, &[turn.id], Duration::from_secs(600))?;
        anyhow::ensure!(states == ["completed"], "turn ended {states:?}");
        rates.push(chunks as f64 / started.elapsed().as_secs_f64());
    }
    table.add(
        "journal",
        format!("one turn streaming {chunks} chunks, submit → completed"),
        Unit::PerSec("events"),
        rates,
        None,
    );
    rig.stop();
    Ok(())
}
