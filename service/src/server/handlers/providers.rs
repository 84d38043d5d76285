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
    fn new() -> std::io::Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("lapis-provider-check-{}-{n}", std::process::id()));
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
    let scratch = Scratch::new().map_err(internal)?;
    let request = ProbeRequest {
        spec,
        scratch: scratch.0.clone(),
        session: p.session,
        lookup,
        limits,
    };
    let checked = match probe(request).await {
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
    drop(scratch);
    Ok(checked)
}
