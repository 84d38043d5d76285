//! A connection's journal subscriptions: one forwarding task each.
//!
//! What must stay true: a subscription never drops an event silently. When a
//! subscriber falls behind the bounded buffer, it receives one explicit
//! `journal.lagged` notice (with the last sequence it was sent) and the
//! subscription ends; the client must replay from there and subscribe again.

use std::collections::HashMap;

use tokio::task::JoinHandle;

/// Subscriptions of one connection, by id.
#[derive(Debug, Default)]
pub(super) struct Subscriptions {
    /// Running forwarders; aborted on unsubscribe or when the connection ends.
    tasks: HashMap<String, JoinHandle<()>>,
    /// Counter for ids (`sub_1`, `sub_2`, …), unique per connection.
    next: u64,
}

impl Subscriptions {
    /// Allocates the next id.
    pub(super) fn next_id(&mut self) -> String {
        self.next += 1;
        format!("sub_{}", self.next)
    }

    /// Subscriptions still running (finished ones are forgotten first).
    pub(super) fn active(&mut self) -> usize {
        self.tasks.retain(|_, t| !t.is_finished());
        self.tasks.len()
    }

    /// Registers a running forwarder.
    pub(super) fn insert(&mut self, id: String, task: JoinHandle<()>) {
        self.tasks.retain(|_, t| !t.is_finished());
        self.tasks.insert(id, task);
    }

    /// Stops one subscription; false when it did not exist.
    pub(super) fn stop(&mut self, id: &str) -> bool {
        match self.tasks.remove(id) {
            Some(task) => {
                task.abort();
                true
            }
            None => false,
        }
    }

    /// Stops every subscription.
    pub(super) fn stop_all(&mut self) {
        for (_, task) in self.tasks.drain() {
            task.abort();
        }
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        self.stop_all();
    }
}
