//! One bootstrap token of the configuration, and what its kind means.
//!
//! Two kinds (`service/PROTOCOL.md`, Authority):
//! - the **owner's** token — no `applications` — is the one `install`
//!   creates: its sessions see and act on every application of its
//!   principal;
//! - an **application** token — `applications` set (`tokens add NAME
//!   --application APP`) — speaks for those applications only, and each
//!   session sees only its own application. Its default scopes leave out
//!   the cross-application ones ([`Scope::crosses_applications`]), and it
//!   may be limited to workspaces and providers (grants).
//!
//! What must stay true: `Debug` never shows the secret, and a token
//! written once is never rewritten (tokens are appended or removed whole).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Scope;

/// One bootstrap token. `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenSpec {
    /// Unique name of the credential (sessions are keyed by it).
    pub name: String,
    /// Principal sessions of this token act for.
    pub principal: String,
    /// The secret (`lapis_` + 64 lowercase hex digits).
    pub secret: String,
    /// Granted scopes; absent means every scope of the token's kind (an
    /// application token's default leaves out the cross-application ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<Scope>>,
    /// Applications this token may speak for; absent means any, and makes
    /// it an owner's token. A `hello` naming another application with this
    /// token fails `forbidden`, so a token handed to one application cannot
    /// impersonate another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applications: Option<Vec<String>>,
    /// Workspace ids this token's sessions may use; absent means every
    /// workspace. Naming another is refused `forbidden`; a thread on
    /// another answers like an unknown one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspaces: Option<Vec<String>>,
    /// Provider names this token's sessions may run turns with; absent
    /// means every provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub providers: Option<Vec<String>>,
}

/// What a token is, for the visibility rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// No `applications`: sees every application of its principal.
    Owner,
    /// Bound to `applications`: each session sees its own application only.
    Application,
}

impl TokenSpec {
    /// The token's kind.
    pub fn kind(&self) -> TokenKind {
        match self.applications {
            None => TokenKind::Owner,
            Some(_) => TokenKind::Application,
        }
    }

    /// Whether a `hello` with this token may name `application`.
    pub fn allows_application(&self, application: &str) -> bool {
        self.applications
            .as_ref()
            .is_none_or(|apps| apps.iter().any(|a| a == application))
    }

    /// Whether the token's grants allow workspace `id`.
    pub fn allows_workspace(&self, id: &str) -> bool {
        self.workspaces
            .as_ref()
            .is_none_or(|ids| ids.iter().any(|w| w == id))
    }

    /// Whether the token's grants allow provider `name`.
    pub fn allows_provider(&self, name: &str) -> bool {
        self.providers
            .as_ref()
            .is_none_or(|names| names.iter().any(|p| p == name))
    }

    /// The scopes a session of this token gets: the listed ones, else every
    /// scope of its kind.
    pub fn effective_scopes(&self) -> Vec<Scope> {
        let mut scopes = self.scopes.clone().unwrap_or_else(|| {
            Scope::ALL
                .into_iter()
                .filter(|s| self.kind() == TokenKind::Owner || !s.crosses_applications())
                .collect()
        });
        scopes.sort();
        scopes.dedup();
        scopes
    }
}

impl fmt::Debug for TokenSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSpec")
            .field("name", &self.name)
            .field("principal", &self.principal)
            .field("secret", &"<redacted>")
            .field("scopes", &self.scopes)
            .field("applications", &self.applications)
            .field("workspaces", &self.workspaces)
            .field("providers", &self.providers)
            .finish()
    }
}
