//! Side-by-side benchmarks of the release build:
//!
//! ```sh
//! cargo build --release
//! cargo run -p lapis-e2e --release --bin bench -- [--runs N] [--quick] [suite…]
//! ```
//!
//! Suites: `status turns warm journal startup install memory tools context watch evidence`
//! (default: all), and `scale` (issue 44 item 6: 10M events, 10k threads; run
//! only when named, it writes gigabytes and takes minutes).
//! Builds nothing: it uses `target/release/lapis-ai-controller` and
//! `target/release/fixture-agent` beside itself and says so when missing.
//! Every suite runs its figures several times and adds rows to one table
//! (median, min, max, ratio against a floor or peer measured in the same
//! run), printed as Markdown at the end with the machine it ran on.

// Visibility is a design statement: an item another crate does not use is
// `pub(crate)`, so the compiler reports what nothing uses.
#![warn(unreachable_pub)]

#[path = "../bench/mod.rs"]
mod bench;

use std::process::ExitCode;

use bench::table::Table;

const SUITES: [&str; 12] = [
    "status", "turns", "warm", "journal", "startup", "install", "memory", "tools", "context",
    "watch", "evidence", "scale",
];

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "machine: {cores} cores ({cpu}), Linux {}, load average at start: {}",
        kernel.trim(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}

fn main() -> ExitCode {
    let mut runs = 15usize;
    let mut quick = false;
    let mut suites = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).unwrap_or(runs),
            "--quick" => quick = true,
            "-h" | "--help" => {
                println!("usage: bench [--runs N] [--quick] [{}]…", SUITES.join("|"));
                return ExitCode::SUCCESS;
            }
            s if SUITES.contains(&s) => suites.push(s.to_owned()),
            other => {
                eprintln!(
                    "bench: unknown argument {other:?}; suites: {}",
                    SUITES.join(" ")
                );
                return ExitCode::from(2);
            }
        }
    }
    if suites.is_empty() {
        suites = SUITES
            .iter()
            .filter(|s| **s != "scale")
            .map(|s| s.to_string())
            .collect();
    }
    if let Err(e) = bench::rig::release_bin() {
        eprintln!("bench: {e}");
        return ExitCode::from(2);
    }
    let header = machine();
    eprintln!("{header}");
    let mut table = Table::default();
    let wants_acpx = suites.iter().any(|s| s == "status" || s == "turns");
    let acpx = if wants_acpx {
        match bench::acpx::Acpx::install() {
            Ok(a) => {
                table.note(format!("peer: acpx {} (npm, temp prefix)", a.version()));
                Some(a)
            }
            Err(why) => {
                table.note(format!("peer: acpx skipped: {why}"));
                None
            }
        }
    } else {
        None
    };
    let (turns_n, batch, chunks, sizes): (usize, usize, usize, &[usize]) = if quick {
        (10, 80, 20_000, &[0, 10_000, 100_000])
    } else {
        (30, 400, 100_000, &[0, 100_000, 1_000_000])
    };
    let mut failed = false;
    for suite in &suites {
        eprintln!("suite {suite}…");
        let result = match suite.as_str() {
            "status" => bench::status::run(&mut table, runs, acpx.as_ref()),
            "turns" => bench::turns::run(&mut table, turns_n, batch, acpx.as_ref(), false),
            "warm" => bench::turns::run(&mut table, turns_n, batch, None, true),
            "journal" => bench::journal::run(&mut table, chunks, runs.clamp(1, 5)),
            "startup" => bench::startup::run(&mut table, runs.clamp(1, 5), sizes),
            "install" => bench::install::run(&mut table, runs.clamp(1, 9)),
            "memory" => bench::memory::run(&mut table, runs.clamp(1, 3)),
            "context" => bench::context::run(&mut table, turns_n.max(40) * 4),
            "tools" => bench::tools::run(&mut table, turns_n * 10, runs.clamp(1, 5)),
            "watch" => bench::watch::run(&mut table, runs, quick),
            "evidence" => bench::evidence::run(&mut table, turns_n.max(30)),
            "scale" => {
                let sizes: &[usize] = if quick {
                    &[10_000, 100_000]
                } else {
                    &[10_000, 1_000_000, 10_000_000]
                };
                bench::scale::run(&mut table, runs.clamp(1, 5), sizes, 10_000)
            }
            _ => unreachable!("checked above"),
        };
        if let Err(e) = result {
            failed = true;
            table.note(format!("{suite}: FAILED: {e:#}"));
        }
    }
    println!("{header}");
    println!(
        "command: cargo run -p lapis-e2e --release --bin bench -- {}\n",
        std::env::args().skip(1).collect::<Vec<_>>().join(" ")
    );
    println!("{}", table.render());
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
