//! Resuming after a lost connection: [`Client::reconnect`] and the
//! attached threads it brings back.
//!
//! What must stay true: a reconnect resumes the *same* AuthSession (bearer
//! first, then the credential) or fails [`ClientError::SessionChanged`];
//! nothing in flight is resent; every port and MCP server the connection
//! registered is registered again before any attached thread is attached
//! again (so a thread never runs without what it binds).

use crate::params::ThreadsAttach;
use crate::{HelloResult, ThreadExpect, ThreadSnapshot};

use super::{Client, ClientError, Credential};

impl Client {
    /// Opens a new connection and resumes the same session: with the bearer
    /// when one was issued, else with the original credential. Nothing that
    /// was in flight on the old connection is resent. A managed
    /// controller's client has no socket to dial again
    /// ([`ClientError::NotReconnectable`]).
    pub fn reconnect(&mut self) -> Result<HelloResult, ClientError> {
        let previous = self.session.clone();
        let fresh = match (&self.path, &self.ssh) {
            (Some(path), _) => Client::connect(path)?,
            // Over ssh: a new child, whose `dial-stdio` says hello again.
            (None, Some(link)) => link.dial.connect()?,
            (None, None) => return Err(ClientError::NotReconnectable),
        };
        self.stream = fresh.stream;
        self.reader = fresh.reader;
        if fresh.ssh.is_some() {
            self.ssh = fresh.ssh;
        }
        self.queued.clear();
        self.partial.clear();
        let credential = match (&self.bearer, &self.credential) {
            (Some(b), _) => Credential::Bearer(b.clone()),
            (None, Some(c)) => c.clone(),
            (None, None) => return Err(ClientError::NotAuthenticated),
        };
        let result = match self.hello(credential) {
            Err(ClientError::Rpc(e)) if self.bearer.is_some() && self.credential.is_some() => {
                // The bearer failed (revoked or expired): the token may issue
                // a new session, which is a different identity.
                let _ = e;
                let original = self
                    .credential
                    .clone()
                    .ok_or(ClientError::NotAuthenticated)?;
                self.bearer = None;
                self.hello(original)?
            }
            other => other?,
        };
        if let Some(prev) = previous
            && prev.id != result.session.id
        {
            return Err(ClientError::SessionChanged);
        }
        // The old connection's MCP servers died with it; threads that
        // select them would fail `mcp_server_unavailable` until they are back.
        if let Some(servers) = self.mcp.clone() {
            self.mcp_register(servers)?;
        }
        self.callbacks.clear();
        for endpoint in self.tools.clone().into_values() {
            self.tools_register(endpoint)?;
        }
        self.register_kept()?;
        // Re-attach and re-snapshot every attached thread: what happened
        // while disconnected shows in the fresh snapshots, and a thread
        // whose binding changed fails here (`binding_mismatch`) before the
        // caller sends anything for it.
        let attached: Vec<(String, ThreadExpect)> = self
            .attachments
            .iter()
            .map(|(id, (expect, _))| (id.clone(), expect.clone()))
            .collect();
        for (thread, expect) in attached {
            self.threads_attach(&thread, &expect)?;
        }
        Ok(result)
    }

    /// `threads.attach`: the thread's snapshot if it still has the binding
    /// `expect` states (else `binding_mismatch`, naming the fields). The
    /// thread is remembered and attached again by every
    /// [`Client::reconnect`] until [`Client::detach`].
    pub fn threads_attach(
        &mut self,
        thread_id: &str,
        expect: &ThreadExpect,
    ) -> Result<ThreadSnapshot, ClientError> {
        let snapshot = self.request::<crate::call::ThreadsAttach>(&ThreadsAttach {
            thread_id: thread_id.to_owned(),
            expect: expect.clone(),
        })?;
        self.attachments
            .insert(thread_id.to_owned(), (expect.clone(), snapshot.clone()));
        Ok(snapshot)
    }

    /// The last snapshot of an attached thread (refreshed by reconnects).
    pub fn attached_snapshot(&self, thread_id: &str) -> Option<&ThreadSnapshot> {
        self.attachments.get(thread_id).map(|(_, s)| s)
    }

    /// Stops re-attaching `thread_id` on reconnect.
    pub fn detach(&mut self, thread_id: &str) {
        self.attachments.remove(thread_id);
    }
}
