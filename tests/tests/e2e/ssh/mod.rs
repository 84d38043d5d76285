//! `--host ssh://…` against a real `sshd` on loopback: the helper starts
//! one as the current user (its own host key, client key, known_hosts and
//! config in a temp dir), whose sessions see the server's temp HOME, so
//! the remote `dial-stdio` finds that controller. The client side is a
//! second [`TestContext`] with a HOME of its own and no configuration at
//! all: whatever works there came through ssh.
//!
//! Without `sshd` the tests skip locally and fail under `CI=true`
//! (`.ci/run` installs it).

mod bench;
mod commands;
mod drops;
mod failures;
mod watch;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use lapis_e2e::TestContext;
use serde_json::Value;

use crate::serve_support::Server;

/// A private `sshd -D -e` on 127.0.0.1, killed on drop.
pub struct Sshd {
    /// Keys, configs, known_hosts, the pid file.
    pub dir: tempfile::TempDir,
    /// The daemon (its per-connection children are its own).
    child: Child,
    /// The port it listens on.
    pub port: u16,
    /// The client's `ssh -F` file.
    pub client_config: PathBuf,
    /// Everything the daemon logged.
    log: Arc<Mutex<String>>,
}

fn sshd_program() -> Option<PathBuf> {
    ["/usr/sbin/sshd", "/usr/bin/sshd", "/usr/local/sbin/sshd"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .output()
        .expect("ssh-keygen");
    assert!(out.status.success(), "ssh-keygen: {out:?}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Sshd {
    /// Starts a daemon whose sessions run with `remote`'s HOME and XDG
    /// directories; `None` (after [`lapis_e2e::skip::skip`]) without sshd.
    pub fn start(remote: &TestContext) -> Option<Sshd> {
        let Some(program) = sshd_program() else {
            lapis_e2e::skip::skip("sshd (openssh-server) is not installed");
            return None;
        };
        if Command::new("ssh").arg("-V").output().is_err() {
            lapis_e2e::skip::skip("ssh (openssh-client) is not installed");
            return None;
        }
        // Privilege separation needs its directory when run as root.
        if nix::unistd::geteuid().is_root() {
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        let dir = tempfile::Builder::new()
            .prefix("lapis-sshd-")
            .tempdir()
            .unwrap();
        let d = dir.path();
        keygen(&d.join("host_key"));
        keygen(&d.join("client_key"));
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
        let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_owned();
        let home = remote.home();
        let path = std::env::var("PATH").unwrap_or_default();
        for _attempt in 0..5 {
            let port = free_port();
            let cfg = d.join("sshd_config");
            std::fs::write(
                &cfg,
                format!(
                    "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
                     AuthorizedKeysFile {d}/authorized_keys\nPidFile {d}/sshd.pid\n\
                     StrictModes no\nUsePAM no\nPasswordAuthentication no\n\
                     KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                     PermitRootLogin prohibit-password\n\
                     SetEnv HOME={h} XDG_CONFIG_HOME={h}/.config XDG_DATA_HOME={h}/.local/share \
                     XDG_STATE_HOME={h}/.local/state XDG_CACHE_HOME={h}/.cache \
                     XDG_RUNTIME_DIR={h}/run NO_COLOR=1 PATH={path}\n",
                    d = d.display(),
                    h = home.display(),
                ),
            )
            .unwrap();
            let host_pub = std::fs::read_to_string(d.join("host_key.pub")).unwrap();
            std::fs::write(
                d.join("known_hosts"),
                format!("[127.0.0.1]:{port} {host_pub}"),
            )
            .unwrap();
            let client_config = d.join("ssh_config");
            std::fs::write(
                &client_config,
                format!(
                    "Host *\n  User {user}\n  IdentityFile {d}/client_key\n  IdentitiesOnly yes\n  \
                     UserKnownHostsFile {d}/known_hosts\n  GlobalKnownHostsFile /dev/null\n  \
                     StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n  \
                     ControlMaster no\n  ControlPath none\n",
                    d = d.display()
                ),
            )
            .unwrap();
            let mut child = Command::new(&program)
                .args(["-D", "-e", "-f"])
                .arg(&cfg)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn sshd");
            let log = Arc::new(Mutex::new(String::new()));
            let (ready, listening) = mpsc::channel();
            let keep = Arc::clone(&log);
            let stderr = child.stderr.take().unwrap();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if line.contains("Server listening on") {
                        let _ = ready.send(true);
                    }
                    let mut l = keep.lock().unwrap();
                    l.push_str(&line);
                    l.push('\n');
                }
                let _ = ready.send(false);
            });
            match listening.recv_timeout(Duration::from_secs(30)) {
                Ok(true) => {
                    return Some(Sshd {
                        dir,
                        child,
                        port,
                        client_config,
                        log,
                    });
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let said = log.lock().unwrap().clone();
                    // Another test took the port between bind and listen.
                    if !said.contains("Address already in use") {
                        panic!("sshd did not start:\n{said}");
                    }
                }
            }
        }
        panic!("sshd found no free port in 5 attempts");
    }

    /// `ssh://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("ssh://127.0.0.1:{}", self.port)
    }

    /// `LAPIS_AI_CONTROLLER_SSH`: `ssh -F <config>`.
    pub fn ssh_command(&self) -> String {
        format!("ssh -F {}", self.client_config.display())
    }

    /// What the daemon logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The daemon's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A controller behind ssh: the server (the "remote" host's HOME), its
/// sshd, and a client context with an empty HOME of its own whose every
/// command goes to `ssh://127.0.0.1:PORT` (`LAPIS_AI_CONTROLLER_HOST`).
pub struct Remote {
    /// The local client's context (no configuration, no token).
    pub local: TestContext,
    /// The daemon.
    pub sshd: Sshd,
    /// The controller on the "remote" host.
    pub server: Server,
}

impl Remote {
    /// A server with `providers`, an sshd in front of it and a client
    /// context pointed at it; `None` when sshd is missing (skipped).
    pub fn start(providers: Value) -> Option<Remote> {
        Remote::start_server(Server::start_full(serde_json::json!({}), providers))
    }

    /// [`Remote::start`] in front of a server already running.
    pub fn start_server(server: Server) -> Option<Remote> {
        let sshd = Sshd::start(&server.ctx)?;
        let mut local = TestContext::new();
        local.set_env("LAPIS_AI_CONTROLLER_SSH", sshd.ssh_command());
        local.set_env(
            "LAPIS_AI_CONTROLLER_REMOTE_BIN",
            TestContext::bin().to_string_lossy().into_owned(),
        );
        local.set_env("LAPIS_AI_CONTROLLER_HOST", sshd.url());
        Some(Remote {
            local,
            sshd,
            server,
        })
    }
}

/// Every pid in /proc.
pub fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// `/proc/PID/cmdline` with NULs as spaces.
pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// The parent of `pid`.
pub fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}
