//! `lapis-ai-controller`: parse, run, map the result to an exit class once.

mod args;
mod commands;
mod exit;
mod identity;
mod output;

use std::process::ExitCode;

use clap::Parser;

use crate::exit::{CliError, ExitClass};

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    let wants_json = cli.command.wants_json();
    match commands::run(cli) {
        Ok(()) => ExitClass::Success.into(),
        Err(err) => {
            report(&err, wants_json);
            err.class.into()
        }
    }
}

/// Prints a failure: the message with its causes on stderr, and with `--json`
/// also one error document on stdout so scripts always get JSON.
fn report(err: &CliError, wants_json: bool) {
    let mut text = format!("error: {}", err.error);
    for cause in err.error.chain().skip(1) {
        text.push_str(&format!("\n  caused by: {cause}"));
    }
    eprintln!("{text}");
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
