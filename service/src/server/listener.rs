//! The Unix socket server, in the mini-redis shape: one listener, a
//! connection limit, a shutdown signal, a `select!` between accept and
//! shutdown, and a drain.
//!
//! What must stay true: the socket is mode 0600 inside the 0700 controller
//! home; an existing socket file is replaced only by a caller that holds the
//! instance lock (the [`InstanceLockHeld`] witness), and only when nothing
//! answers on it. The same listener serves `serve`'s controller socket and
//! managed mode's bridge socket ([`Serves`]).

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::admission::{Admission, Admit, Serves};
use super::connection::run_connection;
use super::context::ServerContext;
use lapis_protocol::{ErrorCode, Response, RpcError, encode};

/// Proof that the caller holds the controller home's instance lock. Only
/// lock holders may delete a stale socket.
pub trait InstanceLockHeld {}

/// Why the socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// Another process answers on the socket.
    #[error("another controller is answering on {}", path.display())]
    InUse {
        /// The socket path.
        path: PathBuf,
    },
    /// A file that is not a socket sits where the socket goes.
    #[error("{} exists and is not a socket", path.display())]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// Binding or setting permissions failed.
    #[error("cannot listen on {}", path.display())]
    Io {
        /// The socket path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// Binds the socket at `path`, replacing a stale one, and makes it 0600.
pub fn bind(path: &Path, _lock: &dyn InstanceLockHeld) -> Result<UnixListener, ListenError> {
    let io_err = |source| ListenError::Io {
        path: path.to_owned(),
        source,
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            use std::os::unix::fs::FileTypeExt;
            if !meta.file_type().is_socket() {
                return Err(ListenError::NotASocket {
                    path: path.to_owned(),
                });
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(ListenError::InUse {
                    path: path.to_owned(),
                });
            }
            std::fs::remove_file(path).map_err(io_err)?;
            tracing::info!(socket = %path.display(), "replaced a stale socket");
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(e)),
    }
    let listener = UnixListener::bind(path).map_err(io_err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io_err)?;
    Ok(listener)
}

/// A bound socket's file, removed when this drops (after its listener
/// stopped): a stopped controller leaves no socket behind. A killed one
/// does; the next instance-lock holder replaces it ([`bind`]).
#[derive(Debug)]
pub(crate) struct SocketFile(pub(crate) PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Accepts connections until `shutdown` flips to true, then stops accepting,
/// tells every connection to finish and waits at most `drain` for them.
#[derive(Debug)]
pub struct Listener {
    /// The bound socket.
    pub listener: UnixListener,
    /// Most connections served at once (see [`Admission`]): one more is
    /// answered with a `limit_reached` frame, or an unauthenticated one is
    /// shed to make room.
    pub max_connections: usize,
    /// Shared server state.
    pub ctx: Arc<ServerContext>,
    /// Who the socket is for: everyone (`serve`), or managed mode's MCP
    /// bridge only ([`Serves::Bridge`]: tool tickets).
    pub serves: Serves,
    /// Flips to true once to stop.
    pub shutdown: watch::Receiver<bool>,
    /// Longest wait for open connections after shutdown.
    pub drain: Duration,
}

impl Listener {
    /// Runs the accept loop; returns after the drain.
    pub async fn run(mut self) {
        let mut connections = JoinSet::new();
        let mut number: u64 = 0;
        let admission = Admission::new(
            self.max_connections,
            self.ctx.authority.owner_token(),
            self.serves,
        );
        loop {
            let accepted = tokio::select! {
                a = self.listener.accept() => a,
                _ = self.shutdown.wait_for(|s| *s) => break,
            };
            // Reap finished connections so the set does not grow.
            while connections.try_join_next().is_some() {}
            match accepted {
                Ok((stream, _)) => {
                    number += 1;
                    let slot = match admission.admit(number, std::time::Instant::now()) {
                        Admit::Yes(slot) => slot,
                        Admit::Full => {
                            tracing::warn!(
                                limit = self.max_connections,
                                "connection refused at the connection limit"
                            );
                            connections.spawn(refuse(stream, self.max_connections));
                            continue;
                        }
                    };
                    let (r, w) = stream.into_split();
                    let ctx = self.ctx.clone();
                    let shutdown = self.shutdown.clone();
                    connections.spawn(async move {
                        run_connection(ctx, r, w, None, number, shutdown, Some(Arc::new(slot)))
                            .await;
                    });
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        tracing::info!(open = connections.len(), "stopped accepting; draining");
        drop(admission);
        let drained = tokio::time::timeout(self.drain, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!("drain deadline passed; closing remaining connections");
            connections.shutdown().await;
        }
    }
}

/// Answers a connection over the cap with one `limit_reached` frame and
/// closes it; a peer that does not read gets a second at most. What the
/// peer sent meanwhile (its `hello`) is read and dropped for a moment
/// before the close, so its write does not fail and it reads the frame
/// (a client told "connection lost" would think nothing is running).
async fn refuse(mut stream: tokio::net::UnixStream, max: usize) {
    use tokio::io::AsyncReadExt;
    let frame = encode(&Response::err(
        None,
        RpcError::new(
            ErrorCode::LimitReached,
            format!("the server is at its connection limit ({max}, server.maxConnections); try again later"),
        )
        .with_data("limit", "maxConnections".into()),
    ));
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(&frame).await;
        let _ = stream.shutdown().await;
    })
    .await;
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_millis(250), async {
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}
