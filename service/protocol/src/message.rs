//! JSON-RPC 2.0 envelopes: requests in, responses and notifications out.
//!
//! Parsing is strict: `jsonrpc` must be `"2.0"`, unknown envelope members are
//! refused, and every request needs an `id` (the controller has no
//! fire-and-forget methods, so a missing id is a mistake worth reporting).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{ErrorCode, RpcError};

/// A request id: a number or a string, echoed verbatim.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Id {
    /// Numeric id.
    Number(i64),
    /// String id.
    String(String),
}

/// A parsed request.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The caller's id.
    pub id: Id,
    /// The method name.
    pub method: String,
    /// Parameters; absent params are `Value::Null`.
    pub params: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequest {
    jsonrpc: String,
    #[serde(default)]
    id: Option<Value>,
    method: String,
    #[serde(default)]
    params: Option<Value>,
}

/// Why a frame is not a request, with the id to answer to when one could be
/// recovered (`None` answers with `"id": null`).
#[derive(Debug, Clone, PartialEq)]
pub struct BadRequest {
    /// The id, when the frame had a usable one.
    pub id: Option<Id>,
    /// The error to send back.
    pub error: RpcError,
}

impl Request {
    /// This request as a frame: the client's side of [`Request::parse`].
    pub fn to_frame(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct Wire<'a> {
            jsonrpc: &'static str,
            id: &'a Id,
            method: &'a str,
            params: &'a Value,
        }
        crate::frame::encode(&Wire {
            jsonrpc: "2.0",
            id: &self.id,
            method: &self.method,
            params: &self.params,
        })
    }

    /// Parses one frame. Never panics, whatever the bytes.
    pub fn parse(frame: &[u8]) -> Result<Request, BadRequest> {
        let value: Value = crate::StrictValue::from_slice(frame).map_err(|e| BadRequest {
            id: None,
            error: if crate::is_duplicate_key(&e) {
                RpcError::new(ErrorCode::InvalidRequest, crate::DUPLICATE_KEY)
            } else {
                RpcError::parse_error()
            },
        })?;
        let id = value
            .get("id")
            .and_then(|v| serde_json::from_value::<Id>(v.clone()).ok());
        let invalid = |msg: String| BadRequest {
            id: id.clone(),
            error: RpcError::new(ErrorCode::InvalidRequest, msg),
        };
        if !value.is_object() {
            return Err(invalid("a request must be a JSON object".into()));
        }
        let raw: RawRequest = serde_json::from_value(value)
            .map_err(|e| invalid(format!("not a JSON-RPC 2.0 request: {e}")))?;
        if raw.jsonrpc != "2.0" {
            return Err(invalid("`jsonrpc` must be \"2.0\"".into()));
        }
        let Some(raw_id) = raw.id else {
            return Err(invalid("a request must carry an `id`".into()));
        };
        let id = serde_json::from_value::<Id>(raw_id)
            .map_err(|_| invalid("`id` must be an integer or a string".into()))?;
        match &raw.params {
            None | Some(Value::Object(_)) | Some(Value::Null) => {}
            Some(_) => {
                return Err(BadRequest {
                    id: Some(id),
                    error: RpcError::invalid_params("`params` must be an object"),
                });
            }
        }
        Ok(Request {
            id,
            method: raw.method,
            params: raw.params.unwrap_or(Value::Null),
        })
    }

    /// Decodes `params` into a method's parameter type (which refuses unknown
    /// fields). Absent params decode as `{}`.
    pub fn params<T: DeserializeOwned>(&self) -> Result<T, RpcError> {
        let params = match &self.params {
            Value::Null => Value::Object(Default::default()),
            other => other.clone(),
        };
        serde_json::from_value(params).map_err(RpcError::invalid_params)
    }
}

/// An outgoing response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// The request's id, or null when it could not be read.
    pub id: Option<Id>,
    /// Success value (exclusive with `error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Failure (exclusive with `result`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}

impl Response {
    /// A success.
    pub fn ok(id: Id, result: Value) -> Response {
        Response {
            jsonrpc: "2.0".into(),
            id: Some(id),
            result: Some(result),
            error: None,
        }
    }

    /// A failure.
    pub fn err(id: Option<Id>, error: RpcError) -> Response {
        Response {
            jsonrpc: "2.0".into(),
            id,
            result: None,
            error: Some(error),
        }
    }
}

/// An outgoing notification (no id): journal events, `lagged`, `ready`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// Notification name.
    pub method: String,
    /// Payload.
    pub params: Value,
}

impl Notification {
    /// A notification.
    pub fn new(method: impl Into<String>, params: Value) -> Notification {
        Notification {
            jsonrpc: "2.0".into(),
            method: method.into(),
            params,
        }
    }
}

/// A [`Notification`] as it is sent, from borrowed parts: the same frame
/// without its `params` built as a `Value` first (a journal event's
/// payload deep-copied once per subscriber).
#[derive(Debug, Serialize)]
pub struct NotificationOf<'a, P: Serialize> {
    /// Always `"2.0"`.
    pub jsonrpc: &'static str,
    /// Notification name.
    pub method: &'a str,
    /// Payload.
    pub params: &'a P,
}

impl<'a, P: Serialize> NotificationOf<'a, P> {
    /// A notification of `method` carrying `params`.
    pub fn new(method: &'a str, params: &'a P) -> Self {
        NotificationOf {
            jsonrpc: "2.0",
            method,
            params,
        }
    }
}

/// Anything the server sends, as the client reads it.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    /// A response to one of the client's requests.
    Response(Response),
    /// A server notification.
    Notification(Notification),
    /// A request the controller sends the client (`tools.invoke`,
    /// `capture.begin`, `capture.finish`): the client answers it.
    Request(Request),
}

impl Incoming {
    /// Parses one server frame.
    pub fn parse(frame: &[u8]) -> Result<Incoming, serde_json::Error> {
        let value: Value = crate::StrictValue::from_slice(frame)?;
        if value.get("method").is_some() && value.get("id").is_none() {
            Ok(Incoming::Notification(serde_json::from_value(value)?))
        } else if let (Some(method), Some(id)) = (value.get("method"), value.get("id")) {
            use serde::de::Error;
            let method = method
                .as_str()
                .ok_or_else(|| serde_json::Error::custom("`method` must be a string"))?
                .to_owned();
            let id: Id = serde_json::from_value(id.clone())?;
            let params = value.get("params").cloned().unwrap_or(Value::Null);
            Ok(Incoming::Request(Request { id, method, params }))
        } else {
            Ok(Incoming::Response(serde_json::from_value(value)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(b: BadRequest) -> Option<ErrorCode> {
        b.error.error_code()
    }

    #[test]
    fn a_borrowed_notification_reads_back_as_the_notification_it_stands_for() {
        #[derive(Serialize)]
        struct Params<'a> {
            subscription: &'a str,
            event: Value,
        }
        let params = Params {
            subscription: "sub_1",
            event: serde_json::json!({"seq": 3, "payload": {"text": "a\"b"}}),
        };
        let frame = crate::encode(&NotificationOf::new("journal.event", &params));
        let read: Notification = serde_json::from_slice(&frame).unwrap();
        let owned = Notification::new("journal.event", serde_json::to_value(&params).unwrap());
        assert_eq!(read, owned);
    }

    #[test]
    fn parses_a_request() {
        let r = Request::parse(br#"{"jsonrpc":"2.0","id":7,"method":"status"}"#).unwrap();
        assert_eq!(r.id, Id::Number(7));
        assert_eq!(r.method, "status");
        assert_eq!(r.params, Value::Null);
    }

    #[test]
    fn refuses_unknown_envelope_fields_with_the_id() {
        let b =
            Request::parse(br#"{"jsonrpc":"2.0","id":"a","method":"status","x":1}"#).unwrap_err();
        assert_eq!(b.id, Some(Id::String("a".into())));
        assert_eq!(code(b), Some(ErrorCode::InvalidRequest));
    }

    #[test]
    fn refuses_duplicate_keys_in_the_envelope_and_in_params() {
        for frame in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"status","method":"hello"}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"token":"a","token":"b"}}"#,
        ] {
            let b = Request::parse(frame).unwrap_err();
            assert_eq!(code(b), Some(ErrorCode::InvalidRequest));
        }
    }

    #[test]
    fn refuses_garbage_missing_id_and_wrong_version() {
        for frame in [
            &b"\xff\xfe garbage"[..],
            br#"[1,2]"#,
            br#"{"jsonrpc":"2.0","method":"status"}"#,
            br#"{"jsonrpc":"1.0","id":1,"method":"status"}"#,
            br#"{"jsonrpc":"2.0","id":1.5,"method":"status"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"status","params":[1]}"#,
        ] {
            let b = Request::parse(frame).unwrap_err();
            assert_eq!(code(b), Some(ErrorCode::InvalidRequest));
        }
    }

    #[test]
    fn typed_params_refuse_unknown_fields_and_wrong_types() {
        #[derive(Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct P {
            n: u32,
        }
        let r =
            Request::parse(br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"n":"x"}}"#).unwrap();
        assert!(r.params::<P>().is_err());
        let r = Request::parse(
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"n":1,"extra":true}}"#,
        )
        .unwrap();
        assert!(r.params::<P>().is_err());
    }

    #[test]
    fn incoming_distinguishes_notifications() {
        let n =
            Incoming::parse(br#"{"jsonrpc":"2.0","method":"journal.event","params":{}}"#).unwrap();
        assert!(matches!(n, Incoming::Notification(_)));
        let r = Incoming::parse(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap();
        assert!(matches!(r, Incoming::Response(_)));
        let q = Incoming::parse(
            br#"{"jsonrpc":"2.0","id":"lapis-1","method":"tools.invoke","params":{}}"#,
        )
        .unwrap();
        assert!(matches!(q, Incoming::Request(r) if r.method == "tools.invoke"));
    }
}
