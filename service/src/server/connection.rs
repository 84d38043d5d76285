//! One connection: frames in, responses and notifications out.
//!
//! The same loop serves a Unix socket connection and managed mode's
//! stdin/stdout. What must stay true:
//! - nothing but `hello` runs before the connection is authenticated;
//! - the session is re-checked before every request, so a revocation or an
//!   expiry takes effect on connections already open;
//! - a frame over the bound is answered with an error and the connection is
//!   closed (the rest of that line is never read);
//! - malformed frames are answered and the connection stays usable;
//! - requests are answered in order; notifications (journal events) share the
//!   one writer, so a frame is never interleaved with another.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};

use super::frames::read_frame;
use crate::auth::AuthSession;
use lapis_protocol::{ErrorCode, FrameError, Id, Method, Request, Requirement, Response, RpcError};

use super::conn::{Conn, OUTBOX, Outbox};
use super::context::ServerContext;
use super::dispatch;
use super::subscriptions::Subscriptions;

/// Serves one connection until the peer leaves, the frame bound is broken or
/// shutdown is signalled. `session` pre-authenticates (managed mode).
pub async fn serve_connection<R, W>(
    ctx: Arc<ServerContext>,
    reader: R,
    writer: W,
    session: Option<AuthSession>,
    number: u64,
    mut shutdown: watch::Receiver<bool>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<Vec<u8>>(OUTBOX);
    let writer_task = tokio::spawn(write_loop(writer, rx));
    let mut conn = Conn {
        session,
        outbox: Outbox(tx),
        subscriptions: Subscriptions::default(),
        number,
    };
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    let max = ctx.limits.max_frame_bytes;
    tracing::debug!(conn = number, "connection opened");
    loop {
        let read = tokio::select! {
            r = read_frame(&mut reader, &mut buf, max) => r,
            _ = shutdown.wait_for(|stop| *stop) => break,
        };
        match read {
            Ok(true) => {}
            Ok(false) => break,
            Err(FrameError::TooLong { max }) => {
                tracing::warn!(conn = number, max, "frame over the bound; closing");
                let err = RpcError::new(
                    ErrorCode::InvalidRequest,
                    format!("frame exceeds the {max}-byte limit; closing the connection"),
                );
                conn.outbox.respond(&Response::err(None, err)).await;
                break;
            }
            Err(e) => {
                tracing::debug!(conn = number, error = %e, "connection read ended");
                break;
            }
        }
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let response = match Request::parse(&buf) {
            Ok(request) => handle(&ctx, &mut conn, request).await,
            Err(bad) => {
                tracing::debug!(conn = number, code = ?bad.error.error_code(), "malformed frame");
                Response::err(bad.id, bad.error)
            }
        };
        if !conn.outbox.respond(&response).await {
            break;
        }
    }
    conn.subscriptions.stop_all();
    drop(conn);
    // The writer drains what is queued, then ends when every sender is gone.
    let _ = writer_task.await;
    tracing::debug!(conn = number, "connection closed");
}

async fn write_loop<W: AsyncWrite + Unpin>(mut writer: W, mut rx: mpsc::Receiver<Vec<u8>>) {
    while let Some(frame) = rx.recv().await {
        if writer.write_all(&frame).await.is_err() {
            break;
        }
        // Flush only when nothing else is queued, so bursts share a write.
        if rx.is_empty() && writer.flush().await.is_err() {
            break;
        }
    }
    let _ = writer.flush().await;
    let _ = writer.shutdown().await;
}

/// Authenticates, authorizes and runs one request.
async fn handle(ctx: &Arc<ServerContext>, conn: &mut Conn, request: Request) -> Response {
    let started = Instant::now();
    let id = request.id.clone();
    let result = run(ctx, conn, &request).await;
    let code = result.as_ref().err().and_then(RpcError::error_code);
    // Per request, so debug: the service log at `info` stays readable.
    tracing::debug!(
        conn = conn.number,
        method = %bounded(&request.method),
        ok = result.is_ok(),
        code = code.map(|c| c.as_str()).unwrap_or(""),
        micros = started.elapsed().as_micros() as u64,
        "request"
    );
    respond(id, result)
}

fn respond(id: Id, result: Result<Value, RpcError>) -> Response {
    match result {
        Ok(v) => Response::ok(id, v),
        Err(e) => Response::err(Some(id), e),
    }
}

/// A method name as logged: caller-chosen, so bounded and printable.
fn bounded(s: &str) -> String {
    s.chars()
        .take(64)
        .map(|c| if c.is_ascii_graphic() { c } else { '?' })
        .collect()
}

async fn run(
    ctx: &Arc<ServerContext>,
    conn: &mut Conn,
    request: &Request,
) -> Result<Value, RpcError> {
    let method = Method::parse(&request.method)
        .ok_or_else(|| RpcError::method_not_found(&request.method))?;
    match method.requirement() {
        Requirement::None => dispatch::hello(ctx, conn, request).await,
        Requirement::Scope(scope) => {
            let Some(current) = conn.session.as_ref() else {
                return Err(RpcError::new(
                    ErrorCode::Unauthenticated,
                    "say `hello` first",
                ));
            };
            let session = match ctx.authority.check(&current.id) {
                Ok(s) => s,
                Err(e) => {
                    // Revoked or expired under us: the connection loses it.
                    conn.session = None;
                    conn.subscriptions.stop_all();
                    return Err(e);
                }
            };
            if !session.has(scope) {
                return Err(RpcError::new(
                    ErrorCode::Forbidden,
                    format!("the session lacks the `{}` scope", scope.as_str()),
                ));
            }
            conn.session = Some(session.clone());
            dispatch::method(ctx, conn, &session, method, request).await
        }
    }
}
