//! Every clap type of the CLI, in one place (this directory). Command code
//! lives in `commands/`; nothing here does work. The command tree and the
//! arguments every group shares are here; each group's own arguments live
//! in a file by concept: `install` (installing and running the service),
//! `drive` (workspaces, threads, turns, journal, permissions, `ask`),
//! `config` (providers and configuration). The global flags live in
//! `global.rs`, apart from the command tree: the shell completion
//! candidates read them too. An argument names its candidates as data (a
//! `Candidates` kind, `candidates.rs`); `commands/candidates.rs` computes
//! them, so nothing here imports `commands/`. Every type is re-exported
//! here, so callers name `args::X` whatever file holds it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

mod backup;
mod candidates;
mod config;
mod contexts;
mod drive;
mod duration;
mod examples;
mod global;
mod help;
mod install;
mod threads_list;
mod tokens;
mod workspaces;

pub(crate) use backup::BackupCommand;
pub(crate) use candidates::{Candidates, provide};
pub(crate) use config::{ConfigCommand, ProvidersAddArgs, ProvidersCommand};
pub(crate) use contexts::ContextsCommand;
pub(crate) use drive::{
    ApprovalArg, AskArgs, BudgetsCommand, JournalCommand, PermissionsCommand, PromptArgs,
    ResolveAsArg, RetentionArg, ThreadsCommand, TurnsCommand,
};
pub(crate) use global::GlobalArgs;
pub(crate) use help::command;
pub(crate) use install::{
    CompletionsArgs, GcArgs, InstallArgs, LogsArgs, ReleasesCommand, RollbackArgs, ServeArgs,
    StartArg, StopArgs, TokenCommand, UninstallArgs, UpdateArgs,
};
pub(crate) use threads_list::ThreadsListArgs;
pub(crate) use tokens::{TokensAddArgs, TokensCommand};
pub(crate) use workspaces::WorkspacesCommand;

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
    /// Add, list and revoke application tokens (each sees its own application only).
    #[command(subcommand)]
    Tokens(TokensCommand),
    /// Generate shell completions.
    Completions(CompletionsArgs),
    /// Run the controller service (in the foreground, or detached with --background).
    Serve(ServeArgs),
    /// Stop a controller started with `serve --background`.
    Stop(StopArgs),
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
    /// Back up, list and restore the controller database.
    #[command(subcommand)]
    Backup(BackupCommand),
    /// List and answer agents' pending permission requests.
    #[command(subcommand)]
    Permissions(PermissionsCommand),
    /// Show token and cost budgets and what was spent; reset one.
    #[command(subcommand)]
    Budgets(BudgetsCommand),
    /// A full-screen live view: workspaces, turns, the selected turn's reply
    /// as it streams, permission requests answered with a key, cancel and
    /// resolve (needs a terminal).
    Watch,
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
    /// Name remote controllers (ssh://…) and choose the one client commands use.
    #[command(subcommand)]
    Contexts(ContextsCommand),
    /// Relay stdin/stdout to this host's controller, authenticated with this
    /// host's own token (what `--host ssh://` runs on the remote host).
    #[command(name = "dial-stdio")]
    DialStdio,
}

/// `--home DIR`: the controller home, for the commands that create or open
/// it. Other commands find it through the configuration. Without the flag
/// the environment (`LAPIS_AI_CONTROLLER_HOME`, or its deprecated old name
/// `LAPIS_AI_CONTROLLER_WORKSPACE`) is read by
/// `commands::paths::resolve`, as for every command, so the flag wins.
///
/// `--workspace DIR` was its name until the product's core noun became the
/// agent workspace: kept, hidden, for one release, and warned about
/// ([`Command::deprecated_home_flag`]).
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct HomeArg {
    /// Controller home holding the database, lock and socket [default:
    /// $LAPIS_AI_CONTROLLER_HOME, the config's `controllerHome`, else
    /// ~/.lapis/ai-controller].
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
    /// The old name of `--home` (deprecated; removed in the next release).
    #[arg(long, value_name = "DIR", hide = true, conflicts_with = "home")]
    workspace: Option<PathBuf>,
}

impl HomeArg {
    /// The controller home given on the command line, by either name.
    pub(crate) fn dir(&self) -> Option<&std::path::Path> {
        self.home.as_deref().or(self.workspace.as_deref())
    }
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

/// `--json` and `--wide`: what the list commands take.
#[derive(Debug, Args, Clone, Copy, Default)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    pub(crate) out: JsonArg,
    /// Show whole ids and cells, however wide (the table fits the terminal otherwise).
    #[arg(long)]
    pub(crate) wide: bool,
}

/// A lone `--json` flag.
#[derive(Debug, Args, Clone, Copy, Default)]
pub(crate) struct JsonArg {
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

impl Command {
    /// Whether the controller home was given by its old name
    /// (`--workspace`), which `main` warns about on stderr.
    pub(crate) fn deprecated_home_flag(&self) -> bool {
        let home = match self {
            Command::Install(a) => &a.home,
            Command::Uninstall(a) => &a.home,
            Command::Serve(a) => &a.home,
            Command::Stop(a) => &a.home,
            _ => return false,
        };
        home.workspace.is_some()
    }

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
            Command::Tokens(TokensCommand::Add(a)) => a.out.json,
            Command::Tokens(TokensCommand::List(a) | TokensCommand::Revoke { out: a, .. }) => {
                a.json
            }
            Command::Workspaces(
                WorkspacesCommand::Add { out, .. } | WorkspacesCommand::Remove { out, .. },
            ) => out.json,
            Command::Workspaces(WorkspacesCommand::List(a)) => a.out.json,
            Command::Threads(ThreadsCommand::Create { out, .. })
            | Command::Threads(ThreadsCommand::Configure { out, .. })
            | Command::Threads(ThreadsCommand::Show { out, .. })
            | Command::Threads(ThreadsCommand::Delete { out, .. })
            | Command::Threads(ThreadsCommand::Export { out, .. })
            | Command::Threads(ThreadsCommand::Import { out, .. }) => out.json,
            Command::Threads(ThreadsCommand::List(a)) => a.list.out.json,
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
            Command::Backup(
                BackupCommand::Create { out }
                | BackupCommand::List { out }
                | BackupCommand::Restore { out, .. },
            ) => out.json,
            Command::Permissions(
                PermissionsCommand::List { out, .. } | PermissionsCommand::Respond { out, .. },
            ) => out.json,
            Command::Budgets(BudgetsCommand::Show { out } | BudgetsCommand::Reset { out, .. }) => {
                out.json
            }
            Command::Ask(a) => a.json,
            Command::Contexts(ContextsCommand::List(a)) => a.json,
            Command::Contexts(
                ContextsCommand::Add { .. }
                | ContextsCommand::Use { .. }
                | ContextsCommand::Remove { .. },
            ) => false,
            Command::Providers(ProvidersCommand::List(a)) => a.out.json,
            Command::Providers(ProvidersCommand::Check { out, .. }) => out.json,
            Command::Config(ConfigCommand::Show(a) | ConfigCommand::Validate(a)) => a.json,
            Command::Providers(ProvidersCommand::Add(_) | ProvidersCommand::Remove { .. })
            | Command::Config(ConfigCommand::Path | ConfigCommand::Schema) => false,
            Command::Completions(_)
            | Command::Serve(_)
            | Command::Stop(_)
            | Command::Logs(_)
            | Command::Watch
            | Command::AcpEcho
            | Command::McpBridge { .. }
            | Command::DialStdio => false,
        }
    }
}
