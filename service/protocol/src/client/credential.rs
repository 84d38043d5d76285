//! How a client authenticates: the [`Credential`] given to `hello`.
//!
//! What must stay true: the secret never appears in a `Debug` output (or,
//! through it, in an error); it leaves this type only as `hello`'s params
//! and for scrubbing text that must not quote it.

use std::fmt;

use crate::{HelloParams, PROTOCOL};

/// How to authenticate.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// A bootstrap token from the configuration, with the application name.
    Token {
        /// The secret.
        token: String,
        /// The application the session is for.
        application: String,
    },
    /// A session bearer from an earlier `hello`.
    Bearer(String),
    /// No secret here: the transport authenticates. Over `ssh://` the
    /// remote `dial-stdio` says `hello` with its own host's token for this
    /// application and strips any bearer from the answer, so no secret
    /// leaves that host.
    Relayed {
        /// The application the session is for.
        application: String,
    },
}

impl Credential {
    /// The `hello` params (also managed mode's startup line) for this
    /// credential.
    pub(crate) fn hello_params(&self) -> HelloParams {
        let (token, bearer, application) = match self {
            Credential::Token { token, application } => {
                (Some(token.clone()), None, Some(application.clone()))
            }
            Credential::Bearer(b) => (None, Some(b.clone()), None),
            Credential::Relayed { application } => (None, None, Some(application.clone())),
        };
        HelloParams {
            protocol: PROTOCOL.to_owned(),
            token,
            bearer,
            application,
            ticket: None,
        }
    }

    /// The secret itself, for scrubbing text that must not quote it.
    pub(crate) fn secret(&self) -> &str {
        match self {
            Credential::Token { token, .. } => token,
            Credential::Bearer(b) => b,
            Credential::Relayed { .. } => "",
        }
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credential::Token { application, .. } => f
                .debug_struct("Token")
                .field("application", application)
                .finish_non_exhaustive(),
            Credential::Bearer(_) => f.write_str("Bearer(<redacted>)"),
            Credential::Relayed { application } => f
                .debug_struct("Relayed")
                .field("application", application)
                .finish(),
        }
    }
}
