//! The one end-to-end test binary: every test drives the built CLI in a temp
//! HOME through [`lapis_e2e::TestContext`].

mod acp;
mod acp_engine;
mod acp_failures;
mod acp_permissions;
mod acp_teardown;
mod basics;
