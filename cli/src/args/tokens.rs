//! `tokens add | list | revoke`: the owner's application tokens.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::JsonArg;

#[derive(Debug, Subcommand)]
pub(crate) enum TokensCommand {
    /// Write a new token bound to one application (its secret printed once).
    Add(TokensAddArgs),
    /// List the configured tokens (never their secrets).
    List(JsonArg),
    /// Remove a token: its sessions and subscriptions end at once.
    Revoke {
        /// The token's name.
        name: String,
        #[command(flatten)]
        out: JsonArg,
    },
}

#[derive(Debug, Args)]
pub(crate) struct TokensAddArgs {
    /// The token's name (1-64 of [A-Za-z0-9._-], unique).
    pub(crate) name: String,
    /// The application it speaks for; its sessions see that application only.
    #[arg(long, value_name = "APP")]
    pub(crate) application: String,
    /// Scopes, comma separated [default: every scope except the
    /// cross-application ones].
    #[arg(long, value_name = "SCOPE,…", value_delimiter = ',')]
    pub(crate) scopes: Vec<String>,
    /// A workspace id it may use (repeatable) [default: every workspace].
    #[arg(long = "workspace", value_name = "ID")]
    pub(crate) workspaces: Vec<String>,
    /// A provider it may run turns with (repeatable) [default: every provider].
    #[arg(long = "provider", value_name = "NAME")]
    pub(crate) providers: Vec<String>,
    /// Write the secret to this new file (mode 0600) instead of the terminal.
    #[arg(long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) out: JsonArg,
}
