//! The controller's domain as the store sees it: the public records (defined
//! once, in `lapis-protocol`), the store's inputs and receipts, the AuthSession, the
//! injected clock and the error type. Plain data; the store gives it durability.

mod clock;
mod error;
mod inputs;
mod session;

pub use clock::{Clock, ManualClock, SystemClock, secs_to_ms};
pub use error::{StoreError, StoreResult};
pub use inputs::{
    Actor, Claim, NewThread, Preparer, ProviderFacts, Receipt, ResolveAs, StoreStatus, SubmitTurn,
    ThreadPatch, TransitionOutcome, TurnEnd,
};
pub use lapis_protocol::{
    ApprovalPolicy, EventKind, JournalEvent, ReplayPage, ReplayScope, Retention, SessionBinding,
    TRANSITIONS, Thread, ThreadSnapshot, Turn, TurnEvent, TurnState, Workspace, next_state,
};
pub use session::{AuthSession, NewAuthSession, credential_key};
