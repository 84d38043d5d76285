//! Why a managed controller did not start or stop. No variant carries the
//! startup credential: the child's own failure message is passed on with
//! any occurrence of it blanked out.

use std::process::ExitStatus;
use std::time::Duration;

use crate::config::{CommandError, CommandNameError};

/// Why [`super::ManagedController`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ManagedError {
    /// The executable's name is neither absolute nor bare.
    #[error("the controller executable: {0}")]
    Name(#[from] CommandNameError),
    /// The executable was not found or is not executable.
    #[error("the controller executable: {0}")]
    Command(#[from] CommandError),
    /// The process could not be started (this includes a parent that
    /// died while its child was being started).
    #[error("cannot start the controller")]
    Spawn(#[source] std::io::Error),
    /// The controller refused to start and said why (`code` is the stable
    /// error code of its `startupFailed` frame: `unauthenticated`,
    /// `invalid_config`, a store code, …).
    #[error("the controller did not start: {message} [{code}]")]
    Startup {
        /// Stable code.
        code: String,
        /// The controller's reason.
        message: String,
    },
    /// The controller exited before it was ready, without saying why (it
    /// is probably not `lapis-ai-controller`, or it crashed).
    #[error("the controller exited before it was ready ({status})")]
    Exited {
        /// How it exited.
        status: ExitStatus,
    },
    /// No readiness frame within the readiness deadline; the child was
    /// stopped.
    #[error("the controller was not ready within {} s", after.as_secs_f64())]
    NotReady {
        /// The deadline that passed.
        after: Duration,
    },
    /// The controller is ready but is not the build the caller expects;
    /// it was stopped before anything was sent to it.
    #[error(
        "the controller's build identity does not match: `{field}` is {found}, expected {expected}"
    )]
    BuildMismatch {
        /// The first field that differs.
        field: String,
        /// What the caller expects (JSON).
        expected: String,
        /// What the controller reported (JSON; `null` when absent).
        found: String,
    },
    /// Something other than the managed-mode startup frames arrived first.
    #[error("the controller broke the startup protocol: {0}")]
    Protocol(String),
    /// Talking to the child failed.
    #[error("cannot talk to the controller")]
    Io(#[source] std::io::Error),
    /// The controller survived SIGTERM, the stop grace and SIGKILL.
    #[error("the controller did not exit")]
    StillRunning,
}

impl ManagedError {
    /// A stable code: the controller's own for [`ManagedError::Startup`],
    /// else a client-side one.
    pub fn code(&self) -> &str {
        match self {
            ManagedError::Name(_) | ManagedError::Command(_) => "not_found",
            ManagedError::Spawn(_) => "spawn_failed",
            ManagedError::Startup { code, .. } => code,
            ManagedError::Exited { .. } => "exited",
            ManagedError::NotReady { .. } => "not_ready",
            ManagedError::BuildMismatch { .. } => "build_mismatch",
            ManagedError::Protocol(_) => "protocol_error",
            ManagedError::Io(_) => "io_error",
            ManagedError::StillRunning => "still_running",
        }
    }
}
