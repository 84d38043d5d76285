//! The one end-to-end test binary: every test drives the built CLI in a temp
//! HOME through [`lapis_e2e::TestContext`].

mod acp;
mod acp_engine;
mod acp_failures;
mod acp_permissions;
mod acp_serve;
mod acp_teardown;
mod basics;
mod cli_drive;
mod cli_permissions;
mod cli_surface;
mod client;
mod home;
mod install;
mod install_faults;
mod install_launchd;
mod install_releases;
mod install_script;
mod install_service;
mod install_support;
mod leaks;
mod ops_logs_doctor;
mod ops_notify;
mod ops_reload;
mod ops_status;
mod protocol;
mod providers;
mod providers_check;
mod redaction;
mod release;
mod release_update;
mod serve;
mod serve_hardening;
mod serve_support;
mod serve_turns;
mod ts_agent;
