//! The clock tests move by hand (compiled for tests and `test-support`
//! only).

use std::sync::atomic::{AtomicI64, Ordering};

use super::{Clock, secs_to_ms};

/// A clock tests move by hand; optionally it ticks by a fixed step on every
/// read, so successive rows get distinct, ordered times.
#[derive(Debug, Default)]
pub struct ManualClock {
    /// The next reading, in ms.
    now_ms: AtomicI64,
    /// Added after every reading (0: the clock stands still).
    step_ms: i64,
}

impl ManualClock {
    /// A still clock reading `start_secs` whole seconds.
    pub fn new(start_secs: u64) -> ManualClock {
        ManualClock {
            now_ms: AtomicI64::new(secs_to_ms(start_secs)),
            step_ms: 0,
        }
    }

    /// A clock reading `start_ms` that advances `step_ms` after each read.
    #[cfg(test)]
    pub(crate) fn ticking(start_ms: i64, step_ms: i64) -> ManualClock {
        ManualClock {
            now_ms: AtomicI64::new(start_ms),
            step_ms,
        }
    }

    /// Moves the clock forward by whole seconds.
    #[cfg(test)]
    pub(crate) fn advance(&self, secs: u64) {
        self.now_ms.fetch_add(secs_to_ms(secs), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.fetch_add(self.step_ms, Ordering::SeqCst)
    }
}
