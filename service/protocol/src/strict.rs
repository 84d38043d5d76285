//! JSON without duplicate object keys.
//!
//! `serde_json` keeps the last of two equal keys, so `{"token":"a","token":"b"}`
//! means different things to different parsers. Every frame and the
//! configuration file are parsed through [`StrictValue`], which refuses a
//! repeated key anywhere in the document. The error never quotes the key (a
//! configuration key can be a secret typed in the wrong place).

use std::fmt;

use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The message of the error a repeated key produces; stable so callers can
/// classify it.
pub const DUPLICATE_KEY: &str = "duplicate key in a JSON object";

/// A JSON value parsed with duplicate keys refused.
#[derive(Debug, Clone, PartialEq)]
pub struct StrictValue(pub Value);

impl StrictValue {
    /// Parses `bytes` as one JSON document, refusing duplicate keys.
    pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
        serde_json::from_slice::<StrictValue>(bytes).map(|v| v.0)
    }
}

/// Whether `e` is the duplicate-key refusal.
pub fn is_duplicate_key(e: &serde_json::Error) -> bool {
    e.to_string().starts_with(DUPLICATE_KEY)
}

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        StrictValue::deserialize(d).map(|v| v.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(A::Error::custom(DUPLICATE_KEY));
            }
            let StrictValue(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_serde_json_parses() {
        let text = br#"{"a":[1,-2,3.5,"x",null,true,{"b":{}}],"c":{"d":"e"}}"#;
        let strict = StrictValue::from_slice(text).unwrap();
        let plain: Value = serde_json::from_slice(text).unwrap();
        assert_eq!(strict, plain);
    }

    #[test]
    fn refuses_duplicate_keys_at_any_depth_without_quoting_them() {
        for text in [
            &br#"{"token":"a","token":"b"}"#[..],
            br#"{"x":{"secretkey":1,"secretkey":2}}"#,
            br#"[{"k":1},{"k":1,"k":2}]"#,
        ] {
            let e = StrictValue::from_slice(text).unwrap_err();
            assert!(is_duplicate_key(&e), "{e}");
            assert!(!e.to_string().contains("secretkey"));
        }
        // Equal keys in different objects are fine.
        assert!(StrictValue::from_slice(br#"{"a":{"k":1},"b":{"k":1}}"#).is_ok());
    }
}
