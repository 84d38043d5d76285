//! Typed wrappers, one per method. Results are the server's JSON documents
//! decoded into the core's records.

use serde_json::{Value, json};

use super::{Client, ClientError};
use crate::params::StatusResult;
use crate::{ReplayPage, Thread, ThreadSnapshot, Turn, Workspace};

fn member<T: serde::de::DeserializeOwned>(mut v: Value, key: &str) -> Result<T, ClientError> {
    serde_json::from_value(v[key].take())
        .map_err(|e| ClientError::Protocol(format!("unexpected `{key}` member: {e}")))
}

impl Client {
    /// `status`.
    pub fn status(&mut self) -> Result<StatusResult, ClientError> {
        self.call("status", &json!({}))
    }

    /// `workspaces.add`.
    pub fn workspaces_add(&mut self, id: &str, path: &str) -> Result<Workspace, ClientError> {
        let v = self.call_value("workspaces.add", json!({ "id": id, "path": path }))?;
        member(v, "workspace")
    }

    /// `workspaces.list`.
    pub fn workspaces_list(&mut self) -> Result<Vec<Workspace>, ClientError> {
        let v = self.call_value("workspaces.list", json!({}))?;
        member(v, "workspaces")
    }

    /// `threads.create` with an explicit approval policy (`ask`|`allow-all`).
    pub fn threads_create(
        &mut self,
        workspace_id: &str,
        provider: &str,
        approval: &str,
        command_id: Option<&str>,
    ) -> Result<Thread, ClientError> {
        let mut p =
            json!({ "workspaceId": workspace_id, "provider": provider, "approval": approval });
        if let Some(c) = command_id {
            p["commandId"] = json!(c);
        }
        let v = self.call_value("threads.create", p)?;
        member(v, "thread")
    }

    /// `threads.get`: the thread snapshot.
    pub fn threads_get(&mut self, thread_id: &str) -> Result<ThreadSnapshot, ClientError> {
        self.call("threads.get", &json!({ "threadId": thread_id }))
    }

    /// `threads.list`.
    pub fn threads_list(&mut self) -> Result<Vec<Thread>, ClientError> {
        let v = self.call_value("threads.list", json!({}))?;
        member(v, "threads")
    }

    /// `turns.submit`. Same command id + same input returns the same turn.
    pub fn turns_submit(
        &mut self,
        thread_id: &str,
        command_id: &str,
        prompt: &str,
    ) -> Result<Turn, ClientError> {
        let v = self.call_value(
            "turns.submit",
            json!({ "threadId": thread_id, "commandId": command_id, "prompt": prompt }),
        )?;
        member(v, "turn")
    }

    /// `turns.get`.
    pub fn turns_get(&mut self, turn_id: &str) -> Result<Turn, ClientError> {
        let v = self.call_value("turns.get", json!({ "turnId": turn_id }))?;
        member(v, "turn")
    }

    /// `turns.list`, optionally of one thread.
    pub fn turns_list(&mut self, thread_id: Option<&str>) -> Result<Vec<Turn>, ClientError> {
        let p = match thread_id {
            Some(t) => json!({ "threadId": t }),
            None => json!({}),
        };
        let v = self.call_value("turns.list", p)?;
        member(v, "turns")
    }

    /// `turns.cancel`.
    pub fn turns_cancel(&mut self, turn_id: &str) -> Result<Turn, ClientError> {
        let v = self.call_value("turns.cancel", json!({ "turnId": turn_id }))?;
        member(v, "turn")
    }

    /// `turns.resolve` (`as_`: `failed`|`cancelled`).
    pub fn turns_resolve(
        &mut self,
        turn_id: &str,
        as_: &str,
        confirm_stopped: bool,
    ) -> Result<Turn, ClientError> {
        let v = self.call_value(
            "turns.resolve",
            json!({ "turnId": turn_id, "as": as_, "confirmStopped": confirm_stopped }),
        )?;
        member(v, "turn")
    }

    /// `journal.replay`: one page after `after`.
    pub fn journal_replay(
        &mut self,
        thread_id: Option<&str>,
        after: u64,
        limit: Option<usize>,
    ) -> Result<ReplayPage, ClientError> {
        let mut p = json!({ "after": after });
        if let Some(t) = thread_id {
            p["threadId"] = json!(t);
        }
        if let Some(l) = limit {
            p["limit"] = json!(l);
        }
        self.call("journal.replay", &p)
    }

    /// `journal.subscribe`; events then arrive through
    /// [`Client::next_notification`]. Returns the subscription id.
    pub fn journal_subscribe(
        &mut self,
        thread_id: Option<&str>,
        after: Option<u64>,
    ) -> Result<String, ClientError> {
        let mut p = json!({});
        if let Some(t) = thread_id {
            p["threadId"] = json!(t);
        }
        if let Some(a) = after {
            p["after"] = json!(a);
        }
        let v = self.call_value("journal.subscribe", p)?;
        member(v, "subscription")
    }

    /// `permissions.respond`.
    pub fn permissions_respond(
        &mut self,
        turn_id: &str,
        request_id: &str,
        option_id: &str,
    ) -> Result<(), ClientError> {
        self.call_value(
            "permissions.respond",
            json!({ "turnId": turn_id, "requestId": request_id, "optionId": option_id }),
        )?;
        Ok(())
    }

    /// `sessions.revoke` (default: this client's own session).
    pub fn sessions_revoke(&mut self, session_id: Option<&str>) -> Result<String, ClientError> {
        let p = match session_id {
            Some(s) => json!({ "sessionId": s }),
            None => json!({}),
        };
        let v = self.call_value("sessions.revoke", p)?;
        member(v, "revoked")
    }
}
