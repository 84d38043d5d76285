//! The public operations of [`Store`], grouped by resource (see the module
//! docs of `store` for the overview and the guarantees).

use std::path::Path;
use std::sync::Arc;

use tokio::sync::{broadcast, oneshot};

use crate::domain::{
    Actor, Claim, JournalEvent, NewThread, Preparer, Receipt, ReplayPage, ReplayScope, ResolveAs,
    SessionBinding, StoreError, StoreResult, StoreStatus, SubmitTurn, Thread, ThreadPatch,
    ThreadSnapshot, TransitionOutcome, Turn, TurnEnd, TurnEvent, Workspace,
};

use lapis_protocol::params::WorkspaceRemoved;
use lapis_protocol::{Payload, ThreadExpect};

use super::handle::Store;
use super::history::{HistoryState, again};
use super::journal::ReadyPayload;
use super::pending::PendingAppend;
use super::read::{self, ThreadFilter, TurnFilter};
use super::replay;
use super::writer::OpMode;
use super::writer::{AppendReq, Cmd};

impl Store {
    // ---- workspaces -------------------------------------------------------

    /// Register a workspace. `path` is canonicalised (it must exist); a second
    /// id for one canonical path fails `workspace_alias`; the same id and path
    /// again returns the existing record with `replayed: true`. No root is
    /// checked: this is the configuration's own registration.
    pub async fn add_workspace(&self, id: &str, path: &Path) -> StoreResult<Receipt<Workspace>> {
        let canonical = canonical_workspace_dir(path)?;
        self.add_workspace_as(id, canonical, None).await
    }

    /// [`Store::add_workspace`] for an application's `workspaces.add`, of a
    /// path already made canonical by [`canonical_workspace_dir`] (the one
    /// the caller checked against the workspace roots is the one stored):
    /// with a command id, a receipt of (principal, application, command id)
    /// records the answer (same id, other input: `conflict`).
    pub(crate) async fn add_workspace_as(
        &self,
        id: &str,
        canonical: String,
        command: Option<(&Actor, &str)>,
    ) -> StoreResult<Receipt<Workspace>> {
        let id = id.to_owned();
        let command = command.map(|(a, c)| (a.clone(), c.to_owned()));
        self.op(move |w| {
            let command = command.as_ref().map(|(a, c)| (a, c.as_str()));
            w.add_workspace(&id, &canonical, command)
        })
        .await
    }

    /// Unregister a workspace (see `ops_workspaces`): it leaves
    /// `list_workspaces` and takes no new thread or turn; its threads and
    /// journal stay. `actor` is recorded in the audit row.
    pub(crate) async fn remove_workspace(
        &self,
        actor: &Actor,
        id: &str,
    ) -> StoreResult<WorkspaceRemoved> {
        let (actor, id) = (actor.clone(), id.to_owned());
        self.op(move |w| w.remove_workspace(&actor, &id)).await
    }

    /// Every workspace not removed, by id.
    pub(crate) async fn list_workspaces(&self) -> StoreResult<Vec<Workspace>> {
        self.read(|c, _| read::workspaces(c)).await
    }

    // ---- threads ----------------------------------------------------------

    /// Create a thread owned by `actor` (principal and application stamped).
    pub async fn create_thread(
        &self,
        actor: &Actor,
        input: NewThread,
    ) -> StoreResult<Receipt<Thread>> {
        let actor = actor.clone();
        self.op(move |w| w.create_thread(&actor, input)).await
    }

    /// Reserve a thread id for `actor` (idempotent by `command_id`).
    pub async fn reserve_thread(
        &self,
        actor: &Actor,
        command_id: &str,
    ) -> StoreResult<Receipt<String>> {
        let (actor, cmd) = (actor.clone(), command_id.to_owned());
        self.op(move |w| w.reserve_thread(&actor, &cmd)).await
    }

    /// One thread (`not_found` if absent, `ThreadDeleted` if deleted; the
    /// caller checks ownership).
    pub async fn get_thread(&self, id: &str) -> StoreResult<Thread> {
        let id = id.to_owned();
        self.read(move |c, _| match read::thread(c, &id)? {
            Some(t) => Ok(t),
            None => Err(super::ops_delete::gone(c, &id)),
        })
        .await
    }

    /// Threads matching the filter, newest first, bounded by the page size.
    #[cfg(test)]
    pub(crate) async fn list_threads(&self, filter: ThreadFilter) -> StoreResult<Vec<Thread>> {
        Ok(self.list_threads_page(filter).await?.0)
    }

    /// One page of [`Store::list_threads`] (from `filter.after`), and the
    /// key of its last thread when more follow (the next page's `after`).
    pub(crate) async fn list_threads_page(
        &self,
        filter: ThreadFilter,
    ) -> StoreResult<(Vec<Thread>, Option<read::ThreadKey>)> {
        let limit = self.limit(filter.limit);
        let (list, more) = self
            .read(move |c, _| read::threads(c, &filter, limit))
            .await?;
        let next = list.last().filter(|_| more).map(|t| read::ThreadKey {
            created_at: t.created_at,
            id: t.id.clone(),
        });
        Ok((list, next))
    }

    /// Reconfigure a thread; `conflict` on a stale version or while a turn
    /// of the thread is queued or in flight. Idempotent with a command id.
    pub async fn configure_thread(
        &self,
        actor: &Actor,
        id: &str,
        expected_version: u64,
        patch: ThreadPatch,
        command_id: Option<&str>,
    ) -> StoreResult<Receipt<Thread>> {
        let (actor, id) = (actor.clone(), id.to_owned());
        let cmd = command_id.map(str::to_owned);
        self.op(move |w| w.configure_thread(&actor, &id, expected_version, patch, cmd.as_deref()))
            .await
    }

    // ---- turns ------------------------------------------------------------

    /// Accept a turn into its workspace's queue (idempotent by command id).
    #[cfg(any(test, feature = "test-support"))]
    pub async fn submit_turn(
        &self,
        actor: &Actor,
        input: SubmitTurn,
    ) -> StoreResult<Receipt<Turn>> {
        self.submit_turn_expecting(actor, input, None).await
    }

    /// [`Store::submit_turn`] that first checks the thread still has the
    /// binding the caller relies on (`binding_mismatch` naming the differing
    /// fields; nothing is queued). A replayed command id answers with its
    /// turn without checking again.
    pub(crate) async fn submit_turn_expecting(
        &self,
        actor: &Actor,
        input: SubmitTurn,
        expect: Option<ThreadExpect>,
    ) -> StoreResult<Receipt<Turn>> {
        let actor = actor.clone();
        self.op(move |w| w.submit_turn(&actor, input, expect.as_ref()))
            .await
    }

    /// One turn.
    pub async fn get_turn(&self, id: &str) -> StoreResult<Turn> {
        let id = id.to_owned();
        self.read(move |c, _| read::turn(c, &id)?.ok_or_else(|| StoreError::not_found("turn", id)))
            .await
    }

    /// One turn with its `user_message` (what it asked), as `turns.get`
    /// shows it.
    pub(crate) async fn get_turn_asked(&self, id: &str) -> StoreResult<Turn> {
        let id = id.to_owned();
        self.read(move |c, m| {
            let mut turn = read::turn(c, &id)?.ok_or_else(|| StoreError::not_found("turn", &id))?;
            turn.user_message = read::user_message(c, m, &turn.thread_id, &turn.id)?;
            Ok(turn)
        })
        .await
    }

    /// The workspace snapshots journaled for `turn` of `thread`, in order.
    pub(crate) async fn turn_snapshots(
        &self,
        thread: &str,
        turn: &str,
    ) -> StoreResult<Vec<lapis_protocol::snapshot::WorkspaceSnapshot>> {
        let (thread, turn) = (thread.to_owned(), turn.to_owned());
        self.read(move |c, m| read::turn_snapshots(c, m, &thread, &turn))
            .await
    }

    /// Turns matching the filter, newest first, bounded by the page size.
    pub async fn list_turns(&self, filter: TurnFilter) -> StoreResult<Vec<Turn>> {
        let limit = self.limit(filter.limit);
        self.read(move |c, _| read::turns(c, &filter, limit)).await
    }

    /// Cancel: a queued turn becomes `cancelled` at once; a turn in flight
    /// gets its durable cancel flag (the runner's [`Claim::cancel`] flips);
    /// other states (fenced ones included) are returned unchanged. The
    /// controller's own cancels use this; an owner's goes through
    /// [`Store::cancel_turn`].
    pub async fn request_cancel(&self, actor: &Actor, turn: &str) -> StoreResult<Turn> {
        let (actor, turn) = (actor.clone(), turn.to_owned());
        self.op(move |w| w.request_cancel(&actor, &turn)).await
    }

    /// The owner's cancel (`turns.cancel`): like [`Store::request_cancel`],
    /// except that a fenced (`submission_unknown`/`interrupted`) turn is
    /// resolved as `cancelled` — the cancel is the owner's confirmation —
    /// with an audit row and a `turn_resolved` event; the fence is released
    /// and nothing is retried.
    /// Idempotent with a command id (the replay is the first answer).
    pub(crate) async fn cancel_turn(
        &self,
        actor: &Actor,
        turn: &str,
        command_id: Option<&str>,
    ) -> StoreResult<Receipt<Turn>> {
        let (actor, turn) = (actor.clone(), turn.to_owned());
        let cmd = command_id.map(str::to_owned);
        self.op(move |w| w.owner_cancel(&actor, &turn, cmd.as_deref()))
            .await
    }

    /// Resolve a `submission_unknown`/`interrupted` turn as failed or
    /// cancelled. Refused (`invalid_request`) without `confirmed_stopped`,
    /// `conflict` for a turn that is not fenced. Writes an audit row and a
    /// `turn_resolved` event, releases the fence, never re-dispatches.
    /// Idempotent with a command id (the replay is the first answer).
    pub async fn resolve_turn(
        &self,
        actor: &Actor,
        turn: &str,
        as_: ResolveAs,
        confirmed_stopped: bool,
        command_id: Option<&str>,
    ) -> StoreResult<Receipt<Turn>> {
        let (actor, turn) = (actor.clone(), turn.to_owned());
        let cmd = command_id.map(str::to_owned);
        self.op(move |w| w.resolve_turn(&actor, &turn, as_, confirmed_stopped, cmd.as_deref()))
            .await
    }

    /// Claim the next runnable turn now, if any, without provider facts:
    /// its prepared record names the provider but no fingerprint, mode or
    /// identity (for callers without a configuration; the engine uses
    /// [`try_claim_with`](Store::try_claim_with)).
    #[cfg(any(test, feature = "test-support"))]
    pub async fn try_claim(&self) -> StoreResult<Option<Claim>> {
        self.try_claim_with(no_facts()).await
    }

    /// Claim the next runnable turn now, if any; `prepare` gives its
    /// provider's facts for the prepared record, inside the claim.
    #[cfg(any(test, feature = "test-support"))]
    pub(crate) async fn try_claim_with(&self, prepare: Preparer) -> StoreResult<Option<Claim>> {
        self.history_verified().await?;
        self.op(move |w| w.claim(&prepare)).await
    }

    /// Wait for and claim the next runnable turn (one per workspace, FIFO
    /// inside a workspace, first-fit across, fenced workspaces skipped),
    /// without provider facts (see [`try_claim`](Store::try_claim)).
    #[cfg(test)]
    pub(crate) async fn next_runnable(&self) -> StoreResult<Claim> {
        self.next_runnable_with(no_facts()).await
    }

    /// [`next_runnable`](Store::next_runnable) with `prepare` giving the
    /// provider's facts at the moment of the claim (a reload while waiting
    /// is seen).
    pub(crate) async fn next_runnable_with(&self, prepare: Preparer) -> StoreResult<Claim> {
        // Parked on the writer, which claims inside the batch that makes a
        // turn runnable and answers before that batch commits: the claim
        // commits with the dispatch boundary that follows (see
        // `writer::ParkedClaim`). Losing it in a crash is harmless — the
        // turn is still queued, and no prompt is written before the
        // durable dispatch boundary. Nothing is claimed before the
        // journal's history was checked (`store::history`).
        self.history_verified().await?;
        self.park_claim(prepare).await
    }

    /// Persist the dispatch boundary (durable when this returns `Ok`). Fails
    /// `conflict` unless the turn is `preparing` with no pending cancel; then
    /// the prompt must not be written.
    #[cfg(any(test, feature = "test-support"))]
    pub async fn mark_dispatched(&self, turn: &str, binding: SessionBinding) -> StoreResult<Turn> {
        self.mark_dispatched_as(turn, binding, true).await
    }

    /// [`Store::mark_dispatched`], saying whether the batch that claimed
    /// the turn still waits for this boundary (`awaited`): false once the
    /// engine sent [`Store::boundary_later`] for the claim, so one claim
    /// never ends two waits.
    pub(crate) async fn mark_dispatched_as(
        &self,
        turn: &str,
        binding: SessionBinding,
        awaited: bool,
    ) -> StoreResult<Turn> {
        let turn = turn.to_owned();
        let mode = if awaited {
            OpMode::Boundary
        } else {
            OpMode::Durable
        };
        self.op_with(mode, move |w| w.mark_dispatched(&turn, &binding))
            .await
    }

    /// The agent started on the prompt (`dispatched → running`).
    #[cfg(any(test, feature = "test-support"))]
    pub async fn mark_running(&self, turn: &str) -> StoreResult<TransitionOutcome> {
        let turn = turn.to_owned();
        self.op(move |w| w.transition(&turn, TurnEvent::Start, None, false))
            .await
    }

    /// [`Store::mark_running`] queued in order without waiting: it commits
    /// with the turn's first output (a lost `running` changes nothing: a
    /// `dispatched` turn is recovered exactly like a `running` one).
    pub fn mark_running_detached(&self, turn: &str) {
        let turn = turn.to_owned();
        self.op_detached("mark_running", move |w| {
            w.transition(&turn, TurnEvent::Start, None, false)
        });
    }

    /// End a turn. A change the table refuses (e.g. a duplicate completion) is
    /// journaled as an observation and returns `applied: false`.
    pub async fn finish_turn(&self, turn: &str, end: TurnEnd) -> StoreResult<TransitionOutcome> {
        let turn = turn.to_owned();
        self.op(move |w| w.finish_turn(&turn, end)).await
    }

    /// Fence a turn in memory whose end the store refused (see
    /// `Writer::fence_in_memory`): its workspace is released from flight
    /// and held fenced until a restart's recovery records it.
    pub(crate) async fn fence_in_memory(&self, turn: &str) -> StoreResult<()> {
        let turn = turn.to_owned();
        self.op(move |w| w.fence_in_memory(&turn)).await
    }

    /// Append an activity event (content kinds only) to a claimed turn.
    /// Group-committed with other appends; after a terminal or fenced state
    /// it is recorded as an `observation` wrapping the late event. Sync: the
    /// request is queued in order before this returns.
    pub fn append_activity(&self, turn: &str, payload: Payload) -> PendingAppend {
        let (reply, rx) = oneshot::channel();
        let kind = payload.kind();
        let req = AppendReq {
            turn: turn.to_owned(),
            kind,
            // Redacted and serialized here, on the caller's thread, not on
            // the single writer (see `ReadyPayload`).
            payload: Some(ReadyPayload::new(&payload)),
            reply,
        };
        match self.send(Cmd::Append(req)) {
            Ok(()) => PendingAppend::new(rx, kind),
            Err(_) => PendingAppend::closed(kind),
        }
    }

    /// Wait until every request sent before this call is committed (the
    /// transcript store's prompt append reads the prompt after it).
    pub async fn flush(&self) -> StoreResult<()> {
        self.op(|_| Ok(())).await
    }

    // ---- journal ----------------------------------------------------------

    /// Committed events, in `seq` order, from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<JournalEvent>> {
        self.shared().events.subscribe()
    }

    /// One page after `after` (exclusive); `limit` 0 = page maximum.
    pub async fn replay(
        &self,
        scope: ReplayScope,
        after: u64,
        limit: usize,
    ) -> StoreResult<ReplayPage> {
        let limit = self.limit(limit);
        self.read(move |c, m| replay::replay(c, m, &scope, after, limit))
            .await
    }

    /// A thread-scope page that flags events whose content is gone instead
    /// of failing, with the canonical hashes recorded for them (see
    /// `replay::replay_flagged`).
    pub(crate) async fn replay_flagged(
        &self,
        thread: &str,
        after: u64,
        limit: usize,
    ) -> StoreResult<(ReplayPage, std::collections::HashMap<u64, String>)> {
        let limit = self.limit(limit);
        let thread = thread.to_owned();
        self.read(move |c, m| replay::replay_flagged(c, m, &thread, after, limit))
            .await
    }

    /// The `user_message` event of `turn` (its prompt, with its payload
    /// while it is in memory or on disk).
    pub(crate) async fn user_event(
        &self,
        thread: &str,
        turn: &str,
    ) -> StoreResult<Option<JournalEvent>> {
        let (thread, turn) = (thread.to_owned(), turn.to_owned());
        self.read(move |c, m| read::user_event(c, m, &thread, &turn))
            .await
    }

    /// A thread, its recent turns and a bounded tail (`truncated` when older events exist).
    pub(crate) async fn thread_snapshot(&self, thread: &str) -> StoreResult<ThreadSnapshot> {
        let thread = thread.to_owned();
        let (tail, turns) = (self.options().snapshot_tail, self.options().snapshot_turns);
        self.read(move |c, m| replay::snapshot(c, m, &thread, tail, turns))
            .await
    }

    // ---- status -----------------------------------------------------------

    /// Queue depth and capacity, running and fenced workspaces (as of the last commit).
    pub fn status(&self) -> StoreStatus {
        self.shared()
            .status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits until the journal's retained events are checked (at once when
    /// open did): `Ok` with the count checked, or the check's failure (`history`).
    pub async fn history_verified(&self) -> StoreResult<u64> {
        let mut rx = self.shared().history.subscribe();
        let state = rx
            .wait_for(|s| !matches!(s, HistoryState::Pending))
            .await
            .map(|s| s.clone())
            .map_err(|_| StoreError::Closed)?;
        match state {
            HistoryState::Verified(n) => Ok(n),
            HistoryState::Failed(e) => Err(again(&e)),
            HistoryState::Pending => Err(StoreError::Closed),
        }
    }
}

/// A preparer that knows no provider.
#[cfg(any(test, feature = "test-support"))]
fn no_facts() -> Preparer {
    Arc::new(|_: &Thread| None)
}

/// The canonical form of a workspace directory as the store keeps it: links
/// and `..` resolved, an existing directory, UTF-8.
pub(crate) fn canonical_workspace_dir(path: &Path) -> StoreResult<String> {
    let canonical = std::fs::canonicalize(path)
        .map_err(|_| StoreError::invalid("workspace path does not exist"))?;
    if !canonical.is_dir() {
        return Err(StoreError::invalid("workspace path is not a directory"));
    }
    canonical
        .into_os_string()
        .into_string()
        .map_err(|_| StoreError::invalid("workspace path is not UTF-8"))
}
