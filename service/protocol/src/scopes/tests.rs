use super::*;

/// Every variant, listed through an exhaustive match so adding a variant
/// without listing it here fails to compile.
fn all_variants() -> Vec<Method> {
    let probe = |m: Method| match m {
        Method::Hello
        | Method::Status
        | Method::WorkspacesAdd
        | Method::WorkspacesList
        | Method::WorkspacesRemove
        | Method::ThreadsCreate
        | Method::ThreadsReserve
        | Method::ThreadsGet
        | Method::ThreadsList
        | Method::ThreadsConfigure
        | Method::ThreadsAttach
        | Method::ThreadsDelete
        | Method::ThreadsImport
        | Method::TurnsSubmit
        | Method::TurnsContinue
        | Method::TurnsGet
        | Method::TurnsList
        | Method::TurnsCancel
        | Method::TurnsResolve
        | Method::JournalReplay
        | Method::JournalSubscribe
        | Method::JournalUnsubscribe
        | Method::PermissionsList
        | Method::PermissionsRespond
        | Method::SessionsRevoke
        | Method::ConfigReload
        | Method::BudgetsReset
        | Method::ProvidersCheck
        | Method::McpRegister
        | Method::ToolsRegister
        | Method::ToolsUnregister
        | port_method_pattern!()
        | Method::ToolsList
        | Method::ToolsCall => m,
    };
    [
        Method::Hello,
        Method::Status,
        Method::WorkspacesAdd,
        Method::WorkspacesList,
        Method::WorkspacesRemove,
        Method::ThreadsCreate,
        Method::ThreadsReserve,
        Method::ThreadsGet,
        Method::ThreadsList,
        Method::ThreadsConfigure,
        Method::ThreadsAttach,
        Method::ThreadsDelete,
        Method::ThreadsImport,
        Method::TurnsSubmit,
        Method::TurnsContinue,
        Method::TurnsGet,
        Method::TurnsList,
        Method::TurnsCancel,
        Method::TurnsResolve,
        Method::JournalReplay,
        Method::JournalSubscribe,
        Method::JournalUnsubscribe,
        Method::PermissionsList,
        Method::PermissionsRespond,
        Method::SessionsRevoke,
        Method::ConfigReload,
        Method::BudgetsReset,
        Method::ProvidersCheck,
        Method::McpRegister,
        Method::ToolsRegister,
        Method::ToolsUnregister,
    ]
    .into_iter()
    .chain(PORT_METHODS.iter().copied())
    .chain([Method::ToolsList, Method::ToolsCall])
    .map(probe)
    .collect()
}

#[test]
fn every_method_has_exactly_one_entry_and_a_scope() {
    let all = all_variants();
    assert_eq!(all.len(), METHODS.len(), "table and enum differ in size");
    for m in all {
        let entries = METHODS.iter().filter(|(x, _, _)| *x == m).count();
        assert_eq!(entries, 1, "{m:?} must appear exactly once in METHODS");
        assert_eq!(Method::parse(m.name()), Some(m));
        match (m, m.requirement()) {
            (Method::Hello, Requirement::None) => {}
            (Method::Hello, r) => panic!("hello must be callable unauthenticated, got {r:?}"),
            (_, Requirement::None) => panic!("{m:?} lacks a scope"),
            (_, Requirement::Scope(_)) => {}
            (Method::ToolsList | Method::ToolsCall, Requirement::Ticket) => {}
            (_, Requirement::Ticket) => panic!("{m:?} is not a bridge method"),
        }
    }
}

#[test]
fn replay_and_subscriptions_are_threads_read() {
    for m in [Method::JournalReplay, Method::JournalSubscribe] {
        assert_eq!(m.requirement(), Requirement::Scope(Scope::ThreadsRead));
    }
}

#[test]
fn scope_names_round_trip() {
    for s in Scope::ALL {
        assert_eq!(Scope::parse(s.as_str()), Some(s));
        assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
    }
    assert_eq!(Method::parse("nope"), None);
}

/// The named port kinds' methods (generated from `crate::port_kinds!`)
/// keep the wire names and scope they had when each was spelled out.
#[test]
fn the_named_port_methods_keep_their_wire_names() {
    let names: Vec<&str> = PORT_METHODS.iter().map(|m| m.name()).collect();
    assert_eq!(
        names,
        [
            "context.register",
            "context.unregister",
            "memory.register",
            "memory.unregister",
            "transcript.register",
            "transcript.unregister"
        ]
    );
    for m in PORT_METHODS {
        assert_eq!(m.requirement(), Requirement::Scope(Scope::ThreadsWrite));
    }
    assert_eq!(
        Method::parse("memory.register"),
        Some(Method::MemoryRegister)
    );
}
