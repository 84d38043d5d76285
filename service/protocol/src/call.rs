//! Every method bound to its params and result, once.
//!
//! A [`Call`] ties a [`Method`] (whose wire name and scope live in the one
//! table, [`crate::METHODS`]) to the type its params decode into and the type
//! its result decodes into. The client SDK sends `C::Params` and decodes
//! `C::Result` ([`crate::client::Client::request`]); the server's dispatch
//! serializes each handler's result as `C::Result`, so a handler and the SDK
//! that disagree about a method's result do not compile.
//!
//! What must stay true (tested below): every call's method has an entry in
//! the table, and every entry of the table has a call. Server → client
//! requests (`tools.invoke`, `capture.*`, `context.prepare`, `memory.*`) and
//! notifications (`journal.event`, …) are not in the table and have no call:
//! they are answered by the application, not the controller.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::params as p;
use crate::tools as t;
use crate::{HelloParams, HelloResult, Method, ReplayPage, ThreadSnapshot};

/// One method of the protocol: its name (through [`Method`]), what it takes
/// and what it returns.
pub trait Call {
    /// The method (its wire name is [`Method::name`]).
    const METHOD: Method;
    /// The `params` member.
    type Params: Serialize + DeserializeOwned;
    /// The `result` member.
    type Result: Serialize + DeserializeOwned;
}

macro_rules! calls {
    ($( $(#[$doc:meta])* $name:ident: $params:ty => $result:ty; )*) => {
        $(
            $(#[$doc])*
            #[derive(Clone, Copy, Debug, PartialEq, Eq)]
            pub struct $name;

            impl Call for $name {
                const METHOD: Method = Method::$name;
                type Params = $params;
                type Result = $result;
            }
        )*

        /// The method of every call, in declaration order.
        pub const CALLS: &[Method] = &[$(Method::$name),*];
    };
}

/// Every call: the fixed ones and, for each named port kind
/// (`crate::port_kinds!`), its `register` and `unregister`.
macro_rules! all_calls {
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
        calls! {
            /// `hello`: authenticates the connection.
            Hello: HelloParams => HelloResult;
            /// `status`.
            Status: p::NoParams => p::StatusResult;
            /// `workspaces.add`.
            WorkspacesAdd: p::WorkspacesAdd => p::WorkspaceResult;
            /// `workspaces.list`.
            WorkspacesList: p::NoParams => p::WorkspacesResult;
            /// `workspaces.remove`.
            WorkspacesRemove: p::WorkspacesRemove => p::WorkspaceRemoved;
            /// `threads.create`.
            ThreadsCreate: p::ThreadsCreate => p::ThreadResult;
            /// `threads.get`.
            ThreadsGet: p::ThreadRef => ThreadSnapshot;
            /// `threads.list`.
            ThreadsList: p::ThreadsList => p::ThreadsResult;
            /// `threads.configure`.
            ThreadsConfigure: p::ThreadsConfigure => p::ThreadResult;
            /// `threads.attach`.
            ThreadsAttach: p::ThreadsAttach => ThreadSnapshot;
            /// `threads.delete`.
            ThreadsDelete: p::ThreadRef => p::ThreadDeletedResult;
            /// `threads.import`.
            ThreadsImport: p::ThreadsImport => p::ThreadImportedResult;
            /// `turns.submit`.
            TurnsSubmit: p::TurnsSubmit => p::TurnResult;
            /// `turns.continue`.
            TurnsContinue: p::TurnsContinue => p::TurnResult;
            /// `turns.get`.
            TurnsGet: p::TurnsGet => p::TurnResult;
            /// `turns.list`.
            TurnsList: p::TurnsList => p::TurnsResult;
            /// `turns.cancel`.
            TurnsCancel: p::TurnsCancel => p::TurnResult;
            /// `turns.resolve`.
            TurnsResolve: p::TurnsResolve => p::TurnResult;
            /// `journal.replay`.
            JournalReplay: p::JournalReplay => ReplayPage;
            /// `journal.subscribe`.
            JournalSubscribe: p::JournalSubscribe => p::SubscribeResult;
            /// `journal.unsubscribe`.
            JournalUnsubscribe: p::JournalUnsubscribe => p::UnsubscribeResult;
            /// `permissions.list`.
            PermissionsList: p::PermissionsList => p::PermissionsResult;
            /// `permissions.respond`.
            PermissionsRespond: p::PermissionsRespond => p::RespondResult;
            /// `sessions.revoke`.
            SessionsRevoke: p::SessionsRevoke => p::RevokeResult;
            /// `config.reload`.
            ConfigReload: p::NoParams => p::ReloadResult;
            /// `budgets.reset`.
            BudgetsReset: p::BudgetsReset => p::BudgetReset;
            /// `providers.check`.
            ProvidersCheck: p::ProvidersCheck => p::ProvidersChecked;
            /// `mcp.register`.
            McpRegister: p::McpRegister => p::McpRegisterResult;
            /// `tools.register`.
            ToolsRegister: t::ToolsRegister => t::ToolsRegisterResult;
            /// `tools.unregister`.
            ToolsUnregister: t::ToolsUnregister => t::ToolsUnregisterResult;
            /// `threads.reserve`.
            ThreadsReserve: p::ThreadsReserve => p::ThreadReserved;
            $(
                #[doc = concat!("`", $reg, "`.")]
                $Reg: $params => crate::context::PortRegisterResult;
                #[doc = concat!("`", $unreg, "`.")]
                $Unreg: crate::context::PortUnregister => t::ToolsUnregisterResult;
            )*
            /// `tools.list` (MCP bridge, ticket only).
            ToolsList: p::NoParams => t::ToolsListResult;
            /// `tools.call` (MCP bridge, ticket only).
            ToolsCall: t::ToolsCall => t::ToolOutput;
        }
    };
}

crate::port_kinds!(all_calls);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{METHODS, Requirement};

    /// Every call's method is in the table with a scope (only `hello`
    /// goes without), and every method of the table has exactly one call.
    #[test]
    fn calls_and_the_scope_table_agree() {
        for m in CALLS {
            let entry = METHODS.iter().find(|(x, _, _)| x == m);
            let (_, name, requirement) = entry.unwrap_or_else(|| panic!("{m:?} not in METHODS"));
            match (m, requirement) {
                (Method::Hello, Requirement::None) => {}
                (_, Requirement::Scope(_)) => {}
                (Method::ToolsList | Method::ToolsCall, Requirement::Ticket) => {}
                (_, r) => panic!("call `{name}` has no scope: {r:?}"),
            }
        }
        for (m, name, _) in METHODS {
            let calls = CALLS.iter().filter(|c| *c == m).count();
            assert_eq!(calls, 1, "method `{name}` must have exactly one Call");
        }
    }

    /// A call's name is the table's.
    #[test]
    fn a_call_names_its_method_through_the_table() {
        assert_eq!(ThreadsCreate::METHOD.name(), "threads.create");
        assert_eq!(
            <TurnsResolve as Call>::METHOD.requirement(),
            Requirement::Scope(crate::Scope::TurnsResolve)
        );
    }
}
