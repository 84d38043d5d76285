//! The managed controller's process: spawned and waited for by one thread
//! that lives exactly as long as the child.
//!
//! What must stay true:
//! - the child gets SIGTERM when this process dies (Linux: the
//!   parent-death signal, armed before `exec`; it fires when the *thread*
//!   that forked exits, which is why one thread spawns the child and stays
//!   until the child has exited), and a child whose parent died before the
//!   signal was armed refuses to start;
//! - the child leads its own process group, so a terminal's ^C reaches the
//!   application, which decides the stop order, and the group can be
//!   signalled as one;
//! - a signal goes out only while the child is unreaped: the waiter thread
//!   first waits *without* reaping, marks the child exited under the lock
//!   every signal is sent under, and only then reaps, so a signal can never
//!   reach an unrelated process that reused the pid;
//! - when the controller exits, whatever is still in its process group is
//!   killed before the controller is reaped (its agents have their own
//!   groups, which the controller tears down itself on a graceful stop).

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};

/// How long a stop waits for the group to die after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// What the waiter thread knows about the child.
#[derive(Debug, Default)]
struct State {
    /// The child has exited (it may not be reaped yet): no more signals.
    exited: bool,
    /// Its exit status, once reaped.
    status: Option<ExitStatus>,
}

/// The state, with the condition variable [`ManagedChild::wait_timeout`]
/// sleeps on.
#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A spawned managed controller.
#[derive(Debug)]
pub(super) struct ManagedChild {
    /// The child's pid, also its process group id.
    pid: Pid,
    /// Shared with the waiter thread.
    shared: Arc<Shared>,
    /// SIGTERM to SIGKILL, on [`ManagedChild::stop`] and on drop.
    grace: Duration,
    /// Set once a stop ran, so drop does not run it again.
    stopped: bool,
}

impl ManagedChild {
    /// Spawns `command` from a dedicated thread that then waits for the
    /// child; returns once the child exists (or could not be started).
    /// `command` is consumed: the copies of the child's ends of any pipes or
    /// sockets it holds are closed as soon as the child has them.
    pub(super) fn spawn(mut command: Command, grace: Duration) -> io::Result<ManagedChild> {
        command.process_group(0);
        arm_parent_death_signal(&mut command);
        let shared = Arc::new(Shared::default());
        let waiter = shared.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("lapis-managed".into())
            .spawn(move || {
                let spawned = command.spawn();
                // The parent's copies of the child's stdin/stdout: closed
                // now, so the child's exit is seen as end of stream.
                drop(command);
                let mut child = match spawned {
                    Ok(child) => child,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let pid = Pid::from_child(&child);
                let _ = tx.send(Ok(pid));
                // Wait without reaping: the pid stays this child's while
                // `exited` is false.
                while let Err(rustix::io::Errno::INTR) = rustix::process::waitid(
                    WaitId::Pid(pid),
                    WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
                ) {}
                waiter.lock().exited = true;
                // The group id is pinned while its leader is unreaped.
                let _ = rustix::process::kill_process_group(pid, Signal::KILL);
                let status = child.wait();
                let mut state = waiter.lock();
                state.status = status.ok();
                if state.status.is_none() {
                    // Reaped elsewhere (a SIGCHLD handler of the
                    // application): report it as a signal death.
                    use std::os::unix::process::ExitStatusExt;
                    state.status = Some(ExitStatus::from_raw(9));
                }
                waiter.changed.notify_all();
            })?;
        let pid = rx
            .recv()
            .map_err(|_| io::Error::other("the spawning thread ended early"))??;
        Ok(ManagedChild {
            pid,
            shared,
            grace,
            stopped: false,
        })
    }

    /// The child's pid.
    pub(super) fn pid(&self) -> u32 {
        self.pid.as_raw_nonzero().get().unsigned_abs()
    }

    /// Sends `signal` to the child (`group`: to its whole process group)
    /// unless it has exited.
    pub(super) fn signal(&self, signal: Signal, group: bool) {
        let state = self.shared.lock();
        if !state.exited {
            let _ = if group {
                rustix::process::kill_process_group(self.pid, signal)
            } else {
                rustix::process::kill_process(self.pid, signal)
            };
        }
    }

    /// The exit status once the child is reaped, waiting at most `timeout`.
    pub(super) fn wait_timeout(&self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        loop {
            if let Some(status) = state.status {
                return Some(status);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// The exit status, if the child has been reaped.
    pub(super) fn try_status(&self) -> Option<ExitStatus> {
        self.shared.lock().status
    }

    /// Graceful stop: SIGTERM (the controller settles its turns and reaps
    /// its agents' process groups), the grace to exit, then SIGKILL to the
    /// group. `None` only if even SIGKILL did not end it in time.
    pub(super) fn stop(mut self) -> Option<ExitStatus> {
        self.stop_now()
    }

    fn stop_now(&mut self) -> Option<ExitStatus> {
        self.stopped = true;
        self.signal(Signal::TERM, false);
        if let Some(status) = self.wait_timeout(self.grace) {
            return Some(status);
        }
        self.signal(Signal::KILL, true);
        self.wait_timeout(KILL_WAIT)
    }
}

impl Drop for ManagedChild {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.stop_now();
        }
    }
}

/// Linux: the child gets SIGTERM when the spawning thread exits; a child
/// whose parent is already gone when the signal is armed refuses to exec.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn arm_parent_death_signal(command: &mut std::process::Command) {
    let parent = rustix::process::getpid();
    // SAFETY: the hook runs in the forked child before `exec` and makes
    // only async-signal-safe system calls (prctl, getppid) without
    // allocating: the error is built from a raw errno.
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(Signal::TERM))?;
            if rustix::process::getppid() != Some(parent) {
                return Err(rustix::io::Errno::SRCH.into());
            }
            Ok(())
        });
    }
}

/// Elsewhere the child notices its parent's death as the end of its stdin.
#[cfg(not(target_os = "linux"))]
fn arm_parent_death_signal(_command: &mut std::process::Command) {}
