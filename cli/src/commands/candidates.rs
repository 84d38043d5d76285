//! Dynamic completion candidates (thread, turn and workspace ids from the
//! running service, provider names from the configuration), named by the
//! clap definitions in `args/` and called back by the shell at TAB time
//! (see `completions.rs`).
//!
//! What must stay true: a candidate function never prints, never fails
//! loudly (an unreachable service just offers nothing) and never offers a
//! secret.

use std::path::PathBuf;

use clap_complete::engine::CompletionCandidate;

use crate::args::GlobalArgs;

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
