//! What every service command shares: the configuration, the socket, an
//! authenticated client, and the mapping of client errors to exit classes.
//!
//! The CLI authenticates with the configuration's first token as the
//! application `lapis-cli`; the token is never printed, and no error built
//! here can contain it (client errors carry codes and messages only).

use std::path::{Path, PathBuf};

use lapis_protocol::client::{Client, ClientError, Credential};
use lapis_protocol::config::Config;

use crate::args::GlobalArgs;
use crate::exit::CliError;

/// The application name the CLI's sessions carry.
pub const APPLICATION: &str = "lapis-cli";

/// The configuration and the controller home it designates.
pub struct Target {
    /// Validated configuration.
    pub config: Config,
    /// Controller home, by the one precedence (flag, environment, config).
    pub home: PathBuf,
}

/// Loads and validates the configuration of the selected instance.
pub fn target(global: &GlobalArgs, workspace: Option<&Path>) -> Result<Target, CliError> {
    let paths = super::paths::resolve(global, workspace, None)?;
    let config = Config::load(&paths.config).map_err(|e| CliError::failure(e.code(), e))?;
    let home = paths
        .controller_home_for(Some(&config.controller_home))
        .path;
    Ok(Target { config, home })
}

/// A client error as a CLI error: unreachable is exit 3, the rest exit 2
/// with the server's stable code.
pub fn client_error(e: ClientError) -> CliError {
    match &e {
        ClientError::Unavailable { .. } | ClientError::Disconnected { .. } => {
            let code = e.code();
            CliError::unavailable(
                code,
                anyhow::Error::new(e)
                    .context("is the service running? try `lapis-ai-controller status`"),
            )
        }
        _ => CliError::failure(e.code(), e),
    }
}

/// Connects to the selected instance's socket and says hello.
pub fn connect(global: &GlobalArgs) -> Result<Client, CliError> {
    let target = target(global, None)?;
    connect_to(&target)
}

/// Connects to `target`'s socket and says hello with its first token.
pub fn connect_to(target: &Target) -> Result<Client, CliError> {
    let socket = target.home.join(lapis_protocol::home::SOCKET_FILE);
    let mut client = Client::connect(&socket).map_err(client_error)?;
    client.set_max_frame(target.config.server.max_frame_bytes);
    client
        .hello(Credential::Token {
            token: target.config.primary_token().secret.clone(),
            application: APPLICATION.to_owned(),
        })
        .map_err(client_error)?;
    Ok(client)
}
