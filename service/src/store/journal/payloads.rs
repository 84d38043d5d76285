//! The payloads of metadata-only threads, kept in memory only (never on
//! disk) and bounded: the oldest is evicted first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// Payloads kept in memory only, bounded; oldest evicted first.
#[derive(Debug, Default)]
pub(in crate::store) struct MemoryPayloads {
    /// seq -> payload.
    map: HashMap<u64, Value>,
    /// Insertion order for eviction.
    order: VecDeque<u64>,
    /// Bound on `map.len()`.
    capacity: usize,
}

impl MemoryPayloads {
    /// An empty map holding at most `capacity` payloads.
    pub(in crate::store) fn new(capacity: usize) -> Self {
        MemoryPayloads {
            capacity,
            ..Default::default()
        }
    }

    /// Keeps `value` as `seq`'s payload, evicting the oldest past the bound.
    pub(in crate::store) fn insert(&mut self, seq: u64, value: Value) {
        if self.capacity == 0 {
            return;
        }
        while self.map.len() >= self.capacity {
            match self.order.pop_front() {
                Some(old) => {
                    self.map.remove(&old);
                }
                None => break,
            }
        }
        self.map.insert(seq, value);
        self.order.push_back(seq);
    }

    /// Forgets `seq`'s payload (its thread was deleted).
    pub(in crate::store) fn remove(&mut self, seq: u64) {
        self.map.remove(&seq);
    }

    /// The payload of `seq`, if still in memory.
    pub(in crate::store) fn get(&self, seq: u64) -> Option<&Value> {
        self.map.get(&seq)
    }
}

/// Shared handle to the in-memory payloads.
pub(in crate::store) type SharedPayloads = Arc<Mutex<MemoryPayloads>>;
