//! Exit classes and the error type every command handler returns.
//!
//! The class is decided where the failure is understood (a handler knows that
//! an unreachable socket means "service unavailable") and mapped to a process
//! exit code exactly once, in `main`.

use std::fmt;
use std::process::ExitCode;

/// How a command ended, as the shell sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExitClass {
    /// 0: the command did what was asked.
    Success,
    /// 1: the command worked, but the turn it waited for ended other than
    /// `completed` (failed, cancelled, interrupted or outcome unknown).
    TurnNotCompleted,
    /// 1: `doctor` found a failing check. The command has printed its whole
    /// report (also the `--json` document), so `main` adds no error document.
    Unhealthy,
    /// 2: bad usage, bad input, or a request the controller refused.
    Failure,
    /// 3: the service or the service manager could not be reached.
    Unavailable,
}

impl ExitClass {
    /// Exit 1 classes: the command printed its whole result (also its
    /// `--json` document or stream), so `main` adds no error document.
    pub(crate) fn result_printed(self) -> bool {
        matches!(self, ExitClass::TurnNotCompleted | ExitClass::Unhealthy)
    }

    /// The numeric exit code.
    pub(crate) fn code(self) -> u8 {
        match self {
            ExitClass::Success => 0,
            ExitClass::TurnNotCompleted => 1,
            ExitClass::Unhealthy => 1,
            ExitClass::Failure => 2,
            ExitClass::Unavailable => 3,
        }
    }
}

impl From<ExitClass> for ExitCode {
    fn from(class: ExitClass) -> ExitCode {
        ExitCode::from(class.code())
    }
}

/// A failed command: the error with its cause chain, a stable code for
/// scripts, and the exit class.
pub(crate) struct CliError {
    /// Exit class reported to the shell.
    pub(crate) class: ExitClass,
    /// Stable machine-readable code (`invalid_config`, `unavailable`, …).
    pub(crate) code: &'static str,
    /// The error and its causes. Must never contain a secret.
    pub(crate) error: anyhow::Error,
    /// With `--json`: what the command did before it failed (for example
    /// `install` when only the service step failed), printed as
    /// `error.details`. Must never contain a secret.
    pub(crate) details: Option<serde_json::Value>,
}

impl CliError {
    /// A request or input failure (exit 2).
    pub(crate) fn failure(code: &'static str, error: impl Into<anyhow::Error>) -> CliError {
        CliError {
            class: ExitClass::Failure,
            code,
            error: error.into(),
            details: None,
        }
    }

    /// The service or service manager is unreachable (exit 3).
    pub(crate) fn unavailable(code: &'static str, error: impl Into<anyhow::Error>) -> CliError {
        CliError {
            class: ExitClass::Unavailable,
            code,
            error: error.into(),
            details: None,
        }
    }

    /// The turn a `--wait`/`--follow`/`ask` watched ended other than
    /// `completed` (exit 1). The command has already printed its result, so
    /// only the message goes to stderr.
    pub(crate) fn turn_not_completed(turn: &lapis_protocol::Turn) -> CliError {
        let outcome = turn
            .outcome
            .as_deref()
            .map(|o| format!(" ({o})"))
            .unwrap_or_default();
        // The one outcome whose fix is the owner's choice: say what it is.
        let fix = if turn.outcome.as_deref() == Some("ask_unavailable") {
            "\n  the provider cannot be made to ask before acting (its `ask_mode` \
             observation says why): give it an `askMode` that asks, use `--approval allow-all` \
             by choice, use another provider, or accept it with `\"allowUnasked\": true` in its config"
        } else {
            ""
        };
        CliError {
            class: ExitClass::TurnNotCompleted,
            code: "turn_not_completed",
            error: anyhow::anyhow!(
                "turn {} ended {}{outcome}{fix}",
                turn.id,
                turn.state.as_str()
            ),
            details: None,
        }
    }

    /// A health check failed (exit 1); the report is already printed.
    pub(crate) fn unhealthy(error: impl Into<anyhow::Error>) -> CliError {
        CliError {
            class: ExitClass::Unhealthy,
            code: "unhealthy",
            error: error.into(),
            details: None,
        }
    }

    /// Attaches what the command did before failing (see `details`).
    pub(crate) fn with_details(mut self, details: serde_json::Value) -> CliError {
        self.details = Some(details);
        self
    }
}

/// Any other error is a plain failure with the generic code `error`.
impl<E: Into<anyhow::Error>> From<E> for CliError {
    fn from(error: E) -> CliError {
        CliError::failure("error", error)
    }
}

impl fmt::Debug for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {:?}", self.code, self.error)
    }
}

/// Result of a command handler.
pub(crate) type CliResult = Result<(), CliError>;
