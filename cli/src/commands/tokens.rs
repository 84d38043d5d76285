//! `tokens add | list | revoke`: application tokens beside the owner's.
//!
//! What must stay true: a token once written is never rewritten (the
//! installer's `edit_tokens` only appends or removes a whole token, never
//! the owner's); a new secret is shown once — on the terminal, or in a new
//! 0600 file (`--output`) — and nowhere else: not in `--json` piped, not in
//! a receipt, not in an error; a running service is asked to reload, so an
//! added token works and a revoked one's sessions end at once.

use std::io::IsTerminal;
use std::path::Path;

use anyhow::anyhow;
use lapis_installer::{config as installer_config, fsx};
use lapis_protocol::Scope;
use lapis_protocol::config::{TokenKind, TokenSpec, valid_application};
use serde_json::{Value, json};

use super::config_files::{EditFailure, config_path, load_config, reload_running};
use crate::args::{GlobalArgs, TokensAddArgs, TokensCommand};
use crate::exit::{CliError, CliResult};
use crate::output;
use crate::table::{Cell, Table};

pub(super) fn run(global: &GlobalArgs, command: TokensCommand) -> CliResult {
    match command {
        TokensCommand::Add(args) => add(global, args),
        TokensCommand::List(out) => list(global, out.json),
        TokensCommand::Revoke { name, out } => revoke(global, &name, out.json),
    }
}

fn usage(code: &'static str, message: String) -> CliError {
    CliError::failure(code, anyhow!(message))
}

/// The token `args` describe, with a fresh secret; every check runs before
/// anything is written.
fn new_token(args: &TokensAddArgs, principal: &str) -> Result<TokenSpec, CliError> {
    if !valid_application(&args.application) {
        return Err(usage(
            "invalid_application",
            format!(
                "--application `{}` must be 1-64 of [A-Za-z0-9._-]",
                args.application
            ),
        ));
    }
    let mut scopes = Vec::new();
    for s in &args.scopes {
        let scope = Scope::parse(s.trim()).ok_or_else(|| {
            let known: Vec<&str> = Scope::ALL.iter().map(|s| s.as_str()).collect();
            usage(
                "invalid_scope",
                format!("unknown scope `{s}`; known: {}", known.join(", ")),
            )
        })?;
        scopes.push(scope);
    }
    let secret = installer_config::generate_token()
        .map_err(|e| CliError::failure("internal", anyhow!("no random source: {e}")))?;
    Ok(TokenSpec {
        name: args.name.clone(),
        principal: principal.to_owned(),
        secret,
        scopes: (!scopes.is_empty()).then_some(scopes),
        applications: Some(vec![args.application.clone()]),
        workspaces: (!args.workspaces.is_empty()).then(|| args.workspaces.clone()),
        providers: (!args.providers.is_empty()).then(|| args.providers.clone()),
    })
}

/// Writes `secret` to a new file at `path` (0600, refused if anything is
/// there), durable before the token is.
fn write_secret(path: &Path, secret: &str) -> Result<(), CliError> {
    let created = fsx::create_new_atomic(path, format!("{secret}\n").as_bytes(), 0o600, &|| {})
        .map_err(|e| CliError::failure("output_failed", e))?;
    if created {
        Ok(())
    } else {
        Err(usage(
            "output_exists",
            format!(
                "{} already exists; name a new file with --output (nothing was written)",
                path.display()
            ),
        ))
    }
}

/// The receipt of a token: never its secret.
fn describe(t: &TokenSpec) -> Value {
    json!({
        "name": t.name,
        "principal": t.principal,
        "kind": match t.kind() {
            TokenKind::Owner => "owner",
            TokenKind::Application => "application",
        },
        "applications": t.applications,
        "scopes": t.effective_scopes(),
        "workspaces": t.workspaces,
        "providers": t.providers,
    })
}

fn add(global: &GlobalArgs, args: TokensAddArgs) -> CliResult {
    let path = config_path(global)?;
    let current = load_config(&path)?;
    if current.tokens.iter().any(|t| t.name == args.name) {
        return Err(usage(
            "duplicate_token",
            format!(
                "a token named `{}` is already configured; pick another name (tokens are never rewritten)",
                args.name
            ),
        ));
    }
    let owner = installer_config::first_token(&current)
        .ok_or_else(|| usage("invalid_config", format!("{} has no token", path.display())))?;
    let token = new_token(&args, &owner.principal)?;
    let on_terminal = std::io::stdout().is_terminal();
    if args.output.is_none() && !on_terminal {
        return Err(usage(
            "secret_needs_terminal",
            "the new token's secret is shown once, on a terminal; stdout is not one, so pass --output FILE (created 0600). Nothing was written".to_owned(),
        ));
    }
    if let Some(file) = &args.output {
        write_secret(file, &token.secret)?;
    }
    let value = serde_json::to_value(&token).map_err(|e| CliError::failure("internal", e))?;
    let written = installer_config::edit_tokens(&path, |tokens: &mut Vec<Value>| {
        tokens.push(value);
        Ok::<(), EditFailure>(())
    });
    if let Err(e) = written {
        if let Some(file) = &args.output {
            // The secret of a token that was never written opens nothing.
            let _ = std::fs::remove_file(file);
        }
        return Err(e.into_cli());
    }
    let reload = reload_running(global);
    if args.out.json {
        let mut receipt = describe(&token);
        match &args.output {
            Some(file) => receipt["output"] = json!(file),
            None => receipt["token"] = json!(token.secret),
        }
        receipt["reload"] = json!(reload);
        return Ok(output::json(&receipt)?);
    }
    output::line(format!(
        "added token `{}` for application `{}`: its sessions see that application only",
        token.name, args.application
    ))?;
    match &args.output {
        Some(file) => output::line(format!("  secret written to {} (0600)", file.display()))?,
        None => {
            output::line("  secret (shown once; give it to the application):")?;
            output::line(&token.secret)?;
        }
    }
    output::line(format!("  {reload}"))?;
    Ok(())
}

fn list(global: &GlobalArgs, json: bool) -> CliResult {
    let config = load_config(&config_path(global)?)?;
    if json {
        let tokens: Vec<Value> = config.tokens.iter().map(describe).collect();
        return Ok(output::json(&json!({ "tokens": tokens }))?);
    }
    let mut table = Table::new(&[
        "NAME",
        "KIND",
        "PRINCIPAL",
        "APPLICATIONS",
        "WORKSPACES",
        "PROVIDERS",
    ]);
    let all = |v: &Option<Vec<String>>| v.as_ref().map_or("*".to_owned(), |v| v.join(","));
    for t in &config.tokens {
        let kind = match t.kind() {
            TokenKind::Owner => "owner",
            TokenKind::Application => "application",
        };
        table.row(vec![
            Cell::Text(t.name.clone()),
            Cell::Text(kind.to_owned()),
            Cell::Text(t.principal.clone()),
            Cell::Text(all(&t.applications)),
            Cell::Text(all(&t.workspaces)),
            Cell::Text(all(&t.providers)),
        ]);
    }
    table.print()?;
    Ok(())
}

fn revoke(global: &GlobalArgs, name: &str, json: bool) -> CliResult {
    let path = config_path(global)?;
    let current = load_config(&path)?;
    let Some(index) = current.tokens.iter().position(|t| t.name == name) else {
        return Err(usage(
            "unknown_token",
            format!("no token named `{name}` is configured (`tokens list` names them)"),
        ));
    };
    if index == 0 {
        return Err(usage(
            "owner_token",
            format!(
                "`{name}` is the owner's token (the CLI's own); it is never revoked here. Nothing was changed"
            ),
        ));
    }
    let receipt = describe(&current.tokens[index]);
    installer_config::edit_tokens(&path, |tokens: &mut Vec<Value>| {
        tokens.retain(|t| t.get("name").and_then(Value::as_str) != Some(name));
        Ok::<(), EditFailure>(())
    })
    .map_err(EditFailure::into_cli)?;
    let reload = reload_running(global);
    if json {
        return Ok(output::json(&json!({
            "revoked": receipt,
            "reload": reload,
        }))?);
    }
    output::line(format!(
        "revoked token `{name}`: its sessions and subscriptions end once the service reloads"
    ))?;
    output::line(format!("  {reload}"))?;
    Ok(())
}
