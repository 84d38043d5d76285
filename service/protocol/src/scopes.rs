//! The one table: every method, its wire name and the scope it requires.
//!
//! Dispatch goes through [`Method::parse`], so a method missing from
//! [`METHODS`] cannot be called at all, and a method present here always has a
//! scope (a test enumerates them). `hello` is the only entry without one: it is
//! what establishes the session.

use serde::{Deserialize, Serialize};

/// A permission a session may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum Scope {
    /// Read the controller's status.
    #[serde(rename = "status:read")]
    StatusRead,
    /// List workspaces.
    #[serde(rename = "workspaces:read")]
    WorkspacesRead,
    /// Register and remove workspaces.
    #[serde(rename = "workspaces:write")]
    WorkspacesWrite,
    /// Read threads, turns and the journal (replay and subscriptions).
    #[serde(rename = "threads:read")]
    ThreadsRead,
    /// Create and configure threads.
    #[serde(rename = "threads:write")]
    ThreadsWrite,
    /// Submit and cancel turns.
    #[serde(rename = "turns:write")]
    TurnsWrite,
    /// Resolve fenced turns (the owner's confirmation).
    #[serde(rename = "turns:resolve")]
    TurnsResolve,
    /// Resolve (or cancel-as-resolution) a fenced turn of *any* application
    /// of the session's principal: the operator's way to unblock a
    /// workspace another application fenced. Never crosses principals.
    #[serde(rename = "turns:resolve-any")]
    TurnsResolveAny,
    /// Answer an agent's permission requests.
    #[serde(rename = "permissions:respond")]
    PermissionsRespond,
    /// See and answer the permission requests of *any* application of the
    /// session's principal (the durable inbox: a request can be answered
    /// from the phone while the editor that asked is gone). Never crosses
    /// principals.
    #[serde(rename = "permissions:respond-any")]
    PermissionsRespondAny,
    /// Revoke sessions.
    #[serde(rename = "sessions:revoke")]
    SessionsRevoke,
    /// Ask the controller to re-read its configuration, or to start a
    /// provider's agent to check it (`providers.check`): the owner's
    /// administration of the installation.
    #[serde(rename = "config:reload")]
    ConfigReload,
}

impl Scope {
    /// Every scope; config tokens without `scopes` get all of them.
    pub const ALL: [Scope; 12] = [
        Scope::StatusRead,
        Scope::WorkspacesRead,
        Scope::WorkspacesWrite,
        Scope::ThreadsRead,
        Scope::ThreadsWrite,
        Scope::TurnsWrite,
        Scope::TurnsResolve,
        Scope::TurnsResolveAny,
        Scope::PermissionsRespond,
        Scope::PermissionsRespondAny,
        Scope::SessionsRevoke,
        Scope::ConfigReload,
    ];

    /// The wire name (`threads:read`).
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::StatusRead => "status:read",
            Scope::WorkspacesRead => "workspaces:read",
            Scope::WorkspacesWrite => "workspaces:write",
            Scope::ThreadsRead => "threads:read",
            Scope::ThreadsWrite => "threads:write",
            Scope::TurnsWrite => "turns:write",
            Scope::TurnsResolve => "turns:resolve",
            Scope::TurnsResolveAny => "turns:resolve-any",
            Scope::PermissionsRespond => "permissions:respond",
            Scope::PermissionsRespondAny => "permissions:respond-any",
            Scope::SessionsRevoke => "sessions:revoke",
            Scope::ConfigReload => "config:reload",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Whether the scope reaches another application's threads (the
    /// operator's crossings): never in an application token's default set.
    pub fn crosses_applications(self) -> bool {
        matches!(self, Scope::TurnsResolveAny | Scope::PermissionsRespondAny)
    }

    /// Whether every method of this scope only reads the store (the scopes
    /// a read-only session keeps while the controller cannot write). A
    /// match without a wildcard, so a new scope is decided here.
    pub fn only_reads(self) -> bool {
        match self {
            Scope::StatusRead | Scope::WorkspacesRead | Scope::ThreadsRead => true,
            Scope::WorkspacesWrite
            | Scope::ThreadsWrite
            | Scope::TurnsWrite
            | Scope::TurnsResolve
            | Scope::TurnsResolveAny
            | Scope::PermissionsRespond
            | Scope::PermissionsRespondAny
            | Scope::SessionsRevoke
            | Scope::ConfigReload => false,
        }
    }
}

/// [`Method`] and [`METHODS`], with a `register` and an `unregister`
/// method for each named port kind (`crate::port_kinds!`, which also
/// gives the calls and the SDK's methods), after the tool endpoints'.
macro_rules! method_table {
    ($(
        $(#[$doc:meta])*
        $Kind:ident {
            member: $member:ident = $wire:literal,
            label: $label:literal,
            binding: { $(#[$bdoc:meta])* },
            params: $params:ty,
            register: $Reg:ident = $reg:literal, $reg_fn:ident,
            unregister: $Unreg:ident = $unreg:literal, $unreg_fn:ident,
            handler: $Handler:path, $setter:ident, $serve:ident, $answer:path, [$($cb:path),+ $(,)?],
        }
    )*) => {
        /// Every method of the protocol.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Method {
            /// `hello`.
            Hello,
            /// `status`.
            Status,
            /// `workspaces.add`.
            WorkspacesAdd,
            /// `workspaces.list`.
            WorkspacesList,
            /// `workspaces.remove`.
            WorkspacesRemove,
            /// `threads.create`.
            ThreadsCreate,
            /// `threads.reserve`.
            ThreadsReserve,
            /// `threads.get`.
            ThreadsGet,
            /// `threads.list`.
            ThreadsList,
            /// `threads.configure`.
            ThreadsConfigure,
            /// `threads.attach`.
            ThreadsAttach,
            /// `threads.delete`.
            ThreadsDelete,
            /// `threads.import`.
            ThreadsImport,
            /// `turns.submit`.
            TurnsSubmit,
            /// `turns.continue`.
            TurnsContinue,
            /// `turns.get`.
            TurnsGet,
            /// `turns.list`.
            TurnsList,
            /// `turns.cancel`.
            TurnsCancel,
            /// `turns.resolve`.
            TurnsResolve,
            /// `journal.replay`.
            JournalReplay,
            /// `journal.subscribe`.
            JournalSubscribe,
            /// `journal.unsubscribe`.
            JournalUnsubscribe,
            /// `permissions.list`.
            PermissionsList,
            /// `permissions.respond`.
            PermissionsRespond,
            /// `sessions.revoke`.
            SessionsRevoke,
            /// `config.reload`.
            ConfigReload,
            /// `budgets.reset`.
            BudgetsReset,
            /// `providers.check`.
            ProvidersCheck,
            /// `mcp.register`.
            McpRegister,
            /// `tools.register`.
            ToolsRegister,
            /// `tools.unregister`.
            ToolsUnregister,
            $(
                #[doc = concat!("`", $reg, "`.")]
                $Reg,
                #[doc = concat!("`", $unreg, "`.")]
                $Unreg,
            )*
            /// `tools.list`.
            ToolsList,
            /// `tools.call`.
            ToolsCall,
        }

        /// The table. Order is the documentation order.
        pub const METHODS: &[(Method, &str, Requirement)] = &[
            (Method::Hello, "hello", Requirement::None),
            (
                Method::Status,
                "status",
                Requirement::Scope(Scope::StatusRead),
            ),
            (
                Method::WorkspacesAdd,
                "workspaces.add",
                Requirement::Scope(Scope::WorkspacesWrite),
            ),
            (
                Method::WorkspacesList,
                "workspaces.list",
                Requirement::Scope(Scope::WorkspacesRead),
            ),
            (
                Method::WorkspacesRemove,
                "workspaces.remove",
                Requirement::Scope(Scope::WorkspacesWrite),
            ),
            (
                Method::ThreadsCreate,
                "threads.create",
                Requirement::Scope(Scope::ThreadsWrite),
            ),
            (
                Method::ThreadsReserve,
                "threads.reserve",
                Requirement::Scope(Scope::ThreadsWrite),
            ),
            (
                Method::ThreadsGet,
                "threads.get",
                Requirement::Scope(Scope::ThreadsRead),
            ),
            (
                Method::ThreadsList,
                "threads.list",
                Requirement::Scope(Scope::ThreadsRead),
            ),
            (
                Method::ThreadsConfigure,
                "threads.configure",
                Requirement::Scope(Scope::ThreadsWrite),
            ),
            (
                Method::ThreadsDelete,
                "threads.delete",
                Requirement::Scope(Scope::ThreadsWrite),
            ),
            (
                Method::ThreadsImport,
                "threads.import",
                Requirement::Scope(Scope::ThreadsWrite),
            ),
            (
                Method::ThreadsAttach,
                "threads.attach",
                Requirement::Scope(Scope::ThreadsRead),
            ),
            (
                Method::TurnsSubmit,
                "turns.submit",
                Requirement::Scope(Scope::TurnsWrite),
            ),
            (
                Method::TurnsContinue,
                "turns.continue",
                Requirement::Scope(Scope::TurnsWrite),
            ),
            (
                Method::TurnsGet,
                "turns.get",
                Requirement::Scope(Scope::ThreadsRead),
            ),
            (
                Method::TurnsList,
                "turns.list",
                Requirement::Scope(Scope::ThreadsRead),
            ),
            (
                Method::TurnsCancel,
                "turns.cancel",
                Requirement::Scope(Scope::TurnsWrite),
            ),
            (
                Method::TurnsResolve,
                "turns.resolve",
                Requirement::Scope(Scope::TurnsResolve),
            ),
            (
                Method::JournalReplay,
                "journal.replay",
                Requirement::Scope(Scope::ThreadsRead),
            ),
            (
                Method::JournalSubscribe,
                "journal.subscribe",
                Requirement::Scope(Scope::ThreadsRead),
            ),
            (
                Method::JournalUnsubscribe,
                "journal.unsubscribe",
                Requirement::Scope(Scope::ThreadsRead),
            ),
            (
                Method::PermissionsList,
                "permissions.list",
                Requirement::Scope(Scope::ThreadsRead),
            ),
            (
                Method::PermissionsRespond,
                "permissions.respond",
                Requirement::Scope(Scope::PermissionsRespond),
            ),
            (
                Method::SessionsRevoke,
                "sessions.revoke",
                Requirement::Scope(Scope::SessionsRevoke),
            ),
            (
                Method::ConfigReload,
                "config.reload",
                Requirement::Scope(Scope::ConfigReload),
            ),
            (
                Method::BudgetsReset,
                "budgets.reset",
                Requirement::Scope(Scope::ConfigReload),
            ),
            (
                Method::ProvidersCheck,
                "providers.check",
                Requirement::Scope(Scope::ConfigReload),
            ),
            (
                Method::McpRegister,
                "mcp.register",
                Requirement::Scope(Scope::ThreadsWrite),
            ),
            (
                Method::ToolsRegister,
                "tools.register",
                Requirement::Scope(Scope::ThreadsWrite),
            ),
            (
                Method::ToolsUnregister,
                "tools.unregister",
                Requirement::Scope(Scope::ThreadsWrite),
            ),
            $(
                (Method::$Reg, $reg, Requirement::Scope(Scope::ThreadsWrite)),
                (Method::$Unreg, $unreg, Requirement::Scope(Scope::ThreadsWrite)),
            )*
            (Method::ToolsList, "tools.list", Requirement::Ticket),
            (Method::ToolsCall, "tools.call", Requirement::Ticket),
        ];

        /// The `register` and `unregister` methods of the named port
        /// kinds, in their declaration order.
        #[cfg(test)]
        pub(crate) const PORT_METHODS: &[Method] = &[$(Method::$Reg, Method::$Unreg),*];

        /// A pattern of every method of [`PORT_METHODS`] (for an
        /// exhaustive match that does not name a kind).
        #[cfg(test)]
        macro_rules! port_method_pattern {
            () => { $(Method::$Reg | Method::$Unreg)|* };
        }
    };
}

crate::port_kinds!(method_table);

/// What the server requires before running a method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// Only `hello`: callable before authentication.
    None,
    /// An authenticated session holding this scope.
    Scope(Scope),
    /// Only an MCP bridge connection, authenticated by `hello` with a tool
    /// ticket (bound to one thread and one agent session); no session, of
    /// any scope, may call these.
    Ticket,
}

impl Method {
    /// Looks a wire name up in the table.
    pub fn parse(name: &str) -> Option<Method> {
        METHODS
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|(m, _, _)| *m)
    }

    /// The wire name. Panics only if the table lacks the method, which the
    /// table test rules out.
    pub fn name(self) -> &'static str {
        Self::entry(self).1
    }

    /// What the method requires.
    pub fn requirement(self) -> Requirement {
        Self::entry(self).2
    }

    fn entry(self) -> &'static (Method, &'static str, Requirement) {
        METHODS
            .iter()
            .find(|(m, _, _)| *m == self)
            .expect("every method is in METHODS (tested)")
    }
}

#[cfg(test)]
mod tests;
