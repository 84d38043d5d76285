//! An append in flight ([`PendingAppend`]) and what it came to for a turn
//! that may have ended meanwhile ([`Recorded`]).
//!
//! What must stay true: an activity appended to a turn that has already
//! ended is kept as a `late_append` observation (see `journal`), never as
//! the kind asked for, and [`PendingAppend::on_turn`] is the one place that
//! tells the two apart: callers get a named result, not an event kind to
//! compare.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use lapis_protocol::EventKind;
use tokio::sync::oneshot;

use crate::domain::{JournalEvent, StoreError, StoreResult};

/// A streamed append in flight: await it for the committed event, or drop it
/// (the event is still committed, in order, within the group-commit bound).
#[derive(Debug)]
pub struct PendingAppend {
    rx: Result<oneshot::Receiver<StoreResult<Arc<JournalEvent>>>, ()>,
    /// The kind appended (the event's own kind unless the turn had ended).
    asked: EventKind,
}

/// Where an activity appended to a turn went.
#[derive(Debug, Clone)]
pub(crate) enum Recorded {
    /// On the turn, as the kind asked for.
    OnTurn,
    /// The turn had ended first (a cancel, a shutdown): it is kept as a
    /// late observation and changes nothing.
    TurnEnded,
}

impl PendingAppend {
    pub(super) fn new(
        rx: oneshot::Receiver<StoreResult<Arc<JournalEvent>>>,
        asked: EventKind,
    ) -> Self {
        PendingAppend { rx: Ok(rx), asked }
    }

    pub(super) fn closed(asked: EventKind) -> Self {
        PendingAppend { rx: Err(()), asked }
    }

    /// The committed append, told apart by whether its turn was still
    /// running (see the module docs).
    pub(crate) async fn on_turn(self) -> StoreResult<Recorded> {
        let asked = self.asked;
        let event = self.await?;
        Ok(if event.kind == asked {
            Recorded::OnTurn
        } else {
            Recorded::TurnEnded
        })
    }
}

impl Future for PendingAppend {
    type Output = StoreResult<Arc<JournalEvent>>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().rx {
            Err(()) => Poll::Ready(Err(StoreError::Closed)),
            Ok(rx) => Pin::new(rx)
                .poll(cx)
                .map(|r| r.unwrap_or(Err(StoreError::Closed))),
        }
    }
}
