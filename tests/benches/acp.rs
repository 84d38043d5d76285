//! Provider benchmarks (harness = false; prints medians). Needs the release
//! CLI for the `echo` agent:
//!
//! ```sh
//! cargo build --release -p lapis-ai-controller && cargo bench -p lapis-e2e --bench acp
//! ```
//!
//! - `floor`: the echo agent driven by a minimal blocking ACP exchange
//!   (spawn, initialize, session/new, prompt, close, wait): the agent's time.
//! - `runner`: the same turn through `run_turn` with in-memory hooks.
//! - `engine`: submit → completed through the store and engine, one and eight
//!   workspaces (throughput), and per-turn overhead = engine − floor.
//! - `journal`: one turn streaming 100,000 chunks, runner-only and engine.
//!
//! `LAPIS_BENCH_DIR=/dev/shm` puts the store on tmpfs, where fsync costs
//! nothing: the difference to a disk run is the price of durability.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lapis_e2e::TestContext;
use lapis_service::acp::{
    CommandLookup, HookError, PermissionAnswer, PermissionRequest, ProviderSpec, RunnerLimits,
    TurnHooks, TurnOutcome, TurnRequest, cancel_channel, run_turn,
};
use lapis_service::engine::{Engine, EngineConfig};
use lapis_service::{
    Actor, ApprovalPolicy, NewThread, Retention, Store, StoreOptions, SubmitTurn, TurnState,
};
use serde_json::json;

const PROMPT: &str = "benchmark prompt: echo me back in a few chunks";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// One raw ACP exchange with the echo agent, no controller at all.
fn floor_turn(bin: &std::path::Path, cwd: &std::path::Path) {
    let mut child = Command::new(bin)
        .arg("acp-echo")
        .env_clear()
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut call = |id: u64, method: &str, params: serde_json::Value| {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{msg}").unwrap();
        loop {
            line.clear();
            out.read_line(&mut line).unwrap();
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    call(0, "initialize", json!({"protocolVersion": 1}));
    let s = call(1, "session/new", json!({"cwd": cwd, "mcpServers": []}));
    let sid = s["result"]["sessionId"].clone();
    call(
        2,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": PROMPT}]}),
    );
    drop(stdin);
    child.wait().unwrap();
}

#[derive(Debug, Default)]
struct Counting(std::sync::atomic::AtomicU64);

impl TurnHooks for Counting {
    async fn before_dispatch(&self, _session_id: &str) -> Result<(), HookError> {
        Ok(())
    }
    async fn event(&self, _e: lapis_protocol::Payload) -> Result<(), HookError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
    async fn ask(&self, _r: PermissionRequest) -> PermissionAnswer {
        PermissionAnswer::Cancelled
    }
}

fn request(spec: ProviderSpec, cwd: &std::path::Path) -> TurnRequest {
    TurnRequest {
        spec,
        workspace: cwd.to_path_buf(),
        prompt: PROMPT.into(),
        approval: ApprovalPolicy::Ask,
        restricted: false,
        limits: RunnerLimits::default(),
        lookup: CommandLookup::default(),
        registry: None,
        resume: None,
        keep_alive: false,
        continuation: None,
        context: Vec::new(),
        mcp: Vec::new(),
    }
}

async fn runner_turn(spec: &ProviderSpec, cwd: &std::path::Path) -> u64 {
    let hooks = Arc::new(Counting::default());
    let (_h, signal) = cancel_channel();
    let outcome = run_turn(request(spec.clone(), cwd), hooks.clone(), signal).await;
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    hooks.0.load(std::sync::atomic::Ordering::Relaxed)
}

struct Rig {
    _dir: tempfile::TempDir,
    store: Store,
    threads: Vec<String>,
    handle: lapis_service::engine::EngineHandle,
}

async fn rig(workspaces: usize, provider: &str, specs: BTreeMap<String, ProviderSpec>) -> Rig {
    // LAPIS_BENCH_DIR=/dev/shm puts the store on tmpfs (fsync is free there):
    // the difference to the default shows what durable commits cost.
    let dir = match std::env::var_os("LAPIS_BENCH_DIR") {
        Some(base) => tempfile::tempdir_in(base).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let mut opts = StoreOptions::new(dir.path().join("home"));
    opts.queue_capacity = 100_000;
    if let Some(ms) = std::env::var("LAPIS_BENCH_DEFERRED_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        opts.deferred_linger = Duration::from_millis(ms);
    }
    let store = Store::open(opts).unwrap();
    let config = EngineConfig::new(specs).with_builtin_echo(TestContext::bin());
    let engine = Engine::new(store.clone(), config);
    let handle = engine.start();
    let actor = Actor::new("owner", "bench");
    let mut threads = Vec::new();
    for w in 0..workspaces {
        let path = dir.path().join(format!("ws{w}"));
        std::fs::create_dir_all(&path).unwrap();
        store.add_workspace(&format!("ws{w}"), &path).await.unwrap();
        let t = NewThread {
            command_id: None,
            workspace_id: format!("ws{w}"),
            provider: provider.into(),
            approval: ApprovalPolicy::Ask,
            restricted: false,
            retention: Retention::Full,
            mcp_servers: Vec::new(),
            ports: Default::default(),
            thread_id: None,
            permission_timeout_seconds: None,
            budget: None,
        };
        threads.push(store.create_thread(&actor, t).await.unwrap().value.id);
    }
    Rig {
        _dir: dir,
        store,
        threads,
        handle,
    }
}

/// Submits `per_ws` turns to every workspace at once; returns the wall time
/// until all are completed.
async fn engine_batch(rig: &Rig, per_ws: usize, tag: &str) -> Duration {
    let actor = Actor::new("owner", "bench");
    let mut events = rig.store.subscribe();
    let started = Instant::now();
    let mut last = Vec::new();
    for i in 0..per_ws {
        for (w, thread) in rig.threads.iter().enumerate() {
            let input = SubmitTurn {
                command_id: format!("{tag}-{w}-{i}"),
                thread_id: thread.clone(),
                prompt: PROMPT.into(),
                continues: None,
                max_turn_seconds: None,
            };
            let turn = rig.store.submit_turn(&actor, input).await.unwrap().value.id;
            if i + 1 == per_ws {
                last.push(turn);
            }
        }
    }
    // Follow committed turn-state events rather than polling, so the
    // harness does not compete with the engine for the CPU; a lagged
    // subscriber falls back to reading the turns.
    let mut waiting: std::collections::HashSet<String> = last.into_iter().collect();
    while !waiting.is_empty() {
        match tokio::time::timeout(Duration::from_millis(200), events.recv()).await {
            Ok(Ok(e)) => {
                if e.kind == lapis_service::EventKind::TurnState
                    && let Some(turn) = &e.turn_id
                    && waiting.contains(turn)
                {
                    let to = match e.body() {
                        Some(lapis_protocol::Payload::TurnState(change)) => {
                            Some(change.to.as_str())
                        }
                        _ => None,
                    };
                    match to {
                        Some("completed") => {
                            waiting.remove(turn);
                        }
                        Some(s) if !matches!(s, "preparing" | "dispatched" | "running") => {
                            panic!("turn ended {s}")
                        }
                        _ => {}
                    }
                }
            }
            // Lagged, or quiet for a while: resubscribe first, then read the
            // turns, so no completion can fall between the two.
            _ => {
                events = events.resubscribe();
                let mut done = Vec::new();
                for turn in &waiting {
                    let t = rig.store.get_turn(turn).await.unwrap();
                    if t.state.is_terminal() || t.state.is_fenced() {
                        assert_eq!(t.state, TurnState::Completed, "{:?}", t.outcome);
                        done.push(turn.clone());
                    }
                }
                for d in done {
                    waiting.remove(&d);
                }
            }
        }
    }
    started.elapsed()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bin = TestContext::bin();
    let cwd = tempfile::tempdir().unwrap();
    let echo = ProviderSpec::builtin_echo(bin.clone());
    let runs = 200;

    // LAPIS_BENCH_ONLY=engine runs the engine rows alone (commits per turn).
    let only_engine = std::env::var("LAPIS_BENCH_ONLY").is_ok_and(|v| v == "engine");
    let runs = if only_engine { 5 } else { runs };
    let floor: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            floor_turn(&bin, cwd.path());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let floor = median(floor);
    println!("floor   echo turn, raw ACP exchange          median {floor:.3} ms");

    let runner: Vec<f64> = rt.block_on(async {
        let mut v = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            runner_turn(&echo, cwd.path()).await;
            v.push(t.elapsed().as_secs_f64() * 1e3);
        }
        v
    });
    let runner = median(runner);
    println!(
        "runner  echo turn, in-memory hooks           median {runner:.3} ms  (runner overhead {:.3} ms)",
        runner - floor
    );

    for ws in [1usize, 8] {
        let per_ws = 400 / ws;
        let (rates, per_turn): (Vec<f64>, Vec<f64>) = rt.block_on(async {
            let rig = rig(ws, "echo", BTreeMap::new()).await;
            let mut rates = Vec::new();
            let mut per_turn = Vec::new();
            let commits_before = rig.store.commit_count();
            for round in 0..5 {
                let d = engine_batch(&rig, per_ws, &format!("r{round}")).await;
                let n = (per_ws * ws) as f64;
                rates.push(n / d.as_secs_f64());
                per_turn.push(d.as_secs_f64() * 1e3 / per_ws as f64);
            }
            let commits = rig.store.commit_count() - commits_before;
            println!(
                "engine  {ws} workspace(s): {:.1} store commits per turn",
                commits as f64 / (5 * per_ws * ws) as f64
            );
            rig.handle.shutdown().await;
            (rates, per_turn)
        });
        let rate = median(rates);
        let per = median(per_turn);
        if ws == 1 {
            println!(
                "engine  echo, 1 workspace  ({} turns x5)    median {rate:.1} turns/s, {per:.3} ms/turn, controller overhead {:.3} ms/turn",
                per_ws,
                per - floor
            );
        } else {
            println!(
                "engine  echo, {ws} workspaces ({} turns x5)    median {rate:.1} turns/s",
                per_ws * ws
            );
        }
    }

    if only_engine {
        return;
    }
    let fixture = ProviderSpec::from_json(
        "chunks",
        &json!({"command": env!("CARGO_BIN_EXE_fixture-agent"), "args": ["--chunks", "100000"]}),
    )
    .unwrap();
    let runner_chunks: Vec<f64> = rt.block_on(async {
        let mut v = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let n = runner_turn(&fixture, cwd.path()).await;
            assert!(n >= 100_000);
            v.push(100_000.0 / t.elapsed().as_secs_f64());
        }
        v
    });
    println!(
        "journal 100,000 chunks, runner only          median {:.0} events/s",
        median(runner_chunks)
    );
    let engine_chunks: Vec<f64> = rt.block_on(async {
        let mut specs = BTreeMap::new();
        specs.insert("chunks".to_string(), fixture.clone());
        let rig = rig(1, "chunks", specs).await;
        let mut v = Vec::new();
        for round in 0..3 {
            let d = engine_batch(&rig, 1, &format!("c{round}")).await;
            v.push(100_000.0 / d.as_secs_f64());
        }
        rig.handle.shutdown().await;
        v
    });
    println!(
        "journal 100,000 chunks, engine + store       median {:.0} events/s (durable, group commit)",
        median(engine_chunks)
    );
}
