//! Running the controller without a service manager (containers, WSL, CI,
//! SSH boxes without a user systemd): `serve --background` detaches a
//! `serve` and `stop` ends it.
//!
//! What must stay true:
//! - `serve --background` exits 0 only once `status` answers on the socket
//!   *from the process it started* (the status pid is the child's); a child
//!   that exits first, or a socket that never answers, is exit 3 with the
//!   log's last lines, and the pid file is removed;
//! - files are written only into a controller home (one that is marked,
//!   new, or empty): never into a project passed by mistake as `--workspace`;
//!   the pid file ([`PID_FILE`]) and the log ([`LOG_FILE`]) are 0600;
//! - `stop` signals only this controller: the pid in the file must be alive,
//!   its `/proc/PID/exe` a `lapis-ai-controller` binary whose argv holds
//!   `serve`, and its identity must hold — the home's own socket answers
//!   `status` with that very pid, or the process has the start time and
//!   executable the pid file recorded when `serve --background` started it
//!   (a pid file naming another instance's controller, or a reused pid,
//!   fails both). When the socket answers, `status` must report that same
//!   pid. Anything else is a stale pid file: it is removed and nothing is
//!   signalled. A controller that runs without a pid file (a service
//!   manager's, a foreground `serve`) is never stopped here.

use std::io::{BufRead, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lapis_protocol::home::{LOG_FILE, PID_FILE, is_marked_home};

use super::connect::{Target, connect_to, target};
use crate::args::{GlobalArgs, ServeArgs, StopArgs};
use crate::exit::{CliError, CliResult};

/// How long `serve --background` waits for `status` to answer.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// How long `stop` waits for the process to end after SIGTERM (a drain).
const STOP_WITHIN: Duration = Duration::from_secs(30);

/// Log lines quoted when a background start fails.
const LOG_TAIL: usize = 15;

/// `serve --background`.
pub(super) fn start(global: &GlobalArgs, args: &ServeArgs) -> CliResult {
    let target = target(global, args.home.dir())?;
    if let Some(pid) = answering_pid(&target) {
        eprintln!(
            "the controller is already running (pid {pid}); `{}` stops it if it was started with --background",
            stop_command(global)
        );
        return Ok(());
    }
    prepare_home(&target.home)?;
    let log_path = target.home.join(LOG_FILE);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&log_path)
        .map_err(|e| {
            CliError::failure(
                "io_error",
                anyhow::anyhow!("cannot open {}: {e}", log_path.display()),
            )
        })?;
    let exe = std::env::current_exe().map_err(CliError::from)?;
    let mut cmd = Command::new(exe);
    cmd.arg("serve");
    if let Some(config) = &global.config {
        cmd.arg("--config").arg(config);
    }
    if let Some(instance) = &global.instance {
        cmd.arg("--instance").arg(instance);
    }
    if let Some(home) = args.home.dir() {
        cmd.arg("--home").arg(home);
    }
    // The log it writes itself, size-capped; stdout and stderr (a panic,
    // an error before logging starts) go to the same file.
    cmd.arg("--log-file").arg(&log_path);
    // Its own process group: the terminal's Ctrl-C and job control do not
    // reach it; stdin is closed, stdout and stderr go to the log.
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone().map_err(CliError::from)?)
        .stderr(log)
        .process_group(0);
    let mut child = cmd.spawn().map_err(|e| {
        CliError::unavailable("spawn_failed", anyhow::anyhow!("cannot start serve: {e}"))
    })?;
    let pid = child.id();
    let pid_path = target.home.join(PID_FILE);
    write_pid(&pid_path, &PidRecord::of(pid))?;
    let deadline = Instant::now() + READY_WITHIN;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let _ = std::fs::remove_file(&pid_path);
            return Err(CliError::unavailable(
                "serve_exited",
                anyhow::anyhow!(
                    "serve exited ({status}) before it answered; the end of {}:\n{}",
                    log_path.display(),
                    tail(&log_path)
                ),
            ));
        }
        if let Some(answered) = answering_pid(&target)
            && answered == pid
        {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(&pid_path);
            return Err(CliError::unavailable(
                "not_ready",
                anyhow::anyhow!(
                    "serve (pid {pid}) did not answer `status` within {}s and was stopped; the end of {}:\n{}",
                    READY_WITHIN.as_secs(),
                    log_path.display(),
                    tail(&log_path)
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    crate::output::line(format!("{pid}"))?;
    eprintln!(
        "the controller runs in the background (pid {pid}); log: {}; stop it with `{}`",
        log_path.display(),
        stop_command(global)
    );
    Ok(())
}

/// `stop`.
pub(super) fn stop(global: &GlobalArgs, args: &StopArgs) -> CliResult {
    let target = target(global, args.home.dir())?;
    let pid_path = target.home.join(PID_FILE);
    match stop_in(global, &target.home, answering_pid(&target))? {
        Stop::Stopped(pid) => eprintln!("stopped the controller (pid {pid})"),
        Stop::NotRunning => eprintln!("no background controller is running"),
        Stop::Stale(why) => eprintln!(
            "stale pid file {} ({why}): removed it; nothing was stopped",
            pid_path.display()
        ),
        Stop::NotBackground(pid) => {
            return Err(CliError::failure(
                "not_background",
                anyhow::anyhow!(
                    "the controller (pid {pid}) was not started with `serve --background` (no {}); stop it where it was started: its service manager or its terminal",
                    pid_path.display()
                ),
            ));
        }
    }
    Ok(())
}

/// What [`stop_in`] found and did.
pub(super) enum Stop {
    /// The background controller with this pid was signalled and has ended.
    Stopped(u32),
    /// No pid file and nothing answering.
    NotRunning,
    /// The pid file named no live controller of this home (why); it was
    /// removed and nothing was signalled.
    Stale(String),
    /// A controller (this pid) answers without a pid file: a service
    /// manager's or a foreground `serve`, never stopped here.
    NotBackground(u32),
}

/// Stops the background controller of `home` (its pid file), checked as
/// the module says; `answering` is the pid `status` reports on its socket,
/// if it answers. Shared by `stop` and `uninstall --purge`.
pub(super) fn stop_in(
    global: &GlobalArgs,
    home: &Path,
    answering: Option<u32>,
) -> Result<Stop, CliError> {
    let pid_path = home.join(PID_FILE);
    let recorded = match std::fs::read_to_string(&pid_path) {
        Ok(text) => PidRecord::parse(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(match answering {
                Some(pid) => Stop::NotBackground(pid),
                None => Stop::NotRunning,
            });
        }
        Err(e) => return Err(CliError::from(e)),
    };
    let stale = |why: String| -> Result<Stop, CliError> {
        let _ = std::fs::remove_file(&pid_path);
        Ok(Stop::Stale(why))
    };
    let Some(record) = recorded else {
        return stale("it holds no pid".into());
    };
    let pid = record.pid;
    if !is_this_controller(pid) {
        return stale(format!("pid {pid} is not a lapis-ai-controller serve"));
    }
    if let Some(other) = answering
        && other != pid
    {
        return stale(format!(
            "the controller answering is pid {other}, not {pid}"
        ));
    }
    if answering != Some(pid) && !record.still_names_its_process() {
        return stale(format!(
            "pid {pid} is not the process `serve --background` started here (its start time or executable differ)"
        ));
    }
    // Waited on below as this very process (a reused pid is another one).
    let started = start_time_of(pid);
    let target_pid = nix::unistd::Pid::from_raw(i32::try_from(pid).map_err(CliError::from)?);
    nix::sys::signal::kill(target_pid, nix::sys::signal::Signal::SIGTERM).map_err(|e| {
        CliError::failure(
            "signal_failed",
            anyhow::anyhow!("cannot signal pid {pid}: {e}"),
        )
    })?;
    let deadline = Instant::now() + STOP_WITHIN;
    while is_this_controller(pid) && start_time_of(pid) == started {
        if Instant::now() > deadline {
            return Err(CliError::unavailable(
                "not_stopped",
                anyhow::anyhow!(
                    "the controller (pid {pid}) is still running {}s after SIGTERM (draining turns?); run `{}` again, or see {}",
                    STOP_WITHIN.as_secs(),
                    stop_command(global),
                    home.join(LOG_FILE).display()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_file(&pid_path);
    Ok(Stop::Stopped(pid))
}

/// The pid `status` reports on `target`'s socket, if it answers.
pub(super) fn answering_pid(target: &Target) -> Option<u32> {
    let socket = target.home.join(lapis_protocol::home::SOCKET_FILE);
    if !socket.exists() {
        return None;
    }
    let mut client = connect_to(target).ok()?;
    client.status().ok().map(|s| s.pid)
}

/// What the pid file says: the pid, and (since this version) the
/// process's start time and executable as `serve --background` saw them
/// right after starting it, one per line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PidRecord {
    /// The process.
    pid: u32,
    /// Its start time (clock ticks since boot), `None` in an older file.
    started: Option<u64>,
    /// Its `/proc/PID/exe`, `None` in an older file.
    exe: Option<PathBuf>,
}

impl PidRecord {
    /// The record of the process `pid`, read from `/proc` now.
    fn of(pid: u32) -> PidRecord {
        PidRecord {
            pid,
            started: start_time_of(pid),
            exe: std::fs::read_link(format!("/proc/{pid}/exe")).ok(),
        }
    }

    fn parse(text: &str) -> Option<PidRecord> {
        let mut lines = text.lines();
        let pid = lines.next()?.trim().parse().ok()?;
        let started = lines.next().and_then(|l| l.trim().parse().ok());
        let exe = lines.next().filter(|l| !l.is_empty()).map(PathBuf::from);
        Some(PidRecord { pid, started, exe })
    }

    fn render(&self) -> String {
        let started = self.started.map(|s| s.to_string()).unwrap_or_default();
        let exe = self
            .exe
            .as_deref()
            .map(|e| e.display().to_string())
            .unwrap_or_default();
        format!("{}\n{started}\n{exe}\n", self.pid)
    }

    /// Whether the process `pid` is still the one recorded: same start
    /// time and same executable (an older file, which recorded neither,
    /// never is).
    fn still_names_its_process(&self) -> bool {
        let now = PidRecord::of(self.pid);
        self.started.is_some() && self.exe.is_some() && now == *self
    }
}

/// `pid`'s start time, while it lives.
fn start_time_of(pid: u32) -> Option<u64> {
    lapis_service::start_time(pid)
}

/// Whether `pid` is alive and is a `lapis-ai-controller serve` (its
/// executable's name and its argv; a zombie or a reused pid is not).
fn is_this_controller(pid: u32) -> bool {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let named = exe
        .as_deref()
        .and_then(Path::file_name)
        .is_some_and(|n| n.to_string_lossy().starts_with(lapis_release::PRODUCT));
    let serving = std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|argv| argv.split(|b| *b == 0).any(|a| a == b"serve"));
    named && serving
}

/// Makes sure `home` is a controller home (marked, new or empty) before a
/// file is written into it; creates it 0700 when missing.
fn prepare_home(home: &Path) -> Result<(), CliError> {
    let empty = std::fs::read_dir(home).map(|mut d| d.next().is_none());
    match empty {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(home)
            .map_err(CliError::from),
        Err(e) => Err(CliError::from(e)),
        Ok(true) => Ok(()),
        Ok(false) if is_marked_home(home) => Ok(()),
        Ok(false) => Err(CliError::failure(
            "not_controller_home",
            anyhow::anyhow!(
                "{} is not a controller home (it holds other files and no controller.db); choose another --home",
                home.display()
            ),
        )),
    }
}

/// Writes the pid file (0600, replaced atomically).
fn write_pid(path: &Path, record: &PidRecord) -> Result<(), CliError> {
    let tmp: PathBuf = path.with_file_name(lapis_protocol::home::PID_TMP_FILE);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(CliError::from)?;
    f.write_all(record.render().as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(CliError::from)?;
    std::fs::rename(&tmp, path).map_err(CliError::from)
}

/// The last [`LOG_TAIL`] lines of the log, terminal-safe.
fn tail(log: &Path) -> String {
    let Ok(file) = std::fs::File::open(log) else {
        return String::new();
    };
    let lines: Vec<String> = std::io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .collect();
    let from = lines.len().saturating_sub(LOG_TAIL);
    crate::terminal::safe(&lines[from..].join("\n")).into_owned()
}

/// `lapis-ai-controller [--config …] [--instance …] stop`.
fn stop_command(global: &GlobalArgs) -> String {
    format!("{} stop", super::permissions::command_prefix(global))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_record_round_trips_and_an_older_one_names_no_identity() {
        let me = PidRecord::of(std::process::id());
        assert!(me.started.is_some() && me.exe.is_some());
        assert_eq!(PidRecord::parse(&me.render()), Some(me.clone()));
        assert!(me.still_names_its_process());
        let older = PidRecord::parse("4242\n").unwrap();
        assert_eq!((older.pid, older.started, &older.exe), (4242, None, &None));
        assert!(
            !PidRecord {
                pid: me.pid,
                ..older
            }
            .still_names_its_process()
        );
        let mut other_start = me.clone();
        other_start.started = me.started.map(|s| s + 1);
        assert!(!other_start.still_names_its_process());
        let mut other_exe = me;
        other_exe.exe = Some("/bin/sh".into());
        assert!(!other_exe.still_names_its_process());
    }
}
