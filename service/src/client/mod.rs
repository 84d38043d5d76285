//! Client SDK.
