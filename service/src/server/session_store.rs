//! AuthSessions persisted in the controller's store.
//!
//! The authority is synchronous (it runs inside `hello` and before every
//! request, mostly from its in-memory cache); the store is async. The bridge
//! blocks the current worker with `block_in_place`, which needs the
//! multi-threaded runtime `serve` runs on. Both sides use the one
//! [`AuthSession`] and the one injected clock, so nothing is translated here.

use tokio::runtime::Handle;

use crate::auth::{PersistError, SessionPersistence};
use crate::domain::{AuthSession, IssuedSession, NewAuthSession};
use crate::store::Store;

/// [`SessionPersistence`] over the store.
#[derive(Debug, Clone)]
pub(crate) struct StoreSessions(pub Store);

fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| Handle::current().block_on(f))
}

fn err(e: crate::domain::StoreError) -> PersistError {
    PersistError(e.to_string(), e.storage_condition())
}

impl SessionPersistence for StoreSessions {
    fn by_credential(&self, key: &str) -> Result<Option<AuthSession>, PersistError> {
        block(self.0.find_session_by_credential(key)).map_err(err)
    }

    fn by_bearer_hash(&self, hash: &str) -> Result<Option<AuthSession>, PersistError> {
        block(self.0.find_session_by_bearer_hash(hash)).map_err(err)
    }

    fn issue(&self, session: NewAuthSession, keep: usize) -> Result<IssuedSession, PersistError> {
        block(self.0.issue_session(session, keep)).map_err(err)
    }

    fn revoke(&self, id: &str) -> Result<AuthSession, PersistError> {
        block(self.0.revoke_session(id)).map_err(err)
    }
}
