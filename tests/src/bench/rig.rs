//! A release `serve` in a temp HOME, shared by the bench and chaos runners.
//!
//! The binaries are never built here: [`release_bin`] finds
//! `target/release/lapis-ai-controller` beside the running runner and says
//! how to build it when it is missing.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lapis_e2e::TestContext;
use lapis_protocol::client::{Client, Credential};
use serde_json::{Value, json};

/// The owner token every rig writes into its config.
pub(crate) const OWNER: &str =
    "lapis_00000000000000000000000000000000000000000000000000000000000000d7";

/// `target/<profile>/` of the running runner.
pub(crate) fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.parent().expect("exe dir").to_path_buf()
}

/// The release CLI beside the runner (`LAPIS_BIN` overrides).
pub(crate) fn release_bin() -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os("LAPIS_BIN") {
        return Ok(PathBuf::from(bin));
    }
    let bin = profile_dir().join("lapis-ai-controller");
    if !bin.is_file() {
        bail!(
            "{} is missing: this runner builds nothing; run `cargo build --release` first",
            bin.display()
        );
    }
    Ok(bin)
}

/// The fixture agent beside the runner, if built.
pub(crate) fn fixture_agent() -> Option<PathBuf> {
    let path = profile_dir().join("fixture-agent");
    path.is_file().then_some(path)
}

/// A context whose commands run the release binary. Its leak check runs
/// on drop here too: no runner output or file may hold the owner token.
pub(crate) fn context() -> Result<TestContext> {
    release_bin()?;
    Ok(TestContext::new())
}

/// A `serve` process plus its temp HOME.
#[derive(Debug)]
pub(crate) struct Rig {
    /// Temp HOME, environment.
    pub(crate) ctx: TestContext,
    /// The release binary.
    pub(crate) bin: PathBuf,
    /// Controller home.
    pub(crate) home: PathBuf,
    /// Workspace ids, in order (`ws0`…).
    pub(crate) workspaces: Vec<String>,
    /// The running server, if any.
    child: Option<Child>,
}

impl Rig {
    /// Writes a config with `workspaces` agent workspaces, the given
    /// providers and server limits. Nothing is started.
    pub(crate) fn new(workspaces: usize, providers: Value, server: Value) -> Result<Rig> {
        let ctx = context()?;
        let bin = release_bin()?;
        let home = ctx.home().join(".lapis/ai-controller");
        let mut ws = serde_json::Map::new();
        let mut ids = Vec::new();
        for i in 0..workspaces {
            let path = ctx.home().join(format!("ws{i}"));
            std::fs::create_dir_all(&path)?;
            ws.insert(format!("ws{i}"), json!({ "path": path }));
            ids.push(format!("ws{i}"));
        }
        let dir = ctx.home().join(".config/lapis-ai-controller");
        std::fs::create_dir_all(&dir)?;
        let config = dir.join("config.json");
        let mut doc = json!({
            "schema": 1,
            "instance": "default",
            "controllerHome": home,
            "tokens": [{ "name": "owner", "principal": "owner", "secret": OWNER }],
            "providers": providers,
            "workspaces": ws,
            "server": server,
        });
        // Telemetry on, exporting to a collector at this OTLP/HTTP base
        // URL (issue 46's on/off figure: `scripts/bench-telemetry`).
        if let Some(url) = std::env::var("LAPIS_BENCH_TELEMETRY")
            .ok()
            .filter(|u| !u.is_empty())
        {
            doc["telemetry"] = json!({ "endpoint": url });
        }
        std::fs::write(&config, serde_json::to_vec_pretty(&doc)?)?;
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600))?;
        Ok(Rig {
            ctx,
            bin,
            home,
            workspaces: ids,
            child: None,
        })
    }

    /// The socket path.
    pub(crate) fn socket(&self) -> PathBuf {
        self.home.join("controller.sock")
    }

    /// Starts `serve` and returns the time until the socket accepted a
    /// connection and `status` answered.
    pub(crate) fn start(&mut self) -> Result<Duration> {
        let _ = std::fs::remove_file(self.socket());
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.ctx.home().join("serve.log"))?;
        let started = Instant::now();
        let mut cmd = self.ctx.command_for(&self.bin, ["serve"]);
        cmd.stdout(Stdio::null()).stderr(log);
        let mut child = cmd.spawn().context("spawn serve")?;
        let deadline = started + Duration::from_secs(120);
        loop {
            if UnixStream::connect(self.socket()).is_ok()
                && let Ok(mut c) = self.client()
                && c.status().is_ok()
            {
                break;
            }
            if let Some(status) = child.try_wait()? {
                bail!(
                    "serve exited early ({status}); see {}/serve.log",
                    self.ctx.home().display()
                );
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                bail!("serve did not become ready in 120 s");
            }
            // Not faster: every poll is a request serve answers, CPU the
            // throughput rows would count against the turns.
            std::thread::sleep(Duration::from_millis(5));
        }
        let took = started.elapsed();
        self.child = Some(child);
        Ok(took)
    }

    /// The server's pid.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL and reap.
    pub(crate) fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and reap.
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = std::process::Command::new("kill")
                .arg(child.id().to_string())
                .status();
            let _ = child.wait();
        }
    }

    /// One authenticated SDK connection.
    pub(crate) fn client(&self) -> Result<Client> {
        Ok(Client::open(
            &self.socket(),
            Credential::Token {
                token: OWNER.into(),
                application: "bench".into(),
            },
        )?)
    }

    /// Creates one thread per workspace with `provider`.
    pub(crate) fn threads(&self, client: &mut Client, provider: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for ws in &self.workspaces {
            out.push(
                client
                    .threads_create(ws, provider, lapis_protocol::ApprovalPolicy::AllowAll, None)?
                    .id,
            );
        }
        Ok(out)
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Peak resident set (`VmHWM`) of a live process, in KiB.
pub(crate) fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Waits until every turn in `turns` is terminal or fenced; returns their
/// final states. Polls one turn at a time (FIFO per workspace: callers pass
/// the last turn of each workspace when they only need completion).
pub(crate) fn wait_turns(
    client: &mut Client,
    turns: &[String],
    limit: Duration,
) -> Result<Vec<String>> {
    let deadline = Instant::now() + limit;
    let mut states = Vec::new();
    for turn in turns {
        loop {
            let t = client.turns_get(turn)?;
            if t.state.is_terminal() || t.state.is_fenced() {
                states.push(
                    serde_json::to_value(t.state)?
                        .as_str()
                        .unwrap_or("")
                        .to_owned(),
                );
                break;
            }
            if Instant::now() > deadline {
                bail!("turn did not finish in {limit:?}");
            }
            // Not faster: every poll is a request serve answers, CPU the
            // throughput rows would count against the turns.
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    Ok(states)
}

/// Runs the release binary in `ctx` to completion; fails unless it exits 0.
pub(crate) fn run_ok(ctx: &TestContext, bin: &Path, args: &[&str]) -> Result<lapis_e2e::Output> {
    let out = ctx.output(ctx.command_for(bin, args));
    if out.code != Some(0) {
        bail!("{args:?} exited {:?}: {}", out.code, out.stderr.trim());
    }
    Ok(out)
}
