//! Serving the controller's callbacks on a client connection: the typed
//! application side of tool endpoints (`tools.invoke`, `capture.begin`,
//! `capture.finish`), of context ports (`context.prepare`), memory ports
//! (`memory.*`) and transcript stores (`transcript.*`), over one read path.
//!
//! What must stay true: every callback read is answered exactly once, with
//! the handler's result or its error; an unknown callback is answered
//! `invalid_request` rather than left waiting (the controller would only
//! fail it closed at its deadline). The handler runs on the caller's thread:
//! a blocking client serves one callback at a time.

use std::io::Write;
use std::time::Duration;

use crate::callback::{self as cb, Callback};
use crate::context::{CONTEXT_PREPARE, ContextPrepare, ContextPrepared};
use crate::memory::{
    MEMORY_EVIDENCE, MEMORY_SEARCH, MemoryCandidate, MemoryCandidates, MemoryEvidence, MemorySearch,
};
use crate::tools::{CaptureAck, CaptureNotice, ToolInvoke, ToolOutput, callbacks};
use crate::transcript::store::{
    TRANSCRIPT_APPEND, TRANSCRIPT_FETCH, TranscriptAck, TranscriptAppend, TranscriptFetch,
    TranscriptPayloads,
};
use crate::{ErrorCode, Incoming, Request, Response, RpcError, encode};

use super::{Client, ClientError};

/// Why a handler refused a callback: the message goes to the controller,
/// which records the call as failed (never the message itself).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CallbackError(pub String);

/// An application's tool endpoints, as the controller calls them.
///
/// `invoke` of a mutating tool carries [`ToolInvoke::idempotency_key`]: the
/// controller never sends one key twice, and a handler that records what it
/// did per key can prove it. The capture port (`capture_begin` and
/// `capture_finish`, when the endpoint was registered with `capture`)
/// brackets every mutating call: `begin` is acknowledged before the tool
/// runs, `finish` follows its result.
pub trait ToolHandler {
    /// Runs one tool once.
    fn invoke(&mut self, call: &ToolInvoke) -> Result<ToolOutput, CallbackError>;
    /// A mutating call is about to run; returning is the acknowledgement.
    fn capture_begin(&mut self, notice: &CaptureNotice) -> Result<(), CallbackError> {
        let _ = notice;
        Ok(())
    }
    /// A mutating call has its result.
    fn capture_finish(&mut self, notice: &CaptureNotice) -> Result<(), CallbackError> {
        let _ = notice;
        Ok(())
    }
}

/// An application's context ports, as the controller asks them.
///
/// `prepare` runs once per turn of a thread that binds the port, after the
/// turn is claimed and before its agent sees the prompt; it must answer
/// within the port's deadline (`deadlineMs`, 5 s by default) or the turn
/// fails `context_unavailable`. Text over
/// [`ContextPrepare::budget_bytes`] is cut by the controller.
pub trait ContextHandler {
    /// The blocks for one turn.
    fn prepare(&mut self, call: &ContextPrepare) -> Result<ContextPrepared, CallbackError>;
}

/// An application's memory ports, as the controller asks them. Every call
/// carries the controller's [`AccessEnvelope`](crate::memory::AccessEnvelope)
/// (principal, application, thread, workspace): scope what you answer by
/// it; nothing the agent sends can change it.
pub trait MemoryHandler {
    /// Candidates for a query, best first.
    fn search(&mut self, call: &MemorySearch) -> Result<MemoryCandidates, CallbackError>;
    /// Authorize and return one item.
    fn evidence(&mut self, call: &MemoryEvidence) -> Result<MemoryCandidate, CallbackError>;
}

/// An application's transcript stores, as the controller calls them (for
/// the `metadata-only` threads that bind one with `transcriptStore`).
///
/// `append` must return only once the event is durable on your side: a
/// turn's prompt is appended before its agent sees it, and an error or an
/// answer later than the store's deadline (`deadlineMs`, 120 s by default)
/// fails the turn `transcript_store_failed`. Keep what
/// [`TranscriptAppend::event`] holds as it is (or at least its payload):
/// `fetch` answers it back after a restart, and the controller shows only a
/// payload whose canonical hash ([`crate::transcript::event_hash`]) is the
/// one it recorded. [`crate::transcript::assert_transcript`] checks what you
/// stored against the journal.
pub trait TranscriptHandler {
    /// Keep one content event.
    fn append(&mut self, call: &TranscriptAppend) -> Result<(), CallbackError>;
    /// The stored payloads of the events asked for (leave out what you
    /// do not have).
    fn fetch(&mut self, call: &TranscriptFetch) -> Result<TranscriptPayloads, CallbackError>;
}

/// Answers `request` as the callback `C`: its params decoded as
/// `C::Params`, the handler's answer encoded as `C::Result`, a refusal
/// answered with `C::REFUSED`, an answer that does not encode as
/// `internal`, params that do not decode with the request's own error.
fn handle<C: Callback>(
    request: &Request,
    handler: impl FnOnce(&C::Params) -> Result<C::Result, CallbackError>,
) -> Response {
    let id = request.id.clone();
    let params = match request.params::<C::Params>() {
        Ok(p) => p,
        Err(e) => return Response::err(Some(id), e),
    };
    match handler(&params).map(serde_json::to_value) {
        Ok(Ok(v)) => Response::ok(id, v),
        Ok(Err(e)) => Response::err(
            Some(id),
            RpcError::new(ErrorCode::Internal, format!("encoding the answer: {e}")),
        ),
        Err(e) => Response::err(Some(id), RpcError::new(C::REFUSED, e.0)),
    }
}

/// The answer to a callback no handler of this kind serves.
fn not_found(request: &Request) -> Response {
    Response::err(
        Some(request.id.clone()),
        RpcError::method_not_found(&request.method),
    )
}

pub(super) fn answer_transcript(
    request: &Request,
    handler: &mut (impl TranscriptHandler + ?Sized),
) -> Response {
    match request.method.as_str() {
        TRANSCRIPT_APPEND => handle::<cb::TranscriptAppend>(request, |c| {
            handler.append(c).map(|()| TranscriptAck {})
        }),
        TRANSCRIPT_FETCH => handle::<cb::TranscriptFetch>(request, |c| handler.fetch(c)),
        _ => not_found(request),
    }
}

pub(super) fn answer_memory(
    request: &Request,
    handler: &mut (impl MemoryHandler + ?Sized),
) -> Response {
    match request.method.as_str() {
        MEMORY_SEARCH => handle::<cb::MemorySearch>(request, |c| handler.search(c)),
        MEMORY_EVIDENCE => handle::<cb::MemoryEvidence>(request, |c| handler.evidence(c)),
        _ => not_found(request),
    }
}

pub(super) fn answer_context(
    request: &Request,
    handler: &mut (impl ContextHandler + ?Sized),
) -> Response {
    match request.method.as_str() {
        CONTEXT_PREPARE => handle::<cb::ContextPrepare>(request, |c| handler.prepare(c)),
        _ => not_found(request),
    }
}

pub(super) fn answer(request: &Request, handler: &mut (impl ToolHandler + ?Sized)) -> Response {
    match request.method.as_str() {
        callbacks::TOOLS_INVOKE => handle::<cb::ToolsInvoke>(request, |c| handler.invoke(c)),
        callbacks::CAPTURE_BEGIN => handle::<cb::CaptureBegin>(request, |n| {
            handler.capture_begin(n).map(|()| CaptureAck {})
        }),
        callbacks::CAPTURE_FINISH => handle::<cb::CaptureFinish>(request, |n| {
            handler.capture_finish(n).map(|()| CaptureAck {})
        }),
        _ => not_found(request),
    }
}

impl Client {
    /// Serves one controller callback with `handler`: one queued while a
    /// request waited, else one read within `timeout` (`None`: wait
    /// indefinitely). `Ok(false)` when none came in time; notifications
    /// read meanwhile are queued for [`Client::next_notification`].
    pub fn serve_tools(
        &mut self,
        handler: &mut impl ToolHandler,
        timeout: Option<Duration>,
    ) -> Result<bool, ClientError> {
        let Some(request) = self.next_callback(timeout)? else {
            return Ok(false);
        };
        self.reply(&answer(&request, handler))
    }

    pub(super) fn reply(&mut self, response: &Response) -> Result<bool, ClientError> {
        self.stream
            .write_all(&encode(response))
            .map_err(|_| ClientError::Disconnected {
                request_sent: false,
            })?;
        Ok(true)
    }

    /// One callback queued while a request waited, else one read within
    /// `timeout`; `None` when none came in time.
    pub(super) fn next_callback(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Option<Request>, ClientError> {
        let request = match self.callbacks.pop_front() {
            Some(r) => r,
            None => {
                let deadline = timeout.map(|t| std::time::Instant::now() + t);
                loop {
                    let left =
                        deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
                    if left.is_some_and(|l| l.is_zero()) {
                        return Ok(None);
                    }
                    match self.read_incoming(left) {
                        Ok(Some(Incoming::Request(r))) => break r,
                        Ok(Some(Incoming::Notification(n))) => self.queued.push_back(n),
                        Ok(Some(Incoming::Response(_))) => {
                            return Err(ClientError::Protocol("unsolicited response".into()));
                        }
                        Ok(None) => {
                            return Err(ClientError::Disconnected {
                                request_sent: false,
                            });
                        }
                        Err(ClientError::Timeout) => return Ok(None),
                        Err(e) => return Err(e),
                    }
                }
            }
        };
        Ok(Some(request))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use serde_json::json;

    use super::*;
    use crate::Id;

    struct Echo(Vec<String>);

    impl ToolHandler for Echo {
        fn invoke(&mut self, call: &ToolInvoke) -> Result<ToolOutput, CallbackError> {
            self.0.push(format!("invoke {}", call.idempotency_key));
            if call.tool == "fail" {
                return Err(CallbackError("no".into()));
            }
            Ok(ToolOutput {
                text: call.arguments.to_string(),
                ..Default::default()
            })
        }
        fn capture_begin(&mut self, n: &CaptureNotice) -> Result<(), CallbackError> {
            self.0.push(format!("begin {}", n.idempotency_key));
            Ok(())
        }
    }

    /// A callback as the controller sends it.
    pub(in crate::client) fn req(method: &str, params: serde_json::Value) -> Request {
        Request {
            id: Id::String("lapis-1".into()),
            method: method.into(),
            params,
        }
    }

    #[test]
    fn callbacks_are_answered_typed_and_unknown_ones_refused() {
        let mut h = Echo(Vec::new());
        let invoke = json!({"endpoint":"crm","tool":"find","arguments":{"q":1},
            "idempotencyKey":"turn_1:call_1","threadId":"thr_1","turnId":"turn_1","callId":"call_1","mutating":false});
        let r = answer(&req(callbacks::TOOLS_INVOKE, invoke.clone()), &mut h);
        assert_eq!(r.result.unwrap()["text"], "{\"q\":1}");
        let mut failing = invoke;
        failing["tool"] = "fail".into();
        let r = answer(&req(callbacks::TOOLS_INVOKE, failing), &mut h);
        assert_eq!(
            r.error.unwrap().error_code(),
            Some(ErrorCode::ToolCallFailed)
        );
        let begin = json!({"endpoint":"crm","tool":"find","idempotencyKey":"k",
            "threadId":"t","turnId":"u","callId":"c"});
        let r = answer(&req(callbacks::CAPTURE_BEGIN, begin), &mut h);
        assert_eq!(r.result.unwrap(), json!({}));
        let r = answer(&req("memory.search", json!({})), &mut h);
        assert!(r.error.is_some());
        assert_eq!(
            h.0,
            ["invoke turn_1:call_1", "invoke turn_1:call_1", "begin k"]
        );
    }

    struct Vault(Vec<u64>);

    impl TranscriptHandler for Vault {
        fn append(&mut self, call: &TranscriptAppend) -> Result<(), CallbackError> {
            if call.event.thread_seq == 0 {
                return Err(CallbackError("disk full".into()));
            }
            self.0.push(call.event.thread_seq);
            Ok(())
        }
        fn fetch(&mut self, call: &TranscriptFetch) -> Result<TranscriptPayloads, CallbackError> {
            Ok(TranscriptPayloads {
                payloads: call
                    .thread_seqs
                    .iter()
                    .filter(|n| self.0.contains(n))
                    .map(|n| crate::transcript::store::TranscriptStored {
                        thread_seq: *n,
                        payload: json!({"text": "kept"}),
                    })
                    .collect(),
            })
        }
    }

    #[test]
    fn transcript_callbacks_are_answered_and_a_refusal_is_transcript_store_failed() {
        let mut v = Vault(Vec::new());
        let envelope = json!({"principal": "owner", "application": "app",
            "threadId": "thr_1", "workspaceId": "proj"});
        let append = |seq: u64| {
            json!({"port": "vault", "envelope": envelope, "hash": "ab",
                "event": {"seq": 9, "threadId": "thr_1", "threadSeq": seq, "turnId": "turn_1",
                "kind": "user_message", "at": "2026-12-02T01:00:00Z",
                "payload": {"text": "hi"}, "payloadUnavailable": false}})
        };
        let r = answer_transcript(&req(TRANSCRIPT_APPEND, append(3)), &mut v);
        assert_eq!(r.result.unwrap(), json!({}));
        let r = answer_transcript(&req(TRANSCRIPT_APPEND, append(0)), &mut v);
        assert_eq!(
            r.error.unwrap().error_code(),
            Some(ErrorCode::TranscriptStoreFailed)
        );
        let fetch = json!({"port": "vault", "envelope": envelope, "threadSeqs": [3, 4]});
        let r = answer_transcript(&req(TRANSCRIPT_FETCH, fetch), &mut v);
        assert_eq!(
            r.result.unwrap(),
            json!({"payloads": [{"threadSeq": 3, "payload": {"text": "kept"}}]})
        );
        let r = answer_transcript(&req("tools.invoke", json!({})), &mut v);
        assert!(r.error.is_some());
        assert_eq!(v.0, [3]);
    }
}
