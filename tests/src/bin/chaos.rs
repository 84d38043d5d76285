//! Chaos suites against the release build (not run by CI; `scripts/chaos`
//! runs them):
//!
//! ```sh
//! cargo build --release
//! cargo run -p lapis-e2e --release --bin chaos -- [--quick] [--seed N] [suite…]
//! ```
//!
//! Suites: `serve-kill` (kill -9 of serve during 500 turns), `install-kill`
//! (kill -9 of install, rollback and releases gc, 200 moments each), `load`
//! (64 clients x 100 submissions over 8 workspaces), and issue 15's hostile
//! cases: `flood` (10,000 connection attempts, 1,000 held idle, `status`
//! within 1 s), `revoke` (no event after a revoked or expired session's
//! notice), `disk-full` (a tmpfs filled mid-turn; needs root; not in the
//! default set). Each is bounded in
//! iterations and time and prints one line: iterations, faults injected,
//! violations (must be 0). Exit status 1 when any violation was found.

// Visibility is a design statement: an item another crate does not use is
// `pub(crate)`, so the compiler reports what nothing uses.
#![warn(unreachable_pub)]

#[path = "../bench/mod.rs"]
#[allow(dead_code)]
mod bench;
#[path = "../chaos/mod.rs"]
mod chaos;

use std::process::ExitCode;
use std::time::Duration;

use chaos::{Rng, Summary};

const SUITES: [&str; 6] = [
    "serve-kill",
    "install-kill",
    "load",
    "flood",
    "revoke",
    "disk-full",
];

fn main() -> ExitCode {
    let mut quick = false;
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    let mut suites = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--seed" => seed = args.next().and_then(|v| v.parse().ok()).unwrap_or(seed),
            s if SUITES.contains(&s) => suites.push(s.to_owned()),
            other => {
                eprintln!(
                    "chaos: unknown argument {other:?}; suites: {}",
                    SUITES.join(" ")
                );
                return ExitCode::from(2);
            }
        }
    }
    if suites.is_empty() {
        // `disk-full` mounts a file system: asked for by name only.
        suites = SUITES[..5].iter().map(|s| s.to_string()).collect();
    }
    if let Err(e) = bench::rig::release_bin() {
        eprintln!("chaos: {e}");
        return ExitCode::from(2);
    }
    println!(
        "chaos: seed {seed}{}",
        if quick {
            " (quick: reduced counts)"
        } else {
            ""
        }
    );
    let mut rng = Rng::new(seed);
    let limit = Duration::from_secs(if quick { 120 } else { 900 });
    let mut summaries: Vec<Summary> = Vec::new();
    let mut failed = false;
    for suite in &suites {
        let result = match suite.as_str() {
            "serve-kill" => {
                chaos::serve_kill::run(if quick { 100 } else { 500 }, 4, &mut rng, limit)
                    .map(|s| vec![s])
            }
            "install-kill" => {
                chaos::install_kill::run(if quick { 40 } else { 200 }, &mut rng, limit)
            }
            "load" => {
                let (clients, per) = if quick { (16, 25) } else { (64, 100) };
                chaos::load::run(clients, per, 1024).map(|s| vec![s])
            }
            "flood" => {
                chaos::hostile::flood(1000, if quick { 3000 } else { 10_000 }).map(|s| vec![s])
            }
            "revoke" => chaos::hostile::revoke(if quick { 4 } else { 20 }).map(|s| vec![s]),
            "disk-full" => chaos::hostile::disk_full().map(|s| vec![s]),
            _ => unreachable!("checked above"),
        };
        match result {
            Ok(list) => {
                for s in list {
                    println!("{}", s.line());
                    for v in s.violations.iter().take(10) {
                        println!("  violation: {v}");
                    }
                    failed |= !s.violations.is_empty();
                    summaries.push(s);
                }
            }
            Err(e) => {
                println!("chaos {suite}: ERROR: {e:#}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
