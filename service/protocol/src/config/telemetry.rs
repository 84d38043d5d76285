//! `telemetry`: OpenTelemetry traces and metrics of turns, exported over
//! OTLP/HTTP (protobuf) to a collector. Off unless the section is present.
//!
//! What must stay true: what is exported is content-free — ids, the
//! workspace id, provider and application names, states, outcome codes,
//! counts, durations and journal `seq`s — never a prompt, a reply, a tool
//! argument or result, an agent-written title or a secret.

use serde::{Deserialize, Serialize};

/// The `telemetry` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`; traces
    /// go to `/v1/traces`, metrics to `/v1/metrics`) [default: the
    /// standard `OTEL_EXPORTER_OTLP_ENDPOINT` /
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` variables, else
    /// `http://localhost:4318`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// `service.name` [default: `OTEL_SERVICE_NAME`, else
    /// `lapis-ai-controller`]; `OTEL_RESOURCE_ATTRIBUTES` adds the rest
    /// (`host.name=box-3,deployment.environment=lab`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
}

impl TelemetryConfig {
    /// The shape rules; the error is (field, reason).
    pub(super) fn check(&self) -> Result<(), (&'static str, String)> {
        if let Some(url) = &self.endpoint {
            super::webhook::url_host(url).map_err(|e| ("telemetry.endpoint", e.to_owned()))?;
        }
        if let Some(name) = &self.service_name
            && (name.is_empty() || name.len() > 128 || name.chars().any(|c| c.is_control()))
        {
            return Err((
                "telemetry.serviceName",
                "must be 1-128 characters without control characters".into(),
            ));
        }
        Ok(())
    }

    /// The endpoint of one signal (`v1/traces`, `v1/metrics`), when the
    /// config names one.
    pub fn signal_endpoint(&self, path: &str) -> Option<String> {
        self.endpoint
            .as_ref()
            .map(|base| format!("{}/{path}", base.trim_end_matches('/')))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn telemetry_shape_rules() {
        let ok: TelemetryConfig =
            serde_json::from_value(json!({"endpoint": "http://collector.lan:4318/"})).unwrap();
        assert_eq!(ok.check(), Ok(()));
        assert_eq!(
            ok.signal_endpoint("v1/traces").as_deref(),
            Some("http://collector.lan:4318/v1/traces")
        );
        let none = TelemetryConfig::default();
        assert_eq!(
            (none.check(), none.signal_endpoint("v1/traces")),
            (Ok(()), None)
        );
        for bad in [
            json!({"endpoint": "collector:4318"}),
            json!({"endpoint": "https://u:p@c/"}),
            json!({"serviceName": ""}),
        ] {
            let c: TelemetryConfig = serde_json::from_value(bad.clone()).unwrap();
            assert!(c.check().is_err(), "{bad}");
        }
    }
}
