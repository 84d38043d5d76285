//! Typed wrappers, one per method. Requests are the server's own params
//! types ([`crate::params`]), so a field the server renames cannot silently
//! drift here; results are decoded into the result types beside them.

use super::{Client, ClientError};
use crate::params::{
    JournalReplay, JournalSubscribe, NoParams, PermissionsList, PermissionsRespond,
    PermissionsResult, ReloadResult, RespondResult, RevokeResult, SessionsRevoke, StatusResult,
    SubscribeResult, ThreadRef, ThreadResult, ThreadsCreate, ThreadsList, ThreadsResult, TurnRef,
    TurnResult, TurnsList, TurnsResolve, TurnsResult, TurnsSubmit, WorkspaceResult, WorkspacesAdd,
    WorkspacesResult,
};
use crate::{PendingRequest, ReplayPage, Thread, ThreadSnapshot, Turn, Workspace};

fn turn_ref(turn_id: &str) -> TurnRef {
    TurnRef {
        turn_id: turn_id.to_owned(),
    }
}

impl Client {
    /// `status`.
    pub fn status(&mut self) -> Result<StatusResult, ClientError> {
        self.call("status", &NoParams {})
    }

    /// `config.reload`: the controller re-reads its config file. A refused
    /// reload is a result with `applied: false`, not an error.
    pub fn config_reload(&mut self) -> Result<ReloadResult, ClientError> {
        self.call("config.reload", &NoParams {})
    }

    /// `workspaces.add`.
    pub fn workspaces_add(&mut self, id: &str, path: &str) -> Result<Workspace, ClientError> {
        let r: WorkspaceResult = self.call(
            "workspaces.add",
            &WorkspacesAdd {
                id: id.to_owned(),
                path: path.to_owned(),
            },
        )?;
        Ok(r.workspace)
    }

    /// `workspaces.list`.
    pub fn workspaces_list(&mut self) -> Result<Vec<Workspace>, ClientError> {
        let r: WorkspacesResult = self.call("workspaces.list", &NoParams {})?;
        Ok(r.workspaces)
    }

    /// `threads.create` with an explicit approval policy (`ask`|`allow-all`).
    pub fn threads_create(
        &mut self,
        workspace_id: &str,
        provider: &str,
        approval: &str,
        command_id: Option<&str>,
    ) -> Result<Thread, ClientError> {
        let p = ThreadsCreate {
            workspace_id: workspace_id.to_owned(),
            provider: provider.to_owned(),
            approval: Some(approval.to_owned()),
            restricted: false,
            retention: None,
            command_id: command_id.map(str::to_owned),
        };
        let r: ThreadResult = self.call("threads.create", &p)?;
        Ok(r.thread)
    }

    /// `threads.get`: the thread snapshot.
    pub fn threads_get(&mut self, thread_id: &str) -> Result<ThreadSnapshot, ClientError> {
        self.call(
            "threads.get",
            &ThreadRef {
                thread_id: thread_id.to_owned(),
            },
        )
    }

    /// `threads.list`.
    pub fn threads_list(&mut self) -> Result<Vec<Thread>, ClientError> {
        let r: ThreadsResult = self.call("threads.list", &ThreadsList::default())?;
        Ok(r.threads)
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
        })
    }

    /// `turns.submit` with every parameter (e.g. a per-turn
    /// `maxTurnSeconds`).
    pub fn turns_submit_with(&mut self, params: &TurnsSubmit) -> Result<Turn, ClientError> {
        let r: TurnResult = self.call("turns.submit", params)?;
        Ok(r.turn)
    }

    /// `turns.get`.
    pub fn turns_get(&mut self, turn_id: &str) -> Result<Turn, ClientError> {
        let r: TurnResult = self.call("turns.get", &turn_ref(turn_id))?;
        Ok(r.turn)
    }

    /// `turns.list`, optionally of one thread.
    pub fn turns_list(&mut self, thread_id: Option<&str>) -> Result<Vec<Turn>, ClientError> {
        let p = TurnsList {
            thread_id: thread_id.map(str::to_owned),
            ..TurnsList::default()
        };
        let r: TurnsResult = self.call("turns.list", &p)?;
        Ok(r.turns)
    }

    /// `turns.cancel`.
    pub fn turns_cancel(&mut self, turn_id: &str) -> Result<Turn, ClientError> {
        let r: TurnResult = self.call("turns.cancel", &turn_ref(turn_id))?;
        Ok(r.turn)
    }

    /// `turns.resolve` (`as_`: `failed`|`cancelled`).
    pub fn turns_resolve(
        &mut self,
        turn_id: &str,
        as_: &str,
        confirm_stopped: bool,
    ) -> Result<Turn, ClientError> {
        let p = TurnsResolve {
            turn_id: turn_id.to_owned(),
            resolve_as: as_.to_owned(),
            confirm_stopped,
        };
        let r: TurnResult = self.call("turns.resolve", &p)?;
        Ok(r.turn)
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
        self.call("journal.replay", &p)
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
        };
        let r: SubscribeResult = self.call("journal.subscribe", &p)?;
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
        let r: PermissionsResult = self.call("permissions.list", &p)?;
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
        };
        let _: RespondResult = self.call("permissions.respond", &p)?;
        Ok(())
    }

    /// `sessions.revoke` (default: this client's own session).
    pub fn sessions_revoke(&mut self, session_id: Option<&str>) -> Result<String, ClientError> {
        let p = SessionsRevoke {
            session_id: session_id.map(str::to_owned),
        };
        let r: RevokeResult = self.call("sessions.revoke", &p)?;
        Ok(r.revoked)
    }
}
