//! `providers list|add|remove`: the catalogue and the configured providers.
//!
//! Edits go through [`lapis_installer::config::edit`] (atomic, locked,
//! tokens untouched, validated before and after) and secrets through the env
//! file beside the config, written atomically with mode 0600. Bad input
//! (unknown catalogue name, duplicate provider, a secret outside the
//! allowlist, a bad env file) fails before anything is written. `add` lives
//! in `providers_add.rs`; both edits end by asking a running service to
//! reload ([`reload_running`]).

use std::path::PathBuf;

use anyhow::anyhow;
use lapis_installer::config as installer_config;
use lapis_protocol::config::{
    CATALOGUE, CommandLookup, ECHO_PROVIDER, ProviderSpec, catalogue_entry,
};
use serde_json::{Value, json};

use super::config_files::{EditFailure, config_path, load_config, reload_running};
use crate::args::{GlobalArgs, ListArgs, ProvidersCommand};
use crate::exit::{CliError, CliResult};
use crate::output;
use crate::table::Table;

pub(super) fn run(global: &GlobalArgs, command: ProvidersCommand) -> CliResult {
    match command {
        ProvidersCommand::List(out) => list(global, out),
        ProvidersCommand::Add(args) => super::providers_add::run(global, args),
        ProvidersCommand::Remove { name } => remove(global, &name),
        ProvidersCommand::Check {
            name,
            session,
            policy,
            timeout,
            out,
        } => super::providers_check::run(global, &name, session, policy, timeout, out),
    }
}

/// Where `spec`'s command resolves, with the runner's lookup.
pub(super) fn found(spec: &ProviderSpec, lookup: &CommandLookup) -> Option<PathBuf> {
    spec.resolve_command(lookup).ok()
}

fn list(global: &GlobalArgs, list_args: ListArgs) -> CliResult {
    let out = list_args.out;
    let path = config_path(global)?;
    let config = if path.exists() {
        Some(load_config(&path)?)
    } else {
        None
    };
    let lookup = CommandLookup::from_env();
    let exe = std::env::current_exe().unwrap_or_default();
    let mut configured = vec![json!({
        "name": ECHO_PROVIDER, "command": exe, "args": ["acp-echo"],
        "envAllowlist": [], "builtin": true, "catalogue": false, "found": true, "path": exe,
    })];
    for (name, p) in config.iter().flat_map(|c| c.providers.iter()) {
        let spec = ProviderSpec::from_config(name, p)
            .map_err(|e| CliError::failure("invalid_config", e))?;
        let at = found(&spec, &lookup);
        if name == ECHO_PROVIDER {
            configured.remove(0);
        }
        let mut entry = json!({
            "name": name, "command": p.command, "args": p.args, "envAllowlist": p.env_allowlist,
            "builtin": false, "catalogue": catalogue_entry(name).is_some(),
            "found": at.is_some(), "path": at,
        });
        // MCP servers by name, transport and identity: never a value (the
        // config holds none), and no argv either.
        if !spec.mcp_servers.is_empty() {
            let endpoints: Vec<_> = spec
                .mcp_servers
                .iter()
                .map(lapis_service::mcp_endpoint)
                .collect();
            entry["mcpServers"] = json!(endpoints);
            entry["mcpEnvAllowlist"] = json!(spec.mcp_env_allowlist);
        }
        configured.push(entry);
    }
    // Recorded approval acceptance (`providers check NAME --policy`), from
    // the running controller when one answers: the probe of the current
    // definition, else the last one, marked as older.
    let probes = super::connect::connect(global)
        .ok()
        .and_then(|mut c| c.status().ok())
        .map(|s| s.policy_probes)
        .unwrap_or_default();
    for entry in &mut configured {
        let name = entry["name"].as_str().unwrap_or_default().to_owned();
        let mine = || probes.iter().filter(|r| r.provider == name);
        if let Some(r) = mine().find(|r| r.current).or_else(|| mine().next()) {
            entry["approval"] = json!({
                "verdict": r.probe.verdict, "current": r.current,
                "checkedAt": lapis_protocol::time::format_ms(r.checked_at),
                "requests": r.probe.requests, "fileWritten": r.probe.file_written,
                "agentSaid": r.probe.agent_said,
            });
        }
    }
    let catalogue: Vec<Value> = CATALOGUE
        .iter()
        .map(|e| {
            let spec = ProviderSpec::from_config(e.name, &e.provider_config())
                .expect("catalogue entries are valid (unit-tested)");
            let at = found(&spec, &lookup);
            json!({
                "name": e.name, "command": e.command, "args": e.args, "env": e.env,
                "settings": e.settings.iter().map(|(n, what)| json!({"name": n, "takes": what})).collect::<Vec<_>>(),
                "install": e.install, "docs": e.docs, "loadSession": e.load_session,
                "restrictedMode": e.restricted_mode, "source": e.source,
                "configured": config.as_ref().is_some_and(|c| c.providers.contains_key(e.name)),
                "found": at.is_some(), "path": at,
            })
        })
        .collect();
    if out.json {
        output::json(&json!({"config": path, "configured": configured, "catalogue": catalogue}))?;
        return Ok(());
    }
    let command = |v: &Value| {
        if v["builtin"] == true {
            return "built-in".to_owned();
        }
        let mut cmd = v["command"].as_str().unwrap_or("").to_string();
        for a in v["args"].as_array().into_iter().flatten() {
            cmd.push(' ');
            cmd.push_str(a.as_str().unwrap_or(""));
        }
        cmd
    };
    let found = |v: &Value| {
        if v["found"] == true {
            "found"
        } else {
            "not found"
        }
    };
    eprintln!("configuration: {}", path.display());
    // The configured providers first, then the catalogue (`providers add
    // NAME`); a catalogue entry already configured says so.
    // APPROVAL: the latest approval-acceptance probe (`providers check NAME
    // --policy`), marked when it judged an older definition.
    let approval = |v: &Value| match v.get("approval") {
        Some(a) => format!(
            "{} at {}{}",
            a["verdict"].as_str().unwrap_or("?"),
            a["checkedAt"].as_str().unwrap_or("?"),
            if a["current"] == true {
                ""
            } else {
                " (an older definition: probe again)"
            }
        ),
        None => "-".to_owned(),
    };
    let mut table =
        Table::new(&["NAME", "SOURCE", "COMMAND", "FOUND", "MCP", "APPROVAL"]).wide(list_args.wide);
    for v in &configured {
        let mcp: Vec<String> = v["mcpServers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| {
                format!(
                    "{} ({})",
                    s["name"].as_str().unwrap_or(""),
                    s["transport"].as_str().unwrap_or("")
                )
            })
            .collect();
        let source = if v["builtin"] == true {
            "built-in"
        } else {
            "configured"
        };
        table.row(vec![
            v["name"].as_str().unwrap_or("").into(),
            source.into(),
            command(v).into(),
            found(v).into(),
            mcp.join(", ").into(),
            approval(v).into(),
        ]);
    }
    for v in &catalogue {
        let source = if v["configured"] == true {
            "catalogue [configured]"
        } else {
            "catalogue"
        };
        table.row(vec![
            v["name"].as_str().unwrap_or("").into(),
            source.into(),
            command(v).into(),
            found(v).into(),
            String::new().into(),
            "-".into(),
        ]);
    }
    table.print()?;
    Ok(())
}

fn remove(global: &GlobalArgs, name: &str) -> CliResult {
    let path = config_path(global)?;
    let mut was_default = false;
    installer_config::edit(&path, |doc: &mut Value| {
        let removed = doc
            .get_mut("providers")
            .and_then(Value::as_object_mut)
            .and_then(|p| p.remove(name));
        // A default naming a provider that is gone would make the file invalid.
        if removed.is_some()
            && doc.get("defaultProvider").and_then(Value::as_str) == Some(name)
            && let Some(obj) = doc.as_object_mut()
        {
            obj.remove("defaultProvider");
            was_default = true;
        }
        match removed {
            Some(_) => Ok(()),
            None => Err(EditFailure::Cli(CliError::failure(
                "not_found",
                anyhow!("provider `{name}` is not configured (see `providers list`)"),
            ))),
        }
    })
    .map_err(EditFailure::into_cli)?;
    output::line(format!(
        "removed provider `{name}` (its secrets stay in the env file)"
    ))?;
    if was_default {
        output::line(format!(
            "  it was the default provider: `ask` uses `{ECHO_PROVIDER}` again until `providers add` (or defaultProvider) names another"
        ))?;
    }
    output::line(format!("  {}", reload_running(global)))?;
    Ok(())
}
