//! `providers.check`: the running controller starts a provider's agent
//! exactly as its next turn would — the engine's provider definition, its
//! command resolution with the service's own `PATH` and `HOME`, its
//! environment rule and secrets — in a scratch directory, runs
//! `initialize` (and `session/new` when asked) and reports. Nothing is
//! journaled and no prompt is sent (the probe's hooks refuse dispatch).
//!
//! What must stay true: a failed check is a result carrying the code, the
//! message and the agent's redacted, bounded stderr tail; it never quotes a
//! secret, and the scratch directory is removed when the check ends.

use std::time::Duration;

use crate::acp::{ProbeRequest, probe};
use lapis_protocol::params::{ProvidersCheck, ProvidersChecked};
use lapis_protocol::probe::ProbeFailed;
use lapis_protocol::{ErrorCode, RpcError};

use super::super::context::ServerContext;
use super::super::failure::internal;

/// An empty private directory for one check, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    /// A new directory in `parent` (the system's temporary directory, or
    /// the controller home's `probes/` for a policy probe).
    fn new_in(parent: &std::path::Path) -> std::io::Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("lapis-provider-check-{}-{n}", std::process::id()));
        // `create` (not `create_all`) fails on an existing path, so a
        // planted directory or link is never used.
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Longest step a check may ask for, in seconds.
const MAX_CHECK_SECONDS: u64 = 600;

pub(crate) async fn providers_check(
    ctx: &ServerContext,
    p: ProvidersCheck,
) -> Result<ProvidersChecked, RpcError> {
    let timeout = p.timeout_seconds.unwrap_or(30);
    if !(1..=MAX_CHECK_SECONDS).contains(&timeout) {
        return Err(RpcError::new(
            ErrorCode::InvalidRequest,
            format!("timeoutSeconds must be between 1 and {MAX_CHECK_SECONDS}"),
        ));
    }
    let Some(engine) = ctx.core.engine.as_ref() else {
        return Err(RpcError::new(
            ErrorCode::InvalidRequest,
            "this controller runs no agents (no engine)",
        ));
    };
    let Some((spec, lookup, mut limits)) = engine.launch_of(&p.name) else {
        let shown: String = p.name.chars().take(64).collect();
        return Err(RpcError::new(
            ErrorCode::NotFound,
            format!("no such provider `{shown}` in the configuration"),
        ));
    };
    limits.setup_timeout = Duration::from_secs(timeout);
    // A policy probe's workspace is under the controller home (private to
    // the controller), not the shared temporary directory.
    let parent = if p.policy {
        use std::os::unix::fs::DirBuilderExt;
        let probes = ctx.core.store.options().home.join("probes");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&probes)
            .map_err(internal)?;
        probes
    } else {
        std::env::temp_dir()
    };
    let scratch = Scratch::new_in(&parent).map_err(internal)?;
    let fingerprint = crate::acp::fingerprint(&spec);
    let request = ProbeRequest {
        spec,
        scratch: scratch.0.clone(),
        session: p.session,
        policy: p.policy,
        lookup,
        limits,
    };
    let checked = probe(request).await;
    drop(scratch);
    // The verdict is recorded for the definition it was made under.
    if let Ok(report) = &checked
        && let Some(policy) = &report.policy
    {
        ctx.core
            .store
            .record_policy_probe(&p.name, &fingerprint, policy)
            .await
            .map_err(super::store_err)?;
    }
    let checked = match checked {
        Ok(report) => ProvidersChecked {
            provider: p.name,
            report: Some(report),
            failure: None,
        },
        Err(f) => ProvidersChecked {
            provider: p.name,
            report: None,
            failure: Some(ProbeFailed {
                code: f.error.code().to_owned(),
                message: f.error.to_string(),
                stderr: f.stderr,
            }),
        },
    };
    Ok(checked)
}

/// The recorded policy probes, each marked `current` when it was made
/// under the provider's definition loaded now.
pub(super) async fn policy_records(
    ctx: &ServerContext,
) -> Result<Vec<lapis_protocol::probe::PolicyRecord>, RpcError> {
    let stored = ctx
        .core
        .store
        .policy_probes()
        .await
        .map_err(super::store_err)?;
    Ok(stored
        .into_iter()
        .map(|(provider, fingerprint, checked_at, probe)| {
            let current = ctx
                .core
                .engine
                .as_ref()
                .and_then(|e| e.provider_spec(&provider))
                .is_some_and(|spec| crate::acp::fingerprint(&spec) == fingerprint);
            lapis_protocol::probe::PolicyRecord {
                provider,
                fingerprint,
                current,
                checked_at,
                probe,
            }
        })
        .collect())
}
