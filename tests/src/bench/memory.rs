//! `memory`: peak RSS (`VmHWM` from /proc/<pid>/status) of an idle serve
//! (started, answered a few `status` calls) and of one that ran 8 busy
//! workspaces (each streaming a 5,000-chunk turn from the fixture agent,
//! or 50 echo turns each when the fixture agent is not built).

use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use super::rig::{Rig, fixture_agent, vm_hwm_kib, wait_turns};
use super::table::{Table, Unit};

/// Adds the suite's rows.
pub(crate) fn run(table: &mut Table, runs: usize) -> Result<()> {
    let (providers, provider, per_ws, busy) = match fixture_agent() {
        Some(agent) => (
            json!({ "chunks": { "command": agent, "args": ["--chunks", "5000"] } }),
            "chunks",
            2,
            "8 busy workspaces (2 turns x 5,000 chunks each)",
        ),
        None => (
            json!({}),
            "echo",
            50,
            "8 busy workspaces (50 echo turns each)",
        ),
    };
    let mut idle = Vec::new();
    let mut loaded = Vec::new();
    for _ in 0..runs {
        let mut rig = Rig::new(8, providers.clone(), json!({}))?;
        rig.start()?;
        let pid = rig.pid().context("pid")?;
        let mut client = rig.client()?;
        for _ in 0..10 {
            client.status()?;
        }
        idle.push(vm_hwm_kib(pid).context("VmHWM")? as f64 / 1024.0);
        let threads = rig.threads(&mut client, provider)?;
        let mut last = Vec::new();
        for i in 0..per_ws {
            for (w, thread) in threads.iter().enumerate() {
                let turn = client.turns_submit(thread, &format!("m{w}-{i}"), "busy")?;
                if i + 1 == per_ws {
                    last.push(turn.id);
                }
            }
        }
        let states = wait_turns(&mut client, &last, Duration::from_secs(600))?;
        anyhow::ensure!(states.iter().all(|s| s == "completed"), "{states:?}");
        loaded.push(vm_hwm_kib(pid).context("VmHWM")? as f64 / 1024.0);
        rig.stop();
    }
    table.add("memory", "serve peak RSS, idle", Unit::MiB, idle, None);
    table.add(
        "memory",
        format!("serve peak RSS, {busy}"),
        Unit::MiB,
        loaded,
        Some("serve peak RSS, idle"),
    );
    Ok(())
}
