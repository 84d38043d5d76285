//! A controller on another host, reached the way `docker -H ssh://` does:
//! the connection is the stdin/stdout of a child `ssh [-p PORT]
//! [USER@]HOST -- lapis-ai-controller dial-stdio`, and the remote
//! `dial-stdio` relays it to that host's socket.
//!
//! What must stay true:
//! - no secret crosses: the client says `hello` with
//!   [`Credential::Relayed`] (no token), the remote `dial-stdio` puts its
//!   own host's token in and strips any bearer from the answer;
//! - host-key checking, keys and agents are the system `ssh`'s own; nothing
//!   here passes `-o` options (`BatchMode` would break password and
//!   host-key prompts, which `ssh` asks on the terminal);
//! - a host or user that could be read as an option is refused before
//!   anything runs;
//! - when the child ends, its exit status says why: 255 (ssh itself
//!   failed), 127 (no remote binary) or `dial-stdio`'s own failure, each a
//!   [`ClientError::Remote`] with a stable code and the fix.
//!
//! [`Credential::Relayed`]: super::Credential::Relayed

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Client, ClientError};

/// The environment variable naming the ssh command (split at whitespace,
/// like `GIT_SSH_COMMAND`), default `ssh`.
pub const SSH_COMMAND_ENV: &str = "LAPIS_AI_CONTROLLER_SSH";

/// The environment variable naming the remote program, default
/// `lapis-ai-controller` (resolved by the remote shell's `PATH`).
pub const REMOTE_BIN_ENV: &str = "LAPIS_AI_CONTROLLER_REMOTE_BIN";

/// How much of the child's stderr is kept for error messages.
const STDERR_KEEP: usize = 16 * 1024;

/// `ssh://[user@]host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshHost {
    /// The login user, when given.
    pub user: Option<String>,
    /// The host name or address (IPv6 without brackets).
    pub host: String,
    /// The port, when given.
    pub port: Option<u16>,
}

impl SshHost {
    /// Parses `ssh://[user@]host[:port]`; the message says what is wrong.
    pub fn parse(url: &str) -> Result<SshHost, String> {
        let rest = url.strip_prefix("ssh://").ok_or_else(|| {
            format!("`{url}` is not an ssh:// address (the form is ssh://[user@]host[:port])")
        })?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (user, hostport) = match rest.rsplit_once('@') {
            Some((u, h)) => (Some(u.to_owned()), h),
            None => (None, rest),
        };
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("`{url}`: unclosed `[` in the host"))?;
            (h.to_owned(), after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), Some(p)),
                None => (hostport.to_owned(), None),
            }
        };
        let port = port
            .map(|p| {
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("`{url}`: `{p}` is not a port"))
            })
            .transpose()?;
        let safe = |s: &str| {
            !s.is_empty()
                && !s.starts_with('-')
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-:%".contains(c))
        };
        if !safe(&host) {
            return Err(format!("`{url}`: `{host}` is not a host name"));
        }
        if let Some(u) = &user
            && !safe(u)
        {
            return Err(format!("`{url}`: `{u}` is not a user name"));
        }
        Ok(SshHost { user, host, port })
    }

    /// `ssh://[user@]host[:port]` again.
    pub fn url(&self) -> String {
        let user = self
            .user
            .as_deref()
            .map(|u| format!("{u}@"))
            .unwrap_or_default();
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let port = self.port.map(|p| format!(":{p}")).unwrap_or_default();
        format!("ssh://{user}{host}{port}")
    }
}

/// How to dial a remote controller: the host, the local ssh command and
/// the remote `dial-stdio` arguments.
#[derive(Debug, Clone)]
pub struct SshDial {
    /// The host.
    pub host: SshHost,
    /// The ssh program and its arguments (default `ssh`).
    pub ssh: Vec<String>,
    /// The remote program (default `lapis-ai-controller`).
    pub remote_bin: String,
    /// Extra arguments for the remote `dial-stdio` (`--instance NAME`).
    pub remote_args: Vec<String>,
}

impl SshDial {
    /// A dial for `host` with the ssh command and remote program from the
    /// environment ([`SSH_COMMAND_ENV`], [`REMOTE_BIN_ENV`]).
    pub fn from_env(host: SshHost) -> SshDial {
        let ssh = std::env::var(SSH_COMMAND_ENV)
            .ok()
            .map(|s| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| vec!["ssh".to_owned()]);
        let remote_bin = std::env::var(REMOTE_BIN_ENV)
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| crate::client::DEFAULT_EXECUTABLE.to_owned());
        SshDial {
            host,
            ssh,
            remote_bin,
            remote_args: Vec::new(),
        }
    }

    /// The child's argv (no secret in it).
    pub fn argv(&self) -> Vec<String> {
        let mut argv = self.ssh.clone();
        if let Some(p) = self.host.port {
            argv.extend(["-p".to_owned(), p.to_string()]);
        }
        let dest = match &self.host.user {
            Some(u) => format!("{u}@{}", self.host.host),
            None => self.host.host.clone(),
        };
        argv.extend(["--".to_owned(), dest, self.remote_bin.clone()]);
        argv.push("dial-stdio".to_owned());
        argv.extend(self.remote_args.iter().cloned());
        argv
    }

    /// Starts the child and returns a client on its stdin/stdout (not yet
    /// authenticated: say `hello` with [`super::Credential::Relayed`]).
    pub fn connect(&self) -> Result<Client, ClientError> {
        let (stream, link) = self.spawn()?;
        let mut client = Client::from_stream(None, stream)?;
        client.ssh = Some(link);
        Ok(client)
    }

    pub(crate) fn spawn(&self) -> Result<(UnixStream, Link), ClientError> {
        let argv = self.argv();
        // A socket pair, not pipes: the client's read and write deadlines
        // work on it as on the controller's own socket.
        let (ours, theirs) = UnixStream::pair().map_err(ClientError::Io)?;
        let theirs_out = theirs.try_clone().map_err(ClientError::Io)?;
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
            .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs_out)))
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| ClientError::Remote {
                code: "ssh_missing",
                message: format!(
                    "cannot run `{}` ({e}): install an OpenSSH client, or name one in {SSH_COMMAND_ENV}",
                    argv[0]
                ),
            })?;
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let keep = Arc::clone(&stderr);
            let _ = std::thread::Builder::new()
                .name("lapis-ssh-stderr".into())
                .spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = pipe.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        let mut kept = keep.lock().unwrap_or_else(|e| e.into_inner());
                        kept.extend_from_slice(&buf[..n]);
                        if kept.len() > STDERR_KEEP {
                            let cut = kept.len() - STDERR_KEEP;
                            kept.drain(..cut);
                        }
                    }
                });
        }
        Ok((
            ours,
            Link {
                dial: self.clone(),
                child,
                stderr,
            },
        ))
    }
}

/// The running ssh child of one connection; reaped when dropped.
pub(crate) struct Link {
    pub(crate) dial: SshDial,
    child: Child,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Link {
    /// After the connection ended: why, from the child's exit status and
    /// stderr (`None`: it ended normally, report a plain disconnect).
    pub(crate) fn failure(&mut self) -> Option<ClientError> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => return None,
            }
        };
        // Let the stderr reader drain what the child wrote last.
        std::thread::sleep(Duration::from_millis(20));
        let text = {
            let kept = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
            String::from_utf8_lossy(&kept).into_owned()
        };
        let said = last_lines(&text);
        let url = self.dial.host.url();
        let (code, message) = match status.code() {
            Some(0) | None => return None,
            Some(255) if text.contains("Host key verification failed") => (
                "ssh_host_key",
                format!(
                    "ssh refused {url}: its host key is unknown or changed ({said}); check the key with the host's owner, then fix known_hosts (`ssh-keygen -R HOST`, then `ssh HOST true` to accept the new one)"
                ),
            ),
            Some(255) => (
                "ssh_unreachable",
                format!(
                    "cannot reach {url} over ssh ({said}); check that `ssh {} true` works",
                    self.dial.argv_dest()
                ),
            ),
            Some(2) if text.contains("unrecognized subcommand") && text.contains("dial-stdio") => (
                "version_mismatch",
                format!(
                    "the `{}` on {url} has no `dial-stdio` (an older release): install the same release on both hosts (`{}` there shows its version; `update` upgrades)",
                    self.dial.remote_bin,
                    self.dial.shell_command("version")
                ),
            ),
            Some(127) => (
                "remote_binary_missing",
                format!(
                    "`{}` is not on the PATH of a non-interactive ssh session on {url} ({said}): install it there, or set {REMOTE_BIN_ENV} to its full path (often ~/.local/bin/lapis-ai-controller)",
                    self.dial.remote_bin
                ),
            ),
            Some(3) => (
                "remote_unavailable",
                format!(
                    "no controller answers on {url} ({said}); start it there (`{}` says how)",
                    self.dial.shell_command("status")
                ),
            ),
            Some(n) => (
                "remote_failed",
                format!("`dial-stdio` on {url} failed (exit {n}): {said}"),
            ),
        };
        Some(ClientError::Remote { code, message })
    }
}

impl SshDial {
    /// The command line that runs `args` on the remote host by hand, for
    /// what-to-do messages (`ssh -p 2222 ann@box lapis-ai-controller status`).
    pub fn shell_command(&self, args: &str) -> String {
        format!(
            "{} {} {} {args}",
            self.ssh.join(" "),
            self.argv_dest(),
            self.remote_bin
        )
    }

    fn argv_dest(&self) -> String {
        let port = self
            .host
            .port
            .map(|p| format!("-p {p} "))
            .unwrap_or_default();
        match &self.host.user {
            Some(u) => format!("{port}{u}@{}", self.host.host),
            None => format!("{port}{}", self.host.host),
        }
    }
}

/// The last few meaningful stderr lines, on one line (`error: ` prefixes
/// of the remote CLI dropped).
fn last_lines(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Warning: Permanently added"))
        .collect();
    let tail = &lines[lines.len().saturating_sub(3)..];
    let joined = tail
        .iter()
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("; ");
    if joined.is_empty() {
        "it said nothing".to_owned()
    } else {
        joined
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // The socket is closed by now (the client's stream drops first):
        // ssh sees end of input and exits; stop waiting after a moment.
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_user_host_and_port_and_refuses_option_lookalikes() {
        let h = SshHost::parse("ssh://ann@box.example:2222").unwrap();
        assert_eq!(h.user.as_deref(), Some("ann"));
        assert_eq!(h.host, "box.example");
        assert_eq!(h.port, Some(2222));
        assert_eq!(h.url(), "ssh://ann@box.example:2222");
        let h = SshHost::parse("ssh://[::1]:22").unwrap();
        assert_eq!((h.host.as_str(), h.port), ("::1", Some(22)));
        assert_eq!(SshHost::parse("ssh://box").unwrap().port, None);
        for bad in [
            "box",
            "ssh://",
            "ssh://-oProxyCommand=x",
            "ssh://-l@box",
            "ssh://box:0",
            "ssh://box:port",
            "ssh://a b",
        ] {
            assert!(SshHost::parse(bad).is_err(), "{bad}");
        }
        let mut dial = SshDial::from_env(SshHost::parse("ssh://ann@box:2222").unwrap());
        dial.ssh = vec!["ssh".into()];
        dial.remote_bin = "lapis-ai-controller".into();
        assert_eq!(
            dial.argv(),
            [
                "ssh",
                "-p",
                "2222",
                "--",
                "ann@box",
                "lapis-ai-controller",
                "dial-stdio"
            ]
        );
    }
}
