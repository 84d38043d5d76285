//! `watch`: the CPU the live view takes, idle and while 8 workspaces
//! stream, read from `/proc/PID/stat` of the real binary running in tmux
//! (120x40) against a running serve. The redraw time after an event is the
//! CLI's own bench (`watch::tests::bench_…`, rendering to ratatui's test
//! backend), since only the process itself sees its frames.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::rig::{Rig, fixture_agent, run_ok};
use super::table::{Table, Unit};

/// A tmux server of the bench's own (private socket), killed on drop.
struct Tmux(std::path::PathBuf);

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.0).arg("-f").arg("/dev/null");
        c
    }

    fn screen(&self) -> String {
        self.cmd()
            .args(["capture-pane", "-p", "-t", "watch"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

/// CPU seconds (user + system) `pid` has used.
fn cpu_seconds(pid: u32, tick: f64) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')').context("stat")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11).context("utime")?.parse()?;
    let stime: f64 = f.get(12).context("stime")?.parse()?;
    Ok((utime + stime) / tick)
}

/// Percent of one core `pid` used over `span`.
fn core_percent(pid: u32, tick: f64, span: Duration) -> Result<f64> {
    let before = cpu_seconds(pid, tick)?;
    let start = Instant::now();
    std::thread::sleep(span);
    let used = cpu_seconds(pid, tick)? - before;
    Ok(used / start.elapsed().as_secs_f64() * 100.0)
}

/// Adds the suite's rows.
pub(crate) fn run(table: &mut Table, runs: usize, quick: bool) -> Result<()> {
    if !Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        table.note("watch: skipped (tmux is not installed)");
        return Ok(());
    }
    let Some(fixture) = fixture_agent() else {
        table.note("watch: skipped (fixture-agent not built beside the runner)");
        return Ok(());
    };
    let tick: f64 = String::from_utf8(Command::new("getconf").arg("CLK_TCK").output()?.stdout)?
        .trim()
        .parse()
        .unwrap_or(100.0);
    let providers = json!({ "stream": { "command": fixture, "args": ["--chunks", "400", "--thoughts", "2", "--tool-calls", "1"] } });
    let mut rig = Rig::new(8, providers, json!({ "maxRunningTurns": 8 }))?;
    rig.start()?;
    let bin = rig.bin.clone();
    let mut threads = Vec::new();
    for ws in rig.workspaces.clone() {
        let out = run_ok(
            &rig.ctx,
            &bin,
            &["threads", "create", &ws, "--provider", "stream"],
        )?;
        threads.push(out.stdout.trim().to_owned());
    }
    let dir = tempfile::tempdir()?;
    let tmux = Tmux(dir.path().join("tmux.sock"));
    let socket = tmux.0.to_str().context("socket path")?.to_owned();
    let mut start = rig.ctx.command_for(
        Path::new("tmux"),
        [
            "-S",
            &socket,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "40",
            "-s",
            "watch",
        ],
    );
    start.arg(&bin).arg("watch");
    if !start.status()?.success() {
        bail!("tmux new-session failed");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while !tmux.screen().contains("live") {
        if Instant::now() > deadline {
            bail!("watch did not come up: {}", tmux.screen());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let pane = String::from_utf8(
        tmux.cmd()
            .args(["display", "-p", "-t", "watch", "#{pane_pid}"])
            .output()?
            .stdout,
    )?;
    let pid: u32 = pane.trim().parse().context("pane pid")?;
    let span = if quick {
        Duration::from_secs(3)
    } else {
        Duration::from_secs(10)
    };
    std::thread::sleep(Duration::from_secs(1));
    let mut idle = Vec::new();
    for _ in 0..runs.clamp(1, 3) {
        idle.push(core_percent(pid, tick, span)?);
    }
    table.add(
        "watch",
        "watch idle, % of one core (8 workspaces)",
        Unit::Count("%"),
        idle,
        None,
    );
    // Streaming: every workspace runs turn after turn of 400 chunks, 2
    // thoughts and a tool call; the view's CPU is measured from the first
    // submission until every turn has settled.
    let per = if quick { 10 } else { 30 };
    let before = cpu_seconds(pid, tick)?;
    let start = Instant::now();
    let mut last = Vec::new();
    for _ in 0..per {
        last.clear();
        for t in &threads {
            let out = run_ok(&rig.ctx, &bin, &["turns", "submit", t, "--prompt", "go"])?;
            last.push(out.stdout.trim().to_owned());
        }
    }
    // The turns are the CLI session's (another application does not see
    // them): their states come through `turns show`.
    let deadline = Instant::now() + Duration::from_secs(600);
    for turn in &last {
        loop {
            let out = run_ok(&rig.ctx, &bin, &["turns", "show", turn, "--json"])?;
            let doc: serde_json::Value = serde_json::from_str(&out.stdout)?;
            let state = doc["turn"]["state"].as_str().unwrap_or_default().to_owned();
            if lapis_protocol::TurnState::parse(&state)
                .is_some_and(|s| s.is_terminal() || s.is_fenced())
            {
                break;
            }
            if Instant::now() > deadline {
                bail!("turn {turn} did not settle");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let span = start.elapsed();
    let used = cpu_seconds(pid, tick)? - before;
    let shown = tmux.screen();
    table.add(
        "watch",
        format!(
            "watch while 8 workspaces stream ({} turns of 400 chunks over {:.0} s), % of one core",
            per * threads.len(),
            span.as_secs_f64()
        ),
        Unit::Count("%"),
        vec![used / span.as_secs_f64() * 100.0],
        None,
    );
    if !shown.contains("completed") {
        table.note("watch: the screen showed no completed turn after streaming");
    }
    let _ = tmux.cmd().args(["send-keys", "-t", "watch", "q"]).status();
    rig.stop();
    Ok(())
}
