//! `telemetry`: OpenTelemetry traces and metrics of turns, exported over
//! OTLP/HTTP (protobuf) by the official `opentelemetry` SDK.
//!
//! What must stay true:
//! - it is built from committed journal events, read from the store's
//!   broadcast on its own task ([`spans`]): nothing here is on the
//!   writer's or a turn's path, and a turn never waits for it;
//! - export is batched on the SDK's own threads with bounded queues (2,048
//!   spans); an unreachable collector drops data with at most one warning a
//!   minute ([`Exporting`]) and never grows memory;
//! - what leaves is content-free: ids, workspace ids, provider and
//!   application names, endpoint and tool names, states, outcome codes,
//!   tool-call outcomes, token counts and costs, durations and journal
//!   `seq`s — never a prompt, a reply, a tool argument or result, an
//!   agent-written title, a path or a secret.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use lapis_protocol::config::TelemetryConfig;
use lapis_protocol::params::TelemetryStatus;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;

use crate::engine::Engine;
use crate::store::Store;

mod meters;
mod spans;

/// How long one export request may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The interval of the "collector unreachable" warning.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The running exporters; dropping it flushes and stops them.
pub(crate) struct Telemetry {
    traces: SdkTracerProvider,
    metrics: SdkMeterProvider,
    status: TelemetryStatus,
    /// `lapis.agents.live`, observed from the engine's pool at each export
    /// (kept so its callback lives as long as the exporters).
    _agents: Option<opentelemetry::metrics::ObservableGauge<i64>>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl Telemetry {
    /// Builds the exporters and starts the task that feeds them from
    /// `store`'s committed events; `engine`'s pool is observed for the
    /// live agents.
    pub(crate) fn start(
        config: &TelemetryConfig,
        store: Store,
        engine: Option<Engine>,
    ) -> Result<Telemetry, String> {
        let mut resource = Resource::builder();
        if let Some(name) = &config.service_name {
            resource = resource.with_service_name(name.clone());
        } else if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("lapis-ai-controller");
        }
        let resource = resource
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .build();
        let service_name = resource
            .get(&opentelemetry::Key::new("service.name"))
            .map(|v| v.to_string())
            .unwrap_or_default();
        let traces_url = endpoint(config, "v1/traces", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        let metrics_url = endpoint(config, "v1/metrics", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
        let mut spans = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(Exporting::new("traces"))
            .with_timeout(EXPORT_TIMEOUT);
        if let Some(url) = config.signal_endpoint("v1/traces") {
            spans = spans.with_endpoint(url);
        }
        let spans = spans.build().map_err(|e| format!("traces exporter: {e}"))?;
        let mut metrics = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_http_client(Exporting::new("metrics"))
            .with_timeout(EXPORT_TIMEOUT);
        if let Some(url) = config.signal_endpoint("v1/metrics") {
            metrics = metrics.with_endpoint(url);
        }
        let metrics = metrics
            .build()
            .map_err(|e| format!("metrics exporter: {e}"))?;
        let traces = SdkTracerProvider::builder()
            .with_batch_exporter(spans)
            .with_resource(resource.clone())
            .build();
        let meters = SdkMeterProvider::builder()
            .with_periodic_exporter(metrics)
            .with_resource(resource)
            .build();
        spans::spawn(store, &traces, &meters);
        let agents = engine.map(|engine| agents_gauge(&meters, engine));
        Ok(Telemetry {
            traces,
            metrics: meters,
            status: TelemetryStatus {
                traces: traces_url,
                metrics: metrics_url,
                service_name,
            },
            _agents: agents,
        })
    }

    /// Where the data goes.
    pub(crate) fn status(&self) -> &TelemetryStatus {
        &self.status
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        // The last batch goes out (each bounded by the export timeout).
        let _ = self.traces.shutdown();
        let _ = self.metrics.shutdown();
    }
}

/// `lapis.agents.live`: the pool's agent processes, busy and idle, read
/// when the metrics are exported (the pool is not journaled).
fn agents_gauge(
    meters: &SdkMeterProvider,
    engine: Engine,
) -> opentelemetry::metrics::ObservableGauge<i64> {
    use opentelemetry::metrics::MeterProvider as _;
    meters
        .meter("lapis-ai-controller")
        .i64_observable_gauge("lapis.agents.live")
        .with_description("Agent processes alive, by state (busy: running a turn)")
        .with_callback(move |observer| {
            let agents = engine.status().agents;
            let idle = agents.idle as i64;
            let busy = agents.live as i64 - idle;
            observer.observe(
                busy,
                &[opentelemetry::KeyValue::new("lapis.agent.state", "busy")],
            );
            observer.observe(
                idle,
                &[opentelemetry::KeyValue::new("lapis.agent.state", "idle")],
            );
        })
        .build()
}

/// The URL a signal goes to, as the exporter resolves it (the config,
/// then the standard variables, then the default).
fn endpoint(config: &TelemetryConfig, path: &str, signal_var: &str) -> String {
    if let Some(url) = config.signal_endpoint(path) {
        return url;
    }
    if let Some(url) = std::env::var(signal_var).ok().filter(|v| !v.is_empty()) {
        return url;
    }
    let base = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "http://localhost:4318".into());
    format!("{}/{path}", base.trim_end_matches('/'))
}

/// The exporters' HTTP client: the ureq the webhook and `update` use,
/// with a deadline, and a warning at most once a minute when the
/// collector cannot be reached or refuses (never the payload).
#[derive(Debug)]
struct Exporting {
    signal: &'static str,
    agent: ureq::Agent,
    warned: Mutex<Option<Instant>>,
}

impl Exporting {
    fn new(signal: &'static str) -> Exporting {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(EXPORT_TIMEOUT))
            .http_status_as_error(false)
            .max_redirects(0)
            .build()
            .new_agent();
        Exporting {
            signal,
            agent,
            warned: Mutex::new(None),
        }
    }

    fn warn(&self, problem: &str) {
        let mut last = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
            *last = Some(Instant::now());
            tracing::warn!(
                signal = self.signal,
                problem,
                "telemetry: the collector did not take the data; it is dropped (warned once a minute)"
            );
        }
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Exporting {
    async fn send_bytes(
        &self,
        request: opentelemetry_http::Request<opentelemetry_http::Bytes>,
    ) -> Result<
        opentelemetry_http::Response<opentelemetry_http::Bytes>,
        opentelemetry_http::HttpError,
    > {
        // The SDK calls this from its own export thread: blocking is fine.
        let (parts, body) = request.into_parts();
        let mut req = self.agent.post(parts.uri.to_string());
        for (name, value) in &parts.headers {
            req = req.header(name, value);
        }
        match req.send(&body[..]) {
            Ok(mut response) => {
                let status = response.status();
                if !status.is_success() {
                    self.warn(status.as_str());
                }
                let bytes = response
                    .body_mut()
                    .with_config()
                    .limit(1 << 20)
                    .read_to_vec()
                    .unwrap_or_default();
                Ok(opentelemetry_http::Response::builder()
                    .status(status.as_u16())
                    .body(opentelemetry_http::Bytes::from(bytes))?)
            }
            Err(e) => {
                self.warn("unreachable");
                Err(Box::new(e))
            }
        }
    }
}
