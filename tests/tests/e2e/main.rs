//! The one end-to-end test binary: every test drives the built CLI in a temp
//! HOME through [`lapis_e2e::TestContext`].

mod basics;
mod release;
mod release_update;
