//! `providers check NAME [--session]`: start the agent in a scratch
//! directory through the runner's own launch and ACP code
//! (`lapis_service::probe`: the same resolution, environment rule and
//! `initialize` a turn uses) and report what it supports, or why not: not
//! found → how to install it; login needed → which method; any other
//! failure → the agent's last stderr lines, redacted as the service log has
//! them. `doctor` runs the same check ([`start`]) for every provider.
//!
//! When a controller is running and the provider is configured, the check
//! is the service's own (`providers.check`): it starts the agent with the
//! service's environment and `PATH`, which can differ from this shell's
//! (a command found here may not be found by the service). Only with no
//! controller running (or for a catalogue entry not configured yet) is the
//! agent started here; the output says which was used.

use std::time::Duration;

use anyhow::anyhow;
use lapis_protocol::config::{CommandLookup, ECHO_PROVIDER, ProviderSpec, catalogue_entry};
use lapis_protocol::probe::ProbeFailed;
use lapis_service::{
    LaunchError, ProbeError, ProbeFailure, ProbeReport, ProbeRequest, RunnerLimits, SessionProbe,
    probe,
};
use serde_json::{Value, json};

use super::config_files::{config_path, load_config, load_env_file};
use crate::args::{GlobalArgs, JsonArg};
use crate::exit::{CliError, CliResult};
use crate::output;

pub(super) fn run(
    global: &GlobalArgs,
    name: &str,
    session: bool,
    policy: bool,
    timeout: u64,
    out: JsonArg,
) -> CliResult {
    let path = config_path(global)?;
    let config = if path.exists() {
        Some(load_config(&path)?)
    } else {
        None
    };
    let configured = config.as_ref().and_then(|c| c.providers.get(name));
    let spec = match (configured, catalogue_entry(name)) {
        (Some(p), _) => ProviderSpec::from_config(name, p),
        (None, Some(e)) => ProviderSpec::from_config(name, &e.provider_config()),
        (None, None) if name == ECHO_PROVIDER => {
            let exe = std::env::current_exe().map_err(|e| CliError::failure("internal", e))?;
            Ok(ProviderSpec::builtin_echo(exe))
        }
        (None, None) => {
            return Err(CliError::failure(
                "unknown_provider",
                anyhow!(
                    "`{name}` is neither configured nor in the catalogue (see `providers list`)"
                ),
            ));
        }
    }
    .map_err(|e| CliError::failure("invalid_config", e))?;
    let by_service = configured.is_some() || name == ECHO_PROVIDER;
    let mut client = by_service.then(|| running_service(global)).flatten();
    if policy && client.is_none() {
        return Err(CliError::unavailable(
            "service_unavailable",
            anyhow!(
                "a policy probe is run and recorded by the running controller, for a provider it has configured: start it (`serve` or `service start`) and add `{name}` to its configuration"
            ),
        ));
    }
    let what = Check { session, policy };
    let (checked, checked_by) = check_with(client.as_mut(), name, spec, what, timeout, || {
        service_lookup(&path)
    })?;
    let report =
        checked.map_err(|f| failure_of(name, &f.code, &f.message, &f.stderr, checked_by))?;
    let doc = json!({"provider": name, "checkedBy": checked_by, "report": &report});
    if let Some(SessionProbe::AuthRequired) = report.session {
        return Err(CliError::failure(
            "auth_required",
            anyhow!(
                "provider `{name}` needs a login first: {}",
                auth_hint(&report)
            ),
        )
        .with_details(doc));
    }
    if let Some(SessionProbe::Failed { code }) = &report.session {
        return Err(CliError::failure(
            "session_new_failed",
            anyhow!("provider `{name}` started but could not open a session ({code})"),
        )
        .with_details(doc));
    }
    if out.json {
        output::json(&doc)?;
    } else {
        print_report(name, &report)?;
        if let Some(p) = &report.policy {
            print_policy(p)?;
        }
        output::line(checked_line(checked_by))?;
    }
    Ok(())
}

/// What to check beyond `initialize`.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Check {
    /// Open a session.
    pub(super) session: bool,
    /// Run the policy probe (by the running controller only).
    pub(super) policy: bool,
}

/// A policy probe's result: the verdict, the controller's own evidence,
/// then (apart) what the agent said.
fn print_policy(p: &lapis_protocol::probe::PolicyProbe) -> std::io::Result<()> {
    let why = p
        .reason
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    output::line(format!(
        "  approval acceptance: {}{why} (recorded for this provider definition)",
        p.verdict.as_str()
    ))?;
    output::line(format!(
        "    evidence: {} permission request(s), {} the probe file; the file {} after the rejection",
        p.requests,
        if p.named { "naming" } else { "none naming" },
        if p.file_written {
            "exists"
        } else {
            "is absent"
        }
    ))?;
    output::line(crate::terminal::safe(&format!(
        "    the agent said: {} (not evidence)",
        p.agent_said.as_deref().unwrap_or("nothing")
    )))
}

/// Which start the check was: the running service's, or this process's.
fn checked_line(by: &str) -> &'static str {
    if by == "service" {
        "  checked by the running controller (its PATH and environment)"
    } else if by == UNLOADED {
        "  checked here: the running controller has not loaded this provider yet (`config reload`)"
    } else {
        "  checked here: no controller is running (a running one would use its own PATH and environment)"
    }
}

/// A client of the running controller, or `None` when nothing answers.
fn running_service(global: &GlobalArgs) -> Option<lapis_protocol::client::Client> {
    super::connect::connect(global).ok()
}

/// One provider's check: by the running controller when `client` is given
/// (`providers.check`: its PATH, environment and secrets), else started
/// here with `lookup`'s. The second value says which (`service`, `local`).
pub(super) fn check_with(
    client: Option<&mut lapis_protocol::client::Client>,
    name: &str,
    spec: ProviderSpec,
    what: Check,
    timeout: u64,
    lookup: impl FnOnce() -> Result<CommandLookup, CliError>,
) -> Result<(Result<ProbeReport, ProbeFailed>, &'static str), CliError> {
    let session = what.session;
    let Some(client) = client else {
        let checked = start(spec, lookup()?, session, timeout).map_err(|f| ProbeFailed {
            code: f.error.code().to_owned(),
            message: f.error.to_string(),
            stderr: f.stderr,
        });
        return Ok((checked, "local"));
    };
    let timeout = timeout.clamp(1, 600);
    // Up to four steps (spawn + initialize, session/new, the policy
    // probe's prompt) of `timeout` each, then the stderr drain: wait for
    // the whole check.
    client.set_request_timeout(Some(Duration::from_secs(4 * timeout + 10)));
    let checked = client.providers_check(&lapis_protocol::params::ProvidersCheck {
        name: name.to_owned(),
        session,
        policy: what.policy,
        timeout_seconds: Some(timeout),
    });
    client.set_request_timeout(Some(super::connect::REQUEST_TIMEOUT));
    let checked = match checked {
        Ok(checked) => checked,
        // Configured in the file but not loaded by the running controller
        // (added since its start or last reload): checked here instead.
        Err(lapis_protocol::client::ClientError::Rpc(e))
            if e.error_code() == Some(lapis_protocol::ErrorCode::NotFound) && !what.policy =>
        {
            let (checked, _) = check_with(None, name, spec, what, timeout, lookup)?;
            return Ok((checked, UNLOADED));
        }
        Err(e) => return Err(super::connect::client_error(e)),
    };
    let result = match (checked.report, checked.failure) {
        (Some(report), _) => Ok(report),
        (None, Some(f)) => Err(f),
        (None, None) => Err(ProbeFailed {
            code: "check_failed".into(),
            message: "the controller answered with neither a report nor a failure".into(),
            stderr: Vec::new(),
        }),
    };
    Ok((result, "service"))
}

/// [`check_with`]'s answer for a provider the configuration file has but
/// the running controller has not loaded: it was checked here.
pub(super) const UNLOADED: &str = "local-unloaded";

/// Whether a failed check's code means the agent never started (its
/// stderr says nothing then).
pub(super) fn never_started(code: &str) -> bool {
    matches!(
        code,
        "command_not_found" | "command_not_executable" | "spawn_failed" | "workspace_unavailable"
    )
}

/// The lookup a launch by the service uses: command search and allowlisted
/// values from the environment (this process's, standing for the
/// service's), secrets from the env file beside `config` first.
pub(super) fn service_lookup(config: &std::path::Path) -> Result<CommandLookup, CliError> {
    let mut lookup = CommandLookup::from_env();
    lookup.secrets = load_env_file(config)?.1;
    Ok(lookup)
}

/// Starts the agent of `spec` in a scratch directory through the runner's
/// own launch and ACP code and runs `initialize` (and `session/new` with
/// `session`), each step bounded by `timeout` seconds.
pub(super) fn start(
    spec: ProviderSpec,
    lookup: CommandLookup,
    session: bool,
    timeout: u64,
) -> Result<ProbeReport, ProbeFailure> {
    let internal = |e: std::io::Error| ProbeFailure {
        error: ProbeError::Launch(LaunchError::Spawn(e)),
        stderr: Vec::new(),
    };
    let scratch = tempfile::Builder::new()
        .prefix("lapis-provider-check-")
        .tempdir()
        .map_err(internal)?;
    let limits = RunnerLimits {
        setup_timeout: Duration::from_secs(timeout.max(1)),
        ..RunnerLimits::default()
    };
    let request = ProbeRequest {
        spec,
        scratch: scratch.path().to_path_buf(),
        session,
        policy: false,
        lookup,
        limits,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(internal)?;
    runtime.block_on(probe(request))
}

/// The agent's own words, for a failure message: its last stderr lines
/// (redacted by the runner; made terminal-safe where printed).
pub(super) fn agent_said(stderr: &[String]) -> String {
    if stderr.is_empty() {
        return "the agent wrote nothing on stderr".to_owned();
    }
    let mut text = String::from("the agent's last stderr lines:");
    for line in stderr {
        text.push_str("\n    ");
        text.push_str(line);
    }
    text
}

/// A failed check as a CLI error that says what to do, with the agent's
/// last stderr lines (also in the JSON details, as `stderr`): `code` the
/// stable code, `by` which start it was (`service` or `local`).
fn failure_of(name: &str, code: &str, message: &str, stderr: &[String], by: &str) -> CliError {
    let hint = match code {
        "command_not_found" => match catalogue_entry(name) {
            Some(entry) => format!("; install it: {}", entry.install),
            None => "; install it or give an absolute --command".to_string(),
        },
        "auth_required" => "; log in with the agent's own CLI first".to_string(),
        _ => String::new(),
    };
    let said = if never_started(code) {
        String::new()
    } else {
        format!("\n  {}", agent_said(stderr))
    };
    let whose = if by == "service" {
        " (checked by the running controller, with its PATH and environment)"
    } else {
        ""
    };
    let code: &'static str = lapis_protocol::OutcomeCode::parse(code)
        .map(|c| c.as_str())
        .or_else(|| KNOWN_CODES.iter().copied().find(|c| *c == code))
        .unwrap_or("check_failed");
    CliError::failure(
        code,
        anyhow!("provider `{name}` check failed{whose}: {message}{hint}{said}"),
    )
    .with_details(json!({"provider": name, "code": code, "stderr": stderr, "checkedBy": by}))
}

/// Probe codes that are not outcome codes.
const KNOWN_CODES: &[&str] = &[
    "protocol_version_unsupported",
    "spawn_failed",
    "check_failed",
];

fn auth_hint(report: &ProbeReport) -> String {
    if report.auth_methods.is_empty() {
        return "the agent lists no auth methods; log in with its own CLI".into();
    }
    let methods: Vec<String> = report
        .auth_methods
        .iter()
        .map(|m| {
            let id = m.get("id").and_then(Value::as_str).unwrap_or("?");
            match m.get("name").and_then(Value::as_str) {
                Some(n) => format!("{id} ({n})"),
                None => id.to_string(),
            }
        })
        .collect();
    format!("auth methods: {}", methods.join(", "))
}

/// The report in plain text: agent info, auth methods and mode ids are the
/// agent's own strings, so every line is terminal-safe.
fn print_report(name: &str, r: &ProbeReport) -> std::io::Result<()> {
    let line = |text: String| output::line(crate::terminal::safe(&text));
    let flags = |v: &Value| {
        let on: Vec<&str> = v
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, b)| b.as_bool() == Some(true))
            .map(|(k, _)| k.as_str())
            .collect();
        if on.is_empty() {
            "none".to_string()
        } else {
            on.join(", ")
        }
    };
    line(format!("provider {name}: ok ({})", r.command.display()))?;
    line(format!("  protocol version: {}", r.protocol_version))?;
    let info = r
        .agent_info
        .as_ref()
        .map(|i| {
            let n = i.get("name").and_then(Value::as_str).unwrap_or("?");
            let v = i.get("version").and_then(Value::as_str).unwrap_or("?");
            format!("{n} {v}")
        })
        .unwrap_or_else(|| "not reported".into());
    line(format!("  agent: {info}"))?;
    line(format!(
        "  loadSession: {}",
        if r.load_session { "yes" } else { "no" }
    ))?;
    let c = &r.session_capabilities;
    let yes = |b: bool| if b { "yes" } else { "no" };
    line(format!(
        "  lifecycle: load {}, resume {}, list {}, close {}, fork {}",
        yes(c.load),
        yes(c.resume),
        yes(c.list),
        yes(c.close),
        yes(c.fork)
    ))?;
    // Neither is an agent capability in ACP v1 (see `SessionCapabilities`).
    line("  usage: recorded when the agent sends it (not advertised in ACP v1)".into())?;
    line(
        "  elicitation: offered by the controller as form mode (empty forms are approvals)".into(),
    )?;
    line(format!("  MCP: {}", flags(&r.mcp_capabilities)))?;
    line(format!("  prompt: {}", flags(&r.prompt_capabilities)))?;
    let auth: Vec<&str> = r
        .auth_methods
        .iter()
        .filter_map(|m| m.get("id").and_then(Value::as_str))
        .collect();
    line(format!(
        "  auth methods: {}",
        if auth.is_empty() {
            "none".to_string()
        } else {
            auth.join(", ")
        }
    ))?;
    if let Some(SessionProbe::Opened { modes }) = &r.session {
        let ids: Vec<&str> = modes
            .as_ref()
            .and_then(|m| m.get("availableModes"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|m| m.get("id").and_then(Value::as_str))
            .collect();
        let current = modes
            .as_ref()
            .and_then(|m| m.get("currentModeId"))
            .and_then(Value::as_str)
            .unwrap_or("-");
        line(format!(
            "  session: opened; modes: {} (current {current})",
            if ids.is_empty() {
                "none".to_string()
            } else {
                ids.join(", ")
            }
        ))?;
    }
    Ok(())
}
