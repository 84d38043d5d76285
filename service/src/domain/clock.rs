//! Time as an injected dependency: the one clock the store (row times) and
//! the session authority (issue, expiry, revocation) read, so tests control
//! both with one value and expiry is tested without sleeping.
//!
//! What must stay true: every time the controller persists or compares is
//! milliseconds since the Unix epoch from a [`Clock`]; nothing else in the
//! crate reads the system time for those.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time in milliseconds since the epoch.
    fn now_ms(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
}

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

/// Whole seconds as ms, saturating (lifetimes come from configuration).
pub(crate) fn secs_to_ms(secs: u64) -> i64 {
    i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)
}
