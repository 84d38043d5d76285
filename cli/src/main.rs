//! `lapis-ai-controller`: parse, run, map the result to an exit class once.

// Visibility is a design statement: an item another crate does not use is
// `pub(crate)`, so the compiler reports what nothing uses.
#![warn(unreachable_pub)]

mod args;
mod commands;
mod exit;
mod identity;
mod output;
mod style;
mod table;
mod terminal;

use std::process::ExitCode;

use clap::FromArgMatches;

use crate::exit::{CliError, ExitClass};

fn main() -> ExitCode {
    commands::completions::complete_env();
    let cli = match parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(err),
    };
    let wants_json = cli.command.wants_json();
    if cli.command.deprecated_home_flag() {
        eprintln!(
            "warning: `--workspace DIR` is now `--home DIR` (the controller home); the old name goes in the next release"
        );
    }
    match commands::run(cli) {
        Ok(()) => ExitClass::Success.into(),
        Err(err) => {
            report(&err, wants_json);
            err.class.into()
        }
    }
}

/// Parses the command line; `--version` says which build this is:
/// `lapis-ai-controller VERSION (COMMIT DATE TARGET)`, the identity
/// `version` prints in full.
fn parse() -> Result<args::Cli, clap::Error> {
    let b = identity::build_identity();
    let version = format!("{} ({} {} {})", b.version, b.commit, b.date, b.target);
    // clap takes a `&'static str` here; the process parses once.
    let version: &'static str = Box::leak(version.into_boxed_str());
    let matches = args::command().version(version).try_get_matches()?;
    args::Cli::from_arg_matches(&matches)
}

/// A command line clap rejected (or `--help`/`--version`, which clap reports
/// the same way). With `--json` anywhere before `--`, the failure is also the
/// usual error document on stdout, code `usage`, so a script that asked for
/// JSON gets JSON whatever went wrong; the exit class stays 2.
fn usage_error(err: clap::Error) -> ExitCode {
    if !err.use_stderr() {
        let _ = err.print();
        return ExitClass::Success.into();
    }
    let wants_json = std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json");
    let _ = err.print();
    if wants_json {
        let rendered = err.render().to_string();
        // The first paragraph, without clap's usage and hint lines.
        let message = rendered
            .split("\n\n")
            .next()
            .unwrap_or_default()
            .trim_start_matches("error: ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let doc = serde_json::json!({
            "error": { "code": "usage", "message": message, "causes": [] }
        });
        let _ = output::json(&doc);
    }
    ExitClass::Failure.into()
}

/// Prints a failure: the message with its causes on stderr, and with `--json`
/// also one error document on stdout so scripts always get JSON.
fn report(err: &CliError, wants_json: bool) {
    let mut text = format!("error: {}", err.error);
    for cause in err.error.chain().skip(1) {
        text.push_str(&format!("\n  caused by: {cause}"));
    }
    // A message may quote the agent (its error text, its stderr).
    eprintln!("{}", terminal::safe(&text));
    // Exit 1 classes already printed their result (a JSON document or an
    // NDJSON stream); a second document would break parsers.
    if wants_json && !err.class.result_printed() {
        let causes: Vec<String> = err.error.chain().skip(1).map(|c| c.to_string()).collect();
        let mut doc = serde_json::json!({
            "error": { "code": err.code, "message": err.error.to_string(), "causes": causes }
        });
        if let Some(details) = &err.details {
            doc["error"]["details"] = details.clone();
        }
        let _ = output::json(&doc);
    }
}
