//! `ask "PROMPT" [--dir DIR] [--provider NAME] [--new] [--approve-all |
//! --deny-all] [--timeout DURATION]`: the one-shot path from a directory to
//! an agent's reply.
//!
//! The provider is `--provider`, else the config's `defaultProvider` (set
//! by the first `providers add`), else `echo`; over `--host` the default
//! is the remote controller's (its `status` says which), never this host's
//! config. Every flag, the prompt, the
//! directory and the provider are checked before anything is registered, so
//! a mistyped `ask` leaves no workspace behind.
//!
//! DIR (default: the current directory) is registered as a workspace when no
//! workspace has its canonical path, under an id derived from its name; the
//! last thread of this directory, provider and application (the CLI's) is
//! continued unless `--new`; the turn is then followed like `turns submit
//! --follow`, permissions answered inline on a terminal.

use std::io::IsTerminal;
use std::path::Path;

use lapis_protocol::Workspace;
use lapis_protocol::client::Client;
use lapis_protocol::config::{ECHO_PROVIDER, WORKSPACE_ID_RULE, valid_workspace_id};

use crate::args::{AskArgs, GlobalArgs};
use crate::exit::{CliError, CliResult};

use super::connect::client_error;
use super::permissions::Answers;
use super::submit::{Submission, Watch, submit_and_watch};

pub(super) fn run(global: &GlobalArgs, args: AskArgs) -> CliResult {
    let prompt = match args.prompt.as_deref() {
        Some("-") => super::prompt::from_stdin("ask -")?,
        Some(text) if text.trim().is_empty() => {
            return Err(invalid("the prompt is empty".into()));
        }
        Some(text) => text.to_owned(),
        None if std::io::stdin().is_terminal() => {
            return Err(invalid(
                "give the prompt as an argument or pipe it on stdin".into(),
            ));
        }
        None => super::prompt::from_stdin("ask")?,
    };
    // Every flag is checked before anything is registered or created.
    let command_id = super::command_id::given_or_fresh(args.cmd.command_id.clone())?;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir()?,
    };
    let target = super::connect::client_target(global)?;
    // Over `--host` the directory is on the remote host: it is named as
    // given (absolute), and the controller there checks it.
    let dir = if target.remote.is_some() && dir.is_absolute() {
        dir
    } else {
        std::fs::canonicalize(&dir).map_err(|e| {
            CliError::failure(
                "invalid_request",
                anyhow::Error::new(e).context(format!(
                    "--dir {}: not an existing directory",
                    dir.display()
                )),
            )
        })?
    };
    let provider = provider(&target, args.provider.as_deref())?;
    let mut client = super::connect::connect_to(&target)?;
    let provider = match provider {
        Some(name) => name,
        None => remote_default(&mut client)?,
    };
    let workspace = ensure_workspace(&mut client, &dir)?;
    let thread = match (
        args.new,
        last_thread(&mut client, &workspace.id, &provider)?,
    ) {
        (false, Some(id)) => id,
        _ => {
            let t = client
                .threads_create(
                    &workspace.id,
                    &provider,
                    lapis_protocol::ApprovalPolicy::Ask,
                    None,
                )
                .map_err(client_error)?;
            eprintln!(
                "new thread {} in workspace {} (provider {provider})",
                t.id, workspace.id
            );
            t.id
        }
    };
    let answers = match (args.approve_all, args.deny_all) {
        (true, _) => Answers::ApproveAll,
        (_, true) => Answers::DenyAll,
        _ => Answers::Ask,
    };
    submit_and_watch(
        global,
        &mut client,
        Submission {
            thread: &thread,
            command_id,
            prompt: &prompt,
            continues: None,
            watch: Watch::Follow,
            thoughts: !args.no_thoughts,
            json: args.json,
            max_turn_seconds: args.timeout,
            answers,
        },
    )
}

/// The provider to ask: `--provider`, else the config's `defaultProvider`,
/// else `echo`; refused before anything is registered when the config does
/// not know it (the service checks again). `None` over `--host` without
/// `--provider`: the remote controller's default, asked once connected.
fn provider(
    target: &super::connect::Target,
    given: Option<&str>,
) -> Result<Option<String>, CliError> {
    let config = &target.config;
    if target.remote.is_some() && given.is_none() {
        return Ok(None);
    }
    let name = given
        .or(config.default_provider.as_deref())
        .unwrap_or(ECHO_PROVIDER);
    // A refused file was read only in part: the service decides then.
    if target.problem.is_none()
        && target.remote.is_none()
        && name != ECHO_PROVIDER
        && !config.providers.contains_key(name)
    {
        let known = config
            .providers
            .keys()
            .map(String::as_str)
            .chain([ECHO_PROVIDER]);
        let hint = super::suggest::hint(name, known);
        return Err(CliError::failure(
            "unknown_provider",
            anyhow::anyhow!(
                "provider `{name}` is not configured{hint}; add it with `lapis-ai-controller providers add {name}` (see `providers list`); nothing was registered"
            ),
        ));
    }
    Ok(Some(name.to_owned()))
}

/// The remote controller's `defaultProvider` (from its `status`), else
/// `echo`; that controller refuses a name it does not know.
fn remote_default(client: &mut Client) -> Result<String, CliError> {
    let status = client.status().map_err(client_error)?;
    Ok(status
        .default_provider
        .unwrap_or_else(|| ECHO_PROVIDER.to_owned()))
}

/// The workspace of `dir`, registering it when none has its path.
fn ensure_workspace(client: &mut Client, dir: &Path) -> Result<Workspace, CliError> {
    let path = dir
        .to_str()
        .ok_or_else(|| invalid("the directory path is not UTF-8".into()))?;
    let known = client.workspaces_list().map_err(client_error)?;
    if let Some(ws) = known.iter().find(|w| w.path == path) {
        return Ok(ws.clone());
    }
    let id = derived_id(dir);
    if let Some(other) = known.iter().find(|w| w.id == id) {
        return Err(invalid(format!(
            "{path} is not a workspace yet, and its name `{id}` is already the id of workspace \
             {}; register it under another id with `lapis-ai-controller workspaces add ID {path}`",
            other.path
        )));
    }
    match client.workspaces_add(&id, path) {
        Ok(ws) => {
            eprintln!(
                "{}",
                crate::terminal::safe(&format!("registered workspace {} for {}", ws.id, ws.path))
            );
            Ok(ws)
        }
        Err(e) if e.code() == "workspace_alias" => Err(CliError::failure(
            "workspace_alias",
            anyhow::Error::new(e).context(format!(
                "{path} cannot be registered as workspace `{id}`: it aliases an already registered workspace"
            )),
        )),
        Err(e) => Err(client_error(e)),
    }
}

/// A workspace id from the directory's name: characters outside the id rule
/// become `-`, at most 64.
fn derived_id(dir: &Path) -> String {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into());
    let mut id: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    if !valid_workspace_id(&id) {
        id = format!("w{}", id.chars().take(63).collect::<String>());
    }
    debug_assert!(valid_workspace_id(&id), "{WORKSPACE_ID_RULE}");
    id
}

/// The most recent thread of this workspace and provider among the CLI's
/// own threads (the server lists only the session's application).
fn last_thread(
    client: &mut Client,
    workspace: &str,
    provider: &str,
) -> Result<Option<String>, CliError> {
    let threads = client.threads_list().map_err(client_error)?;
    Ok(threads
        .into_iter()
        .filter(|t| t.workspace_id == workspace && t.provider == provider)
        .max_by_key(|t| (t.created_at, t.id.clone()))
        .map(|t| t.id))
}

fn invalid(msg: String) -> CliError {
    CliError::failure("invalid_request", anyhow::anyhow!(msg))
}
