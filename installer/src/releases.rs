//! Living with several snapshots: listing, rollback and garbage collection,
//! each under the releases lock.
//!
//! What stays true: the active snapshot (the launcher's target), the previous
//! one (the rollback target) and every snapshot a running process executes
//! from are never removed by `gc`; a snapshot is re-verified before it is
//! activated again, so a modified one is refused.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use lapis_release::{BuildIdentity, Manifest};

use crate::error::InstallError;
use crate::fsx::{self, FsError, LockMode};
use crate::install::{Checkpoint, InstallOptions, lock_releases};
use crate::launcher::{self, LauncherError, LauncherState};
use crate::paths::{Paths, is_digest};
use crate::snapshot;
use crate::staging;
use crate::state::InstallState;

/// One installed snapshot, as `releases list` shows it.
#[derive(Clone, Debug)]
pub struct SnapshotInfo {
    /// Directory name.
    pub digest: String,
    /// The launcher points at it.
    pub active: bool,
    /// It is the rollback target.
    pub previous: bool,
    /// Unix seconds from the install state (directory mtime if unrecorded).
    pub installed_at: Option<u64>,
    /// Build identity from its manifest (`None` if the manifest is unreadable).
    pub build: Option<BuildIdentity>,
    /// Processes executing from it.
    pub used_by: Vec<u32>,
}

/// Everything `releases list` reports.
#[derive(Clone, Debug)]
pub struct Listing {
    /// The active digest (launcher target), if the launcher is ours.
    pub active: Option<String>,
    /// The rollback target.
    pub previous: Option<String>,
    /// Newest first.
    pub snapshots: Vec<SnapshotInfo>,
    /// What the launcher path holds, when it is not ours.
    pub launcher_foreign: Option<String>,
}

/// Process ids executing from each snapshot, found by reading
/// `/proc/<pid>/exe`, leaving out this process (the command asking is not
/// a user of what it lists). Processes whose executable cannot be read
/// (other users) are not seen. Empty on systems without `/proc`.
pub fn processes_using(paths: &Paths) -> BTreeMap<String, Vec<u32>> {
    let mut out: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return out;
    };
    let paths = &resolved(paths);
    let own = std::process::id();
    for entry in rd.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
            .filter(|&pid| pid != own)
        else {
            continue;
        };
        let Ok(exe) = fs::read_link(entry.path().join("exe")) else {
            continue;
        };
        if let Some(digest) = digest_of_exe(paths, &exe) {
            out.entry(digest).or_default().push(pid);
        }
    }
    out
}

/// `paths` with the releases root as the kernel reports executables:
/// resolved (HOME may contain a symlink).
fn resolved(paths: &Paths) -> Paths {
    let mut resolved = paths.clone();
    if let Ok(root) = fs::canonicalize(&paths.releases_root) {
        resolved.releases_root = root;
    }
    resolved
}

/// The snapshot this process executes from, if it is one of `paths`'.
fn own_snapshot(paths: &Paths) -> Option<String> {
    let exe = fs::read_link("/proc/self/exe").ok()?;
    digest_of_exe(&resolved(paths), &exe)
}

/// The snapshot a process executable path lies in (a deleted executable
/// reads as `<path> (deleted)`).
fn digest_of_exe(paths: &Paths, exe: &Path) -> Option<String> {
    let rel = exe.strip_prefix(&paths.releases_root).ok()?;
    let first = rel.iter().next()?.to_str()?;
    is_digest(first).then(|| first.to_owned())
}

/// The snapshot digest of the running executable, when it is
/// `…/releases/<digest>/bin/<name>` and that directory's `release.json` has
/// this digest and `build`. Cheap: the manifest is hashed, not the files.
pub fn snapshot_of_executable(exe: &Path, build: &BuildIdentity) -> Option<String> {
    let bin_dir = exe.parent()?;
    if bin_dir.file_name()? != "bin" {
        return None;
    }
    let snap = bin_dir.parent()?;
    let digest = snap.file_name()?.to_str()?;
    if !is_digest(digest) || snap.parent()?.file_name()? != "releases" {
        return None;
    }
    let manifest = Manifest::read_from(snap).ok()?;
    (manifest.digest() == digest && &manifest.build == build).then(|| digest.to_owned())
}

fn active_and_previous(
    paths: &Paths,
    state: &InstallState,
) -> Result<(LauncherState, Option<String>), InstallError> {
    let launcher = launcher::state(paths)?;
    let previous = state.previous(launcher.digest(), |d| paths.snapshot_dir(d).is_dir());
    Ok((launcher, previous))
}

/// Lists installed snapshots (under a shared lock).
pub fn list(paths: &Paths) -> Result<Listing, InstallError> {
    if !paths.releases_root.exists() {
        let launcher = launcher::state(paths)?;
        return Ok(Listing {
            active: None,
            previous: None,
            snapshots: Vec::new(),
            launcher_foreign: foreign(&launcher),
        });
    }
    let _lock = lock_releases(paths, LockMode::Shared)?;
    let state = InstallState::load(paths);
    let (launcher, previous) = active_and_previous(paths, &state)?;
    let active = launcher.digest().map(str::to_owned);
    let users = processes_using(paths);
    let mut snapshots: Vec<SnapshotInfo> = snapshot::list_digests(paths)?
        .into_iter()
        .map(|digest| {
            let dir = paths.snapshot_dir(&digest);
            let installed_at = state
                .snapshots
                .get(&digest)
                .map(|r| r.installed_at)
                .or_else(|| mtime(&dir));
            SnapshotInfo {
                active: active.as_deref() == Some(digest.as_str()),
                previous: previous.as_deref() == Some(digest.as_str()),
                installed_at,
                build: Manifest::read_from(&dir).ok().map(|m| m.build),
                used_by: users.get(&digest).cloned().unwrap_or_default(),
                digest,
            }
        })
        .collect();
    snapshots.sort_by(|a, b| {
        b.installed_at
            .cmp(&a.installed_at)
            .then_with(|| a.digest.cmp(&b.digest))
    });
    Ok(Listing {
        active,
        previous,
        snapshots,
        launcher_foreign: foreign(&launcher),
    })
}

fn foreign(state: &LauncherState) -> Option<String> {
    match state {
        LauncherState::Foreign { what, .. } => Some(what.clone()),
        _ => None,
    }
}

fn mtime(path: &Path) -> Option<u64> {
    let modified = fs::metadata(path).ok()?.modified().ok()?;
    modified
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

/// What a rollback did.
#[derive(Clone, Debug)]
pub struct RollbackReport {
    /// The snapshot that was active.
    pub from: Option<String>,
    /// The snapshot now active.
    pub to: String,
    /// Its build.
    pub build: BuildIdentity,
}

/// Re-activates `to` (a digest or unique prefix) or, without it, the previous
/// snapshot. The target is re-verified and smoke-tested first; a modified
/// snapshot is refused and the launcher is not touched.
pub fn rollback(
    paths: &Paths,
    to: Option<&str>,
    opts: &InstallOptions<'_>,
) -> Result<RollbackReport, InstallError> {
    let _lock = lock_releases(paths, LockMode::Exclusive)?;
    staging::cleanup_leftovers(paths)?;
    let mut state = InstallState::load(paths);
    let (launcher, previous) = active_and_previous(paths, &state)?;
    if let LauncherState::Foreign { what, .. } = &launcher {
        return Err(LauncherError::Foreign {
            path: paths.launcher.clone(),
            what: what.clone(),
        }
        .into());
    }
    let from = launcher.digest().map(str::to_owned);
    let target = match to {
        Some(wanted) => snapshot::resolve_digest(paths, wanted)?,
        None => previous.ok_or(InstallError::NoPrevious)?,
    };
    let manifest = snapshot::verify(paths, &target)?;
    crate::install::smoke(&paths.snapshot_bin(&target), &manifest, paths, opts)?;
    launcher::activate(paths, &target, &|| {
        (opts.checkpoint)(Checkpoint::LauncherTemp)
    })?;
    state.record_snapshot(&target, &manifest.build, opts.now);
    if let Some(f) = &from
        && state.activations.is_empty()
    {
        state.record_activation(f, opts.now);
    }
    state.record_activation(&target, opts.now);
    state.save(paths)?;
    Ok(RollbackReport {
        from,
        to: target,
        build: manifest.build,
    })
}

/// What `gc` did.
#[derive(Clone, Debug, Default)]
pub struct GcReport {
    /// Snapshots removed.
    pub removed: Vec<String>,
    /// Snapshots kept, with the reason.
    pub kept: Vec<(String, &'static str)>,
    /// Quarantined snapshots removed.
    pub removed_quarantine: Vec<PathBuf>,
}

/// Removes old snapshots: never the active, the previous or one in use; of
/// the rest, the `keep` most recently installed stay. Quarantined snapshots
/// are removed too.
pub fn gc(paths: &Paths, keep: usize) -> Result<GcReport, InstallError> {
    let mut report = GcReport::default();
    if !paths.releases_root.exists() {
        return Ok(report);
    }
    let _lock = lock_releases(paths, LockMode::Exclusive)?;
    staging::cleanup_leftovers(paths)?;
    let mut state = InstallState::load(paths);
    let (launcher, previous) = active_and_previous(paths, &state)?;
    let users = processes_using(paths);
    let own = own_snapshot(paths);
    let mut candidates = Vec::new();
    for digest in snapshot::list_digests(paths)? {
        let reason = if launcher.digest() == Some(digest.as_str()) {
            Some("active")
        } else if previous.as_deref() == Some(digest.as_str()) {
            Some("previous")
        } else if users.contains_key(&digest) || own.as_deref() == Some(digest.as_str()) {
            // Its own snapshot too: gc never removes what it runs from.
            Some("in use")
        } else {
            None
        };
        match reason {
            Some(r) => report.kept.push((digest, r)),
            None => {
                let at = state
                    .snapshots
                    .get(&digest)
                    .map(|r| r.installed_at)
                    .or_else(|| mtime(&paths.snapshot_dir(&digest)))
                    .unwrap_or(0);
                candidates.push((at, digest));
            }
        }
    }
    candidates.sort_by(|a, b| b.cmp(a));
    for (i, (_, digest)) in candidates.into_iter().enumerate() {
        if i < keep {
            report.kept.push((digest, "recent"));
        } else {
            snapshot::remove_snapshot(paths, &digest)?;
            state.forget(&digest);
            report.removed.push(digest);
        }
    }
    for entry in fs::read_dir(&paths.releases_root)
        .map_err(|e| FsError::new("read directory", &paths.releases_root, e))?
        .flatten()
    {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(".quarantine-")
        {
            fsx::remove_tree(&entry.path())?;
            report.removed_quarantine.push(entry.path());
        }
    }
    state.save(paths)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::paths::test_paths as paths;

    #[test]
    fn exe_paths_map_to_snapshots() {
        let p = paths(Path::new("/h"));
        let d = "f".repeat(64);
        let bin = p.snapshot_bin(&d);
        assert_eq!(digest_of_exe(&p, &bin), Some(d.clone()));
        let deleted = PathBuf::from(format!("{} (deleted)", bin.display()));
        assert_eq!(digest_of_exe(&p, &deleted), Some(d));
        assert_eq!(digest_of_exe(&p, Path::new("/usr/bin/x")), None);
        assert_eq!(
            digest_of_exe(&p, &p.releases_root.join(".staging-1/bin/x")),
            None
        );
    }

    #[test]
    fn running_processes_are_found_in_their_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let d = "e".repeat(64);
        let bin = p.snapshot_bin(&d);
        fs::create_dir_all(bin.parent().unwrap()).unwrap();
        fs::copy("/bin/sleep", &bin).unwrap();
        // Another test thread forking while our copy was open makes exec
        // fail with ETXTBSY for a moment.
        let mut child = loop {
            match std::process::Command::new(&bin).arg("30").spawn() {
                Ok(child) => break child,
                Err(e) if e.raw_os_error() == Some(nix::libc::ETXTBSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                Err(e) => panic!("{e}"),
            }
        };
        // Seen through a symlinked HOME too.
        let link = dir.path().join("home-link");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        let users = processes_using(&paths(&link));
        assert_eq!(users.get(&d), Some(&vec![child.id()]), "{users:?}");
        let users = processes_using(&p);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(users.get(&d), Some(&vec![child.id()]), "{users:?}");
    }
}
