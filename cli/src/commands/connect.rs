//! What every service command shares: the configuration, the socket, an
//! authenticated client, and the mapping of client errors to exit classes.
//!
//! The CLI authenticates with the configuration's first token as the
//! application `lapis-cli`; the token is never printed, and no error built
//! here can contain it (client errors carry codes and messages only).

use std::path::{Path, PathBuf};

use lapis_installer::{Paths, unit};
use lapis_protocol::client::{Client, ClientError, Credential, SshDial, SshHost};
use lapis_protocol::config::Config;

use crate::args::GlobalArgs;
use crate::exit::CliError;

/// The application name the CLI's sessions carry.
pub(super) const APPLICATION: &str = "lapis-cli";

/// How long one CLI request may wait for its answer: every method answers
/// promptly, so a controller that has not answered by then is wedged and the
/// command exits 3 instead of hanging.
pub(super) const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The configuration and the controller home it designates.
pub(super) struct Target {
    /// Validated configuration (for a client command with a broken file,
    /// only the part a client needs: see [`client_target`]).
    pub(crate) config: Config,
    /// Why the file as a whole was refused, when a client command goes on
    /// with the part it needs: the refusal's stable code and its message
    /// (names fields, never values).
    pub(crate) problem: Option<(&'static str, String)>,
    /// Controller home, by the one precedence (flag, environment, config).
    pub(crate) home: PathBuf,
    /// The instance's paths (unit, launcher), for what-to-do messages.
    pub(crate) paths: Paths,
    /// `--host ssh://…`: the controller is on another host, and `config`
    /// is a stand-in (this host's file is not read: the remote one counts).
    pub(crate) remote: Option<SshDial>,
}

/// Loads the configuration of the selected instance and runs both of its
/// checks (structure, then this machine).
pub(super) fn target(global: &GlobalArgs, workspace: Option<&Path>) -> Result<Target, CliError> {
    let paths = super::paths::resolve(global, workspace, None)?;
    let mut config = Config::load(&paths.config).map_err(|e| CliError::failure(e.code(), e))?;
    config
        .check_on_this_machine()
        .map_err(|e| CliError::failure(e.code(), e))?;
    let home = paths
        .controller_home_for(Some(&config.controller_home))
        .path;
    Ok(Target {
        config,
        home,
        paths,
        problem: None,
        remote: None,
    })
}

/// [`target`] for commands that only talk to the running service (`status`,
/// threads, turns, …). One typo in a provider or workspace must not lock the
/// owner out of the service that is running with the last good file: when
/// the whole file is refused but its `controllerHome`, first token and frame
/// limit still form a valid configuration, the command goes on with those and
/// says once, on stderr, what is wrong. `serve` and `config reload` keep the
/// strict [`target`]. A file that is missing, unreadable or not JSON at all,
/// or whose first token is itself invalid, is still an error.
pub(super) fn client_target(global: &GlobalArgs) -> Result<Target, CliError> {
    if let Some(url) = super::contexts::remote_url(global)? {
        return remote_target(global, &url);
    }
    local_client_target(global)
}

/// [`client_target`] on this host whatever `--host` or the context in use
/// say (`dial-stdio`, `logs`).
pub(super) fn local_client_target(global: &GlobalArgs) -> Result<Target, CliError> {
    let strict = match target(global, None) {
        Ok(t) => return Ok(t),
        Err(e) => e,
    };
    let Some(mut t) = client_part(global) else {
        return Err(strict);
    };
    let problem = format!("{:#}", strict.error);
    let code = strict.code;
    eprintln!(
        "warning: {problem}\nwarning: going on with the controller home and the first token; `serve` and `config reload` refuse this file until it is fixed (`{} config validate`)",
        lapis_release::PRODUCT
    );
    t.problem = Some((code, problem));
    Ok(t)
}

/// The part of the configuration a client needs, validated on its own.
fn client_part(global: &GlobalArgs) -> Option<Target> {
    use serde_json::{Value, json};
    let paths = super::paths::resolve(global, None, None).ok()?;
    let bytes = lapis_protocol::config::read_config_file(&paths.config).ok()?;
    let doc: Value = serde_json::from_slice(&bytes).ok()?;
    let mut server = json!({});
    if let Some(max) = doc.pointer("/server/maxFrameBytes").filter(|v| v.is_u64()) {
        server["maxFrameBytes"] = max.clone();
    }
    let part = json!({
        "schema": doc.get("schema")?,
        "instance": doc.get("instance")?,
        "controllerHome": doc.get("controllerHome")?,
        "tokens": [doc.pointer("/tokens/0")?],
        "server": server,
    });
    let part = serde_json::to_vec(&part).ok()?;
    let config = Config::parse(&part, &paths.config).ok()?;
    let home = paths
        .controller_home_for(Some(&config.controller_home))
        .path;
    Some(Target {
        config,
        home,
        paths,
        problem: None,
        remote: None,
    })
}

/// The target of `--host ssh://…`: no local file is read (this machine
/// may have none); `config` holds defaults only, and its placeholder token
/// is never sent (the remote `dial-stdio` authenticates).
fn remote_target(global: &GlobalArgs, url: &str) -> Result<Target, CliError> {
    let host = SshHost::parse(url).map_err(|m| {
        CliError::failure(
            "invalid_host",
            anyhow::anyhow!("--host / LAPIS_AI_CONTROLLER_HOST: {m}"),
        )
    })?;
    let mut dial = SshDial::from_env(host);
    if let Some(instance) = &global.instance {
        dial.remote_args = vec!["--instance".to_owned(), instance.clone()];
    }
    let paths = super::paths::resolve(global, None, None)?;
    let stand_in = serde_json::json!({
        "schema": 1,
        "instance": "default",
        "controllerHome": "/nonexistent/remote",
        "tokens": [{ "name": "remote", "principal": "owner",
                     "secret": format!("lapis_{}", "0".repeat(64)) }],
    });
    let bytes = serde_json::to_vec(&stand_in).map_err(anyhow::Error::new)?;
    let config = Config::parse(&bytes, std::path::Path::new("<remote>"))
        .map_err(|e| CliError::failure(e.code(), e))?;
    Ok(Target {
        config,
        home: PathBuf::from("<remote>"),
        paths,
        problem: None,
        remote: Some(dial),
    })
}

/// Over ssh: a child `ssh … dial-stdio` and a `hello` without a secret.
fn connect_remote(dial: &SshDial) -> Result<Client, CliError> {
    let mut client = dial.connect().map_err(client_error)?;
    client.set_request_timeout(Some(REMOTE_HELLO_TIMEOUT));
    let hello = client.hello(Credential::Relayed {
        application: APPLICATION.to_owned(),
    });
    match hello {
        Ok(_) => {
            client.set_request_timeout(Some(REQUEST_TIMEOUT));
            Ok(client)
        }
        Err(ClientError::Rpc(e))
            if e.error_code() == Some(lapis_protocol::ErrorCode::ProtocolUnsupported) =>
        {
            Err(CliError::failure(
                "version_mismatch",
                anyhow::anyhow!(
                    "the controller on {} does not speak this client's protocol {} ({}): install the same release on both hosts (`lapis-ai-controller version` on each; `update` upgrades)",
                    dial.host.url(),
                    lapis_protocol::PROTOCOL,
                    e.message
                ),
            ))
        }
        Err(e) => Err(client_error(e)),
    }
}

/// How long the first answer over ssh may take: the ssh handshake (and a
/// password or host-key prompt on the terminal) comes first.
const REMOTE_HELLO_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// A client error as a CLI error: unreachable is exit 3, the rest exit 2
/// with the server's stable code.
pub(super) fn client_error(e: ClientError) -> CliError {
    match &e {
        // The ssh transport's own failures carry their fix.
        ClientError::Remote { code, .. } if e.is_service_unavailable() => {
            CliError::unavailable(code, anyhow::Error::new(e))
        }
        ClientError::Remote { code, .. } => CliError::failure(code, anyhow::Error::new(e)),
        // Running, but at a connection limit: say so, never "not running".
        ClientError::Rpc(rpc)
            if rpc.error_code() == Some(lapis_protocol::ErrorCode::LimitReached) =>
        {
            let message = format!(
                "the controller is running but refuses this connection ({}); close other clients' connections or raise server.maxConnections",
                rpc.message
            );
            CliError::unavailable(e.code(), anyhow::anyhow!(message))
        }
        _ if e.is_service_unavailable() => {
            let code = e.code();
            CliError::unavailable(
                code,
                anyhow::Error::new(e).context(
                    "the controller is not answering; `lapis-ai-controller doctor` checks the service",
                ),
            )
        }
        _ => CliError::failure(e.code(), e),
    }
}

/// What to do when nothing answers: start the unit when one is installed,
/// else (no service manager, or none installed) `serve --background`; or
/// run `serve` by hand.
pub(super) fn start_hint(paths: &Paths) -> String {
    let serve = unit::serve_command_line(paths);
    if paths.unit.path.exists() {
        format!(
            "the controller is not running: start it with `{}`, or without the service with `{serve} --background`",
            unit::start_command(paths),
        )
    } else {
        format!(
            "the controller is not running: start it with `{serve} --background` (no service unit is installed; `install` adds one where a service manager runs), or in the foreground with `{serve}`"
        )
    }
}

/// Connects to the selected instance's socket and says hello.
pub(super) fn connect(global: &GlobalArgs) -> Result<Client, CliError> {
    let target = client_target(global)?;
    connect_to(&target)
}

/// Connects to `target`'s socket and says hello with its first token.
pub(super) fn connect_to(target: &Target) -> Result<Client, CliError> {
    if let Some(dial) = &target.remote {
        return connect_remote(dial);
    }
    let socket = target.home.join(lapis_protocol::home::SOCKET_FILE);
    // A server at its connection cap answers `limit_reached` before it
    // reads `hello`, so nothing was applied: a few spaced retries (waits of
    // 50, 100, 200, 400 ms) ride out a burst of other connections.
    let mut backoff = std::time::Duration::from_millis(50);
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut client = Client::connect(&socket).map_err(|e| {
            let code = e.code();
            if let (true, Some((code, problem))) = (e.is_unavailable(), &target.problem) {
                // Nothing runs, and `serve` would refuse this file: the
                // configuration is what to fix first.
                CliError::failure(
                    code,
                    anyhow::anyhow!(
                        "{problem}; the controller is not running and will not start with this configuration"
                    ),
                )
            } else if e.is_unavailable() {
                CliError::unavailable(
                    code,
                    anyhow::Error::new(e).context(start_hint(&target.paths)),
                )
            } else {
                client_error(e)
            }
        })?;
        client.set_max_frame(target.config.server.max_frame_bytes);
        client.set_request_timeout(Some(REQUEST_TIMEOUT));
        match client.hello(Credential::Token {
            token: target.config.primary_token().secret.clone(),
            application: APPLICATION.to_owned(),
        }) {
            Ok(_) => return Ok(client),
            Err(ClientError::Rpc(e))
                if attempts < 5
                    && e.error_code() == Some(lapis_protocol::ErrorCode::LimitReached) =>
            {
                std::thread::sleep(backoff);
                backoff *= 2;
            }
            Err(e) => return Err(client_error(e)),
        }
    }
}
