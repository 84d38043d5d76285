//! `contexts add | use | list | remove`: named remote controllers
//! (`ssh://…`), the way `docker context` names hosts.

use clap::Subcommand;

use super::JsonArg;

#[derive(Debug, Subcommand)]
pub(crate) enum ContextsCommand {
    /// Name a remote controller: `contexts add NAME ssh://[user@]host[:port]`.
    Add {
        /// The context's name (1-64 of [A-Za-z0-9._-]; `default` is this host).
        name: String,
        /// Where its controller is: ssh://[user@]host[:port].
        url: String,
    },
    /// Make client commands talk to this context (`default`: this host).
    Use {
        /// The context's name, or `default`.
        name: String,
    },
    /// List the contexts and which one is in use.
    List(JsonArg),
    /// Forget a context (the one in use falls back to `default`).
    Remove {
        /// The context's name.
        name: String,
    },
}
