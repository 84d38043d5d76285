//! `lapis-service`: the controller as a library.
//!
//! The controller's one promise is that accepted work is never lost and never
//! run twice. Everything here is built around that: a single-writer durable
//! store, a turn state machine with a persisted dispatch boundary, and fences
//! on workspaces whose last turn's outcome is unknown.

pub mod acp;
