//! Terminal-safe text: the one definition is `lapis_protocol::terminal`
//! (the controller's notifier uses it too).

pub(crate) use lapis_protocol::terminal::safe;
