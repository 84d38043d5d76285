//! The closed vocabulary of command receipts' `kind` column: which command
//! a command id was used for, its stored name and the table its resource id
//! names. A file of its own because the startup validator checks stored
//! kinds against it and the receipts' operations (`super::receipts`) sit
//! above the validator, beside the `Store` API that answers from them.

/// What a command id was used for (the `kind` column).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CommandKind {
    /// `turns.submit`.
    TurnSubmit,
    /// `threads.create`.
    ThreadCreate,
    /// `threads.configure`.
    ThreadConfigure,
    /// `turns.cancel`.
    TurnCancel,
    /// `turns.resolve`.
    TurnResolve,
    /// `workspaces.add`.
    WorkspaceAdd,
    /// `permissions.respond`.
    PermissionRespond,
    /// `threads.reserve`.
    ThreadReserve,
}

impl CommandKind {
    /// Every kind (the validator's list).
    pub(crate) const ALL: [CommandKind; 8] = [
        CommandKind::TurnSubmit,
        CommandKind::ThreadCreate,
        CommandKind::ThreadConfigure,
        CommandKind::TurnCancel,
        CommandKind::TurnResolve,
        CommandKind::WorkspaceAdd,
        CommandKind::PermissionRespond,
        CommandKind::ThreadReserve,
    ];

    /// The stored name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CommandKind::TurnSubmit => "turn.submit",
            CommandKind::ThreadCreate => "thread.create",
            CommandKind::ThreadConfigure => "thread.configure",
            CommandKind::TurnCancel => "turn.cancel",
            CommandKind::TurnResolve => "turn.resolve",
            CommandKind::WorkspaceAdd => "workspace.add",
            CommandKind::PermissionRespond => "permission.respond",
            CommandKind::ThreadReserve => "thread.reserve",
        }
    }

    /// The table the receipt's resource id names.
    pub(crate) fn resource_table(self) -> &'static str {
        match self {
            CommandKind::TurnSubmit
            | CommandKind::TurnCancel
            | CommandKind::TurnResolve
            | CommandKind::PermissionRespond => "turns",
            CommandKind::ThreadCreate | CommandKind::ThreadConfigure => "threads",
            CommandKind::WorkspaceAdd => "workspaces",
            CommandKind::ThreadReserve => "thread_reservations",
        }
    }
}
