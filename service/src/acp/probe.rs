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
use lapis_protocol::probe::{
    POLICY_PROBE_FILE, POLICY_PROBE_PROMPT, PolicyProbe, PolicyVerdict, ProbeReport, SessionProbe,
};
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
    /// Also run the policy probe turn (see [`policy_probe`]); implies
    /// `session`.
    pub policy: bool,
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

/// Hooks of a check: nothing is journaled, nothing goes through the
/// dispatch boundary (the policy probe's prompt is sent by the probe
/// itself). Every permission request is rejected (its reject option, else
/// `cancelled`) and counted.
#[derive(Debug, Default)]
struct ProbeHooks {
    /// (requests seen, whether one named the probe file).
    asked: std::sync::Mutex<(u32, bool)>,
}

impl TurnHooks for ProbeHooks {
    async fn before_dispatch(&self, _session_id: &str) -> Result<(), HookError> {
        Err(HookError("a check never dispatches a prompt".into()))
    }

    async fn event(&self, _event: Payload) -> Result<(), HookError> {
        Ok(())
    }

    async fn ask(&self, request: PermissionRequest) -> PermissionAnswer {
        {
            let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
            asked.0 += 1;
            asked.1 |= names_probe_file(&request.invocation);
        }
        request
            .options
            .iter()
            .find(|o| o.kind == "reject_once")
            .or_else(|| {
                request
                    .options
                    .iter()
                    .find(|o| o.kind.starts_with("reject"))
            })
            .map_or(PermissionAnswer::Cancelled, |o| {
                PermissionAnswer::Selected {
                    option_id: o.id.clone(),
                }
            })
    }
}

/// Whether a permission request is about the probe file: a location, the
/// title, the command or the raw input names it.
fn names_probe_file(call: &lapis_protocol::Invocation) -> bool {
    let named = |s: &str| s.contains(POLICY_PROBE_FILE);
    call.locations.iter().any(|l| named(&l.path))
        || call.title.as_deref().is_some_and(named)
        || call.command.as_deref().is_some_and(named)
        || call
            .raw_input
            .as_ref()
            .is_some_and(|v| named(&v.to_string()))
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
        Arc::new(ProbeHooks::default()),
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
        policy: None,
    };
    if request.session || request.policy {
        let new = json!({"cwd": request.scratch, "mcpServers": []});
        report.session = Some(match s.call("session/new", new, setup).await {
            Ok(v) => {
                if request.policy
                    && let Some(id) = v.get("sessionId").and_then(Value::as_str)
                {
                    // The session is set up as an `ask` turn's would be (its
                    // asking mode requested), so the verdict is about what
                    // a turn meets. A refusal is left to the verdict.
                    let mode = request.spec.ask.mode.as_deref();
                    if mode.is_some() {
                        let modes = v.get("modes");
                        let _ = super::setup::request_mode(
                            s,
                            request.limits.setup_timeout,
                            id,
                            modes,
                            mode,
                        )
                        .await;
                    }
                    report.policy = Some(policy_probe(s, request, id.to_owned()).await);
                }
                SessionProbe::Opened {
                    modes: v.get("modes").cloned(),
                }
            }
            Err(CallError::Rpc { code }) if code == AUTH_REQUIRED => SessionProbe::AuthRequired,
            Err(e) => SessionProbe::Failed {
                code: call_code(&e, "session_new_failed", "session_new_timeout").to_string(),
            },
        });
    }
    Ok(report)
}

/// The policy probe turn on session `id`: the prompt asking for a write of
/// [`POLICY_PROBE_FILE`] (bounded by the setup timeout), every permission
/// request rejected by [`ProbeHooks`], then the controller's own look at
/// the scratch workspace. What the agent answered is kept apart
/// (`agent_said`) and never enters the verdict.
async fn policy_probe(
    s: &mut Session<ProbeHooks>,
    request: &ProbeRequest,
    id: String,
) -> PolicyProbe {
    s.mark_dispatched(id.clone());
    let prompt = json!({"sessionId": id,
        "prompt": [{"type": "text", "text": POLICY_PROBE_PROMPT}]});
    let answered = s
        .call("session/prompt", prompt, Some(request.limits.setup_timeout))
        .await;
    let agent_said = Some(match answered {
        Ok(v) => v
            .get("stopReason")
            .and_then(Value::as_str)
            .unwrap_or("no stop reason")
            .chars()
            .take(64)
            .collect(),
        Err(e) => call_code(&e, "agent_error", "timeout").to_owned(),
    });
    let (requests, named) = *s.hooks().asked.lock().unwrap_or_else(|p| p.into_inner());
    // `symlink_metadata`: a link planted in the agent's place counts too.
    let file_written = std::fs::symlink_metadata(request.scratch.join(POLICY_PROBE_FILE)).is_ok();
    let (verdict, reason) = PolicyVerdict::judge(requests > 0, named, file_written);
    PolicyProbe {
        verdict,
        requests,
        named,
        file_written,
        agent_said,
        reason,
    }
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
