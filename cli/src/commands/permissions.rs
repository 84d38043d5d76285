//! `permissions list|respond`, and answering requests while a turn is
//! watched: inline on a terminal, otherwise by printing the exact
//! `permissions respond` commands on stderr and waiting on.
//!
//! What must stay true: an answer is always one of the option ids the agent
//! offered (the server checks it too), and `--allow`/`--reject` pick an
//! option only when exactly one of that kind is offered.

use std::io::{self, BufRead, IsTerminal, Write};

use lapis_protocol::client::Client;
use lapis_protocol::params::PermissionsRespond;
use lapis_protocol::time::format_ms;
use lapis_protocol::{PendingRequest, PermissionOption};
use serde_json::json;

use crate::args::{GlobalArgs, PermissionsCommand};
use crate::exit::{CliError, CliResult};

use super::connect::{client_error, connect};
use super::follow::{Halt, Printer};

pub(super) fn run(global: &GlobalArgs, command: PermissionsCommand) -> CliResult {
    let mut client = connect(global)?;
    match command {
        PermissionsCommand::List { thread, turn, out } => {
            let requests = client
                .permissions_list(thread.as_deref(), turn.as_deref())
                .map_err(client_error)?;
            if out.json {
                crate::output::json(&json!({ "requests": requests }))?;
            } else if requests.is_empty() {
                crate::output::line("no pending permission requests")?;
            } else {
                for r in &requests {
                    crate::output::line(format!(
                        "{}\t{}\t{}\tuntil {}",
                        r.turn_id,
                        r.id,
                        title(r),
                        format_ms(r.deadline)
                    ))?;
                    for o in &r.options {
                        crate::output::line(format!("  {}\t{}\t{}", o.id, o.name, o.kind))?;
                    }
                }
            }
        }
        PermissionsCommand::Respond {
            turn,
            request,
            option,
            allow,
            reject,
            cmd,
            out,
        } => {
            let option = match (option, allow, reject) {
                (Some(o), false, false) => o,
                (None, allow, reject) if allow != reject => {
                    let pending = find(&mut client, &turn, &request)?;
                    pick(&pending, allow)?.id.clone()
                }
                _ => {
                    return Err(CliError::failure(
                        "invalid_request",
                        anyhow::anyhow!("give exactly one of OPTION, --allow or --reject"),
                    ));
                }
            };
            let command_id = super::command_id::given_or_fresh(cmd.command_id)?;
            client
                .permissions_respond_with(&PermissionsRespond {
                    turn_id: turn.clone(),
                    request_id: request.clone(),
                    option_id: option.clone(),
                    command_id: Some(command_id),
                })
                .map_err(client_error)?;
            if out.json {
                crate::output::json(&json!({
                    "accepted": true, "turnId": turn, "requestId": request, "optionId": option
                }))?;
            } else {
                crate::output::line(format!("answered {request} of {turn} with {option}"))?;
            }
        }
    }
    Ok(())
}

/// The pending request, or a clear error.
fn find(client: &mut Client, turn: &str, request: &str) -> Result<PendingRequest, CliError> {
    client
        .permissions_list(None, Some(turn))
        .map_err(client_error)?
        .into_iter()
        .find(|r| r.id == request)
        .ok_or_else(|| {
            CliError::failure(
                "not_found",
                anyhow::anyhow!(
                    "no pending permission request `{request}` for turn `{turn}` \
                     (see `lapis-ai-controller permissions list`)"
                ),
            )
        })
}

/// The one allow (or reject) option, or an error listing what is offered.
fn pick(request: &PendingRequest, allow: bool) -> Result<&PermissionOption, CliError> {
    let (flag, matching): (&str, Vec<&PermissionOption>) = if allow {
        (
            "--allow",
            request.options.iter().filter(|o| o.is_allow()).collect(),
        )
    } else {
        (
            "--reject",
            request.options.iter().filter(|o| o.is_reject()).collect(),
        )
    };
    if let [one] = matching.as_slice() {
        return Ok(one);
    }
    let offered: Vec<String> = request
        .options
        .iter()
        .map(|o| format!("{} ({}, {})", o.id, o.name, o.kind))
        .collect();
    Err(CliError::failure(
        "invalid_request",
        anyhow::anyhow!(
            "{flag} needs exactly one {} option, but request `{}` offers {}: {}; name the OPTION instead",
            if allow { "allow" } else { "reject" },
            request.id,
            matching.len(),
            offered.join(", ")
        ),
    ))
}

fn title(r: &PendingRequest) -> String {
    let title = r.tool_call.title.as_deref().unwrap_or("tool call");
    match r.tool_call.kind.as_deref() {
        Some(kind) => format!("{title} [{kind}]"),
        None => title.to_owned(),
    }
}

/// Answers permission requests of a watched turn.
pub(super) struct Prompter {
    /// Ask on the terminal (stdin and stderr are terminals).
    interactive: bool,
    /// Global options to repeat in the printed commands, so they reach the
    /// same instance (`--config`, `--instance`).
    prefix: String,
}

impl Prompter {
    /// Decides once whether requests are answered inline.
    pub(super) fn new(global: &GlobalArgs) -> Prompter {
        let mut prefix = String::from("lapis-ai-controller");
        if let Some(config) = &global.config {
            prefix.push_str(&format!(" --config {}", quote(&config.to_string_lossy())));
        }
        if let Some(instance) = &global.instance {
            prefix.push_str(&format!(" --instance {}", quote(instance)));
        }
        Prompter {
            interactive: io::stdin().is_terminal() && io::stderr().is_terminal(),
            prefix,
        }
    }

    /// Handles request `request` of `turn`; `false` when it is not (or not
    /// yet) pending: the engine journals the request just before it
    /// registers it, so a caller that saw the event asks again until the
    /// request shows up or a `permission_decided` event settles it. With
    /// `--json` the request is also written as an NDJSON `permission` line.
    pub(super) fn ask(
        &mut self,
        client: &mut Client,
        turn: &str,
        request: &str,
        printer: Option<&mut Printer>,
    ) -> Result<bool, Halt> {
        let Some(pending) = client
            .permissions_list(None, Some(turn))
            .map_err(client_error)?
            .into_iter()
            .find(|r| r.id == request)
        else {
            return Ok(false);
        };
        if let Some(p) = printer
            && p.is_json()
        {
            p.record("permission", &pending)?;
        }
        let mut err = io::stderr().lock();
        let _ = writeln!(
            err,
            "permission requested by turn {turn}: {} (answer before {})",
            title(&pending),
            format_ms(pending.deadline)
        );
        if self.interactive {
            for (i, o) in pending.options.iter().enumerate() {
                let _ = writeln!(err, "  {}) {} [{}]", i + 1, o.name, o.kind);
            }
            drop(err);
            if let Some(choice) = self.choose(&pending)? {
                match client.permissions_respond(turn, &pending.id, &choice) {
                    Ok(()) => eprintln!("answered with {choice}"),
                    Err(e) => eprintln!("the answer was not taken: {e}"),
                }
                return Ok(true);
            }
            err = io::stderr().lock();
        }
        let _ = writeln!(err, "waiting for an answer; answer with one of:");
        for o in &pending.options {
            let _ = writeln!(
                err,
                "  {} permissions respond {} {} {}    # {} [{}]",
                self.prefix,
                quote(turn),
                quote(&pending.id),
                quote(&o.id),
                o.name,
                o.kind
            );
        }
        Ok(true)
    }

    /// Reads a numbered choice from the terminal; `None` at end of input.
    fn choose(&mut self, pending: &PendingRequest) -> Result<Option<String>, Halt> {
        let n = pending.options.len();
        let stdin = io::stdin();
        loop {
            eprint!("answer [1-{n}]: ");
            let _ = io::stderr().flush();
            let mut line = String::new();
            if stdin.lock().read_line(&mut line).map_err(CliError::from)? == 0 {
                self.interactive = false;
                eprintln!();
                return Ok(None);
            }
            match line.trim().parse::<usize>() {
                Ok(i) if (1..=n).contains(&i) => {
                    return Ok(Some(pending.options[i - 1].id.clone()));
                }
                _ => eprintln!("type a number from 1 to {n}"),
            }
        }
    }
}

/// Quotes a word for a POSIX shell when it needs it.
fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.:/=@%+,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
