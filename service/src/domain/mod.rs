//! The controller's domain as the store sees it: the public records (defined
//! once, in `lapis-protocol`), the store's inputs and receipts, and the error
//! type. Plain data; the store gives it durability.

mod error;
mod inputs;

pub use error::{StoreError, StoreResult};
pub use inputs::{
    Actor, AuthSession, Claim, NewAuthSession, NewThread, Receipt, ResolveAs, StoreStatus,
    SubmitTurn, ThreadPatch, TransitionOutcome, TurnEnd,
};
pub use lapis_protocol::{
    ApprovalPolicy, EventKind, JournalEvent, ReplayPage, ReplayScope, Retention, SessionBinding,
    TRANSITIONS, Thread, ThreadSnapshot, Turn, TurnEvent, TurnState, Workspace, next_state,
};
