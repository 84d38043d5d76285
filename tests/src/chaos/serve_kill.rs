//! kill -9 of `serve` at random moments while turns run. The fixture agent
//! records every prompt it receives (fsynced) in a ledger. After each
//! restart the fenced turns are resolved (the owner's confirmation) and
//! submissions continue; submissions whose answer was lost are resent with
//! the same command id (idempotent), and so are those a fenced workspace
//! refused (its fencing turn's answer was lost, so it is resolved only once
//! its resend is answered). At the end:
//! - every accepted turn reached exactly one terminal state;
//! - no prompt was delivered twice, and only accepted prompts were;
//! - every delivered prompt's turn completed or was fenced first (a turn
//!   past the dispatch boundary is never a plain failure after a kill);
//! - no completed turn is missing from the ledger.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use super::check::{histories, ledger, resolve_fenced};
use super::{Rng, Summary};
use crate::bench::rig::{Rig, fixture_agent};

/// Runs the suite: `turns` submissions over `workspaces`, kills between.
pub(crate) fn run(
    turns: usize,
    workspaces: usize,
    rng: &mut Rng,
    limit: Duration,
) -> Result<Summary> {
    let mut summary = Summary {
        suite: "serve-kill",
        ..Summary::default()
    };
    let agent = fixture_agent()
        .ok_or_else(|| anyhow::anyhow!("target/release/fixture-agent is missing"))?;
    let mut rig = Rig::new(workspaces, json!({}), json!({ "queueCapacity": 100000 }))?;
    let ledger_path = rig.ctx.home().join("ledger.txt");
    // Rewrite the config with the ledger provider (its path is in HOME).
    let providers = json!({ "ledger": { "command": agent, "args": ["--ledger", ledger_path, "--chunks", "30"] } });
    let config = rig
        .ctx
        .home()
        .join(".config/lapis-ai-controller/config.json");
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&config)?)?;
    doc["providers"] = providers;
    std::fs::write(&config, serde_json::to_vec_pretty(&doc)?)?;

    rig.start()?;
    let threads = rig.threads(&mut rig.client()?, "ledger")?;
    let started = Instant::now();
    // command id -> (prompt, turn id once known)
    let mut accepted: BTreeMap<String, String> = BTreeMap::new();
    let mut prompts: BTreeMap<String, String> = BTreeMap::new();
    let mut pending: Vec<(String, String, usize)> = Vec::new();
    let mut next = 0usize;
    let mut fenced_refusals = 0usize;
    while (next < turns || !pending.is_empty()) && started.elapsed() < limit {
        summary.iterations += 1;
        let mut client = rig.client()?;
        // Resend submissions whose answer was lost (same id, same input).
        let mut retry = std::mem::take(&mut pending);
        let batch = 3 + rng.below(15) as usize;
        for _ in 0..batch {
            if next < turns {
                let prompt = format!("chaos prompt {next}");
                retry.push((format!("cmd-{next}"), prompt, next % threads.len()));
                next += 1;
            }
        }
        // The killer: a random moment within the next ~300 ms.
        let pid = rig.pid().expect("running");
        let delay = Duration::from_millis(rng.below(300));
        let fired = Arc::new(AtomicBool::new(false));
        let killer = {
            let fired = fired.clone();
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                fired.store(
                    kill(Pid::from_raw(pid as i32), Signal::SIGKILL).is_ok(),
                    Ordering::SeqCst,
                );
            })
        };
        for (cmd, prompt, w) in retry {
            match client.turns_submit(&threads[w], &cmd, &prompt) {
                Ok(t) => {
                    accepted.insert(cmd.clone(), t.id);
                    prompts.insert(cmd, prompt);
                }
                Err(e) if matches!(e.code(), "disconnected" | "io_error" | "unavailable") => {
                    pending.push((cmd, prompt, w))
                }
                // The workspace is fenced by a turn whose submit answer was
                // lost in the last kill: resent just before (same command
                // id) it is accepted only now, so the fence it holds is
                // resolved after the next restart. A fenced workspace
                // refusing new work is the rule; the prompt goes again.
                Err(e) if e.code() == "workspace_fenced" => {
                    fenced_refusals += 1;
                    pending.push((cmd, prompt, w))
                }
                Err(e) => summary
                    .violations
                    .push(format!("submit refused: {}", e.code())),
            }
        }
        killer.join().expect("killer");
        if fired.load(Ordering::SeqCst) {
            summary.faults += 1;
        }
        rig.kill9();
        rig.start()?;
        let mut client = rig.client()?;
        let ids: BTreeSet<String> = accepted.values().cloned().collect();
        resolve_fenced(&mut client, &ids)?;
    }
    // Drain: everything accepted reaches an end (resolving fences as found).
    let mut client = rig.client()?;
    let ids: BTreeSet<String> = accepted.values().cloned().collect();
    let drain_deadline = Instant::now() + Duration::from_secs(300);
    loop {
        resolve_fenced(&mut client, &ids)?;
        let mut open = 0;
        for id in &ids {
            let t = client.turns_get(id)?;
            if !t.state.is_terminal() {
                open += 1;
            }
        }
        if open == 0 || Instant::now() > drain_deadline {
            if open > 0 {
                summary
                    .violations
                    .push(format!("{open} turns never finished"));
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let hist = histories(&mut client, &threads)?;
    let delivered = ledger(&ledger_path);
    let prompt_of: BTreeMap<&String, &String> = accepted
        .iter()
        .map(|(cmd, turn)| (turn, &prompts[cmd]))
        .collect();
    let accepted_prompts: BTreeSet<&String> = prompts.values().collect();
    for (prompt, n) in &delivered {
        if *n > 1 {
            summary
                .violations
                .push(format!("prompt delivered {n} times"));
        }
        if !accepted_prompts.contains(prompt) {
            summary
                .violations
                .push("a prompt was delivered that no accepted turn carries".into());
        }
    }
    let mut completed = 0;
    let mut fenced = 0;
    let mut failed_before_dispatch = 0;
    for id in &ids {
        let h = hist.get(id).cloned().unwrap_or_default();
        if h.terminal.len() != 1 {
            summary
                .violations
                .push(format!("turn reached {} terminal states", h.terminal.len()));
            continue;
        }
        let was_delivered = prompt_of
            .get(id)
            .is_some_and(|p| delivered.contains_key(*p));
        match h.terminal[0].as_str() {
            "completed" => {
                completed += 1;
                if !was_delivered {
                    summary
                        .violations
                        .push("a completed turn's prompt is not in the ledger".into());
                }
            }
            _ if h.fenced => fenced += 1,
            _ => {
                failed_before_dispatch += 1;
                if h.dispatched {
                    summary.violations.push(
                        "a turn past the dispatch boundary failed without being fenced".into(),
                    );
                }
                if was_delivered {
                    summary
                        .violations
                        .push("a delivered prompt's turn failed without being fenced".into());
                }
            }
        }
    }
    rig.stop();
    summary.detail = format!(
        "{} turns accepted: {completed} completed, {fenced} fenced then resolved, {failed_before_dispatch} failed before dispatch; {} prompts delivered; {fenced_refusals} submissions refused workspace_fenced (sent again); seed printed above",
        ids.len(),
        delivered.len()
    );
    Ok(summary)
}
