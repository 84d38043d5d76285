//! `turns`: N sequential `turns submit --wait` with the built-in echo agent
//! vs the same prompts through `acpx exec` on the same agent; then
//! throughput over one persistent SDK connection with 1 and 8 workspaces.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use super::acpx::Acpx;
use super::rig::{Rig, run_ok, wait_turns};
use super::table::{Table, Unit, time_ms};

/// Adds the suite's rows.
pub fn run(table: &mut Table, n: usize, batch: usize, acpx: Option<&Acpx>) -> Result<()> {
    let mut rig = Rig::new(8, json!({}), json!({}))?;
    rig.start()?;
    let bin = rig.bin.clone();
    let mut client = rig.client()?;
    let threads = rig.threads(&mut client, "echo")?;
    let prompt = |i: usize| format!("bench prompt {i}: echo me back");

    // Threads belong to their application: the CLI opens its own.
    let created = run_ok(
        &rig.ctx,
        &bin,
        &["threads", "create", "--workspace", "ws0", "--json"],
    )?;
    let cli_thread = created.json()["thread"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    run_ok(
        &rig.ctx,
        &bin,
        &[
            "turns",
            "submit",
            &cli_thread,
            "--prompt",
            "warm",
            "--wait",
            "--json",
        ],
    )?;
    let mut cli = Vec::new();
    for i in 0..n {
        let p = prompt(i);
        let (t, out) = time_ms(|| {
            run_ok(
                &rig.ctx,
                &bin,
                &[
                    "turns",
                    "submit",
                    &cli_thread,
                    "--prompt",
                    &p,
                    "--wait",
                    "--json",
                ],
            )
        });
        let out = out?;
        anyhow::ensure!(
            out.stdout.contains("completed"),
            "turn did not complete: {}",
            out.stdout
        );
        cli.push(t);
    }
    table.add(
        "turns",
        "turns submit --wait, echo (per turn)",
        Unit::Ms,
        cli,
        None,
    );

    match acpx {
        Some(acpx) => {
            let cwd = rig.ctx.home().join("ws0");
            acpx.run(
                &bin,
                &cwd,
                &["--approve-all", "--format", "quiet", "exec", "warm"],
            );
            let samples = (0..n)
                .map(|i| {
                    let p = prompt(i);
                    time_ms(|| {
                        acpx.run(
                            &bin,
                            &cwd,
                            &["--approve-all", "--format", "quiet", "exec", &p],
                        )
                    })
                    .0
                })
                .collect();
            table.add(
                "turns",
                "acpx exec, same echo agent (per turn, peer)",
                Unit::Ms,
                samples,
                Some("turns submit --wait, echo (per turn)"),
            );
        }
        None => table.note("turns: acpx exec skipped (acpx unavailable, see above)"),
    }

    for ws in [1usize, 8] {
        let mut rates = Vec::new();
        for round in 0..3 {
            let started = Instant::now();
            let mut last = vec![String::new(); ws];
            for i in 0..batch {
                let w = i % ws;
                let turn = client.turns_submit(
                    &threads[w],
                    &format!("tp-{ws}-{round}-{i}"),
                    &prompt(i),
                )?;
                last[w] = turn.id;
            }
            let states = wait_turns(&mut client, &last, Duration::from_secs(600))?;
            anyhow::ensure!(
                states.iter().all(|s| s == "completed"),
                "turns ended {states:?}"
            );
            rates.push(batch as f64 / started.elapsed().as_secs_f64());
        }
        let against = (ws == 8).then_some("SDK throughput, 1 workspace");
        let figure = if ws == 1 {
            "SDK throughput, 1 workspace".to_owned()
        } else {
            format!("SDK throughput, {ws} workspaces")
        };
        table.add("turns", figure, Unit::PerSec("turns"), rates, against);
    }
    rig.stop();
    Ok(())
}
