//! The tool-call fault-pause hook, compiled only with the `test-support`
//! feature (the end-to-end suite enables it; release builds do not), after
//! the installer's `LAPIS_INSTALL_FAULT_PAUSE`.
//!
//! With the feature, `LAPIS_TOOL_FAULT_PAUSE=<step>` makes every tool call
//! that reaches `<step>` say `lapis-fault-pause: tool-call <step>` on
//! stderr and then wait forever, so a test can kill -9 `serve` exactly
//! there. It only ever pauses; it cannot skip, reorder or repeat a step.
//! Without the feature the hook is empty and the variable means nothing.

/// A point of a tool call's path ([`super::call`]) a test may stop at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// `tool_call_requested` is committed; `capture.begin` is not sent.
    BeforeBegin,
    /// `capture.begin` is acknowledged; `tools.invoke` is not sent.
    AfterBegin,
    /// `tools.invoke` answered; `capture.finish` is not sent.
    AfterInvoke,
    /// `capture.finish` is acknowledged; `tool_call_finished` is not
    /// committed.
    AfterCaptureFinish,
    /// `tool_call_finished` is committed; the agent has no answer yet.
    AfterFinish,
}

impl Step {
    /// The name `LAPIS_TOOL_FAULT_PAUSE` takes.
    #[cfg_attr(not(feature = "test-support"), allow(dead_code))]
    fn name(self) -> &'static str {
        match self {
            Step::BeforeBegin => "before-begin",
            Step::AfterBegin => "after-begin",
            Step::AfterInvoke => "after-invoke",
            Step::AfterCaptureFinish => "after-capture-finish",
            Step::AfterFinish => "after-finish",
        }
    }
}

/// Environment variable naming the step to pause at.
#[cfg(feature = "test-support")]
const FAULT_PAUSE_ENV: &str = "LAPIS_TOOL_FAULT_PAUSE";

/// Runs at each [`Step`] of every call; pauses forever at the one
/// [`FAULT_PAUSE_ENV`] names, after saying so on stderr (a test hook the
/// test reads, the one place this library writes to a terminal).
pub(crate) async fn step(step: Step) {
    #[cfg(feature = "test-support")]
    if std::env::var(FAULT_PAUSE_ENV).is_ok_and(|wanted| wanted == step.name()) {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "lapis-fault-pause: tool-call {}",
            step.name()
        );
        std::future::pending::<()>().await;
    }
    #[cfg(not(feature = "test-support"))]
    let _ = step;
}
