//! `permissions list|respond`, and answering requests while a turn is
//! watched: inline on a terminal, otherwise by printing the exact
//! `permissions respond` commands on stderr and waiting on.
//!
//! What must stay true: an answer is always one of the option ids the agent
//! offered (the server checks it too), and each flag picks an option of one
//! ACP kind (`--allow` `allow_once`, `--allow-always` `allow_always`,
//! `--reject` `reject_once`, `--reject-always` `reject_always`) only when
//! exactly one option of that kind is offered; otherwise the error names
//! the flags that do apply.

use std::io::{self, BufRead, IsTerminal, Write};

use lapis_protocol::client::Client;
use lapis_protocol::params::PermissionsRespond;
use lapis_protocol::time::format_ms;
use lapis_protocol::{PendingRequest, PermissionOption};
use serde_json::json;

use crate::args::{GlobalArgs, PermissionsCommand};
use crate::exit::{CliError, CliResult};
use crate::table::{Cell, Table};
use crate::terminal::safe;

use super::connect::{client_error, connect};
use super::printer::{Halt, Printer};

pub(super) fn run(global: &GlobalArgs, command: PermissionsCommand) -> CliResult {
    let mut client = connect(global)?;
    match command {
        PermissionsCommand::List {
            thread,
            turn,
            out,
            wide,
        } => {
            let thread = super::ids::optional(&mut client, thread, super::ids::thread)?;
            let turn = super::ids::optional(&mut client, turn, super::ids::turn)?;
            let requests = client
                .permissions_list(thread.as_deref(), turn.as_deref())
                .map_err(client_error)?;
            if out.json {
                crate::output::json(&json!({ "requests": requests }))?;
            } else if requests.is_empty() {
                eprintln!("no pending permission requests");
            } else {
                // Titles and option names are the agent's: the table makes
                // every cell terminal-safe. Every workspace's requests are
                // listed: each names its own.
                let mut table = Table::new(&[
                    "TURN",
                    "REQUEST",
                    "WORKSPACE",
                    "TITLE",
                    "OPTIONS",
                    "DEADLINE",
                ])
                .wide(wide);
                for r in &requests {
                    let options: Vec<String> = r
                        .options
                        .iter()
                        .map(|o| format!("{} [{}] {}", o.id, o.kind, o.name))
                        .collect();
                    table.row(vec![
                        Cell::Id(r.turn_id.clone()),
                        (&r.id).into(),
                        (&r.workspace_id).into(),
                        title(r).into(),
                        options.join("; ").into(),
                        Cell::Time(Some(r.deadline)),
                    ]);
                }
                table.print()?;
            }
        }
        PermissionsCommand::Respond {
            turn,
            request,
            option,
            allow,
            allow_always,
            reject,
            reject_always,
            cmd,
            out,
        } => {
            let turn = super::ids::turn(&mut client, &turn)?;
            let request = super::ids::request(&mut client, &turn, &request)?;
            let verb = [
                (allow, Verb::Allow),
                (allow_always, Verb::AllowAlways),
                (reject, Verb::Reject),
                (reject_always, Verb::RejectAlways),
            ]
            .into_iter()
            .find_map(|(given, verb)| given.then_some(verb));
            // clap requires exactly one of OPTION and the four flags.
            let option = match (option, verb) {
                (Some(o), _) => o,
                (None, Some(verb)) => {
                    let pending = find(&mut client, &turn, &request)?;
                    pick(&pending, verb)?.id.clone()
                }
                (None, None) => unreachable!("clap requires OPTION or a flag"),
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
                crate::output::line(safe(&format!("answered {request} of {turn} with {option}")))?;
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

/// The four answer flags of `permissions respond`, one per ACP option kind
/// (also the answers `watch`'s keys give).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verb {
    Allow,
    AllowAlways,
    Reject,
    RejectAlways,
}

impl Verb {
    const ALL: [Verb; 4] = [
        Verb::Allow,
        Verb::AllowAlways,
        Verb::Reject,
        Verb::RejectAlways,
    ];

    /// The ACP `PermissionOptionKind` this flag answers.
    pub(super) fn kind(self) -> &'static str {
        match self {
            Verb::Allow => "allow_once",
            Verb::AllowAlways => "allow_always",
            Verb::Reject => "reject_once",
            Verb::RejectAlways => "reject_always",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Verb::Allow => "--allow",
            Verb::AllowAlways => "--allow-always",
            Verb::Reject => "--reject",
            Verb::RejectAlways => "--reject-always",
        }
    }
}

/// The flags that pick exactly one option of `request`, e.g. `--allow,
/// --reject-always`.
fn applicable(request: &PendingRequest) -> Vec<&'static str> {
    Verb::ALL
        .into_iter()
        .filter(|v| {
            request
                .options
                .iter()
                .filter(|o| o.kind == v.kind())
                .count()
                == 1
        })
        .map(Verb::flag)
        .collect()
}

/// The one option of `verb`'s kind, or an error saying which flags (or
/// option ids) do apply to this request.
fn pick(request: &PendingRequest, verb: Verb) -> Result<&PermissionOption, CliError> {
    let matching: Vec<&PermissionOption> = request
        .options
        .iter()
        .filter(|o| o.kind == verb.kind())
        .collect();
    if let [one] = matching.as_slice() {
        return Ok(one);
    }
    let offered: Vec<String> = request
        .options
        .iter()
        .map(|o| format!("{} ({}, {})", o.id, o.name, o.kind))
        .collect();
    let flags = applicable(request);
    let instead = if flags.is_empty() {
        "name the OPTION instead".to_owned()
    } else {
        format!("use {} or name the OPTION instead", flags.join(" or "))
    };
    Err(CliError::failure(
        "invalid_request",
        anyhow::anyhow!(
            "{} answers the one `{}` option, but request `{}` offers {} of them; {instead} (offered: {})",
            verb.flag(),
            verb.kind(),
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

/// How a watched turn's permission requests are answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answers {
    /// By a person: inline on a terminal, else with the printed commands.
    Ask,
    /// `ask --approve-all`: the `allow_once` option, else `allow_always`.
    ApproveAll,
    /// `ask --deny-all`: the `reject_once` option, else `reject_always`.
    DenyAll,
}

impl Answers {
    /// The option this policy picks among `request`'s, by kind preference;
    /// `None` for [`Answers::Ask`] or when no option of those kinds exists.
    fn pick(self, request: &PendingRequest) -> Option<&PermissionOption> {
        let kinds: &[Verb] = match self {
            Answers::Ask => &[],
            Answers::ApproveAll => &[Verb::Allow, Verb::AllowAlways],
            Answers::DenyAll => &[Verb::Reject, Verb::RejectAlways],
        };
        kinds
            .iter()
            .find_map(|v| request.options.iter().find(|o| o.kind == v.kind()))
    }
}

/// Answers permission requests of a watched turn.
pub(super) struct Prompter {
    /// Ask on the terminal (stdin and stderr are terminals).
    interactive: bool,
    /// Global options to repeat in the printed commands, so they reach the
    /// same instance (`--config`, `--instance`).
    prefix: String,
    /// Who answers.
    answers: Answers,
}

impl Prompter {
    /// Decides once whether requests are answered inline.
    pub(super) fn new(global: &GlobalArgs, answers: Answers) -> Prompter {
        Prompter {
            interactive: io::stdin().is_terminal() && io::stderr().is_terminal(),
            prefix: command_prefix(global),
            answers,
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
        // Every line quotes the agent (title, option names): terminal-safe.
        let mut err = io::stderr().lock();
        let _ = writeln!(
            err,
            "{}",
            safe(&format!(
                "permission requested by turn {turn}: {} (answer before {})",
                title(&pending),
                format_ms(pending.deadline)
            ))
        );
        if let Some(choice) = self.answers.pick(&pending) {
            let by = if self.answers == Answers::ApproveAll {
                "--approve-all"
            } else {
                "--deny-all"
            };
            let line = match client.permissions_respond(turn, &pending.id, &choice.id) {
                Ok(()) => format!("answered with {} ({}) by {by}", choice.id, choice.kind),
                Err(e) => format!("the {by} answer was not taken: {e}"),
            };
            let _ = writeln!(err, "{}", safe(&line));
            return Ok(true);
        }
        if self.interactive {
            for (i, o) in pending.options.iter().enumerate() {
                let _ = writeln!(
                    err,
                    "{}",
                    safe(&format!("  {}) {} [{}]", i + 1, o.name, o.kind))
                );
            }
            drop(err);
            if let Some(choice) = self.choose(&pending)? {
                match client.permissions_respond(turn, &pending.id, &choice) {
                    Ok(()) => eprintln!("{}", safe(&format!("answered with {choice}"))),
                    Err(e) => eprintln!("{}", safe(&format!("the answer was not taken: {e}"))),
                }
                return Ok(true);
            }
            err = io::stderr().lock();
        }
        let _ = writeln!(err, "waiting for an answer; answer with one of:");
        let flags = applicable(&pending);
        for o in &pending.options {
            // The kind's flag where it picks exactly this option, else its id.
            let answer = Verb::ALL
                .into_iter()
                .find(|v| v.kind() == o.kind && flags.contains(&v.flag()))
                .map(|v| v.flag().to_owned())
                .unwrap_or_else(|| quote(&o.id));
            let _ = writeln!(
                err,
                "{}",
                safe(&format!(
                    "  {} permissions respond {} {} {}    # {} [{}]",
                    self.prefix,
                    quote(turn),
                    quote(&pending.id),
                    answer,
                    o.name,
                    o.kind
                ))
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

/// `lapis-ai-controller` with the global options that reach the same
/// instance (`--config`, `--instance`), for commands printed to be run.
pub(super) fn command_prefix(global: &GlobalArgs) -> String {
    let mut prefix = String::from("lapis-ai-controller");
    if let Some(config) = &global.config {
        prefix.push_str(&format!(" --config {}", quote(&config.to_string_lossy())));
    }
    if let Some(instance) = &global.instance {
        prefix.push_str(&format!(" --instance {}", quote(instance)));
    }
    if let Some(host) = &global.host {
        prefix.push_str(&format!(" --host {}", quote(host)));
    }
    prefix
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

#[cfg(test)]
mod tests {
    use lapis_protocol::{PendingRequest, PermissionOption};

    use super::{Verb, applicable, pick};

    fn request(kinds: &[&str]) -> PendingRequest {
        PendingRequest {
            id: "perm-0".into(),
            turn_id: "turn_1".into(),
            thread_id: "thr_1".into(),
            workspace_id: "proj".into(),
            application: "app".into(),
            requested_at: 0,
            tool_call: lapis_protocol::Invocation {
                title: Some("Run".into()),
                ..lapis_protocol::Invocation::default()
            },
            options: kinds
                .iter()
                .enumerate()
                .map(|(i, k)| PermissionOption {
                    id: format!("o{i}"),
                    name: k.to_string(),
                    kind: k.to_string(),
                })
                .collect(),
            deadline: 1_767_225_600_000,
        }
    }

    #[test]
    fn each_flag_answers_its_own_kind_among_real_agents_options() {
        let r = request(&["allow_always", "allow_once", "reject_once", "reject_always"]);
        assert_eq!(pick(&r, Verb::Allow).unwrap().id, "o1");
        assert_eq!(pick(&r, Verb::AllowAlways).unwrap().id, "o0");
        assert_eq!(pick(&r, Verb::Reject).unwrap().id, "o2");
        assert_eq!(pick(&r, Verb::RejectAlways).unwrap().id, "o3");
        assert_eq!(applicable(&r).len(), 4);
    }

    #[test]
    fn a_missing_or_repeated_kind_names_the_flags_that_apply() {
        let r = request(&["allow_always", "reject_once"]);
        let e = pick(&r, Verb::Allow).unwrap_err();
        let msg = e.error.to_string();
        assert!(
            msg.contains("offers 0 of them; use --allow-always or --reject or name the OPTION"),
            "{msg}"
        );
        let twice = request(&["allow_once", "allow_once", "reject_once"]);
        let msg = pick(&twice, Verb::Allow).unwrap_err().error.to_string();
        assert!(msg.contains("offers 2 of them; use --reject"), "{msg}");
        assert_eq!(applicable(&twice), ["--reject"]);
    }
}
