//! Authentication: bootstrap tokens, session bearers (stored hashed) and the
//! AuthSession lifecycle (issue, resume, revoke, expire).

mod clock;
mod persist;
mod secret;
mod session;
mod sessions;

pub use clock::{Clock, ManualClock, SystemClock};
pub use persist::{MemorySessions, PersistError, SessionPersistence, credential_key};
pub use secret::{BEARER_PREFIX, hash_bearer, new_bearer, random_hex, secrets_equal};
pub use session::AuthSession;
pub use sessions::{Authenticated, Authority, valid_application};
