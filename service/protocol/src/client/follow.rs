//! Following a journal: subscribe, then yield events in order, resubscribing
//! gap-free when the server says the subscription lagged or ended.
//!
//! Every follow mode of the CLI (`journal tail --follow`, `turns submit
//! --wait/--follow`) goes through [`JournalFollower`], so the resume rule is
//! written once: the cursor is the last event's `threadSeq` when following
//! one thread, its global `seq` otherwise, and a `lagged`/`ended` notice's
//! `resumeAfter` wins when it has one. A follower that a person watches
//! ([`JournalFollower::attended`]) subscribes with `present: true` every
//! time, so a presence-aware notifier stays quiet about what it shows.

use std::time::Duration;

use super::{Client, ClientError};
use crate::JournalEvent;
use crate::notifications::JournalNotice;
use crate::params::JournalSubscribe;

/// A live journal subscription on a borrowed client.
#[derive(Debug)]
pub struct JournalFollower<'c> {
    /// The connection; callers may make other calls through [`JournalFollower::client`].
    client: &'c mut Client,
    /// The thread followed, or every thread of the session.
    thread: Option<String>,
    /// Cursor of the last event yielded (see the module docs).
    cursor: u64,
    /// Subscribes with `present: true` (a person is watching).
    present: bool,
}

impl<'c> JournalFollower<'c> {
    /// Subscribes to `thread` (or every thread) from `after` (`None`: only
    /// events committed from now on).
    pub fn start(
        client: &'c mut Client,
        thread: Option<&str>,
        after: Option<u64>,
    ) -> Result<JournalFollower<'c>, ClientError> {
        Self::open(client, thread, after, false)
    }

    /// As [`JournalFollower::start`], for a person watching the events as
    /// they arrive (the CLI's `--follow`, a `watch` view): every
    /// subscription it makes is `present`, so while it lives a
    /// presence-aware notifier (`notify.presence`) sends nothing about the
    /// threads it covers.
    pub fn attended(
        client: &'c mut Client,
        thread: Option<&str>,
        after: Option<u64>,
    ) -> Result<JournalFollower<'c>, ClientError> {
        Self::open(client, thread, after, true)
    }

    fn open(
        client: &'c mut Client,
        thread: Option<&str>,
        after: Option<u64>,
        present: bool,
    ) -> Result<JournalFollower<'c>, ClientError> {
        let mut follower = JournalFollower {
            client,
            thread: thread.map(str::to_owned),
            cursor: after.unwrap_or(0),
            present,
        };
        follower.subscribe(after)?;
        Ok(follower)
    }

    fn subscribe(&mut self, after: Option<u64>) -> Result<(), ClientError> {
        self.client.journal_subscribe_with(&JournalSubscribe {
            thread_id: self.thread.clone(),
            after,
            attention: false,
            present: self.present,
        })?;
        Ok(())
    }

    /// The client, for other calls while following (notifications that
    /// arrive meanwhile are queued, not lost).
    pub fn client(&mut self) -> &mut Client {
        self.client
    }

    /// The cursor of the last event yielded.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The next event. `Ok(None)` when nothing arrived within `timeout`
    /// (`None` waits indefinitely). A lagged or ended subscription is
    /// renewed from its resume cursor before waiting on.
    pub fn next(&mut self, timeout: Option<Duration>) -> Result<Option<JournalEvent>, ClientError> {
        loop {
            let Some(n) = self.client.next_notification(timeout)? else {
                return Ok(None);
            };
            match JournalNotice::parse(&n) {
                Some(JournalNotice::Event(p)) => {
                    let e = p.event;
                    let at = if self.thread.is_some() {
                        e.thread_seq
                    } else {
                        e.seq
                    };
                    self.cursor = self.cursor.max(at);
                    return Ok(Some(e));
                }
                Some(JournalNotice::Lagged(p)) => self.resubscribe(Some(p.resume_after))?,
                Some(JournalNotice::Ended(p)) => self.resubscribe(p.resume_after)?,
                None => {}
            }
        }
    }

    fn resubscribe(&mut self, resume_after: Option<u64>) -> Result<(), ClientError> {
        let after = resume_after.unwrap_or(self.cursor);
        self.subscribe(Some(after))
    }
}
