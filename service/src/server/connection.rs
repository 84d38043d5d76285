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
//!   one writer, so a frame is never interleaved with another;
//! - a socket connection that has not said `hello` within
//!   `server.helloTimeoutSeconds`, or that is authenticated, holds no
//!   subscription and sends nothing for `server.idleTimeoutSeconds`, or that
//!   was shed under the connection cap, gets a `limit_reached` error frame
//!   naming the limit and is closed; no connection is dropped without a word.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};

use super::admission::Slot;
use super::frames::read_frame;
use crate::auth::AuthSession;
use lapis_protocol::{ErrorCode, FrameError, Id, Method, Request, Requirement, Response, RpcError};

use super::conn::{Conn, OUTBOX, Outbox};
use super::context::ServerContext;
use super::dispatch;
use super::subscriptions::Subscriptions;

/// Serves one connection until the peer leaves, the frame bound is broken or
/// shutdown is signalled. `session` pre-authenticates (managed mode). No
/// deadlines apply: the caller owns the peer (managed mode's parent).
pub(crate) async fn serve_connection<R, W>(
    ctx: Arc<ServerContext>,
    reader: R,
    writer: W,
    session: Option<AuthSession>,
    number: u64,
    shutdown: watch::Receiver<bool>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    run_connection(ctx, reader, writer, session, number, shutdown, None).await;
}

/// Why a connection is being closed by the server.
fn closing_frame(limit: &str, message: String) -> Response {
    Response::err(
        None,
        RpcError::new(ErrorCode::LimitReached, message).with_data("limit", limit.into()),
    )
}

/// Serves one connection; with a `slot` (socket connections) the hello and
/// idle deadlines apply and the connection may be shed under the cap.
pub(crate) async fn run_connection<R, W>(
    ctx: Arc<ServerContext>,
    reader: R,
    writer: W,
    session: Option<AuthSession>,
    number: u64,
    mut shutdown: watch::Receiver<bool>,
    slot: Option<Arc<Slot>>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let hello_timeout = std::time::Duration::from_secs(ctx.limits.hello_timeout_seconds);
    let idle_timeout = std::time::Duration::from_secs(ctx.limits.idle_timeout_seconds);
    // The hello deadline runs from the connection's start, so frames that
    // are not a successful `hello` do not extend it.
    let hello_by = tokio::time::Instant::now() + hello_timeout;
    let mut counted_as_authenticated = false;
    let (tx, rx) = mpsc::channel::<Vec<u8>>(OUTBOX);
    let writer_task = tokio::spawn(write_loop(writer, rx));
    let mut conn = Conn {
        session,
        outbox: Outbox(tx),
        subscriptions: Subscriptions::default(),
        number,
        mcp: None,
        tools: None,
        peer: None,
        bridge: None,
        slot: slot.clone(),
    };
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    let max = ctx.limits.max_frame_bytes;
    tracing::debug!(conn = number, "connection opened");
    loop {
        // Which deadline the next frame must beat, if any.
        let deadline = match &slot {
            None => None,
            // A bridge (ticket) connection lives as long as its agent
            // session, idle between tool calls; so does a connection that
            // serves tool endpoints.
            Some(_) if conn.bridge.is_some() || conn.tools.is_some() => None,
            Some(_) if conn.session.is_none() => {
                Some((hello_by, hello_timeout, "helloTimeoutSeconds"))
            }
            Some(_) if conn.subscriptions.active() == 0 => Some((
                tokio::time::Instant::now() + idle_timeout,
                idle_timeout,
                "idleTimeoutSeconds",
            )),
            Some(_) => None,
        };
        let expired = async {
            match deadline {
                Some((at, _, _)) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let shed = async {
            match &slot {
                Some(slot) => slot.shed().await,
                None => std::future::pending().await,
            }
        };
        enum Wake {
            Read(Result<bool, FrameError>),
            Stop,
            Expired,
            Shed,
        }
        let wake = tokio::select! {
            r = read_frame(&mut reader, &mut buf, max) => Wake::Read(r),
            _ = shutdown.wait_for(|stop| *stop) => Wake::Stop,
            _ = expired => Wake::Expired,
            _ = shed => Wake::Shed,
        };
        let read = match wake {
            Wake::Read(r) => r,
            Wake::Stop => break,
            Wake::Expired => {
                let (_, after, limit) = deadline.expect("only armed with a deadline");
                tracing::info!(conn = number, limit, "connection deadline passed; closing");
                let what = if limit == "helloTimeoutSeconds" {
                    "no `hello`"
                } else {
                    "no request"
                };
                let message = format!(
                    "{what} within {} s (server.{limit}); closing the connection",
                    after.as_secs()
                );
                conn.outbox.respond(&closing_frame(limit, message)).await;
                break;
            }
            Wake::Shed => {
                tracing::info!(
                    conn = number,
                    "unauthenticated connection shed at the connection cap"
                );
                let message = "the server is at its connection limit (server.maxConnections) and closed this unauthenticated connection";
                conn.outbox
                    .respond(&closing_frame("maxConnections", message.into()))
                    .await;
                break;
            }
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
        if conn.peer.is_some()
            && let Some(answer) = client_answer(&buf)
        {
            // The answer to a request the controller sent this client
            // (`tools.invoke`, `capture.*`): routed, never itself answered.
            let delivered = conn.peer.as_ref().is_some_and(|p| p.deliver(answer));
            if !delivered {
                tracing::debug!(
                    conn = number,
                    "a response matching no pending callback was dropped"
                );
            }
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
        if let Some(slot) = &slot
            && (conn.session.is_some() || conn.bridge.is_some())
            && !counted_as_authenticated
        {
            if !slot.authenticated() {
                break;
            }
            counted_as_authenticated = true;
        }
    }
    conn.subscriptions.stop_all();
    // Revokes the connection's tool endpoints and fails their calls in
    // flight before anything else is written.
    conn.tools = None;
    if let Some(peer) = conn.peer.take() {
        peer.close();
    }
    drop(conn);
    // The writer drains what is queued, then ends when every sender is gone.
    let _ = writer_task.await;
    tracing::debug!(conn = number, "connection closed");
}

/// A frame that is a JSON-RPC response (no `method`, an `id`, a `result`
/// or an `error`): a client answering one of the controller's callbacks.
fn client_answer(frame: &[u8]) -> Option<Response> {
    let value: Value = serde_json::from_slice(frame).ok()?;
    let obj = value.as_object()?;
    if obj.contains_key("method") || !obj.contains_key("id") {
        return None;
    }
    if !(obj.contains_key("result") || obj.contains_key("error")) {
        return None;
    }
    serde_json::from_value(value).ok()
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
        Requirement::Ticket => dispatch::bridge(ctx, conn, method, request).await,
        Requirement::Scope(scope) => {
            let Some(current) = conn.session.as_ref() else {
                let message = if conn.bridge.is_some() {
                    "a tool ticket authenticates `tools.list` and `tools.call` only"
                } else {
                    "say `hello` first"
                };
                return Err(RpcError::new(ErrorCode::Unauthenticated, message));
            };
            let session = match ctx.authority.check(&current.id) {
                Ok(s) => s,
                Err(e) => {
                    // Revoked or expired under us: the connection loses it.
                    conn.session = None;
                    conn.subscriptions.stop_all();
                    conn.mcp = None;
                    conn.tools = None;
                    return Err(e);
                }
            };
            if !session.has(scope) {
                if let Some(condition) = session.read_only
                    && ctx.authority.token_grants(&session, scope)
                {
                    return Err(crate::auth::read_only_refusal(condition, scope));
                }
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
