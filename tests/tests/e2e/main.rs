//! The one end-to-end test binary: every test drives the built CLI in a temp
//! HOME through [`lapis_e2e::TestContext`].

mod basics;
mod install;
mod install_faults;
mod install_releases;
mod install_service;
mod install_support;
mod release;
mod release_update;
