//! The controller's domain as the store sees it: the public records (defined
//! once, in `lapis-protocol`), the store's inputs and receipts, the AuthSession, the
//! injected clock and the error type. Plain data; the store gives it durability.

mod clock;
mod error;
mod inputs;
mod session;

#[cfg(any(test, feature = "test-support"))]
pub use clock::ManualClock;

pub(crate) use clock::{Clock, SystemClock, secs_to_ms};
pub use error::StoreError;
pub(crate) use error::StoreResult;
pub use inputs::{Actor, NewThread, SubmitTurn, ThreadPatch, TurnEnd};
pub(crate) use inputs::{
    Claim, Preparer, ProviderFacts, Receipt, StoreStatus, TransitionOutcome, owned_by,
};
pub(crate) use lapis_protocol::SessionBinding;
pub use lapis_protocol::{
    ApprovalPolicy, EventKind, JournalEvent, ReplayScope, ResolveAs, Retention, Turn, TurnState,
};
pub(crate) use lapis_protocol::{
    ReplayPage, Thread, ThreadSnapshot, TurnEvent, Workspace, next_state,
};
pub(crate) use session::{AuthSession, credential_key};
pub use session::{IssuedSession, NewAuthSession};
