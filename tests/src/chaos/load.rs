//! Load: `clients` concurrent SDK connections x `per_client` submissions
//! over 8 workspaces against a bounded queue. Every accepted turn must
//! complete exactly once (one terminal transition in the journal, its
//! prompt exactly once in the fixture agent's ledger); every refusal must be
//! an explicit `queue_full`.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Result;
use serde_json::json;

use super::Summary;
use super::check::{histories, ledger};
use crate::bench::rig::{Rig, fixture_agent, wait_turns};

/// Runs the suite.
pub(crate) fn run(clients: usize, per_client: usize, queue: usize) -> Result<Summary> {
    let mut summary = Summary {
        suite: "load",
        ..Summary::default()
    };
    let agent = fixture_agent()
        .ok_or_else(|| anyhow::anyhow!("target/release/fixture-agent is missing"))?;
    let mut rig = Rig::new(8, json!({}), json!({ "queueCapacity": queue }))?;
    let ledger_path = rig.ctx.home().join("ledger.txt");
    let config = rig
        .ctx
        .home()
        .join(".config/lapis-ai-controller/config.json");
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&config)?)?;
    doc["providers"] = json!({ "ledger": { "command": agent, "args": ["--ledger", ledger_path, "--chunks", "3"] } });
    std::fs::write(&config, serde_json::to_vec_pretty(&doc)?)?;
    rig.start()?;
    let threads = rig.threads(&mut rig.client()?, "ledger")?;
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(clients));
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let mut client = rig.client()?;
            let threads = threads.clone();
            let barrier = barrier.clone();
            Ok(std::thread::spawn(move || {
                barrier.wait();
                let mut accepted = Vec::new();
                let mut refused = 0usize;
                let mut other = Vec::new();
                for i in 0..per_client {
                    let thread = &threads[(c + i) % threads.len()];
                    match client.turns_submit(
                        thread,
                        &format!("load-{c}-{i}"),
                        &format!("load prompt {c}-{i}"),
                    ) {
                        Ok(t) => accepted.push(t.id),
                        Err(e) if e.code() == "queue_full" => refused += 1,
                        Err(e) => other.push(e.code().to_owned()),
                    }
                }
                (accepted, refused, other)
            }))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut accepted = BTreeSet::new();
    let mut refused = 0;
    for h in handles {
        let (a, r, other) = h.join().expect("client thread");
        accepted.extend(a);
        refused += r;
        for code in other {
            summary
                .violations
                .push(format!("submission failed with {code}, not queue_full"));
        }
    }
    summary.iterations = clients * per_client;
    summary.faults = refused;
    let mut client = rig.client()?;
    let ids: Vec<String> = accepted.iter().cloned().collect();
    let states = wait_turns(&mut client, &ids, Duration::from_secs(900))?;
    let not_completed = states.iter().filter(|s| *s != "completed").count();
    if not_completed > 0 {
        summary
            .violations
            .push(format!("{not_completed} accepted turns did not complete"));
    }
    let hist = histories(&mut client, &threads)?;
    for id in &ids {
        let n = hist.get(id).map_or(0, |h| h.terminal.len());
        if n != 1 {
            summary
                .violations
                .push(format!("turn reached {n} terminal states"));
        }
    }
    let delivered = ledger(&ledger_path);
    let twice = delivered.values().filter(|n| **n > 1).count();
    if twice > 0 {
        summary
            .violations
            .push(format!("{twice} prompts delivered more than once"));
    }
    if delivered.len() != ids.len() {
        summary.violations.push(format!(
            "{} prompts delivered for {} accepted turns",
            delivered.len(),
            ids.len()
        ));
    }
    rig.stop();
    summary.detail = format!(
        "{clients} clients x {per_client} submissions, queue capacity {queue}: {} accepted and completed once, {refused} refused with queue_full",
        ids.len()
    );
    Ok(summary)
}
