//! The one place where the installer changes install paths on disk.
//!
//! Every write that someone could observe half-done goes through here:
//!
//! - [`write_atomic`] replaces a file: the bytes go to a temporary sibling that
//!   is fsynced, renamed over the target, and the directory is fsynced, so a
//!   reader (or a crash) sees the old file or the new one, never a mix.
//! - [`create_new_atomic`] creates a file only if it does not exist yet, with
//!   the same all-or-nothing guarantee: the complete temporary file is
//!   hard-linked to the final name (`link` fails if the name exists), so two
//!   racing writers cannot both win and nobody sees a partial file.
//! - [`write_new_file`] writes and fsyncs a file inside a private directory
//!   that becomes visible later by one rename (a staging directory).
//! - [`replace_advisory`] replaces a file atomically for readers but without
//!   fsync, for state whose loss after a crash is harmless.
//! - [`swap_symlink`] points a symlink somewhere else atomically: the new link
//!   is made as a temporary sibling and renamed over the old one.
//! - [`rename_durable`] / [`exchange`] move directories and fsync the parent;
//!   [`rename_deferred`] leaves the fsync to a later batched barrier.
//! - [`LockGuard`] is an exclusive or shared `flock` held until drop; the
//!   kernel drops it when the process dies, even by `kill -9`.
//!
//! Nothing else in this crate calls `rename` on an install path.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use thiserror::Error;

/// A file-system operation that failed, with the path it failed on.
#[derive(Debug, Error)]
#[error("cannot {op} {path}: {source}")]
pub struct FsError {
    /// What was being done (`create`, `rename`, `lock`, …).
    pub(crate) op: &'static str,
    /// The path it was done to.
    pub(crate) path: PathBuf,
    /// The underlying error.
    #[source]
    pub(crate) source: io::Error,
}

impl FsError {
    /// Wraps `source` with the operation and path.
    pub(crate) fn new(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> FsError {
        FsError {
            op,
            path: path.into(),
            source,
        }
    }
}

/// `Result` of this module.
pub type FsResult<T> = Result<T, FsError>;

/// Extension to attach an operation and path to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn at(self, op: &'static str, path: &Path) -> FsResult<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, op: &'static str, path: &Path) -> FsResult<T> {
        self.map_err(|e| FsError::new(op, path, e))
    }
}

impl<T> IoContext<T> for nix::Result<T> {
    fn at(self, op: &'static str, path: &Path) -> FsResult<T> {
        self.map_err(|e| FsError::new(op, path, io::Error::from(e)))
    }
}

/// Sixteen random lowercase hex characters for temporary names.
pub fn random_suffix() -> String {
    let mut bytes = [0u8; 8];
    // The OS random source does not fail on supported platforms; fall back to
    // the pid and clock so a temp name is still unlikely to collide.
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        bytes = (nanos ^ u64::from(std::process::id()) << 32).to_le_bytes();
    }
    hex::encode(bytes)
}

/// The parent directory of `path` (`.` for a bare name).
pub fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// A temporary sibling name for `path`: `.<name>.tmp-<random>` in the same
/// directory, so a rename onto `path` never crosses file systems.
pub fn temp_sibling(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".to_owned());
    parent_of(path).join(format!(".{name}.tmp-{}", random_suffix()))
}

/// Makes the directory entry changes in `dir` (creates, renames, removals)
/// durable.
pub fn fsync_dir(dir: &Path) -> FsResult<()> {
    fsync_path(dir)
}

/// Creates `dir` and missing parents; directories created here get `mode`.
/// Existing directories keep their mode. Parents of new directories are
/// fsynced so the new entries survive a crash.
pub fn create_dir_all_mode(dir: &Path, mode: u32) -> FsResult<()> {
    create_dirs(dir, mode, true)
}

/// Creates several directory chains at once: every missing directory first,
/// then one fsync per changed parent, so a journaling file system commits
/// all new entries together instead of once per directory.
pub fn create_dirs_batch(dirs: &[(&Path, u32)]) -> FsResult<()> {
    let mut parents: Vec<PathBuf> = Vec::new();
    for (dir, mode) in dirs {
        for created in create_missing(dir, *mode)? {
            let parent = parent_of(&created).to_path_buf();
            if !parents.contains(&parent) {
                parents.push(parent);
            }
        }
    }
    let refs: Vec<&Path> = parents.iter().map(PathBuf::as_path).collect();
    fsync_all(&refs)
}

/// Fsyncs files and directories concurrently (a few threads), so their
/// flushes share journal commits instead of waiting for one each.
pub fn fsync_all(paths: &[&Path]) -> FsResult<()> {
    const WORKERS: usize = 8;
    if paths.len() <= 1 {
        return paths.iter().try_for_each(|p| fsync_path(p));
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WORKERS.min(paths.len()))
            .map(|_| {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(path) = paths.get(i) else {
                            return Ok(());
                        };
                        fsync_path(path)?;
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("fsync worker does not panic"))
            .collect::<FsResult<Vec<()>>>()
            .map(drop)
    })
}

fn fsync_path(path: &Path) -> FsResult<()> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .at("fsync", path)
}

/// Like [`create_dir_all_mode`] without the fsyncs, for directories that are
/// recreated on demand anyway (the controller home).
pub fn create_dir_all_mode_lazy(dir: &Path, mode: u32) -> FsResult<()> {
    create_dirs(dir, mode, false)
}

fn create_dirs(dir: &Path, mode: u32, durable: bool) -> FsResult<()> {
    let created = create_missing(dir, mode)?;
    // All entries first, then one fsync per parent: on journaling file
    // systems the first fsync commits every new entry at once.
    if durable {
        for d in &created {
            fsync_dir(parent_of(d))?;
        }
    }
    Ok(())
}

/// Creates the missing directories of `dir`'s chain (outermost first) with
/// `mode`; returns the ones created.
fn create_missing(dir: &Path, mode: u32) -> FsResult<Vec<PathBuf>> {
    let mut missing = Vec::new();
    let mut cur = dir;
    while !cur.is_dir() {
        missing.push(cur.to_path_buf());
        match cur.parent() {
            Some(p) if !p.as_os_str().is_empty() => cur = p,
            _ => break,
        }
    }
    missing.reverse();
    let mut created = Vec::new();
    for d in missing {
        match fs::DirBuilder::new().mode(mode).create(&d) {
            // The umask may have narrowed the mode; apply it exactly.
            Ok(()) => {
                fs::set_permissions(&d, fs::Permissions::from_mode(mode)).at("chmod", &d)?;
                created.push(d);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => {}
            Err(e) => return Err(FsError::new("create directory", d, e)),
        }
    }
    Ok(created)
}

/// Writes a complete temporary sibling of `path` with `mode` and fsyncs it.
fn write_temp(path: &Path, bytes: &[u8], mode: u32) -> FsResult<PathBuf> {
    let tmp = temp_sibling(path);
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    match result {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(FsError::new("write", tmp, e))
        }
    }
}

/// Creates `path` (which must not exist) with `bytes` and `mode`, and fsyncs
/// it. For files in a private directory that is made visible later by a
/// rename; the caller fsyncs the directory.
pub fn write_new_file(path: &Path, bytes: &[u8], mode: u32) -> FsResult<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .at("create", path)?;
    file.set_permissions(fs::Permissions::from_mode(mode))
        .and_then(|()| file.write_all(bytes))
        .and_then(|()| file.sync_all())
        .at("write", path)
}

/// Replaces `path` without any fsync: readers see the old or the new file,
/// but after a crash the new file may be empty or missing. Only for advisory
/// files whose readers treat damage as "empty".
pub fn replace_advisory(path: &Path, bytes: &[u8], mode: u32) -> FsResult<()> {
    let tmp = temp_sibling(path);
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        file.write_all(bytes)?;
        fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        FsError::new("replace", path, e)
    })
}

/// Replaces `path` with `bytes` (mode `mode`) so that it is always either the
/// old or the new content, also across a crash.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> FsResult<()> {
    let tmp = write_temp(path, bytes, mode)?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(FsError::new("rename into place", path, e));
    }
    fsync_dir(parent_of(path))
}

/// Creates `path` with `bytes` only if nothing exists there. Returns `false`
/// (and writes nothing) when `path` already exists. `before_link` runs after
/// the complete temporary file is durable and before it gets its final name
/// (fault injection in tests).
pub fn create_new_atomic(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    before_link: &dyn Fn(),
) -> FsResult<bool> {
    let created = create_new_atomic_deferred(path, bytes, mode, before_link)?;
    if created {
        fsync_dir(parent_of(path))?;
    }
    Ok(created)
}

/// [`create_new_atomic`] without the final fsync of the directory: the file
/// is complete whenever its name is visible, but the name itself becomes
/// durable only when the caller fsyncs `path`'s directory (batched with
/// other directories).
pub fn create_new_atomic_deferred(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    before_link: &dyn Fn(),
) -> FsResult<bool> {
    let tmp = write_temp(path, bytes, mode)?;
    before_link();
    let linked = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(FsError::new("create", path, e)),
    }
}

/// Points the symlink `link` at `target` atomically, replacing whatever is at
/// `link` (a file or a link; not a directory). `before_rename` runs once the
/// temporary link exists (fault injection in tests).
pub fn swap_symlink(link: &Path, target: &Path, before_rename: &dyn Fn()) -> FsResult<()> {
    let tmp = temp_sibling(link);
    std::os::unix::fs::symlink(target, &tmp).at("create symlink", &tmp)?;
    before_rename();
    if let Err(e) = fs::rename(&tmp, link) {
        let _ = fs::remove_file(&tmp);
        return Err(FsError::new("replace", link, e));
    }
    fsync_dir(parent_of(link))
}

/// Renames `from` to `to` without fsync: the caller makes the parent durable
/// later, batched with other directories (see [`fsync_all`]).
pub fn rename_deferred(from: &Path, to: &Path) -> FsResult<()> {
    fs::rename(from, to).at("rename", from)
}

/// Renames `from` to `to` (same directory tree, same file system) and fsyncs
/// the parents of both.
pub fn rename_durable(from: &Path, to: &Path) -> FsResult<()> {
    fs::rename(from, to).at("rename", from)?;
    fsync_dir(parent_of(to))?;
    if parent_of(from) != parent_of(to) {
        fsync_dir(parent_of(from))?;
    }
    Ok(())
}

/// Atomically exchanges two existing directory entries in one directory
/// (Linux `renameat2(RENAME_EXCHANGE)`); elsewhere two renames, which leaves a
/// short window in which `b` is absent.
pub fn exchange(a: &Path, b: &Path) -> FsResult<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
        renameat2(AT_FDCWD, a, AT_FDCWD, b, RenameFlags::RENAME_EXCHANGE).at("exchange", b)?;
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let tmp = temp_sibling(b);
        fs::rename(b, &tmp).at("rename", b)?;
        fs::rename(a, b).at("rename", a)?;
        fs::rename(&tmp, a).at("rename", &tmp)?;
    }
    fsync_dir(parent_of(b))
}

/// Removes a tree that may contain read-only directories (snapshots are made
/// read-only once complete). A missing tree is not an error.
pub fn remove_tree(path: &Path) -> FsResult<()> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(FsError::new("inspect", path, e)),
        Ok(meta) if !meta.is_dir() => return fs::remove_file(path).at("remove", path),
        Ok(_) => {}
    }
    make_dirs_writable(path)?;
    fs::remove_dir_all(path).at("remove", path)
}

fn make_dirs_writable(dir: &Path) -> FsResult<()> {
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).at("chmod", dir)?;
    for entry in fs::read_dir(dir).at("read directory", dir)? {
        let entry = entry.at("read directory", dir)?;
        if entry.file_type().at("inspect", &entry.path())?.is_dir() {
            make_dirs_writable(&entry.path())?;
        }
    }
    Ok(())
}

/// Sets every directory under (and including) `dir` to `mode`, deepest first,
/// so a snapshot can be sealed read-only after it is complete.
pub fn set_dir_modes(dir: &Path, mode: u32) -> FsResult<()> {
    for entry in fs::read_dir(dir).at("read directory", dir)? {
        let entry = entry.at("read directory", dir)?;
        if entry.file_type().at("inspect", &entry.path())?.is_dir() {
            set_dir_modes(&entry.path(), mode)?;
        }
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(mode)).at("chmod", dir)
}

/// Whether a lock is exclusive (writers) or shared (readers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// One holder; excludes shared holders too.
    Exclusive,
    /// Many holders; excluded by an exclusive holder.
    Shared,
}

/// An `flock` held on an open file until this guard is dropped. Because the
/// kernel releases it when the holder dies, a crashed holder never leaves a
/// stale lock behind.
#[derive(Debug)]
pub struct LockGuard {
    /// The locked file; dropping it unlocks.
    _lock: Flock<File>,
}

impl LockGuard {
    /// Opens (creating, mode 0600) `path` and blocks until the lock is held.
    pub(crate) fn acquire(path: &Path, mode: LockMode) -> FsResult<LockGuard> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .at("open lock file", path)?;
        let arg = match mode {
            LockMode::Exclusive => FlockArg::LockExclusive,
            LockMode::Shared => FlockArg::LockShared,
        };
        Self::lock(file, arg, path)?
            .ok_or_else(|| FsError::new("lock", path, io::Error::from(io::ErrorKind::WouldBlock)))
    }

    /// Tries to lock an already open file (a directory works too) without
    /// blocking; `None` when someone else holds it.
    pub(crate) fn try_exclusive(file: File, path: &Path) -> FsResult<Option<LockGuard>> {
        Self::lock(file, FlockArg::LockExclusiveNonblock, path)
    }

    fn lock(file: File, arg: FlockArg, path: &Path) -> FsResult<Option<LockGuard>> {
        let mut file = file;
        loop {
            match Flock::lock(file, arg) {
                Ok(lock) => {
                    return Ok(Some(LockGuard { _lock: lock }));
                }
                Err((f, nix::errno::Errno::EINTR)) => file = f,
                Err((_, nix::errno::Errno::EWOULDBLOCK)) => return Ok(None),
                Err((_, errno)) => return Err(FsError::new("lock", path, errno.into())),
            }
        }
    }
}

#[cfg(test)]
mod tests;
