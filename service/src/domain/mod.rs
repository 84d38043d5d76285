//! The controller's domain: records, the turn state machine, journal events
//! and the error type. Plain data; the store gives it durability.

mod error;
mod events;
mod records;
mod state;

pub use error::{StoreError, StoreResult};
pub use events::{EventKind, JournalEvent, ReplayPage, ReplayScope, ThreadSnapshot};
pub use records::{
    Actor, ApprovalPolicy, AuthSession, Claim, NewAuthSession, NewThread, Receipt, ResolveAs,
    Retention, SessionBinding, StoreStatus, SubmitTurn, Thread, ThreadPatch, TransitionOutcome,
    Turn, TurnEnd, Workspace,
};
pub use state::{TRANSITIONS, TurnEvent, TurnState, next_state};
