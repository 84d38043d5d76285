//! The handshake's shape. It is fixed (see ARCHITECTURE.md, "Wire protocol"):
//! every client depends on it, so fields are only ever added, never renamed.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::scopes::Scope;

/// The only protocol this server speaks.
pub const PROTOCOL: &str = "lapis-ai-controller/1";

/// `hello` params: the protocol plus exactly one credential.
///
/// `Debug` is written by hand so a credential can never reach a log line.
#[derive(Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HelloParams {
    /// Must be [`PROTOCOL`]; checked before any credential.
    pub protocol: String,
    /// A bootstrap token from the configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// A session bearer returned by an earlier `hello`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer: Option<String>,
    /// The application's name; required with a token, ignored with a bearer
    /// (the session already has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application: Option<String>,
    /// A tool ticket (the MCP bridge of one agent session, never an
    /// application): authenticates the connection for `tools.list` and
    /// `tools.call` of that session's thread only. Exclusive with `token`
    /// and `bearer`. A secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
}

impl fmt::Debug for HelloParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HelloParams")
            .field("protocol", &self.protocol)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("bearer", &self.bearer.as_ref().map(|_| "<redacted>"))
            .field("application", &self.application)
            .field("ticket", &self.ticket.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The session as the client sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionView {
    /// Session id (not a secret).
    pub id: String,
    /// Principal the session acts for.
    pub principal: String,
    /// Application the session belongs to.
    pub application: String,
    /// Granted scopes.
    pub scopes: Vec<Scope>,
    /// Set (to the storage condition: `disk_full`, `read_only`, `io_error`)
    /// when the controller could not write its database as the session was
    /// issued: the session then lives in memory only, holds the token's read
    /// scopes only (`status:read`, `workspaces:read`, `threads:read`), comes
    /// without a bearer, and a write answers `storage_unavailable`. `hello`
    /// again once space is freed for a full session.
    #[serde(rename = "readOnly", default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<String>,
}

/// The server's build identity as it reports it: `lapis_release::BuildIdentity`
/// serialized (`version`, `commit`, `date`, `target`). An object here, not
/// that type, so the SDK does not compile the release pipeline; a caller that
/// wants the fields typed deserializes it into `BuildIdentity`.
pub type BuildInfo = serde_json::Map<String, serde_json::Value>;

/// The server's identity, as sent in `hello` and in the managed-mode
/// readiness frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerView {
    /// Always [`PROTOCOL`].
    pub protocol: String,
    /// Version of the running build.
    pub version: String,
    /// Full build identity.
    pub build: BuildInfo,
}

/// `hello` result.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloResult {
    /// The session.
    pub session: SessionView,
    /// The session bearer, only when the session was newly issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer: Option<String>,
    /// The server.
    pub server: ServerView,
}

impl fmt::Debug for HelloResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HelloResult")
            .field("session", &self.session)
            .field("bearer", &self.bearer.as_ref().map(|_| "<redacted>"))
            .field("server", &self.server)
            .finish()
    }
}

/// Managed mode's startup line: the same credential fields as `hello`.
pub type StartupLine = HelloParams;

/// Name of the managed-mode readiness notification.
pub const READY: &str = "ready";
/// Name of the managed-mode startup failure notification.
pub const STARTUP_FAILED: &str = "startupFailed";

/// Managed-mode readiness params: who the server is and which session the
/// stdio connection runs as. Never carries a credential.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ready {
    /// Protocol, version, build.
    pub server: ServerView,
    /// The session the startup credential authenticated.
    pub session: SessionView,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architecture_example_parses_and_debug_hides_credentials() {
        let p: HelloParams = serde_json::from_str(
            r#"{"protocol":"lapis-ai-controller/1","token":"lapis_secret","application":"my-app"}"#,
        )
        .unwrap();
        assert_eq!(p.application.as_deref(), Some("my-app"));
        assert!(!format!("{p:?}").contains("lapis_secret"));
        let b: HelloParams =
            serde_json::from_str(r#"{"protocol":"lapis-ai-controller/1","bearer":"lapis_s_x"}"#)
                .unwrap();
        assert!(!format!("{b:?}").contains("lapis_s_x"));
        assert!(
            serde_json::from_str::<HelloParams>(r#"{"protocol":"x","tokn":"y"}"#).is_err(),
            "unknown fields are refused"
        );
    }
}
