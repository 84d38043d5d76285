//! The instance lock: an exclusive `flock` on `controller.lock`.
//!
//! Taken before the database is opened and held (by the store's writer) for
//! the life of the store, so two controllers can never write one database.
//! The holder writes its pid into the file so a second opener can name it;
//! the pid is informational only — the kernel lock is the truth, and it is
//! released by the kernel when the holder dies, even on `kill -9`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::domain::{StoreError, StoreResult};

/// File name of the lock inside the controller home.
pub(crate) const LOCK_FILE: &str = "controller.lock";

/// A held instance lock; released on drop.
#[derive(Debug)]
pub(super) struct InstanceLock {
    /// The locked file; dropping it unlocks.
    _file: Flock<File>,
}

impl InstanceLock {
    /// Take the lock in `home` without waiting; fail with `instance_locked`
    /// (naming the holder's pid when readable) if another process holds it.
    pub(super) fn acquire(home: &Path) -> StoreResult<InstanceLock> {
        let path = home.join(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| StoreError::io(format!("cannot open {}", path.display()), e))?;
        let mut locked = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => locked,
            Err((mut file, Errno::EWOULDBLOCK)) => {
                let mut text = String::new();
                let pid = file
                    .read_to_string(&mut text)
                    .ok()
                    .and_then(|_| text.trim().parse::<u32>().ok());
                return Err(StoreError::InstanceLocked { pid });
            }
            Err((_, errno)) => {
                return Err(StoreError::io(
                    format!("cannot lock {}", path.display()),
                    std::io::Error::from(errno),
                ));
            }
        };
        let write_pid = |f: &mut File| -> std::io::Result<()> {
            f.set_len(0)?;
            f.seek(SeekFrom::Start(0))?;
            writeln!(f, "{}", std::process::id())?;
            f.sync_data()
        };
        write_pid(&mut locked)
            .map_err(|e| StoreError::io(format!("cannot write pid to {}", path.display()), e))?;
        Ok(InstanceLock { _file: locked })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_fails_naming_the_holder_and_drop_releases() {
        let dir = tempfile::tempdir().unwrap();
        let held = InstanceLock::acquire(dir.path()).unwrap();
        let err = InstanceLock::acquire(dir.path()).unwrap_err();
        assert_eq!(err.code(), "instance_locked");
        match err {
            StoreError::InstanceLocked { pid } => assert_eq!(pid, Some(std::process::id())),
            other => panic!("unexpected {other:?}"),
        }
        drop(held);
        InstanceLock::acquire(dir.path()).unwrap();
    }
}
