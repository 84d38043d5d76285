//! The permission inbox's operations of [`Store`]: what `permissions.list`,
//! an answer's check and `status` read. The rows and their writes are
//! `super::inbox`'s, which the writer's append path and the transitions
//! call; this file sits above them, beside the rest of the `Store` API, so
//! the writer never reaches the handle through the inbox.

use crate::domain::StoreResult;

use super::handle::Store;
use super::inbox::{InboxEntry, InboxStatus, get, pending, status};

impl Store {
    /// Every pending request of the durable inbox, oldest first (the
    /// caller filters by what the session may see).
    pub(crate) async fn pending_permissions(&self) -> StoreResult<Vec<InboxEntry>> {
        self.read(|c, _| pending(c)).await
    }

    /// One request of the inbox, pending or settled.
    pub(crate) async fn permission_request(
        &self,
        turn: &str,
        request: &str,
    ) -> StoreResult<Option<InboxEntry>> {
        let (turn, request) = (turn.to_owned(), request.to_owned());
        self.read(move |c, _| get(c, &turn, &request)).await
    }

    /// The inbox's pending count and oldest request (`status`).
    pub(crate) async fn inbox_status(&self) -> StoreResult<InboxStatus> {
        self.read(|c, _| status(c)).await
    }
}
