//! `providers check`: start one agent the way a turn does, ask `initialize`
//! (and, when asked, `session/new`), and report what it advertises.
//!
//! It reuses the runner's launch ([`AgentProcess::spawn`]: same command
//! lookup, same rebuilt environment, same process group and teardown) and
//! connection ([`Session`]), so a provider that passes the check is launched
//! identically for a turn. No prompt is ever sent; permission requests (none
//! expected before a prompt) are answered `cancelled`.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

use super::process::{AgentProcess, LaunchError};
use super::session::{CallError, Conn, Session};
use super::turn::{
    ACP_PROTOCOL_VERSION, AUTH_REQUIRED, HookError, PermissionRequest, RunnerLimits, TurnHooks,
    TurnRequest, initialize_params,
};
use lapis_protocol::ApprovalPolicy;
use lapis_protocol::config::{CommandLookup, ProviderSpec};
use lapis_protocol::probe::{ProbeReport, SessionProbe};
use lapis_protocol::{Payload, PermissionAnswer};

/// What to check.
#[derive(Debug, Clone)]
pub struct ProbeRequest {
    /// The provider, as a turn would launch it.
    pub spec: ProviderSpec,
    /// An empty scratch directory the agent runs in.
    pub scratch: PathBuf,
    /// Also open a session (`session/new`).
    pub session: bool,
    /// Command lookup and secrets, as for a turn.
    pub lookup: CommandLookup,
    /// Deadlines (`setup_timeout` bounds each call).
    pub limits: RunnerLimits,
}

/// How long a failed probe waits for the agent's last stderr lines.
const STDERR_DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// A probe that failed, with what the agent said on stderr before it did.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct ProbeFailure {
    /// What went wrong.
    #[source]
    pub error: ProbeError,
    /// The agent's last stderr lines, redacted and bounded
    /// ([`crate::acp::StderrTail`]); empty when it never started.
    pub stderr: Vec<String>,
}

/// Why the agent could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// It could not be started (not found, not executable, spawn failed).
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// `initialize` did not succeed.
    #[error("initialize failed ({code})")]
    Initialize {
        /// `initialize_failed`, `initialize_timeout`, `agent_exited`,
        /// `auth_required`, `invalid_json`, …
        code: &'static str,
    },
    /// The agent speaks another ACP version.
    #[error(
        "the agent answered protocol version {got:?}; this controller speaks {ACP_PROTOCOL_VERSION}"
    )]
    ProtocolVersion {
        /// What it answered.
        got: Option<u64>,
    },
}

impl ProbeError {
    /// The stable code for scripts.
    pub fn code(&self) -> &'static str {
        match self {
            ProbeError::Launch(e) => e.code().as_str(),
            ProbeError::Initialize { code } => code,
            ProbeError::ProtocolVersion { .. } => "protocol_version_unsupported",
        }
    }
}

/// Hooks of a check: nothing is journaled, nothing is dispatched.
#[derive(Debug)]
struct ProbeHooks;

impl TurnHooks for ProbeHooks {
    async fn before_dispatch(&self, _session_id: &str) -> Result<(), HookError> {
        Err(HookError("a check never dispatches a prompt".into()))
    }

    async fn event(&self, _event: Payload) -> Result<(), HookError> {
        Ok(())
    }

    async fn ask(&self, _request: PermissionRequest) -> PermissionAnswer {
        PermissionAnswer::Cancelled
    }
}

/// Runs the check and tears the agent down.
pub async fn probe(request: ProbeRequest) -> Result<ProbeReport, ProbeFailure> {
    let limits = request.limits;
    let launch = |e: LaunchError| ProbeFailure {
        error: e.into(),
        stderr: Vec::new(),
    };
    let command = request
        .spec
        .resolve_command(&request.lookup)
        .map_err(|e| launch(e.into()))?;
    let (mut process, pipes) = AgentProcess::spawn(
        &request.spec,
        &request.scratch,
        &request.lookup,
        limits.max_line_bytes,
        limits.stderr,
        None,
    )
    .map_err(launch)?;
    let (tail, stderr_task) = process.stderr_watch();
    let turn = TurnRequest {
        spec: request.spec.clone(),
        workspace: request.scratch.clone(),
        prompt: String::new(),
        approval: ApprovalPolicy::Ask,
        restricted: true,
        limits,
        lookup: request.lookup.clone(),
        registry: None,
        resume: None,
        keep_alive: false,
        continuation: None,
        context: Vec::new(),
        mcp: Vec::new(),
    };
    // A probe is never cancelled: the sender lives as long as the session.
    let (_cancel, signal) = tokio::sync::watch::channel(false);
    let mut session = Session::start(
        Conn::open(pipes),
        Arc::new(ProbeHooks),
        signal.into(),
        &turn,
    );
    let result = exchange(&mut session, &request, command).await;
    session.finish(process, limits.teardown).await;
    match result {
        Ok(report) => Ok(report),
        Err(error) => {
            // The group is gone, so the copy ends at the pipe's end of file;
            // bounded, in case something outside the group still holds it.
            if let Some(task) = stderr_task {
                let _ = tokio::time::timeout(STDERR_DRAIN, task).await;
            }
            Err(ProbeFailure {
                error,
                stderr: tail.lines(),
            })
        }
    }
}

async fn exchange(
    s: &mut Session<ProbeHooks>,
    request: &ProbeRequest,
    command: PathBuf,
) -> Result<ProbeReport, ProbeError> {
    let setup = Some(request.limits.setup_timeout);
    let init = s
        .call("initialize", initialize_params(), setup)
        .await
        .map_err(|e| ProbeError::Initialize {
            code: call_code(&e, "initialize_failed", "initialize_timeout"),
        })?;
    let version = init.get("protocolVersion").and_then(Value::as_u64);
    if version != Some(ACP_PROTOCOL_VERSION) {
        return Err(ProbeError::ProtocolVersion { got: version });
    }
    let caps = init.get("agentCapabilities").cloned().unwrap_or(json!({}));
    let mut report = ProbeReport {
        command,
        protocol_version: ACP_PROTOCOL_VERSION,
        agent_info: init.get("agentInfo").cloned(),
        load_session: caps
            .get("loadSession")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        session_capabilities: lapis_protocol::probe::SessionCapabilities::from_initialize(&init),
        mcp_capabilities: caps.get("mcpCapabilities").cloned().unwrap_or(json!({})),
        prompt_capabilities: caps.get("promptCapabilities").cloned().unwrap_or(json!({})),
        auth_methods: init
            .get("authMethods")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        session: None,
    };
    if request.session {
        let new = json!({"cwd": request.scratch, "mcpServers": []});
        report.session = Some(match s.call("session/new", new, setup).await {
            Ok(v) => SessionProbe::Opened {
                modes: v.get("modes").cloned(),
            },
            Err(CallError::Rpc { code }) if code == AUTH_REQUIRED => SessionProbe::AuthRequired,
            Err(e) => SessionProbe::Failed {
                code: call_code(&e, "session_new_failed", "session_new_timeout").to_string(),
            },
        });
    }
    Ok(report)
}

fn call_code(e: &CallError, rpc: &'static str, timeout: &'static str) -> &'static str {
    match e {
        CallError::Rpc { code } if *code == AUTH_REQUIRED => "auth_required",
        CallError::Rpc { .. } => rpc,
        CallError::Closed(code) => code.as_str(),
        CallError::Timeout => timeout,
        CallError::Cancelled | CallError::Interrupted => "cancelled",
        CallError::Hook => "internal",
    }
}
