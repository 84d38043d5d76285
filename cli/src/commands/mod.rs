//! One handler per command; `run` is the single dispatch point.

mod acp_echo;
mod agent_stderr;
mod ask;
mod background;
mod backup;
mod budgets;
pub(crate) mod candidates;
mod command_id;
pub(crate) mod completions;
mod config;
mod config_files;
mod connect;
mod contexts;
mod dial_stdio;
mod doctor;
mod evidence;
mod fences;
mod follow;
mod ids;
mod install;
mod install_from;
mod interrupt;
mod journal;
mod live;
mod log_file;
mod logs;
mod mcp_bridge;
mod paths;
mod permissions;
mod printer;
mod prompt;
mod providers;
mod providers_add;
mod providers_check;
mod releases;
mod rollback;
mod serve;
mod status;
mod submit;
mod suggest;
mod threads;
mod threads_export;
mod threads_import;
mod token;
mod tokens;
mod turns;
mod uninstall;
mod update;
mod usage;
mod version;
mod watch;
mod workspaces;

use crate::args::{Cli, Command};
use crate::exit::CliResult;

/// Runs the parsed command line.
pub(crate) fn run(cli: Cli) -> CliResult {
    let global = cli.global;
    match cli.command {
        Command::Version(out) => version::run(&global, out),
        Command::Completions(args) => completions::run(args),
        Command::Install(mut args) => match args.from.take() {
            Some(from) => install_from::run(&global, args, &from),
            None => install::run(&global, args),
        },
        Command::Update(args) => update::run(&global, args),
        Command::Uninstall(args) => uninstall::run(&global, args),
        Command::Releases(command) => releases::run(&global, command),
        Command::Rollback(args) => rollback::run(&global, args),
        Command::Token(command) => token::run(&global, command),
        Command::Tokens(command) => tokens::run(&global, command),
        Command::Serve(args) if args.background => background::start(&global, &args),
        Command::Serve(args) => serve::run(&global, args),
        Command::Stop(args) => background::stop(&global, &args),
        Command::Status(out) => status::run(&global, out),
        Command::Config(command) => config::run(&global, command),
        Command::Logs(args) => logs::run(&global, args),
        Command::Doctor(out) => doctor::run(&global, out),
        Command::Workspaces(command) => workspaces::run(&global, command),
        Command::Threads(command) => threads::run(&global, command),
        Command::Turns(command) => turns::run(&global, command),
        Command::Journal(command) => journal::run(&global, command),
        Command::Backup(command) => backup::run(&global, command),
        Command::Permissions(command) => permissions::run(&global, command),
        Command::Budgets(command) => budgets::run(&global, command),
        Command::Ask(args) => ask::run(&global, args),
        Command::Watch => watch::run(&global),
        Command::Providers(command) => providers::run(&global, command),
        Command::AcpEcho => acp_echo::run(),
        Command::McpBridge { socket } => mcp_bridge::run(socket),
        Command::Contexts(command) => contexts::run(command),
        Command::DialStdio => dial_stdio::run(&global),
    }
}
