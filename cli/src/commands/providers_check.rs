//! `providers check NAME [--session]`: start the agent in a scratch
//! directory through the runner's own launch and ACP code
//! (`lapis_service::probe`: the same resolution, environment rule and
//! `initialize` a turn uses) and report what it supports, or why not: not
//! found → how to install it; login needed → which method; any other
//! failure → the agent's last stderr lines, redacted as the service log has
//! them. `doctor` runs the same check ([`start`]) for every provider.

use std::time::Duration;

use anyhow::anyhow;
use lapis_protocol::config::{
    CommandLookup, ECHO_PROVIDER, ProviderError, ProviderSpec, catalogue_entry,
};
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
    let lookup = service_lookup(&path)?;
    let report = start(spec, lookup, session, timeout).map_err(|f| failure(name, f))?;
    let doc = json!({"provider": name, "report": &report});
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
    }
    Ok(())
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
/// last stderr lines (also in the JSON details, as `stderr`).
fn failure(name: &str, f: ProbeFailure) -> CliError {
    let ProbeFailure { error: e, stderr } = f;
    let code = e.code();
    let hint = match &e {
        ProbeError::Launch(LaunchError::Command(ProviderError::CommandNotFound { .. })) => {
            match catalogue_entry(name) {
                Some(entry) => format!("; install it: {}", entry.install),
                None => "; install it or give an absolute --command".to_string(),
            }
        }
        ProbeError::Initialize {
            code: "auth_required",
        } => "; log in with the agent's own CLI first".to_string(),
        _ => String::new(),
    };
    let said = match &e {
        ProbeError::Launch(_) => String::new(),
        _ => format!("\n  {}", agent_said(&stderr)),
    };
    CliError::failure(
        code,
        anyhow!("provider `{name}` check failed: {e}{hint}{said}"),
    )
    .with_details(json!({"provider": name, "code": code, "stderr": stderr}))
}

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
