//! Presence: who is watching what right now, so a presence-aware
//! notifier (`notify.presence`) stays quiet about what a person already
//! sees.
//!
//! One small registry for the whole controller. Whatever shows a person
//! the journal live registers a [`Hold`] for what it covers — a thread, or
//! every thread of one principal (and application) — and the registry
//! counts holds per [`Attended`] scope. Today that is a `journal.subscribe`
//! with `present: true` (the CLI's `turns submit --follow` and `journal
//! tail --follow`); a `watch` view registers the same way: it subscribes
//! with `present: true` over the threads it shows (no `threadId`: every
//! thread of its session), or, living inside the server, takes
//! [`Presence::hold`] itself and keeps the guard as long as it is on
//! screen.
//!
//! What must stay true:
//! - a hold is a guard: it counts while it lives and is released when it
//!   drops, so presence can never outlive what registered it. A
//!   subscription's hold lives in its forwarding task, which the
//!   connection aborts on `journal.unsubscribe` and when it closes: a
//!   disconnected client is never "present";
//! - the registry is consulted only by the notifier, on its own task, and
//!   every operation is a short critical section on a plain mutex (never
//!   held across an await): nothing here is on a turn's path;
//! - presence only ever suppresses a notification; it never hides an event
//!   from the journal or an attention subscription.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use lapis_protocol::Thread;

/// What one hold covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Attended {
    /// Every turn of this thread.
    Thread(String),
    /// Every thread of this principal, of one application or (`None`) of
    /// all of them.
    Principal {
        /// The principal.
        principal: String,
        /// Its application, or every one.
        application: Option<String>,
    },
}

impl Attended {
    /// Whether this scope covers `thread`.
    fn covers(&self, thread: &Thread) -> bool {
        match self {
            Attended::Thread(id) => *id == thread.id,
            Attended::Principal {
                principal,
                application,
            } => {
                *principal == thread.principal
                    && application
                        .as_ref()
                        .is_none_or(|a| *a == thread.application)
            }
        }
    }
}

/// The registry (cheap to clone: every clone is the same registry).
#[derive(Debug, Clone, Default)]
pub(crate) struct Presence {
    /// Live holds per scope (a scope with none is removed).
    holds: Arc<Mutex<HashMap<Attended, usize>>>,
}

impl Presence {
    fn lock(&self) -> MutexGuard<'_, HashMap<Attended, usize>> {
        // A panic elsewhere never leaves the counts half-updated (each
        // update is one map operation), so a poisoned lock is still sound.
        self.holds.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a person watching `scope` until the guard drops.
    pub(crate) fn hold(&self, scope: Attended) -> Hold {
        *self.lock().entry(scope.clone()).or_insert(0) += 1;
        Hold {
            presence: self.clone(),
            scope,
        }
    }

    /// Whether someone is watching `thread` (one of its scopes is held).
    pub(crate) fn attends(&self, thread: &Thread) -> bool {
        self.lock().keys().any(|s| s.covers(thread))
    }
}

/// One registration; released on drop.
#[derive(Debug)]
pub(crate) struct Hold {
    /// The registry it counts in.
    presence: Presence,
    /// What it covers.
    scope: Attended,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut holds = self.presence.lock();
        if let Some(n) = holds.get_mut(&self.scope) {
            *n -= 1;
            if *n == 0 {
                holds.remove(&self.scope);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(id: &str, principal: &str, application: &str) -> Thread {
        serde_json::from_value(serde_json::json!({
            "id": id, "principal": principal, "application": application,
            "workspaceId": "proj", "provider": "echo", "approval": "ask",
            "restricted": false, "retention": "full", "version": 1,
            "createdAt": "2026-12-01T00:00:00Z", "updatedAt": "2026-12-01T00:00:00Z",
        }))
        .unwrap()
    }

    #[test]
    fn a_hold_covers_its_scope_while_it_lives_and_counts_per_scope() {
        let p = Presence::default();
        let a = thread("thr_a", "owner", "editor");
        let b = thread("thr_b", "owner", "phone");
        let c = thread("thr_c", "other", "editor");
        assert!(!p.attends(&a));

        let first = p.hold(Attended::Thread("thr_a".into()));
        let second = p.hold(Attended::Thread("thr_a".into()));
        assert!(p.attends(&a) && !p.attends(&b));
        drop(first);
        assert!(p.attends(&a), "the second hold still counts");
        drop(second);
        assert!(!p.attends(&a));

        let editor = p.hold(Attended::Principal {
            principal: "owner".into(),
            application: Some("editor".into()),
        });
        assert!(p.attends(&a) && !p.attends(&b) && !p.attends(&c));
        let every = p.clone().hold(Attended::Principal {
            principal: "owner".into(),
            application: None,
        });
        assert!(
            p.attends(&b) && !p.attends(&c),
            "a clone is the same registry"
        );
        drop((editor, every));
        assert!(!p.attends(&a) && !p.attends(&b));
        assert!(p.lock().is_empty(), "released scopes leave nothing behind");
    }
}
