//! In-memory scheduling state, rebuilt from the turns table at open.
//!
//! Rules (what must stay true):
//! - at most one turn in flight per workspace (the *lease*);
//! - FIFO inside a workspace (by `queue_seq`, the submission order);
//! - first-fit across workspaces: the oldest queued turn whose workspace is
//!   free and unfenced runs next;
//! - a workspace with a `submission_unknown`/`interrupted` turn is fenced and
//!   its queue does not move until every fencing turn is resolved;
//! - the number of queued turns never exceeds the capacity.
//!
//! The store mutates this only after the matching database commit succeeded.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Queues, leases and fences.
#[derive(Debug, Default)]
pub(super) struct Scheduler {
    /// Queued turns per workspace, oldest first: `(queue_seq, turn id)`.
    queues: BTreeMap<String, VecDeque<(u64, String)>>,
    /// The turn holding each leased workspace.
    in_flight: BTreeMap<String, String>,
    /// Fencing turns per fenced workspace.
    fenced: BTreeMap<String, BTreeSet<String>>,
    /// Total queued turns.
    queued: usize,
    /// Bound on `queued`.
    capacity: usize,
}

impl Scheduler {
    /// An empty scheduler with a queue bound.
    pub(super) fn new(capacity: usize) -> Self {
        Scheduler {
            capacity,
            ..Default::default()
        }
    }

    /// The queue bound.
    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Turns waiting.
    pub(super) fn queued(&self) -> usize {
        self.queued
    }

    /// `true` when one more turn fits (restored turns may exceed the bound).
    pub(super) fn has_room(&self) -> bool {
        self.queued < self.capacity
    }

    /// Add a queued turn at the back of its workspace's queue. `queue_seq`
    /// must be larger than every seq already queued there.
    pub(super) fn enqueue(&mut self, workspace: &str, queue_seq: u64, turn: &str) {
        let q = self.queues.entry(workspace.to_owned()).or_default();
        debug_assert!(q.back().is_none_or(|(s, _)| *s < queue_seq));
        q.push_back((queue_seq, turn.to_owned()));
        self.queued += 1;
    }

    /// Remove a queued turn (cancelled before it ran). Returns whether it was queued.
    pub(super) fn remove_queued(&mut self, workspace: &str, turn: &str) -> bool {
        let Some(q) = self.queues.get_mut(workspace) else {
            return false;
        };
        let Some(pos) = q.iter().position(|(_, t)| t == turn) else {
            return false;
        };
        q.remove(pos);
        if q.is_empty() {
            self.queues.remove(workspace);
        }
        self.queued -= 1;
        true
    }

    /// The next turn to claim: `(workspace, turn)`, without taking it.
    pub(super) fn pick(&self) -> Option<(String, String)> {
        self.queues
            .iter()
            .filter(|(ws, _)| !self.in_flight.contains_key(*ws) && !self.fenced.contains_key(*ws))
            .filter_map(|(ws, q)| q.front().map(|(seq, t)| (*seq, ws, t)))
            .min_by_key(|(seq, _, _)| *seq)
            .map(|(_, ws, t)| (ws.clone(), t.clone()))
    }

    /// Take the head of `workspace`'s queue into flight (after `pick`).
    pub(super) fn claim(&mut self, workspace: &str, turn: &str) {
        let q = self
            .queues
            .get_mut(workspace)
            .expect("claim of a picked workspace");
        let (_, head) = q.pop_front().expect("claim of a non-empty queue");
        debug_assert_eq!(head, turn);
        if q.is_empty() {
            self.queues.remove(workspace);
        }
        self.queued -= 1;
        self.in_flight.insert(workspace.to_owned(), turn.to_owned());
    }

    /// Mark a turn as in flight directly (restoring after open).
    pub(super) fn restore_in_flight(&mut self, workspace: &str, turn: &str) {
        self.in_flight.insert(workspace.to_owned(), turn.to_owned());
    }

    /// The in-flight turn finished; release the lease, fencing if `fence`.
    pub(super) fn release(&mut self, workspace: &str, turn: &str, fence: bool) {
        if self.in_flight.get(workspace).is_some_and(|t| t == turn) {
            self.in_flight.remove(workspace);
        }
        if fence {
            self.fence(workspace, turn);
        }
    }

    /// Record a fencing turn.
    pub(super) fn fence(&mut self, workspace: &str, turn: &str) {
        self.fenced
            .entry(workspace.to_owned())
            .or_default()
            .insert(turn.to_owned());
    }

    /// A fencing turn was resolved; the workspace moves again when no fence is left.
    pub(super) fn unfence(&mut self, workspace: &str, turn: &str) {
        if let Some(set) = self.fenced.get_mut(workspace) {
            set.remove(turn);
            if set.is_empty() {
                self.fenced.remove(workspace);
            }
        }
    }

    /// The first fencing turn of a workspace, if fenced.
    pub(super) fn fenced_by(&self, workspace: &str) -> Option<&str> {
        self.fenced
            .get(workspace)
            .and_then(|s| s.iter().next())
            .map(String::as_str)
    }

    /// Workspaces holding a lease.
    pub(super) fn running_workspaces(&self) -> Vec<String> {
        self.in_flight.keys().cloned().collect()
    }

    /// Fenced workspaces.
    pub(super) fn fenced_workspaces(&self) -> Vec<String> {
        self.fenced.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_inside_first_fit_across_and_one_lease_per_workspace() {
        let mut s = Scheduler::new(10);
        s.enqueue("a", 1, "t1");
        s.enqueue("a", 2, "t2");
        s.enqueue("b", 3, "t3");
        assert_eq!(s.pick(), Some(("a".into(), "t1".into())));
        s.claim("a", "t1");
        // a is leased: first fit moves to b even though t2 is older.
        assert_eq!(s.pick(), Some(("b".into(), "t3".into())));
        s.claim("b", "t3");
        assert_eq!(s.pick(), None);
        s.release("a", "t1", false);
        assert_eq!(s.pick(), Some(("a".into(), "t2".into())));
        assert_eq!(s.queued(), 1);
    }

    #[test]
    fn fenced_workspace_does_not_move_until_every_fence_is_resolved() {
        let mut s = Scheduler::new(10);
        s.enqueue("a", 1, "t1");
        s.enqueue("a", 2, "t2");
        s.claim("a", "t1");
        s.release("a", "t1", true);
        s.fence("a", "t0");
        assert_eq!(s.pick(), None);
        assert_eq!(s.fenced_workspaces(), vec!["a".to_owned()]);
        s.unfence("a", "t1");
        assert_eq!(s.pick(), None);
        s.unfence("a", "t0");
        assert_eq!(s.pick(), Some(("a".into(), "t2".into())));
    }

    #[test]
    fn capacity_and_removal() {
        let mut s = Scheduler::new(2);
        s.enqueue("a", 1, "t1");
        assert!(s.has_room());
        s.enqueue("a", 2, "t2");
        assert!(!s.has_room());
        assert!(s.remove_queued("a", "t1"));
        assert!(!s.remove_queued("a", "t1"));
        assert!(s.has_room());
        assert_eq!(s.pick(), Some(("a".into(), "t2".into())));
    }
}
