//! Managed mode: the parent process talks to the controller over its
//! stdin/stdout, and the agents' MCP bridge reaches it over a private
//! socket in the controller home ([`BRIDGE_SOCKET_FILE`]).
//!
//! What must stay true: the credential arrives only as the first stdin line
//! (never argv or environment); exactly one readiness frame answers it, and it
//! carries no credential; a startup failure frame names a code and a reason,
//! never the credential; nothing waits for stdin to be closed (the first line
//! is read with the bounded frame reader, not to end of file). The bridge
//! socket is bound before readiness (the first turn's agent finds it), is
//! served by `serve`'s own listener for tool tickets only ([`Serves::Bridge`]),
//! stops when the stdin/stdout protocol ends and is removed with it.
//!
//! [`BRIDGE_SOCKET_FILE`]: lapis_protocol::home::BRIDGE_SOCKET_FILE

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::watch;

use lapis_protocol::{
    ErrorCode, HelloParams, Notification, READY, Ready, RpcError, STARTUP_FAILED, encode,
};

use super::frames::read_frame;

use super::admission::Serves;
use super::connection::serve_connection;
use super::context::ServerContext;
use super::dispatch::authenticate;
use super::listener::{Listener, SocketFile};

/// How long the parent has to send the startup line.
pub(crate) const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Why managed mode did not start.
#[derive(Debug, thiserror::Error)]
#[error("managed-mode startup failed: {message} ({code})")]
pub struct StartupError {
    /// Stable code.
    pub(crate) code: ErrorCode,
    /// Reason, without the credential.
    pub(crate) message: String,
}

impl From<RpcError> for StartupError {
    fn from(e: RpcError) -> Self {
        StartupError {
            code: e.error_code().unwrap_or(ErrorCode::Internal),
            message: e.message,
        }
    }
}

/// Runs managed mode with its bridge: `bridge` (bound at `socket`) serves
/// the agents' MCP bridge connections while [`serve_stdio`] runs, then is
/// drained and its socket file removed.
pub(crate) async fn serve_managed<R, W>(
    ctx: Arc<ServerContext>,
    reader: R,
    writer: W,
    bridge: tokio::net::UnixListener,
    socket: SocketFile,
    shutdown: watch::Receiver<bool>,
) -> Result<(), StartupError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (stop_bridge, bridge_stop) = watch::channel(false);
    tracing::info!(socket = %socket.0.display(), "mcp bridge socket listening");
    let bridge = tokio::spawn(
        Listener {
            listener: bridge,
            max_connections: ctx.limits.max_connections,
            ctx: ctx.clone(),
            serves: Serves::Bridge,
            shutdown: bridge_stop,
            drain: super::DRAIN,
        }
        .run(),
    );
    let result = serve_stdio(ctx, reader, writer, shutdown, STARTUP_TIMEOUT).await;
    let _ = stop_bridge.send(true);
    let _ = bridge.await;
    drop(socket);
    result
}

/// Runs managed mode's protocol to completion: startup line, readiness,
/// then the protocol until stdin ends or shutdown is signalled.
pub(crate) async fn serve_stdio<R, W>(
    ctx: Arc<ServerContext>,
    reader: R,
    mut writer: W,
    shutdown: watch::Receiver<bool>,
    startup_timeout: Duration,
) -> Result<(), StartupError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut reader = BufReader::new(reader);
    let startup = tokio::time::timeout(startup_timeout, startup(&ctx, &mut reader)).await;
    let outcome = match startup {
        Ok(r) => r,
        Err(_) => Err(StartupError {
            code: ErrorCode::InvalidRequest,
            message: format!("no startup line within {} s", startup_timeout.as_secs()),
        }),
    };
    let session = match outcome {
        Ok(ready) => {
            let frame = encode(&Notification::new(
                READY,
                serde_json::to_value(&ready.0).unwrap_or_default(),
            ));
            write(&mut writer, &frame).await?;
            tracing::info!(session = %ready.1.id, "managed mode ready");
            ready.1
        }
        Err(e) => {
            let frame = startup_failed_frame(e.code.as_str(), &e.message);
            let _ = write(&mut writer, &frame).await;
            return Err(e);
        }
    };
    serve_connection(ctx, reader, writer, Some(session), 0, shutdown).await;
    Ok(())
}

/// The one `startupFailed` frame managed mode sends when it cannot start,
/// whatever the cause (configuration, instance lock, store, credential):
/// a stable code and a reason, never the credential.
pub(crate) fn startup_failed_frame(code: &str, message: &str) -> Vec<u8> {
    encode(&Notification::new(
        STARTUP_FAILED,
        json!({ "code": code, "message": message }),
    ))
}

/// Writes a `startupFailed` frame to this process's stdout (managed mode's
/// channel), for failures before the protocol loop exists.
pub fn report_startup_failure(code: &str, message: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(&startup_failed_frame(code, message));
    let _ = out.flush();
}

async fn write<W: AsyncWrite + Unpin>(writer: &mut W, frame: &[u8]) -> Result<(), StartupError> {
    let io = |_| StartupError {
        code: ErrorCode::Internal,
        message: "cannot write to stdout".into(),
    };
    writer.write_all(frame).await.map_err(io)?;
    writer.flush().await.map_err(io)
}

async fn startup<R: AsyncRead + Unpin>(
    ctx: &ServerContext,
    reader: &mut BufReader<R>,
) -> Result<(Ready, crate::auth::AuthSession), StartupError> {
    let mut line = Vec::new();
    let got = read_frame(reader, &mut line, ctx.limits.max_frame_bytes)
        .await
        .map_err(|e| StartupError {
            code: ErrorCode::InvalidRequest,
            message: format!("cannot read the startup line: {e}"),
        })?;
    if !got {
        return Err(StartupError {
            code: ErrorCode::InvalidRequest,
            message: "stdin closed before the startup line".into(),
        });
    }
    let params: HelloParams = serde_json::from_slice(&line).map_err(|_| StartupError {
        code: ErrorCode::InvalidRequest,
        message:
            "the startup line must be one JSON object with `protocol`, `token` and `application`"
                .into(),
    })?;
    let result = authenticate(ctx, &params)?;
    let session = ctx.authority.check(&result.session.id)?;
    Ok((
        Ready {
            server: result.server,
            session: result.session,
        },
        session,
    ))
}
