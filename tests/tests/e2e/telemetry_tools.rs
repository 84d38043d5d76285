//! `telemetry` (issue 46) of a turn that calls application tools through
//! the MCP bridge and reports usage: a `lapis.tool_call` span per call,
//! a child of the turn's span inside its bounds, its `requested` and
//! `finished` span events carrying the journal's `seq`s and the outcome;
//! the turn's usage and cost on its span and as `lapis.tokens` /
//! `lapis.cost` / `lapis.tool_calls` points — and no byte of the tool
//! arguments, the tool result, the prompt, a token or the bridge ticket
//! in any export.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lapis_e2e::wait::eventually;
use lapis_e2e::webhook::WebhookServer;
use lapis_protocol::client::{CallbackError, ToolHandler};
use lapis_protocol::tools::{ToolInvoke, ToolOutput};
use lapis_protocol::{Payload, TurnState};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value as Number;
use prost::Message as _;
use serde_json::json;

use crate::policy::{app, settle};
use crate::serve_support::{GUEST, NARROW, OWNER, READER};
use crate::telemetry::{attrs, kvs, named, serve_exporting, spans};
use crate::tools::{agent, create, crm, reply, tickets};

/// In the tool arguments, the tool result and the prompt: never exported.
const ARGS: &str = "TOOL-ARGS-SECRET-5e02aa";
const RESULT: &str = "TOOL-RESULT-SECRET-c7d410";
const PROMPT: &str = "PROMPT-SECRET-0b9f3e";

/// `crm`'s tools answer with [`RESULT`]; `broken` fails.
struct Marked;

impl ToolHandler for Marked {
    fn invoke(&mut self, call: &ToolInvoke) -> Result<ToolOutput, CallbackError> {
        if call.tool == "broken" {
            return Err(CallbackError(format!("crm is down {RESULT}")));
        }
        Ok(ToolOutput {
            text: format!("{} {RESULT}", call.tool),
            ..Default::default()
        })
    }
}

/// The latest exported value of every `name` point, by its attributes.
fn points(
    hook: &WebhookServer,
    name: &str,
) -> Vec<(std::collections::HashMap<String, String>, f64)> {
    let mut found = Vec::new();
    for r in hook.requests().iter().filter(|r| r.path == "/v1/metrics") {
        let req = ExportMetricsServiceRequest::decode(&r.body[..]).expect("an OTLP metrics export");
        let metrics = req
            .resource_metrics
            .into_iter()
            .flat_map(|rm| rm.scope_metrics)
            .flat_map(|sm| sm.metrics)
            .filter(|m| m.name == name);
        for m in metrics {
            let Some(Data::Sum(sum)) = m.data else {
                continue;
            };
            for p in sum.data_points {
                let v = match p.value {
                    Some(Number::AsInt(i)) => i as f64,
                    Some(Number::AsDouble(d)) => d,
                    None => continue,
                };
                let a = kvs(&p.attributes);
                found.retain(|(b, _)| *b != a);
                found.push((a, v));
            }
        }
    }
    found
}

#[test]
fn a_tool_calls_span_is_the_turns_child_with_journal_seqs_and_no_content() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("mcp");
    let mut tooled = agent(&ledger);
    tooled["args"]
        .as_array_mut()
        .unwrap()
        .push("--usage".into());
    let hook = WebhookServer::http(&[]);
    let server = serve_exporting(&hook.url(""), json!({ "tooled": tooled }));
    // The application serves `crm` on its own connection.
    let stop = Arc::new(AtomicBool::new(false));
    let mut serving = app(&server, OWNER, "editor");
    serving.tools_register(crm()).unwrap();
    let serving = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if serving
                    .serve_tools(&mut Marked, Some(Duration::from_millis(50)))
                    .is_err()
                {
                    break;
                }
            }
            serving
        })
    };
    let mut driver = app(&server, OWNER, "editor");
    let thread = create(&mut driver, false, &["crm"]).unwrap();
    let prompt = format!(
        "{PROMPT}\ncall crm__find {{\"q\":\"{ARGS}\"}}\ncall crm__broken {{\"why\":\"{ARGS}\"}}"
    );
    let turn = driver.turns_submit(&thread, "t-1", &prompt).unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(turn.state, TurnState::Completed, "{turn:?}");
    let text = reply(&mut driver, &thread);
    assert!(
        text.contains(&format!("tool crm__find: find {RESULT}")),
        "{text}"
    );
    assert!(text.contains("tool crm__broken error:"), "{text}");
    stop.store(true, Ordering::SeqCst);
    drop(serving.join().unwrap());

    // The journal: each call's request and finish, with their seqs.
    let page = driver.journal_replay(Some(&thread), 0, None).unwrap();
    let mut calls = Vec::new();
    for e in &page.events {
        match e.body() {
            Some(Payload::ToolCallRequested(r)) => calls.push((r, e.seq, None)),
            Some(Payload::ToolCallFinished(f)) => {
                let call = calls.iter_mut().find(|c| c.0.call_id == f.call_id);
                call.expect("finished after requested").2 = Some((f, e.seq));
            }
            _ => {}
        }
    }
    assert_eq!(calls.len(), 2, "{calls:?}");
    // The markers are real content: the journal holds the arguments.
    let args = json!(calls[0].0.arguments).to_string();
    assert!(args.contains(ARGS), "{args}");

    let all = eventually("the tool-call spans and the turn arrive", || {
        let all = spans(&hook);
        let tools = all.iter().filter(|s| s.name == "lapis.tool_call").count();
        (tools == 2 && named(&all, "lapis.turn", &turn.id).is_some()).then_some(all)
    });
    let root = named(&all, "lapis.turn", &turn.id).unwrap();
    for (requested, begin, finished) in &calls {
        let (finished, finish) = finished.as_ref().expect("each call finished");
        let span = all
            .iter()
            .find(|s| {
                s.name == "lapis.tool_call"
                    && attrs(s).get("lapis.tool_call.id") == Some(&requested.call_id)
            })
            .unwrap_or_else(|| panic!("a span for {}", requested.call_id));
        assert_eq!(span.trace_id, root.trace_id);
        assert_eq!(span.parent_span_id, root.span_id, "the turn's child");
        assert!(span.start_time_unix_nano >= root.start_time_unix_nano);
        assert!(span.end_time_unix_nano <= root.end_time_unix_nano);
        assert!(span.start_time_unix_nano <= span.end_time_unix_nano);
        let a = attrs(span);
        assert_eq!(a["lapis.turn.id"], turn.id);
        assert_eq!(a["lapis.tool_call.endpoint"], "crm");
        assert_eq!(a["lapis.tool_call.tool"], requested.tool);
        assert_eq!(
            a["lapis.tool_call.mutating"],
            requested.mutating.to_string()
        );
        assert_eq!(a["lapis.seq.begin"], begin.to_string());
        assert_eq!(a["lapis.seq.finish"], finish.to_string());
        let outcome = json!(finished.outcome);
        assert_eq!(a["lapis.tool_call.outcome"], outcome.as_str().unwrap());
        let event = |name: &str| {
            let e = span.events.iter().find(|e| e.name == name);
            kvs(&e.unwrap_or_else(|| panic!("{name} on {span:?}")).attributes)
        };
        assert_eq!(
            event("lapis.tool_call.requested")["lapis.seq"],
            begin.to_string()
        );
        let done = event("lapis.tool_call.finished");
        assert_eq!(done["lapis.seq"], finish.to_string());
        assert_eq!(
            done["lapis.tool_call.outcome"],
            a["lapis.tool_call.outcome"]
        );
        assert_eq!(
            done.get("lapis.tool_call.code").map(String::as_str),
            finished.code.as_ref().map(|c| c.as_str()),
        );
    }
    let outcomes: Vec<String> = calls
        .iter()
        .map(|c| {
            json!(c.2.as_ref().unwrap().0.outcome)
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(outcomes[0], "ok", "{outcomes:?}");
    assert_ne!(outcomes[1], "ok", "{outcomes:?}");

    // The fixture's usage (per turn: 100 in, 50 out, 10 thought, 20 cache
    // read, 180 total; context 1000/200000; 0.25 USD) on the turn's span.
    let a = attrs(root);
    for (key, want) in [
        ("lapis.usage.input_tokens", "100"),
        ("lapis.usage.output_tokens", "50"),
        ("lapis.usage.thought_tokens", "10"),
        ("lapis.usage.cached_read_tokens", "20"),
        ("lapis.usage.total_tokens", "180"),
        ("lapis.usage.context_used", "1000"),
        ("lapis.usage.context_size", "200000"),
        ("lapis.cost.amount", "0.25"),
        ("lapis.cost.currency", "USD"),
    ] {
        assert_eq!(a.get(key).map(String::as_str), Some(want), "{key} in {a:?}");
    }
    // And as metric points, by kind and by outcome.
    let tokens = eventually("the token counter arrives", || {
        let p = points(&hook, "lapis.tokens");
        (p.len() == 4).then_some(p)
    });
    for (kind, want) in [
        ("input", 100.0),
        ("output", 50.0),
        ("thought", 10.0),
        ("cached_read", 20.0),
    ] {
        let point = tokens.iter().find(|(a, _)| a["lapis.token.kind"] == kind);
        let (a, v) = point.unwrap_or_else(|| panic!("{kind} in {tokens:?}"));
        assert_eq!(a["lapis.provider"], "tooled");
        assert_eq!(*v, want, "{kind}");
    }
    let cost = eventually("the cost counter arrives", || {
        let p = points(&hook, "lapis.cost");
        (!p.is_empty()).then_some(p)
    });
    assert_eq!(cost.len(), 1, "{cost:?}");
    assert_eq!(cost[0].0["lapis.cost.currency"], "USD");
    assert_eq!(cost[0].1, 0.25);
    let tool_calls = eventually("the tool-call counter arrives", || {
        let p = points(&hook, "lapis.tool_calls");
        (p.iter().map(|(_, v)| v).sum::<f64>() == 2.0).then_some(p)
    });
    for outcome in &outcomes {
        assert!(
            tool_calls
                .iter()
                .any(|(a, _)| &a["lapis.tool_call.outcome"] == outcome),
            "{outcome} in {tool_calls:?}"
        );
    }

    // The scan: no byte of any export holds content, a token or the ticket.
    let tickets = tickets(&ledger);
    assert_eq!(tickets.len(), 1, "one agent session");
    for r in hook.requests() {
        let text = String::from_utf8_lossy(&r.body).into_owned() + &r.text();
        for secret in [
            ARGS,
            RESULT,
            PROMPT,
            OWNER,
            GUEST,
            READER,
            NARROW,
            &tickets[0],
        ] {
            assert!(
                !text.contains(secret),
                "{secret} was exported to {}",
                r.path
            );
        }
    }
    server.finish(&[], &tickets);
}
