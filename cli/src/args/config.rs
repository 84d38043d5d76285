//! The arguments of configuring the controller: `providers` and `config`.
//! Declarations only; `commands/` does the work.

use clap::{Args, Subcommand};
use clap_complete::engine::ArgValueCandidates;

use super::candidates::Candidates;

use super::duration::parse_duration;
use super::{JsonArg, ListArgs};

#[derive(Debug, Subcommand)]
pub(crate) enum ProvidersCommand {
    /// List the catalogue and the configured providers, and whether each
    /// command is found (PATH, then ~/.local/bin).
    List(ListArgs),
    /// Add a provider: a catalogue name fills command, args and allowlist.
    Add(ProvidersAddArgs),
    /// Remove a configured provider (its secrets stay in the env file).
    Remove {
        /// Provider name.
        #[arg(add = ArgValueCandidates::new(Candidates::ConfiguredProviderNames))]
        name: String,
    },
    /// Start the agent in a scratch directory and report what it supports.
    Check {
        /// Provider name (configured, catalogue or `echo`).
        #[arg(add = ArgValueCandidates::new(Candidates::CheckableProviderNames))]
        name: String,
        /// Also open a session (`session/new`): checks login and modes.
        #[arg(long)]
        session: bool,
        /// Also probe approval acceptance: the running controller runs a
        /// turn in a scratch workspace asking the agent to write a file,
        /// rejects the permission, checks the file system itself and
        /// records honoured / ignored / inconclusive for this provider
        /// definition (shown by `providers list` and `doctor`).
        #[arg(long)]
        policy: bool,
        /// How long each step may take (seconds or a duration: 90s, 2m).
        #[arg(long, value_name = "DURATION", default_value_t = 60, value_parser = parse_duration)]
        timeout: u64,
        #[command(flatten)]
        out: JsonArg,
    },
}

#[derive(Debug, Args)]
pub(crate) struct ProvidersAddArgs {
    /// Provider name (a catalogue name fills the defaults).
    #[arg(add = ArgValueCandidates::new(Candidates::CatalogueNames))]
    pub(crate) name: String,
    /// Executable: absolute path or bare name [default: the catalogue's].
    #[arg(long, value_name = "C")]
    pub(crate) command: Option<String>,
    /// Argument (repeat; replaces the catalogue's arguments).
    #[arg(long = "arg", value_name = "A", allow_hyphen_values = true)]
    pub(crate) args: Vec<String>,
    /// Environment name the agent may read from the service's environment
    /// or the env file (repeat; added to the catalogue's).
    #[arg(long = "allow-env", value_name = "NAME")]
    pub(crate) allow_env: Vec<String>,
    /// A constant, non-secret setting (a base URL, a model, a mode), stored
    /// in the provider's `env` (repeat). Keys go in --secret.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub(crate) env: Vec<String>,
    /// Do not give the agent this shell's PATH (as `env.PATH`) and the
    /// service's HOME (allowlisted), which `add` does by default.
    #[arg(long)]
    pub(crate) no_default_env: bool,
    /// Store this allowlisted variable's value in the env file; read from a
    /// hidden prompt, or one line per secret from stdin when it is not a TTY.
    #[arg(long = "secret", value_name = "NAME")]
    pub(crate) secrets: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Print the configuration file's path.
    Path,
    /// Print the effective configuration, secrets masked.
    Show(JsonArg),
    /// Check the configuration and the env file; errors name the field.
    Validate(JsonArg),
    /// Print the configuration's JSON Schema.
    Schema,
    /// Make the running service re-read its config file: providers and
    /// workspaces change for later turns; an invalid file is refused (exit 2)
    /// and the previous configuration stays in effect.
    Reload(JsonArg),
}
