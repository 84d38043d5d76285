//! Time as an injected dependency: the one clock the store (row times) and
//! the session authority (issue, expiry, revocation) read, so tests control
//! both with one value and expiry is tested without sleeping.
//!
//! What must stay true: every time the controller persists or compares is
//! milliseconds since the Unix epoch from a [`Clock`]; nothing else in the
//! crate reads the system time for those.

use std::time::{SystemTime, UNIX_EPOCH};

#[cfg(any(test, feature = "test-support"))]
mod manual;
#[cfg(any(test, feature = "test-support"))]
pub use manual::ManualClock;

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

/// Whole seconds as ms, saturating (lifetimes come from configuration).
pub(crate) fn secs_to_ms(secs: u64) -> i64 {
    i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)
}
