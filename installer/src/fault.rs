//! The install fault-pause hook, compiled only with the `test-support`
//! feature (the end-to-end suite enables it; release builds do not).
//!
//! With the feature, `LAPIS_INSTALL_FAULT_PAUSE=<checkpoint>` makes an
//! install print `lapis-fault-pause: <checkpoint>` on stderr at that point
//! of the sequence and sleep, so a test can kill it there with SIGKILL. It
//! only ever pauses; it cannot skip a step. Without the feature the hook is
//! empty and the variable means nothing.

use crate::Checkpoint;

/// Environment variable naming the checkpoint to pause at.
#[cfg(feature = "test-support")]
pub const FAULT_PAUSE_ENV: &str = "LAPIS_INSTALL_FAULT_PAUSE";

/// The checkpoint hook every install, update and rollback of the binary
/// runs with ([`crate::InstallOptions::checkpoint`]).
pub fn checkpoint_hook(point: Checkpoint) {
    #[cfg(feature = "test-support")]
    pause_if_wanted(point);
    #[cfg(not(feature = "test-support"))]
    let _ = point;
}

/// Pauses forever at the checkpoint named in [`FAULT_PAUSE_ENV`], after
/// saying so on stderr (the one place this library writes to a terminal:
/// a test hook the test reads).
#[cfg(feature = "test-support")]
fn pause_if_wanted(point: Checkpoint) {
    use std::io::Write;
    if std::env::var(FAULT_PAUSE_ENV).is_ok_and(|wanted| wanted == point.name()) {
        let _ = writeln!(std::io::stderr(), "lapis-fault-pause: {}", point.name());
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}
