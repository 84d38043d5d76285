//! `lapis-release`: builds and verifies release archives (CI and by hand).
//!
//! ```text
//! lapis-release build --binary PATH --target T --out DIR [--version V] [--commit C] [--date D]
//! lapis-release checksums DIR
//! lapis-release verify DIR
//! lapis-release check-glibc BINARY [--floor X.Y]
//! ```
//!
//! `build` stamps the identity the binary was compiled with: version
//! (`--version`, `LAPIS_BUILD_VERSION`, else this crate's version), commit
//! (`--commit`, `LAPIS_BUILD_COMMIT`, else `dev`) and date (from
//! `--date`, else `SOURCE_DATE_EPOCH`, else `dev`); `SOURCE_DATE_EPOCH` (else 0) is also every
//! entry's mtime. It then rewrites `DIR/SHA256SUMS` over every archive in DIR.
//! `check-glibc` fails when a Linux gnu binary needs a newer glibc than the
//! floor (default: the documented [`lapis_release::glibc::GLIBC_FLOOR`]);
//! `scripts/release build` runs it on every `*-linux-gnu` binary.
//! Exit status: 0 ok, 2 failure (usage errors included).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use lapis_release::glibc::{self, GLIBC_FLOOR};
use lapis_release::{BuildIdentity, Limits, build_archive, date_from_epoch, write_checksums};

#[derive(Debug, Parser)]
#[command(
    name = "lapis-release",
    version,
    about = "Build and verify lapis-ai-controller release archives"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build lapis-ai-controller-<version>-<target>.tar.gz and refresh SHA256SUMS.
    Build {
        /// The compiled lapis-ai-controller executable.
        #[arg(long, value_name = "PATH")]
        binary: PathBuf,
        /// Rust target triple the executable was compiled for.
        #[arg(long, value_name = "TRIPLE")]
        target: String,
        /// Output directory (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Version [default: LAPIS_BUILD_VERSION, else the workspace version].
        #[arg(long = "version", value_name = "V")]
        version: Option<String>,
        /// Source commit [default: LAPIS_BUILD_COMMIT, else `dev`].
        #[arg(long, value_name = "SHA")]
        commit: Option<String>,
        /// Build date `YYYY-MM-DD` [default: from SOURCE_DATE_EPOCH, else `dev`].
        #[arg(long, value_name = "DATE")]
        date: Option<String>,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Rewrite DIR/SHA256SUMS over every archive in DIR.
    Checksums {
        /// Directory holding the archives.
        dir: PathBuf,
    },
    /// Fail when a Linux gnu binary needs a newer glibc than the floor.
    CheckGlibc {
        /// The compiled executable (64-bit little-endian ELF).
        binary: PathBuf,
        /// Highest glibc version allowed [default: the documented floor].
        #[arg(long, value_name = "X.Y")]
        floor: Option<String>,
    },
    /// Re-check SHA256SUMS, every archive's contents, names and versions.
    Verify {
        /// Directory holding the archives and SHA256SUMS.
        dir: PathBuf,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("lapis-release: error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn run(command: Command) -> Result<()> {
    match command {
        Command::Build {
            binary,
            target,
            out,
            version,
            commit,
            date,
            json,
        } => {
            let epoch = source_date_epoch()?;
            let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
            let build = BuildIdentity {
                version: version
                    .or_else(|| env("LAPIS_BUILD_VERSION"))
                    .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned()),
                commit: commit
                    .or_else(|| env("LAPIS_BUILD_COMMIT"))
                    .unwrap_or_else(|| "dev".to_owned()),
                date: date
                    .unwrap_or_else(|| epoch.map_or_else(|| "dev".to_owned(), date_from_epoch)),
                target,
            };
            std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
            let mtime = epoch.unwrap_or(0).max(0) as u64;
            let built = build_archive(&binary, build, &out, mtime)?;
            write_checksums(&out)?;
            if json {
                print_json(&serde_json::json!({
                    "archive": built.path,
                    "name": built.name,
                    "sha256": built.sha256.as_str(),
                    "digest": built.manifest.digest(),
                    "build": built.manifest.build,
                }));
            } else {
                println!("{}  {}", built.sha256, built.path.display());
            }
        }
        Command::Checksums { dir } => {
            let sums = write_checksums(&dir)?;
            if sums.is_empty() {
                bail!(
                    "no lapis-ai-controller-*.tar.gz archive in {}",
                    dir.display()
                );
            }
            print!("{}", sums.to_text());
        }
        Command::CheckGlibc { binary, floor } => {
            let floor = match floor {
                Some(text) => text.parse()?,
                None => GLIBC_FLOOR,
            };
            let elf =
                std::fs::read(&binary).with_context(|| format!("reading {}", binary.display()))?;
            let needed = glibc::check_floor(&elf, floor)
                .with_context(|| format!("{} fails the glibc check", binary.display()))?;
            match needed {
                Some(v) => println!("{} needs GLIBC_{v} (floor {floor})", binary.display()),
                None => println!("{} needs no versioned glibc symbol", binary.display()),
            }
        }
        Command::Verify { dir, json } => {
            let verified = lapis_release::verify::verify_dir(&dir, &Limits::default())?;
            if json {
                let list: Vec<_> = verified
                    .iter()
                    .map(|a| {
                        serde_json::json!({
                            "name": a.name, "sha256": a.sha256.as_str(),
                            "version": a.version, "target": a.target, "digest": a.digest,
                        })
                    })
                    .collect();
                print_json(&serde_json::json!({ "verified": list }));
            } else {
                for a in &verified {
                    println!("ok  {}  {}  digest {}", a.name, a.sha256, a.digest);
                }
                println!(
                    "verified {} archive(s) in {}",
                    verified.len(),
                    dir.display()
                );
            }
        }
    }
    Ok(())
}

fn source_date_epoch() -> Result<Option<i64>> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map(Some)
            .context("SOURCE_DATE_EPOCH must be an integer number of seconds"),
        _ => Ok(None),
    }
}

fn print_json(value: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).expect("JSON values serialise")
    );
}
