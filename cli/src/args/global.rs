//! The options every command accepts: they select which installation is
//! meant (and which one shell completion asks for candidates).

use std::path::PathBuf;

use clap::Args;

/// Options every command accepts; they select which installation is meant.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct GlobalArgs {
    /// Configuration file [default: ~/.config/lapis-ai-controller/config.json].
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        help_heading = "Global options"
    )]
    pub(crate) config: Option<PathBuf>,
    /// Isolated instance name (its own config, home, socket and service unit).
    #[arg(
        long,
        global = true,
        value_name = "NAME",
        help_heading = "Global options"
    )]
    pub(crate) instance: Option<String>,
    /// Talk to the controller on another host: ssh://[user@]host[:port]
    /// (runs `lapis-ai-controller dial-stdio` there with the system ssh).
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "LAPIS_AI_CONTROLLER_HOST",
        help_heading = "Global options"
    )]
    pub(crate) host: Option<String>,
}
