//! `telemetry` (issue 46): the controller exports OpenTelemetry spans and
//! metrics over OTLP/HTTP to a loopback receiver (`lapis_e2e::webhook`'s
//! recording server), decoded here with the official protobuf definitions
//! (`opentelemetry-proto`): a turn's span with its preparation, agent,
//! permission children linked by parent id, a fence as a span event and
//! the resolution, metrics by outcome — and nothing of the prompt or any
//! token in any byte exported. A dead collector never holds a turn.

use std::collections::HashMap;

use lapis_e2e::TestContext;
use lapis_e2e::wait::{eventually, settle};
use lapis_e2e::webhook::WebhookServer;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Value, json};

use crate::cli_permissions::{fixture, submit_until_asked};
use crate::serve_support::{GUEST, NARROW, OWNER, READER, Server};

/// The prompt's secret: must never be exported.
const MARKER: &str = "PROMPT-SECRET-93c1d7";

/// A server with `telemetry` pointed at `endpoint`, exporting quickly.
pub(crate) fn serve_exporting(endpoint: &str, providers: Value) -> Server {
    let mut ctx = TestContext::new();
    ctx.set_env("OTEL_BSP_SCHEDULE_DELAY", "100");
    ctx.set_env("OTEL_METRIC_EXPORT_INTERVAL", "200");
    let mut server = Server::start_in(ctx, json!({}), providers);
    server.stop();
    server.edit_config(|doc| doc["telemetry"] = json!({ "endpoint": endpoint }));
    server.spawn();
    server
}

/// Every span exported so far.
pub(crate) fn spans(hook: &WebhookServer) -> Vec<Span> {
    hook.requests()
        .iter()
        .filter(|r| r.path == "/v1/traces")
        .flat_map(|r| {
            ExportTraceServiceRequest::decode(&r.body[..])
                .expect("an OTLP trace export")
                .resource_spans
        })
        .flat_map(|rs| rs.scope_spans)
        .flat_map(|ss| ss.spans)
        .collect()
}

/// A span's string and integer attributes.
pub(crate) fn attrs(span: &Span) -> HashMap<String, String> {
    kvs(&span.attributes)
}

/// Attributes (a span's, an event's, a data point's) as strings.
pub(crate) fn kvs(list: &[KeyValue]) -> HashMap<String, String> {
    list.iter()
        .filter_map(|kv| {
            let v = match kv.value.as_ref()?.value.as_ref()? {
                AnyValue::StringValue(s) => s.clone(),
                AnyValue::IntValue(i) => i.to_string(),
                AnyValue::BoolValue(b) => b.to_string(),
                AnyValue::DoubleValue(d) => d.to_string(),
                _ => return None,
            };
            Some((kv.key.clone(), v))
        })
        .collect()
}

pub(crate) fn named<'a>(all: &'a [Span], name: &str, turn: &str) -> Option<&'a Span> {
    all.iter()
        .find(|s| s.name == name && attrs(s).get("lapis.turn.id").map(String::as_str) == Some(turn))
}

#[test]
fn a_turns_spans_link_its_steps_and_carry_no_content() {
    let hook = WebhookServer::http(&[]);
    let server = serve_exporting(
        &hook.url(""),
        json!({
            "asker": fixture(&["--permissions", "1", "--perm-kinds", "allow_once,reject_once"]),
            "dies": fixture(&["--chunks", "1", "--exit-after-stream"]),
        }),
    );
    let mut client = server.client("editor");
    let (thread, turn, request) =
        submit_until_asked(&mut client, "asker", "t-1", &format!("please {MARKER}"));
    client
        .permissions_respond(&turn.id, &request.id, "opt-allow_once")
        .unwrap();
    assert_eq!(settle(&mut client, &turn.id).state.as_str(), "completed");
    // A second thread whose agent dies mid-turn: a fence, then resolved.
    let dies = client
        .threads_create("proj", "dies", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let fenced = client
        .turns_submit(&dies.id, "t-2", &format!("again {MARKER}"))
        .unwrap();
    assert_eq!(
        settle(&mut client, &fenced.id).state.as_str(),
        "submission_unknown"
    );
    server
        .ctx
        .run([
            "turns",
            "resolve",
            &fenced.id,
            "--as",
            "failed",
            "--confirm-stopped",
        ])
        .success();

    let all = eventually("the spans arrive", || {
        let all = spans(&hook);
        all.iter()
            .any(|s| s.name == "lapis.turn.resolve")
            .then_some(all)
    });
    let root = named(&all, "lapis.turn", &turn.id).expect("the turn's span");
    let a = attrs(root);
    assert_eq!(a["lapis.workspace.id"], "proj");
    assert_eq!(a["lapis.provider"], "asker");
    assert_eq!(a["lapis.application"], "editor");
    assert_eq!(a["lapis.thread.id"], thread.id);
    assert_eq!(a["lapis.turn.state"], "completed");
    assert!(
        a.contains_key("lapis.seq.claim") && a.contains_key("lapis.seq.end"),
        "{a:?}"
    );
    assert!(root.parent_span_id.is_empty(), "a turn is a root span");
    for child in [
        "lapis.turn.prepare",
        "lapis.turn.agent",
        "lapis.permission",
        "lapis.turn.teardown",
    ] {
        let c = named(&all, child, &turn.id).unwrap_or_else(|| panic!("{child} span"));
        assert_eq!(c.trace_id, root.trace_id, "{child}");
        assert_eq!(
            c.parent_span_id, root.span_id,
            "{child} is the turn's child"
        );
        assert!(
            c.start_time_unix_nano >= root.start_time_unix_nano,
            "{child}"
        );
        assert!(c.end_time_unix_nano <= root.end_time_unix_nano, "{child}");
    }
    let perm = attrs(named(&all, "lapis.permission", &turn.id).unwrap());
    assert_eq!(perm["lapis.permission.request_id"], request.id);
    assert!(perm.contains_key("lapis.seq.request") && perm.contains_key("lapis.seq.decision"));
    let died = named(&all, "lapis.turn", &fenced.id).expect("the fenced turn's span");
    assert_eq!(attrs(died)["lapis.turn.state"], "submission_unknown");
    assert!(
        died.events.iter().any(|e| e.name == "lapis.fenced"),
        "{:?}",
        died.events
    );
    let resolved = named(&all, "lapis.turn.resolve", &fenced.id).expect("the resolution");
    assert_eq!(attrs(resolved)["lapis.turn.state"], "failed");

    // Every export so far, read again until each metric has arrived: the
    // fence's counter may be recorded after the export that first carried
    // the turn counter.
    let wanted = [
        "lapis.turns",
        "lapis.turn.duration",
        "lapis.permission.wait",
        "lapis.fences",
    ];
    let metrics = eventually("every metric arrives", || {
        let names: Vec<String> = hook
            .requests()
            .iter()
            .filter(|r| r.path == "/v1/metrics")
            .flat_map(|r| {
                ExportMetricsServiceRequest::decode(&r.body[..])
                    .expect("an OTLP metrics export")
                    .resource_metrics
            })
            .flat_map(|rm| rm.scope_metrics)
            .flat_map(|sm| sm.metrics)
            .map(|m| m.name)
            .collect();
        wanted
            .iter()
            .all(|w| names.iter().any(|n| n == w))
            .then_some(names)
    });
    for name in wanted {
        assert!(metrics.iter().any(|n| n == name), "{name} in {metrics:?}");
    }
    // The scan: no byte of any export holds the prompt or a token.
    for r in hook.requests() {
        let text = String::from_utf8_lossy(&r.body).into_owned() + &r.text();
        assert!(
            !text.contains(MARKER),
            "the prompt was exported to {}",
            r.path
        );
        for token in [OWNER, GUEST, READER, NARROW] {
            assert!(!text.contains(token), "a token was exported to {}", r.path);
        }
    }
    let status = server.ctx.run(["status", "--json"]).success().json();
    assert_eq!(status["telemetry"]["traces"], hook.url("/v1/traces"));
    assert_eq!(status["telemetry"]["serviceName"], "lapis-ai-controller");
    // `doctor` says the same (whatever its other checks find here).
    let doctor = server.ctx.run(["doctor", "--json"]).json();
    let check = doctor["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "telemetry"))
        .cloned()
        .unwrap_or_else(|| panic!("a telemetry check in {doctor}"));
    assert_eq!(check["status"], "ok", "{check}");
    let summary = check["summary"].as_str().unwrap_or_default();
    for part in [
        hook.url("/v1/traces"),
        hook.url("/v1/metrics"),
        "lapis-ai-controller".into(),
    ] {
        assert!(summary.contains(&part), "{part} in {summary}");
    }
    server.finish(&[], &[]);
}

#[test]
fn a_dead_collector_never_holds_a_turn() {
    // Nothing listens on the port: every export fails.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let server = serve_exporting(&endpoint, json!({}));
    let mut client = server.client("editor");
    let thread = client
        .threads_create("proj", "echo", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let mut completed = 0;
    for i in 0..40 {
        let turn = client
            .turns_submit(&thread.id, &format!("c-{i}"), "hello")
            .unwrap();
        if settle(&mut client, &turn.id).state.as_str() == "completed" {
            completed += 1;
        }
    }
    assert_eq!(
        completed, 40,
        "every turn completed with the collector gone"
    );
    eventually("the export failure is reported", || {
        server
            .log_text()
            .contains("telemetry: the collector did not take the data")
            .then_some(())
    });
    // One warning a minute per signal (traces, metrics), not one per batch.
    let warnings = server
        .log_text()
        .matches("telemetry: the collector did not take the data")
        .count();
    assert!((1..=2).contains(&warnings), "{warnings} warnings");
    server.finish(&[], &[]);
}
