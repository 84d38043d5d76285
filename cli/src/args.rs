//! Every clap type of the CLI, in one place. Command code lives in
//! `commands/`; nothing here does work.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Local controller that runs coding-agent turns durably, one per workspace.
#[derive(Debug, Parser)]
#[command(name = "lapis-ai-controller", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command accepts; they select which installation is meant.
#[derive(Debug, Args, Clone, Default)]
pub struct GlobalArgs {
    /// Configuration file [default: ~/.config/lapis-ai-controller/config.json].
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Isolated instance name (its own config, home, socket and service unit).
    #[arg(long, global = true, value_name = "NAME")]
    pub instance: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Install this executable (or a release archive) as the active release.
    Install(InstallArgs),
    /// Remove the launcher, service unit and snapshots (config and data with --purge).
    Uninstall(UninstallArgs),
    /// Inspect and collect installed release snapshots.
    #[command(subcommand)]
    Releases(ReleasesCommand),
    /// Re-activate the previous (or a named) release snapshot.
    Rollback(RollbackArgs),
    /// Install a newer published release through the verified install path.
    #[command(disable_version_flag = true)]
    Update(UpdateArgs),
    /// Print version, build identity and snapshot digest.
    Version(JsonArg),
    /// Print the bootstrap token (the only command that prints a secret).
    #[command(subcommand)]
    Token(TokenCommand),
    /// Generate shell completions.
    Completions(CompletionsArgs),
    /// Run the controller service.
    Serve(ServeArgs),
    /// Report the running controller's state (exit 3 when unreachable).
    Status(JsonArg),
    /// Register and list agent workspaces.
    #[command(subcommand)]
    Workspaces(WorkspacesCommand),
    /// Create and inspect threads.
    #[command(subcommand)]
    Threads(ThreadsCommand),
    /// Submit, inspect, cancel and resolve turns.
    #[command(subcommand)]
    Turns(TurnsCommand),
    /// Read the event journal.
    #[command(subcommand)]
    Journal(JournalCommand),
    /// Built-in deterministic ACP agent (the `echo` provider).
    #[command(name = "acp-echo", hide = true)]
    AcpEcho,
}

/// `--workspace DIR`: the controller home, for the commands that create or
/// open it. Other commands find it through the configuration.
#[derive(Debug, Args, Clone, Default)]
pub struct HomeArg {
    /// Controller home holding the database, lock and socket
    /// [default: ~/.lapis/ai-controller].
    #[arg(long, value_name = "DIR", env = "LAPIS_AI_CONTROLLER_WORKSPACE")]
    pub workspace: Option<PathBuf>,
}

/// A lone `--json` flag.
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct JsonArg {
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    #[command(flatten)]
    pub home: HomeArg,
    /// Launcher path [default: ~/.local/bin/lapis-ai-controller].
    #[arg(long, value_name = "PATH")]
    pub install_path: Option<PathBuf>,
    /// Do not write or start the user service.
    #[arg(long)]
    pub no_service: bool,
    /// Replace a launcher path this installer did not create.
    #[arg(long)]
    pub force: bool,
    /// Install from a release archive (path or URL) instead of this executable.
    #[arg(long, value_name = "ARCHIVE")]
    pub from: Option<String>,
    /// Expected SHA-256 of the archive given with --from.
    #[arg(
        long,
        value_name = "HEX",
        requires = "from",
        conflicts_with = "checksums"
    )]
    pub sha256: Option<String>,
    /// SHA256SUMS file (path or URL) listing the archive given with --from.
    #[arg(long, value_name = "FILE", requires = "from")]
    pub checksums: Option<String>,
    /// Seconds to wait for the service to report ready.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub ready_timeout: u64,
    #[command(flatten)]
    pub out: JsonArg,
}

#[derive(Debug, Args)]
pub struct UninstallArgs {
    #[command(flatten)]
    pub home: HomeArg,
    /// Launcher path [default: ~/.local/bin/lapis-ai-controller].
    #[arg(long, value_name = "PATH")]
    pub install_path: Option<PathBuf>,
    /// Also remove the configuration (with its tokens) and the controller home.
    #[arg(long)]
    pub purge: bool,
    #[command(flatten)]
    pub out: JsonArg,
}

#[derive(Debug, Subcommand)]
pub enum ReleasesCommand {
    /// List snapshots: active, previous, install time, running users.
    List(JsonArg),
    /// Remove old snapshots (never the active, previous or running ones).
    Gc(GcArgs),
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Keep this many most recent snapshots besides the protected ones.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub keep: usize,
    #[command(flatten)]
    pub out: JsonArg,
}

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// Snapshot digest (or unique prefix) to activate [default: previous].
    #[arg(long, value_name = "DIGEST")]
    pub to: Option<String>,
    /// Do not restart the installed user service; print the command instead.
    #[arg(long)]
    pub no_restart: bool,
    /// Launcher path [default: ~/.local/bin/lapis-ai-controller].
    #[arg(long, value_name = "PATH")]
    pub install_path: Option<PathBuf>,
    #[command(flatten)]
    pub out: JsonArg,
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// Install this version (needed for a downgrade).
    #[arg(long = "version", value_name = "V")]
    pub version: Option<String>,
    /// Only report whether an update is available.
    #[arg(long)]
    pub check: bool,
    /// Launcher path [default: ~/.local/bin/lapis-ai-controller].
    #[arg(long, value_name = "PATH")]
    pub install_path: Option<PathBuf>,
    /// Do not restart the user service after installing.
    #[arg(long)]
    pub no_service: bool,
    /// Seconds to wait for the service to report ready.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub ready_timeout: u64,
    #[command(flatten)]
    pub out: JsonArg,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Print the bootstrap token from the configuration.
    Show(JsonArg),
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// Shell to generate completions for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub home: HomeArg,
    /// Managed mode: read one startup line on stdin, then speak the protocol
    /// over stdin/stdout.
    #[arg(long)]
    pub stdio: bool,
}

#[derive(Debug, Subcommand)]
pub enum WorkspacesCommand {
    /// Register a project directory under an id.
    Add {
        /// Workspace id.
        id: String,
        /// Project directory.
        dir: PathBuf,
        #[command(flatten)]
        out: JsonArg,
    },
    /// List registered workspaces.
    List(JsonArg),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ApprovalArg {
    Ask,
    AllowAll,
}

#[derive(Debug, Subcommand)]
pub enum ThreadsCommand {
    /// Open a thread on a workspace; prints its id.
    Create {
        /// Workspace id.
        #[arg(long)]
        workspace: String,
        /// Provider name from the configuration.
        #[arg(long, default_value = "echo")]
        provider: String,
        /// Approval policy for the agent's permission requests.
        #[arg(long, value_enum, default_value = "ask")]
        approval: ApprovalArg,
        #[command(flatten)]
        out: JsonArg,
    },
    /// List threads.
    List(JsonArg),
    /// Show one thread with its recent activity.
    Show {
        /// Thread id.
        thread: String,
        #[command(flatten)]
        out: JsonArg,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ResolveAsArg {
    Failed,
    Cancelled,
}

#[derive(Debug, Subcommand)]
pub enum TurnsCommand {
    /// Submit a prompt as a new turn; prints the turn id.
    Submit {
        /// Thread id.
        thread: String,
        /// Prompt text.
        #[arg(long)]
        prompt: String,
        /// Idempotency key [default: a fresh random id].
        #[arg(long, value_name = "ID")]
        command_id: Option<String>,
        /// Wait for the turn to reach a terminal state.
        #[arg(long)]
        wait: bool,
        /// Stream the turn's events until it ends.
        #[arg(long)]
        follow: bool,
        #[command(flatten)]
        out: JsonArg,
    },
    /// List turns.
    List {
        /// Only turns of this thread.
        #[arg(long)]
        thread: Option<String>,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Show one turn.
    Show {
        /// Turn id.
        turn: String,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Ask the agent to stop a turn.
    Cancel {
        /// Turn id.
        turn: String,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Record the owner's resolution of a turn whose outcome is unknown.
    Resolve {
        /// Turn id.
        turn: String,
        /// The outcome to record.
        #[arg(long = "as", value_enum)]
        resolution: ResolveAsArg,
        /// Confirm the agent is no longer running this turn.
        #[arg(long)]
        confirm_stopped: bool,
        #[command(flatten)]
        out: JsonArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum JournalCommand {
    /// Print journal events, optionally of one thread, optionally following.
    Tail {
        /// Thread id [default: every thread of the owner].
        thread: Option<String>,
        /// Keep printing new events.
        #[arg(long)]
        follow: bool,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Check the journal's hash chain in the database file (read-only; the
    /// service may be running or stopped). Fails naming the first bad event.
    Verify {
        #[command(flatten)]
        out: JsonArg,
    },
}

impl Command {
    /// Whether the user asked for one JSON document on stdout, so errors are
    /// reported as JSON too.
    pub fn wants_json(&self) -> bool {
        match self {
            Command::Install(a) => a.out.json,
            Command::Uninstall(a) => a.out.json,
            Command::Releases(ReleasesCommand::List(a)) => a.json,
            Command::Releases(ReleasesCommand::Gc(a)) => a.out.json,
            Command::Rollback(a) => a.out.json,
            Command::Update(a) => a.out.json,
            Command::Version(a) | Command::Status(a) => a.json,
            Command::Token(TokenCommand::Show(a)) => a.json,
            Command::Workspaces(WorkspacesCommand::Add { out, .. }) => out.json,
            Command::Workspaces(WorkspacesCommand::List(a)) => a.json,
            Command::Threads(ThreadsCommand::Create { out, .. })
            | Command::Threads(ThreadsCommand::Show { out, .. }) => out.json,
            Command::Threads(ThreadsCommand::List(a)) => a.json,
            Command::Turns(
                TurnsCommand::Submit { out, .. }
                | TurnsCommand::List { out, .. }
                | TurnsCommand::Show { out, .. }
                | TurnsCommand::Cancel { out, .. }
                | TurnsCommand::Resolve { out, .. },
            ) => out.json,
            Command::Journal(JournalCommand::Tail { out, .. } | JournalCommand::Verify { out }) => {
                out.json
            }
            Command::Completions(_) | Command::Serve(_) | Command::AcpEcho => false,
        }
    }
}
