//! Managed mode from the application's side: [`ManagedController`] starts
//! `lapis-ai-controller serve --stdio` as a child process and hands back a
//! [`Client`] already authenticated on the child's stdin/stdout.
//!
//! What must stay true:
//! - the credential reaches the child only as the one startup line on its
//!   stdin, written after the spawn: never argv, never its environment,
//!   never an error;
//! - the child's environment is exactly what the caller allowed (names
//!   copied from this process, plus explicit values); nothing else is
//!   inherited, and the controller home is always an explicit argument;
//! - the child's stdin and stdout are one end of a private socket pair, so
//!   stdin stays open for the child's whole life (nothing waits for it to
//!   close) and the client's read deadlines work as on the controller's
//!   socket;
//! - readiness is bounded ([`DEFAULT_READY_TIMEOUT`] unless the caller says
//!   otherwise), and a child that is not ready, or not the build the caller
//!   expects, is stopped before the error is returned;
//! - the child never outlives the application: a stop (or drop) is SIGTERM,
//!   a grace, then SIGKILL to its process group; if the application dies,
//!   the child gets SIGTERM from the kernel (see `child.rs`).

mod child;
mod error;

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::{Client, ClientError, Credential};
use crate::config::{CommandLookup, CommandRef};
use crate::{BuildInfo, READY, Ready, STARTUP_FAILED, encode};

use child::ManagedChild;
pub use error::ManagedError;

/// How long [`ManagedController::start`] waits for readiness unless
/// [`ManagedOptions::ready_timeout`] says otherwise. The controller opens
/// and checks its database before it is ready, so a large journal on a slow
/// disk may take a while; the controller itself waits as long for the
/// startup line.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a stop waits after SIGTERM before it kills the controller's
/// process group, unless [`ManagedOptions::stop_grace`] says otherwise. The
/// controller gives running turns its `server.shutdownGraceSeconds`
/// (default 10 s) and then tears its agents down; this leaves room for
/// both.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(30);

/// The controller's executable name when none is given: found in `PATH`,
/// then `~/.local/bin` (where the installer puts the launcher).
pub const DEFAULT_EXECUTABLE: &str = "lapis-ai-controller";

/// What to start and how. Built with [`ManagedOptions::new`] and the
/// setters; consumed by [`ManagedController::start`].
pub struct ManagedOptions {
    /// The executable: absolute, or a bare name resolved by `lookup`.
    executable: String,
    /// Where bare names are looked up.
    lookup: CommandLookup,
    /// The controller home (`--home`): its database, lock and socket.
    home: PathBuf,
    /// `--config`, when not the default file.
    config: Option<PathBuf>,
    /// `--instance`, when not the default instance.
    instance: Option<String>,
    /// The startup credential.
    credential: Credential,
    /// Names whose values are copied from this process's environment.
    inherit: Vec<OsString>,
    /// Explicit environment, set after the inherited names.
    env: Vec<(OsString, OsString)>,
    /// Where the child's log lines (stderr) go; `None`: this process's
    /// stderr.
    stderr: Option<Stdio>,
    /// The readiness deadline.
    ready_timeout: Duration,
    /// SIGTERM to SIGKILL, on stop or drop.
    stop_grace: Duration,
    /// Build identity fields the controller must report.
    expect_build: BuildInfo,
}

impl fmt::Debug for ManagedOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The credential's own Debug redacts it; environment values may be
        // secrets too (an agent's API key), so only their names show.
        let env: Vec<&OsStr> = self.env.iter().map(|(k, _)| k.as_os_str()).collect();
        f.debug_struct("ManagedOptions")
            .field("executable", &self.executable)
            .field("home", &self.home)
            .field("config", &self.config)
            .field("instance", &self.instance)
            .field("credential", &self.credential)
            .field("inherit", &self.inherit)
            .field("env", &env)
            .field("ready_timeout", &self.ready_timeout)
            .field("stop_grace", &self.stop_grace)
            .field("expect_build", &self.expect_build)
            .finish_non_exhaustive()
    }
}

impl ManagedOptions {
    /// Starts [`DEFAULT_EXECUTABLE`] with controller home `home` (give a
    /// stable path: the journal lives there and a restart must find it)
    /// and authenticates with `credential`. The child's environment starts
    /// empty: add what it needs with [`ManagedOptions::inherit`] and
    /// [`ManagedOptions::env`].
    pub fn new(home: impl Into<PathBuf>, credential: Credential) -> ManagedOptions {
        ManagedOptions {
            executable: DEFAULT_EXECUTABLE.to_owned(),
            lookup: CommandLookup::from_env(),
            home: home.into(),
            config: None,
            instance: None,
            credential,
            inherit: Vec::new(),
            env: Vec::new(),
            stderr: None,
            ready_timeout: DEFAULT_READY_TIMEOUT,
            stop_grace: DEFAULT_STOP_GRACE,
            expect_build: BuildInfo::new(),
        }
    }

    /// The executable: an absolute path, or a bare name found in `PATH`,
    /// then `$HOME/.local/bin` (this process's, unless
    /// [`ManagedOptions::lookup`] says otherwise). A relative path is
    /// refused.
    pub fn executable(mut self, executable: impl Into<String>) -> ManagedOptions {
        self.executable = executable.into();
        self
    }

    /// Where a bare executable name is looked up (default: this process's
    /// `PATH` and `HOME`).
    pub fn lookup(mut self, lookup: CommandLookup) -> ManagedOptions {
        self.lookup = lookup;
        self
    }

    /// The configuration file (`--config`; default: the controller's
    /// default path under the child's `HOME`).
    pub fn config(mut self, path: impl Into<PathBuf>) -> ManagedOptions {
        self.config = Some(path.into());
        self
    }

    /// An isolated instance (`--instance`).
    pub fn instance(mut self, name: impl Into<String>) -> ManagedOptions {
        self.instance = Some(name.into());
        self
    }

    /// Copies `name` from this process's environment into the child's
    /// (skipped when unset). `PATH` and `HOME` are the usual ones: the
    /// controller finds agents' bare command names through them, and agents
    /// take their allowlisted variables from the controller's environment.
    pub fn inherit(mut self, name: impl Into<OsString>) -> ManagedOptions {
        self.inherit.push(name.into());
        self
    }

    /// Sets `name` to `value` in the child's environment (after inherited
    /// names, so it wins). Never put the startup credential here.
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> ManagedOptions {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Where the controller's log lines go (default: this process's
    /// stderr). They never carry credentials or payloads.
    pub fn stderr(mut self, stderr: impl Into<Stdio>) -> ManagedOptions {
        self.stderr = Some(stderr.into());
        self
    }

    /// How long to wait for readiness (default [`DEFAULT_READY_TIMEOUT`]).
    pub fn ready_timeout(mut self, timeout: Duration) -> ManagedOptions {
        self.ready_timeout = timeout;
        self
    }

    /// How long a stop waits after SIGTERM (default
    /// [`DEFAULT_STOP_GRACE`]).
    pub fn stop_grace(mut self, grace: Duration) -> ManagedOptions {
        self.stop_grace = grace;
        self
    }

    /// Requires the controller's build identity to have `field` equal to
    /// `value` (`version`, `commit`, `target`, …); checked on readiness,
    /// before the client is handed out. Call once per field.
    pub fn expect_build(
        mut self,
        field: impl Into<String>,
        value: impl Into<serde_json::Value>,
    ) -> ManagedOptions {
        self.expect_build.insert(field.into(), value.into());
        self
    }

    /// The command line and environment of the child (no credential).
    fn command(&self, executable: &Path, home: &Path) -> Command {
        let mut command = Command::new(executable);
        if let Some(config) = &self.config {
            command.arg("--config").arg(config);
        }
        if let Some(instance) = &self.instance {
            command.arg("--instance").arg(instance);
        }
        command
            .args(["serve", "--stdio", "--home"])
            .arg(home)
            .env_clear();
        for name in &self.inherit {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }
}

/// A running managed controller and the client on its stdin/stdout.
///
/// Dropping it stops the controller like [`ManagedController::stop`]
/// (the connection closes first, then the child is stopped).
pub struct ManagedController {
    /// Authenticated on the child's stdin/stdout.
    client: Client,
    /// The child process.
    child: ManagedChild,
    /// What the readiness frame said.
    ready: Ready,
}

impl fmt::Debug for ManagedController {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManagedController")
            .field("pid", &self.child.pid())
            .field("ready", &self.ready)
            .finish_non_exhaustive()
    }
}

/// `startupFailed` params.
#[derive(Deserialize)]
struct StartupFailed {
    code: String,
    message: String,
}

impl ManagedController {
    /// Starts the controller, writes the startup line, waits for
    /// readiness and checks the build identity. On any failure the child
    /// is stopped (or was never started) and the error says why.
    pub fn start(options: ManagedOptions) -> Result<ManagedController, ManagedError> {
        let executable = options
            .lookup
            .resolve(&CommandRef::parse(&options.executable)?)?;
        let home = std::path::absolute(&options.home).map_err(ManagedError::Io)?;
        let mut command = options.command(&executable, &home);
        let (ours, theirs) = UnixStream::pair().map_err(ManagedError::Io)?;
        let their_stdout = theirs.try_clone().map_err(ManagedError::Io)?;
        command
            .stdin(std::os::fd::OwnedFd::from(theirs))
            .stdout(std::os::fd::OwnedFd::from(their_stdout))
            .stderr(options.stderr.unwrap_or_else(Stdio::inherit));
        // A guard from here on: an early return stops the child.
        let child =
            ManagedChild::spawn(command, options.stop_grace).map_err(ManagedError::Spawn)?;
        let mut client = Client::from_stream(None, ours).map_err(client_io)?;
        let ready = handshake(
            &mut client,
            &child,
            &options.credential,
            options.ready_timeout,
        )?;
        check_build(&options.expect_build, &ready.server.build)?;
        client.session = Some(ready.session.clone());
        Ok(ManagedController {
            client,
            child,
            ready,
        })
    }

    /// The client, authenticated as the startup credential's session.
    /// It cannot reconnect ([`ClientError::NotReconnectable`]): when the
    /// controller is gone, start a new one.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// The readiness frame: the server's protocol, version and build
    /// identity, and the session.
    pub fn ready(&self) -> &Ready {
        &self.ready
    }

    /// The controller's process id.
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// How the controller exited, if it has.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.child.try_status()
    }

    /// Stops the controller: SIGTERM, so it settles running turns, reaps
    /// its agents' process groups and closes its database; after the stop
    /// grace, SIGKILL to its process group. Returns how it exited.
    pub fn stop(self) -> Result<ExitStatus, ManagedError> {
        self.child.stop().ok_or(ManagedError::StillRunning)
    }
}

/// Writes the startup line and reads its answer: readiness, a startup
/// failure, the child's exit, or nothing by the deadline.
fn handshake(
    client: &mut Client,
    child: &ManagedChild,
    credential: &Credential,
    timeout: Duration,
) -> Result<Ready, ManagedError> {
    let deadline = Instant::now() + timeout;
    let stream = &mut client.stream;
    let _ = stream.set_write_timeout(Some(timeout));
    let written = stream.write_all(&encode(&credential.hello_params()));
    let _ = stream.set_write_timeout(None);
    // Exactly one frame answers the startup line. A write that failed is
    // not the answer: a controller that fails before it reads the line (a
    // broken configuration) writes its `startupFailed` frame and exits,
    // and the frame is still there to read after the peer has gone.
    let left = deadline.saturating_duration_since(Instant::now());
    let frame = match client.next_notification(Some(left)) {
        Ok(Some(frame)) => frame,
        Ok(None) if written.is_err() => return Err(exited_early(child)),
        Ok(None) => return Err(ManagedError::NotReady { after: timeout }),
        Err(ClientError::Disconnected { .. }) => return Err(exited_early(child)),
        Err(e) => return Err(ManagedError::Protocol(e.to_string())),
    };
    match frame.method.as_str() {
        READY => serde_json::from_value(frame.params)
            .map_err(|e| ManagedError::Protocol(format!("malformed readiness frame: {e}"))),
        STARTUP_FAILED => {
            let failed: StartupFailed = serde_json::from_value(frame.params).map_err(|e| {
                ManagedError::Protocol(format!("malformed startupFailed frame: {e}"))
            })?;
            // The controller never quotes the credential; blank it out
            // anyway, since this text reaches application logs.
            let secret = credential.secret();
            let scrub = |s: String| {
                if secret.is_empty() {
                    s
                } else {
                    s.replace(secret, "<redacted>")
                }
            };
            Err(ManagedError::Startup {
                code: scrub(failed.code),
                message: scrub(failed.message),
            })
        }
        other => Err(ManagedError::Protocol(format!(
            "`{other}` before readiness"
        ))),
    }
}

/// The child closed the connection before readiness: how it exited.
fn exited_early(child: &ManagedChild) -> ManagedError {
    match child.wait_timeout(Duration::from_secs(5)) {
        Some(status) => ManagedError::Exited { status },
        None => {
            ManagedError::Protocol("the controller closed its stdout before it was ready".into())
        }
    }
}

fn client_io(e: ClientError) -> ManagedError {
    match e {
        ClientError::Io(e) => ManagedError::Io(e),
        other => ManagedError::Protocol(other.to_string()),
    }
}

/// Every expected field must be reported with the same value.
fn check_build(expected: &BuildInfo, found: &BuildInfo) -> Result<(), ManagedError> {
    for (field, want) in expected {
        let got = found.get(field);
        if got != Some(want) {
            return Err(ManagedError::BuildMismatch {
                field: field.clone(),
                expected: want.to_string(),
                found: got.map_or_else(|| "null".to_owned(), ToString::to_string),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
