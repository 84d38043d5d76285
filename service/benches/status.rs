//! `cargo bench -p lapis-service --bench status`: requests per second for
//! `status` over one persistent connection and over 32 concurrent
//! connections, against an in-process server on a real Unix socket.
//!
//! With `LAPIS_BIN=/path/to/lapis-ai-controller` it also measures the whole
//! process: the median wall time of `status --json` against a running
//! `serve`, next to the floor, `version --json` (process start alone).
//! Prints medians; no thresholds.

// Bench and test code starts its own processes (the counted-spawn rule of
// service/clippy.toml is for the library).
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lapis_protocol::client::{Client, Credential};
use lapis_protocol::config::{Config, ServerLimits, TokenSpec};
use lapis_service::server::{Listener, ServeOptions, ServerIdentity, Serves, bind, prepare};
use tokio::sync::watch;

const SECRET: &str = "lapis_00000000000000000000000000000000000000000000000000000000000000e6";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn config(home: &Path) -> Config {
    Config {
        schema: 1,
        instance: "default".into(),
        controller_home: home.to_owned(),
        tokens: vec![TokenSpec {
            name: "owner".into(),
            principal: "owner".into(),
            secret: SECRET.into(),
            scopes: None,
            applications: None,
            workspaces: None,
            providers: None,
        }],
        providers: Default::default(),
        workspaces: Default::default(),
        workspace_roots: None,
        default_provider: None,
        server: ServerLimits::default(),
        notify: None,
        telemetry: None,
        budgets: Vec::new(),
        worktrees: None,
        history: None,
    }
}

fn token() -> Credential {
    Credential::Token {
        token: SECRET.into(),
        application: "bench".into(),
    }
}

fn one_connection(socket: &Path, calls: usize) -> f64 {
    let mut c = Client::open(socket, token()).unwrap();
    let start = Instant::now();
    for _ in 0..calls {
        c.status().unwrap();
    }
    calls as f64 / start.elapsed().as_secs_f64()
}

fn concurrent(socket: &Path, conns: usize, calls_each: usize) -> f64 {
    let clients: Vec<Client> = (0..conns)
        .map(|_| Client::open(socket, token()).unwrap())
        .collect();
    let barrier = Arc::new(std::sync::Barrier::new(conns + 1));
    let handles: Vec<_> = clients
        .into_iter()
        .map(|mut c| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..calls_each {
                    c.status().unwrap();
                }
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    (conns * calls_each) as f64 / start.elapsed().as_secs_f64()
}

fn in_process() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (stop, stop_rx) = watch::channel(false);
    let socket = home.join("controller.sock");
    let (prepared, task) = runtime.block_on(async {
        let build = lapis_release::BuildIdentity {
            version: "bench".into(),
            commit: "bench".into(),
            date: "bench".into(),
            target: "bench".into(),
        };
        let options = ServeOptions::new(
            config(&home),
            home.clone(),
            ServerIdentity::new(build, None),
            false,
        );
        let prepared = prepare(&options).await.unwrap();
        let listener = bind(&socket, &prepared.store).unwrap();
        let task = tokio::spawn(
            Listener {
                listener,
                max_connections: 256,
                ctx: prepared.ctx.clone(),
                serves: Serves::Everyone,
                shutdown: stop_rx,
                drain: Duration::from_secs(5),
            }
            .run(),
        );
        (prepared, task)
    });
    one_connection(&socket, 2000); // warm-up
    let single: Vec<f64> = (0..5).map(|_| one_connection(&socket, 20_000)).collect();
    let multi: Vec<f64> = (0..5).map(|_| concurrent(&socket, 32, 1000)).collect();
    println!(
        "status, 1 persistent connection:  median {:>9.0} req/s  (5 runs x 20000)",
        median(single)
    );
    println!(
        "status, 32 concurrent connections: median {:>9.0} req/s  (5 runs x 32 x 1000)",
        median(multi)
    );
    let _ = stop.send(true);
    runtime.block_on(async {
        task.await.unwrap();
        let store = prepared.store.clone();
        drop(prepared);
        store.close().await;
    });
}

fn run_ms(bin: &Path, home: &Path, args: &[&str]) -> f64 {
    let start = Instant::now();
    let status = Command::new(bin)
        .args(args)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env_remove("LAPIS_AI_CONTROLLER_WORKSPACE")
        .env_remove("LAPIS_AI_CONTROLLER_HOME")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    assert!(status.success(), "{args:?} failed");
    ms
}

fn whole_process(bin: PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let cfg_dir = home.join(".config/lapis-ai-controller");
    std::fs::create_dir_all(&cfg_dir).unwrap();
    let cfg = serde_json::to_vec(&config(&home.join(".lapis/ai-controller"))).unwrap();
    std::fs::write(cfg_dir.join("config.json"), cfg).unwrap();
    let mut server = Command::new(&bin)
        .arg("serve")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("LAPIS_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = home.join(".lapis/ai-controller/controller.sock");
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        std::thread::sleep(Duration::from_millis(10));
    }
    for _ in 0..5 {
        run_ms(&bin, home, &["status", "--json"]);
        run_ms(&bin, home, &["version", "--json"]);
    }
    let mut status = Vec::new();
    let mut version = Vec::new();
    for _ in 0..100 {
        status.push(run_ms(&bin, home, &["status", "--json"]));
        version.push(run_ms(&bin, home, &["version", "--json"]));
    }
    let (s, v) = (median(status), median(version));
    println!("status --json (whole process):  median {s:.2} ms  (100 runs)");
    println!("version --json (floor):         median {v:.2} ms  (100 runs)");
    println!("ratio status/version:           {:.2}x", s / v);
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    let _ = server.wait();
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and
    // then this only checks that it builds.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    in_process();
    if let Some(bin) = std::env::var_os("LAPIS_BIN") {
        whole_process(PathBuf::from(bin));
    } else {
        println!("(set LAPIS_BIN to a built lapis-ai-controller for the whole-process figures)");
    }
}
