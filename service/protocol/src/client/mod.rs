//! The client SDK: a blocking connection to the controller's socket.
//!
//! Blocking on purpose: the CLI makes one or two calls per process, and a
//! runtime would cost more than the call. What must stay true:
//! - the credential is sent only inside `hello` and never appears in an
//!   error or a `Debug` output;
//! - [`Client::reconnect`] resumes the *same* AuthSession (bearer first, then
//!   the token, which resumes the credential's live session) and fails if the
//!   server hands back a different one;
//! - the SDK never resends a request: a connection lost after a request was
//!   written is reported as [`ClientError::Disconnected`] with
//!   `request_sent: true`, and the caller decides (a mutation should be
//!   checked with a read, or retried with the same command id);
//! - nothing waits forever on a wedged server: connecting is bounded by
//!   [`DEFAULT_CONNECT_TIMEOUT`] (or [`Client::connect_timeout`]) and every
//!   request by the request deadline ([`Client::set_request_timeout`]); past
//!   it the call fails [`ClientError::Unresponsive`] and the connection should
//!   be dropped (a late response would be read as the next one's).

mod calls;
mod credential;
mod error;
mod follow;
mod managed;
mod ports;
mod resume;
mod serve;
mod settle;
mod ssh;

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{
    DEFAULT_MAX_FRAME_BYTES, FrameError, HelloParams, HelloResult, Id, Incoming, Notification,
    PROTOCOL, Request, SessionView, ThreadExpect, ThreadSnapshot, continue_frame_blocking,
};

pub use credential::Credential;
pub use error::ClientError;
pub use follow::JournalFollower;
pub use managed::{
    DEFAULT_EXECUTABLE, DEFAULT_READY_TIMEOUT, DEFAULT_STOP_GRACE, ManagedController, ManagedError,
    ManagedOptions,
};
pub use ports::PortHandlers;
// Every port kind's handler trait (`ToolHandler`, `ContextHandler`, …) and
// `CallbackError`: the module's public items are exactly those, so a new
// kind's handler is exported without an edit here.
pub use serve::*;
pub use ssh::{REMOTE_BIN_ENV, SSH_COMMAND_ENV, SshDial, SshHost};

/// How long [`Client::connect`] waits for the socket to accept.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a request waits for its response unless
/// [`Client::set_request_timeout`] says otherwise. Every method answers
/// promptly (turns run after `turns.submit` returns), so this only fires on a
/// wedged or overloaded server.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One connection to the controller.
pub struct Client {
    /// Socket path, for reconnects (`None`: a managed controller's private
    /// socket, which cannot be dialled again).
    path: Option<PathBuf>,
    /// Write side.
    stream: UnixStream,
    /// Read side (a clone of the same socket), buffered.
    reader: BufReader<UnixStream>,
    /// Next request id.
    next_id: i64,
    /// Largest frame accepted from the server.
    max_frame: usize,
    /// Notifications read while waiting for a response.
    queued: VecDeque<Notification>,
    /// The credential given to the first `hello`.
    credential: Option<Credential>,
    /// The bearer, when the server issued one.
    bearer: Option<String>,
    /// The session, after `hello`.
    session: Option<SessionView>,
    /// A frame partly read when a read timed out.
    partial: Vec<u8>,
    /// Longest wait for a response (`None`: forever).
    request_timeout: Option<Duration>,
    /// Threads attached with [`Client::threads_attach`]: the binding stated
    /// and the last snapshot; [`Client::reconnect`] attaches them again.
    attachments: BTreeMap<String, (ThreadExpect, ThreadSnapshot)>,
    /// The MCP servers last registered with [`Client::mcp_register`]:
    /// registrations die with their connection, so [`Client::reconnect`]
    /// registers them again before re-attaching threads.
    pub(crate) mcp: Option<Vec<crate::mcp::McpServer>>,
    /// The tool endpoints registered with [`Client::tools_register`], by
    /// name: like MCP servers they die with their connection, so
    /// [`Client::reconnect`] registers them again.
    pub(crate) tools: BTreeMap<String, crate::tools::ToolsRegister>,
    /// The named ports registered with `<kind>_register` (context,
    /// memory, transcript store), registered again by [`Client::reconnect`]
    /// like tool endpoints.
    pub(crate) ports: ports::KeptPorts,
    /// Controller → client requests (`tools.invoke`, `capture.*`) read
    /// while waiting for a response, for [`Client::serve_tools`].
    pub(crate) callbacks: VecDeque<Request>,
    /// The ssh child when the connection is its stdin/stdout
    /// ([`SshDial::connect`]); last, so it drops after the stream.
    pub(crate) ssh: Option<ssh::Link>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("path", &self.path)
            .field("ssh", &self.ssh.as_ref().map(|l| l.dial.host.url()))
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connects to the socket within [`DEFAULT_CONNECT_TIMEOUT`]. An absent
    /// socket, a refused connection or a listener that does not accept in
    /// time is [`ClientError::Unavailable`].
    pub fn connect(path: &Path) -> Result<Client, ClientError> {
        Client::connect_timeout(path, DEFAULT_CONNECT_TIMEOUT)
    }

    /// [`Client::connect`] with an explicit connect deadline.
    pub fn connect_timeout(path: &Path, timeout: Duration) -> Result<Client, ClientError> {
        let unavailable = |source| ClientError::Unavailable {
            path: path.to_owned(),
            source,
        };
        // `std` has no connect deadline for Unix sockets and a full accept
        // backlog blocks `connect`: connect on a helper thread and stop
        // waiting at the deadline (a late connection is then dropped).
        let (tx, rx) = std::sync::mpsc::channel();
        let target = path.to_owned();
        std::thread::Builder::new()
            .name("lapis-connect".into())
            .spawn(move || {
                let _ = tx.send(UnixStream::connect(target));
            })
            .map_err(ClientError::Io)?;
        let stream = match rx.recv_timeout(timeout) {
            Ok(r) => r.map_err(unavailable)?,
            Err(_) => {
                return Err(unavailable(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the socket did not accept within {} ms",
                        timeout.as_millis()
                    ),
                )));
            }
        };
        Client::from_stream(Some(path.to_owned()), stream)
    }

    /// A client on an already connected stream (`path` for reconnects).
    pub(crate) fn from_stream(
        path: Option<PathBuf>,
        stream: UnixStream,
    ) -> Result<Client, ClientError> {
        let reader = BufReader::new(stream.try_clone().map_err(ClientError::Io)?);
        Ok(Client {
            path,
            stream,
            reader,
            next_id: 1,
            max_frame: DEFAULT_MAX_FRAME_BYTES,
            queued: VecDeque::new(),
            credential: None,
            bearer: None,
            session: None,
            partial: Vec::new(),
            request_timeout: Some(DEFAULT_REQUEST_TIMEOUT),
            attachments: BTreeMap::new(),
            mcp: None,
            tools: BTreeMap::new(),
            ports: ports::KeptPorts::default(),
            callbacks: VecDeque::new(),
            ssh: None,
        })
    }

    /// Bounds how long each request waits for its response (`None`: no
    /// bound). Default [`DEFAULT_REQUEST_TIMEOUT`].
    pub fn set_request_timeout(&mut self, timeout: Option<Duration>) {
        self.request_timeout = timeout;
    }

    /// Connects and says `hello`.
    pub fn open(path: &Path, credential: Credential) -> Result<Client, ClientError> {
        let mut client = Client::connect(path)?;
        client.hello(credential)?;
        Ok(client)
    }

    /// Bounds frames read from the server (default 1 MiB).
    pub fn set_max_frame(&mut self, max: usize) {
        self.max_frame = max;
    }

    /// The session, after `hello`.
    pub fn session(&self) -> Option<&SessionView> {
        self.session.as_ref()
    }

    /// The bearer the server issued to this client, if any. A secret.
    pub fn bearer(&self) -> Option<&str> {
        self.bearer.as_deref()
    }

    /// Authenticates the connection.
    pub fn hello(&mut self, credential: Credential) -> Result<HelloResult, ClientError> {
        let params = credential.hello_params();
        let result = self.request::<crate::call::Hello>(&params)?;
        if let Some(b) = &result.bearer {
            self.bearer = Some(b.clone());
        }
        if self.credential.is_none() {
            self.credential = Some(credential);
        }
        self.session = Some(result.session.clone());
        Ok(result)
    }

    /// `hello` with a tool ticket: this connection becomes an agent
    /// session's MCP bridge (the controller's `mcp-bridge` does this), for
    /// `tools.list` and `tools.call` of that session's thread only. Never
    /// reconnected: a ticket expires with its session.
    pub fn hello_ticket(&mut self, ticket: &str) -> Result<HelloResult, ClientError> {
        let params = HelloParams {
            protocol: PROTOCOL.to_owned(),
            token: None,
            bearer: None,
            application: None,
            ticket: Some(ticket.to_owned()),
        };
        let result = self.request::<crate::call::Hello>(&params)?;
        self.session = Some(result.session.clone());
        Ok(result)
    }

    /// Sends the request of call `C` and waits for its result, typed as the
    /// server's dispatch produces it; notifications that arrive meanwhile
    /// are queued for [`Client::next_notification`].
    pub fn request<C: crate::call::Call>(
        &mut self,
        params: &C::Params,
    ) -> Result<C::Result, ClientError> {
        self.call(C::METHOD.name(), params)
    }

    /// Sends one request by wire name (the untyped escape hatch: a method
    /// this SDK predates, or a test sending what no `Call` allows); prefer
    /// [`Client::request`].
    pub fn call<P: Serialize, R: DeserializeOwned>(
        &mut self,
        method: &str,
        params: &P,
    ) -> Result<R, ClientError> {
        let value = self.call_value(
            method,
            serde_json::to_value(params).map_err(ClientError::Encode)?,
        )?;
        serde_json::from_value(value)
            .map_err(|e| ClientError::Protocol(format!("unexpected `{method}` result: {e}")))
    }

    /// [`Client::call`] with untyped params and result.
    pub fn call_value(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let frame = Request {
            id: Id::Number(id),
            method: method.to_owned(),
            params,
        }
        .to_frame();
        let deadline = self.request_timeout.map(|t| std::time::Instant::now() + t);
        let after = self.request_timeout.unwrap_or_default();
        let unresponsive = |request_sent| ClientError::Unresponsive {
            request_sent,
            after,
        };
        let _ = self.stream.set_write_timeout(self.request_timeout);
        let written = self.stream.write_all(&frame);
        let _ = self.stream.set_write_timeout(None);
        match written {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(unresponsive(false));
            }
            Err(_) => {
                // Over ssh, the child's exit status says why.
                if let Some(e) = self.ssh.as_mut().and_then(ssh::Link::failure) {
                    return Err(e);
                }
                return Err(ClientError::Disconnected {
                    request_sent: false,
                });
            }
        }
        loop {
            let left = match deadline {
                None => None,
                Some(d) => match d.checked_duration_since(std::time::Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Err(unresponsive(true)),
                },
            };
            let incoming = match self.read_incoming(left) {
                Err(ClientError::Timeout) => return Err(unresponsive(true)),
                other => other?,
            };
            match incoming {
                Some(Incoming::Notification(n)) => self.queued.push_back(n),
                Some(Incoming::Request(r)) => self.callbacks.push_back(r),
                Some(Incoming::Response(r)) => {
                    if r.id != Some(Id::Number(id)) && r.id.is_some() {
                        return Err(ClientError::Protocol("response for another request".into()));
                    }
                    if let Some(e) = r.error {
                        return Err(ClientError::Rpc(e));
                    }
                    if r.id.is_none() {
                        return Err(ClientError::Protocol("response without an id".into()));
                    }
                    return Ok(r.result.unwrap_or(Value::Null));
                }
                None => return Err(ClientError::Disconnected { request_sent: true }),
            }
        }
    }

    /// The next notification: a queued one, or one read from the socket
    /// within `timeout` (`None` = wait indefinitely). `Ok(None)` on timeout.
    pub fn next_notification(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Option<Notification>, ClientError> {
        if let Some(n) = self.queued.pop_front() {
            return Ok(Some(n));
        }
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        loop {
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return Ok(None);
            }
            match self.read_incoming(left) {
                // Kept for `serve_tools`; the wait for a notification goes on.
                Ok(Some(Incoming::Request(r))) => self.callbacks.push_back(r),
                other => return Self::notification_of(other),
            }
        }
    }

    fn notification_of(
        read: Result<Option<Incoming>, ClientError>,
    ) -> Result<Option<Notification>, ClientError> {
        match read {
            Ok(Some(Incoming::Notification(n))) => Ok(Some(n)),
            Ok(Some(Incoming::Request(_))) => Ok(None),
            Ok(Some(Incoming::Response(_))) => {
                Err(ClientError::Protocol("unsolicited response".into()))
            }
            Ok(None) => Err(ClientError::Disconnected {
                request_sent: false,
            }),
            Err(ClientError::Timeout) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn read_incoming(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Option<Incoming>, ClientError> {
        self.stream
            .set_read_timeout(timeout)
            .map_err(ClientError::Io)?;
        let got = continue_frame_blocking(&mut self.reader, &mut self.partial, self.max_frame);
        let _ = self.stream.set_read_timeout(None);
        let got = match (got, self.ssh.as_mut()) {
            // The ssh child ended: its exit status says why.
            (Ok(false) | Err(FrameError::Truncated), Some(link)) => match link.failure() {
                Some(e) => return Err(e),
                None => Ok(false),
            },
            // The child closed its end with our request unread.
            (Err(FrameError::Io(e)), Some(link))
                if e.kind() == std::io::ErrorKind::ConnectionReset =>
            {
                match link.failure() {
                    Some(e) => return Err(e),
                    None => Ok(false),
                }
            }
            (got, _) => got,
        };
        match got {
            Ok(true) => {
                let parsed = Incoming::parse(&self.partial)
                    .map(Some)
                    .map_err(|e| ClientError::Protocol(format!("malformed server frame: {e}")));
                self.partial.clear();
                parsed
            }
            Ok(false) => Ok(None),
            Err(FrameError::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Err(ClientError::Timeout)
            }
            Err(FrameError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(None),
            Err(FrameError::Truncated) => Ok(None),
            Err(e) => Err(ClientError::Protocol(e.to_string())),
        }
    }
}
