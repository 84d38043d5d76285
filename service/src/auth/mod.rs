//! Authentication: bootstrap tokens, session bearers (stored hashed) and the
//! AuthSession lifecycle (issue, resume, revoke, expire).

mod persist;
mod secret;
mod sessions;
mod storage;

#[cfg(any(test, feature = "test-support"))]
pub use crate::domain::ManualClock;

pub(crate) use crate::domain::{AuthSession, Clock, SystemClock};
#[cfg(any(test, feature = "test-support"))]
pub use persist::MemorySessions;
pub(crate) use persist::{PersistError, SessionPersistence};
pub use secret::random_hex;
pub use sessions::Authority;
pub(crate) use storage::read_only_refusal;
