//! Dynamic completion candidates, named by the clap definitions in
//! `args/` (a [`Candidates`] kind each; [`of`] computes one, handed to
//! `args` by `completions.rs`) and called back by the shell at TAB time:
//! thread, turn, workspace and pending permission request ids (and a
//! request's option ids) from the running service;
//! provider names from the configuration and the catalogue; instance names
//! from the configuration directory; snapshot digests from the releases
//! directory.
//!
//! What must stay true: a candidate function never prints, never fails
//! loudly (an unreachable service just offers nothing) and never offers a
//! secret; text an agent wrote (a tool call's title, an option's label)
//! reaches the shell only through the terminal-safe printer.

use std::path::PathBuf;

use clap_complete::engine::CompletionCandidate;

use crate::args::{Candidates, GlobalArgs};

/// The command line being completed: the words after `--` in the callback.
fn typed_words() -> Vec<String> {
    std::env::args().skip_while(|a| a != "--").skip(1).collect()
}

/// The words after `sub` on the command line being completed that are not
/// options: the positional arguments typed so far (the last one is the
/// word being completed).
fn positionals_after(sub: &str) -> Vec<String> {
    typed_words()
        .into_iter()
        .skip_while(|w| w != sub)
        .skip(1)
        .filter(|w| !w.starts_with('-'))
        .collect()
}

/// `--config`, `--instance` and `--host` from the command line being
/// completed (`--host` else `LAPIS_AI_CONTROLLER_HOST`), so candidates
/// come from the instance, or the remote controller, the user is typing
/// about.
fn typed_global() -> GlobalArgs {
    let words = typed_words();
    let mut global = GlobalArgs::default();
    let mut iter = words.iter().peekable();
    while let Some(word) = iter.next() {
        for (flag, slot) in [("--config", 0), ("--instance", 1), ("--host", 2)] {
            let value = if word == flag {
                iter.peek().map(|v| v.to_string())
            } else {
                word.strip_prefix(&format!("{flag}=")).map(str::to_owned)
            };
            if let Some(value) = value {
                match slot {
                    0 => global.config = Some(PathBuf::from(value)),
                    1 => global.instance = Some(value),
                    _ => global.host = Some(value),
                }
            }
        }
    }
    if global.host.is_none() {
        global.host = std::env::var("LAPIS_AI_CONTROLLER_HOST")
            .ok()
            .filter(|h| !h.is_empty());
    }
    global
}

/// The candidates of `kind`, the function each kind names (handed to
/// `args` by `completions::complete_env`).
pub(crate) fn of(kind: Candidates) -> Vec<CompletionCandidate> {
    match kind {
        Candidates::ThreadIds => thread_ids(),
        Candidates::TurnIds => turn_ids(),
        Candidates::WorkspaceIds => workspace_ids(),
        Candidates::ProviderNames => provider_names(),
        Candidates::ConfiguredProviderNames => configured_provider_names(),
        Candidates::CatalogueNames => catalogue_names(),
        Candidates::CheckableProviderNames => checkable_provider_names(),
        Candidates::TurnsAsking => turns_asking(),
        Candidates::PendingRequestIds => pending_request_ids(),
        Candidates::RequestOptionIds => request_option_ids(),
        Candidates::SnapshotDigests => snapshot_digests(),
    }
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
fn thread_ids() -> Vec<CompletionCandidate> {
    from_service(
        |c| c.threads_list().ok(),
        |t| {
            CompletionCandidate::new(t.id)
                .help(Some(format!("{} · {}", t.workspace_id, t.provider).into()))
        },
    )
}

/// Turn ids, with their state as help.
fn turn_ids() -> Vec<CompletionCandidate> {
    from_service(
        |c| c.turns_list(None).ok(),
        |t| CompletionCandidate::new(t.id).help(Some(t.state.as_str().to_owned().into())),
    )
}

/// Registered workspace ids, with their directory as help.
fn workspace_ids() -> Vec<CompletionCandidate> {
    from_service(
        |c| c.workspaces_list().ok(),
        |w| CompletionCandidate::new(w.id).help(Some(w.path.into())),
    )
}

/// Provider names from the configuration (no service needed) plus the
/// built-in `echo`.
fn provider_names() -> Vec<CompletionCandidate> {
    let mut names = configured_providers();
    names.push(lapis_protocol::config::ECHO_PROVIDER.to_owned());
    names.sort();
    names.dedup();
    names.into_iter().map(CompletionCandidate::new).collect()
}

/// The providers the configuration names (none when it cannot be read).
fn configured_providers() -> Vec<String> {
    super::connect::target(&typed_global(), None)
        .map(|t| t.config.providers.into_keys().collect())
        .unwrap_or_default()
}

/// Configured provider names only (`providers remove`).
fn configured_provider_names() -> Vec<CompletionCandidate> {
    let mut names = configured_providers();
    names.sort();
    names.into_iter().map(CompletionCandidate::new).collect()
}

/// Catalogue entries, with their agent's command as help (`providers add`).
fn catalogue_names() -> Vec<CompletionCandidate> {
    lapis_protocol::config::CATALOGUE
        .iter()
        .map(|e| CompletionCandidate::new(e.name).help(Some(e.command.to_owned().into())))
        .collect()
}

/// Every name `providers check` takes: configured, catalogue and `echo`.
fn checkable_provider_names() -> Vec<CompletionCandidate> {
    let mut names = configured_providers();
    names.push(lapis_protocol::config::ECHO_PROVIDER.to_owned());
    names.extend(
        lapis_protocol::config::CATALOGUE
            .iter()
            .map(|e| e.name.to_owned()),
    );
    names.sort();
    names.dedup();
    names.into_iter().map(CompletionCandidate::new).collect()
}

/// Turns with a pending permission request, with the tool as help
/// (`permissions respond TURN`).
fn turns_asking() -> Vec<CompletionCandidate> {
    let mut seen = std::collections::BTreeSet::new();
    from_service(
        |c| c.permissions_list(None, None).ok(),
        |r| request_candidate(r.turn_id, r.tool_call),
    )
    .into_iter()
    .filter(|c| seen.insert(c.get_value().to_owned()))
    .collect()
}

/// Pending request ids of the turn typed before it (every pending request
/// when none is), with the tool as help (`permissions respond TURN REQUEST`).
fn pending_request_ids() -> Vec<CompletionCandidate> {
    let typed = positionals_after("respond");
    let turn = (typed.len() >= 2).then(|| typed[0].clone());
    from_service(
        |c| c.permissions_list(None, turn.as_deref()).ok(),
        |r| request_candidate(r.id, r.tool_call),
    )
}

/// `value`, with the tool call a request is about as help.
fn request_candidate(value: String, call: lapis_protocol::Invocation) -> CompletionCandidate {
    // The agent wrote it: only through the terminal-safe printer.
    let help = call.title.or(call.command).unwrap_or(call.id);
    CompletionCandidate::new(value).help(Some(crate::terminal::safe(&help).into_owned().into()))
}

/// The option ids of the request typed before it, with their kind and
/// label as help (`permissions respond TURN REQUEST OPTION`).
fn request_option_ids() -> Vec<CompletionCandidate> {
    let typed = positionals_after("respond");
    let (Some(turn), Some(request)) = (typed.first(), typed.get(1)) else {
        return Vec::new();
    };
    let Ok(mut client) = super::connect::connect(&typed_global()) else {
        return Vec::new();
    };
    let requests = client
        .permissions_list(None, Some(turn))
        .unwrap_or_default();
    requests
        .into_iter()
        .filter(|r| &r.id == request)
        .flat_map(|r| r.options)
        .map(|o| {
            let help = crate::terminal::safe(&format!("{} · {}", o.kind, o.name)).into_owned();
            CompletionCandidate::new(o.id).help(Some(help.into()))
        })
        .collect()
}

/// Instance names: the directories under the configuration directory's
/// `instances/` that hold a `config.json`.
pub(crate) fn instance_names() -> Vec<CompletionCandidate> {
    let global = GlobalArgs {
        instance: None,
        ..typed_global()
    };
    let Ok(paths) = super::paths::resolve(&global, None, None) else {
        return Vec::new();
    };
    let Some(dir) = paths.config.parent().map(|d| d.join("instances")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("config.json").is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names.into_iter().map(CompletionCandidate::new).collect()
}

/// Installed snapshot digests, newest first, with version, install time
/// and role as help (`rollback --to`).
fn snapshot_digests() -> Vec<CompletionCandidate> {
    let Ok(paths) = super::paths::resolve(&typed_global(), None, None) else {
        return Vec::new();
    };
    let Ok(listing) = lapis_installer::releases::list(&paths) else {
        return Vec::new();
    };
    listing
        .snapshots
        .into_iter()
        .map(|s| {
            let mut help = s.build.map(|b| b.version).unwrap_or_default();
            if let Some(at) = s.installed_at {
                help.push_str(&format!(" · installed {}", super::paths::utc(at)));
            }
            if s.active {
                help.push_str(" · active");
            } else if s.previous {
                help.push_str(" · previous");
            }
            CompletionCandidate::new(s.digest).help(Some(help.into()))
        })
        .collect()
}
