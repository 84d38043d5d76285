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
//! and never print a secret. The candidates themselves are in
//! `candidates.rs`.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::CommandFactory;
use clap_complete::CompleteEnv;
use clap_complete::engine::ArgValueCandidates;
use clap_complete::env::Shells;

use crate::args::{Cli, CompletionsArgs};
use crate::exit::{CliError, CliResult};

/// The environment variable that turns a run into a completion request. Not
/// clap's generic `COMPLETE`, so an unrelated variable cannot hijack a run.
pub(crate) const COMPLETE_VAR: &str = "LAPIS_AI_CONTROLLER_COMPLETE";

const BIN: &str = "lapis-ai-controller";

/// Answers a completion request and exits when [`COMPLETE_VAR`] is set;
/// returns at once otherwise. Runs before anything writes to stdout.
pub(crate) fn complete_env() {
    crate::args::provide(super::candidates::of);
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
    // `--instance`'s candidates are attached here, not on `GlobalArgs`: the
    // candidate functions read `GlobalArgs`, so naming them there would make
    // the two files import each other. A global argument changed on the root
    // before the command is built reaches every subcommand.
    let cmd = Cli::command().mut_arg("instance", |a| {
        a.add(ArgValueCandidates::new(super::candidates::instance_names))
    });
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
