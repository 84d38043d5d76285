//! Knowing that an agent's group leader has exited even while its stdout
//! stays open (a descendant inherited the pipe and keeps running).
//!
//! What must stay true: the watch never reaps the leader (teardown does,
//! through its `Child`), so the exit status stays readable; and once the
//! leader has exited, the reader drains what the leader wrote and then
//! reports the agent gone instead of waiting on a pipe nobody will close.
//! On Linux the watch is a pidfd (readable once the process has exited,
//! zombie included); elsewhere there is none, and only stdout EOF tells.

use std::time::Duration;

use tokio::sync::watch;

/// After the leader exited, how long the reader waits for each further
/// line before it reports the agent gone: what the leader wrote before it
/// exited is already in the pipe, so this only bounds a pipe held open by
/// a descendant.
pub(super) const DRAIN: Duration = Duration::from_millis(200);

/// A watch that turns `true` once process `pid` has exited; `None` when
/// the platform (or the kernel) offers no way to watch it.
pub(super) fn watch_exit(pid: u32) -> Option<watch::Receiver<bool>> {
    imp::watch_exit(pid)
}

#[cfg(target_os = "linux")]
mod imp {
    use tokio::io::unix::AsyncFd;
    use tokio::sync::watch;

    pub(super) fn watch_exit(pid: u32) -> Option<watch::Receiver<bool>> {
        let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
        let fd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()?;
        // Deprecated for types whose descriptor can be closed behind the
        // registration's back; an `OwnedFd` moved into the `AsyncFd` cannot
        // be (the safe `register` replacement is an `unsafe fn`).
        #[allow(deprecated)]
        let fd = AsyncFd::new(fd).ok()?;
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            tokio::select! {
                ready = fd.readable() => {
                    if ready.is_ok() {
                        let _ = tx.send(true);
                    }
                }
                _ = tx.closed() => {}
            }
        });
        Some(rx)
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use tokio::sync::watch;

    pub(super) fn watch_exit(_pid: u32) -> Option<watch::Receiver<bool>> {
        None
    }
}
