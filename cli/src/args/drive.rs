//! The arguments of driving agents: `workspaces`, `threads`, `turns`,
//! `journal`, `permissions`, `ask`, and the `--timeout` duration they
//! share. Declarations only; `commands/` does the work.
//!
//! What must stay true: a closed vocabulary is a `ValueEnum` mirroring the
//! protocol's enum, so clap refuses a misspelling before any request.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use clap_complete::engine::ArgValueCandidates;

use super::candidates::Candidates;

use super::duration::parse_duration;
use super::{CommandIdArg, JsonArg};

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

/// `threads configure --permission-timeout`: a duration, or `provider` (the
/// thread's own timeout removed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PermissionTimeout(pub(crate) Option<u64>);

/// A thread's own budget on the command line (`threads create` and
/// `threads configure`): tokens and/or cost over the thread's life.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct BudgetArgs {
    /// The thread's own budget in tokens (`totalTokens` of its turns); a
    /// turn claimed once it is spent fails `budget_exhausted`.
    #[arg(long, value_name = "TOKENS")]
    pub(crate) budget_tokens: Option<u64>,
    /// The thread's own budget in cost (in --budget-currency).
    #[arg(long, value_name = "AMOUNT")]
    pub(crate) budget_cost: Option<f64>,
    /// The currency of --budget-cost [default: USD].
    #[arg(long, value_name = "CODE", requires = "budget_cost")]
    pub(crate) budget_currency: Option<String>,
}

impl BudgetArgs {
    /// The budget these flags give, when any is set.
    pub(crate) fn budget(&self) -> Option<lapis_protocol::config::ThreadBudget> {
        (self.budget_tokens.is_some() || self.budget_cost.is_some()).then(|| {
            lapis_protocol::config::ThreadBudget {
                tokens: self.budget_tokens,
                cost: self.budget_cost.map(lapis_protocol::usage::Amount),
                currency: self.budget_currency.clone(),
            }
        })
    }
}

fn permission_timeout(value: &str) -> Result<PermissionTimeout, String> {
    if value == "provider" {
        return Ok(PermissionTimeout(None));
    }
    parse_duration(value)
        .map(|n| PermissionTimeout(Some(n)))
        .map_err(|e| format!("{e}; or `provider`"))
}

#[derive(Debug, Subcommand)]
pub(crate) enum ThreadsCommand {
    /// Open a thread on a workspace; prints its id.
    Create {
        /// Agent workspace id (from `workspaces list`, or a unique prefix).
        #[arg(value_name = "WORKSPACE", add = ArgValueCandidates::new(Candidates::WorkspaceIds))]
        workspace: String,
        /// Provider name from the configuration.
        #[arg(long, default_value = "echo", add = ArgValueCandidates::new(Candidates::ProviderNames))]
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
        /// How long each permission request waits for an answer before it
        /// is answered by policy (seconds or a duration, 1s-168h; default:
        /// the provider's `permissionTimeoutSeconds`; a turn's deadline caps it).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        permission_timeout: Option<u64>,
        #[command(flatten)]
        budget: BudgetArgs,
        /// Run the thread in a new git worktree of WORKSPACE's repository,
        /// registered as workspace `WORKSPACE-wt-<hash of the command id>`.
        #[arg(long)]
        worktree: bool,
        #[command(flatten)]
        cmd: CommandIdArg,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Change a thread's provider, approval, restricted flag, retention,
    /// permission timeout or budget for its later turns. Optimistic: refused (`conflict`) when the
    /// thread's version is not EXPECTED or a turn of it is queued or running.
    Configure {
        /// Thread id.
        #[arg(add = ArgValueCandidates::new(Candidates::ThreadIds))]
        thread: String,
        /// The version you last saw (`threads show`).
        #[arg(long, value_name = "EXPECTED")]
        expected_version: u64,
        /// New provider.
        #[arg(long, add = ArgValueCandidates::new(Candidates::ProviderNames))]
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
        /// New permission timeout (seconds or a duration, 1s-168h), or
        /// `provider` to go back to the provider's `permissionTimeoutSeconds`.
        #[arg(long, value_name = "DURATION", value_parser = permission_timeout)]
        permission_timeout: Option<PermissionTimeout>,
        // Given, these replace the thread's whole budget.
        #[command(flatten)]
        budget: BudgetArgs,
        /// Remove the thread's own budget.
        #[arg(long, conflicts_with_all = ["budget_tokens", "budget_cost"])]
        clear_budget: bool,
        #[command(flatten)]
        cmd: CommandIdArg,
        #[command(flatten)]
        out: JsonArg,
    },
    /// List threads, newest first (every page, or one: --limit/--after)
    List(super::ThreadsListArgs),
    /// Show one thread with its recent activity.
    Show {
        /// Thread id.
        #[arg(add = ArgValueCandidates::new(Candidates::ThreadIds))]
        thread: String,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Delete a thread: its content and turns go, a content-free receipt
    /// stays in the journal
    ///
    /// Refused while a turn of it is queued or running (`thread_busy`) or
    /// its outcome is unknown (`thread_fenced`). The deleted bytes are
    /// overwritten and the database file shrinks; `journal verify` still
    /// verifies the whole chain, through the deleted range.
    Delete {
        /// Thread id.
        #[arg(add = ArgValueCandidates::new(Candidates::ThreadIds))]
        thread: String,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Export a thread as a verifiable bundle, or check one offline (--verify)
    ///
    /// The bundle is `lapis-thread-bundle/1`. Export reads the controller home's database directly and read-only (works
    /// while `serve` runs or is stopped; no token). FILE is written
    /// atomically with mode 0600 and never replaced without --force.
    /// `--verify` needs no controller: a bundle edited in any byte exits 2
    /// with `bundle_tampered` naming the byte range. Verification proves
    /// the bundle is internally consistent and unedited unless someone
    /// recomputed every hash; compare its anchor head with the source
    /// controller's `journal verify`.
    Export {
        /// Thread id (or a unique prefix of it).
        #[arg(
            required_unless_present = "verify",
            add = ArgValueCandidates::new(Candidates::ThreadIds)
        )]
        thread: Option<String>,
        /// The bundle file to write.
        #[arg(
            short = 'o',
            long,
            value_name = "FILE",
            required_unless_present = "verify"
        )]
        output: Option<PathBuf>,
        /// Replace FILE if it exists.
        #[arg(long)]
        force: bool,
        /// Verify the bundle FILE offline instead of exporting.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["thread", "output", "force"])]
        verify: Option<PathBuf>,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Import a bundle (`threads export`) as a new thread
    ///
    /// FILE is verified offline first (`bundle_tampered` naming the byte
    /// range, `bundle_unsupported` for another format); nothing is written
    /// unless it verifies. The running controller then journals its events
    /// again as a new thread (new ids, this controller's chain) whose
    /// turns are all settled, with a `thread_imported` receipt naming the
    /// source. Needs the controller running. Bundles over 512 KiB are
    /// refused (`bundle_too_large`). Each import makes a new thread.
    Import {
        /// The bundle file.
        file: PathBuf,
        /// The workspace of the new thread (default: the one registered at
        /// the bundle's workspace path; without one, `workspace_required`).
        #[arg(long, value_name = "ID", add = ArgValueCandidates::new(Candidates::WorkspaceIds))]
        workspace: Option<String>,
        /// The provider of the new thread (default: the bundle's).
        #[arg(long, value_name = "NAME")]
        provider: Option<String>,
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
        #[arg(add = ArgValueCandidates::new(Candidates::ThreadIds))]
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
        /// Let the turn run at most DURATION (`90s`, `10m`, `1h30m`; bare
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
        /// Let the turn run at most DURATION (`90s`, `10m`, `1h30m`; bare
        /// seconds): then the service cancels it (`deadline_exceeded`).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        timeout: Option<u64>,
        #[command(flatten)]
        out: JsonArg,
    },
    /// List turns.
    List {
        /// Only turns of this thread.
        #[arg(long, add = ArgValueCandidates::new(Candidates::ThreadIds))]
        thread: Option<String>,
        #[command(flatten)]
        out: JsonArg,
        /// Show whole ids and cells, however wide (the table fits the terminal otherwise).
        #[arg(long)]
        wide: bool,
    },
    /// Show one turn, by id or by the command id of the submit that made it.
    Show {
        /// Turn id.
        #[arg(
            add = ArgValueCandidates::new(Candidates::TurnIds),
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
        #[arg(add = ArgValueCandidates::new(Candidates::TurnIds))]
        turn: String,
        #[command(flatten)]
        cmd: CommandIdArg,
        #[command(flatten)]
        out: JsonArg,
    },
    /// Record the owner's resolution of a turn whose outcome is unknown.
    Resolve {
        /// Turn id.
        #[arg(add = ArgValueCandidates::new(Candidates::TurnIds))]
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
        #[arg(add = ArgValueCandidates::new(Candidates::ThreadIds))]
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
        #[arg(long, add = ArgValueCandidates::new(Candidates::ThreadIds))]
        thread: Option<String>,
        /// Only requests of this turn.
        #[arg(long, add = ArgValueCandidates::new(Candidates::TurnIds))]
        turn: Option<String>,
        #[command(flatten)]
        out: JsonArg,
        /// Show whole ids and cells, however wide (the table fits the terminal otherwise).
        #[arg(long)]
        wide: bool,
    },
    /// Answer a pending request with one of its option ids, or by kind
    /// (--allow, --allow-always, --reject, --reject-always).
    #[command(group(clap::ArgGroup::new("answer").multiple(false)))]
    Respond {
        /// Turn id.
        #[arg(add = ArgValueCandidates::new(Candidates::TurnsAsking))]
        turn: String,
        /// Request id.
        #[arg(add = ArgValueCandidates::new(Candidates::PendingRequestIds))]
        request: String,
        /// Option id (see `permissions list`).
        #[arg(
            add = ArgValueCandidates::new(Candidates::RequestOptionIds),
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
    #[arg(long, value_name = "NAME", add = ArgValueCandidates::new(Candidates::ProviderNames))]
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
    /// Let the turn run at most DURATION (`90s`, `10m`, `1h30m`; bare
    /// seconds): then the service cancels it (`deadline_exceeded`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) timeout: Option<u64>,
    /// Command id of the turn's submit (see `turns submit --command-id`).
    #[command(flatten)]
    pub(crate) cmd: CommandIdArg,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BudgetsCommand {
    /// Show each configured budget and what was spent against it.
    Show {
        #[command(flatten)]
        out: JsonArg,
    },
    /// Count a budget's spending from now (KEY as `budgets show` names it).
    Reset {
        /// The budget's key, e.g. `workspace:proj:day`.
        key: String,
        #[command(flatten)]
        out: JsonArg,
    },
}
