//! Benchmark: `install --no-service` into a fresh HOME, next to the floor
//! (`cp` + `sha256sum` + `sync` + `mv` in a shell script on the same bytes and
//! disk), and a repeated install that reuses its snapshot.
//!
//! Run (the release binary must exist first):
//!
//! ```sh
//! cargo build --release -p lapis-ai-controller
//! cargo bench -p lapis-installer --bench install
//! ```
//!
//! `LAPIS_BENCH_BIN` overrides the binary, `LAPIS_BENCH_RUNS` the number of
//! runs (default 15). Times are wall-clock times of the whole process, as a
//! user sees them; the smoke test (which the install reports in its own
//! `timings.smokeMs`) is subtracted for the "smoke excluded" figures and
//! reported on its own.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn main() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let bin = std::env::var_os("LAPIS_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target/release/lapis-ai-controller"));
    if !bin.is_file() {
        eprintln!(
            "{} is missing: run `cargo build --release -p lapis-ai-controller` first",
            bin.display()
        );
        std::process::exit(1);
    }
    let runs: usize = std::env::var("LAPIS_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(15);
    // Same disk as the build: under target/, not a tmpfs.
    let root = workspace.join("target/bench-install");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let size = std::fs::metadata(&bin).unwrap().len();
    println!(
        "binary {} ({:.1} MiB), {runs} runs each, medians",
        bin.display(),
        size as f64 / 1048576.0
    );

    let floor_script = root.join("floor.sh");
    std::fs::write(
        &floor_script,
        "set -e\n\
         mkdir -p \"$2/.staging/bin\"\n\
         cp \"$1\" \"$2/.staging/bin/lapis-ai-controller\"\n\
         sha256sum \"$2/.staging/bin/lapis-ai-controller\" > /dev/null\n\
         sync\n\
         mv \"$2/.staging\" \"$2/snapshot\"\n",
    )
    .unwrap();

    let mut fresh_total = Vec::new();
    let mut fresh_no_smoke = Vec::new();
    let mut smoke = Vec::new();
    let mut floor = Vec::new();
    let mut reuse_total = Vec::new();
    let mut reuse_no_smoke = Vec::new();
    for i in 0..runs {
        // Alternate the order so neither side always runs on a warmer cache.
        let floor_dir = root.join(format!("floor-{i}"));
        let home = root.join(format!("home-{i}"));
        let run_floor = |floor: &mut Vec<Duration>| {
            std::fs::create_dir_all(&floor_dir).unwrap();
            let started = Instant::now();
            let status = Command::new("sh")
                .arg(&floor_script)
                .arg(&bin)
                .arg(&floor_dir)
                .status()
                .unwrap();
            floor.push(started.elapsed());
            assert!(status.success());
        };
        if i % 2 == 0 {
            run_floor(&mut floor);
        }
        let (total, smoke_ms) = install(&bin, &home);
        fresh_total.push(total);
        fresh_no_smoke.push(total.saturating_sub(smoke_ms));
        smoke.push(smoke_ms);
        if i % 2 == 1 {
            run_floor(&mut floor);
        }
        let (total, smoke_ms) = install(&bin, &home);
        reuse_total.push(total);
        reuse_no_smoke.push(total.saturating_sub(smoke_ms));
    }
    let spread = |name: &str, v: &mut Vec<Duration>| {
        let mid = median(v);
        let q = |f: f64| v[((v.len() - 1) as f64 * f).round() as usize];
        println!(
            "{name}: p25 {} / median {} / p75 {}",
            ms(q(0.25)),
            ms(mid),
            ms(q(0.75))
        );
    };
    spread("install, smoke excluded", &mut fresh_no_smoke);
    spread("floor", &mut floor);
    spread("reuse, smoke excluded", &mut reuse_no_smoke);
    let m = |v: &mut Vec<Duration>| median(v);
    let (fresh, fresh_ns, floor_m) = (m(&mut fresh_total), m(&mut fresh_no_smoke), m(&mut floor));
    let (reuse, reuse_ns, smoke_m) = (m(&mut reuse_total), m(&mut reuse_no_smoke), m(&mut smoke));
    println!("| figure | median | floor | ratio |");
    println!("|---|---|---|---|");
    println!(
        "| install --no-service, fresh HOME, smoke test excluded | {} | {} | {:.2}x |",
        ms(fresh_ns),
        ms(floor_m),
        fresh_ns.as_secs_f64() / floor_m.as_secs_f64()
    );
    println!(
        "| install --no-service, fresh HOME, smoke test included | {} | {} | {:.2}x |",
        ms(fresh),
        ms(floor_m),
        fresh.as_secs_f64() / floor_m.as_secs_f64()
    );
    println!(
        "| smoke test (`version --json`, clean env) | {} | | |",
        ms(smoke_m)
    );
    println!(
        "| repeated install, snapshot reused, smoke test excluded | {} | goal 20 ms | {:.2}x of goal |",
        ms(reuse_ns),
        reuse_ns.as_secs_f64() / 0.020
    );
    println!(
        "| repeated install, snapshot reused, smoke test included | {} | goal 20 ms | {:.2}x of goal |",
        ms(reuse),
        reuse.as_secs_f64() / 0.020
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// Runs one install into `home`; returns wall time and the smoke test time
/// the install reported.
fn install(bin: &Path, home: &Path) -> (Duration, Duration) {
    std::fs::create_dir_all(home.join(".config")).unwrap();
    let started = Instant::now();
    let out = Command::new(bin)
        .args(["install", "--no-service", "--json"])
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env_remove("LAPIS_AI_CONTROLLER_WORKSPACE")
        .env_remove("LAPIS_AI_CONTROLLER_HOME")
        .env_remove("LAPIS_INSTALL_FAULT_PAUSE")
        .output()
        .unwrap();
    let wall = started.elapsed();
    assert!(
        out.status.success(),
        "install failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let smoke_ms = doc["timings"]["smokeMs"].as_f64().unwrap();
    (wall, Duration::from_secs_f64(smoke_ms / 1000.0))
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}
