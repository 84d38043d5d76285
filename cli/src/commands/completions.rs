//! Shell completion: `completions SHELL` prints a registration script, and the
//! shell calls the binary back (with [`COMPLETE_VAR`] set) for every TAB.
//!
//! Why the dynamic engine for every shell: clap_complete's static bash script
//! never completes past the first word when the binary name has a hyphen (its
//! dispatch loop and case arms escape the name differently, clap-rs/clap#6421
//! and #6529), and a static script cannot know thread, turn or workspace ids.
//! The dynamic engine asks the real parser instead, so hidden commands
//! (`acp-echo`) stay hidden and ids come from the running service.
//!
//! What must stay true: completion callbacks never print anything but
//! candidates, never fail loudly (an unreachable service just offers nothing)
//! and never print a secret.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::CommandFactory;
use clap_complete::CompleteEnv;
use clap_complete::engine::CompletionCandidate;
use clap_complete::env::Shells;

use crate::args::{Cli, CompletionsArgs, GlobalArgs};
use crate::exit::{CliError, CliResult};

/// The environment variable that turns a run into a completion request. Not
/// clap's generic `COMPLETE`, so an unrelated variable cannot hijack a run.
pub(crate) const COMPLETE_VAR: &str = "LAPIS_AI_CONTROLLER_COMPLETE";

const BIN: &str = "lapis-ai-controller";

/// Answers a completion request and exits when [`COMPLETE_VAR`] is set;
/// returns at once otherwise. Runs before anything writes to stdout.
pub(crate) fn complete_env() {
    CompleteEnv::with_factory(completion_command)
        .var(COMPLETE_VAR)
        .bin(BIN)
        .complete();
}

/// The command tree completion walks: the real one, except that hidden
/// subcommands get a name no typed word can be a prefix of. clap's engine
/// offers a hidden command once the typed prefix matches nothing visible
/// (`acp<TAB>`); internal commands must never be offered at all.
fn completion_command() -> clap::Command {
    let cmd = Cli::command();
    let hidden: Vec<String> = cmd
        .get_subcommands()
        .filter(|c| c.is_hide_set())
        .map(|c| c.get_name().to_owned())
        .collect();
    hidden.into_iter().fold(cmd, |cmd, name| {
        cmd.mut_subcommand(&name, |c| {
            // Leaked once per completion process (clap names are 'static).
            let unreachable: &'static str = format!("\u{1}{name}").leak();
            c.name(unreachable)
        })
    })
}

/// Prints the registration script for `args.shell`. The script calls back the
/// program as it was invoked here (a bare name is looked up on `PATH` at TAB
/// time, so the launcher keeps working across updates).
pub(crate) fn run(args: CompletionsArgs) -> CliResult {
    let name = args.shell.to_string();
    let shells = Shells::builtins();
    let shell = shells.completer(&name).ok_or_else(|| {
        CliError::failure(
            "unsupported_shell",
            anyhow::anyhow!("no completion support for shell `{name}`"),
        )
    })?;
    let completer = completer_path();
    let mut buf = Vec::new();
    shell.write_registration(COMPLETE_VAR, BIN, BIN, &completer, &mut buf)?;
    crate::output::line(String::from_utf8_lossy(&buf).trim())?;
    Ok(())
}

/// `argv[0]` as the shell should call it: bare names stay bare (found on
/// `PATH`), relative paths become absolute.
fn completer_path() -> String {
    let argv0 = std::env::args_os()
        .next()
        .unwrap_or_else(|| OsString::from(BIN));
    let path = PathBuf::from(&argv0);
    if path.components().count() > 1
        && path.is_relative()
        && let Ok(cwd) = std::env::current_dir()
    {
        return cwd.join(path).to_string_lossy().into_owned();
    }
    path.to_string_lossy().into_owned()
}

/// `--config` and `--instance` from the command line being completed (the
/// words after `--` in the callback), so candidates come from the instance the
/// user is typing about.
fn typed_global() -> GlobalArgs {
    let words: Vec<String> = std::env::args().skip_while(|a| a != "--").skip(1).collect();
    let mut global = GlobalArgs::default();
    let mut iter = words.iter().peekable();
    while let Some(word) = iter.next() {
        for (flag, slot) in [("--config", 0), ("--instance", 1)] {
            let value = if word == flag {
                iter.peek().map(|v| v.to_string())
            } else {
                word.strip_prefix(&format!("{flag}=")).map(str::to_owned)
            };
            if let Some(value) = value {
                match slot {
                    0 => global.config = Some(PathBuf::from(value)),
                    _ => global.instance = Some(value),
                }
            }
        }
    }
    global
}

/// Runs `f` against the service; any failure means no candidates.
fn from_service<T>(
    f: impl FnOnce(&mut lapis_protocol::client::Client) -> Option<Vec<T>>,
    candidate: impl Fn(T) -> CompletionCandidate,
) -> Vec<CompletionCandidate> {
    let Ok(mut client) = super::connect::connect(&typed_global()) else {
        return Vec::new();
    };
    f(&mut client)
        .unwrap_or_default()
        .into_iter()
        .map(candidate)
        .collect()
}

/// Thread ids, with workspace and provider as help.
pub(crate) fn thread_ids() -> Vec<CompletionCandidate> {
    from_service(
        |c| c.threads_list().ok(),
        |t| {
            CompletionCandidate::new(t.id)
                .help(Some(format!("{} · {}", t.workspace_id, t.provider).into()))
        },
    )
}

/// Turn ids, with their state as help.
pub(crate) fn turn_ids() -> Vec<CompletionCandidate> {
    from_service(
        |c| c.turns_list(None).ok(),
        |t| CompletionCandidate::new(t.id).help(Some(t.state.as_str().to_owned().into())),
    )
}

/// Registered workspace ids, with their directory as help.
pub(crate) fn workspace_ids() -> Vec<CompletionCandidate> {
    from_service(
        |c| c.workspaces_list().ok(),
        |w| CompletionCandidate::new(w.id).help(Some(w.path.into())),
    )
}

/// Provider names from the configuration (no service needed) plus the
/// built-in `echo`.
pub(crate) fn provider_names() -> Vec<CompletionCandidate> {
    let mut names = vec![lapis_protocol::config::ECHO_PROVIDER.to_owned()];
    if let Ok(target) = super::connect::target(&typed_global(), None) {
        names.extend(target.config.providers.into_keys());
    }
    names.sort();
    names.dedup();
    names.into_iter().map(CompletionCandidate::new).collect()
}
