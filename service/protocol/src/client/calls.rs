//! Typed wrappers, one per method. Each goes through
//! [`Client::request`] with the method's [`Call`](crate::call::Call): the
//! name, params and result types the server's dispatch uses too, so no
//! method name is spelled here and a field the server renames cannot
//! silently drift.

use super::{Client, ClientError};
use crate::call;
use crate::params::{
    BudgetReset, BudgetsReset, JournalReplay, JournalSubscribe, McpRegister, McpRegisterResult,
    NoParams, PermissionsList, PermissionsRespond, PermissionsResult, ReloadResult, RespondResult,
    RevokeResult, SessionsRevoke, StatusResult, SubscribeResult, ThreadRef, ThreadReserved,
    ThreadResult, ThreadsConfigure, ThreadsCreate, ThreadsList, ThreadsResult, TurnResult,
    TurnsCancel, TurnsContinue, TurnsGet, TurnsList, TurnsResolve, TurnsResult, TurnsSubmit,
    WorkspaceRemoved, WorkspaceResult, WorkspacesAdd, WorkspacesRemove, WorkspacesResult,
};
use crate::{
    ApprovalPolicy, PendingRequest, ReplayPage, ResolveAs, Thread, ThreadSnapshot, Turn, Workspace,
};

impl Client {
    /// `status`.
    pub fn status(&mut self) -> Result<StatusResult, ClientError> {
        self.request::<call::Status>(&NoParams {})
    }

    /// `config.reload`: the controller re-reads its config file. A refused
    /// reload is a result with `applied: false`, not an error.
    pub fn config_reload(&mut self) -> Result<ReloadResult, ClientError> {
        self.request::<call::ConfigReload>(&NoParams {})
    }

    /// `budgets.reset`: spending against the budget `key` counts from now.
    pub fn budgets_reset(&mut self, key: &str) -> Result<BudgetReset, ClientError> {
        self.request::<call::BudgetsReset>(&BudgetsReset {
            key: key.to_owned(),
        })
    }

    /// `workspaces.add`.
    pub fn workspaces_add(&mut self, id: &str, path: &str) -> Result<Workspace, ClientError> {
        let r = self.workspaces_add_with(&WorkspacesAdd {
            id: id.to_owned(),
            path: path.to_owned(),
            worktree: None,
            command_id: None,
        })?;
        Ok(r.workspace)
    }

    /// `workspaces.add` with every parameter (a command id makes it
    /// idempotent).
    pub fn workspaces_add_with(
        &mut self,
        params: &WorkspacesAdd,
    ) -> Result<WorkspaceResult, ClientError> {
        self.request::<call::WorkspacesAdd>(params)
    }

    /// `providers.check`: the controller starts the provider's agent as a
    /// turn would and reports what it advertised (or why it could not).
    pub fn providers_check(
        &mut self,
        params: &crate::params::ProvidersCheck,
    ) -> Result<crate::params::ProvidersChecked, ClientError> {
        self.request::<call::ProvidersCheck>(params)
    }

    /// `workspaces.remove`: unregisters a workspace added at run time (its
    /// threads stay readable).
    pub fn workspaces_remove(&mut self, id: &str) -> Result<WorkspaceRemoved, ClientError> {
        self.workspaces_remove_with(&WorkspacesRemove {
            id: id.to_owned(),
            ..WorkspacesRemove::default()
        })
    }

    /// `workspaces.remove` with every parameter (`deleteWorktree`, `force`).
    pub fn workspaces_remove_with(
        &mut self,
        params: &WorkspacesRemove,
    ) -> Result<WorkspaceRemoved, ClientError> {
        self.request::<call::WorkspacesRemove>(params)
    }

    /// `workspaces.list`.
    pub fn workspaces_list(&mut self) -> Result<Vec<Workspace>, ClientError> {
        Ok(self.workspaces_with_fences()?.workspaces)
    }

    /// `workspaces.list` with the turns fencing any of the workspaces.
    pub fn workspaces_with_fences(&mut self) -> Result<WorkspacesResult, ClientError> {
        self.request::<call::WorkspacesList>(&NoParams {})
    }

    /// `threads.create` with an explicit approval policy.
    pub fn threads_create(
        &mut self,
        workspace_id: &str,
        provider: &str,
        approval: ApprovalPolicy,
        command_id: Option<&str>,
    ) -> Result<Thread, ClientError> {
        let mut p = ThreadsCreate::new(workspace_id, provider).approval(approval);
        p.command_id = command_id.map(str::to_owned);
        let r: ThreadResult = self.request::<call::ThreadsCreate>(&p)?;
        Ok(r.thread)
    }

    /// `threads.create` with every parameter (restricted, retention,
    /// command id); the result says whether the command id replayed.
    pub fn threads_create_with(
        &mut self,
        params: &ThreadsCreate,
    ) -> Result<ThreadResult, ClientError> {
        self.request::<call::ThreadsCreate>(params)
    }

    /// `threads.reserve`: a thread id for this application before its
    /// thread exists (pass it as `threadId` to `threads.create`); the same
    /// command id always answers the same id, so an application that
    /// reconnects sets its ports up again for the same thread.
    pub fn threads_reserve(&mut self, command_id: &str) -> Result<ThreadReserved, ClientError> {
        self.request::<call::ThreadsReserve>(&crate::params::ThreadsReserve {
            command_id: command_id.to_owned(),
        })
    }

    /// `mcp.register`: offers these MCP servers to this application's
    /// threads for as long as this connection stays open (replacing what
    /// it registered before; `[]` withdraws them). Threads select them by
    /// name in `threads.create` (`mcpServers`). [`Client::reconnect`]
    /// registers the last accepted list again on the new connection.
    pub fn mcp_register(
        &mut self,
        servers: Vec<crate::mcp::McpServer>,
    ) -> Result<McpRegisterResult, ClientError> {
        let params = McpRegister { servers };
        let result = self.request::<call::McpRegister>(&params)?;
        self.mcp = (!params.servers.is_empty()).then_some(params.servers);
        Ok(result)
    }

    /// `tools.register`: serves this endpoint's tools to this application's
    /// threads for as long as this connection stays open (registering a
    /// name again replaces it; a newer connection of the application takes
    /// the name over). Threads bind it by name in `threads.create`
    /// (`tools`). The controller then calls back on this connection
    /// (`tools.invoke`, `capture.*`): answer with [`Client::serve_tools`].
    /// [`Client::reconnect`] registers it again on the new connection.
    pub fn tools_register(
        &mut self,
        endpoint: crate::tools::ToolsRegister,
    ) -> Result<crate::tools::ToolsRegisterResult, ClientError> {
        let result = self.request::<call::ToolsRegister>(&endpoint)?;
        self.tools.insert(endpoint.endpoint.clone(), endpoint);
        Ok(result)
    }

    /// `tools.unregister`: revokes an endpoint of this connection at once
    /// (calls in flight fail closed); `false` when it held none of that name.
    pub fn tools_unregister(&mut self, endpoint: &str) -> Result<bool, ClientError> {
        let result = self.request::<call::ToolsUnregister>(&crate::tools::ToolsUnregister {
            endpoint: endpoint.to_owned(),
        })?;
        self.tools.remove(endpoint);
        Ok(result.revoked)
    }

    /// `threads.configure`: optimistic on `expectedVersion` (`conflict` when
    /// stale or while a turn of the thread is queued or running).
    /// With a command id seen before, the first answer is replayed.
    pub fn threads_configure(
        &mut self,
        params: &ThreadsConfigure,
    ) -> Result<ThreadResult, ClientError> {
        self.request::<call::ThreadsConfigure>(params)
    }

    /// `threads.get`: the thread snapshot.
    pub fn threads_get(&mut self, thread_id: &str) -> Result<ThreadSnapshot, ClientError> {
        self.request::<call::ThreadsGet>(&ThreadRef {
            thread_id: thread_id.to_owned(),
        })
    }

    /// `threads.delete`: the thread's content goes, its content-free
    /// receipt stays in the journal (`thread_busy` / `thread_fenced` while
    /// a turn of it waits or its outcome is unknown).
    pub fn threads_delete(
        &mut self,
        thread_id: &str,
    ) -> Result<crate::params::ThreadDeletedResult, ClientError> {
        self.request::<call::ThreadsDelete>(&ThreadRef {
            thread_id: thread_id.to_owned(),
        })
    }

    /// `threads.import`: `bundle` (a `lapis-thread-bundle/1` file's
    /// text) verified and journaled again as a new thread of
    /// `workspace_id` (default: the workspace at the bundle's path).
    pub fn threads_import(
        &mut self,
        params: &crate::params::ThreadsImport,
    ) -> Result<crate::params::ThreadImportedResult, ClientError> {
        self.request::<call::ThreadsImport>(params)
    }

    /// `threads.list`, every page: each thread the session sees, newest
    /// first, following `next` until the last page.
    pub fn threads_list(&mut self) -> Result<Vec<Thread>, ClientError> {
        let mut params = ThreadsList::default();
        let mut all = Vec::new();
        loop {
            let page = self.threads_list_page(&params)?;
            all.extend(page.threads);
            match page.next {
                Some(next) => params.after = Some(next),
                None => return Ok(all),
            }
        }
    }

    /// One page of `threads.list` (`limit`, `after`: the `next` of the
    /// page before); its `next` is null after the last page.
    pub fn threads_list_page(
        &mut self,
        params: &ThreadsList,
    ) -> Result<ThreadsResult, ClientError> {
        self.request::<call::ThreadsList>(params)
    }

    /// `turns.submit`. Same command id + same input returns the same turn.
    pub fn turns_submit(
        &mut self,
        thread_id: &str,
        command_id: &str,
        prompt: &str,
    ) -> Result<Turn, ClientError> {
        self.turns_submit_with(&TurnsSubmit {
            thread_id: thread_id.to_owned(),
            command_id: command_id.to_owned(),
            prompt: prompt.to_owned(),
            continues: None,
            max_turn_seconds: None,
            expect: None,
        })
    }

    /// `turns.submit` with every parameter (e.g. a per-turn
    /// `maxTurnSeconds`, an `expect`ed binding).
    pub fn turns_submit_with(&mut self, params: &TurnsSubmit) -> Result<Turn, ClientError> {
        let r: TurnResult = self.request::<call::TurnsSubmit>(params)?;
        Ok(r.turn)
    }

    /// `turns.continue`: a linked attempt after the settled turn `turn_id`,
    /// with new instructions. Same command id + same input returns the same
    /// turn.
    pub fn turns_continue(&mut self, params: &TurnsContinue) -> Result<Turn, ClientError> {
        let r: TurnResult = self.request::<call::TurnsContinue>(params)?;
        Ok(r.turn)
    }

    /// `turns.get`.
    /// `turns.get` with its whole result: the turn and its unknown tool
    /// effects.
    pub fn turns_get_with(&mut self, params: &TurnsGet) -> Result<TurnResult, ClientError> {
        self.request::<call::TurnsGet>(params)
    }

    /// `turns.get`: the turn only (see [`Client::turns_get_with`] for its
    /// unknown tool effects).
    pub fn turns_get(&mut self, turn_id: &str) -> Result<Turn, ClientError> {
        let p = TurnsGet {
            turn_id: Some(turn_id.to_owned()),
            command_id: None,
        };
        let r: TurnResult = self.request::<call::TurnsGet>(&p)?;
        Ok(r.turn)
    }

    /// `turns.get {commandId}`: the turn this client's `turns.submit` with
    /// that command id created (`not_found` when none landed), without
    /// resending the prompt.
    pub fn turns_get_by_command(&mut self, command_id: &str) -> Result<Turn, ClientError> {
        let p = TurnsGet {
            turn_id: None,
            command_id: Some(command_id.to_owned()),
        };
        let r: TurnResult = self.request::<call::TurnsGet>(&p)?;
        Ok(r.turn)
    }

    /// `turns.list`, optionally of one thread.
    pub fn turns_list(&mut self, thread_id: Option<&str>) -> Result<Vec<Turn>, ClientError> {
        let p = TurnsList {
            thread_id: thread_id.map(str::to_owned),
            ..TurnsList::default()
        };
        let r: TurnsResult = self.request::<call::TurnsList>(&p)?;
        Ok(r.turns)
    }

    /// `turns.cancel`.
    pub fn turns_cancel(&mut self, turn_id: &str) -> Result<Turn, ClientError> {
        let r = self.turns_cancel_with(&TurnsCancel {
            turn_id: turn_id.to_owned(),
            command_id: None,
        })?;
        Ok(r.turn)
    }

    /// `turns.cancel` with every parameter (a command id makes it idempotent).
    pub fn turns_cancel_with(&mut self, params: &TurnsCancel) -> Result<TurnResult, ClientError> {
        self.request::<call::TurnsCancel>(params)
    }

    /// `turns.resolve`: record the fenced turn as `as_`.
    pub fn turns_resolve(
        &mut self,
        turn_id: &str,
        as_: ResolveAs,
        confirm_stopped: bool,
    ) -> Result<Turn, ClientError> {
        let p = TurnsResolve {
            turn_id: turn_id.to_owned(),
            resolve_as: as_,
            confirm_stopped,
            command_id: None,
        };
        Ok(self.turns_resolve_with(&p)?.turn)
    }

    /// `turns.resolve` with every parameter (a command id makes it idempotent).
    pub fn turns_resolve_with(&mut self, params: &TurnsResolve) -> Result<TurnResult, ClientError> {
        self.request::<call::TurnsResolve>(params)
    }

    /// `journal.replay`: one page after `after`.
    pub fn journal_replay(
        &mut self,
        thread_id: Option<&str>,
        after: u64,
        limit: Option<usize>,
    ) -> Result<ReplayPage, ClientError> {
        let p = JournalReplay {
            thread_id: thread_id.map(str::to_owned),
            after,
            limit,
        };
        self.request::<call::JournalReplay>(&p)
    }

    /// `journal.subscribe`; events then arrive through
    /// [`Client::next_notification`]. Returns the subscription id.
    pub fn journal_subscribe(
        &mut self,
        thread_id: Option<&str>,
        after: Option<u64>,
    ) -> Result<String, ClientError> {
        let p = JournalSubscribe {
            thread_id: thread_id.map(str::to_owned),
            after,
            attention: false,
            present: false,
        };
        self.journal_subscribe_with(&p)
    }

    /// `journal.subscribe` with every parameter (`attention: true` for the
    /// attention stream: permission requests and settlements, finished and
    /// fenced turns, idle workspaces). Returns the subscription id.
    pub fn journal_subscribe_with(&mut self, p: &JournalSubscribe) -> Result<String, ClientError> {
        let r: SubscribeResult = self.request::<call::JournalSubscribe>(p)?;
        Ok(r.subscription)
    }

    /// `permissions.list`: pending requests, optionally of one thread or turn.
    pub fn permissions_list(
        &mut self,
        thread_id: Option<&str>,
        turn_id: Option<&str>,
    ) -> Result<Vec<PendingRequest>, ClientError> {
        let p = PermissionsList {
            thread_id: thread_id.map(str::to_owned),
            turn_id: turn_id.map(str::to_owned),
        };
        let r: PermissionsResult = self.request::<call::PermissionsList>(&p)?;
        Ok(r.requests)
    }

    /// `permissions.respond`.
    pub fn permissions_respond(
        &mut self,
        turn_id: &str,
        request_id: &str,
        option_id: &str,
    ) -> Result<(), ClientError> {
        let p = PermissionsRespond {
            turn_id: turn_id.to_owned(),
            request_id: request_id.to_owned(),
            option_id: option_id.to_owned(),
            command_id: None,
        };
        self.permissions_respond_with(&p)?;
        Ok(())
    }

    /// `permissions.respond` with every parameter (a command id makes it
    /// idempotent).
    pub fn permissions_respond_with(
        &mut self,
        params: &PermissionsRespond,
    ) -> Result<RespondResult, ClientError> {
        self.request::<call::PermissionsRespond>(params)
    }

    /// `sessions.revoke` (default: this client's own session).
    pub fn sessions_revoke(&mut self, session_id: Option<&str>) -> Result<String, ClientError> {
        let p = SessionsRevoke {
            session_id: session_id.map(str::to_owned),
        };
        let r: RevokeResult = self.request::<call::SessionsRevoke>(&p)?;
        Ok(r.revoked)
    }
}
