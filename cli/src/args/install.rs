//! The arguments of installing and running the controller: `install`,
//! `uninstall`, `releases`, `rollback`, `update`, `token`, `completions`,
//! `serve`, `logs`. Declarations only; `commands/` does the work.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use clap_complete::engine::ArgValueCandidates;

use super::candidates::Candidates;

use super::duration::parse_wait;
use super::{HomeArg, JsonArg};

#[derive(Debug, Args)]
pub(crate) struct LogsArgs {
    /// Keep printing new log lines as they arrive.
    #[arg(long, short = 'f')]
    pub(crate) follow: bool,
    /// How many recent lines to show first.
    #[arg(short = 'n', long = "lines", value_name = "N", default_value_t = 100)]
    pub(crate) lines: usize,
}

#[derive(Debug, Args)]
pub(crate) struct InstallArgs {
    #[command(flatten)]
    pub(crate) home: HomeArg,
    /// Launcher path [default: ~/.local/bin/lapis-ai-controller].
    #[arg(long, value_name = "PATH")]
    pub(crate) install_path: Option<PathBuf>,
    /// Do not write or start the user service.
    #[arg(long)]
    pub(crate) no_service: bool,
    /// How to start the controller: `service` (the user service manager)
    /// or `background` (the same, and where no service manager answers,
    /// `serve --background`: pid and log in the controller home).
    #[arg(long, value_enum, value_name = "HOW", default_value_t = StartArg::Service, conflicts_with = "no_service")]
    pub(crate) start: StartArg,
    /// Replace a launcher path this installer did not create.
    #[arg(long)]
    pub(crate) force: bool,
    /// Install from a release archive (path or URL) instead of this executable.
    #[arg(long, value_name = "ARCHIVE")]
    pub(crate) from: Option<String>,
    /// Expected SHA-256 of the archive given with --from.
    #[arg(
        long,
        value_name = "HEX",
        requires = "from",
        conflicts_with = "checksums"
    )]
    pub(crate) sha256: Option<String>,
    /// SHA256SUMS file (path or URL) listing the archive given with --from.
    #[arg(long, value_name = "FILE", requires = "from")]
    pub(crate) checksums: Option<String>,
    /// How long to wait for the service to report ready (seconds or a
    /// duration: 90s, 2m).
    #[arg(long, value_name = "DURATION", default_value_t = 60, value_parser = parse_wait)]
    pub(crate) ready_timeout: u64,
    #[command(flatten)]
    pub(crate) out: JsonArg,
}

#[derive(Debug, Args)]
pub(crate) struct UninstallArgs {
    #[command(flatten)]
    pub(crate) home: HomeArg,
    /// Launcher path [default: ~/.local/bin/lapis-ai-controller].
    #[arg(long, value_name = "PATH")]
    pub(crate) install_path: Option<PathBuf>,
    /// Also remove the configuration (with its tokens) and the controller home.
    #[arg(long)]
    pub(crate) purge: bool,
    /// Delete without asking; --purge without a terminal needs it.
    #[arg(long, short = 'y', requires = "purge")]
    pub(crate) yes: bool,
    #[command(flatten)]
    pub(crate) out: JsonArg,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ReleasesCommand {
    /// List snapshots: active, previous, install time, running users.
    List(JsonArg),
    /// Remove old snapshots (never the active, previous or running ones).
    Gc(GcArgs),
}

#[derive(Debug, Args)]
pub(crate) struct GcArgs {
    /// Keep this many most recent snapshots besides the protected ones.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub(crate) keep: usize,
    #[command(flatten)]
    pub(crate) out: JsonArg,
}

#[derive(Debug, Args)]
pub(crate) struct RollbackArgs {
    /// Snapshot digest (or unique prefix) to activate [default: previous].
    #[arg(long, value_name = "DIGEST", add = ArgValueCandidates::new(Candidates::SnapshotDigests))]
    pub(crate) to: Option<String>,
    /// Do not restart the installed user service; print the command instead.
    #[arg(long)]
    pub(crate) no_restart: bool,
    /// Launcher path [default: ~/.local/bin/lapis-ai-controller].
    #[arg(long, value_name = "PATH")]
    pub(crate) install_path: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) out: JsonArg,
}

#[derive(Debug, Args)]
pub(crate) struct UpdateArgs {
    /// Install this version (needed for a downgrade).
    #[arg(long = "version", value_name = "V")]
    pub(crate) version: Option<String>,
    /// Only report whether an update is available.
    #[arg(long)]
    pub(crate) check: bool,
    /// Launcher path [default: ~/.local/bin/lapis-ai-controller].
    #[arg(long, value_name = "PATH")]
    pub(crate) install_path: Option<PathBuf>,
    /// Do not restart the user service after installing.
    #[arg(long)]
    pub(crate) no_service: bool,
    /// How long to wait for the service to report ready (seconds or a
    /// duration: 90s, 2m).
    #[arg(long, value_name = "DURATION", default_value_t = 60, value_parser = parse_wait)]
    pub(crate) ready_timeout: u64,
    #[command(flatten)]
    pub(crate) out: JsonArg,
}

#[derive(Debug, Subcommand)]
pub(crate) enum TokenCommand {
    /// Print the bootstrap token from the configuration.
    Show(JsonArg),
}

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// Shell to generate completions for.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) home: HomeArg,
    /// Managed mode: read one startup line on stdin, then speak the protocol
    /// over stdin/stdout.
    #[arg(long)]
    pub(crate) stdio: bool,
    /// Detach: run the controller in the background without a service
    /// manager (pid and log file in the controller home); exits 0 once it
    /// answers `status`. `stop` ends it.
    #[arg(long, conflicts_with = "stdio")]
    pub(crate) background: bool,
    /// Log to this file, size-capped and rotated (`serve --background`
    /// passes its `serve.log`; stdout and stderr must be the same file).
    #[arg(long, value_name = "PATH", hide = true, conflicts_with = "stdio")]
    pub(crate) log_file: Option<PathBuf>,
}

/// `install --start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StartArg {
    /// The user service manager (systemd or launchd); exit 3 without one.
    Service,
    /// The service manager, else `serve --background`.
    Background,
}

/// `stop`.
#[derive(Debug, Args)]
pub(crate) struct StopArgs {
    #[command(flatten)]
    pub(crate) home: HomeArg,
}
