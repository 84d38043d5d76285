//! Every clap type of the CLI, in one place. Command code lives in
//! `commands/`; nothing here does work. The global flags live in
//! `args/global.rs`, apart from the command tree, because the shell
//! completion candidates the tree names need them too (a file of its own
//! keeps the two from importing each other).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::engine::ArgValueCandidates;

use crate::commands::candidates::{provider_names, thread_ids, turn_ids, workspace_ids};

mod global;

pub(crate) use global::GlobalArgs;

/// Local controller that runs coding-agent turns durably, one per workspace.
#[derive(Debug, Parser)]
#[command(name = "lapis-ai-controller", version, about)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: GlobalArgs,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
    /// Show the service log (the user journal, or the launchd log file).
    Logs(LogsArgs),
    /// Check the installation, service, config and providers (exit 1 if a check fails).
    Doctor(JsonArg),
    /// Register, list and remove agent workspaces.
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
    /// List and answer agents' pending permission requests.
    #[command(subcommand)]
    Permissions(PermissionsCommand),
    /// Ask an agent in a directory: register it, continue its last thread,
    /// stream the reply and answer permissions inline.
    Ask(AskArgs),
    /// Add, remove, list and check agent providers (built-in catalogue).
    #[command(subcommand)]
    Providers(ProvidersCommand),
    /// Show, validate and describe the configuration, or make the service reload it.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Built-in deterministic ACP agent (the `echo` provider).
    #[command(name = "acp-echo", hide = true)]
    AcpEcho,
    /// The MCP bridge agent sessions reach application tools through
    /// (started by the agent from its `mcpServers`; ticket from the environment).
    #[command(name = "mcp-bridge", hide = true)]
    McpBridge {
        /// The controller socket to connect back to.
        #[arg(long, value_name = "PATH")]
        socket: PathBuf,
    },
}

/// `--workspace DIR`: the controller home, for the commands that create or
/// open it. Other commands find it through the configuration.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct HomeArg {
    /// Controller home holding the database, lock and socket
    /// [default: ~/.lapis/ai-controller].
    #[arg(long, value_name = "DIR", env = "LAPIS_AI_CONTROLLER_WORKSPACE")]
    pub(crate) workspace: Option<PathBuf>,
}

/// `--command-id ID` of a mutating command.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct CommandIdArg {
    /// Idempotency key: the same command repeated with the same id returns
    /// its first answer instead of running twice [default: a fresh id,
    /// printed on stderr before the request is sent].
    #[arg(long, value_name = "ID")]
    pub(crate) command_id: Option<String>,
}

/// A lone `--json` flag.
#[derive(Debug, Args, Clone, Copy, Default)]
pub(crate) struct JsonArg {
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

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
    /// Seconds to wait for the service to report ready.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
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
    #[arg(long, value_name = "DIGEST")]
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
    /// Seconds to wait for the service to report ready.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
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
}

#[derive(Debug, Subcommand)]
pub(crate) enum WorkspacesCommand {
    /// Register a project directory under an id.
    Add {
        /// Workspace id.
        id: String,
        /// Project directory.
        dir: PathBuf,
        #[command(flatten)]
        cmd: CommandIdArg,
        #[command(flatten)]
        out: JsonArg,
    },
    /// List registered workspaces.
    List(JsonArg),
    /// Unregister a workspace added at run time
    ///
    /// Its threads and journal stay readable but take no new turns; adding
    /// the same id for the same directory brings it back. Refused while a
    /// turn is queued, running or fenced there, and for a workspace the
    /// configuration declares.
    Remove {
        /// Workspace id.
        #[arg(add = ArgValueCandidates::new(workspace_ids))]
        id: String,
        #[command(flatten)]
        out: JsonArg,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ApprovalArg {
    Ask,
    AllowAll,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum RetentionArg {
    Full,
    MetadataOnly,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ThreadsCommand {
    /// Open a thread on a workspace; prints its id.
    Create {
        /// Agent workspace id (from `workspaces list`). Positional, because
        /// `--workspace` always means the controller home.
        #[arg(value_name = "WORKSPACE", add = ArgValueCandidates::new(workspace_ids))]
        workspace: String,
        /// Provider name from the configuration.
        #[arg(long, default_value = "echo", add = ArgValueCandidates::new(provider_names))]
        provider: String,
        /// Approval policy for the agent's permission requests.
        #[arg(long, value_enum, default_value = "ask")]
        approval: ApprovalArg,
        /// Restricted thread: never auto-approves.
        #[arg(long)]
        restricted: bool,
        /// What the journal keeps of the thread's content.
        #[arg(long, value_enum, default_value = "full")]
        retention: RetentionArg,
        #[command(flatten)]
        cmd: CommandIdArg,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Change a thread's provider, approval, restricted flag or retention
    /// for its later turns. Optimistic: refused (`conflict`) when the
    /// thread's version is not EXPECTED or a turn of it is queued or running.
    Configure {
        /// Thread id.
        #[arg(add = ArgValueCandidates::new(thread_ids))]
        thread: String,
        /// The version you last saw (`threads show`).
        #[arg(long, value_name = "EXPECTED")]
        expected_version: u64,
        /// New provider.
        #[arg(long, add = ArgValueCandidates::new(provider_names))]
        provider: Option<String>,
        /// New approval policy.
        #[arg(long, value_enum)]
        approval: Option<ApprovalArg>,
        /// New restricted flag.
        #[arg(long, value_name = "BOOL")]
        restricted: Option<bool>,
        /// New retention (applies to events written from now on).
        #[arg(long, value_enum)]
        retention: Option<RetentionArg>,
        #[command(flatten)]
        cmd: CommandIdArg,
        #[command(flatten)]
        out: JsonArg,
    },
    /// List threads.
    List(JsonArg),
    /// Show one thread with its recent activity.
    Show {
        /// Thread id.
        #[arg(add = ArgValueCandidates::new(thread_ids))]
        thread: String,
        #[command(flatten)]
        out: JsonArg,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ResolveAsArg {
    Failed,
    Cancelled,
}

#[derive(Debug, Subcommand)]
pub(crate) enum TurnsCommand {
    /// Submit a prompt as a new turn; prints the turn id (with --wait the
    /// reply, with --follow the reply as it streams; exit 1 when the turn
    /// ends other than completed).
    Submit {
        /// Thread id.
        #[arg(add = ArgValueCandidates::new(thread_ids))]
        thread: String,
        #[command(flatten)]
        prompt: PromptArgs,
        #[command(flatten)]
        cmd: CommandIdArg,
        /// Wait for the turn to end and print its reply.
        #[arg(long, conflicts_with = "follow")]
        wait: bool,
        /// Stream the turn's reply and activity until it ends (NDJSON with --json).
        #[arg(long)]
        follow: bool,
        /// Do not show the agent's thoughts while following.
        #[arg(long)]
        no_thoughts: bool,
        /// Let the turn run at most DURATION (`90s`, `10m`, `2h`; bare
        /// seconds): then the service cancels it (`deadline_exceeded`).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        timeout: Option<u64>,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Continue a settled turn (completed, failed or cancelled) with new
    /// instructions: a linked turn in its thread, under the thread's current
    /// configuration. Never cancels, releases a fence, resends the earlier
    /// prompt or reruns a tool. Prints the new turn id (--wait/--follow as
    /// for submit).
    Continue {
        /// The turn to continue.
        turn: String,
        #[command(flatten)]
        prompt: PromptArgs,
        #[command(flatten)]
        cmd: CommandIdArg,
        /// Wait for the turn to end and print its reply.
        #[arg(long, conflicts_with = "follow")]
        wait: bool,
        /// Stream the turn's reply and activity until it ends (NDJSON with --json).
        #[arg(long)]
        follow: bool,
        /// Do not show the agent's thoughts while following.
        #[arg(long)]
        no_thoughts: bool,
        /// Let the turn run at most DURATION (`90s`, `10m`, `2h`; bare
        /// seconds): then the service cancels it (`deadline_exceeded`).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        timeout: Option<u64>,
        #[command(flatten)]
        out: JsonArg,
    },
    /// List turns.
    List {
        /// Only turns of this thread.
        #[arg(long, add = ArgValueCandidates::new(thread_ids))]
        thread: Option<String>,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Show one turn, by id or by the command id of the submit that made it.
    Show {
        /// Turn id.
        #[arg(
            add = ArgValueCandidates::new(turn_ids),
            required_unless_present = "command_id",
            conflicts_with = "command_id"
        )]
        turn: Option<String>,
        /// The command id of your `turns submit` (finds the turn of a lost
        /// answer without resending the prompt).
        #[arg(long, value_name = "ID")]
        command_id: Option<String>,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Ask the agent to stop a turn; a fenced turn is resolved as cancelled.
    Cancel {
        /// Turn id.
        #[arg(add = ArgValueCandidates::new(turn_ids))]
        turn: String,
        #[command(flatten)]
        cmd: CommandIdArg,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Record the owner's resolution of a turn whose outcome is unknown.
    Resolve {
        /// Turn id.
        #[arg(add = ArgValueCandidates::new(turn_ids))]
        turn: String,
        /// The outcome to record.
        #[arg(long = "as", value_enum)]
        resolution: ResolveAsArg,
        /// Confirm the agent is no longer running this turn (required).
        #[arg(long, required = true)]
        confirm_stopped: bool,
        #[command(flatten)]
        cmd: CommandIdArg,
        #[command(flatten)]
        out: JsonArg,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum JournalCommand {
    /// Print the last journal events, optionally of one thread, optionally
    /// following (NDJSON with --json --follow).
    Tail {
        /// Thread id [default: every thread of the owner].
        #[arg(add = ArgValueCandidates::new(thread_ids))]
        thread: Option<String>,
        /// Print the last N events [default: 20].
        #[arg(
            short = 'n',
            long = "lines",
            value_name = "N",
            conflicts_with = "since"
        )]
        lines: Option<usize>,
        /// Print every event after this cursor (threadSeq with THREAD, seq without).
        #[arg(long, value_name = "SEQ")]
        since: Option<u64>,
        /// Keep printing new events.
        #[arg(long)]
        follow: bool,
        /// Do not show the agent's thoughts.
        #[arg(long)]
        no_thoughts: bool,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Check the journal's hash chain in the database file (read-only; the
    /// service may be running or stopped). Fails naming the first bad event.
    Verify {
        #[command(flatten)]
        out: JsonArg,
    },
    /// Accept the journal as it is after restoring controller.db from a
    /// backup on purpose: check its chain and anchor it anew (serve must be
    /// stopped).
    Reanchor {
        #[command(flatten)]
        out: JsonArg,
    },
}

/// Where a prompt comes from: `--prompt TEXT`, `--prompt -` (stdin) or
/// `--prompt-file PATH`.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub(crate) struct PromptArgs {
    /// Prompt text, or `-` to read it from stdin.
    #[arg(long, value_name = "TEXT")]
    pub(crate) prompt: Option<String>,
    /// Read the prompt from a file.
    #[arg(long, value_name = "PATH")]
    pub(crate) prompt_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum PermissionsCommand {
    /// List pending permission requests with their options.
    List {
        /// Only requests of this thread.
        #[arg(long)]
        thread: Option<String>,
        /// Only requests of this turn.
        #[arg(long)]
        turn: Option<String>,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Answer a pending request with one of its option ids, or by kind
    /// (--allow, --allow-always, --reject, --reject-always).
    #[command(group(clap::ArgGroup::new("answer").multiple(false)))]
    Respond {
        /// Turn id.
        turn: String,
        /// Request id.
        request: String,
        /// Option id (see `permissions list`).
        #[arg(
            group = "answer",
            required_unless_present_any = ["allow", "allow_always", "reject", "reject_always"]
        )]
        option: Option<String>,
        /// Choose the `allow_once` option.
        #[arg(long, group = "answer")]
        allow: bool,
        /// Choose the `allow_always` option.
        #[arg(long, group = "answer")]
        allow_always: bool,
        /// Choose the `reject_once` option.
        #[arg(long, group = "answer")]
        reject: bool,
        /// Choose the `reject_always` option.
        #[arg(long, group = "answer")]
        reject_always: bool,
        #[command(flatten)]
        cmd: CommandIdArg,
        #[command(flatten)]
        out: JsonArg,
    },
}

#[derive(Debug, Args)]
pub(crate) struct AskArgs {
    /// The prompt [default: read from stdin; `-` reads stdin too].
    pub(crate) prompt: Option<String>,
    /// Project directory the agent works in [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// Provider name from the configuration [default: the config's
    /// `defaultProvider`, else `echo`].
    #[arg(long, value_name = "NAME", add = ArgValueCandidates::new(provider_names))]
    pub(crate) provider: Option<String>,
    /// Answer every permission request of this turn with its `allow_once`
    /// option (else `allow_always`), printing each answer.
    #[arg(long, conflicts_with = "deny_all")]
    pub(crate) approve_all: bool,
    /// Answer every permission request of this turn with its `reject_once`
    /// option (else `reject_always`), printing each answer.
    #[arg(long)]
    pub(crate) deny_all: bool,
    /// Start a new thread instead of continuing the directory's last one.
    #[arg(long)]
    pub(crate) new: bool,
    /// Do not show the agent's thoughts.
    #[arg(long)]
    pub(crate) no_thoughts: bool,
    /// Write NDJSON (one event per line) instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Let the turn run at most DURATION (`90s`, `10m`, `2h`; bare
    /// seconds): then the service cancels it (`deadline_exceeded`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) timeout: Option<u64>,
    /// Command id of the turn's submit (see `turns submit --command-id`).
    #[command(flatten)]
    pub(crate) cmd: CommandIdArg,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ProvidersCommand {
    /// List the catalogue and the configured providers, and whether each
    /// command is found (PATH, then ~/.local/bin).
    List(JsonArg),
    /// Add a provider: a catalogue name fills command, args and allowlist.
    Add(ProvidersAddArgs),
    /// Remove a configured provider (its secrets stay in the env file).
    Remove {
        /// Provider name.
        name: String,
    },
    /// Start the agent in a scratch directory and report what it supports.
    Check {
        /// Provider name (configured, catalogue or `echo`).
        name: String,
        /// Also open a session (`session/new`): checks login and modes.
        #[arg(long)]
        session: bool,
        /// Seconds each step may take.
        #[arg(long, value_name = "SECS", default_value_t = 60)]
        timeout: u64,
        #[command(flatten)]
        out: JsonArg,
    },
}

#[derive(Debug, Args)]
pub(crate) struct ProvidersAddArgs {
    /// Provider name (a catalogue name fills the defaults).
    pub(crate) name: String,
    /// Executable: absolute path or bare name [default: the catalogue's].
    #[arg(long, value_name = "C")]
    pub(crate) command: Option<String>,
    /// Argument (repeat; replaces the catalogue's arguments).
    #[arg(long = "arg", value_name = "A", allow_hyphen_values = true)]
    pub(crate) args: Vec<String>,
    /// Environment name the agent may read from the service's environment
    /// or the env file (repeat; added to the catalogue's).
    #[arg(long = "allow-env", value_name = "NAME")]
    pub(crate) allow_env: Vec<String>,
    /// A constant, non-secret setting (a base URL, a model, a mode), stored
    /// in the provider's `env` (repeat). Keys go in --secret.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub(crate) env: Vec<String>,
    /// Do not give the agent this shell's PATH (as `env.PATH`) and the
    /// service's HOME (allowlisted), which `add` does by default.
    #[arg(long)]
    pub(crate) no_default_env: bool,
    /// Store this allowlisted variable's value in the env file; read from a
    /// hidden prompt, or one line per secret from stdin when it is not a TTY.
    #[arg(long = "secret", value_name = "NAME")]
    pub(crate) secrets: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Print the configuration file's path.
    Path,
    /// Print the effective configuration, secrets masked.
    Show(JsonArg),
    /// Check the configuration and the env file; errors name the field.
    Validate(JsonArg),
    /// Print the configuration's JSON Schema.
    Schema,
    /// Make the running service re-read its config file: providers and
    /// workspaces change for later turns; an invalid file is refused (exit 2)
    /// and the previous configuration stays in effect.
    Reload(JsonArg),
}

/// `--timeout`: `90`, `90s`, `10m`, `2h` as seconds (1 to 604800, the
/// service's bound on `maxTurnSeconds`).
pub(crate) fn parse_duration(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (e.g. 90s, 10m, 2h)"))?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(format!("`{text}`: the unit is s, m or h")),
    };
    match n.checked_mul(scale) {
        Some(secs @ 1..=604_800) => Ok(secs),
        _ => Err(format!("`{text}` is outside 1s-168h")),
    }
}

impl Command {
    /// Whether the user asked for one JSON document on stdout, so errors are
    /// reported as JSON too.
    pub(crate) fn wants_json(&self) -> bool {
        match self {
            Command::Install(a) => a.out.json,
            Command::Uninstall(a) => a.out.json,
            Command::Releases(ReleasesCommand::List(a)) => a.json,
            Command::Releases(ReleasesCommand::Gc(a)) => a.out.json,
            Command::Rollback(a) => a.out.json,
            Command::Update(a) => a.out.json,
            Command::Version(a) | Command::Status(a) | Command::Doctor(a) => a.json,
            Command::Config(ConfigCommand::Reload(a)) => a.json,
            Command::Token(TokenCommand::Show(a)) => a.json,
            Command::Workspaces(
                WorkspacesCommand::Add { out, .. } | WorkspacesCommand::Remove { out, .. },
            ) => out.json,
            Command::Workspaces(WorkspacesCommand::List(a)) => a.json,
            Command::Threads(ThreadsCommand::Create { out, .. })
            | Command::Threads(ThreadsCommand::Configure { out, .. })
            | Command::Threads(ThreadsCommand::Show { out, .. }) => out.json,
            Command::Threads(ThreadsCommand::List(a)) => a.json,
            Command::Turns(
                TurnsCommand::Submit { out, .. }
                | TurnsCommand::Continue { out, .. }
                | TurnsCommand::List { out, .. }
                | TurnsCommand::Show { out, .. }
                | TurnsCommand::Cancel { out, .. }
                | TurnsCommand::Resolve { out, .. },
            ) => out.json,
            Command::Journal(
                JournalCommand::Tail { out, .. }
                | JournalCommand::Verify { out }
                | JournalCommand::Reanchor { out },
            ) => out.json,
            Command::Permissions(
                PermissionsCommand::List { out, .. } | PermissionsCommand::Respond { out, .. },
            ) => out.json,
            Command::Ask(a) => a.json,
            Command::Providers(
                ProvidersCommand::List(a) | ProvidersCommand::Check { out: a, .. },
            ) => a.json,
            Command::Config(ConfigCommand::Show(a) | ConfigCommand::Validate(a)) => a.json,
            Command::Providers(ProvidersCommand::Add(_) | ProvidersCommand::Remove { .. })
            | Command::Config(ConfigCommand::Path | ConfigCommand::Schema) => false,
            Command::Completions(_)
            | Command::Serve(_)
            | Command::Logs(_)
            | Command::AcpEcho
            | Command::McpBridge { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn durations_take_s_m_h_or_bare_seconds_within_the_services_bound() {
        assert_eq!(parse_duration("90"), Ok(90));
        assert_eq!(parse_duration("90s"), Ok(90));
        assert_eq!(parse_duration("10m"), Ok(600));
        assert_eq!(parse_duration("2h"), Ok(7200));
        assert_eq!(parse_duration("168h"), Ok(604_800));
        for bad in ["", "0", "0s", "169h", "5d", "1.5h", "m", "-3"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
