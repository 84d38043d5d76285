//! Authentication: bootstrap tokens, session bearers (stored hashed) and the
//! AuthSession lifecycle (issue, resume, revoke, expire).

mod persist;
mod secret;
mod sessions;

pub use crate::domain::{AuthSession, Clock, ManualClock, SystemClock, credential_key};
pub use persist::{MemorySessions, PersistError, SessionPersistence};
pub use secret::{BEARER_PREFIX, hash_bearer, new_bearer, random_hex, secrets_equal};
pub use sessions::{Authenticated, Authority};
