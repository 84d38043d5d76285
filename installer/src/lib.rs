//! `lapis-installer`: puts a verified release tree into an immutable,
//! digest-addressed snapshot and moves the launcher to it atomically.
//!
//! The crate is organised by the things it manages:
//!
//! - [`paths`]: where everything of an instance lives (used by every command);
//! - [`fsx`]: the only code that renames, swaps or locks install paths;
//! - [`snapshot`], [`staging`]: `releases/<digest>` directories, staging,
//!   verification;
//! - [`install`]: the stage → verify → smoke-test → activate sequence, with
//!   three entry points: [`install_executable`] (the running binary),
//!   [`install_tree`] (an extracted release directory holding
//!   `bin/lapis-ai-controller` and `release.json`) and [`install_staged`]
//!   (a [`StagingDir`] filled in place, e.g. by archive extraction);
//! - [`archive`]: `install --from ARCHIVE` and `update` (fetch → checksum
//!   → extract into a [`StagingDir`] → [`install_staged`]);
//! - [`smoke`], [`launcher`], [`config`], [`state`]: the steps;
//! - [`unit`], [`service`]: the systemd/launchd user service;
//! - [`inspect`]: read-only questions to the service manager for `logs` and
//!   `doctor` (where the log is, unit state, lingering);
//! - [`releases`], [`uninstall`]: list, rollback, gc, uninstall.
//!
//! Nothing here prints or exits; every operation returns a report or an
//! [`InstallError`] whose message names paths and digests, never secrets.

// Visibility is a design statement: an item another crate does not use is
// `pub(crate)`, so the compiler reports what nothing uses.
#![warn(unreachable_pub)]

pub mod archive;
pub mod config;
mod error;
mod fault;
pub mod fsx;
pub mod inspect;
pub(crate) mod install;
pub mod launcher;
pub mod paths;
pub mod releases;
pub mod service;
pub mod smoke;
pub mod snapshot;
pub mod staging;
pub(crate) mod state;
pub mod uninstall;
pub mod unit;

pub use archive::{Expected, UpdateReport, UpdateRequest, install_archive, update};

pub use error::InstallError;
#[cfg(feature = "test-support")]
pub use fault::FAULT_PAUSE_ENV;
pub use fault::checkpoint_hook;
pub use install::{Checkpoint, InstallReport, install_executable};
pub use install::{InstallOptions, SnapshotOutcome, install_staged, install_tree};
pub use paths::{PathOptions, Paths, ServiceKind};
pub use staging::StagingDir;
