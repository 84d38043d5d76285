//! The install sequence: stage → verify → smoke-test → activate.
//!
//! Three entry points share it, so every way a release reaches a machine gets
//! the same guarantees:
//!
//! - [`install_executable`]: the running binary (`install`). Its manifest is
//!   computed first, so an existing verified snapshot is reused without
//!   copying anything.
//! - [`install_tree`]: an already extracted release tree (a directory with
//!   `bin/lapis-ai-controller` and its own `release.json`). The tree is copied
//!   into a staging directory and must verify against its own manifest.
//! - [`install_staged`]: a [`StagingDir`] the caller filled (for example by
//!   extracting an archive straight into it); it is verified and renamed into
//!   place without a copy.
//!
//! All of them, under the exclusive releases lock:
//!
//! 1. remove leftovers of interrupted installs;
//! 2. reuse `releases/<digest>` if it verifies; otherwise verify the staged
//!    tree, smoke-test its binary, and rename it to `releases/<digest>` (a
//!    snapshot that exists but does not verify is swapped out atomically and
//!    kept as `.quarantine-<digest>-<n>`);
//! 3. create the config if it is missing (never rewrite one);
//! 4. swap the launcher atomically and record the activation.
//!
//! Before the lock, [`preflight`] refuses bad input (a malformed config, a
//! launcher path we did not create, an unwritable launcher directory) while
//! nothing has changed yet. A kill at any point leaves the launcher on a
//! complete snapshot (old or new) and the config absent or complete.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lapis_release::{BuildIdentity, Manifest};

use crate::config::{self, ConfigOutcome, ConfigSummary};
use crate::error::InstallError;
use crate::fsx::{self, LockGuard, LockMode};
use crate::launcher::{self, LauncherState};
use crate::paths::Paths;
use crate::smoke::{DEFAULT_SMOKE_TIMEOUT, smoke_test_in};
use crate::snapshot::{self, Existing};
use crate::staging::{self, StagingDir};
use crate::state::InstallState;

/// Named points of the sequence where a hook runs; tests pause the process
/// there and kill it to prove every intermediate state is safe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checkpoint {
    /// The releases lock is held; nothing changed yet.
    Locked,
    /// An empty staging directory exists.
    StagingCreated,
    /// The binary is copied into staging but not yet synced or verified.
    StagingCopied,
    /// The staged tree verified and is sealed.
    StagingVerified,
    /// The staged binary passed its smoke test.
    SmokeTested,
    /// `releases/<digest>` is in place; the launcher has not moved.
    SnapshotCommitted,
    /// A complete temporary config exists but has not got its name.
    ConfigTemp,
    /// The config exists.
    ConfigWritten,
    /// The temporary launcher link exists, not yet renamed.
    LauncherTemp,
    /// The launcher points at the new snapshot; the state is not written.
    LauncherSwapped,
    /// Everything is written; the lock is still held.
    StateWritten,
}

impl Checkpoint {
    /// Every checkpoint, in the order an install passes them.
    pub const ALL: [Checkpoint; 11] = [
        Checkpoint::Locked,
        Checkpoint::StagingCreated,
        Checkpoint::StagingCopied,
        Checkpoint::StagingVerified,
        Checkpoint::SmokeTested,
        Checkpoint::SnapshotCommitted,
        Checkpoint::ConfigTemp,
        Checkpoint::ConfigWritten,
        Checkpoint::LauncherTemp,
        Checkpoint::LauncherSwapped,
        Checkpoint::StateWritten,
    ];

    /// Kebab-case name (as used by `LAPIS_INSTALL_FAULT_PAUSE`).
    pub fn name(self) -> &'static str {
        match self {
            Checkpoint::Locked => "locked",
            Checkpoint::StagingCreated => "staging-created",
            Checkpoint::StagingCopied => "staging-copied",
            Checkpoint::StagingVerified => "staging-verified",
            Checkpoint::SmokeTested => "smoke-tested",
            Checkpoint::SnapshotCommitted => "snapshot-committed",
            Checkpoint::ConfigTemp => "config-temp",
            Checkpoint::ConfigWritten => "config-written",
            Checkpoint::LauncherTemp => "launcher-temp",
            Checkpoint::LauncherSwapped => "launcher-swapped",
            Checkpoint::StateWritten => "state-written",
        }
    }
}

/// The caller's second smoke stage: gets the staged binary, returns an error
/// text (no secrets) when the binary fails it.
pub(crate) type SmokeTurn<'a> = &'a dyn Fn(&Path) -> Result<(), String>;

/// How an install behaves.
#[derive(Clone, Copy)]
pub struct InstallOptions<'a> {
    /// Replace a launcher path this installer did not create.
    pub force: bool,
    /// Create the config when it is missing (after the snapshot is in place,
    /// before the launcher moves).
    pub bootstrap_config: bool,
    /// Unix seconds to record as install/activation time.
    pub now: u64,
    /// Deadline of the smoke test.
    pub smoke_timeout: Duration,
    /// Called at each [`Checkpoint`].
    pub checkpoint: &'a dyn Fn(Checkpoint),
    /// Second smoke stage, run on the staged binary after `version --json`
    /// passed (the CLI runs one ACP turn through its built-in `echo` agent;
    /// this crate knows nothing of ACP). Its error text must carry no secret.
    pub smoke_turn: Option<SmokeTurn<'a>>,
}

impl std::fmt::Debug for InstallOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstallOptions")
            .field("force", &self.force)
            .field("bootstrap_config", &self.bootstrap_config)
            .field("now", &self.now)
            .field("smoke_timeout", &self.smoke_timeout)
            .finish_non_exhaustive()
    }
}

impl InstallOptions<'_> {
    /// Defaults: no force, create the config, the current time, a 10 s smoke
    /// test, no hook.
    pub fn new() -> InstallOptions<'static> {
        InstallOptions {
            force: false,
            bootstrap_config: true,
            now: unix_now(),
            smoke_timeout: DEFAULT_SMOKE_TIMEOUT,
            checkpoint: &|_| {},
            smoke_turn: None,
        }
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// What happened to the snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotOutcome {
    /// Staged and renamed into place.
    New,
    /// An existing snapshot verified and was reused.
    Reused,
    /// An existing snapshot did not verify; it was moved aside and a fresh
    /// copy staged.
    Restaged {
        /// What verification found.
        found: String,
        /// Where the bad snapshot now is.
        quarantined: PathBuf,
    },
}

impl SnapshotOutcome {
    /// `new`, `reused` or `restaged`.
    pub fn as_str(&self) -> &'static str {
        match self {
            SnapshotOutcome::New => "new",
            SnapshotOutcome::Reused => "reused",
            SnapshotOutcome::Restaged { .. } => "restaged",
        }
    }
}

/// What an install did.
#[derive(Clone, Debug)]
pub struct InstallReport {
    /// The activated snapshot.
    pub digest: String,
    /// Its build identity.
    pub build: BuildIdentity,
    /// New, reused or restaged.
    pub snapshot: SnapshotOutcome,
    /// The snapshot the launcher pointed at before, if it was ours.
    pub previous: Option<String>,
    /// What `--force` replaced at the launcher path.
    pub replaced: Option<String>,
    /// The config step, when it ran.
    pub config: Option<(ConfigOutcome, ConfigSummary)>,
    /// How long the smoke test took.
    pub smoke: Duration,
    /// Leftovers of interrupted installs that were removed.
    pub cleaned: Vec<PathBuf>,
}

/// Checks what can be checked without changing anything: the config (if it
/// exists) is well-formed and the launcher can be placed.
pub(crate) fn preflight(
    paths: &Paths,
    opts: &InstallOptions<'_>,
) -> Result<LauncherState, InstallError> {
    if opts.bootstrap_config {
        config::read(&paths.config)?;
    }
    Ok(launcher::preflight(paths, opts.force)?)
}

/// Creates every directory the install will write into, in one batch (one
/// journal commit instead of one per directory). Runs after [`preflight`],
/// so bad input still changes nothing.
fn prepare_dirs(paths: &Paths, opts: &InstallOptions<'_>) -> Result<(), InstallError> {
    let mut dirs = vec![
        (paths.releases_root.as_path(), 0o755),
        (fsx::parent_of(&paths.launcher), 0o755),
    ];
    if opts.bootstrap_config && !paths.config.exists() {
        dirs.push((fsx::parent_of(&paths.config), 0o700));
    }
    Ok(fsx::create_dirs_batch(&dirs)?)
}

/// Takes the exclusive releases lock (creating the releases root).
pub(crate) fn lock_releases(paths: &Paths, mode: LockMode) -> Result<LockGuard, InstallError> {
    fsx::create_dir_all_mode(&paths.releases_root, 0o755)?;
    Ok(LockGuard::acquire(&paths.releases_lock(), mode)?)
}

/// Installs the executable at `exe` (normally the running one), whose build
/// identity is `build`.
pub fn install_executable(
    paths: &Paths,
    exe: &Path,
    build: &BuildIdentity,
    opts: &InstallOptions<'_>,
) -> Result<InstallReport, InstallError> {
    preflight(paths, opts)?;
    prepare_dirs(paths, opts)?;
    let _lock = lock_releases(paths, LockMode::Exclusive)?;
    (opts.checkpoint)(Checkpoint::Locked);
    let cleaned = staging::cleanup_leftovers(paths)?.removed;
    let manifest = snapshot::manifest_for_executable(exe, build)?;
    let digest = manifest.digest();
    let existing = snapshot::existing(paths, &manifest)?;
    let (outcome, smoke) = match existing {
        Existing::Verified => reuse(paths, &digest, &manifest, opts)?,
        other => {
            let staging = StagingDir::create(paths)?;
            (opts.checkpoint)(Checkpoint::StagingCreated);
            staging::stage_executable(&staging, exe, &manifest, &|| {
                (opts.checkpoint)(Checkpoint::StagingCopied)
            })?;
            place(paths, staging, &manifest, other, opts)?
        }
    };
    activate(paths, &digest, &manifest, outcome, smoke, cleaned, opts)
}

/// Installs an extracted release tree (see the module docs).
pub fn install_tree(
    paths: &Paths,
    tree: &Path,
    opts: &InstallOptions<'_>,
) -> Result<InstallReport, InstallError> {
    preflight(paths, opts)?;
    let staging = StagingDir::create(paths)?;
    staging::stage_tree(&staging, tree)?;
    install_staged(paths, staging, opts)
}

/// Installs a staging directory the caller filled with a release tree
/// (including its `release.json`).
pub fn install_staged(
    paths: &Paths,
    staging: StagingDir,
    opts: &InstallOptions<'_>,
) -> Result<InstallReport, InstallError> {
    preflight(paths, opts)?;
    prepare_dirs(paths, opts)?;
    let _lock = lock_releases(paths, LockMode::Exclusive)?;
    (opts.checkpoint)(Checkpoint::Locked);
    let cleaned = staging::cleanup_leftovers(paths)?.removed;
    let manifest =
        Manifest::read_from(staging.path()).map_err(|source| snapshot::SnapshotError::BadTree {
            path: staging.path().to_path_buf(),
            source,
        })?;
    let digest = manifest.digest();
    let (outcome, smoke) = match snapshot::existing(paths, &manifest)? {
        Existing::Verified => {
            // Still refuse a staged tree that does not match its manifest.
            staging::verify_staged(&staging, &manifest)?;
            drop(staging);
            reuse(paths, &digest, &manifest, opts)?
        }
        other => {
            // The caller filled it; make it durable before it gets a name.
            staging::sync_tree(staging.path())?;
            place(paths, staging, &manifest, other, opts)?
        }
    };
    activate(paths, &digest, &manifest, outcome, smoke, cleaned, opts)
}

/// Both smoke stages on `bin`: `version --json` must report the manifest's
/// build, then the caller's turn stage (if any) must pass. Returns the time
/// both took.
pub(crate) fn smoke(
    bin: &Path,
    manifest: &Manifest,
    paths: &Paths,
    opts: &InstallOptions<'_>,
) -> Result<Duration, InstallError> {
    let started = std::time::Instant::now();
    smoke_test_in(
        bin,
        &manifest.build,
        opts.smoke_timeout,
        &paths.releases_root,
    )?;
    if let Some(turn) = opts.smoke_turn {
        turn(bin).map_err(crate::smoke::SmokeError::Turn)?;
    }
    Ok(started.elapsed())
}

fn reuse(
    paths: &Paths,
    digest: &str,
    manifest: &Manifest,
    opts: &InstallOptions<'_>,
) -> Result<(SnapshotOutcome, Duration), InstallError> {
    let smoke = smoke(&paths.snapshot_bin(digest), manifest, paths, opts)?;
    (opts.checkpoint)(Checkpoint::SmokeTested);
    Ok((SnapshotOutcome::Reused, smoke))
}

/// Verifies and smoke-tests a filled staging dir, then gives it its digest
/// name (swapping out a tampered snapshot of that name).
fn place(
    paths: &Paths,
    staging: StagingDir,
    manifest: &Manifest,
    existing: Existing,
    opts: &InstallOptions<'_>,
) -> Result<(SnapshotOutcome, Duration), InstallError> {
    let digest = manifest.digest();
    staging::verify_staged(&staging, manifest)?;
    (opts.checkpoint)(Checkpoint::StagingVerified);
    let bin = staging.path().join("bin").join(crate::paths::PRODUCT);
    let smoke = smoke(&bin, manifest, paths, opts)?;
    (opts.checkpoint)(Checkpoint::SmokeTested);
    let dir = paths.snapshot_dir(&digest);
    let outcome = match existing {
        Existing::Tampered(found) => {
            staging.exchange(&dir)?;
            let quarantined = snapshot::quarantine_path(paths, &digest);
            staging.move_to(&quarantined)?;
            SnapshotOutcome::Restaged { found, quarantined }
        }
        _ => {
            staging.commit(&dir)?;
            SnapshotOutcome::New
        }
    };
    (opts.checkpoint)(Checkpoint::SnapshotCommitted);
    Ok((outcome, smoke))
}

fn activate(
    paths: &Paths,
    digest: &str,
    manifest: &Manifest,
    snapshot: SnapshotOutcome,
    smoke: Duration,
    cleaned: Vec<PathBuf>,
    opts: &InstallOptions<'_>,
) -> Result<InstallReport, InstallError> {
    let config = if opts.bootstrap_config {
        let result = config::bootstrap(paths, &|| (opts.checkpoint)(Checkpoint::ConfigTemp))?;
        // The controller home named by the config (private: it will hold the
        // database and the socket).
        let home = paths.controller_home_for(result.1.controller_home.as_deref());
        fsx::create_dir_all_mode_lazy(&home.path, 0o700)?;
        Some(result)
    } else {
        None
    };
    // One barrier for the snapshot's name and the config's name: both must
    // be durable before the launcher can point at them.
    let mut barrier = Vec::new();
    if snapshot != SnapshotOutcome::Reused {
        barrier.push(paths.releases_root.as_path());
    }
    if matches!(config, Some((ConfigOutcome::Created, _))) {
        barrier.push(fsx::parent_of(&paths.config));
    }
    fsx::fsync_all(&barrier)?;
    if opts.bootstrap_config {
        (opts.checkpoint)(Checkpoint::ConfigWritten);
    }
    // Re-check under the lock: another process may have changed it.
    let before = launcher::preflight(paths, opts.force)?;
    let (previous, replaced) = match before {
        LauncherState::Ours { digest } => (Some(digest), None),
        LauncherState::Missing => (None, None),
        LauncherState::Foreign { what, .. } => (None, Some(what)),
    };
    if previous.as_deref() != Some(digest) {
        launcher::activate(paths, digest, &|| {
            (opts.checkpoint)(Checkpoint::LauncherTemp)
        })?;
    }
    (opts.checkpoint)(Checkpoint::LauncherSwapped);
    let mut state = InstallState::load(paths);
    let unchanged = state.clone();
    state.record_snapshot(digest, &manifest.build, opts.now);
    if let Some(prev) = &previous {
        // A previous snapshot installed before the state existed.
        if let Ok(m) = Manifest::read_from(&paths.snapshot_dir(prev)) {
            state.record_snapshot(prev, &m.build, opts.now);
        }
        if state.activations.is_empty() {
            state.record_activation(prev, opts.now);
        }
    }
    state.record_activation(digest, opts.now);
    if state != unchanged {
        state.save(paths)?;
    }
    (opts.checkpoint)(Checkpoint::StateWritten);
    Ok(InstallReport {
        digest: digest.to_owned(),
        build: manifest.build.clone(),
        snapshot,
        previous,
        replaced,
        config,
        smoke,
        cleaned,
    })
}
